//! An upload's two digests (SHA-256, its address; BLAKE3's tree, what its
//! reads are verified against) computed as it streams, with a state that
//! can be handed out at a group boundary and taken up by another request,
//! in another instance, later: so a resumable upload hashes each byte once,
//! as it arrives, over any number of requests.
//!
//! The state is taken where a group of [`GROUP`] bytes has just closed and
//! more content follows it (every group closed so far is then a leaf or a
//! node of the tree that is final): the SHA-256 compression state there
//! (a group is a whole number of SHA-256 blocks), and the tree's stack of
//! subtree values. Bytes past that boundary that a request received are
//! kept by the host and fed again by the next request.

use std::marker::PhantomData;

use blake3::hazmat::ChainingValue;

use crate::digests::{Digests, MAX_BLOCKS};
use crate::tree::{GROUP, NODE, TreeWriter};

/// The hashes after the first `groups` groups of an upload, more content
/// following them. `groups == 0` is the start.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HashState {
    pub groups: u64,
    /// SHA-256's compression state after those bytes.
    pub sha256: [u32; 8],
    /// The tree's stack of subtree values ([`TreeWriter`]).
    pub stack: Vec<ChainingValue>,
}

impl HashState {
    /// The bytes of content this state has hashed.
    pub fn offset(&self) -> u64 {
        self.groups * GROUP
    }

    /// The bytes of outboard written once this state is reached.
    pub fn outboard_len(&self) -> u64 {
        outboard_after(self.groups)
    }

    /// The state as text, for the host's records: `groups:sha256:stack`,
    /// in hex.
    pub fn encode(&self) -> String {
        if self.groups == 0 {
            return String::new();
        }
        let words: Vec<u8> = self.sha256.iter().flat_map(|w| w.to_be_bytes()).collect();
        let stack: Vec<u8> = self.stack.iter().flatten().copied().collect();
        format!(
            "{}:{}:{}",
            self.groups,
            crate::hex(&words),
            crate::hex(&stack)
        )
    }

    /// A state [`HashState::encode`] wrote; `None` if `text` is not one.
    /// Empty text is the start.
    pub fn decode(text: &str) -> Option<Self> {
        if text.is_empty() {
            return Some(Self::default());
        }
        let mut fields = text.split(':');
        let groups: u64 = fields.next()?.parse().ok()?;
        let words = unhex(fields.next()?)?;
        let stack = unhex(fields.next()?)?;
        if fields.next().is_some()
            || words.len() != 32
            || !stack.len().is_multiple_of(NODE as usize)
        {
            return None;
        }
        let mut sha256 = [0; 8];
        for (word, bytes) in sha256.iter_mut().zip(words.chunks_exact(4)) {
            *word = u32::from_be_bytes(bytes.try_into().ok()?);
        }
        let stack: Vec<ChainingValue> = stack
            .chunks_exact(NODE as usize)
            .map(|value| value.try_into().ok())
            .collect::<Option<_>>()?;
        // The stack holds one value per one bit of `groups`.
        (groups > 0 && stack.len() == groups.count_ones() as usize).then_some(Self {
            groups,
            sha256,
            stack,
        })
    }
}

/// Bytes of outboard written when `groups` groups have closed with content
/// after them: the header, each leaf, and every merge they completed.
pub fn outboard_after(groups: u64) -> u64 {
    if groups == 0 {
        return 0;
    }
    crate::tree::HEADER.len() as u64 + NODE * (2 * groups - u64::from(groups.count_ones()))
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// Both hashes of a stream, resumable at group boundaries, their inner
/// loops run by `D`.
#[derive(Debug)]
pub struct Hashes<D> {
    sha256: Sha256Stream<D>,
    tree: TreeWriter<D>,
    /// The state at the last group boundary passed.
    checkpoint: HashState,
}

impl<D: Digests> Default for Hashes<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Digests> Hashes<D> {
    pub fn new() -> Self {
        Self::resume(&HashState::default())
    }

    /// Take up hashing where `state` left it: the next byte is byte
    /// [`HashState::offset`] of the content.
    pub fn resume(state: &HashState) -> Self {
        let sha256 = if state.groups == 0 {
            Sha256Stream::new()
        } else {
            Sha256Stream {
                state: state.sha256,
                blocks: state.offset() / 64,
                pending: [0; 64],
                filled: 0,
                digests: PhantomData,
            }
        };
        Self {
            sha256,
            tree: TreeWriter::resume(state.groups, state.stack.clone()),
            checkpoint: state.clone(),
        }
    }

    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let closes = self.tree.group_full();
            let room = if closes {
                GROUP
            } else {
                GROUP - self.tree.in_group()
            };
            let take = usize::try_from(room).unwrap_or(usize::MAX).min(bytes.len());
            let (now, rest) = bytes.split_at(take);
            let sha256 = self.sha256.state;
            self.tree.update(now);
            if closes {
                // The group before `now` closed, and content follows it:
                // a state another request can take up.
                self.checkpoint = HashState {
                    groups: self.tree.groups_closed(),
                    sha256,
                    stack: self.tree.stack().to_vec(),
                };
            }
            self.sha256.update(now);
            bytes = rest;
        }
    }

    /// The state at the last group boundary passed; every outboard byte
    /// written so far belongs to it.
    pub fn checkpoint(&self) -> &HashState {
        &self.checkpoint
    }

    /// Outboard bytes written since the last call.
    pub fn take_outboard(&mut self) -> Vec<u8> {
        self.tree.take_outboard()
    }

    pub fn pending_outboard(&self) -> usize {
        self.tree.pending_outboard()
    }

    /// The content's SHA-256, its BLAKE3 and the last of its outboard.
    pub fn finish(self) -> ([u8; 32], blake3::Hash, Vec<u8>) {
        let (blake3, outboard) = self.tree.finish();
        (self.sha256.finish(), blake3, outboard)
    }
}

/// The SHA-256 of `bytes`.
pub fn sha256<D: Digests>(bytes: &[u8]) -> [u8; 32] {
    let mut stream = Sha256Stream::<D>::new();
    stream.update(bytes);
    stream.finish()
}

/// SHA-256 over its compression function ([`Digests::sha256_blocks`]), so
/// that its state between blocks can be handed out and taken up again
/// (`sha2`'s hasher keeps it private).
#[derive(Debug, Clone)]
struct Sha256Stream<D> {
    state: [u32; 8],
    /// Whole blocks compressed into `state`.
    blocks: u64,
    pending: [u8; 64],
    filled: usize,
    digests: PhantomData<D>,
}

/// SHA-256's initial state.
pub(crate) const SHA256_IV: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

impl<D: Digests> Sha256Stream<D> {
    fn new() -> Self {
        Self {
            state: SHA256_IV,
            blocks: 0,
            pending: [0; 64],
            filled: 0,
            digests: PhantomData,
        }
    }

    fn update(&mut self, mut bytes: &[u8]) {
        if self.filled > 0 {
            let take = (64 - self.filled).min(bytes.len());
            self.pending[self.filled..self.filled + take].copy_from_slice(&bytes[..take]);
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled < 64 {
                return;
            }
            let block = self.pending;
            self.compress(&block);
            self.filled = 0;
        }
        let whole = bytes.len() - bytes.len() % 64;
        let (blocks, rest) = bytes.split_at(whole);
        for blocks in blocks.chunks(MAX_BLOCKS) {
            self.compress(blocks);
        }
        self.pending[..rest.len()].copy_from_slice(rest);
        self.filled = rest.len();
    }

    /// Compress whole blocks, at most [`MAX_BLOCKS`] bytes of them.
    fn compress(&mut self, blocks: &[u8]) {
        D::sha256_blocks(&mut self.state, blocks);
        self.blocks += (blocks.len() / 64) as u64;
    }

    fn finish(mut self) -> [u8; 32] {
        let bits = (self.blocks * 64 + self.filled as u64) * 8;
        let mut tail = [0u8; 128];
        tail[..self.filled].copy_from_slice(&self.pending[..self.filled]);
        tail[self.filled] = 0x80;
        let len = if self.filled < 56 { 64 } else { 128 };
        tail[len - 8..len].copy_from_slice(&bits.to_be_bytes());
        self.compress(&tail[..len]);
        let mut digest = [0; 32];
        for (out, word) in digest.chunks_exact_mut(4).zip(self.state) {
            out.copy_from_slice(&word.to_be_bytes());
        }
        digest
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use sha2_compress::{Digest as _, Sha256};

    use super::*;
    use crate::digests::Local;

    fn content(size: usize) -> Vec<u8> {
        (0..size).map(|i| (i * 131 + i / 4099) as u8).collect()
    }

    /// What one uninterrupted pass gives: SHA-256, BLAKE3, the outboard.
    fn whole(data: &[u8]) -> ([u8; 32], blake3::Hash, Vec<u8>) {
        let mut hashes = Hashes::<Local>::new();
        let mut outboard = Vec::new();
        for piece in data.chunks(7919) {
            hashes.update(piece);
            outboard.extend(hashes.take_outboard());
        }
        let (sha256, blake3, rest) = hashes.finish();
        outboard.extend(rest);
        (sha256, blake3, outboard)
    }

    #[test]
    fn sha256_matches_the_library_at_every_length_around_a_block() {
        for size in [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 65536 + 3] {
            let data = content(size);
            let mut stream = Sha256Stream::<Local>::new();
            for piece in data.chunks(37) {
                stream.update(piece);
            }
            assert_eq!(stream.finish().as_slice(), Sha256::digest(&data).as_slice());
        }
    }

    #[test]
    fn both_digests_match_the_libraries() {
        let g = GROUP as usize;
        for size in [0, 1, g - 1, g, g + 1, 4 * g, 5 * g + 77] {
            let data = content(size);
            let (sha256, blake3, _) = whole(&data);
            assert_eq!(
                sha256.as_slice(),
                Sha256::digest(&data).as_slice(),
                "{size}"
            );
            assert_eq!(blake3, blake3::hash(&data), "{size}");
        }
    }

    #[test]
    fn a_stream_taken_up_at_any_checkpoint_gives_the_same_digests_and_outboard() {
        let g = GROUP as usize;
        for size in [2 * g, 2 * g + 1, 4 * g, 7 * g + 5, 16 * g, 17 * g + 1] {
            let data = content(size);
            let expected = whole(&data);
            // Cut after every few KiB: take the state, write down the
            // outboard it owns, and start again from its offset.
            for cut in (1..size).step_by(g / 3 + 1) {
                let mut first = Hashes::<Local>::new();
                let mut outboard = Vec::new();
                first.update(&data[..cut]);
                outboard.extend(first.take_outboard());
                let state = HashState::decode(&first.checkpoint().encode()).unwrap();
                assert_eq!(outboard.len() as u64, state.outboard_len(), "{size} {cut}");
                let mut second = Hashes::<Local>::resume(&state);
                second.update(&data[usize::try_from(state.offset()).unwrap()..]);
                outboard.extend(second.take_outboard());
                let (sha256, blake3, rest) = second.finish();
                outboard.extend(rest);
                assert_eq!((sha256, blake3, outboard.clone()), expected, "{size} {cut}");
            }
        }
    }

    #[test]
    fn bad_encodings_are_refused() {
        for text in ["x", "1:00:", "1:zz:00", "0::", "2:00000000:"] {
            assert_eq!(HashState::decode(text), None, "{text}");
        }
        assert_eq!(HashState::decode(""), Some(HashState::default()));
    }
}
