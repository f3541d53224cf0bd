//! `/files/...`: store, fetch, describe, list and delete files.
//!
//! This layer speaks HTTP: it validates paths and parses headers, leases an
//! instance with the request's bytes reserved, and only then lets the guest
//! read the body from the socket (or stream a verified file back to it).
//! Storage semantics (hashing, verification, conditional and range answers)
//! live in the guest.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use volume::{FilePath, Prefix};

use crate::AppState;
use crate::error::AppError;
use crate::pool::BodySize;
use crate::runtime::bindings::exports::wasm_storage::storage::handler::{
    ByteRange, FetchBody, FetchRequest, Fetched, StoreRequest,
};
use crate::runtime::bindings::wasm_storage::storage::types::{Entry, FileMeta};
use crate::runtime::host::{ResponseSink, Upload};

/// Entries in a listing page unless `limit` says otherwise, and the most.
const DEFAULT_PAGE: u32 = 100;
const MAX_PAGE: u32 = 1000;

/// What to escape when a path goes back into a URL (`Location`).
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'?')
    .add(b'<')
    .add(b'>');

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/files", get(list_root))
        .route("/files/", get(list_root))
        .route(
            "/files/{*path}",
            get(get_file)
                .head(head_file)
                .put(store_file)
                .post(store_file)
                .delete(delete_file),
        )
}

/// File metadata as clients see it.
#[derive(Debug, Serialize)]
pub(crate) struct MetaView {
    pub(crate) path: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    pub(crate) content_type: String,
    /// RFC 3339, UTC.
    pub(crate) created: String,
    pub(crate) modified: String,
}

impl From<&FileMeta> for MetaView {
    fn from(meta: &FileMeta) -> Self {
        Self {
            path: meta.path.clone(),
            size: meta.size,
            sha256: meta.sha256.clone(),
            content_type: meta.content_type.clone(),
            created: humantime::format_rfc3339_millis(system_time(meta.created_ms)).to_string(),
            modified: humantime::format_rfc3339_millis(system_time(meta.modified_ms)).to_string(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum EntryView {
    File {
        name: String,
        #[serde(flatten)]
        meta: MetaView,
    },
    Folder {
        name: String,
        path: String,
    },
}

#[derive(Debug, Serialize)]
struct ListingView {
    prefix: String,
    entries: Vec<EntryView>,
    /// Pass as `?after=` to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ListParams {
    after: Option<String>,
    limit: Option<u32>,
}

/// The still-encoded path after `/files/`.
fn raw_path(uri: &Uri) -> &str {
    uri.path().strip_prefix("/files/").unwrap_or_default()
}

fn wants_meta(uri: &Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "meta" || pair.starts_with("meta="))
    })
}

async fn list_root(
    state: State<AppState>,
    params: Query<ListParams>,
) -> Result<Response, AppError> {
    list(state, Prefix::root(), params).await
}

async fn get_file(
    state: State<AppState>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let raw = raw_path(&uri);
    if raw.ends_with('/') {
        let params = Query::try_from_uri(&uri).map_err(|e| AppError::BadRequest(e.body_text()))?;
        return list(state, Prefix::from_url(raw)?, params).await;
    }
    let path = FilePath::from_url(raw)?;
    let meta_only = wants_meta(&uri);
    let request = FetchRequest {
        path: path.as_str().to_owned(),
        want_body: !meta_only,
        range: if meta_only {
            None
        } else {
            parse_range(&headers)
        },
        if_none_match: if meta_only {
            Vec::new()
        } else {
            parse_if_none_match(&headers)
        },
    };
    if meta_only {
        let (fetched, _) = fetch(&state, request, &path).await?;
        return Ok(Json(MetaView::from(&fetched.meta)).into_response());
    }
    let (fetched, body) = fetch(&state, request, &path).await?;
    Ok(file_response(&fetched.meta, fetched.body, body))
}

async fn head_file(
    state: State<AppState>,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let path = FilePath::from_url(raw_path(&uri))?;
    let request = FetchRequest {
        path: path.as_str().to_owned(),
        want_body: false,
        range: None,
        if_none_match: parse_if_none_match(&headers),
    };
    let (fetched, body) = fetch(&state, request, &path).await?;
    Ok(file_response(&fetched.meta, fetched.body, body))
}

/// Run `request` on an instance. When the guest prepared content, the
/// instance stays leased while it streams that content into the returned
/// body, a chunk at a time.
async fn fetch(
    state: &AppState,
    request: FetchRequest,
    path: &FilePath,
) -> Result<(Fetched, Body), AppError> {
    // The guest reads (and verifies) the whole file even for a range, so
    // the request reserves the file's size; an unknown path reserves
    // nothing and the guest answers 404.
    let body_size = if request.want_body {
        match state.volume.stat(path).await {
            Ok(meta) => BodySize::Known(meta.size),
            Err(_) => BodySize::None,
        }
    } else {
        BodySize::None
    };
    let lease = state.pool.lease(body_size).await?;
    let (head, headed) = oneshot::channel();
    let (chunks, received) = mpsc::channel(ResponseSink::CHANNEL_CHUNKS);
    let answer = lease.spawn(move |instance| {
        Box::pin(async move {
            let fetched = instance.fetch(request).await?;
            let streams = matches!(
                &fetched,
                Ok(Fetched {
                    body: FetchBody::Full | FetchBody::Partial(_),
                    ..
                })
            );
            let _ = head.send(fetched);
            if streams {
                // A client that went away or stalled ends the stream early;
                // the response then falls short of its Content-Length.
                if let Err(error) = instance.send_body(ResponseSink::new(chunks)).await? {
                    tracing::debug!(?error, "a response body was cut short");
                }
            }
            Ok(())
        })
    });
    match headed.await {
        Ok(Ok(fetched)) => {
            let body = Body::from_stream(futures_util::stream::unfold(
                received,
                |mut received| async move { received.recv().await.map(|chunk| (chunk, received)) },
            ));
            Ok((fetched, body))
        }
        Ok(Err(error)) => Err(AppError::from_handler(error, path.as_str())),
        // The instance failed before it answered: the answer says why.
        Err(_) => Err(match answer.wait().await {
            Err(error) => error.into(),
            Ok(()) => AppError::Internal("the instance gave no answer".into()),
        }),
    }
}

fn file_response(meta: &FileMeta, fetched: FetchBody, body: Body) -> Response {
    let mut headers = HeaderMap::new();
    insert(&mut headers, header::ETAG, &format!("\"{}\"", meta.sha256));
    insert(
        &mut headers,
        header::LAST_MODIFIED,
        &httpdate::fmt_http_date(system_time(meta.modified_ms)),
    );
    match fetched {
        FetchBody::NotModified => (StatusCode::NOT_MODIFIED, headers).into_response(),
        FetchBody::None => {
            content_headers(&mut headers, meta, meta.size);
            (StatusCode::OK, headers).into_response()
        }
        FetchBody::Full => {
            content_headers(&mut headers, meta, meta.size);
            (StatusCode::OK, headers, body).into_response()
        }
        FetchBody::Partial((first, last)) => {
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

async fn list(
    State(state): State<AppState>,
    prefix: Prefix,
    Query(params): Query<ListParams>,
) -> Result<Response, AppError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let lease = state.pool.lease(BodySize::None).await?;
    let listed = prefix.as_str().to_owned();
    let listing = lease
        .run(move |instance| {
            Box::pin(async move { instance.list(&listed, params.after.as_deref(), limit).await })
        })
        .await?
        .map_err(|error| AppError::from_handler(error, prefix.as_str()))?;
    let entries = listing
        .entries
        .iter()
        .map(|entry| match entry {
            Entry::File(meta) => EntryView::File {
                name: meta.path[prefix.as_str().len()..].to_owned(),
                meta: MetaView::from(meta),
            },
            Entry::Folder(folder) => EntryView::Folder {
                name: folder[prefix.as_str().len()..].to_owned(),
                path: folder.clone(),
            },
        })
        .collect();
    Ok(Json(ListingView {
        prefix: prefix.as_str().to_owned(),
        entries,
        next_after: listing.next_after,
    })
    .into_response())
}

async fn store_file(
    State(state): State<AppState>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    let raw = raw_path(&uri);
    if raw.ends_with('/') {
        return Err(AppError::BadRequest(
            "cannot store a file at a folder path (ending in /)".into(),
        ));
    }
    let path = FilePath::from_url(raw)?;
    let limit = state.max_body;
    // Refuse a declared oversize body before reading a byte of it.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|declared| declared > limit) {
        return Err(AppError::BodyTooLarge { limit });
    }
    // Wait for memory and an instance holding no body: until then the
    // client is held by TCP back-pressure.
    let lease = state
        .pool
        .lease(declared.map_or(BodySize::Unknown, BodySize::Known))
        .await?;
    let staged = state
        .volume
        .stage()
        .await
        .map_err(|error| AppError::from_volume(error, path.as_str()))?;
    let upload = Upload::new(body, declared, limit, staged);
    let request = StoreRequest {
        path: path.as_str().to_owned(),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
        create_only: parse_if_none_match(&headers).iter().any(|tag| tag == "*"),
    };
    let meta = lease
        .run(move |instance| Box::pin(instance.store(request, upload)))
        .await?
        .map_err(|error| AppError::from_handler(error, path.as_str()))?;
    // A new file keeps created == modified; a replaced one keeps its creation.
    let status = if meta.created_ms == meta.modified_ms {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut response_headers = HeaderMap::new();
    insert(
        &mut response_headers,
        header::ETAG,
        &format!("\"{}\"", meta.sha256),
    );
    let location = format!("/files/{}", utf8_percent_encode(&meta.path, PATH_ESCAPES));
    insert(&mut response_headers, header::LOCATION, &location);
    Ok((status, response_headers, Json(MetaView::from(&meta))).into_response())
}

async fn delete_file(State(state): State<AppState>, uri: Uri) -> Result<Response, AppError> {
    let path = FilePath::from_url(raw_path(&uri))?;
    let lease = state.pool.lease(BodySize::None).await?;
    let deleted = path.as_str().to_owned();
    lease
        .run(move |instance| Box::pin(async move { instance.delete(&deleted).await }))
        .await?
        .map_err(|error| AppError::from_handler(error, path.as_str()))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A single `bytes=` range; anything else (several ranges, another unit, bad
/// syntax) is ignored, as RFC 9110 allows, and the whole file is sent.
fn parse_range(headers: &HeaderMap) -> Option<ByteRange> {
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

/// Entity tags from `If-None-Match`, unquoted and with any `W/` dropped
/// (weak comparison, as RFC 9110 asks for this header).
fn parse_if_none_match(headers: &HeaderMap) -> Vec<String> {
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

fn insert(headers: &mut HeaderMap, name: header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

fn system_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or_default())
}

#[cfg(test)]
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
}
