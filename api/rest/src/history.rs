//! A file's history and the trash, over REST (one truth with S3's
//! versions: a version made through either is listed, read and restored
//! by both):
//!
//! - `GET /files/{path}?versions`: every version, newest first.
//! - `GET /files/{path}?version=ID`: that version's content.
//! - `POST /files/{path}?restore=ID`: that version is the current file
//!   again (a new version of its content).
//! - `GET /trash[?before=CURSOR&limit=N]`: deleted files, newest first.
//! - `POST /trash/{id}/restore`: back at its path (or beside it).
//! - `DELETE /trash/{id}`: gone for good, with its versions before it.
//! - `DELETE /trash`: everything in the trash gone for good.

use api_common::ApiError;
use api_common::answer::file_response;
use api_common::headers::rfc3339;
use auth::Caller;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use volume::{FilePath, Version, VersionLock};

use api_common::headers::parse_if_none_match;

use crate::RestState;
use crate::meta::MetaView;

pub(crate) fn router() -> Router<RestState> {
    Router::new()
        .route("/trash", delete(empty).get(list_trash))
        .route("/trash/", delete(empty).get(list_trash))
        .route("/trash/{id}", delete(purge))
        .route("/trash/{id}/restore", post(restore_trashed))
}

/// The version parameters of `/files/{path}`.
#[derive(Debug, Deserialize)]
pub(crate) struct VersionParams {
    pub(crate) version: Option<String>,
    pub(crate) restore: Option<String>,
}

impl VersionParams {
    pub(crate) fn of(uri: &Uri) -> Result<Self, ApiError> {
        Query::<Self>::try_from_uri(uri)
            .map(|Query(params)| params)
            .map_err(|error| ApiError::BadRequest(error.body_text()))
    }
}

/// One version, as the history lists it.
#[derive(Debug, Serialize)]
struct VersionView {
    version_id: String,
    /// The current file (the latest version of a path that is not deleted).
    latest: bool,
    /// A delete: the path read as absent from then.
    delete_marker: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    modified: String,
    /// What object lock holds it with, if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    lock: Option<LockView>,
}

/// What holds a version under object lock: nothing removes it meanwhile.
#[derive(Debug, Serialize)]
struct LockView {
    /// `GOVERNANCE` or `COMPLIANCE`, with the date it holds until.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retain_until: Option<String>,
    legal_hold: bool,
}

impl LockView {
    fn of(lock: VersionLock) -> Self {
        let retained = lock.retained(volume::now_ms());
        Self {
            mode: retained.map(|retention| retention.mode.as_str()),
            retain_until: retained.map(|retention| rfc3339(retention.until_ms)),
            legal_hold: lock.held_legally(),
        }
    }
}

/// The lock holding `version_id` of `path` now, as the page shows it.
async fn lock_view(
    state: &RestState,
    caller: &Caller,
    path: &str,
    version_id: &str,
) -> Result<Option<LockView>, ApiError> {
    let Ok(path) = FilePath::parse(path) else {
        return Ok(None);
    };
    let lock = state
        .files
        .holding_lock(caller.owner(), &path, version_id)
        .await?;
    Ok(lock.map(LockView::of))
}

impl From<&Version> for VersionView {
    fn from(version: &Version) -> Self {
        match version {
            Version::File { meta, latest } => Self {
                version_id: meta.version_id.clone(),
                latest: *latest,
                delete_marker: false,
                size: Some(meta.size),
                sha256: Some(meta.sha256.clone()),
                modified: rfc3339(meta.modified_ms),
                lock: None,
            },
            Version::DeleteMarker {
                version_id,
                made_ms,
                latest,
                ..
            } => Self {
                version_id: version_id.clone(),
                latest: *latest,
                delete_marker: true,
                size: None,
                sha256: None,
                modified: rfc3339(*made_ms),
                lock: None,
            },
        }
    }
}

/// `GET /files/{path}?versions`.
pub(crate) async fn versions(
    state: &RestState,
    caller: &Caller,
    path: &FilePath,
) -> Result<Response, ApiError> {
    let versions = state.files.versions_of(caller.owner(), path).await?;
    if versions.is_empty() {
        return Err(ApiError::NotFound(format!("no version of {path}")));
    }
    let mut views = Vec::with_capacity(versions.len());
    for version in &versions {
        let mut view = VersionView::from(version);
        if !view.delete_marker {
            view.lock = lock_view(state, caller, path.as_str(), &view.version_id).await?;
        }
        views.push(view);
    }
    Ok(Json(serde_json::json!({ "path": path.as_str(), "versions": views })).into_response())
}

/// `GET /files/{path}?version=ID`: that version's content, as a file.
pub(crate) async fn read_version(
    state: &RestState,
    caller: &Caller,
    path: &FilePath,
    version_id: &str,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let meta = match state
        .files
        .version(caller.owner(), path, version_id)
        .await?
    {
        Version::File { meta, .. } => meta,
        Version::DeleteMarker { .. } => {
            return Err(ApiError::Service(
                file_service::ServiceError::DeleteMarker {
                    path: path.to_string(),
                    version_id: version_id.to_owned(),
                },
            ));
        }
    };
    let want = api_common::headers::content_wanted(headers);
    let read = state
        .files
        .read_looked_up(
            caller.owner(),
            path,
            want,
            parse_if_none_match(headers),
            Some(meta),
        )
        .await?;
    Ok(file_response(read))
}

/// `POST /files/{path}?restore=ID`.
pub(crate) async fn restore_version(
    state: &RestState,
    caller: &Caller,
    path: &FilePath,
    version_id: &str,
) -> Result<Response, ApiError> {
    let meta = state
        .files
        .restore_version(caller.owner(), path, version_id)
        .await?;
    Ok(Json(MetaView::from(&meta)).into_response())
}

#[derive(Debug, Deserialize)]
struct TrashParams {
    before: Option<i64>,
    limit: Option<usize>,
}

/// A deleted file, as the trash lists it.
#[derive(Debug, Serialize)]
struct TrashedView {
    /// What names it to restore or remove.
    id: i64,
    deleted: String,
    #[serde(flatten)]
    file: MetaView,
    /// What object lock holds the deleted file with, if anything: delete
    /// forever is refused meanwhile.
    #[serde(skip_serializing_if = "Option::is_none")]
    lock: Option<LockView>,
}

async fn list_trash(
    State(state): State<RestState>,
    caller: Caller,
    Query(params): Query<TrashParams>,
) -> Result<Response, ApiError> {
    let page = state
        .files
        .trash(caller.owner(), params.before, params.limit.unwrap_or(100))
        .await?;
    let mut items = Vec::with_capacity(page.items.len());
    for item in &page.items {
        items.push(TrashedView {
            id: item.id,
            deleted: rfc3339(item.deleted_ms),
            file: MetaView::from(&item.file),
            lock: lock_view(&state, &caller, &item.file.path, &item.file.version_id).await?,
        });
    }
    let mut body = serde_json::json!({ "items": items });
    if let Some(before) = page.next_before {
        body["next_before"] = before.into();
    }
    if let Some(usage) = state.files.usage(&caller).await? {
        body["usage"] = serde_json::to_value(usage).unwrap_or_default();
    }
    Ok(Json(body).into_response())
}

async fn restore_trashed(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    let meta = state.files.restore_trashed(caller.owner(), id).await?;
    Ok(Json(MetaView::from(&meta)).into_response())
}

async fn purge(
    State(state): State<RestState>,
    caller: Caller,
    Path(id): Path<i64>,
) -> Result<Response, ApiError> {
    state.files.purge_trashed(caller.owner(), id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn empty(State(state): State<RestState>, caller: Caller) -> Result<Response, ApiError> {
    let removed = state.files.empty_trash(caller.owner()).await?;
    Ok(Json(serde_json::json!({ "removed": removed })).into_response())
}
