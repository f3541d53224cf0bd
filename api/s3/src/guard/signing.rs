//! The signature's rules `s3s` 0.14 does not apply: what a SigV4
//! signature must cover, how long a presigned URL lives, how far a SigV2
//! request's date may be from the server's clock.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, StatusCode, header};

use super::{Refusal, query_pairs};

/// Longest a presigned URL may live (S3's week).
const MAX_PRESIGNED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Largest difference between a SigV2 request's date and the server's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// The values of every query parameter named `name` in any letter case
/// (a rule must hold however a request spells what `s3s` may read).
fn values<'a>(pairs: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    pairs
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
        .collect()
}

/// The signature's rules for a request to `uri` with `headers`, at `now`.
///
/// Every rule whose marker the request carries is applied, whichever
/// scheme `s3s` ends up verifying (it tries SigV2's query, SigV2's header,
/// SigV4's query, then SigV4's header): a request cannot dodge one rule by
/// also carrying another scheme's marker.
pub(super) fn check_at(
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    now: SystemTime,
) -> Result<(), Refusal> {
    let pairs = query_pairs(uri.query());
    let has = |name: &str| !values(&pairs, name).is_empty();
    if has("X-Amz-Signature") || has("X-Amz-Algorithm") || has("X-Amz-Credential") {
        // `s3s` reads the list under this exact name, once.
        let lists = values(&pairs, "X-Amz-SignedHeaders");
        let signed = match lists.as_slice() {
            [list] if pairs.iter().any(|(key, _)| key == "X-Amz-SignedHeaders") => {
                header_list(list)
            }
            _ => Vec::new(),
        };
        all_amz_headers_signed(headers, &signed)?;
        for value in values(&pairs, "X-Amz-Expires") {
            let seconds = value.trim().parse::<u64>().ok();
            if seconds.is_none_or(|seconds| seconds > MAX_PRESIGNED.as_secs()) {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "AuthorizationQueryParametersError",
                    "X-Amz-Expires must be less than a week (in seconds) that is 604800",
                ));
            }
        }
    }
    if has("Signature") || has("AWSAccessKeyId") {
        let latest = now + MAX_PRESIGNED;
        for value in values(&pairs, "Expires") {
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
    }
    let mut authorizations = headers.get_all(header::AUTHORIZATION).iter();
    let Some(authorization) = authorizations.next() else {
        return Ok(());
    };
    let malformed = || {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "AuthorizationHeaderMalformed",
            "The authorization header is malformed: it is AWS4-HMAC-SHA256 with \
             Credential, SignedHeaders and Signature, or SigV2's AWS KEY:SIGNATURE.",
        )
    };
    if authorizations.next().is_some() {
        return Err(malformed());
    }
    let authorization = authorization.to_str().map_err(|_| malformed())?;
    // SigV4's grammar, as `s3s` parses it (which reads the algorithm's word
    // but never checks it): whatever that word, the list it signs is this.
    if let Some((algorithm, signed)) = v4_authorization(authorization) {
        if algorithm != "AWS4-HMAC-SHA256" {
            return Err(malformed());
        }
        return all_amz_headers_signed(headers, &signed);
    }
    if authorization
        .strip_prefix("AWS ")
        .is_some_and(|rest| rest.contains(':'))
    {
        return dated_now(headers, now);
    }
    Err(malformed())
}

/// SigV4's `Authorization` in `s3s`'s grammar: `ALGORITHM Credential=…,`
/// then `SignedHeaders=a;b,` then `Signature=…` (spaces allowed after the
/// commas); the algorithm's word and the signed headers, if it parses.
fn v4_authorization(text: &str) -> Option<(&str, Vec<String>)> {
    let (algorithm, rest) = text.split_once(|c: char| c.is_ascii_whitespace())?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let rest = rest.strip_prefix("Credential=")?;
    let (_, rest) = rest.split_once(',')?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let rest = rest.strip_prefix("SignedHeaders=")?;
    let (list, rest) = rest.split_once(',')?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_whitespace());
    rest.strip_prefix("Signature=")?;
    Some((algorithm, header_list(list)))
}

/// A `;`-separated list of header names, exactly as written (`s3s` looks
/// each up as it is, among header names in lower case).
fn header_list(list: &str) -> Vec<String> {
    list.split(';')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
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
    use axum::http::{HeaderValue, Method};

    fn head(
        _method: Method,
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
        check_at(&uri, &headers, now)
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
    fn a_request_cannot_dodge_a_rule_by_its_spelling() {
        let now = SystemTime::now();
        let smuggled = ("x-amz-copy-source", "other/secret");
        let date = ("x-amz-date", "20260101T000000Z");
        // s3s reads SigV4's grammar whatever the algorithm's word says.
        for authorization in [
            "X Credential=K/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
            "aws4-hmac-sha256 Credential=K/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
            "AWS Credential=K/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
            "AWS4-HMAC-SHA256,SignedHeaders=host;x-amz-date;x-amz-copy-source Credential=K/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=abc",
            "Bearer wst_token",
        ] {
            let refused = code(head(
                Method::PUT,
                "/b/k",
                &[("authorization", authorization), date, smuggled],
                now,
            ));
            assert!(refused.is_some(), "{authorization}");
        }
        // A SigV2 request dated 2018 with a SigV4 marker in its query (which
        // SigV2 does not sign): still dated.
        let old = [
            ("authorization", "AWS K:sig"),
            ("date", "Mon, 01 Jan 2018 00:00:00 GMT"),
        ];
        assert_eq!(
            code(head(Method::GET, "/b/k?X-Amz-Algorithm=", &old, now)),
            Some("RequestTimeTooSkewed")
        );
        // A SigV2 URL for a century with a SigV4 marker beside it.
        let century = "/b/k?AWSAccessKeyId=K&Signature=s&Expires=4102444800&X-Amz-Algorithm=";
        assert_eq!(
            code(head(Method::GET, century, &[], now)),
            Some("AuthorizationQueryParametersError")
        );
        // Two Authorization headers: refused.
        assert_eq!(
            code(head(
                Method::GET,
                "/b/k",
                &[("authorization", V4), ("authorization", "AWS K:sig"), date],
                now
            )),
            Some("AuthorizationHeaderMalformed")
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
