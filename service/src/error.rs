//! What the file service answers when an operation cannot be done, in the
//! service's own words: no status codes, no bodies. Each adapter renders
//! these in its dialect (`api-common`'s JSON for REST and WebDAV, S3's XML
//! codes in `api-s3`).

use storage_host::pool::DispatchError;
use storage_host::runtime::{
    BodyError, CallFailure, GuestVolumeError as VolumeError, HandlerError,
};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    BadPath(#[from] volume::PathError),
    /// The request asks for something the service cannot do as asked (a
    /// body that could not be read, an offset that does not match).
    #[error("{0}")]
    BadRequest(String),
    #[error("no file at {0}")]
    NotFound(String),
    /// The path has no version of this id.
    #[error("{path} has no version {version_id}")]
    NoSuchVersion { path: String, version_id: String },
    /// The version asked for is a delete marker: it has no content.
    #[error("version {version_id} of {path} is a delete marker")]
    DeleteMarker { path: String, version_id: String },
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
    /// Busy: the queue is full, the wait ran out, or the gateway is
    /// stopping; worth trying again.
    #[error("{0}")]
    Unavailable(String),
    #[error("the disk is full")]
    NoSpace,
    /// The caller may not do this (not their tree, a folder inside itself).
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    RequestTimeout(String),
    /// Object lock holds a version this request would remove, rename or
    /// replace the retention of (S3's `AccessDenied`).
    #[error("{0}")]
    ObjectLocked(String),
    /// Object lock asked of a bucket without it.
    #[error("{0}")]
    NoObjectLock(String),
    /// A bucket configuration its state does not allow (S3's 409
    /// `InvalidBucketState`).
    #[error("{0}")]
    InvalidBucketState(String),
    /// A lock covers what this request would change, and the request did
    /// not submit its token.
    #[error("{0} is locked; submit the lock token in an If header")]
    Locked(String),
    #[error("{0}")]
    PreconditionFailed(String),
    /// Stored content failed its SHA-256 check; the detail is logged.
    #[error("the stored content failed its integrity check")]
    Integrity(String),
    /// Anything else; the detail is logged, the client sees a generic message.
    #[error("internal error")]
    Internal(String),
}

impl ServiceError {
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

    /// The error for a volume failure the host met itself (not through the guest).
    pub fn from_volume(error: volume::VolumeError, path: &str) -> Self {
        match error {
            volume::VolumeError::NotFound(_) => Self::NotFound(path.to_owned()),
            volume::VolumeError::NoSuchVersion { path, version_id } => {
                Self::NoSuchVersion { path, version_id }
            }
            volume::VolumeError::DeleteMarker { path, version_id } => {
                Self::DeleteMarker { path, version_id }
            }
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
            locked @ volume::VolumeError::Locked { .. } => Self::ObjectLocked(locked.to_string()),
            holds @ volume::VolumeError::UserHoldsLockedVersions(_) => {
                Self::ObjectLocked(holds.to_string())
            }
            volume::VolumeError::NoObjectLock(_) => {
                Self::NoObjectLock("Bucket is missing Object Lock Configuration".to_owned())
            }
            volume::VolumeError::InvalidBucketState(why) => Self::InvalidBucketState(why),
            claimed @ volume::VolumeError::BucketNameClaimed(_) => {
                Self::InvalidBucketState(claimed.to_string())
            }
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<DispatchError> for ServiceError {
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
