//! Resolving a client's byte range against the content size (RFC 9110 §14.1.2).

use crate::types::ByteRange;

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

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(resolve(ByteRange::FirstLast((100, None)), 100), None);
        assert_eq!(resolve(ByteRange::FirstLast((5, Some(4))), 100), None);
        assert_eq!(resolve(ByteRange::FirstLast((0, None)), 0), None);
        assert_eq!(resolve(ByteRange::Suffix(5), 0), None);
    }
}
