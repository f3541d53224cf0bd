//! `/files/...`: store, fetch, describe, list and delete files.
//!
//! This layer speaks HTTP: it validates paths and parses headers, leases an
//! instance with the request's bytes reserved, and only then lets the guest
//! read the body from the socket (or stream a verified file back to it).
//! Storage semantics (hashing, verification, conditional and range answers)
//! live in the guest. Every handler takes a [`Caller`]: the files it reaches
//! are its owner's, and no other tree's (another user's file is simply not
//! found). `POST /files/{path}?share` makes a share link (see `share`).
//! Writes honour WebDAV's locks (`dav::check_locks`): a locked file or
//! folder changes only for a request whose `If` header names the lock.

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

use volume::{FilePath, Owner, Prefix};

use crate::AppState;
use crate::auth::Caller;
use crate::dav::{self, Change};
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
                .post(post_file)
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
            created: rfc3339(meta.created_ms),
            modified: rfc3339(meta.modified_ms),
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
    /// A signed-in user's bytes in use and quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

/// `?meta`: the file's metadata, and a signed-in user's usage.
#[derive(Debug, Serialize)]
struct MetaAndUsage {
    #[serde(flatten)]
    meta: MetaView,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<Usage>,
}

#[derive(Debug, Serialize)]
struct Usage {
    used: u64,
    /// `null`: no quota.
    quota: Option<u64>,
}

/// The usage to show `caller` (none on an open gateway).
async fn usage(state: &AppState, caller: &Caller) -> Result<Option<Usage>, AppError> {
    let Some(user) = caller.user() else {
        return Ok(None);
    };
    let used = state
        .volume
        .accounts()
        .usage(user.owner())
        .await
        .map_err(|error| AppError::from_volume(error, "usage"))?;
    Ok(Some(Usage {
        used,
        quota: user.quota,
    }))
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

/// Whether the query string has the parameter `name` (with or without a value).
pub(crate) fn has_param(uri: &Uri, name: &str) -> bool {
    uri.query().is_some_and(|query| {
        query.split('&').any(|pair| {
            pair == name
                || pair
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('='))
        })
    })
}

async fn list_root(
    state: State<AppState>,
    caller: Caller,
    params: Query<ListParams>,
) -> Result<Response, AppError> {
    list(state, caller, Prefix::root(), params).await
}

async fn get_file(
    state: State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let raw = raw_path(&uri);
    if raw.ends_with('/') {
        let params = Query::try_from_uri(&uri).map_err(|e| AppError::BadRequest(e.body_text()))?;
        return list(state, caller, Prefix::from_url(raw)?, params).await;
    }
    let path = FilePath::from_url(raw)?;
    if has_param(&uri, "meta") {
        let request = FetchRequest {
            path: path.as_str().to_owned(),
            want_body: false,
            range: None,
            if_none_match: Vec::new(),
        };
        let (fetched, _) = fetch(&state, caller.owner(), request, &path).await?;
        return Ok(Json(MetaAndUsage {
            meta: MetaView::from(&fetched.meta),
            usage: usage(&state, &caller).await?,
        })
        .into_response());
    }
    read_file(&state, caller.owner(), &path, &headers, Read::Content).await
}

async fn head_file(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let path = FilePath::from_url(raw_path(&uri))?;
    read_file(&state, caller.owner(), &path, &headers, Read::Headers).await
}

/// How a file is asked for: `GET` (the content) or `HEAD` (headers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    Content,
    Headers,
}

/// `GET` or `HEAD` of `owner`'s file `path`: the whole of it or a range,
/// verified, or 304 when `If-None-Match` matches.
pub(crate) async fn read_file(
    state: &AppState,
    owner: Owner,
    path: &FilePath,
    headers: &HeaderMap,
    read: Read,
) -> Result<Response, AppError> {
    let want_body = read == Read::Content;
    let request = FetchRequest {
        path: path.as_str().to_owned(),
        want_body,
        range: want_body.then(|| parse_range(headers)).flatten(),
        if_none_match: parse_if_none_match(headers),
    };
    let (fetched, body) = fetch(state, owner, request, path).await?;
    Ok(file_response(&fetched.meta, fetched.body, body))
}

/// Run `request` on an instance. When the guest prepared content, the
/// instance stays leased while it streams that content into the returned
/// body, a chunk at a time.
async fn fetch(
    state: &AppState,
    owner: Owner,
    request: FetchRequest,
    path: &FilePath,
) -> Result<(Fetched, Body), AppError> {
    // The guest reads (and verifies) the whole file even for a range, so
    // the request reserves the file's size; an unknown path reserves
    // nothing and the guest answers 404. The row read here is handed to
    // the call, which starts from it rather than asking the index again.
    let looked_up = if request.want_body {
        state.volume.stat(owner, path).await.ok()
    } else {
        None
    };
    let body_size = looked_up
        .as_ref()
        .map_or(BodySize::None, |meta| BodySize::Known(meta.size));
    let lease = state.pool.lease(body_size).await?;
    let (head, headed) = oneshot::channel();
    let (chunks, received) = mpsc::channel(ResponseSink::CHANNEL_CHUNKS);
    let answer = lease.spawn(move |instance| {
        Box::pin(async move {
            let fetched = instance.fetch(owner, request, looked_up).await?;
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
    // Stored content is the uploader's, served from this origin: never let
    // a browser run it here (it could read the viewer's session), sniff a
    // type into it, or a shared cache hand one user's file to another.
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
    headers.insert(
        header::VARY,
        HeaderValue::from_static("Authorization, Cookie"),
    );
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
    caller: Caller,
    prefix: Prefix,
    Query(params): Query<ListParams>,
) -> Result<Response, AppError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let lease = state.pool.lease(BodySize::None).await?;
    let listed = prefix.as_str().to_owned();
    let owner = caller.owner();
    let listing = lease
        .run(move |instance| {
            Box::pin(async move {
                instance
                    .list(owner, &listed, params.after.as_deref(), limit)
                    .await
            })
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
        usage: usage(&state, &caller).await?,
    })
    .into_response())
}

/// `POST /files/{path}`: store, or with `?share` make a share link.
async fn post_file(
    state: State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, AppError> {
    if has_param(&uri, "share") {
        let path = FilePath::from_url(raw_path(&uri))?;
        return super::share::create(&state, &caller, &path, &uri, &headers).await;
    }
    let raw = raw_path(&uri);
    if has_param(&uri, "folder") {
        if !raw.ends_with('/') {
            return Err(AppError::BadRequest(
                "?folder makes a folder: its path ends with /".into(),
            ));
        }
        let folder = Prefix::from_url(raw)?;
        let parent = dav::parent_key_of(folder.as_str());
        dav::check_locks(&state, caller.owner(), &headers, &[Change::One(parent)]).await?;
        return make_folder(&state, &caller, &folder).await;
    }
    store_file(state, caller, uri, headers, body).await
}

/// `POST /files/{dir}/?folder`: make an empty folder (201; 200 if it was
/// made before). It lists, and stays, until deleted.
async fn make_folder(
    state: &AppState,
    caller: &Caller,
    folder: &Prefix,
) -> Result<Response, AppError> {
    let made = state
        .volume
        .make_folder(caller.owner(), folder)
        .await
        .map_err(|error| AppError::from_volume(error, folder.as_str()))?;
    let status = if made {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(serde_json::json!({ "path": folder.as_str() }))).into_response())
}

async fn store_file(
    State(state): State<AppState>,
    caller: Caller,
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
    let parent = dav::parent_key_of(path.as_str());
    let changes = [Change::One(path.as_str()), Change::One(parent)];
    dav::check_locks(&state, caller.owner(), &headers, &changes).await?;
    let meta = store(&state, &caller, &path, &headers, body).await?;
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

/// Store the request's body as `caller`'s file `path` through an instance
/// (hashed there, durable before this returns): the REST API's `PUT` and
/// WebDAV's. A declared body over the size limit or the quota is refused
/// before a byte of it is read.
pub(crate) async fn store(
    state: &AppState,
    caller: &Caller,
    path: &FilePath,
    headers: &HeaderMap,
    body: Body,
) -> Result<FileMeta, AppError> {
    let owner = caller.owner();
    // Refuse a declared oversize body before reading a byte of it.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|declared| declared > state.max_body) {
        return Err(AppError::BodyTooLarge {
            limit: state.max_body,
        });
    }
    // The same for the quota: what is left of it (plus the file this
    // replaces). The volume checks again as it commits, under a lock.
    let room = quota_room(state, caller, path).await?;
    if let Some(room) = room
        && declared.is_some_and(|declared| declared > room)
    {
        return Err(quota_exceeded(room));
    }
    let limit = room.map_or(state.max_body, |room| room.min(state.max_body));
    // Wait for memory and an instance holding no body: until then the
    // client is held by TCP back-pressure.
    let lease = state
        .pool
        .lease(declared.map_or(BodySize::Unknown, BodySize::Known))
        .await?;
    let upload = Upload::new(body, declared, limit, state.volume.stage());
    let request = StoreRequest {
        path: path.as_str().to_owned(),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned),
        create_only: parse_if_none_match(headers).iter().any(|tag| tag == "*"),
    };
    lease
        .run(move |instance| Box::pin(instance.store(owner, request, upload)))
        .await?
        .map_err(|error| match AppError::from_handler(error, path.as_str()) {
            // An undeclared body cut off at what the quota left.
            AppError::BodyTooLarge { limit } if limit < state.max_body => quota_exceeded(limit),
            other => other,
        })
}

/// The bytes `caller` may still store at `path` (their quota, less what
/// their other files take); `None` without a quota.
async fn quota_room(
    state: &AppState,
    caller: &Caller,
    path: &FilePath,
) -> Result<Option<u64>, AppError> {
    let Some(quota) = caller.user().and_then(|user| user.quota) else {
        return Ok(None);
    };
    let owner = caller.owner();
    let used = state
        .volume
        .accounts()
        .usage(owner)
        .await
        .map_err(|error| AppError::from_volume(error, path.as_str()))?;
    let replaced = state
        .volume
        .stat(owner, path)
        .await
        .map_or(0, |meta| meta.size);
    Ok(Some(quota.saturating_sub(used.saturating_sub(replaced))))
}

fn quota_exceeded(room: u64) -> AppError {
    AppError::QuotaExceeded(format!(
        "the upload is larger than the {room} bytes left of your quota"
    ))
}

async fn delete_file(
    State(state): State<AppState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let raw = raw_path(&uri);
    if has_param(&uri, "recursive") && !raw.ends_with('/') {
        return Err(AppError::BadRequest(
            "?recursive deletes a folder: its path ends with /".into(),
        ));
    }
    if raw.ends_with('/') && has_param(&uri, "recursive") {
        // `DELETE /files/{dir}/?recursive`: the folder and all it holds.
        let folder = Prefix::from_url(raw)?;
        let parent = dav::parent_key_of(folder.as_str());
        let changes = [Change::Tree(folder.as_str()), Change::One(parent)];
        dav::check_locks(&state, caller.owner(), &headers, &changes).await?;
        state
            .volume
            .delete_folder(caller.owner(), &folder)
            .await
            .map_err(|error| AppError::from_volume(error, folder.as_str()))?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let path = FilePath::from_url(raw)?;
    let parent = dav::parent_key_of(path.as_str());
    let changes = [Change::One(path.as_str()), Change::One(parent)];
    dav::check_locks(&state, caller.owner(), &headers, &changes).await?;
    delete(&state, caller.owner(), &path).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Delete `owner`'s file `path` through an instance: the REST API's
/// `DELETE` and WebDAV's.
pub(crate) async fn delete(
    state: &AppState,
    owner: Owner,
    path: &FilePath,
) -> Result<(), AppError> {
    let lease = state.pool.lease(BodySize::None).await?;
    let deleted = path.as_str().to_owned();
    lease
        .run(move |instance| Box::pin(async move { instance.delete(owner, &deleted).await }))
        .await?
        .map_err(|error| AppError::from_handler(error, path.as_str()))
}

/// A single `bytes=` range; anything else (several ranges, another unit, bad
/// syntax) is ignored, as RFC 9110 allows, and the whole file is sent.
pub(crate) fn parse_range(headers: &HeaderMap) -> Option<ByteRange> {
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
pub(crate) fn parse_if_none_match(headers: &HeaderMap) -> Vec<String> {
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

/// Unix milliseconds as RFC 3339, UTC, to the millisecond.
pub(crate) fn rfc3339(ms: i64) -> String {
    humantime::format_rfc3339_millis(system_time(ms)).to_string()
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
