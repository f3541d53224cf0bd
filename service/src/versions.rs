//! Versions and the trash, for every protocol alike: a version made
//! through one is the one another lists, reads and restores. Metadata
//! only (no instance is needed: a version's content is read like any
//! file's, from its row); deletes check WebDAV's locks as every delete
//! does.

use volume::{
    Deleted, FileMeta, FilePath, Owner, Prefix, TrashPage, Version, VersionPage, Versioning,
};

use crate::FileService;
use crate::error::ServiceError;
use crate::locks::LockTokens;

impl FileService {
    /// Whether trees S3 set no versioning for keep versions and a trash
    /// (`--versions`).
    pub fn keeps_versions(&self) -> bool {
        self.volume.keeps_versions()
    }

    /// The version `version_id` of `path`.
    pub async fn version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
    ) -> Result<Version, ServiceError> {
        mapped(
            self.volume.version(owner, path, version_id).await,
            path.as_str(),
        )
    }

    /// Every version of `path`, newest first.
    pub async fn versions_of(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Vec<Version>, ServiceError> {
        mapped(self.volume.versions_of(owner, path).await, path.as_str())
    }

    /// Delete `path`'s latest version: a delete marker where versions are
    /// kept (even over no file), else the file goes (a missing one is no
    /// error).
    pub async fn delete_latest(
        &self,
        owner: Owner,
        path: &FilePath,
        tokens: &LockTokens,
    ) -> Result<Deleted, ServiceError> {
        self.check_delete(owner, path, tokens).await?;
        mapped(self.volume.delete_latest(owner, path).await, path.as_str())
    }

    /// Remove the version `version_id` of `path` for good; what was
    /// removed (`None`: there was no such version). Object lock's holds
    /// refuse it (`ObjectLocked`); `bypass`: the caller asks to bypass
    /// governance retention, which whoever acts for the tree's owner may.
    pub async fn delete_version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        bypass: bool,
        tokens: &LockTokens,
    ) -> Result<Option<Version>, ServiceError> {
        self.check_delete(owner, path, tokens).await?;
        mapped(
            self.volume
                .delete_version(owner, path, version_id, bypass)
                .await,
            path.as_str(),
        )
    }

    /// Make the version `version_id` of `path` its current file again (a
    /// new version of that content).
    pub async fn restore_version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
    ) -> Result<FileMeta, ServiceError> {
        mapped(
            self.volume.restore_version(owner, path, version_id).await,
            path.as_str(),
        )
    }

    /// A page of every version under a key range (see
    /// `Volume::list_versions`).
    pub async fn list_versions(
        &self,
        owner: Owner,
        lower: &str,
        after: Option<(&str, Option<&str>)>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<VersionPage, ServiceError> {
        mapped(
            self.volume
                .list_versions(owner, lower, after, upper, limit)
                .await,
            lower,
        )
    }

    /// The versioning S3 reports for a bucket (`None`: never configured).
    pub async fn bucket_versioning(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<Option<Versioning>, ServiceError> {
        mapped(self.volume.bucket_versioning(owner, bucket).await, bucket)
    }

    /// Set a bucket's versioning.
    pub async fn set_bucket_versioning(
        &self,
        owner: Owner,
        bucket: &str,
        state: Versioning,
    ) -> Result<(), ServiceError> {
        mapped(
            self.volume
                .set_bucket_versioning(owner, bucket, state)
                .await,
            bucket,
        )
    }

    /// Forget a deleted bucket's versioning.
    pub async fn forget_bucket_versioning(
        &self,
        owner: Owner,
        bucket: &str,
    ) -> Result<(), ServiceError> {
        mapped(
            self.volume.forget_bucket_versioning(owner, bucket).await,
            bucket,
        )
    }

    /// Whether an earlier version or a delete marker lies under `prefix`.
    pub async fn keeps_versions_under(
        &self,
        owner: Owner,
        prefix: &Prefix,
    ) -> Result<bool, ServiceError> {
        mapped(
            self.volume.keeps_versions_under(owner, prefix).await,
            prefix.as_str(),
        )
    }

    /// A page of `owner`'s trash, newest delete first.
    pub async fn trash(
        &self,
        owner: Owner,
        before: Option<i64>,
        limit: usize,
    ) -> Result<TrashPage, ServiceError> {
        mapped(self.volume.trash(owner, before, limit).await, "the trash")
    }

    /// Restore a deleted file (at its path, or beside it when taken).
    pub async fn restore_trashed(&self, owner: Owner, id: i64) -> Result<FileMeta, ServiceError> {
        mapped(
            self.volume.restore_trashed(owner, id).await,
            &format!("trash item {id}"),
        )
    }

    /// Remove a deleted file for good, with the versions before it.
    pub async fn purge_trashed(&self, owner: Owner, id: i64) -> Result<(), ServiceError> {
        mapped(
            self.volume.purge_trashed(owner, id).await,
            &format!("trash item {id}"),
        )
    }

    /// Remove everything in `owner`'s trash for good; how many files went.
    pub async fn empty_trash(&self, owner: Owner) -> Result<u64, ServiceError> {
        mapped(self.volume.empty_trash(owner).await, "the trash")
    }
}

/// A volume's answer in the service's words, naming `what` it was about.
fn mapped<T>(result: Result<T, volume::VolumeError>, what: &str) -> Result<T, ServiceError> {
    result.map_err(|error| ServiceError::from_volume(error, what))
}
