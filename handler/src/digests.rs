//! The inner loops of the handler's two hash functions, as whoever runs it
//! provides them: SHA-256's compression of whole blocks, and BLAKE3's value
//! of one 64 KiB group.
//!
//! Wasm has neither the CPU's SHA extensions nor its 256-bit vectors, and
//! these two loops were most of an instance's CPU (a PUT of 1 MiB: 2.9 ms
//! of SHA-256 in Wasm against 0.7 ms with SHA-NI). So the gateway lends the
//! guest its own, as browsers lend WebCrypto and `wasi-crypto` proposes:
//! the guest still holds every byte in its linear memory, chooses what is
//! hashed, keeps every state, builds and checks every tree, and makes every
//! comparison; the host runs one compression over the bytes handed to it
//! and gives back the result. Each call takes at most [`MAX_BLOCKS`] or
//! [`GROUP`] bytes, so one call's time is bounded.
//!
//! [`Local`] is the same work done in this process, with the `sha2` and
//! `blake3` crates (which use those CPU features where they find them):
//! what the gateway's side of the import runs, and the native handler.

pub use blake3::hazmat::ChainingValue;
use blake3::hazmat::HasherExt as _;

/// Bytes in a group of BLAKE3's tree (`2^GROUP_LOG`): the unit of
/// verification ([`crate::tree`]), and what [`Digests::blake3_group`]
/// hashes.
pub const GROUP_LOG: u32 = 16;
pub const GROUP: u64 = 1 << GROUP_LOG;

/// Most bytes of blocks one [`Digests::sha256_blocks`] call takes.
pub const MAX_BLOCKS: usize = 1 << 20;

/// The two compressions. Callers split their input to the bounds above.
pub trait Digests {
    /// Compress `blocks` (whole 64-byte blocks, at most [`MAX_BLOCKS`]
    /// bytes) into SHA-256's `state`.
    fn sha256_blocks(state: &mut [u32; 8], blocks: &[u8]);
    /// The chaining value of group `index` of content of more than one
    /// group, whose bytes are `data`: [`GROUP`] bytes, fewer for the last.
    fn blake3_group(index: u64, data: &[u8]) -> ChainingValue;
    /// The BLAKE3 of content of one group (at most [`GROUP`] bytes).
    fn blake3_one_group(data: &[u8]) -> [u8; 32];
}

/// The compressions done here, by `sha2` and `blake3`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl Digests for Local {
    fn sha256_blocks(state: &mut [u32; 8], blocks: &[u8]) {
        let (blocks, rest) = blocks.as_chunks::<64>();
        debug_assert!(rest.is_empty(), "whole blocks only");
        sha2_compress::block_api::compress256(state, blocks);
    }

    fn blake3_group(index: u64, data: &[u8]) -> ChainingValue {
        let mut hasher = blake3::Hasher::new();
        hasher.set_input_offset(index * GROUP);
        hasher.update(data);
        hasher.finalize_non_root()
    }

    fn blake3_one_group(data: &[u8]) -> [u8; 32] {
        *blake3::hash(data).as_bytes()
    }
}

/// Why a [`Digests`] call's input is refused: a host checks what a guest
/// hands it with this before it hashes.
pub fn check_blocks(state_words: usize, blocks: usize) -> Result<(), String> {
    if state_words != 8 {
        return Err(format!("a SHA-256 state is 8 words, not {state_words}"));
    }
    if !blocks.is_multiple_of(64) || blocks > MAX_BLOCKS {
        return Err(format!(
            "SHA-256 takes whole 64-byte blocks, at most {MAX_BLOCKS} bytes a call, not {blocks}"
        ));
    }
    Ok(())
}

/// [`check_blocks`] for [`Digests::blake3_group`] and
/// [`Digests::blake3_one_group`].
pub fn check_group(index: u64, len: usize) -> Result<(), String> {
    if len as u64 > GROUP || index.checked_mul(GROUP).is_none() {
        return Err(format!(
            "a BLAKE3 group is at most {GROUP} bytes within 2^64, not {len} at group {index}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sha2_compress::{Digest as _, Sha256};

    use super::*;

    #[test]
    fn sha256_blocks_match_the_library() {
        let data: Vec<u8> = (0..64 * 5).map(|i| (i * 7) as u8).collect();
        let mut state = crate::hashes::SHA256_IV;
        Local::sha256_blocks(&mut state, &data);
        // The library's padding block for 320 bytes, compressed after them.
        let mut tail = [0u8; 64];
        tail[0] = 0x80;
        tail[56..].copy_from_slice(&(320u64 * 8).to_be_bytes());
        Local::sha256_blocks(&mut state, &tail);
        let digest: Vec<u8> = state.iter().flat_map(|w| w.to_be_bytes()).collect();
        assert_eq!(digest.as_slice(), Sha256::digest(&data).as_slice());
    }

    #[test]
    fn inputs_past_the_bounds_are_refused() {
        assert!(check_blocks(8, 64 * 3).is_ok());
        assert!(check_blocks(8, MAX_BLOCKS).is_ok());
        assert!(check_blocks(7, 64).is_err());
        assert!(check_blocks(8, 65).is_err());
        assert!(check_blocks(8, MAX_BLOCKS + 64).is_err());
        assert!(check_group(3, GROUP as usize).is_ok());
        assert!(check_group(3, GROUP as usize + 1).is_err());
        assert!(check_group(u64::MAX, 1).is_err());
    }
}
