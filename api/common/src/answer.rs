//! A file's HTTP answer, the same for every adapter that serves file
//! content (REST, share links, WebDAV): the headers that keep stored
//! content inert in a browser, the entity tag, and the whole, a range,
//! headers only or "not modified".

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use volume::FileMeta;

use file_service::{FileRead, ReadBody};

use super::headers::{http_date, insert};

/// Stored content is the uploader's, served from this origin: never let a
/// browser run it here (it could read the viewer's session) or sniff a type
/// into it. Every answer with file content carries these, on every
/// listener.
pub fn keep_inert(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// A file's answer, whole, ranged, headers only or not modified: shared
/// by every adapter that serves file content over HTTP.
pub fn file_response(read: FileRead) -> Response {
    let meta = &read.meta;
    let mut headers = HeaderMap::new();
    // Nor let a shared cache hand one user's file to another.
    keep_inert(&mut headers);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
    headers.insert(
        header::VARY,
        HeaderValue::from_static("Authorization, Cookie"),
    );
    insert(&mut headers, header::ETAG, &format!("\"{}\"", meta.sha256));
    insert(
        &mut headers,
        header::LAST_MODIFIED,
        &http_date(meta.modified_ms),
    );
    match read.body {
        ReadBody::NotModified => (StatusCode::NOT_MODIFIED, headers).into_response(),
        ReadBody::Headers => {
            content_headers(&mut headers, meta, meta.size);
            (StatusCode::OK, headers).into_response()
        }
        ReadBody::Full(body) => {
            content_headers(&mut headers, meta, meta.size);
            (StatusCode::OK, headers, body).into_response()
        }
        ReadBody::Partial { first, last, body } => {
            content_headers(&mut headers, meta, last - first + 1);
            insert(
                &mut headers,
                header::CONTENT_RANGE,
                &format!("bytes {first}-{last}/{}", meta.size),
            );
            (StatusCode::PARTIAL_CONTENT, headers, body).into_response()
        }
    }
}

fn content_headers(headers: &mut HeaderMap, meta: &FileMeta, length: u64) {
    insert(headers, header::CONTENT_TYPE, &meta.content_type);
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    headers.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
}
