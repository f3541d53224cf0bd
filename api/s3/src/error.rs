//! The file service's errors in S3's dialect: S3's codes and statuses,
//! chosen for what S3 clients do with them (retry a 503 `SlowDown`, stop
//! at a 4xx).

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use s3s::{S3Error, S3ErrorCode};

use file_service::ServiceError;

/// What an object operation answers for `error`.
pub(super) fn object_error(error: ServiceError) -> S3Error {
    s3_error_of(error, S3ErrorCode::NoSuchKey)
}

/// `error` in S3's dialect; `not_found` is the code for a missing file.
pub(super) fn s3_error_of(error: ServiceError, not_found: S3ErrorCode) -> S3Error {
    let message = error.to_string();
    let (code, status) = match &error {
        ServiceError::NotFound(_) => (not_found, None),
        ServiceError::NoSuchVersion { .. } => (S3ErrorCode::NoSuchVersion, None),
        // Reading a delete marker by its id (S3: 405 MethodNotAllowed;
        // `get` adds the marker's headers).
        ServiceError::DeleteMarker { .. } => (S3ErrorCode::MethodNotAllowed, None),
        ServiceError::BadPath(_) => (S3ErrorCode::InvalidArgument, None),
        ServiceError::BadRequest(_) => (S3ErrorCode::InvalidRequest, None),
        ServiceError::AlreadyExists(_) | ServiceError::PreconditionFailed(_) => {
            (S3ErrorCode::PreconditionFailed, None)
        }
        ServiceError::BodyTooLarge { .. }
        | ServiceError::InstanceMemory { .. }
        | ServiceError::OverBudget(_) => (S3ErrorCode::EntityTooLarge, None),
        ServiceError::RangeNotSatisfiable { .. } => (S3ErrorCode::InvalidRange, None),
        // The memory budget (or every instance) is taken now: clients back
        // off and retry a SlowDown.
        ServiceError::Unavailable(_) => {
            let mut error = S3Error::with_message(S3ErrorCode::SlowDown, message);
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", HeaderValue::from_static("1"));
            // s3s sends these headers in place of its own.
            headers.insert(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/xml"),
            );
            error.set_headers(headers);
            return error;
        }
        // No retry makes room: a 4xx, so clients stop and say why.
        ServiceError::QuotaExceeded(_) => (
            S3ErrorCode::Custom("QuotaExceeded".into()),
            Some(StatusCode::FORBIDDEN),
        ),
        ServiceError::NoSpace => (
            S3ErrorCode::Custom("InsufficientStorage".into()),
            Some(StatusCode::INSUFFICIENT_STORAGE),
        ),
        ServiceError::Forbidden(_) => (S3ErrorCode::AccessDenied, None),
        ServiceError::RequestTimeout(_) => (S3ErrorCode::RequestTimeout, None),
        ServiceError::Locked(_) => (S3ErrorCode::OperationAborted, None),
        // Held by object lock: S3 answers AccessDenied, whatever holds it.
        ServiceError::ObjectLocked(_) => (S3ErrorCode::AccessDenied, None),
        ServiceError::NoObjectLock(_) => (S3ErrorCode::InvalidRequest, None),
        ServiceError::InvalidBucketState(_) => (S3ErrorCode::InvalidBucketState, None),
        ServiceError::Integrity(_) | ServiceError::Internal(_) => {
            // The detail (the client sees a generic message).
            tracing::error!(?error, "an S3 request failed");
            (S3ErrorCode::InternalError, None)
        }
    };
    let mut s3 = S3Error::with_message(code, message);
    if let Some(status) = status {
        s3.set_status_code(status);
    }
    s3
}
