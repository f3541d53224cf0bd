//! Resolving a client's byte range against the content size (RFC 9110 §14.1.2),
//! and whether its `If-Range` lets it apply (§13.1.5).

use crate::types::{ByteRange, FileMeta, IfRange};

/// Whether a range asked with `validator` applies to the file `meta`
/// describes: without one it does; an entity tag must equal the content's
/// (strong comparison: the host sends weak tags as [`IfRange::Never`]); a
/// date must equal the `Last-Modified` the file is served with, which is its
/// modification time truncated to the second. When it does not hold, the
/// client's partial copy is of other content, so the whole file is sent.
///
/// A date is taken as a strong validator: the index keeps no history, so
/// two versions written within the same second cannot be told apart by it;
/// entity tags carry no such caveat.
pub fn if_range_holds(validator: Option<&IfRange>, meta: &FileMeta) -> bool {
    match validator {
        None => true,
        Some(IfRange::EntityTag(tag)) => *tag == meta.sha256,
        Some(IfRange::Date(seconds)) => meta.modified_ms.div_euclid(1000) == *seconds,
        Some(IfRange::Never) => false,
    }
}

/// The inclusive `(first, last)` byte positions `asked` selects from content
/// of `size` bytes, or `None` when it selects nothing (416).
pub fn resolve(asked: ByteRange, size: u64) -> Option<(u64, u64)> {
    if size == 0 {
        return None;
    }
    match asked {
        ByteRange::FirstLast((first, last)) => {
            if first >= size {
                return None;
            }
            let last = last.map_or(size - 1, |last| last.min(size - 1));
            (first <= last).then_some((first, last))
        }
        ByteRange::Suffix(0) => None,
        ByteRange::Suffix(length) => Some((size.saturating_sub(length), size - 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_and_closed_ranges() {
        assert_eq!(
            resolve(ByteRange::FirstLast((0, Some(9))), 100),
            Some((0, 9))
        );
        assert_eq!(
            resolve(ByteRange::FirstLast((90, None)), 100),
            Some((90, 99))
        );
        assert_eq!(
            resolve(ByteRange::FirstLast((90, Some(500))), 100),
            Some((90, 99))
        );
        assert_eq!(
            resolve(ByteRange::FirstLast((99, Some(99))), 100),
            Some((99, 99))
        );
    }

    #[test]
    fn suffix_ranges() {
        assert_eq!(resolve(ByteRange::Suffix(10), 100), Some((90, 99)));
        assert_eq!(resolve(ByteRange::Suffix(500), 100), Some((0, 99)));
        assert_eq!(resolve(ByteRange::Suffix(0), 100), None);
    }

    fn meta(sha256: &str, modified_ms: i64) -> FileMeta {
        FileMeta {
            path: "f".into(),
            size: 20,
            sha256: sha256.into(),
            blake3: None,
            content_type: "text/plain".into(),
            created_ms: 0,
            modified_ms,
            version_id: "null".into(),
        }
    }

    #[test]
    fn if_range_entity_tags_compare_strongly() {
        let file = meta("abc", 1_700_000_000_500);
        assert!(if_range_holds(None, &file));
        assert!(if_range_holds(
            Some(&IfRange::EntityTag("abc".into())),
            &file
        ));
        // Another version's tag: the client's copy is of other content.
        assert!(!if_range_holds(
            Some(&IfRange::EntityTag("old".into())),
            &file
        ));
        assert!(!if_range_holds(Some(&IfRange::Never), &file));
    }

    #[test]
    fn if_range_dates_match_last_modified_to_the_second() {
        let file = meta("abc", 1_700_000_000_999);
        assert!(if_range_holds(Some(&IfRange::Date(1_700_000_000)), &file));
        assert!(!if_range_holds(Some(&IfRange::Date(1_699_999_999)), &file));
        assert!(!if_range_holds(Some(&IfRange::Date(1_700_000_001)), &file));
    }

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(resolve(ByteRange::FirstLast((100, None)), 100), None);
        assert_eq!(resolve(ByteRange::FirstLast((5, Some(4))), 100), None);
        assert_eq!(resolve(ByteRange::FirstLast((0, None)), 0), None);
        assert_eq!(resolve(ByteRange::Suffix(5), 0), None);
    }
}
