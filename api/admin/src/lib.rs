//! What an operator asks of a running gateway: `/admin/...` (the pool,
//! replacing an instance by hand, the estimator and its settings, the
//! samples as CSV), `/healthz` and `/metrics` (Prometheus).
//!
//! - `operations`: `/admin/...`; every route takes an admin.
//! - `health`: `GET /healthz`.
//! - `metrics`: `GET /metrics`.

mod health;
mod metrics;
mod operations;

use std::sync::Arc;

use auth::Authenticator;
use axum::Router;
use axum::extract::FromRef;
use file_service::FileService;
use storage_host::pool::Pool;
use storage_host::recycler::Recycler;
use volume::Volume;

/// What the operator's routes read: the pool, the recycler, and the file
/// service (for unfinished uploads and integrity failures).
#[derive(Debug, Clone)]
pub struct AdminState {
    pub files: FileService,
    pub pool: Arc<Pool>,
    pub recycler: Arc<Recycler>,
    pub auth: Arc<Authenticator>,
    /// The stored samples, served as CSV.
    pub volume: Arc<Volume>,
}

impl FromRef<AdminState> for Arc<Authenticator> {
    fn from_ref(state: &AdminState) -> Self {
        state.auth.clone()
    }
}

/// `/admin/...`, `/healthz` and `/metrics`.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .merge(operations::router())
        .merge(health::router())
        .merge(metrics::router())
        .with_state(state)
}
