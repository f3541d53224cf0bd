//! `GET /healthz`: liveness, with the number of serving instances.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use crate::AdminState;

pub(crate) fn router() -> Router<AdminState> {
    Router::new().route("/healthz", get(healthz))
}

async fn healthz(State(state): State<AdminState>) -> Json<Value> {
    Json(json!({ "status": "ok", "instances": state.pool.instances().len() }))
}
