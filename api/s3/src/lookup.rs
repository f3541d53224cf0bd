//! Looking an object up by its key: a file of the bucket's folder, or a
//! folder marker (`key/`).

use s3s::{S3Result, s3_error};
use volume::{FileMeta, FilePath, NULL_VERSION, Owner, Version};

use file_service::ServiceError;

use super::S3Api;
use super::error::object_error;
use super::info::{ObjectInfo, etag_of};
use super::versioning::{delete_marker_read, deleted_key, version_header};

/// An object as a read found it.
pub(super) struct Found {
    pub(super) meta: FileMeta,
    pub(super) info: Option<ObjectInfo>,
    pub(super) etag: String,
}

impl S3Api {
    /// The object `key` of `bucket` in `owner`'s tree, or S3's error for
    /// its absence (`NoSuchBucket` when the bucket is missing too).
    pub(super) async fn find_object(
        &self,
        owner: Owner,
        bucket: &str,
        path: &FilePath,
    ) -> S3Result<Found> {
        match self.files.stat(owner, path).await {
            Ok(meta) => {
                let info = ObjectInfo::of(&meta);
                let etag = etag_of(&meta, info.as_ref());
                Ok(Found { meta, info, etag })
            }
            Err(ServiceError::NotFound(_)) => {
                self.require_bucket(owner, bucket).await?;
                // Deleted where versions are kept: S3 says which marker.
                let versions = self
                    .files
                    .versions_of(owner, path)
                    .await
                    .map_err(object_error)?;
                if let Some(Version::DeleteMarker {
                    version_id,
                    latest: true,
                    ..
                }) = versions.first()
                {
                    return Err(deleted_key(version_id));
                }
                Err(s3_error!(NoSuchKey, "The specified key does not exist."))
            }
            Err(error) => Err(object_error(error)),
        }
    }

    /// The object's version `version` (checked as S3 checks ids), or its
    /// current one when none is named.
    pub(super) async fn find_object_version(
        &self,
        owner: Owner,
        bucket: &str,
        path: &FilePath,
        version: Option<&str>,
    ) -> S3Result<Found> {
        match version {
            Some(version) => {
                let version = super::versioning::checked_version(version)?;
                self.find_version(owner, bucket, path, version).await
            }
            None => self.find_object(owner, bucket, path).await,
        }
    }

    /// The version `version` of `key` (`path`) of `bucket`: a file's, or
    /// S3's error for a delete marker (405) or a missing version.
    pub(super) async fn find_version(
        &self,
        owner: Owner,
        bucket: &str,
        path: &FilePath,
        version: &str,
    ) -> S3Result<Found> {
        match self.files.version(owner, path, version).await {
            Ok(Version::File { meta, .. }) => {
                let info = ObjectInfo::of(&meta);
                let etag = etag_of(&meta, info.as_ref());
                Ok(Found { meta, info, etag })
            }
            Ok(Version::DeleteMarker {
                version_id,
                made_ms,
                ..
            }) => Err(delete_marker_read(&version_id, made_ms)),
            Err(error) => {
                self.require_bucket(owner, bucket).await?;
                Err(object_error(error))
            }
        }
    }

    /// The `x-amz-version-id` of an answer about `version_id` of an object
    /// of `bucket`: a version's own id, and `null` only from a bucket that
    /// is (or was) versioned.
    pub(super) async fn version_header_for(
        &self,
        owner: Owner,
        bucket: &str,
        version_id: &str,
    ) -> S3Result<Option<String>> {
        if version_id != NULL_VERSION {
            return Ok(Some(version_id.to_owned()));
        }
        let state = self
            .files
            .bucket_versioning(owner, bucket)
            .await
            .map_err(object_error)?;
        Ok(version_header(version_id, state))
    }

    /// A folder marker (`key/`) as an empty object, if that folder was
    /// made (by `PUT key/`, or as a folder through another protocol): its
    /// creation time.
    pub(super) async fn find_marker(&self, owner: Owner, bucket: &str, key: &str) -> S3Result<i64> {
        let name = FilePath::parse(&format!("{bucket}/{}", key.trim_end_matches('/')))
            .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
        let node = self
            .files
            .node(owner, Some(&name))
            .await
            .map_err(object_error)?;
        if let volume::webdav::Node::Folder(folder) = node
            && let Some(created_ms) = folder.created_ms
        {
            return Ok(created_ms);
        }
        self.require_bucket(owner, bucket).await?;
        Err(s3_error!(NoSuchKey, "The specified key does not exist."))
    }
}
