//! What a `CompleteMultipartUpload` must satisfy, and what it makes, as S3
//! defines them: the parts listed in ascending order, each one stored with
//! the ETag (and any checksum) the list names, every part but the last at
//! least 5 MiB; the object's ETag, the MD5 of its parts' MD5s and `-N`; a
//! composite checksum, the checksum of its parts' checksums and `-N`,
//! which one the client sends must match. No I/O here: each rule is a
//! function of the list and the stored parts.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use md5::Digest as _;
use s3s::dto::{CompletedPart, ETag};
use s3s::{S3Result, s3_error};
use volume::uploads::MultipartPart;

use crate::checksum::{Algorithm, StoredChecksum};

use super::{Pending, part_checksum};

/// Every part but the last is at least this large (S3's rule).
pub(super) const MIN_PART_SIZE: u64 = 5 << 20;

/// A completion names at least one part.
pub(super) fn check_named(asked: &[CompletedPart]) -> S3Result<()> {
    if asked.is_empty() {
        return Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema: it names no part."
        ));
    }
    Ok(())
}

/// The parts `asked` names, from those `stored` (by number), as the object
/// is made of them: the list in ascending order first (S3 checks the
/// whole list before any part), then each part in turn.
pub(super) fn choose(
    asked: &[CompletedPart],
    stored: &[MultipartPart],
) -> S3Result<Vec<MultipartPart>> {
    check_order(asked)?;
    let mut chosen = Vec::with_capacity(asked.len());
    for (index, part) in asked.iter().enumerate() {
        let found = find_part(part, stored)?;
        check_size(found, index + 1 == asked.len())?;
        check_part_checksums(part, found)?;
        chosen.push(found.clone());
    }
    Ok(chosen)
}

/// Part numbers strictly ascending (`InvalidPartOrder`).
fn check_order(asked: &[CompletedPart]) -> S3Result<()> {
    if asked
        .windows(2)
        .any(|pair| pair[0].part_number.unwrap_or(0) >= pair[1].part_number.unwrap_or(0))
    {
        return Err(s3_error!(
            InvalidPartOrder,
            "The list of parts was not in ascending order. The parts list must be specified in order by part number."
        ));
    }
    Ok(())
}

/// The stored part `part` names, if its ETag is that part's (`InvalidPart`).
fn find_part<'a>(part: &CompletedPart, stored: &'a [MultipartPart]) -> S3Result<&'a MultipartPart> {
    let number = part.part_number.unwrap_or(0);
    u32::try_from(number)
        .ok()
        .and_then(|number| {
            stored
                .binary_search_by_key(&number, |stored| stored.number)
                .ok()
        })
        .map(|at| &stored[at])
        .filter(|stored| {
            part.e_tag.as_ref().is_some_and(|etag| match etag {
                ETag::Strong(value) | ETag::Weak(value) => value.trim_matches('"') == stored.etag,
            })
        })
        .ok_or_else(|| {
            s3_error!(
                InvalidPart,
                "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag."
            )
        })
}

/// Every part but the `last` at least [`MIN_PART_SIZE`] (`EntityTooSmall`).
fn check_size(part: &MultipartPart, last: bool) -> S3Result<()> {
    if !last && part.size < MIN_PART_SIZE {
        return Err(s3_error!(
            EntityTooSmall,
            "Your proposed upload is smaller than the minimum allowed object size."
        ));
    }
    Ok(())
}

/// A part's checksum named in the list is the one it came with
/// (`InvalidPart`).
fn check_part_checksums(part: &CompletedPart, found: &MultipartPart) -> S3Result<()> {
    let named = [
        (Algorithm::Crc32, part.checksum_crc32.as_ref()),
        (Algorithm::Crc32c, part.checksum_crc32c.as_ref()),
        (Algorithm::Crc64Nvme, part.checksum_crc64nvme.as_ref()),
        (Algorithm::Sha1, part.checksum_sha1.as_ref()),
        (Algorithm::Sha256, part.checksum_sha256.as_ref()),
    ];
    let kept = part_checksum(found);
    for (algorithm, value) in named {
        if let Some(value) = value
            && kept.is_none_or(|(used, kept)| used != algorithm || kept != value.as_str())
        {
            return Err(s3_error!(
                InvalidPart,
                "One or more of the specified parts could not be found: a part's checksum does not match the one it was uploaded with."
            ));
        }
    }
    Ok(())
}

/// The object's ETag: the MD5 of its parts' MD5s, and `-N`.
pub(super) fn composite_etag(chosen: &[MultipartPart]) -> String {
    let mut md5s = md5::Md5::new();
    for part in chosen {
        md5s.update(hex::decode(&part.etag).unwrap_or_default());
    }
    format!("{}-{}", hex::encode(md5s.finalize()), chosen.len())
}

/// The composite checksum `pending` asked for: the checksum of the parts'
/// checksums, and `-N`; none if one of them lacks it (or has another).
pub(super) fn composite_checksum(
    pending: &Pending,
    chosen: &[MultipartPart],
) -> Option<StoredChecksum> {
    let algorithm = pending.checksum.filter(|_| !pending.full_object)?;
    let mut raw = Vec::new();
    for part in chosen {
        let (used, value) = part_checksum(part)?;
        if used != algorithm {
            return None;
        }
        raw.extend(STANDARD.decode(value).ok()?);
    }
    Some(StoredChecksum {
        algorithm,
        value: format!("{}-{}", algorithm.of(&raw), chosen.len()),
        composite: true,
    })
}

/// A composite checksum the client computed itself (`sent`, by algorithm)
/// agrees with the one made (`BadDigest`); the `-N` is not compared.
pub(super) fn check_sent_composite(
    composite: &StoredChecksum,
    sent: [(Algorithm, Option<&String>); 5],
) -> S3Result<()> {
    let sent = sent
        .into_iter()
        .find(|(algorithm, _)| *algorithm == composite.algorithm)
        .and_then(|(_, value)| value);
    let bare = |value: &str| value.split('-').next().unwrap_or_default().to_owned();
    if let Some(sent) = sent
        && bare(sent) != bare(&composite.value)
    {
        return Err(s3_error!(
            BadDigest,
            "The checksum of the parts' checksums you specified did not match the calculated one."
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use s3s::S3ErrorCode;

    use super::*;

    const MIB: u64 = 1 << 20;

    /// A stored part: its ETag is the hex MD5 of its number (any 16 bytes).
    fn stored(number: u32, size: u64, checksum: &str) -> MultipartPart {
        MultipartPart {
            number,
            size,
            etag: hex::encode(md5::Md5::digest(number.to_string())),
            checksum: checksum.to_owned(),
            name: format!("part-{number}"),
            created_ms: 0,
        }
    }

    /// The list's entry for `part`, naming its ETag (quoted, as clients do).
    fn named(part: &MultipartPart) -> CompletedPart {
        CompletedPart {
            part_number: i32::try_from(part.number).ok(),
            e_tag: Some(ETag::Strong(format!("\"{}\"", part.etag))),
            ..CompletedPart::default()
        }
    }

    fn code<T>(result: S3Result<T>) -> Option<S3ErrorCode> {
        result.err().map(|error| error.code().clone())
    }

    #[test]
    fn a_completion_names_a_part() {
        assert_eq!(code(check_named(&[])), Some(S3ErrorCode::MalformedXML));
        assert_eq!(code(check_named(&[named(&stored(1, 1, ""))])), None);
    }

    #[test]
    fn parts_in_ascending_order_are_chosen_in_that_order() {
        let parts = [
            stored(1, 5 * MIB, ""),
            stored(2, 5 * MIB, ""),
            stored(3, 1, ""),
        ];
        // Part 2 left out: a completion may skip parts.
        let asked = [named(&parts[0]), named(&parts[2])];
        let chosen = choose(&asked, &parts).unwrap_or_default();
        let numbers: Vec<u32> = chosen.iter().map(|part| part.number).collect();
        assert_eq!(numbers, [1, 3]);
    }

    #[test]
    fn parts_out_of_order_or_repeated_are_refused() {
        let parts = [stored(1, 5 * MIB, ""), stored(2, 5 * MIB, "")];
        let backwards = [named(&parts[1]), named(&parts[0])];
        assert_eq!(
            code(choose(&backwards, &parts)),
            Some(S3ErrorCode::InvalidPartOrder)
        );
        let twice = [named(&parts[0]), named(&parts[0])];
        assert_eq!(
            code(choose(&twice, &parts)),
            Some(S3ErrorCode::InvalidPartOrder)
        );
    }

    #[test]
    fn a_missing_part_or_another_etag_is_an_invalid_part() {
        let parts = [stored(1, 5 * MIB, ""), stored(2, 1, "")];
        let mut missing = named(&parts[1]);
        missing.part_number = Some(3);
        assert_eq!(
            code(choose(&[named(&parts[0]), missing], &parts)),
            Some(S3ErrorCode::InvalidPart)
        );
        let mut other = named(&parts[1]);
        other.e_tag = Some(ETag::Strong(parts[0].etag.clone()));
        assert_eq!(
            code(choose(&[named(&parts[0]), other], &parts)),
            Some(S3ErrorCode::InvalidPart)
        );
        let mut untagged = named(&parts[1]);
        untagged.e_tag = None;
        assert_eq!(
            code(choose(&[untagged], &parts)),
            Some(S3ErrorCode::InvalidPart)
        );
    }

    #[test]
    fn only_the_last_part_may_be_under_five_mib() {
        let parts = [stored(1, 5 * MIB - 1, ""), stored(2, 1, "")];
        assert_eq!(
            code(choose(&[named(&parts[0]), named(&parts[1])], &parts)),
            Some(S3ErrorCode::EntityTooSmall)
        );
        // Alone, the small part is the last.
        assert_eq!(code(choose(&[named(&parts[0])], &parts)), None);
    }

    #[test]
    fn a_named_part_checksum_must_be_the_one_it_came_with() {
        let part = stored(1, 1, "CRC32:DUoRhQ==");
        let mut same = named(&part);
        same.checksum_crc32 = Some("DUoRhQ==".to_owned());
        assert_eq!(code(choose(&[same], std::slice::from_ref(&part))), None);
        let mut other_value = named(&part);
        other_value.checksum_crc32 = Some("AAAAAA==".to_owned());
        assert_eq!(
            code(choose(&[other_value], std::slice::from_ref(&part))),
            Some(S3ErrorCode::InvalidPart)
        );
        let mut other_algorithm = named(&part);
        other_algorithm.checksum_crc32c = Some("DUoRhQ==".to_owned());
        assert_eq!(
            code(choose(&[other_algorithm], std::slice::from_ref(&part))),
            Some(S3ErrorCode::InvalidPart)
        );
        // A part sent without a checksum matches none named.
        let bare = stored(1, 1, "");
        let mut asked = named(&bare);
        asked.checksum_sha256 = Some("x".to_owned());
        assert_eq!(
            code(choose(&[asked], &[bare])),
            Some(S3ErrorCode::InvalidPart)
        );
    }

    #[test]
    fn the_etag_is_the_md5_of_the_parts_md5s_and_their_count() {
        let parts = [stored(1, 5 * MIB, ""), stored(2, 1, "")];
        let mut md5s = Vec::new();
        for part in &parts {
            md5s.extend(hex::decode(&part.etag).unwrap_or_default());
        }
        let expected = format!("{}-2", hex::encode(md5::Md5::digest(&md5s)));
        assert_eq!(composite_etag(&parts), expected);
    }

    fn pending(checksum: Option<Algorithm>, full_object: bool) -> Pending {
        Pending {
            checksum,
            full_object,
            ..Pending::default()
        }
    }

    #[test]
    fn a_composite_checksum_is_of_the_parts_checksums() {
        let (one, two) = (Algorithm::Crc32.of(b"one"), Algorithm::Crc32.of(b"two"));
        let parts = [
            stored(1, 5 * MIB, &format!("CRC32:{one}")),
            stored(2, 1, &format!("CRC32:{two}")),
        ];
        let mut raw = STANDARD.decode(&one).unwrap_or_default();
        raw.extend(STANDARD.decode(&two).unwrap_or_default());
        let made = composite_checksum(&pending(Some(Algorithm::Crc32), false), &parts);
        assert_eq!(
            made,
            Some(StoredChecksum {
                algorithm: Algorithm::Crc32,
                value: format!("{}-2", Algorithm::Crc32.of(&raw)),
                composite: true,
            })
        );
        // None asked, a full-object one asked, a part without it or with
        // another: no composite checksum.
        assert_eq!(composite_checksum(&pending(None, false), &parts), None);
        assert_eq!(
            composite_checksum(&pending(Some(Algorithm::Crc32), true), &parts),
            None
        );
        assert_eq!(
            composite_checksum(&pending(Some(Algorithm::Crc32c), false), &parts),
            None
        );
        let unsummed = [parts[0].clone(), stored(2, 1, "")];
        assert_eq!(
            composite_checksum(&pending(Some(Algorithm::Crc32), false), &unsummed),
            None
        );
    }

    /// What a client sends: a CRC32 and a SHA-1, or not.
    fn sent<'a>(
        crc32: Option<&'a String>,
        sha1: Option<&'a String>,
    ) -> [(Algorithm, Option<&'a String>); 5] {
        [
            (Algorithm::Crc32, crc32),
            (Algorithm::Crc32c, None),
            (Algorithm::Crc64Nvme, None),
            (Algorithm::Sha1, sha1),
            (Algorithm::Sha256, None),
        ]
    }

    #[test]
    fn a_sent_composite_checksum_must_match_without_its_count() {
        let made = StoredChecksum {
            algorithm: Algorithm::Crc32,
            value: "DUoRhQ==-2".to_owned(),
            composite: true,
        };
        let (with_count, bare, other) = (
            "DUoRhQ==-2".to_owned(),
            "DUoRhQ==".to_owned(),
            "AAAAAA==-2".to_owned(),
        );
        assert_eq!(code(check_sent_composite(&made, sent(None, None))), None);
        assert_eq!(
            code(check_sent_composite(&made, sent(Some(&with_count), None))),
            None
        );
        assert_eq!(
            code(check_sent_composite(&made, sent(Some(&bare), None))),
            None
        );
        assert_eq!(
            code(check_sent_composite(&made, sent(Some(&other), None))),
            Some(S3ErrorCode::BadDigest)
        );
        // Only the algorithm the checksum is of is compared.
        assert_eq!(
            code(check_sent_composite(&made, sent(None, Some(&other)))),
            None
        );
    }
}
