//! A small request body (a sign-in, estimator settings, a WebDAV XML
//! body) read whole: bounded in size, and in time so a trickle cannot hold
//! a handler.

use std::time::Duration;

use axum::body::{Body, Bytes};

use crate::ApiError;

/// How long a small body may take to arrive.
const SMALL_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Read a small body whole: at most `limit` bytes (else 413), within
/// [`SMALL_BODY_TIMEOUT`] (else 408).
pub async fn read_small_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(SMALL_BODY_TIMEOUT, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(ApiError::RequestTimeout(format!(
            "the body did not arrive within {SMALL_BODY_TIMEOUT:?}"
        ))),
        Ok(Err(error)) => {
            let too_large = error
                .into_inner()
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some();
            Err(if too_large {
                ApiError::BodyTooLarge {
                    limit: limit as u64,
                }
            } else {
                ApiError::BadRequest("the body could not be read".into())
            })
        }
        Ok(Ok(bytes)) => Ok(bytes),
    }
}
