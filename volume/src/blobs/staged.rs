//! An upload's bytes in a local temp file while they arrive.

use std::fs;
use std::path::{Path, PathBuf};

use tempfile::TempPath;
use tokio::io::AsyncWriteExt;

use crate::VolumeError;
use crate::blobs::local::blocking;

/// A blob's bytes being written to a temp file as they arrive, before
/// anyone knows its digest. Dropped, the temp file goes with it (a blob
/// written from it keeps its own link or copy).
#[derive(Debug)]
pub struct StagedBlob {
    file: tokio::fs::File,
    path: TempPath,
    len: u64,
    /// Flushed and fsynced since the last write.
    synced: bool,
}

impl StagedBlob {
    /// A new temp file in `tmp`.
    pub(crate) async fn create(tmp: &Path) -> Result<Self, VolumeError> {
        let tmp = tmp.to_path_buf();
        let (file, path) = blocking(move || {
            tempfile::Builder::new()
                .prefix("upload-")
                .tempfile_in(&tmp)
                .map_err(|e| VolumeError::io("creating a temp file", e))
        })
        .await?
        .into_parts();
        Ok(Self {
            file: tokio::fs::File::from_std(file),
            path,
            len: 0,
            synced: false,
        })
    }

    /// Append `chunk`.
    pub async fn write(&mut self, chunk: &[u8]) -> Result<(), VolumeError> {
        self.file
            .write_all(chunk)
            .await
            .map_err(|e| VolumeError::io("writing a blob", e))?;
        self.len += chunk.len() as u64;
        self.synced = false;
        Ok(())
    }

    /// Bytes staged so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Flush and fsync: the bytes are on disk under [`StagedBlob::path`].
    pub(crate) async fn sync(&mut self) -> Result<(), VolumeError> {
        if !self.synced {
            self.file
                .flush()
                .await
                .map_err(|e| VolumeError::io("writing a blob", e))?;
            self.file
                .sync_all()
                .await
                .map_err(|e| VolumeError::io("syncing a blob", e))?;
            self.synced = true;
        }
        Ok(())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Remove every leftover temp file in `tmp`; returns how many there were.
pub(crate) async fn clear_temp(tmp: &Path) -> Result<usize, VolumeError> {
    let tmp: PathBuf = tmp.to_path_buf();
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
