//! What every S3 answer goes through on its way out: S3's request ids
//! (and an error document's `RequestId`), a ranged HEAD's 206,
//! `PutBucketTagging`'s 204, one XML
//! declaration in a completion's answer, and a version listing's entries
//! in one sequence (`versions_order`).

mod versions_order;

use super::versioning;

pub(super) use versions_order::versions_in_order;

use axum::http::StatusCode;

/// Keep a `CompleteMultipartUpload` answer one XML document when its
/// completion fails. `s3s` 0.14 answers `200` with an XML declaration,
/// whitespace while the parts stream by, then the result; an error result
/// comes with a second declaration, which no XML parser accepts (botocore
/// then reports a bare `(500)` and loses the error's code). Fixed upstream
/// in `s3s` 0.15, which needs a newer Rust than this project's 1.95.
pub(super) async fn one_xml_declaration(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use futures_util::StreamExt as _;
    let completion = request.method() == axum::http::Method::POST
        && request
            .uri()
            .query()
            .is_some_and(|query| query.split('&').any(|pair| pair.starts_with("uploadId=")));
    let response = next.run(request).await;
    if !completion || response.status() != StatusCode::OK {
        return response;
    }
    let (parts, body) = response.into_parts();
    let mut first = true;
    let body = body.into_data_stream().map(move |chunk| {
        chunk.map(|chunk| match std::mem::take(&mut first) {
            true => chunk,
            false => after_declaration(chunk),
        })
    });
    axum::response::Response::from_parts(parts, axum::body::Body::from_stream(body))
}

/// `chunk` without the XML declaration it starts with, if it does.
fn after_declaration(chunk: bytes::Bytes) -> bytes::Bytes {
    const OPEN: &[u8] = b"<?xml";
    if !chunk.starts_with(OPEN) {
        return chunk;
    }
    match chunk.windows(2).position(|pair| pair == b"?>") {
        Some(end) => chunk.slice(end + 2..),
        None => chunk,
    }
}

/// Largest error body given its request id.
const MAX_ERROR_BODY: usize = 64 << 10;

/// Give every answer S3's request ids (`x-amz-request-id`, `x-amz-id-2`),
/// and every error document its `RequestId` and `HostId`, as S3 does:
/// what a user quotes when something went wrong.
pub(super) async fn request_ids(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::HeaderValue;
    let id = format!("{:016X}", rand::random::<u64>());
    let host = format!("{:032x}", rand::random::<u128>());
    let head = request.method() == axum::http::Method::HEAD;
    // s3s answers PutBucketTagging 200; S3 answers 204.
    let bucket_tagging = request.method() == axum::http::Method::PUT
        && request
            .uri()
            .query()
            .is_some_and(|query| query.split('&').any(|p| p == "tagging" || p == "tagging="))
        && !request.uri().path().trim_matches('/').contains('/');
    let version_asked = asked_version(request.uri());
    tracing::debug!(request_id = %id, method = %request.method(), uri = %request.uri(), "S3 request");
    let mut response = next.run(request).await;
    // s3s answers a ranged HEAD with 200; S3 with 206, as for a GET.
    if head
        && response.status() == StatusCode::OK
        && response
            .headers()
            .contains_key(axum::http::header::CONTENT_RANGE)
    {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
    }
    if bucket_tagging && response.status() == StatusCode::OK {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    let status = response.status();
    let failed = status.is_client_error() || status.is_server_error();
    // s3s writes an error document whole, with no Content-Length yet
    // (hyper adds it): its body knows its exact size.
    let small = {
        use hyper::body::Body as _;
        response
            .body()
            .size_hint()
            .exact()
            .is_some_and(|length| length <= MAX_ERROR_BODY as u64)
    };
    let mut response = if failed && small {
        let (mut parts, body) = response.into_parts();
        let body = match axum::body::to_bytes(body, MAX_ERROR_BODY).await {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                if text.ends_with("</Error>") && !text.contains("<RequestId>") {
                    log_failure(&id, status, &text);
                    // S3 names the argument it refused (s3s's errors
                    // cannot carry it): a version id.
                    let argument = match &version_asked {
                        Some(value) if text.contains(versioning::INVALID_VERSION) => format!(
                            "<ArgumentName>versionId</ArgumentName><ArgumentValue>{}</ArgumentValue>",
                            xml_escaped(value)
                        ),
                        _ if text.contains("shall be encoded as UTF-8 then URLEncoded") => {
                            "<ArgumentName>x-amz-tagging</ArgumentName>".to_owned()
                        }
                        _ => String::new(),
                    };
                    let with_ids = format!(
                        "{}{argument}<RequestId>{id}</RequestId><HostId>{host}</HostId></Error>",
                        text.trim_end_matches("</Error>")
                    );
                    parts.headers.insert(
                        axum::http::header::CONTENT_LENGTH,
                        HeaderValue::from(with_ids.len()),
                    );
                    axum::body::Body::from(with_ids)
                } else {
                    axum::body::Body::from(bytes)
                }
            }
            Err(_) => axum::body::Body::empty(),
        };
        axum::response::Response::from_parts(parts, body)
    } else {
        response
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&id) {
        headers.insert("x-amz-request-id", value);
    }
    if let Ok(value) = HeaderValue::from_str(&host) {
        headers.insert("x-amz-id-2", value);
    }
    response
}

/// The `versionId` a request's query names, decoded.
fn asked_version(uri: &axum::http::Uri) -> Option<String> {
    uri.query()?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("versionId=")?;
        Some(
            percent_encoding::percent_decode_str(value)
                .decode_utf8_lossy()
                .into_owned(),
        )
    })
}

/// `text` as XML character data.
fn xml_escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Log an S3 failure answered with the error document `text`: a bounded
/// summary (its code and the start of its message), at DEBUG for what the
/// client got wrong or asked of a feature that is not there (4xx, 501) or
/// of a busy server (503); the server's own faults are logged where they
/// happen, with their detail (`error::s3_error_of`).
fn log_failure(id: &str, status: StatusCode, text: &str) {
    let element = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find("</")? + start;
        Some(&text[start..end])
    };
    let code = element("Code").unwrap_or_default();
    let message: String = element("Message")
        .unwrap_or_default()
        .chars()
        .take(200)
        .collect();
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        tracing::warn!(request_id = %id, %status, code, message, "an S3 request failed");
    } else {
        tracing::debug!(request_id = %id, %status, code, message, "an S3 request failed");
    }
}
