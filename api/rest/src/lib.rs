//! The REST interface of the file service and what a browser needs
//! beside it, one module per area:
//!
//! - `files`: `/files/...`, the REST adapter (store, fetch, list, delete,
//!   make share links).
//! - `history`: a file's versions (`/files/...?versions`, `?version=`,
//!   `?restore=`) and `/trash`: deleted files, restored or removed.
//! - `share`: `/share/...`, share links: a signed, expiring URL to one file.
//! - `uploads`: `/uploads/...`, resumable uploads (tus 1.0).
//! - `sign_in`: `/auth/...`, signing in and out with a session cookie.
//! - `web`: the page (`src/web/index.html`) at `/`.
//! - `cors`: the operator's `--cors-origins` for `/files/` and `/uploads/`
//!   (web apps on other origins, tus clients such as Uppy).

mod cors;
mod files;
mod history;
mod meta;
mod share;
mod sign_in;
mod uploads;
mod web;

use std::sync::Arc;

use auth::Authenticator;
use axum::Router;
use axum::extract::FromRef;
use file_service::FileService;

/// What the REST routes read: the file service, and the authenticator
/// (callers, share-link signatures, session cookies).
#[derive(Debug, Clone)]
pub struct RestState {
    pub files: FileService,
    pub auth: Arc<Authenticator>,
}

impl FromRef<RestState> for Arc<Authenticator> {
    fn from_ref(state: &RestState) -> Self {
        state.auth.clone()
    }
}

/// `/files`, `/trash`, `/share`, `/uploads`, `/auth` and the page.
pub fn router(state: RestState, cors_origins: &[String]) -> Router {
    let mut data = Router::new()
        .merge(files::router())
        .merge(uploads::router());
    if let Some(layer) = cors::layer(cors_origins) {
        data = data.layer(layer);
    }
    Router::new()
        .merge(data)
        .merge(history::router())
        .merge(share::router())
        .merge(sign_in::router())
        .merge(web::router())
        .with_state(state)
}
