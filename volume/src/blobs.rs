//! Content-addressed blob files on disk.
//!
//! A blob lives at `blobs/<first two hex digits>/<sha256>`. It is written to
//! `tmp/` first, fsynced, renamed into place and its directory fsynced, so a
//! blob file that exists is always complete. A crash leaves at worst a temp
//! file or an unreferenced blob, both removed by the sweep at start.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use tempfile::TempPath;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{Digest, VolumeError};

/// A blob's bytes being written to a temp file as they arrive, before
/// anyone knows its digest. Dropped unfinished, the temp file goes with it.
#[derive(Debug)]
pub struct StagedBlob {
    file: tokio::fs::File,
    path: TempPath,
    len: u64,
}

impl StagedBlob {
    /// Append `chunk`.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), VolumeError> {
        self.file
            .write_all(chunk)
            .await
            .map_err(|e| VolumeError::io("writing a blob", e))?;
        self.len += chunk.len() as u64;
        Ok(())
    }

    /// Bytes staged so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A stored blob's content, read a chunk at a time.
#[derive(Debug)]
pub struct BlobReader {
    file: tokio::fs::File,
    /// Bytes the index says are left; reading stops there.
    remaining: u64,
}

impl BlobReader {
    pub(crate) fn new(file: tokio::fs::File, size: u64) -> Self {
        Self {
            file,
            remaining: size,
        }
    }

    /// Up to `max` more bytes; empty at the end. A blob shorter than the
    /// index says ends early, which the reader's verification catches.
    pub async fn read(&mut self, max: usize) -> Result<Vec<u8>, VolumeError> {
        let want = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(max);
        let mut chunk = vec![0; want];
        let mut filled = 0;
        while filled < want {
            let n = self
                .file
                .read(&mut chunk[filled..])
                .await
                .map_err(|e| VolumeError::io("reading a blob", e))?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        chunk.truncate(filled);
        self.remaining -= filled as u64;
        if filled < want {
            self.remaining = 0;
        }
        Ok(chunk)
    }

    /// Everything that is left, in one buffer (for tests and small files).
    pub async fn read_to_end(&mut self) -> Result<Vec<u8>, VolumeError> {
        let mut all = Vec::new();
        loop {
            let chunk = self.read(1 << 20).await?;
            if chunk.is_empty() {
                return Ok(all);
            }
            all.extend_from_slice(&chunk);
        }
    }
}

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

    /// A new temp file to stage a blob's bytes in as they arrive.
    pub(crate) async fn stage(&self) -> Result<StagedBlob, VolumeError> {
        let tmp = self.tmp.clone();
        let (file, path) = blocking(move || {
            tempfile::Builder::new()
                .prefix("upload-")
                .tempfile_in(&tmp)
                .map_err(|e| VolumeError::io("creating a temp file", e))
        })
        .await?
        .into_parts();
        Ok(StagedBlob {
            file: tokio::fs::File::from_std(file),
            path,
            len: 0,
        })
    }

    /// Make `staged` the blob `digest`, unless that blob is there already
    /// (then the staged copy is dropped). Returns whether a new file was
    /// written. The blob is complete and durable when this returns.
    pub(crate) async fn commit(
        &self,
        digest: &Digest,
        staged: StagedBlob,
    ) -> Result<bool, VolumeError> {
        let target = self.path_of(digest);
        if tokio::fs::try_exists(&target).await.unwrap_or(false) {
            return Ok(false);
        }
        let StagedBlob { mut file, path, .. } = staged;
        file.flush()
            .await
            .map_err(|e| VolumeError::io("writing a blob", e))?;
        file.sync_all()
            .await
            .map_err(|e| VolumeError::io("syncing a blob", e))?;
        drop(file);
        let blobs = self.blobs.clone();
        blocking(move || {
            let fan_out = target.parent().unwrap_or(&blobs);
            if !fan_out.exists() {
                fs::create_dir_all(fan_out)
                    .map_err(|e| VolumeError::io("creating a blob directory", e))?;
                sync_dir(&blobs)?;
            }
            // Until persisted, the temp path deletes its file on drop.
            path.persist(&target)
                .map_err(|e| VolumeError::io("renaming a blob into place", e.error))?;
            sync_dir(fan_out)?;
            Ok(true)
        })
        .await
    }

    /// Blob `digest`, opened for reading.
    pub(crate) async fn open_blob(&self, digest: &Digest) -> io::Result<tokio::fs::File> {
        tokio::fs::File::open(self.path_of(digest)).await
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
