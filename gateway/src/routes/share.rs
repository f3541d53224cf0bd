//! Share links: `POST /files/{path}?share[&expires=SECONDS]` makes one;
//! anyone may `GET`/`HEAD /share/{token}` until it expires or its owner
//! revokes it with `DELETE /share/{token}`.
//!
//! A token is `ID.EXPIRES.SIGNATURE`, signed with HMAC-SHA256 under a key
//! every gateway on the database shares. A token whose signature does not
//! verify is refused (403) before the database is asked; a verified one
//! names a row, which says whose file at which path: a changed token can
//! never name another file. Expired, revoked or vanished: 404.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use volume::FilePath;
use volume::accounts::Share;

use crate::AppState;
use crate::auth::Caller;
use crate::auth::secrets::{self, ShareToken};
use crate::error::AppError;
use crate::routes::files::Read;

/// The longest a link may be asked to last: ten years.
const MAX_EXPIRY_SECONDS: u64 = 10 * 365 * 24 * 3600;

pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/share/{token}", get(download).head(head).delete(revoke))
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

/// Make a link to `caller`'s file `path` (which must exist).
pub(crate) async fn create(
    state: &AppState,
    caller: &Caller,
    path: &FilePath,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Response, AppError> {
    let params: ShareParams = serde_urlencoded::from_str(uri.query().unwrap_or_default())
        .map_err(|e| AppError::BadRequest(format!("invalid share parameters: {e}")))?;
    let expires_ms = match params.expires {
        None => None,
        Some(seconds @ 1..=MAX_EXPIRY_SECONDS) => {
            Some(volume::now_ms().saturating_add(i64::try_from(seconds * 1000).unwrap_or(i64::MAX)))
        }
        Some(_) => {
            return Err(AppError::BadRequest(format!(
                "expires must be between 1 and {MAX_EXPIRY_SECONDS} seconds"
            )));
        }
    };
    let owner = caller.owner();
    let meta = state
        .volume
        .stat(owner, path)
        .await
        .map_err(|error| AppError::from_volume(error, path.as_str()))?;
    let id = secrets::random_secret()[..22].to_owned();
    state
        .auth
        .accounts()
        .add_share(&id, owner, path, meta.created_ms, expires_ms)
        .await
        .map_err(|error| AppError::from_volume(error, path.as_str()))?;
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
        expires: expires_ms.map(super::files::rfc3339),
    };
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

/// The live share `token` names: 403 if its signature fails, 404 if it is
/// unknown, revoked or expired, or its file was deleted (a file made again
/// at the path since is another file).
async fn live_share(state: &AppState, token: &str) -> Result<(Share, FilePath), AppError> {
    let token = state
        .auth
        .signer()
        .verify(token)
        .ok_or(AppError::BadShare)?;
    let gone = || AppError::NotFound("this share link (expired, revoked or unknown)".into());
    let share = state
        .auth
        .accounts()
        .share(&token.id)
        .await
        .map_err(|error| AppError::from_volume(error, "share"))?
        .ok_or_else(gone)?;
    if share.expires_ms != token.expires_ms || !share.is_live(volume::now_ms()) {
        return Err(gone());
    }
    let path = FilePath::parse(&share.path)?;
    let meta = state
        .volume
        .stat(share.owner, &path)
        .await
        .map_err(|_| gone())?;
    if meta.created_ms != share.file_created_ms {
        return Err(gone());
    }
    Ok((share, path))
}

async fn download(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let (share, path) = live_share(&state, &token).await?;
    super::files::read_file(&state, share.owner, &path, &headers, Read::Content).await
}

async fn head(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Result<Response, AppError> {
    let (share, path) = live_share(&state, &token).await?;
    super::files::read_file(&state, share.owner, &path, &headers, Read::Headers).await
}

/// `DELETE /share/{token}`: its owner revokes it.
async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(token): Path<String>,
) -> Result<StatusCode, AppError> {
    let token = state
        .auth
        .signer()
        .verify(&token)
        .ok_or(AppError::BadShare)?;
    let revoked = state
        .auth
        .accounts()
        .revoke_share(&token.id, caller.owner())
        .await
        .map_err(|error| AppError::from_volume(error, "share"))?;
    if revoked {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(AppError::NotFound("this share link".into()))
    }
}
