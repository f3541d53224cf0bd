//! Errors as the REST API and WebDAV answer them: a status code and a JSON
//! body `{error, message}`. An adapter's own mistakes (a bad header, a
//! method it does not serve) sit beside the service's and auth's errors,
//! which are rendered here, not defined here. Internal detail is logged,
//! never sent.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use auth::AuthError;
use file_service::ServiceError;

/// Seconds a client is told to wait after a 503.
const RETRY_AFTER_SECONDS: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Service(#[from] ServiceError),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error("{0}")]
    BadRequest(String),
    #[error("no file at {0}")]
    NotFound(String),
    #[error("the body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: u64 },
    #[error("{0}")]
    RequestTimeout(String),
    #[error("{0}")]
    Forbidden(String),
    /// WebDAV: the request conflicts with the tree (a missing parent, a
    /// lock token that is not this resource's).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// WebDAV: a `Destination` on another server.
    #[error("{0}")]
    BadGateway(String),
    /// A share link whose signature does not verify.
    #[error("this share link is not valid")]
    BadShare,
    /// Anything else; the detail is logged, the client sees a generic message.
    #[error("internal error")]
    Internal(String),
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: String,
}

/// The status and short code of each of the service's errors.
fn service_status(error: &ServiceError) -> (StatusCode, &'static str) {
    match error {
        ServiceError::BadPath(_) => (StatusCode::BAD_REQUEST, "bad_path"),
        ServiceError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        ServiceError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        ServiceError::NoSuchVersion { .. } => (StatusCode::NOT_FOUND, "no_such_version"),
        // A delete marker has no content to read or restore.
        ServiceError::DeleteMarker { .. } => (StatusCode::CONFLICT, "delete_marker"),
        ServiceError::AlreadyExists(_) => (StatusCode::PRECONDITION_FAILED, "already_exists"),
        ServiceError::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
        ServiceError::InstanceMemory { .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, "instance_memory_exceeded")
        }
        ServiceError::OverBudget(_) => (StatusCode::PAYLOAD_TOO_LARGE, "over_memory_budget"),
        ServiceError::RangeNotSatisfiable { .. } => {
            (StatusCode::RANGE_NOT_SATISFIABLE, "range_not_satisfiable")
        }
        ServiceError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        ServiceError::NoSpace => (StatusCode::INSUFFICIENT_STORAGE, "insufficient_storage"),
        ServiceError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
        ServiceError::QuotaExceeded(_) => (StatusCode::INSUFFICIENT_STORAGE, "quota_exceeded"),
        ServiceError::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
        ServiceError::Locked(_) => (StatusCode::LOCKED, "locked"),
        // Object lock: not a WebDAV lock a token lifts, so not 423.
        ServiceError::ObjectLocked(_) => (StatusCode::FORBIDDEN, "object_locked"),
        ServiceError::NoObjectLock(_) => (StatusCode::BAD_REQUEST, "no_object_lock"),
        ServiceError::InvalidBucketState(_) => (StatusCode::CONFLICT, "invalid_bucket_state"),
        ServiceError::PreconditionFailed(_) => {
            (StatusCode::PRECONDITION_FAILED, "precondition_failed")
        }
        ServiceError::Integrity(_) => (StatusCode::INTERNAL_SERVER_ERROR, "integrity_error"),
        ServiceError::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    }
}

impl ApiError {
    /// The status code and the short code of the JSON body.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Service(error) => service_status(error),
            Self::Auth(error) => error.status_and_code(),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Self::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::PreconditionFailed(_) => (StatusCode::PRECONDITION_FAILED, "precondition_failed"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::BadGateway(_) => (StatusCode::BAD_GATEWAY, "bad_gateway"),
            Self::BadShare => (StatusCode::FORBIDDEN, "bad_share"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The service's error for a failure the volume reported about `path`.
    pub fn from_volume(error: volume::VolumeError, path: &str) -> Self {
        Self::Service(ServiceError::from_volume(error, path))
    }
}

impl From<volume::PathError> for ApiError {
    fn from(error: volume::PathError) -> Self {
        Self::Service(ServiceError::BadPath(error))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        match &self {
            Self::Service(ServiceError::Integrity(detail)) => {
                tracing::error!(%detail, "integrity check failed");
            }
            Self::Service(ServiceError::Internal(detail))
            | Self::Auth(AuthError::Internal(detail))
            | Self::Internal(detail) => tracing::error!(%detail, "internal error"),
            _ => {}
        }
        let body = ErrorBody {
            error: code,
            message: self.to_string(),
        };
        let mut response = (status, Json(body)).into_response();
        let headers = response.headers_mut();
        match self {
            Self::Auth(error) => error.add_headers(headers),
            Self::Service(ServiceError::Unavailable(_)) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            }
            Self::Service(ServiceError::RangeNotSatisfiable { size }) => {
                if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    headers.insert(header::CONTENT_RANGE, value);
                }
            }
            _ => {}
        }
        response
    }
}
