//! Where blob bytes live: content-addressed, each blob written once and
//! complete before anything names it. Two stores behind one type:
//!
//! - [`local`]: files under the data directory (the embedded default),
//!   written to a temp file, fsynced, linked into place, the directory
//!   fsynced: durable when the call returns; blobs of at most 64 KiB
//!   packed into segment files instead ([`segments`]).
//! - [`object`]: an S3-compatible object store through Apache
//!   `object_store` (a single conditional `PutObject` for small blobs, a
//!   streamed multipart upload for large ones).
//!
//! Either way an upload's bytes are first staged in a local temp file as
//! they arrive ([`StagedBlob`]), since the digest that names the blob is
//! only known at the end.

mod local;
mod object;
mod open_segment;
mod reader;
mod segments;
mod shared;
mod spare_segment;
mod staged;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

pub use self::object::S3Settings;
pub(crate) use self::open_segment::RecordSync;
pub use self::reader::BlobReader;
pub(crate) use self::segments::HEADER as RECORD_HEADER;
pub(crate) use self::segments::{Packed, SEGMENT_TARGET, Segments, packs};
use self::shared::ListedBlob;
pub(crate) use self::staged::KeptPart;
pub(crate) use self::staged::Staged;
pub use self::staged::StagedBlob;
pub(crate) use self::staged::clear_temp;
use crate::error::VolumeError;
use crate::types::Digest;

pub(crate) use self::local::{LocalBlobs, UPLOAD_CONTENT};
pub(crate) use self::object::ObjectBlobs;

/// Where blobs live: `--blob-store`.
#[derive(Clone, PartialEq, Eq)]
pub enum BlobUrl {
    /// A local directory (the embedded default: `blobs/` in the data dir).
    Local(PathBuf),
    /// An S3 bucket, with an optional key prefix: `s3://BUCKET[/PREFIX]`.
    /// Endpoint and credentials come from the standard `AWS_*` variables.
    S3 { bucket: String, prefix: String },
}

impl FromStr for BlobUrl {
    type Err = String;

    /// `s3://BUCKET[/PREFIX]`, or a local directory (a path or `file://PATH`).
    fn from_str(url: &str) -> Result<Self, Self::Err> {
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(format!("{url:?} names no bucket: use s3://BUCKET[/PREFIX]"));
            }
            Ok(Self::S3 {
                bucket: bucket.to_owned(),
                prefix: prefix.trim_matches('/').to_owned(),
            })
        } else if url.contains("://") && !url.starts_with("file://") {
            Err(format!(
                "{url:?} is not a blob store: use s3://BUCKET[/PREFIX] or a directory"
            ))
        } else {
            let path = url.strip_prefix("file://").unwrap_or(url);
            if path.is_empty() {
                return Err("the blob store needs a directory".into());
            }
            Ok(Self::Local(PathBuf::from(path)))
        }
    }
}

impl fmt::Display for BlobUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Local(dir) => write!(f, "{}", dir.display()),
            Self::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Self::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

impl fmt::Debug for BlobUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[derive(Debug)]
pub(crate) enum BlobStore {
    Local(LocalBlobs),
    Object(ObjectBlobs),
}

impl BlobStore {
    pub(crate) fn open(url: &BlobUrl, s3: &S3Settings) -> Result<Self, VolumeError> {
        Ok(match url {
            BlobUrl::Local(dir) => Self::Local(LocalBlobs::open(dir)?),
            BlobUrl::S3 { bucket, prefix } => Self::Object(ObjectBlobs::s3(bucket, prefix, s3)?),
        })
    }

    /// The segments small blobs are packed into: a local store's (an
    /// object store keeps each blob an object of its own, see
    /// `ARCHITECTURE.md`).
    pub(crate) fn segments(&self) -> Option<&std::sync::Arc<Segments>> {
        match self {
            Self::Local(local) => Some(local.segments()),
            Self::Object(_) => None,
        }
    }

    /// Make `staged` the blob `digest`. Idempotent: the same content may be
    /// written again (by a retry or by another gateway) and stays complete.
    /// The blob is complete and durable when this returns.
    pub(crate) async fn write(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        match self {
            Self::Local(local) => local.write(digest, staged).await,
            Self::Object(object) => object.write(digest, staged).await,
        }
    }

    /// Replace blob `digest` with `staged` (the same content, with an
    /// outboard after it), atomically.
    pub(crate) async fn replace(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        match self {
            Self::Local(local) => local.replace(digest, staged).await,
            Self::Object(object) => object.replace(digest, staged).await,
        }
    }

    /// Store `staged` as part `name` of resumable upload `upload`.
    pub(crate) async fn write_part(
        &self,
        upload: &str,
        name: &str,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        match self {
            Self::Local(local) => local.write_part(upload, name, staged).await,
            Self::Object(object) => object.write_part(upload, name, staged).await,
        }
    }

    /// Part `name` of upload `upload`, opened for reading; `None` if absent.
    pub(crate) async fn open_part(
        &self,
        upload: &str,
        name: &str,
    ) -> Result<Option<BlobReader>, VolumeError> {
        match self {
            Self::Local(local) => local.open_part(upload, name).await,
            Self::Object(object) => object.open_part(upload, name).await,
        }
    }

    /// Remove part `name` of upload `upload`; one already gone is not an error.
    pub(crate) async fn remove_part(&self, upload: &str, name: &str) -> Result<(), VolumeError> {
        match self {
            Self::Local(local) => local.remove_part(upload, name).await,
            Self::Object(object) => object.remove_part(upload, name).await,
        }
    }

    /// Remove every part of upload `upload`; none there is not an error.
    pub(crate) async fn remove_parts(&self, upload: &str) -> Result<(), VolumeError> {
        match self {
            Self::Local(local) => local.remove_parts(upload).await,
            Self::Object(object) => object.remove_parts(upload).await,
        }
    }

    /// The uploads that have parts in the store, with when they last changed.
    pub(crate) async fn uploads_with_parts(
        &self,
    ) -> Result<Vec<(String, std::time::SystemTime)>, VolumeError> {
        match self {
            Self::Local(local) => local.uploads_with_parts().await,
            Self::Object(object) => object.uploads_with_parts().await,
        }
    }

    /// Keep `outboard` after the content of blob `digest`, `size` bytes
    /// stored without one (before outboards were kept), which a reader read
    /// whole and verified against the outboard's root. The blob is
    /// rewritten (through `staged`) as content then outboard and replaces
    /// the old one atomically: readers of the old one read on undisturbed,
    /// and one that has gained an outboard meanwhile is left alone.
    pub(crate) async fn attach_outboard(
        &self,
        mut staged: StagedBlob,
        digest: &Digest,
        size: u64,
        outboard: &[u8],
    ) -> Result<(), VolumeError> {
        match self.open_blob(digest, size).await? {
            Some(reader) if reader.outboard_len() == 0 => {
                let mut reader = reader;
                loop {
                    let chunk = reader.read(1 << 20).await?;
                    if chunk.is_empty() {
                        break;
                    }
                    staged.write(&chunk).await?;
                }
            }
            // Gone, or given one meanwhile.
            _ => return Ok(()),
        }
        if staged.len() != size {
            return Ok(());
        }
        staged.write_outboard(outboard).await?;
        self.replace(digest, &mut staged).await
    }

    /// Whether blob `digest` is there (complete: blobs appear atomically).
    pub(crate) async fn exists(&self, digest: &Digest) -> Result<bool, VolumeError> {
        match self {
            Self::Local(local) => local.exists(digest).await,
            Self::Object(object) => object.exists(digest).await,
        }
    }

    /// Blob `digest`, of `size` bytes, opened for reading; `None` if absent.
    pub(crate) async fn open_blob(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<Option<BlobReader>, VolumeError> {
        match self {
            Self::Local(local) => local.open_blob(digest, size).await,
            Self::Object(object) => object.open_blob(digest, size).await,
        }
    }

    /// Remove blob `digest`; a blob already gone is not an error.
    pub(crate) async fn remove(&self, digest: &Digest) -> Result<(), VolumeError> {
        match self {
            Self::Local(local) => local.remove(digest).await,
            Self::Object(object) => object.remove(digest).await,
        }
    }

    /// Every blob in the store. Entries not named like a blob are ignored
    /// (and left alone).
    pub(crate) async fn list(&self) -> Result<Vec<ListedBlob>, VolumeError> {
        match self {
            Self::Local(local) => local.list().await,
            Self::Object(object) => object.list().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_select_the_store() {
        assert_eq!(
            "s3://bucket".parse::<BlobUrl>(),
            Ok(BlobUrl::S3 {
                bucket: "bucket".into(),
                prefix: String::new()
            })
        );
        assert_eq!(
            "s3://bucket/a/b/".parse::<BlobUrl>(),
            Ok(BlobUrl::S3 {
                bucket: "bucket".into(),
                prefix: "a/b".into()
            })
        );
        assert_eq!(
            "/srv/blobs".parse::<BlobUrl>(),
            Ok(BlobUrl::Local("/srv/blobs".into()))
        );
        assert_eq!(
            "file:///srv/blobs".parse::<BlobUrl>(),
            Ok(BlobUrl::Local("/srv/blobs".into()))
        );
        assert!("s3://".parse::<BlobUrl>().is_err());
        assert!("gs://bucket".parse::<BlobUrl>().is_err());
    }
}
