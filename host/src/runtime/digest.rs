//! The `digest` import: the hashes' inner loops, lent to the guest.
//!
//! Wasm has neither SHA instructions nor 256-bit vectors; this process has
//! both (`sha2` and `blake3` find them at run time). The guest hands over
//! bytes of its memory and keeps every state, tree and comparison; these
//! functions check the bounds the WIT states (so one call's time is
//! bounded) and run [`Local`] on the bytes. A call past a bound traps: only
//! a broken guest makes one.

use storage_handler::digests::{Digests as _, Local, check_blocks, check_group};

use super::bindings::wasm_storage::storage::digest::Host;
use super::host::HostState;

impl Host for HostState {
    fn sha256_blocks(&mut self, state: Vec<u32>, blocks: Vec<u8>) -> wasmtime::Result<Vec<u32>> {
        check_blocks(state.len(), blocks.len()).map_err(wasmtime::Error::msg)?;
        let mut words = [0; 8];
        words.copy_from_slice(&state);
        Local::sha256_blocks(&mut words, &blocks);
        Ok(words.to_vec())
    }

    fn blake3_group(&mut self, index: u64, data: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        check_group(index, data.len()).map_err(wasmtime::Error::msg)?;
        Ok(Local::blake3_group(index, &data).to_vec())
    }

    fn blake3_one_group(&mut self, data: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        check_group(0, data.len()).map_err(wasmtime::Error::msg)?;
        Ok(Local::blake3_one_group(&data).to_vec())
    }
}
