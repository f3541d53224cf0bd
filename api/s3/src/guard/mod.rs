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
//! - An XML body (`DeleteObjects`, `CompleteMultipartUpload`, …) is at most
//!   [`MAX_XML_BODY`]: a larger one is the client's mistake (`400
//!   MaxMessageLengthExceeded`), never a server error. `s3s` reads it only
//!   after the signature and the caller are checked.
//! - Browser form uploads (`POST` of `multipart/form-data`) never reach
//!   `s3s`, which would read the whole file into memory before any check:
//!   `post_object` streams those to a bucket; any other is refused here.
//! - Every answer carries `Content-Security-Policy: sandbox` and `nosniff`,
//!   as every file answer of the other listeners does: stored HTML served
//!   from this origin must never run here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::StreamExt as _;

mod signing;

/// Largest XML request body read (`DeleteObjects`, `CompleteMultipartUpload`).
pub(super) const MAX_XML_BODY: usize = 4 << 20;

/// The rules above, in the order S3 applies them: the signature's coverage
/// and dates first, then the body.
/// `domain` is the virtual-hosted domain, if any.
pub(super) async fn guard(
    axum::extract::State(domain): axum::extract::State<Option<Arc<str>>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = match check_head(request.method(), request.uri(), request.headers()) {
        Err(refusal) => refusal.into_response(),
        Ok(()) => match bound_document_body(request, domain.as_deref()) {
            Ok((request, tripped)) => {
                let response = next.run(request).await;
                if tripped.is_some_and(|tripped| tripped.load(Ordering::Relaxed)) {
                    too_large().into_response()
                } else {
                    response
                }
            }
            Err(refusal) => refusal.into_response(),
        },
    };
    api_common::answer::keep_inert(response.headers_mut());
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

/// The checks on the request line and headers.
pub(super) fn check_head(
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
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
    signing::check_at(uri, headers, SystemTime::now())
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
            .or_else(|| uri.authority().map(axum::http::uri::Authority::as_str))
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

/// Bound a document body to [`MAX_XML_BODY`]. One declared larger is
/// refused at once, unread; one that turns out larger as `s3s` reads it
/// (after the signature and the caller are checked, so an anonymous client
/// makes no one hold its bytes) trips the returned flag, and `s3s`'s answer
/// to that (a 500: it does not recognise this limit's error) becomes S3's.
fn bound_document_body(
    request: Request,
    domain: Option<&str>,
) -> Result<(Request, Option<Arc<AtomicBool>>), Refusal> {
    if !body_is_document(request.method(), request.uri(), request.headers(), domain) {
        return Ok((request, None));
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_XML_BODY as u64) {
        return Err(too_large());
    }
    // A declared length within the limit bounds the body already (hyper
    // ends it there), and a body known to be empty has nothing to bound:
    // both go on as they came, their exact size known to `s3s`.
    let empty = {
        use hyper::body::Body as _;
        request.body().size_hint().exact() == Some(0)
    };
    if declared.is_some() || empty {
        return Ok((request, None));
    }
    let tripped = Arc::new(AtomicBool::new(false));
    let flag = tripped.clone();
    let (parts, body) = request.into_parts();
    let mut read = 0usize;
    let body = body.into_data_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        read = read.saturating_add(chunk.len());
        if read > MAX_XML_BODY {
            flag.store(true, Ordering::Relaxed);
            return Err(std::io::Error::other("a document body over the limit"));
        }
        Ok(chunk)
    });
    Ok((
        Request::from_parts(parts, Body::from_stream(body)),
        Some(tripped),
    ))
}

/// S3's answer to a document body over [`MAX_XML_BODY`].
fn too_large() -> Refusal {
    let mut refusal = Refusal::new(
        StatusCode::BAD_REQUEST,
        "MaxMessageLengthExceeded",
        format!("Your request was too big: a document body is at most {MAX_XML_BODY} bytes."),
    );
    refusal.close = true;
    refusal
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

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
