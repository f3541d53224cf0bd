//! `/admin/...`: the pool's state, replacing an instance by hand, the
//! estimator's state and settings, and the samples as CSV. Every route
//! takes an [`Admin`]: a user without admin rights gets 403.

use std::collections::BTreeMap;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::AdminState;
use api_common::ApiError;
use auth::Admin;
use storage_host::pool::{InstanceStatus, ReplaceReason};
use storage_host::procstat::ProcessMemory;
use storage_host::recycler::{EstimatorError, EstimatorReport, SettingsChange};

/// Estimator settings are a few fields: anything larger is refused.
const MAX_SETTINGS_BODY: usize = 64 << 10;

pub(crate) fn router() -> Router<AdminState> {
    Router::new()
        .route("/admin/pool", get(pool))
        .route("/admin/pool/instances/{id}/replace", post(replace))
        .route("/admin/estimator", get(estimator).put(change_estimator))
        .route("/admin/samples.csv", get(samples_csv))
        .route("/admin/process-samples.csv", get(process_samples_csv))
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
    /// The memory budget: what the pool may hold in all.
    pub(crate) memory_budget_bytes: u64,
    /// Instance memory plus reserved bytes: what counts against the budget.
    pub(crate) budget_used_bytes: u64,
    /// Bytes admitted requests reserved and have not grown into yet.
    pub(crate) budget_reserved_bytes: u64,
    /// The restart threshold in force, if any.
    pub(crate) threshold_bytes: Option<u64>,
    /// Unfinished resumable uploads (every gateway of this store).
    pub(crate) uploads_in_progress: u64,
    pub(crate) replacements: BTreeMap<ReplaceReason, u64>,
}

async fn pool(_: Admin, State(state): State<AdminState>) -> Json<PoolReport> {
    let instances = state.pool.instances();
    Json(PoolReport {
        total_memory_bytes: instances.iter().map(|i| i.memory_bytes).sum(),
        instances,
        process: ProcessMemory::read(),
        queue_waiting: state.pool.waiting(),
        queue_capacity: state.pool.config().queue_capacity,
        instance_memory_cap_bytes: state.pool.runtime().limits().memory_cap,
        memory_budget_bytes: state.pool.budget().total(),
        budget_used_bytes: state.pool.budget().used(),
        budget_reserved_bytes: state.pool.budget().reserved(),
        threshold_bytes: state.pool.threshold(),
        uploads_in_progress: state.files.uploads_in_progress().await,
        replacements: state.pool.replacements(),
    })
}

/// `POST /admin/pool/instances/{id}/replace`: drain the instance and replace
/// it (at once if idle, else when its request ends). 202 when accepted.
async fn replace(
    _: Admin,
    State(state): State<AdminState>,
    Path(id): Path<u64>,
) -> axum::response::Response {
    if state.pool.drain(id, ReplaceReason::Manual).await {
        StatusCode::ACCEPTED.into_response()
    } else {
        let message = format!("no instance with id {id}");
        let body = serde_json::json!({ "error": "not_found", "message": message });
        (StatusCode::NOT_FOUND, Json(body)).into_response()
    }
}

/// `GET /admin/estimator`.
async fn estimator(_: Admin, State(state): State<AdminState>) -> Json<EstimatorReport> {
    Json(state.recycler.report())
}

/// `PUT /admin/estimator` with a JSON body of any of `mode`, `method`,
/// `alpha`, `threshold` (bytes). Answers with the new state.
async fn change_estimator(
    _: Admin,
    State(state): State<AdminState>,
    body: Body,
) -> Result<Json<EstimatorReport>, ApiError> {
    let body = api_common::body::read_small_body(body, MAX_SETTINGS_BODY).await?;
    let change: SettingsChange = serde_json::from_slice(&body)
        .map_err(|e| ApiError::BadRequest(format!("invalid estimator settings: {e}")))?;
    state
        .recycler
        .update(change)
        .await
        .map(Json)
        .map_err(|error| match error {
            EstimatorError::Invalid(why) => ApiError::BadRequest(why.to_string()),
            EstimatorError::Volume(error) => ApiError::Internal(error.to_string()),
        })
}

#[derive(Debug, Deserialize)]
struct SampleRange {
    /// Unix milliseconds, inclusive.
    from: Option<i64>,
    to: Option<i64>,
}

/// `GET /admin/samples.csv[?from=MS&to=MS]`: every retained instance
/// sample as `timestamp,instance,bytes`, what `estimator threshold` reads.
async fn samples_csv(
    _: Admin,
    State(state): State<AdminState>,
    Query(range): Query<SampleRange>,
) -> Result<impl IntoResponse, ApiError> {
    let samples = state
        .recycler
        .samples(range.from.unwrap_or(i64::MIN), range.to.unwrap_or(i64::MAX))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut csv = Vec::new();
    estimator::write_csv(&mut csv, &samples).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], csv))
}

/// `GET /admin/process-samples.csv[?from=MS&to=MS]`: the gateway's own
/// memory at every sampling round, `timestamp,rss_bytes,private_dirty_bytes`.
async fn process_samples_csv(
    _: Admin,
    State(state): State<AdminState>,
    Query(range): Query<SampleRange>,
) -> Result<impl IntoResponse, ApiError> {
    let samples = state
        .volume
        .samples()
        .process(range.from.unwrap_or(i64::MIN), range.to.unwrap_or(i64::MAX))
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut csv = String::from("timestamp,rss_bytes,private_dirty_bytes\n");
    for sample in samples {
        csv += &format!(
            "{},{},{}\n",
            sample.timestamp_ms, sample.rss_bytes, sample.private_dirty_bytes
        );
    }
    Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], csv))
}
