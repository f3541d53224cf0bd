//! What the listings (`list`, `versioning`) share: S3's page size, key
//! encoding (`encoding-type=url`) and the bound past a prefix.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use s3s::dto::EncodingType;
use s3s::{S3Result, s3_error};

/// Most keys one page holds (S3's limit).
const MAX_KEYS: usize = 1000;

/// What `encoding-type=url` leaves as it is (what S3 does: unreserved
/// characters and `/`).
const KEY_SAFE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// The smallest string above every string that starts with `prefix`
/// (`None` if there is none): paths compare bytewise, which for UTF-8 is
/// the order of code points.
pub(super) fn past_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let mut next = u32::from(last) + 1;
        if (0xD800..=0xDFFF).contains(&next) {
            next = 0xE000;
        }
        if let Some(next) = char::from_u32(next) {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

pub(super) fn encoded(text: &str, encode: bool) -> String {
    if encode {
        utf8_percent_encode(text, KEY_SAFE).to_string()
    } else {
        text.to_owned()
    }
}

/// Whether the request asked for `encoding-type=url`; any other value is
/// refused, as S3 does.
pub(super) fn url_encoding(encoding: Option<&EncodingType>) -> S3Result<bool> {
    match encoding {
        None => Ok(false),
        Some(encoding) if encoding.as_str() == EncodingType::URL => Ok(true),
        Some(_) => Err(s3_error!(
            InvalidArgument,
            "Invalid Encoding Method specified in Request"
        )),
    }
}

pub(super) fn max_keys(asked: Option<i32>) -> S3Result<usize> {
    match asked {
        None => Ok(MAX_KEYS),
        Some(asked) if asked < 0 => Err(s3_error!(
            InvalidArgument,
            "Argument maxKeys must be an integer between 0 and 2147483647"
        )),
        Some(asked) => Ok(usize::try_from(asked).unwrap_or(MAX_KEYS).min(MAX_KEYS)),
    }
}

#[cfg(test)]
mod tests {
    use super::past_prefix;

    #[test]
    fn past_a_prefix_is_above_everything_that_starts_with_it() {
        assert_eq!(past_prefix("a/").as_deref(), Some("a0"));
        assert_eq!(past_prefix("photos/2024").as_deref(), Some("photos/2025"));
        let past = past_prefix("é").unwrap_or_default();
        assert!(past.as_str() > "é\u{10FFFF}zzz");
        assert_eq!(past_prefix(""), None);
    }
}
