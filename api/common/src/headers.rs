//! Request headers every adapter parses the same way, and the few ways a
//! time or a value goes back into a header.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, HeaderValue, Uri, header};

use file_service::{LockTokens, StoreOptions, Want};
use storage_host::runtime::{ByteRange, IfRange};

use super::if_header::IfHeader;

/// A single `bytes=` range; anything else (several ranges, another unit, bad
/// syntax) is ignored, as RFC 9110 allows, and the whole file is sent.
pub fn parse_range(headers: &HeaderMap) -> Option<ByteRange> {
    let spec = headers
        .get(header::RANGE)?
        .to_str()
        .ok()?
        .trim()
        .strip_prefix("bytes=")?;
    if spec.contains(',') {
        return None;
    }
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        return last.parse().ok().map(ByteRange::Suffix);
    }
    let first: u64 = first.parse().ok()?;
    if last.is_empty() {
        return Some(ByteRange::FirstLast((first, None)));
    }
    let last: u64 = last.parse().ok()?;
    (last >= first).then_some(ByteRange::FirstLast((first, Some(last))))
}

/// The validator of `If-Range` (RFC 9110 §13.1.5), or `None` without the
/// header. A strong entity tag is kept without its quotes; a weak one never
/// matches (the strong comparison this header asks for fails on it), nor
/// does a value that is neither a tag nor an HTTP-date, nor several headers:
/// each of those sends the whole content, the safe answer.
pub fn parse_if_range(headers: &HeaderMap) -> Option<IfRange> {
    let mut values = headers.get_all(header::IF_RANGE).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return Some(IfRange::Never);
    }
    let Ok(value) = value.to_str() else {
        return Some(IfRange::Never);
    };
    let value = value.trim();
    if let Some(tag) = value
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    {
        return Some(if tag.contains('"') {
            IfRange::Never
        } else {
            IfRange::EntityTag(tag.to_owned())
        });
    }
    let seconds = httpdate::parse_http_date(value)
        .ok()
        .and_then(|date| date.duration_since(UNIX_EPOCH).ok())
        .and_then(|since| i64::try_from(since.as_secs()).ok());
    Some(seconds.map_or(IfRange::Never, IfRange::Date))
}

/// What a `GET` of a file's content asks for: its `Range`, and the
/// `If-Range` that decides whether the range applies.
pub fn content_wanted(headers: &HeaderMap) -> Want {
    let range = parse_range(headers);
    Want::Content {
        if_range: range.and(parse_if_range(headers)),
        range,
    }
}

/// Entity tags from `If-None-Match`, unquoted and with any `W/` dropped
/// (weak comparison, as RFC 9110 asks for this header).
pub fn parse_if_none_match(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|tag| {
            let tag = tag.trim();
            let tag = tag.strip_prefix("W/").unwrap_or(tag);
            tag.trim_matches('"').to_owned()
        })
        .filter(|tag| !tag.is_empty())
        .collect()
}

/// The lock tokens a request submits in its `If` header (none without
/// one); an unreadable header is kept as such, for the locks to refuse.
pub fn submitted_tokens(headers: &HeaderMap) -> LockTokens {
    match IfHeader::from_headers(headers) {
        Ok(condition) => LockTokens::new(
            condition
                .map(|condition| condition.submitted_tokens().map(str::to_owned).collect())
                .unwrap_or_default(),
        ),
        Err(why) => LockTokens::Unreadable(why),
    }
}

/// A declared `Content-Length`, if there is one that parses.
pub fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
}

/// What a request's headers say about how to store its body.
pub fn store_options(headers: &HeaderMap) -> StoreOptions {
    StoreOptions {
        declared: content_length(headers),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
        create_only: parse_if_none_match(headers).iter().any(|tag| tag == "*"),
        lock: None,
    }
}
/// Whether the query string has the parameter `name` (with or without a value).
pub fn has_param(uri: &Uri, name: &str) -> bool {
    uri.query().is_some_and(|query| {
        query.split('&').any(|pair| {
            pair == name
                || pair
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('='))
        })
    })
}

/// Set `name` to `value` if `value` is a valid header value.
pub fn insert(headers: &mut HeaderMap, name: header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

/// Unix milliseconds as RFC 3339, UTC, to the millisecond.
pub fn rfc3339(ms: i64) -> String {
    humantime::format_rfc3339_millis(system_time(ms)).to_string()
}

/// Unix milliseconds as an HTTP date (`Last-Modified`).
pub fn http_date(ms: i64) -> String {
    httpdate::fmt_http_date(system_time(ms))
}

fn system_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or_default())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers(name: header::HeaderName, value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(name, HeaderValue::from_str(value).expect("valid header"));
        map
    }

    #[test]
    fn ranges() {
        let range = |value| parse_range(&headers(header::RANGE, value));
        assert_eq!(range("bytes=0-9"), Some(ByteRange::FirstLast((0, Some(9)))));
        assert_eq!(range("bytes=10-"), Some(ByteRange::FirstLast((10, None))));
        assert_eq!(range("bytes=-5"), Some(ByteRange::Suffix(5)));
        assert_eq!(range("bytes=5-1"), None);
        assert_eq!(range("bytes=0-1,4-5"), None);
        assert_eq!(range("items=0-1"), None);
        assert_eq!(range("bytes=x-1"), None);
    }

    #[test]
    fn if_none_match() {
        let tags = |value| parse_if_none_match(&headers(header::IF_NONE_MATCH, value));
        assert_eq!(tags("\"abc\""), ["abc"]);
        assert_eq!(tags("W/\"abc\", \"def\""), ["abc", "def"]);
        assert_eq!(tags("*"), ["*"]);
    }

    #[test]
    fn if_range_validators() {
        let validator = |value| parse_if_range(&headers(header::IF_RANGE, value));
        assert_eq!(validator("\"abc\""), Some(IfRange::EntityTag("abc".into())));
        assert_eq!(validator("W/\"abc\""), Some(IfRange::Never));
        assert_eq!(
            validator("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(IfRange::Date(784_111_777))
        );
        assert_eq!(validator("yesterday"), Some(IfRange::Never));
        assert_eq!(validator("\"a\"b\""), Some(IfRange::Never));
        assert_eq!(parse_if_range(&HeaderMap::new()), None);
    }

    #[test]
    fn submitted_lock_tokens() {
        let tokens =
            |value| submitted_tokens(&headers(header::HeaderName::from_static("if"), value));
        assert_eq!(
            tokens("(<urn:a>) (Not <urn:b>)"),
            LockTokens::new(vec!["urn:a".into()])
        );
        assert!(matches!(tokens("("), LockTokens::Unreadable(_)));
        assert_eq!(submitted_tokens(&HeaderMap::new()), LockTokens::default());
    }
}
