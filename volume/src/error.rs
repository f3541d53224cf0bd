//! The volume's one error type, and how I/O and database failures map to
//! it (a full disk on any engine is [`VolumeError::NoSpace`]).

use std::io;

use crate::path::PathError;

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("no file at {0}")]
    NotFound(String),
    #[error("{path} has no version {version_id}")]
    NoSuchVersion { path: String, version_id: String },
    #[error("version {version_id} of {path} is a delete marker")]
    DeleteMarker { path: String, version_id: String },
    #[error("version {version_id} of {path} is locked: {reason}")]
    Locked {
        path: String,
        version_id: String,
        reason: String,
    },
    #[error(
        "user {0} keeps versions under object lock (a retention that has not ended, or a \
         legal hold): the user cannot be removed until they are released"
    )]
    UserHoldsLockedVersions(String),
    /// Another owner's bucket of this name has CORS rules or a policy,
    /// which claim the name.
    #[error(
        "another user's bucket named {0} has CORS rules or a public policy, which claim its \
         name: choose another name for a bucket to configure so"
    )]
    BucketNameClaimed(String),
    /// Object lock asked of a bucket that has none.
    #[error("the bucket {0} has no object lock configuration")]
    NoObjectLock(String),
    /// A bucket's configuration that its state does not allow.
    #[error("{0}")]
    InvalidBucketState(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error(transparent)]
    InvalidPath(#[from] PathError),
    #[error("not a lowercase hex SHA-256 digest: {0:?}")]
    InvalidDigest(String),
    #[error("{0} bytes is more than the index can record")]
    TooLarge(u64),
    #[error("the disk is full")]
    NoSpace,
    #[error("copying {rows} files and folders at once is more than the limit of {limit}")]
    TreeTooLarge { rows: usize, limit: usize },
    #[error("{to} is {from}, or one of them holds the other")]
    Nested { from: String, to: String },
    #[error("a resource may hold at most {limit} properties")]
    TooManyProperties { limit: usize },
    #[error("an upload may have at most {limit} parts: send the rest in larger requests")]
    TooManyParts { limit: u32 },
    #[error("storing {size} bytes would exceed the quota of {quota} bytes ({used} in use)")]
    QuotaExceeded { quota: u64, used: u64, size: u64 },
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("blob {0} is named by the index but missing from the blob store")]
    MissingBlob(String),
    #[error("blob {0} is still being removed; try again")]
    Busy(String),
    /// Another request is writing upload `0`.
    #[error("upload {0} is being written by another request")]
    UploadBusy(String),
    /// Upload `0` moved on (another request added to it) or went while a
    /// request wrote it; what that request wrote is not recorded.
    #[error("upload {0} moved on while this request wrote it")]
    UploadMovedOn(String),
    #[error("metadata index: {0}")]
    Database(sqlx::Error),
    /// A read on the request's own thread failed (SQLite, `db::reader`).
    #[error("metadata index (read): {0}")]
    Read(String),
    #[error("blob store: {0}")]
    ObjectStore(#[from] object_store::Error),
    #[error("metadata index migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl VolumeError {
    pub(crate) fn io(context: &'static str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::StorageFull {
            Self::NoSpace
        } else {
            Self::Io { context, source }
        }
    }
}

impl From<sqlx::Error> for VolumeError {
    fn from(error: sqlx::Error) -> Self {
        const SQLITE_FULL: i64 = 13;
        const POSTGRES_DISK_FULL: &str = "53100";
        let full = error.as_database_error().is_some_and(|db| {
            let code = db.code();
            if db
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some()
            {
                code.is_some_and(|code| code == POSTGRES_DISK_FULL)
            } else {
                code.and_then(|code| code.parse::<i64>().ok())
                    .is_some_and(|code| code & 0xff == SQLITE_FULL)
            }
        });
        if full {
            Self::NoSpace
        } else {
            Self::Database(error)
        }
    }
}
