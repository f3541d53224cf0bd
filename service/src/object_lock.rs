//! Object lock and lifecycle, for every protocol alike: a bucket's lock
//! configuration and lifecycle rules, and a version's retention and legal
//! hold. What a lock forbids the volume refuses wherever a version would
//! go (a REST or WebDAV delete, the trash, a move, lifecycle, a user's
//! removal), so no adapter can forget it. Whoever acts for a tree's owner
//! may bypass governance retention by asking to (S3's
//! `x-amz-bypass-governance-retention`): every caller acts on its own
//! user's tree, so that is the bucket's owner; admins act as any user.

use volume::{BucketLock, FilePath, Lifecycle, Owner, Retention, VersionLock};

use crate::FileService;
use crate::error::ServiceError;

impl FileService {
    /// A bucket's object lock, if it has one.
    pub async fn bucket_lock(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<BucketLock>, ServiceError> {
        mapped(self.volume.bucket_lock(owner, bucket).await, bucket)
    }

    /// Enable a bucket's object lock, or change its default retention
    /// (`enable_versioning`: a bucket being made with lock).
    pub async fn set_bucket_lock(
        &self,
        owner: Owner,
        bucket: &str,
        lock: BucketLock,
        enable_versioning: bool,
    ) -> Result<(), ServiceError> {
        mapped(
            self.volume
                .set_bucket_lock(owner, bucket, lock, enable_versioning)
                .await,
            bucket,
        )
    }

    /// A version's lock (`None`: the current file's): its id and lock.
    pub async fn version_lock(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
    ) -> Result<(String, VersionLock), ServiceError> {
        mapped(
            self.volume.version_lock(owner, path, version_id).await,
            path.as_str(),
        )
    }

    /// What object lock holds `version_id` of `path` with now, if anything
    /// (what the page shows with a padlock).
    pub async fn holding_lock(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
    ) -> Result<Option<VersionLock>, ServiceError> {
        match self
            .volume
            .version_lock(owner, path, Some(version_id))
            .await
        {
            Ok((_, lock)) if lock.holds(volume::now_ms()) => Ok(Some(lock)),
            Ok(_)
            | Err(
                volume::VolumeError::NoObjectLock(_)
                | volume::VolumeError::NoSuchVersion { .. }
                | volume::VolumeError::DeleteMarker { .. }
                | volume::VolumeError::NotFound(_),
            ) => Ok(None),
            Err(error) => Err(ServiceError::from_volume(error, path.as_str())),
        }
    }

    /// Set a version's retention, as S3's rules allow; its id.
    pub async fn set_retention(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
        retention: Option<Retention>,
        bypass: bool,
    ) -> Result<String, ServiceError> {
        mapped(
            self.volume
                .set_retention(owner, path, version_id, retention, bypass)
                .await,
            path.as_str(),
        )
    }

    /// Lock a version this request has just made as it asked.
    pub async fn lock_new_version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        lock: VersionLock,
    ) -> Result<(), ServiceError> {
        mapped(
            self.volume
                .lock_new_version(owner, path, version_id, lock)
                .await,
            path.as_str(),
        )
    }

    /// Put a version under a legal hold, or take it off; its id.
    pub async fn set_legal_hold(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
        on: bool,
    ) -> Result<String, ServiceError> {
        mapped(
            self.volume
                .set_legal_hold(owner, path, version_id, on)
                .await,
            path.as_str(),
        )
    }

    /// A bucket's lifecycle rules, if it has some.
    pub async fn bucket_lifecycle(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<Lifecycle>, ServiceError> {
        mapped(self.volume.bucket_lifecycle(owner, bucket).await, bucket)
    }

    /// Set a bucket's lifecycle rules.
    pub async fn set_bucket_lifecycle(
        &self,
        owner: Owner,
        bucket: &str,
        lifecycle: &Lifecycle,
    ) -> Result<(), ServiceError> {
        mapped(
            self.volume
                .set_bucket_lifecycle(owner, bucket, lifecycle)
                .await,
            bucket,
        )
    }

    /// How long a lifecycle day is, in milliseconds.
    pub fn lifecycle_day_ms(&self) -> i64 {
        self.volume.lifecycle_day_ms()
    }
}

fn mapped<T>(result: Result<T, volume::VolumeError>, what: &str) -> Result<T, ServiceError> {
    result.map_err(|error| ServiceError::from_volume(error, what))
}
