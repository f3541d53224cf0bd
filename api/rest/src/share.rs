//! Share links: `POST /files/{path}?share[&expires=SECONDS]` makes one (the
//! REST adapter); anyone may `GET`/`HEAD /share/{token}` until it expires or
//! its owner revokes it with `DELETE /share/{token}`. Links of the open tree
//! stop working once a user exists (see `service::shares`).
//!
//! A token is `ID.EXPIRES.SIGNATURE`, signed with HMAC-SHA256 under a key
//! every gateway on the database shares. A token whose signature does not
//! verify is refused (403) before the database is asked; a verified one
//! names a row, which says whose file at which path: a changed token can
//! never name another file. Expired, revoked or vanished: 404.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::get;

use crate::RestState;
use api_common::ApiError;
use api_common::answer::file_response;
use api_common::headers::{content_wanted, parse_if_none_match};
use auth::Caller;
use file_service::{SharedFile, Want};

pub(crate) fn router() -> Router<RestState> {
    Router::new().route("/share/{token}", get(download).head(head).delete(revoke))
}

/// The file the live share `token` names: 403 if its signature fails,
/// 404 if it is unknown, revoked or expired, or its file was deleted.
async fn live_share(state: &RestState, token: &str) -> Result<SharedFile, ApiError> {
    let token = state
        .auth
        .signer()
        .verify(token)
        .ok_or(ApiError::BadShare)?;
    Ok(state.files.shared_file(&token.id, token.expires_ms).await?)
}

async fn download(
    State(state): State<RestState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let shared = live_share(&state, &token).await?;
    let want = content_wanted(&headers);
    let read = state
        .files
        .read(
            shared.owner,
            &shared.path,
            want,
            parse_if_none_match(&headers),
        )
        .await?;
    Ok(file_response(read))
}

async fn head(
    State(state): State<RestState>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let shared = live_share(&state, &token).await?;
    let read = state
        .files
        .read(
            shared.owner,
            &shared.path,
            Want::Headers,
            parse_if_none_match(&headers),
        )
        .await?;
    Ok(file_response(read))
}

/// `DELETE /share/{token}`: its owner revokes it.
async fn revoke(
    State(state): State<RestState>,
    caller: Caller,
    Path(token): Path<String>,
) -> Result<StatusCode, ApiError> {
    let token = state
        .auth
        .signer()
        .verify(&token)
        .ok_or(ApiError::BadShare)?;
    let revoked = state.files.revoke_share(&caller, &token.id).await?;
    if revoked {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("this share link".into()))
    }
}
