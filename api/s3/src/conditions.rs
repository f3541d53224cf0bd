//! S3's conditional requests: `If-Match`, `If-None-Match`,
//! `If-Modified-Since` and `If-Unmodified-Since` on a read (RFC 9110's
//! order), and a copy's `x-amz-copy-source-if-*`.

use s3s::dto::{ETag, ETagCondition, Timestamp, TimestampFormat};
use s3s::{S3Error, S3ErrorCode, S3Result, s3_error};

use super::lookup::Found;

/// The conditional headers of a read.
#[derive(Clone, Copy)]
pub(super) struct Conditions<'a> {
    pub(super) if_match: Option<&'a ETagCondition>,
    pub(super) if_none_match: Option<&'a ETagCondition>,
    pub(super) if_modified_since: Option<&'a Timestamp>,
    pub(super) if_unmodified_since: Option<&'a Timestamp>,
}

impl Conditions<'_> {
    /// RFC 9110's order: `If-Match`, else `If-Unmodified-Since`, fail with
    /// 412; then `If-None-Match`, else `If-Modified-Since`, answer 304.
    pub(super) fn check(&self, etag: &str, modified_ms: i64) -> S3Result<()> {
        self.evaluate(etag, modified_ms).map_err(|mut error| {
            // A 304 carries the validators the client compares.
            if error.code() == &S3ErrorCode::NotModified {
                let mut headers = axum::http::HeaderMap::new();
                if let Ok(value) = format!("\"{etag}\"").parse() {
                    headers.insert(axum::http::header::ETAG, value);
                }
                if let Ok(value) = httpdate::fmt_http_date(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::from_millis(u64::try_from(modified_ms).unwrap_or(0)),
                )
                .parse()
                {
                    headers.insert(axum::http::header::LAST_MODIFIED, value);
                }
                error.set_headers(headers);
            }
            error
        })
    }

    fn evaluate(&self, etag: &str, modified_ms: i64) -> S3Result<()> {
        let modified = modified_ms.div_euclid(1000);
        match (self.if_match, self.if_unmodified_since) {
            (Some(condition), _) if !matches(condition, etag) => {
                return Err(precondition_failed());
            }
            (None, Some(since)) if modified > epoch_seconds(since) => {
                return Err(precondition_failed());
            }
            _ => {}
        }
        match (self.if_none_match, self.if_modified_since) {
            (Some(condition), _) if matches(condition, etag) => Err(not_modified()),
            (None, Some(since)) if modified <= epoch_seconds(since) => Err(not_modified()),
            _ => Ok(()),
        }
    }
}

/// Whether `condition` holds for an object whose ETag is `etag`.
pub(super) fn matches(condition: &ETagCondition, etag: &str) -> bool {
    match condition {
        ETagCondition::Any => true,
        ETagCondition::ETag(ETag::Strong(value) | ETag::Weak(value)) => value == etag,
    }
}

pub(super) fn precondition_failed() -> S3Error {
    s3_error!(
        PreconditionFailed,
        "At least one of the pre-conditions you specified did not hold"
    )
}

fn not_modified() -> S3Error {
    S3Error::new(S3ErrorCode::NotModified)
}

/// Seconds since the epoch of `at`.
fn epoch_seconds(at: &Timestamp) -> i64 {
    let mut text = Vec::new();
    if at.format(TimestampFormat::EpochSeconds, &mut text).is_err() {
        return 0;
    }
    let text = String::from_utf8_lossy(&text);
    text.split('.')
        .next()
        .and_then(|whole| whole.parse().ok())
        .unwrap_or(0)
}

/// A copy's `x-amz-copy-source-if-*`: all fail with 412.
pub(super) fn copy_source_conditions(
    source: &Found,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let modified = source.meta.modified_ms.div_euclid(1000);
    let fails = if_match.is_some_and(|condition| !matches(condition, &source.etag))
        || (if_match.is_none()
            && if_unmodified_since.is_some_and(|since| modified > epoch_seconds(since)))
        || if_none_match.is_some_and(|condition| matches(condition, &source.etag))
        || (if_none_match.is_none()
            && if_modified_since.is_some_and(|since| modified <= epoch_seconds(since)));
    if fails {
        Err(precondition_failed())
    } else {
        Ok(())
    }
}

/// [`copy_source_conditions`] of the `x-amz-copy-source-if-*` fields of a
/// `CopyObject` or `UploadPartCopy` input (the same names in two types).
macro_rules! copy_source_conditions_of {
    ($source:expr, $input:expr) => {
        copy_source_conditions(
            $source,
            $input.copy_source_if_match.as_ref(),
            $input.copy_source_if_none_match.as_ref(),
            $input.copy_source_if_modified_since.as_ref(),
            $input.copy_source_if_unmodified_since.as_ref(),
        )
    };
}
pub(super) use copy_source_conditions_of;

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds as u64))
    }

    fn tag(value: &str) -> ETagCondition {
        ETagCondition::ETag(ETag::Strong(value.to_owned()))
    }

    fn verdict(conditions: &Conditions<'_>) -> Option<S3ErrorCode> {
        conditions
            .evaluate("abc", 100_000)
            .err()
            .map(|error| error.code().clone())
    }

    #[test]
    fn conditions_follow_rfc_9110_order() {
        let none = Conditions {
            if_match: None,
            if_none_match: None,
            if_modified_since: None,
            if_unmodified_since: None,
        };
        assert_eq!(verdict(&none), None);
        // If-Match decides over If-Unmodified-Since.
        let (matching, old) = (tag("abc"), at(50));
        let c = Conditions {
            if_match: Some(&matching),
            if_unmodified_since: Some(&old),
            ..none
        };
        assert_eq!(verdict(&c), None);
        let other = tag("xyz");
        let c = Conditions {
            if_match: Some(&other),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::PreconditionFailed));
        let c = Conditions {
            if_unmodified_since: Some(&old),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::PreconditionFailed));
        // If-None-Match decides over If-Modified-Since.
        let (any, later) = (ETagCondition::Any, at(200));
        let c = Conditions {
            if_none_match: Some(&any),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::NotModified));
        let c = Conditions {
            if_none_match: Some(&other),
            if_modified_since: Some(&later),
            ..none
        };
        assert_eq!(verdict(&c), None);
        let c = Conditions {
            if_modified_since: Some(&later),
            ..none
        };
        assert_eq!(verdict(&c), Some(S3ErrorCode::NotModified));
        let c = Conditions {
            if_modified_since: Some(&old),
            ..none
        };
        assert_eq!(verdict(&c), None);
    }
}
