//! `/files/...`: store, fetch, describe, list and delete files.
//!
//! An adapter of the file service (`crate::service`): it validates paths,
//! parses headers and answers JSON; the service does the rest (instances,
//! quota, memory, locks). Every handler takes a [`Caller`]: the files it
//! reaches are its owner's, and no other tree's (another user's file is
//! simply not found). `POST /files/{path}?share` makes a share link (see
//! `share`). Writes honour WebDAV's locks: a locked file or folder changes
//! only for a request whose `If` header submits the lock's token.

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use serde::{Deserialize, Serialize};

use volume::{Entry, FilePath, Prefix};

use crate::meta::MetaView;
use crate::{RestState, history};
use api_common::ApiError;
use api_common::answer::file_response;
use api_common::headers::{
    content_wanted, has_param, insert, parse_if_none_match, rfc3339, store_options,
    submitted_tokens,
};
use auth::Caller;
use auth::secrets::{self, ShareToken};
use file_service::{Usage, Want};

/// The longest a share link may be asked to last: ten years.
const MAX_EXPIRY_SECONDS: u64 = 10 * 365 * 24 * 3600;

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

pub(crate) fn router() -> Router<RestState> {
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

#[derive(Debug, Deserialize)]
struct ListParams {
    after: Option<String>,
    limit: Option<u32>,
}

/// The still-encoded path after `/files/`.
fn raw_path(uri: &Uri) -> &str {
    uri.path().strip_prefix("/files/").unwrap_or_default()
}

async fn list_root(
    state: State<RestState>,
    caller: Caller,
    params: Query<ListParams>,
) -> Result<Response, ApiError> {
    list(state, caller, Prefix::root(), params).await
}

async fn get_file(
    state: State<RestState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let raw = raw_path(&uri);
    if raw.ends_with('/') {
        let params = Query::try_from_uri(&uri).map_err(|e| ApiError::BadRequest(e.body_text()))?;
        return list(state, caller, Prefix::from_url(raw)?, params).await;
    }
    let path = FilePath::from_url(raw)?;
    if has_param(&uri, "versions") {
        return history::versions(&state, &caller, &path).await;
    }
    if let Some(version) = history::VersionParams::of(&uri)?.version {
        return history::read_version(&state, &caller, &path, &version, &headers).await;
    }
    if has_param(&uri, "meta") {
        let read = state
            .files
            .read(caller.owner(), &path, Want::Headers, Vec::new())
            .await?;
        return Ok(Json(MetaAndUsage {
            meta: MetaView::from(&read.meta),
            usage: state.files.usage(&caller).await?,
        })
        .into_response());
    }
    let want = content_wanted(&headers);
    let read = state
        .files
        .read(caller.owner(), &path, want, parse_if_none_match(&headers))
        .await?;
    Ok(file_response(read))
}

async fn head_file(
    State(state): State<RestState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let path = FilePath::from_url(raw_path(&uri))?;
    let read = state
        .files
        .read(
            caller.owner(),
            &path,
            Want::Headers,
            parse_if_none_match(&headers),
        )
        .await?;
    Ok(file_response(read))
}

async fn list(
    State(state): State<RestState>,
    caller: Caller,
    prefix: Prefix,
    Query(params): Query<ListParams>,
) -> Result<Response, ApiError> {
    let limit = params.limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
    let listing = state
        .files
        .list(caller.owner(), &prefix, params.after, limit)
        .await?;
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
        usage: state.files.usage(&caller).await?,
    })
    .into_response())
}

/// `POST /files/{path}`: store, or with `?share` make a share link.
async fn post_file(
    state: State<RestState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    if has_param(&uri, "share") {
        let path = FilePath::from_url(raw_path(&uri))?;
        return create_share(&state, &caller, &path, &uri, &headers).await;
    }
    let raw = raw_path(&uri);
    if let Some(version) = history::VersionParams::of(&uri)?.restore {
        let path = FilePath::from_url(raw)?;
        return history::restore_version(&state, &caller, &path, &version).await;
    }
    if has_param(&uri, "folder") {
        if !raw.ends_with('/') {
            return Err(ApiError::BadRequest(
                "?folder makes a folder: its path ends with /".into(),
            ));
        }
        let folder = Prefix::from_url(raw)?;
        let tokens = submitted_tokens(&headers);
        let made = state
            .files
            .make_folder(caller.owner(), &folder, &tokens)
            .await?;
        let status = if made {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        return Ok((status, Json(serde_json::json!({ "path": folder.as_str() }))).into_response());
    }
    store_file(state, caller, uri, headers, body).await
}

async fn store_file(
    State(state): State<RestState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let raw = raw_path(&uri);
    if raw.ends_with('/') {
        return Err(ApiError::BadRequest(
            "cannot store a file at a folder path (ending in /)".into(),
        ));
    }
    let path = FilePath::from_url(raw)?;
    let tokens = submitted_tokens(&headers);
    let meta = state
        .files
        .store(&caller, &path, body, store_options(&headers), &tokens)
        .await?;
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

#[derive(Debug, Serialize)]
struct ShareView {
    /// Absolute when the request named its host, else from the root.
    url: String,
    token: String,
    path: String,
    /// RFC 3339, UTC; `null`: never.
    expires: Option<String>,
}

#[derive(Debug, Deserialize)]
struct ShareParams {
    expires: Option<u64>,
}

/// `POST /files/{path}?share`: make a link to `caller`'s file `path`
/// (which must exist); `/share/{token}` serves it.
async fn create_share(
    state: &RestState,
    caller: &Caller,
    path: &FilePath,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let params: ShareParams = serde_urlencoded::from_str(uri.query().unwrap_or_default())
        .map_err(|e| ApiError::BadRequest(format!("invalid share parameters: {e}")))?;
    let expires_ms = match params.expires {
        None => None,
        Some(seconds @ 1..=MAX_EXPIRY_SECONDS) => {
            Some(volume::now_ms().saturating_add(i64::try_from(seconds * 1000).unwrap_or(i64::MAX)))
        }
        Some(_) => {
            return Err(ApiError::BadRequest(format!(
                "expires must be between 1 and {MAX_EXPIRY_SECONDS} seconds"
            )));
        }
    };
    let id = secrets::random_secret()[..22].to_owned();
    state.files.share(caller, path, &id, expires_ms).await?;
    let token = state.auth.signer().sign(&ShareToken { id, expires_ms });
    let relative = format!("/share/{token}");
    let url = match headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
    {
        Some(host) => {
            let scheme = match headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
            {
                Some(proto) if proto.eq_ignore_ascii_case("https") => "https",
                _ => "http",
            };
            format!("{scheme}://{host}{relative}")
        }
        None => relative,
    };
    let view = ShareView {
        url,
        token,
        path: path.as_str().to_owned(),
        expires: expires_ms.map(rfc3339),
    };
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn delete_file(
    State(state): State<RestState>,
    caller: Caller,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let raw = raw_path(&uri);
    if has_param(&uri, "recursive") && !raw.ends_with('/') {
        return Err(ApiError::BadRequest(
            "?recursive deletes a folder: its path ends with /".into(),
        ));
    }
    if raw.ends_with('/') && has_param(&uri, "recursive") {
        // `DELETE /files/{dir}/?recursive`: the folder and all it holds.
        let folder = Prefix::from_url(raw)?;
        let tokens = submitted_tokens(&headers);
        state
            .files
            .delete_folder(caller.owner(), &folder, &tokens)
            .await?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let path = FilePath::from_url(raw)?;
    let tokens = submitted_tokens(&headers);
    state
        .files
        .delete_file(caller.owner(), &path, &tokens)
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
