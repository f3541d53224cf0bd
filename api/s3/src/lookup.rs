//! Looking an object up by its key: a file of the bucket's folder, or a
//! folder marker (`key/`).

use s3s::{S3Result, s3_error};
use volume::{FileMeta, FilePath, Owner};

use file_service::ServiceError;

use super::S3Api;
use super::error::object_error;
use super::info::{ObjectInfo, etag_of};

/// The hex MD5 of no bytes: the ETag of an empty object (a folder marker).
pub(super) const EMPTY_MD5: &str = "d41d8cd98f00b204e9800998ecf8427e";

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
                Err(s3_error!(NoSuchKey, "The specified key does not exist."))
            }
            Err(error) => Err(object_error(error)),
        }
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
