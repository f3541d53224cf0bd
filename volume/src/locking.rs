//! S3 Object Lock over the volume: a bucket's lock configuration (on its
//! versioning row, see `versioning`), and each version's retention and
//! legal hold (`object_lock`). What a lock forbids is refused where the
//! removal happens (`versions`, `trash`, `transfer`, `owners`, the
//! retention and the quota's room skip held versions); this module sets
//! and reads the locks. Owns no table.

use crate::db::Conn;

use crate::Volume;
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::history;
use crate::object_lock::{self, BucketLock, Retention, VersionLock};
use crate::path::FilePath;
use crate::types::{Owner, Versioning, now_ms};
use crate::versioning::{self, BucketState, Keeping};

impl Volume {
    /// `owner`'s bucket `bucket`'s object lock, if it has one.
    pub async fn bucket_lock(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<BucketLock>, VolumeError> {
        let set = self.versioning.get(self.db(), owner, bucket).await?;
        Ok(set.and_then(|set| set.lock))
    }

    /// Enable object lock on `owner`'s bucket `bucket` with `lock`'s
    /// default retention (or change that default). Its versioning must be
    /// on, or (`enable_versioning`, a bucket being made with lock) is
    /// turned on here; else `InvalidBucketState`.
    pub async fn set_bucket_lock(
        &self,
        owner: Owner,
        bucket: &str,
        lock: BucketLock,
        enable_versioning: bool,
    ) -> Result<(), VolumeError> {
        let key = format!("{bucket}/");
        let set = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let state = versioning::set_state(tx, owner, &key).await?;
                let enabled = state.is_some_and(|set| set.versioning == Versioning::Enabled);
                if !enabled && !enable_versioning {
                    return Err(VolumeError::InvalidBucketState(
                        "Versioning must be 'Enabled' on the bucket to apply a Object Lock \
                         configuration"
                            .to_owned(),
                    ));
                }
                if !enabled {
                    versioning::set(tx, owner, bucket, Versioning::Enabled).await?;
                }
                versioning::set_lock(tx, owner, bucket, lock).await?;
                Ok(BucketState {
                    versioning: Versioning::Enabled,
                    lock: Some(lock),
                })
            })
            .await?;
        self.versioning.remember(owner, bucket, Some(set));
        Ok(())
    }

    /// The lock of `owner`'s version `version_id` of `path` (`None`: the
    /// current file): the version's id and its lock.
    pub async fn version_lock(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
    ) -> Result<(String, VersionLock), VolumeError> {
        self.require_bucket_lock(owner, path).await?;
        let mut conn = self.db().connection().await?;
        let version_id = self
            .locked_version(&mut conn, owner, path, version_id)
            .await?;
        let lock = object_lock::get(&mut conn, owner, path.as_str(), &version_id).await?;
        Ok((version_id, lock))
    }

    /// Set the retention of `owner`'s version `version_id` of `path`
    /// (`None`: the current file; `retention` `None`: take it off), as S3's
    /// rules allow (see [`VersionLock::refuses_retention`]; `bypass`: the
    /// caller may bypass governance and asks to). The version's id.
    pub async fn set_retention(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
        retention: Option<Retention>,
        bypass: bool,
    ) -> Result<String, VolumeError> {
        self.change_lock(owner, path, version_id, move |lock, now| {
            if let Some(reason) = lock.refuses_retention(retention, now, bypass) {
                return Err(reason);
            }
            Ok(VersionLock { retention, ..lock })
        })
        .await
    }

    /// Put `owner`'s version `version_id` of `path` (`None`: the current
    /// file) under a legal hold, or take it off. The version's id.
    pub async fn set_legal_hold(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
        on: bool,
    ) -> Result<String, VolumeError> {
        self.change_lock(owner, path, version_id, move |lock, _| {
            Ok(VersionLock {
                legal_hold: Some(on),
                ..lock
            })
        })
        .await
    }

    /// Set the lock of `owner`'s version `version_id` of `path`, a version
    /// the caller's request has just made (S3's `CopyObject` asking for
    /// one): it replaces the bucket's default retention given at its
    /// making, as asking for one at its making would have.
    pub async fn lock_new_version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        lock: VersionLock,
    ) -> Result<(), VolumeError> {
        self.require_bucket_lock(owner, path).await?;
        self.db()
            .write(async |tx: &mut WriteTx| {
                object_lock::set(tx, owner, path.as_str(), version_id, lock).await
            })
            .await
    }

    /// Change a version's lock as `change` says, in one write
    /// transaction; `change` refuses with a reason (`Locked`).
    async fn change_lock(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
        change: impl Fn(VersionLock, i64) -> Result<VersionLock, String>,
    ) -> Result<String, VolumeError> {
        self.require_bucket_lock(owner, path).await?;
        self.db()
            .write(async |tx: &mut WriteTx| {
                let version_id = self.locked_version(tx, owner, path, version_id).await?;
                let lock = object_lock::get(tx, owner, path.as_str(), &version_id).await?;
                let changed = change(lock, now_ms()).map_err(|reason| VolumeError::Locked {
                    path: path.to_string(),
                    version_id: version_id.clone(),
                    reason,
                })?;
                object_lock::set(tx, owner, path.as_str(), &version_id, changed).await?;
                Ok(version_id)
            })
            .await
    }

    /// `NoObjectLock` unless `path`'s bucket has object lock.
    async fn require_bucket_lock(&self, owner: Owner, path: &FilePath) -> Result<(), VolumeError> {
        let bucket = path.as_str().split('/').next().unwrap_or_default();
        match self.bucket_lock(owner, bucket).await? {
            Some(_) => Ok(()),
            None => Err(VolumeError::NoObjectLock(bucket.to_owned())),
        }
    }

    /// The id of the version a lock request names, read on `conn`: the
    /// current file's (none: `NotFound`), or `version_id`, a file (a
    /// delete marker holds nothing: `DeleteMarker`).
    async fn locked_version(
        &self,
        conn: &mut Conn,
        owner: Owner,
        path: &FilePath,
        version_id: Option<&str>,
    ) -> Result<String, VolumeError> {
        let current = self.tree.get_locked(conn, owner, path).await?;
        match (version_id, current) {
            (None, Some(current)) => Ok(current.version_id),
            (None, None) => Err(VolumeError::NotFound(path.to_string())),
            (Some(id), Some(current)) if current.version_id == id => Ok(current.version_id),
            (Some(id), _) => match history::get(conn, owner, path.as_str(), id).await? {
                Some(kept) if kept.marker => Err(VolumeError::DeleteMarker {
                    path: path.to_string(),
                    version_id: id.to_owned(),
                }),
                Some(kept) => Ok(kept.meta.version_id),
                None => Err(VolumeError::NoSuchVersion {
                    path: path.to_string(),
                    version_id: id.to_owned(),
                }),
            },
        }
    }
}

/// The lock a new version `version_id` of `path` gets inside `tx`: the one
/// its write asked for, else its bucket's default retention (`keeping`
/// read that). A lock asked of a bucket without object lock is refused
/// (`NoObjectLock`).
pub(crate) async fn stamp(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
    asked: Option<VersionLock>,
    keeping: Keeping,
) -> Result<(), VolumeError> {
    let lock = match (asked, keeping.lock) {
        (Some(asked), Some(_)) => asked,
        (Some(asked), None) if !asked.is_empty() => {
            let bucket = path.split('/').next().unwrap_or_default();
            return Err(VolumeError::NoObjectLock(bucket.to_owned()));
        }
        (
            _,
            Some(BucketLock {
                default: Some(default),
            }),
        ) => VersionLock {
            retention: Some(default.from(now_ms())),
            legal_hold: None,
        },
        _ => return Ok(()),
    };
    if lock.is_empty() {
        return Ok(());
    }
    object_lock::set(tx, owner, path, version_id, lock).await
}
