//! The signature's rules `s3s` 0.14 does not apply: what a SigV4
//! signature must cover, how long a presigned URL lives, how far a SigV2
//! request's date may be from the server's clock.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, Method, StatusCode, header};

use super::{Refusal, query_pairs};

/// Longest a presigned URL may live (S3's week).
const MAX_PRESIGNED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Largest difference between a SigV2 request's date and the server's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// How a request says it is signed.
#[derive(Debug, PartialEq, Eq)]
enum Signing {
    /// No signature: anonymous.
    None,
    /// SigV4 in `Authorization`, covering these headers (lower case).
    V4Header(Vec<String>),
    /// SigV4 in the query, covering these headers; expiring after so many
    /// seconds (each spelling of the parameter the query holds).
    V4Presigned {
        signed: Vec<String>,
        expires: Vec<String>,
    },
    /// SigV2 in `Authorization` (`AWS key:signature`).
    V2Header,
    /// SigV2 in the query, valid until these epoch seconds.
    V2Presigned { expires: Vec<String> },
}

/// How `headers` and the query `pairs` sign the request.
fn signing(headers: &HeaderMap, pairs: &[(String, String)]) -> Signing {
    let all = |name: &str| -> Vec<String> {
        pairs
            .iter()
            .filter(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.clone())
            .collect()
    };
    if !all("X-Amz-Signature").is_empty() || !all("X-Amz-Algorithm").is_empty() {
        return Signing::V4Presigned {
            signed: all("X-Amz-SignedHeaders")
                .iter()
                .flat_map(|list| header_list(list))
                .collect(),
            expires: all("X-Amz-Expires"),
        };
    }
    if !all("Signature").is_empty() && !all("AWSAccessKeyId").is_empty() {
        return Signing::V2Presigned {
            expires: all("Expires"),
        };
    }
    let Some(authorization) = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
    else {
        return Signing::None;
    };
    let authorization = authorization.trim_start();
    if let Some(rest) = authorization.strip_prefix("AWS4-") {
        let signed = rest
            .split([',', ' '])
            .find_map(|part| part.trim().strip_prefix("SignedHeaders="))
            .map(header_list)
            .unwrap_or_default();
        return Signing::V4Header(signed);
    }
    if authorization.starts_with("AWS ") {
        return Signing::V2Header;
    }
    Signing::None
}

/// A `;`-separated list of header names, in lower case.
fn header_list(list: &str) -> Vec<String> {
    list.split(';')
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The signature's rules for a request to `uri` with `headers`, at `now`.
pub(super) fn check_at(
    _method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    now: SystemTime,
) -> Result<(), Refusal> {
    let pairs = query_pairs(uri.query());
    match signing(headers, &pairs) {
        Signing::None => Ok(()),
        Signing::V4Header(signed) => all_amz_headers_signed(headers, &signed),
        Signing::V4Presigned { signed, expires } => {
            all_amz_headers_signed(headers, &signed)?;
            for value in expires {
                let seconds = value.trim().parse::<u64>().ok();
                if seconds.is_none_or(|seconds| seconds > MAX_PRESIGNED.as_secs()) {
                    return Err(Refusal::new(
                        StatusCode::BAD_REQUEST,
                        "AuthorizationQueryParametersError",
                        "X-Amz-Expires must be less than a week (in seconds) that is 604800",
                    ));
                }
            }
            Ok(())
        }
        Signing::V2Presigned { expires } => {
            let latest = now + MAX_PRESIGNED;
            for value in expires {
                let until = value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .map(|seconds| SystemTime::UNIX_EPOCH + Duration::from_secs(seconds));
                if until.is_none_or(|until| until > latest) {
                    return Err(Refusal::new(
                        StatusCode::BAD_REQUEST,
                        "AuthorizationQueryParametersError",
                        "Expires must be a time (in seconds since the epoch) at most a week from now",
                    ));
                }
            }
            Ok(())
        }
        Signing::V2Header => dated_now(headers, now),
    }
}

/// Refuse a request with an `x-amz-*` header its signature does not cover,
/// as S3 does (`AccessDenied`, naming the headers in `HeadersNotSigned`).
fn all_amz_headers_signed(headers: &HeaderMap, signed: &[String]) -> Result<(), Refusal> {
    let mut unsigned: Vec<&str> = headers
        .keys()
        .map(axum::http::HeaderName::as_str)
        .filter(|name| name.starts_with("x-amz-") && !signed.iter().any(|s| s == name))
        .collect();
    if unsigned.is_empty() {
        return Ok(());
    }
    unsigned.sort_unstable();
    unsigned.dedup();
    let mut refusal = Refusal::new(
        StatusCode::FORBIDDEN,
        "AccessDenied",
        "There were headers present in the request which were not signed",
    );
    refusal.extra = Some(("HeadersNotSigned", unsigned.join(", ")));
    Err(refusal)
}

/// A SigV2 header-signed request is dated (`x-amz-date`, else `Date`)
/// within [`MAX_SKEW`] of `now`.
fn dated_now(headers: &HeaderMap, now: SystemTime) -> Result<(), Refusal> {
    let date = headers
        .get("x-amz-date")
        .or_else(|| headers.get(header::DATE))
        .and_then(|value| value.to_str().ok())
        .and_then(parse_date);
    let Some(date) = date else {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "AWS authentication requires a valid Date or x-amz-date header",
        ));
    };
    let skew = now
        .duration_since(date)
        .unwrap_or_else(|early| early.duration());
    if skew > MAX_SKEW {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "RequestTimeTooSkewed",
            "The difference between the request time and the current time is too large.",
        ));
    }
    Ok(())
}

/// An HTTP date (RFC 9110's three forms), or SigV4's `20130524T000000Z`.
fn parse_date(text: &str) -> Option<SystemTime> {
    let text = text.trim();
    if let Ok(date) = httpdate::parse_http_date(text) {
        return Some(date);
    }
    // SigV4's basic form: 20130524T000000Z.
    let digits = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    if text.len() != 16 || text.as_bytes()[8] != b'T' || !text.ends_with('Z') {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (hour, minute, second) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(seconds).ok()?))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn head(
        method: Method,
        uri: &str,
        pairs: &[(&str, &str)],
        now: SystemTime,
    ) -> Result<(), Refusal> {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                axum::http::HeaderName::from_bytes(name.as_bytes())
                    .unwrap_or_else(|e| panic!("{e}")),
                HeaderValue::from_str(value).unwrap_or_else(|e| panic!("{e}")),
            );
        }
        let uri: axum::http::Uri = uri.parse().unwrap_or_else(|e| panic!("{e}"));
        check_at(&method, &uri, &headers, now)
    }

    fn code(result: Result<(), Refusal>) -> Option<&'static str> {
        result.err().map(|refusal| refusal.code)
    }

    const V4: &str = "AWS4-HMAC-SHA256 Credential=K/20260101/us-east-1/s3/aws4_request, \
                      SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=abc";

    #[test]
    fn every_amz_header_of_a_v4_request_is_signed() {
        let now = SystemTime::now();
        let signed = [
            ("authorization", V4),
            ("x-amz-date", "20260101T000000Z"),
            ("x-amz-content-sha256", "UNSIGNED-PAYLOAD"),
        ];
        assert_eq!(code(head(Method::PUT, "/b/k", &signed, now)), None);
        let mut copy = signed.to_vec();
        copy.push(("x-amz-copy-source", "other/secret"));
        assert_eq!(
            code(head(Method::PUT, "/b/k", &copy, now)),
            Some("AccessDenied")
        );
        // Presigned: only `host` is signed, so any x-amz-* header is refused.
        let url = "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=x";
        assert_eq!(code(head(Method::PUT, url, &[], now)), None);
        assert_eq!(
            code(head(Method::PUT, url, &[("x-amz-copy-source", "o/s")], now)),
            Some("AccessDenied")
        );
        // Ordinary headers need no signature.
        assert_eq!(
            code(head(
                Method::PUT,
                url,
                &[("content-type", "text/plain")],
                now
            )),
            None
        );
    }

    #[test]
    fn a_presigned_url_lives_a_week_however_its_query_is_spelled() {
        let now = SystemTime::now();
        for query in [
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=604801&X-Amz-Signature=x",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X%2DAmz%2DExpires=4294967295&X-Amz-Signature=x",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=60&x-amz-expires=999999999&X-Amz-Signature=x",
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=-1&X-Amz-Signature=x",
        ] {
            let uri = format!("/b/k?{query}");
            assert_eq!(
                code(head(Method::GET, &uri, &[], now)),
                Some("AuthorizationQueryParametersError"),
                "{query}"
            );
        }
        let week = format!(
            "/b/k?AWSAccessKeyId=K&Signature=s&Expires={}",
            now.duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or_default()
                + 8 * 24 * 3600
        );
        assert_eq!(
            code(head(Method::GET, &week, &[], now)),
            Some("AuthorizationQueryParametersError")
        );
        let hour = "/b/k?AWSAccessKeyId=K&Signature=s&Expires=4102444800";
        assert_eq!(
            code(head(
                Method::GET,
                hour,
                &[],
                SystemTime::UNIX_EPOCH + Duration::from_secs(4102444800 - 3600)
            )),
            None
        );
    }

    #[test]
    fn a_v2_signed_request_is_dated_within_fifteen_minutes() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let date = |at: SystemTime| httpdate::fmt_http_date(at);
        let auth = ("authorization", "AWS K:sig");
        let fresh = date(now - Duration::from_secs(60));
        assert_eq!(
            code(head(Method::GET, "/b/k", &[auth, ("date", &fresh)], now)),
            None
        );
        let old = date(now - Duration::from_secs(16 * 60));
        assert_eq!(
            code(head(Method::GET, "/b/k", &[auth, ("date", &old)], now)),
            Some("RequestTimeTooSkewed")
        );
        let future = date(now + Duration::from_secs(16 * 60));
        assert_eq!(
            code(head(
                Method::GET,
                "/b/k",
                &[auth, ("x-amz-date", &future)],
                now
            )),
            Some("RequestTimeTooSkewed")
        );
        assert_eq!(
            code(head(Method::GET, "/b/k", &[auth], now)),
            Some("AccessDenied")
        );
        assert_eq!(
            code(head(
                Method::GET,
                "/b/k",
                &[auth, ("date", "Mon, 01 Jan 2018 00:00:00 GMT")],
                now
            )),
            Some("RequestTimeTooSkewed")
        );
    }

    #[test]
    fn dates_are_read_in_both_forms() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600);
        assert_eq!(parse_date("20130524T000000Z"), Some(at));
        assert_eq!(parse_date("Fri, 24 May 2013 00:00:00 GMT"), Some(at));
        assert_eq!(parse_date("20131324T000000Z"), None);
        assert_eq!(parse_date("yesterday"), None);
    }
}
