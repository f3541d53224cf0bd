//! HTTP routes, one module per area; [`crate::app`] merges their routers.

pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod files;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod share;
pub(crate) mod web;

use std::time::Duration;

use axum::body::{Body, Bytes};

use crate::error::AppError;

/// How long a small body (a sign-in, estimator settings) may take to
/// arrive: these routes read it whole, so a trickle must not hold them.
const SMALL_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Read a small body whole: at most `limit` bytes (else 413), within
/// [`SMALL_BODY_TIMEOUT`] (else 408).
pub(crate) async fn read_small_body(body: Body, limit: usize) -> Result<Bytes, AppError> {
    match tokio::time::timeout(SMALL_BODY_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(AppError::RequestTimeout(format!(
            "the body did not arrive within {SMALL_BODY_TIMEOUT:?}"
        ))),
        Ok(Err(error)) => {
            let too_large = error
                .into_inner()
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            Err(if too_large {
                AppError::BodyTooLarge {
                    limit: limit as u64,
                }
            } else {
                AppError::BadRequest("the body could not be read".into())
            })
        }
        Ok(Ok(bytes)) => Ok(bytes),
    }
}
