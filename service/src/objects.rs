//! What the S3 API needs of the tree beside files and folders: a flat
//! scan of every file under a prefix in byte order (S3's listings), and
//! the protocol's own record of an object kept with its row.

use std::ops::Bound;

use volume::{FileMeta, FilePath, Owner};

use crate::ServiceError;

use super::FileService;

impl FileService {
    /// Up to `limit` of `owner`'s files from `from` and before `upper`,
    /// however deep, in byte order of their paths.
    pub async fn scan(
        &self,
        owner: Owner,
        from: Bound<&str>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FileMeta>, ServiceError> {
        self.volume
            .scan(owner, from, upper, limit)
            .await
            .map_err(|error| ServiceError::from_volume(error, "a listing"))
    }

    /// Up to `limit` of the folders `owner` made on purpose from `from` and
    /// before `upper`, however deep, in byte order.
    pub async fn scan_folders(
        &self,
        owner: Owner,
        from: Bound<&str>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, i64)>, ServiceError> {
        self.volume
            .scan_folders(owner, from, upper, limit)
            .await
            .map_err(|error| ServiceError::from_volume(error, "a listing"))
    }

    /// Forget that `owner`'s folder `prefix` was made on purpose (what is
    /// in it stays); whether it had been.
    pub async fn remove_folder_marker(
        &self,
        owner: Owner,
        prefix: &volume::Prefix,
        tokens: &super::LockTokens,
    ) -> Result<bool, ServiceError> {
        let parent = super::parent_key_of(prefix.as_str());
        self.check_locks(
            owner,
            tokens,
            &[
                super::Change::One(prefix.as_str()),
                super::Change::One(parent),
            ],
        )
        .await?;
        self.volume
            .remove_folder_marker(owner, prefix)
            .await
            .map_err(|error| ServiceError::from_volume(error, prefix.as_str()))
    }

    /// Set what S3 keeps of a version of a file (the current one or a kept
    /// one); whether there was such a version.
    pub async fn set_version_s3_info(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        info: &str,
    ) -> Result<bool, ServiceError> {
        self.volume
            .set_version_s3_info(owner, path, version_id, info)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))
    }

    /// Keep `info` with `owner`'s file `path` if it still holds the content
    /// `sha256`; whether it did.
    pub async fn set_s3_info(
        &self,
        owner: Owner,
        path: &FilePath,
        sha256: &str,
        info: &str,
    ) -> Result<bool, ServiceError> {
        self.volume
            .set_s3_info(owner, path, sha256, info)
            .await
            .map_err(|error| ServiceError::from_volume(error, path.as_str()))
    }
}
