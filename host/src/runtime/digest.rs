//! The `digest` import: the hashes' inner loops, lent to the guest.
//!
//! Wasm has neither SHA instructions nor 256-bit vectors; this process has
//! both (`sha2` and `blake3` find them at run time). The guest hands over
//! bytes of its memory and keeps every state, tree and comparison; these
//! functions check the bounds the WIT states (so one call's time is
//! bounded) and run [`Local`] on the bytes where they lie in the guest's
//! memory ([`WasmList::as_le_slice`]: no copy of them is made, where the
//! generated bindings would lift each into a `Vec` first). A call past a
//! bound traps: only a broken guest makes one.

use storage_handler::digests::{Digests as _, Local, check_blocks, check_group};
use wasmtime::component::{Linker, WasmList};
use wasmtime::{AsContext as _, StoreContextMut};

use super::host::HostState;

/// The interface's name in the `storage` world, with the WIT package's
/// version (`wit/storage.wit`): a mismatch fails every instance's linking
/// at start, so no test passes with it.
const INTERFACE: &str = "wasm-storage:storage/digest@0.1.0";

/// Define the `digest` import's three functions in `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    let mut digest = linker.instance(INTERFACE)?;
    digest.func_wrap(
        "sha256-blocks",
        |store: StoreContextMut<'_, HostState>, (state, blocks): (Vec<u32>, WasmList<u8>)| {
            check_blocks(state.len(), blocks.len()).map_err(wasmtime::Error::msg)?;
            let mut words = [0; 8];
            words.copy_from_slice(&state);
            Local::sha256_blocks(&mut words, blocks.as_le_slice(store.as_context()));
            Ok((words.to_vec(),))
        },
    )?;
    digest.func_wrap(
        "blake3-group",
        |store: StoreContextMut<'_, HostState>, (index, data): (u64, WasmList<u8>)| {
            check_group(index, data.len()).map_err(wasmtime::Error::msg)?;
            let value = Local::blake3_group(index, data.as_le_slice(store.as_context()));
            Ok((value.to_vec(),))
        },
    )?;
    digest.func_wrap(
        "blake3-one-group",
        |store: StoreContextMut<'_, HostState>, (data,): (WasmList<u8>,)| {
            check_group(0, data.len()).map_err(wasmtime::Error::msg)?;
            let hash = Local::blake3_one_group(data.as_le_slice(store.as_context()));
            Ok((hash.to_vec(),))
        },
    )?;
    Ok(())
}
