//! Every error a client can see, mapped to its status code in one place.
//! Bodies are JSON `{error, message}`; internal detail is logged, not sent.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::pool::DispatchError;
use crate::runtime::{BodyError, CallFailure, GuestVolumeError as VolumeError, HandlerError};

/// Seconds a client is told to wait after a 503.
const RETRY_AFTER_SECONDS: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    BadPath(#[from] volume::PathError),
    #[error("{0}")]
    BadRequest(String),
    #[error("no file at {0}")]
    NotFound(String),
    #[error("no instance with id {0}")]
    NoSuchInstance(u64),
    #[error("{0} already exists and If-None-Match: * forbids replacing it")]
    AlreadyExists(String),
    #[error("the body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: u64 },
    #[error("handling this request needs more memory than an instance may use ({cap} bytes)")]
    InstanceMemory { cap: u64 },
    /// More than the whole memory budget could ever give, or (undeclared
    /// uploads) more than it had free as the body grew.
    #[error("{0}")]
    OverBudget(String),
    #[error("the range does not overlap the file's {size} bytes")]
    RangeNotSatisfiable { size: u64 },
    #[error("{0}")]
    Unavailable(String),
    #[error("the disk is full")]
    NoSpace,
    /// No credentials, or wrong ones; `basic` adds a Basic challenge (left
    /// out for a page's `fetch`, or browsers would pop up a login box).
    #[error("sign in: this needs credentials (a token, a name and password, or a session)")]
    Unauthorized { basic: bool },
    #[error("{0}")]
    Forbidden(String),
    #[error("a request signed in by a session cookie needs the session's X-CSRF-Token header")]
    Csrf,
    #[error("too many failed sign-in attempts from this address; try again in {retry_after} s")]
    TooManyAttempts { retry_after: u64 },
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    RequestTimeout(String),
    /// WebDAV: the request conflicts with the tree (a missing parent, a
    /// lock token that is not this resource's).
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    /// WebDAV: a lock covers what this request would change, and the
    /// request did not submit its token.
    #[error("{0} is locked; submit the lock token in an If header")]
    Locked(String),
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
    /// Stored content failed its SHA-256 check; the detail is logged.
    #[error("the stored content failed its integrity check")]
    Integrity(String),
    /// Anything else; the detail is logged, the client sees a generic message.
    #[error("internal error")]
    Internal(String),
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    message: String,
}

impl AppError {
    pub(crate) fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadPath(_) => (StatusCode::BAD_REQUEST, "bad_path"),
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::NotFound(_) | Self::NoSuchInstance(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::AlreadyExists(_) => (StatusCode::PRECONDITION_FAILED, "already_exists"),
            Self::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Self::InstanceMemory { .. } => {
                (StatusCode::PAYLOAD_TOO_LARGE, "instance_memory_exceeded")
            }
            Self::OverBudget(_) => (StatusCode::PAYLOAD_TOO_LARGE, "over_memory_budget"),
            Self::RangeNotSatisfiable { .. } => {
                (StatusCode::RANGE_NOT_SATISFIABLE, "range_not_satisfiable")
            }
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::NoSpace => (StatusCode::INSUFFICIENT_STORAGE, "insufficient_storage"),
            Self::Unauthorized { .. } => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::Csrf => (StatusCode::FORBIDDEN, "csrf"),
            Self::TooManyAttempts { .. } => (StatusCode::TOO_MANY_REQUESTS, "too_many_attempts"),
            Self::QuotaExceeded(_) => (StatusCode::INSUFFICIENT_STORAGE, "quota_exceeded"),
            Self::RequestTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            Self::BadShare => (StatusCode::FORBIDDEN, "bad_share"),
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::Locked(_) => (StatusCode::LOCKED, "locked"),
            Self::PreconditionFailed(_) => (StatusCode::PRECONDITION_FAILED, "precondition_failed"),
            Self::UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::BadGateway(_) => (StatusCode::BAD_GATEWAY, "bad_gateway"),
            Self::Integrity(_) => (StatusCode::INTERNAL_SERVER_ERROR, "integrity_error"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The error for a guest's answer about `path`.
    pub fn from_handler(error: HandlerError, path: &str) -> Self {
        match error {
            HandlerError::Volume(VolumeError::NotFound) => Self::NotFound(path.to_owned()),
            HandlerError::Volume(VolumeError::AlreadyExists) => {
                Self::AlreadyExists(path.to_owned())
            }
            HandlerError::Volume(VolumeError::NoSpace) => Self::NoSpace,
            HandlerError::Volume(VolumeError::InvalidPath(why)) => Self::BadRequest(why),
            HandlerError::Volume(VolumeError::Busy(why)) => Self::Unavailable(why),
            HandlerError::Volume(VolumeError::QuotaExceeded(why)) => Self::QuotaExceeded(why),
            HandlerError::Volume(VolumeError::Internal(detail)) => Self::Internal(detail),
            HandlerError::Body(BodyError::TooLarge(limit)) => Self::BodyTooLarge { limit },
            HandlerError::Body(BodyError::Aborted(why)) => {
                Self::BadRequest(format!("the body could not be read: {why}"))
            }
            HandlerError::Body(BodyError::TimedOut(why)) => Self::RequestTimeout(why),
            HandlerError::Body(BodyError::NoSpace) => Self::NoSpace,
            HandlerError::Body(BodyError::Internal(detail)) => Self::Internal(detail),
            HandlerError::Body(BodyError::Corrupt(detail)) => Self::Integrity(detail),
            HandlerError::Integrity(detail) => Self::Integrity(detail),
            HandlerError::RangeNotSatisfiable(size) => Self::RangeNotSatisfiable { size },
        }
    }
}

impl AppError {
    /// 401 for a request with these headers: with a Basic challenge unless
    /// it is a page's `fetch` (`Sec-Fetch-Mode` other than `navigate`).
    pub fn unauthorized(headers: &axum::http::HeaderMap) -> Self {
        let from_a_page = headers
            .get("sec-fetch-mode")
            .is_some_and(|mode| mode != "navigate");
        Self::Unauthorized {
            basic: !from_a_page,
        }
    }

    /// The error for a volume failure the host met itself (not through the guest).
    pub fn from_volume(error: volume::VolumeError, path: &str) -> Self {
        match error {
            volume::VolumeError::NotFound(_) => Self::NotFound(path.to_owned()),
            volume::VolumeError::NoSpace => Self::NoSpace,
            busy @ volume::VolumeError::Busy(_) => Self::Unavailable(busy.to_string()),
            quota @ volume::VolumeError::QuotaExceeded { .. } => {
                Self::QuotaExceeded(quota.to_string())
            }
            // RFC 4918: 507 when a copy or a property would take more room
            // than the server gives.
            limit @ (volume::VolumeError::TreeTooLarge { .. }
            | volume::VolumeError::TooManyProperties { .. }) => {
                Self::QuotaExceeded(limit.to_string())
            }
            nested @ volume::VolumeError::Nested { .. } => Self::Forbidden(nested.to_string()),
            parts @ volume::VolumeError::TooManyParts { .. } => Self::BadRequest(parts.to_string()),
            volume::VolumeError::InvalidPath(why) => Self::BadPath(why),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<DispatchError> for AppError {
    fn from(error: DispatchError) -> Self {
        match error {
            DispatchError::QueueFull
            | DispatchError::QueueTimeout(_)
            | DispatchError::ShuttingDown => Self::Unavailable(error.to_string()),
            DispatchError::OverBudget { .. }
            | DispatchError::Failed(CallFailure::MemoryBudget { .. }) => {
                Self::OverBudget(error.to_string())
            }
            DispatchError::Failed(CallFailure::MemoryCap { cap }) => Self::InstanceMemory { cap },
            other => Self::Internal(other.to_string()),
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        match &self {
            Self::Integrity(detail) => tracing::error!(%detail, "integrity check failed"),
            Self::Internal(detail) => tracing::error!(%detail, "internal error"),
            _ => {}
        }
        let body = ErrorBody {
            error: code,
            message: self.to_string(),
        };
        let mut response = (status, Json(body)).into_response();
        let headers = response.headers_mut();
        match self {
            Self::Unavailable(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            }
            Self::TooManyAttempts { retry_after } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            Self::Unauthorized { basic } => {
                headers.append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"wasm-storage\""),
                );
                if basic {
                    headers.append(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static("Basic realm=\"wasm-storage\", charset=\"UTF-8\""),
                    );
                }
            }
            Self::RangeNotSatisfiable { size } => {
                if let Ok(value) = HeaderValue::from_str(&format!("bytes */{size}")) {
                    headers.insert(header::CONTENT_RANGE, value);
                }
            }
            _ => {}
        }
        response
    }
}
