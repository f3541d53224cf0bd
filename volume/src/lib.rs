//! Host-side persistence for wasm-storage: content-addressed blob files on
//! disk plus a metadata index in SQLite through `sqlx`.
//!
//! Layout:
//! - [`path`]: decoding and validating client paths and listing prefixes.
//! - `blobs`: blob files: staged in a temp file as an upload's bytes arrive,
//!   then fsync, rename, fsync of the directory; read back a chunk at a time.
//! - `index`: the `files` table, migrations, paginated folder listings.
//! - [`samples`]: the estimator's memory samples ([`SampleStore`]), kept in
//!   the same database.
//!
//! Ordering is what keeps a crash harmless: a blob is complete on disk before
//! the row that names it commits, and a blob is removed only after the commit
//! that dropped its last reference. So a crash at any point leaves at worst a
//! temp file or an unreferenced blob, and [`Volume::open`] sweeps both.
//! Identical content is stored once: a blob's reference count is the number
//! of rows naming its digest.

pub mod path;
pub mod samples;

mod blobs;
mod index;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::Mutex;

use crate::blobs::BlobStore;
pub use crate::blobs::{BlobReader, StagedBlob};
use crate::index::Index;
pub use crate::path::{FilePath, PathError, Prefix};
pub use crate::samples::{ProcessSample, SampleStore};

/// Everything the index knows about one stored file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileMeta {
    pub path: String,
    pub size: u64,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
    pub content_type: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    pub modified_ms: i64,
}

/// One row of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File(FileMeta),
    /// A folder's full prefix, ending with `/`.
    Folder(String),
}

impl Entry {
    /// The full path of the file, or the folder's prefix.
    pub fn name(&self) -> &str {
        match self {
            Self::File(meta) => &meta.path,
            Self::Folder(prefix) => prefix,
        }
    }
}

/// One page of a folder listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub entries: Vec<Entry>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next_after: Option<String>,
}

/// A validated SHA-256 digest in lowercase hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest(String);

impl Digest {
    pub fn parse(hex: &str) -> Result<Self, VolumeError> {
        let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(Self(hex.to_owned()))
        } else {
            Err(VolumeError::InvalidDigest(hex.chars().take(80).collect()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("no file at {0}")]
    NotFound(String),
    #[error("{0} already exists")]
    AlreadyExists(String),
    #[error(transparent)]
    InvalidPath(#[from] PathError),
    #[error("not a lowercase hex SHA-256 digest: {0:?}")]
    InvalidDigest(String),
    #[error("{0} bytes is more than the index can record")]
    TooLarge(u64),
    #[error("the disk is full")]
    NoSpace,
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("blob {0} is named by the index but missing on disk")]
    MissingBlob(String),
    #[error("metadata index: {0}")]
    Database(sqlx::Error),
    #[error("metadata index migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl VolumeError {
    fn io(context: &'static str, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::StorageFull {
            Self::NoSpace
        } else {
            Self::Io { context, source }
        }
    }
}

impl From<sqlx::Error> for VolumeError {
    fn from(error: sqlx::Error) -> Self {
        const SQLITE_FULL: i64 = 13;
        let full = error
            .as_database_error()
            .and_then(|db| db.code())
            .and_then(|code| code.parse::<i64>().ok())
            .is_some_and(|code| code & 0xff == SQLITE_FULL);
        if full {
            Self::NoSpace
        } else {
            Self::Database(error)
        }
    }
}

/// What the sweep at start found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Temp files of writes that never finished.
    pub temp_files_removed: usize,
    /// Blobs no file names any more.
    pub orphan_blobs_removed: usize,
    /// Files whose blob is missing (logged; they read as an error).
    pub files_missing_blobs: usize,
}

/// Serialises the steps that create or remove one blob, so that "does the
/// blob exist / is it still referenced" never races with its removal.
/// Striped: unrelated digests rarely share a lock.
#[derive(Debug)]
struct DigestLocks {
    stripes: Vec<Mutex<()>>,
}

impl DigestLocks {
    const STRIPES: usize = 64;

    fn new() -> Self {
        Self {
            stripes: (0..Self::STRIPES).map(|_| Mutex::new(())).collect(),
        }
    }

    async fn lock(&self, digest: &Digest) -> tokio::sync::MutexGuard<'_, ()> {
        let stripe = usize::from_str_radix(&digest.as_str()[..2], 16).unwrap_or_default();
        self.stripes[stripe % Self::STRIPES].lock().await
    }
}

/// The store: blobs on disk under a data directory, metadata in SQLite.
#[derive(Debug)]
pub struct Volume {
    blobs: BlobStore,
    index: Index,
    locks: DigestLocks,
}

impl Volume {
    /// Open (creating if needed) the store in `data_dir`: run migrations, then
    /// sweep what an interrupted run left behind.
    pub async fn open(data_dir: &Path) -> Result<(Self, SweepReport), VolumeError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| VolumeError::io("creating the data directory", e))?;
        let blobs = BlobStore::open(data_dir)?;
        let index = Index::open(&data_dir.join("index.sqlite")).await?;
        let volume = Self {
            blobs,
            index,
            locks: DigestLocks::new(),
        };
        let report = volume.sweep().await?;
        Ok((volume, report))
    }

    /// Where the blob with this digest lives on disk.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        self.blobs.path_of(digest)
    }

    /// A temp file to stage an upload's bytes in as they arrive; hand it to
    /// [`Volume::put`] once they are all there.
    pub async fn stage(&self) -> Result<StagedBlob, VolumeError> {
        self.blobs.stage().await
    }

    /// Store the `staged` bytes, whose SHA-256 is `digest`, at `path`. With
    /// `overwrite` false an existing path is refused with `AlreadyExists`.
    pub async fn put(
        &self,
        path: &FilePath,
        staged: StagedBlob,
        digest: &Digest,
        content_type: &str,
        overwrite: bool,
    ) -> Result<FileMeta, VolumeError> {
        let size = staged.len();
        let committed = {
            let _blob = self.locks.lock(digest).await;
            self.blobs.commit(digest, staged).await?;
            self.index
                .upsert(path, size, digest, content_type, overwrite, now_ms())
                .await
        };
        match committed {
            Ok(replaced) => {
                if let Some(previous) = replaced.previous.filter(|previous| previous != digest) {
                    self.release(&previous).await;
                }
                Ok(replaced.meta)
            }
            Err(error) => {
                // The blob may have been written for nothing.
                self.release(digest).await;
                Err(error)
            }
        }
    }

    pub async fn stat(&self, path: &FilePath) -> Result<FileMeta, VolumeError> {
        self.index
            .get(path)
            .await?
            .ok_or_else(|| VolumeError::NotFound(path.to_string()))
    }

    /// The metadata of `path` and its content, opened for reading a chunk at
    /// a time.
    pub async fn read(&self, path: &FilePath) -> Result<(FileMeta, BlobReader), VolumeError> {
        // A concurrent replace may remove the blob between reading the row
        // and reading the file; the row read again then names the new blob.
        const ATTEMPTS: usize = 3;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let meta = self.stat(path).await?;
            let digest = Digest::parse(&meta.sha256)?;
            match self.blobs.open_blob(&digest).await {
                Ok(file) => {
                    let size = meta.size;
                    return Ok((meta, BlobReader::new(file, size)));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if attempt == ATTEMPTS {
                        return Err(VolumeError::MissingBlob(meta.sha256));
                    }
                }
                Err(e) => return Err(VolumeError::io("reading a blob", e)),
            }
        }
    }

    pub async fn delete(&self, path: &FilePath) -> Result<(), VolumeError> {
        let digest = self
            .index
            .delete(path)
            .await?
            .ok_or_else(|| VolumeError::NotFound(path.to_string()))?;
        self.release(&digest).await;
        Ok(())
    }

    /// One page of what lies directly under `prefix`, strictly after `after`.
    pub async fn list(
        &self,
        prefix: &Prefix,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, VolumeError> {
        self.index.list(prefix, after, limit).await
    }

    /// Remove blob `digest` if no file names it any more. A failure only
    /// leaves an orphan for the next sweep, so it is logged, not returned:
    /// the change that dropped the reference has committed already.
    async fn release(&self, digest: &Digest) {
        let _blob = self.locks.lock(digest).await;
        let outcome = match self.index.references(digest).await {
            Ok(0) => self.blobs.remove(digest).await,
            Ok(_) => Ok(()),
            Err(error) => Err(error),
        };
        if let Err(error) = outcome {
            tracing::warn!(%digest, %error, "could not remove an unreferenced blob; the next sweep will");
        }
    }

    /// Remove temp files and unreferenced blobs; count files whose blob is gone.
    pub async fn sweep(&self) -> Result<SweepReport, VolumeError> {
        let temp_files_removed = self.blobs.clear_temp().await?;
        let mut referenced = self.index.referenced().await?;
        let mut orphan_blobs_removed = 0;
        for digest in self.blobs.all().await? {
            if !referenced.remove(digest.as_str()) {
                let _blob = self.locks.lock(&digest).await;
                if self.index.references(&digest).await? == 0 {
                    self.blobs.remove(&digest).await?;
                    orphan_blobs_removed += 1;
                }
            }
        }
        // What is left is named by some file but has no blob on disk.
        for missing in &referenced {
            tracing::error!(sha256 = %missing, "a file's blob is missing from disk");
        }
        let report = SweepReport {
            temp_files_removed,
            orphan_blobs_removed,
            files_missing_blobs: referenced.len(),
        };
        if report != SweepReport::default() {
            tracing::info!(?report, "swept the data directory");
        }
        Ok(report)
    }

    /// The estimator's samples, kept in the same database.
    pub fn samples(&self) -> SampleStore<'_> {
        SampleStore::new(&self.index)
    }

    /// Close the index's connections (waits for in-flight queries).
    pub async fn close(&self) {
        self.index.close().await;
    }
}

/// Milliseconds since the Unix epoch, the timestamps of the index.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
