//! `/admin/...`: the pool's state, and replacing an instance by hand.

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;

use crate::AppState;
use crate::error::AppError;
use crate::pool::{InstanceStatus, ReplaceReason};
use crate::procstat::ProcessMemory;

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/admin/pool", get(pool))
        .route("/admin/pool/instances/{id}/replace", post(replace))
}

/// `GET /admin/pool`.
#[derive(Debug, Serialize)]
pub(crate) struct PoolReport {
    pub(crate) instances: Vec<InstanceStatus>,
    /// Sum of every instance's linear memory.
    pub(crate) total_memory_bytes: u64,
    pub(crate) process: ProcessMemory,
    /// Requests waiting for an idle instance, and how many may.
    pub(crate) queue_waiting: usize,
    pub(crate) queue_capacity: usize,
    pub(crate) instance_memory_cap_bytes: u64,
    pub(crate) replacements: BTreeMap<ReplaceReason, u64>,
}

async fn pool(State(state): State<AppState>) -> Json<PoolReport> {
    let instances = state.pool.instances();
    Json(PoolReport {
        total_memory_bytes: instances.iter().map(|i| i.memory_bytes).sum(),
        instances,
        process: ProcessMemory::read(),
        queue_waiting: state.pool.waiting(),
        queue_capacity: state.pool.config().queue_capacity,
        instance_memory_cap_bytes: state.pool.runtime().limits().memory_cap,
        replacements: state.pool.replacements(),
    })
}

/// `POST /admin/pool/instances/{id}/replace`: drain the instance and replace
/// it (at once if idle, else when its request ends). 202 when accepted.
async fn replace(
    State(state): State<AppState>,
    Path(id): Path<u64>,
) -> Result<StatusCode, AppError> {
    if state.pool.drain(id, ReplaceReason::Requested).await {
        Ok(StatusCode::ACCEPTED)
    } else {
        Err(AppError::NoSuchInstance(id))
    }
}
