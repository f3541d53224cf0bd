//! What an S3 request must carry before `s3s` sees it, and what every
//! answer carries: the rules S3 applies that `s3s` 0.14 does not.
//!
//! - Every `x-amz-*` header of a SigV4 request is covered by its signature
//!   (header-signed and presigned alike): an unsigned `x-amz-copy-source`
//!   must not turn a presigned PUT into a copy of another object.
//! - A presigned URL lives at most a week, however its query is spelled
//!   (`X%2DAmz%2DExpires` is `X-Amz-Expires`), SigV2's `Expires` too; a
//!   SigV2 header-signed request is dated within 15 minutes of the server's
//!   clock, so a captured request cannot be replayed for ever.
//! - An XML body (`DeleteObjects`, `CompleteMultipartUpload`, …) is read
//!   here, up to [`MAX_XML_BODY`]: a larger one is the client's mistake
//!   (`400 MaxMessageLengthExceeded`), never a server error.
//! - Browser form uploads (`POST` of `multipart/form-data`) are refused:
//!   `s3s` would read the whole file into memory before any check.
//! - Every answer carries `Content-Security-Policy: sandbox` and `nosniff`,
//!   as every file answer of the other listeners does: stored HTML served
//!   from this origin must never run here.

use std::time::{Duration, SystemTime};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

/// Largest XML request body read (`DeleteObjects`, `CompleteMultipartUpload`).
pub(super) const MAX_XML_BODY: usize = 4 << 20;

/// Longest a presigned URL may live (S3's week).
const MAX_PRESIGNED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Largest difference between a SigV2 request's date and the server's clock.
const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// The rules above, in the order S3 applies them: the signature's coverage
/// and dates first, then the body.
/// `domain` is the virtual-hosted domain, if any.
pub(super) async fn guard(
    axum::extract::State(domain): axum::extract::State<Option<std::sync::Arc<str>>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = match check_head(request.method(), request.uri(), request.headers()) {
        Err(refusal) => refusal.into_response(),
        Ok(()) => match read_xml_body(request, domain.as_deref()).await {
            Ok(request) => next.run(request).await,
            Err(refusal) => refusal.into_response(),
        },
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// An answer given here, before `s3s`: S3's error document.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// Extra elements of the error document (S3's `HeadersNotSigned`).
    extra: Option<(&'static str, String)>,
    /// The connection closes after the answer (its body was not read).
    close: bool,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            extra: None,
            close: false,
        }
    }

    fn into_response(self) -> Response {
        let extra = self.extra.map_or_else(String::new, |(name, value)| {
            format!("<{name}>{}</{name}>", escape(&value))
        });
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>{}</Message>{extra}</Error>",
            self.code,
            escape(&self.message)
        );
        let mut builder = Response::builder()
            .status(self.status)
            .header(header::CONTENT_TYPE, "application/xml");
        if self.close {
            builder = builder.header(header::CONNECTION, "close");
        }
        builder.body(Body::from(body)).unwrap_or_default()
    }
}

/// `text` as XML character data.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

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

/// The query's parameters, percent-decoded as `s3s` decodes them.
fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    query
        .map(|query| {
            form_urlencoded_pairs(query)
                .into_iter()
                .collect::<Vec<(String, String)>>()
        })
        .unwrap_or_default()
}

/// Decode `query` as `application/x-www-form-urlencoded` pairs.
fn form_urlencoded_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name), percent_decode(value))
        })
        .collect()
}

/// `text` with its `%XX` escapes decoded (invalid ones kept as they are;
/// invalid UTF-8 replaced).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or_default());
                index += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

/// The checks on the request line and headers, at `now`.
pub(super) fn check_head(
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    check_head_at(method, uri, headers, SystemTime::now())
}

fn check_head_at(
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    now: SystemTime,
) -> Result<(), Refusal> {
    if is_form_upload(method, headers) {
        let mut refusal = Refusal::new(
            StatusCode::NOT_IMPLEMENTED,
            "NotImplemented",
            "Browser form uploads (POST Object) are not supported: upload with PUT.",
        );
        refusal.close = true;
        return Err(refusal);
    }
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

/// A browser form upload: `POST` of `multipart/form-data`.
fn is_form_upload(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::POST
        && headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| {
                value
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("multipart/form-data")
            })
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

/// Whether `s3s` reads this request's body whole as a document (XML, or a
/// policy's JSON): everything but an object's or a part's content.
/// `domain` is the virtual-hosted domain, if any (`BUCKET.DOMAIN`).
fn body_is_document(
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    domain: Option<&str>,
) -> bool {
    if matches!(
        *method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS
    ) {
        return false;
    }
    if *method != Method::PUT {
        // POST: DeleteObjects, CompleteMultipartUpload, RestoreObject, …
        return true;
    }
    let subresource = query_pairs(uri.query())
        .into_iter()
        .any(|(name, _)| SUBRESOURCES.contains(&name.as_str()));
    if subresource {
        return true;
    }
    // PutObject and UploadPart: a PUT to a key, which the path names after
    // the bucket, or alone when the host names the bucket.
    let path = uri.path().trim_start_matches('/');
    let virtual_hosted = domain.is_some_and(|domain| {
        headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(|host| host.rsplit_once(':').map_or(host, |(name, _)| name))
            .is_some_and(|name| {
                name.to_ascii_lowercase()
                    .ends_with(&format!(".{}", domain.to_ascii_lowercase()))
            })
    });
    let names_a_key = if virtual_hosted {
        !path.is_empty()
    } else {
        path.split_once('/').is_some_and(|(_, key)| !key.is_empty())
    };
    !names_a_key
}

/// The query parameters that make a `PUT` set a configuration (a document
/// body) rather than store content.
const SUBRESOURCES: &[&str] = &[
    "acl",
    "tagging",
    "retention",
    "legal-hold",
    "cors",
    "policy",
    "lifecycle",
    "versioning",
    "website",
    "object-lock",
    "encryption",
    "notification",
    "replication",
    "logging",
    "requestPayment",
    "accelerate",
    "ownershipControls",
    "publicAccessBlock",
    "intelligent-tiering",
    "analytics",
    "metrics",
    "inventory",
];

/// Read a document body whole, up to [`MAX_XML_BODY`], so that `s3s`
/// finds it read; a larger one is refused as S3 refuses it.
async fn read_xml_body(request: Request, domain: Option<&str>) -> Result<Request, Refusal> {
    if !body_is_document(request.method(), request.uri(), request.headers(), domain) {
        return Ok(request);
    }
    let too_large = || {
        let mut refusal = Refusal::new(
            StatusCode::BAD_REQUEST,
            "MaxMessageLengthExceeded",
            format!("Your request was too big: a document body is at most {MAX_XML_BODY} bytes."),
        );
        refusal.close = true;
        refusal
    };
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_XML_BODY as u64) {
        return Err(too_large());
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_XML_BODY).await {
        Ok(bytes) => bytes,
        Err(error) => {
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
            while let Some(cause) = source {
                if cause.is::<http_body_util::LengthLimitError>() {
                    return Err(too_large());
                }
                source = cause.source();
            }
            let mut refusal = Refusal::new(
                StatusCode::BAD_REQUEST,
                "IncompleteBody",
                "The request body ended before it was complete.",
            );
            refusal.close = true;
            return Err(refusal);
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        check_head_at(&method, &uri, &headers, now)
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

    #[test]
    fn document_bodies_are_told_from_content() {
        let is_doc = |method: Method, uri: &str| {
            let uri: axum::http::Uri = uri.parse().unwrap_or_else(|e| panic!("{e}"));
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:9000"));
            body_is_document(&method, &uri, &headers, None)
        };
        assert!(!is_doc(Method::PUT, "/bucket/key"));
        assert!(!is_doc(Method::PUT, "/bucket/key?partNumber=1&uploadId=x"));
        assert!(is_doc(Method::PUT, "/bucket/key?tagging"));
        assert!(is_doc(Method::PUT, "/bucket"));
        assert!(is_doc(Method::PUT, "/bucket?versioning"));
        assert!(is_doc(Method::POST, "/bucket?delete"));
        assert!(!is_doc(Method::GET, "/bucket?list-type=2"));
        // Virtual-hosted: the path is the key alone.
        let uri: axum::http::Uri = "/key".parse().unwrap_or_else(|e| panic!("{e}"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::HOST,
            HeaderValue::from_static("photos.s3.example.com:9000"),
        );
        assert!(!body_is_document(
            &Method::PUT,
            &uri,
            &headers,
            Some("s3.example.com")
        ));
        assert!(body_is_document(&Method::PUT, &uri, &headers, None));
    }
}
