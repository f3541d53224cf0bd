//! Content-addressed blob files on disk.
//!
//! A blob lives at `blobs/<first two hex digits>/<sha256>`. It is written to
//! `tmp/` first, fsynced, renamed into place and its directory fsynced, so a
//! blob file that exists is always complete. A crash leaves at worst a temp
//! file or an unreferenced blob, both removed by the sweep at start.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::{Digest, VolumeError};

#[derive(Debug, Clone)]
pub(crate) struct BlobStore {
    blobs: PathBuf,
    tmp: PathBuf,
}

impl BlobStore {
    pub(crate) fn open(root: &Path) -> Result<Self, VolumeError> {
        let store = Self {
            blobs: root.join("blobs"),
            tmp: root.join("tmp"),
        };
        for dir in [&store.blobs, &store.tmp] {
            fs::create_dir_all(dir)
                .map_err(|e| VolumeError::io("creating the data directory", e))?;
        }
        Ok(store)
    }

    pub(crate) fn path_of(&self, digest: &Digest) -> PathBuf {
        let hex = digest.as_str();
        self.blobs.join(&hex[..2]).join(hex)
    }

    /// Write `content` as the blob `digest` unless it is already there.
    /// Returns whether a new file was written.
    pub(crate) async fn ensure(
        &self,
        digest: &Digest,
        content: Vec<u8>,
    ) -> Result<bool, VolumeError> {
        let store = self.clone();
        let digest = digest.clone();
        blocking(move || store.ensure_blocking(&digest, &content)).await
    }

    fn ensure_blocking(&self, digest: &Digest, content: &[u8]) -> Result<bool, VolumeError> {
        let target = self.path_of(digest);
        if target.exists() {
            return Ok(false);
        }
        let fan_out = target.parent().unwrap_or(&self.blobs);
        if !fan_out.exists() {
            fs::create_dir_all(fan_out)
                .map_err(|e| VolumeError::io("creating a blob directory", e))?;
            sync_dir(&self.blobs)?;
        }
        // The temp file deletes itself on drop until it is persisted.
        let mut temp = tempfile::Builder::new()
            .prefix("upload-")
            .tempfile_in(&self.tmp)
            .map_err(|e| VolumeError::io("creating a temp file", e))?;
        temp.write_all(content)
            .map_err(|e| VolumeError::io("writing a blob", e))?;
        temp.as_file()
            .sync_all()
            .map_err(|e| VolumeError::io("syncing a blob", e))?;
        temp.persist(&target)
            .map_err(|e| VolumeError::io("renaming a blob into place", e.error))?;
        sync_dir(fan_out)?;
        Ok(true)
    }

    /// The whole content of blob `digest`.
    pub(crate) async fn read(&self, digest: &Digest) -> io::Result<Vec<u8>> {
        tokio::fs::read(self.path_of(digest)).await
    }

    /// Remove blob `digest`; a blob already gone is not an error.
    pub(crate) async fn remove(&self, digest: &Digest) -> Result<(), VolumeError> {
        match tokio::fs::remove_file(self.path_of(digest)).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(VolumeError::io("removing a blob", e)),
        }
    }

    /// Remove every leftover temp file; returns how many there were.
    pub(crate) async fn clear_temp(&self) -> Result<usize, VolumeError> {
        let tmp = self.tmp.clone();
        blocking(move || {
            let mut removed = 0;
            for entry in fs::read_dir(&tmp).map_err(|e| VolumeError::io("listing temp files", e))? {
                let entry = entry.map_err(|e| VolumeError::io("listing temp files", e))?;
                fs::remove_file(entry.path())
                    .map_err(|e| VolumeError::io("removing a temp file", e))?;
                removed += 1;
            }
            Ok(removed)
        })
        .await
    }

    /// Every blob on disk, by digest. Files that are not named like a blob
    /// are ignored (and left alone).
    pub(crate) async fn all(&self) -> Result<Vec<Digest>, VolumeError> {
        let blobs = self.blobs.clone();
        blocking(move || {
            let mut found = Vec::new();
            let listing_error = |e| VolumeError::io("listing blobs", e);
            for fan_out in fs::read_dir(&blobs).map_err(listing_error)? {
                let fan_out = fan_out.map_err(listing_error)?;
                if !fan_out.file_type().map_err(listing_error)?.is_dir() {
                    continue;
                }
                for blob in fs::read_dir(fan_out.path()).map_err(listing_error)? {
                    let name = blob.map_err(listing_error)?.file_name();
                    if let Some(digest) = name.to_str().and_then(|n| Digest::parse(n).ok()) {
                        found.push(digest);
                    }
                }
            }
            Ok(found)
        })
        .await
    }
}

fn sync_dir(dir: &Path) -> Result<(), VolumeError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| VolumeError::io("syncing a directory", e))
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, VolumeError> + Send + 'static,
) -> Result<T, VolumeError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| VolumeError::io("blob I/O task", io::Error::other(e)))?
}
