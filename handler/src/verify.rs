//! The checks behind a verified read, as plain functions: a batch's groups
//! against the leaves proved for them ([`first_unlike`]), content without a
//! tree against its recorded digest ([`verify_whole`]), and which pieces of
//! the outboard a proof reads ([`coalesce`]). The hashing itself is `D`'s
//! ([`Digests`]).

use crate::digests::Digests;
use crate::tree::{self, GROUP};
use crate::types::{FileMeta, HandlerError};
use crate::{hashes, hex, to_index};

/// The first group of `span` (whose bytes end at `stop`, and are `chunks`
/// one after another, cut wherever the host cut them) whose bytes do not
/// hash to its leaf; `None` when all do.
pub(crate) fn first_unlike<D: Digests>(
    span: std::ops::Range<u64>,
    stop: u64,
    chunks: &[Vec<u8>],
    leaves: &[[u8; 32]],
) -> Option<u64> {
    let mut pieces = chunks.iter().map(Vec::as_slice);
    let mut current: &[u8] = &[];
    // A group cut between chunks, put together.
    let mut joined = Vec::new();
    for (group, leaf) in span.zip(leaves) {
        let need = to_index((GROUP * (group + 1)).min(stop) - GROUP * group);
        if current.is_empty() {
            current = next_nonempty(&mut pieces).unwrap_or_default();
        }
        let value = if current.len() >= need {
            let (bytes, rest) = current.split_at(need);
            current = rest;
            D::blake3_group(group, bytes)
        } else {
            // Cut between chunks.
            joined.clear();
            while joined.len() < need {
                if current.is_empty() {
                    // Fewer bytes than the groups span: not theirs.
                    let Some(piece) = next_nonempty(&mut pieces) else {
                        return Some(group);
                    };
                    current = piece;
                }
                let take = (need - joined.len()).min(current.len());
                joined.extend_from_slice(&current[..take]);
                current = &current[take..];
            }
            D::blake3_group(group, &joined)
        };
        if value != *leaf {
            return Some(group);
        }
    }
    None
}

fn next_nonempty<'a>(pieces: &mut impl Iterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    pieces.find(|piece| !piece.is_empty())
}

/// `(offset, length)` pieces covering every 32-byte value at `offsets`,
/// neighbours (within 1 KiB) read as one.
pub(crate) fn coalesce(offsets: &[u64]) -> Vec<(u64, u32)> {
    const GAP: u64 = 1 << 10;
    let mut sorted = offsets.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut pieces: Vec<(u64, u64)> = Vec::new();
    for offset in sorted {
        match pieces.last_mut() {
            Some((_, end)) if offset <= *end + GAP => *end = (offset + 32).max(*end),
            _ => pieces.push((offset, offset + 32)),
        }
    }
    pieces
        .into_iter()
        .map(|(start, end)| (start, u32::try_from(end - start).unwrap_or(u32::MAX)))
        .collect()
}

pub(crate) fn verify_whole<D: Digests>(
    meta: &FileMeta,
    content: &[u8],
) -> Result<(), HandlerError> {
    if content.len() as u64 != meta.size {
        return Err(HandlerError::Integrity(format!(
            "{}: stored content is {} bytes, the index says {}",
            meta.path,
            content.len(),
            meta.size
        )));
    }
    let (actual, recorded) = match &meta.blake3 {
        Some(recorded) => (tree::root_of::<D>(content).to_hex().to_string(), recorded),
        None => (hex(&hashes::sha256::<D>(content)), &meta.sha256),
    };
    if actual != *recorded {
        return Err(hashes_unlike(meta, &actual, recorded));
    }
    Ok(())
}

/// The error for stored content that hashes to `actual` where the index
/// records `recorded`.
pub(crate) fn hashes_unlike(meta: &FileMeta, actual: &str, recorded: &str) -> HandlerError {
    HandlerError::Integrity(format!(
        "{}: stored content hashes to {actual}, the index says {recorded}",
        meta.path
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digests::Local;

    fn meta(content: &[u8], blake3: Option<String>) -> FileMeta {
        FileMeta {
            path: "f".into(),
            size: content.len() as u64,
            sha256: hex(&hashes::sha256::<Local>(content)),
            blake3,
            content_type: "text/plain".into(),
            created_ms: 0,
            modified_ms: 0,
            version_id: "null".into(),
        }
    }

    #[test]
    fn whole_content_is_verified_by_blake3_else_sha256() {
        let content = b"stored bytes";
        let recorded = Some(blake3::hash(content).to_hex().to_string());
        assert!(verify_whole::<Local>(&meta(content, recorded.clone()), content).is_ok());
        assert!(verify_whole::<Local>(&meta(content, None), content).is_ok());
        let corrupt = b"stored bytez";
        assert!(verify_whole::<Local>(&meta(content, recorded), corrupt).is_err());
        assert!(verify_whole::<Local>(&meta(content, None), corrupt).is_err());
        let wrong = Some(blake3::hash(b"other").to_hex().to_string());
        assert!(verify_whole::<Local>(&meta(content, wrong), content).is_err());
    }

    #[test]
    fn groups_are_checked_across_wherever_the_chunks_were_cut() {
        let content: Vec<u8> = (0..3 * GROUP + 100).map(|i| (i % 251) as u8).collect();
        let stop = content.len() as u64;
        let leaves: Vec<[u8; 32]> = content
            .chunks(to_index(GROUP))
            .enumerate()
            .map(|(index, group)| Local::blake3_group(index as u64, group))
            .collect();
        let cut = |at: &[usize]| {
            let mut chunks = Vec::new();
            let mut from = 0;
            for &to in at.iter().chain([content.len()].iter()) {
                chunks.push(content[from..to].to_vec());
                from = to;
            }
            chunks
        };
        for cuts in [
            vec![],
            vec![1],
            vec![65536, 131072],
            vec![70000, 70001, 190000],
        ] {
            assert_eq!(
                first_unlike::<Local>(0..4, stop, &cut(&cuts), &leaves),
                None
            );
        }
        let mut damaged = cut(&[70000]);
        damaged[1][100] ^= 1;
        assert_eq!(
            first_unlike::<Local>(0..4, stop, &damaged, &leaves),
            Some(1)
        );
        let short = vec![content[..(2 * GROUP) as usize].to_vec()];
        assert_eq!(first_unlike::<Local>(0..4, stop, &short, &leaves), Some(2));
        // A batch from group 2 on.
        let tail = vec![content[(2 * GROUP) as usize..].to_vec()];
        assert_eq!(first_unlike::<Local>(2..4, stop, &tail, &leaves[2..]), None);
    }

    #[test]
    fn neighbouring_values_are_read_as_one_piece() {
        assert_eq!(coalesce(&[8, 40, 72]), vec![(8, 96)]);
        assert_eq!(coalesce(&[72, 8]), vec![(8, 96)]);
        assert_eq!(coalesce(&[8, 8 + 32 + 5000]), vec![(8, 32), (5040, 32)]);
        assert_eq!(coalesce(&[8, 8 + 32 + 500]), vec![(8, 564)]);
    }
}
