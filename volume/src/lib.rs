//! Host-side persistence for wasm-storage: content-addressed blobs (a local
//! directory or an S3 bucket) plus a metadata database (SQLite or
//! PostgreSQL) through `sqlx`.
//!
//! Layout:
//! - [`path`]: decoding and validating client paths and listing prefixes.
//! - `db`: the database ([`DatabaseUrl`]), its two engines and migrations.
//! - `blobs`: the blob stores ([`BlobUrl`]): an upload staged in a local
//!   temp file as it arrives, then written to the store complete and
//!   durable; read back a chunk at a time.
//! - `index`: the `files` table and paginated folder listings.
//! - `ledger`: the `blobs` table, which blobs are stored and which are being
//!   removed: the lock that keeps reference counting safe across gateways.
//! - [`samples`]: the estimator's memory samples ([`SampleStore`]), kept in
//!   the same database.
//! - [`accounts`]: users, tokens, sessions, share links and server secrets
//!   ([`Accounts`]); every file lives in its [`Owner`]'s tree.
//! - [`webdav`]: what WebDAV needs beyond files: what a name is, copies and
//!   moves of whole trees as rows, dead properties and locks.
//!
//! Ordering is what keeps a crash harmless: a blob is complete in its store
//! before the row that names it commits, and a blob is removed only after
//! the commit that marked it `deleting`, which no file named. So a crash at
//! any point leaves at worst a temp file, an unreferenced blob or an
//! unfinished removal, and [`Volume::collect_garbage`] (at open, then
//! periodically) finishes all three. Identical content is stored once: a
//! blob's reference count is the number of rows naming its digest.

pub mod accounts;
pub mod path;
pub mod samples;
pub mod webdav;

mod blobs;
mod db;
mod index;
mod ledger;

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

pub use crate::accounts::{Accounts, Owner};
use crate::blobs::BlobStore;
pub use crate::blobs::{BlobReader, BlobUrl, S3Settings, StagedBlob};
pub use crate::db::DatabaseUrl;
use crate::db::{Database, WriteTx};
use crate::index::Index;
use crate::ledger::BlobState;
pub use crate::path::{FilePath, PathError, Prefix};
pub use crate::samples::{ProcessSample, SampleStore};

/// Everything the index knows about one stored file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileMeta {
    pub path: String,
    pub size: u64,
    /// Lowercase hex SHA-256 of the content: its address and ETag.
    pub sha256: String,
    /// Lowercase hex BLAKE3 of the content, which downloads are verified
    /// against (none for files stored before it was recorded).
    #[serde(skip)]
    pub blake3: Option<String>,
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

/// What an instance computed of an upload's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    /// SHA-256: the content's address and ETag.
    pub sha256: Digest,
    /// BLAKE3: what downloads are verified against. Without it they are
    /// verified by SHA-256.
    pub blake3: Option<Digest>,
}

/// A validated 256-bit digest (SHA-256 or BLAKE3) in lowercase hex.
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
    #[error("copying {rows} files and folders at once is more than the limit of {limit}")]
    TreeTooLarge { rows: usize, limit: usize },
    #[error("{to} is {from}, or one of them holds the other")]
    Nested { from: String, to: String },
    #[error("a resource may hold at most {limit} properties")]
    TooManyProperties { limit: usize },
    #[error("storing {size} bytes would exceed the quota of {quota} bytes ({used} in use)")]
    QuotaExceeded { quota: u64, used: u64, size: u64 },
    #[error("{context}: {source}")]
    Io {
        context: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("blob {0} is named by the index but missing from the blob store")]
    MissingBlob(String),
    #[error("blob {0} is still being removed; try again")]
    Busy(String),
    #[error("metadata index: {0}")]
    Database(sqlx::Error),
    #[error("blob store: {0}")]
    ObjectStore(#[from] object_store::Error),
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
        const POSTGRES_DISK_FULL: &str = "53100";
        let full = error.as_database_error().is_some_and(|db| {
            let code = db.code();
            if db
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .is_some()
            {
                code.is_some_and(|code| code == POSTGRES_DISK_FULL)
            } else {
                code.and_then(|code| code.parse::<i64>().ok())
                    .is_some_and(|code| code & 0xff == SQLITE_FULL)
            }
        });
        if full {
            Self::NoSpace
        } else {
            Self::Database(error)
        }
    }
}

/// What a garbage collection (or the sweep at open) found and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Temp files of writes that never finished (at open only).
    pub temp_files_removed: usize,
    /// Blobs no file names any more: unrecorded ones older than the grace
    /// period, stored ones whose removal never ran, removals left unfinished.
    pub orphan_blobs_removed: usize,
    /// Files whose blob is missing (logged; they read as an error).
    pub files_missing_blobs: usize,
}

/// How long a blob the ledger does not know is left alone, by default: an
/// upload on some gateway may have written it and be about to record it.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(10 * 60);

/// How long a removal may run, by default, before another process takes it
/// over (its remover presumably stopped). It must outlast any one removal,
/// S3 retries included (`object_store` gives up after 3 minutes), or a late
/// delete could remove a blob written again since.
pub const DEFAULT_REMOVAL_LEASE: Duration = Duration::from_secs(5 * 60);

/// How long a write waits for another gateway's removal of the same content
/// to finish before it gives up with [`VolumeError::Busy`].
const REMOVAL_WAIT: Duration = Duration::from_secs(30);

/// Where a volume keeps what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeConfig {
    /// This process's working directory: uploads are staged in its `tmp/`
    /// (always local). By default it also holds the index and the blobs.
    pub data_dir: PathBuf,
    pub database: DatabaseUrl,
    pub blobs: BlobUrl,
    /// For an S3 blob store: settings over the `AWS_*` environment.
    pub s3: S3Settings,
    /// Blobs in the store that the ledger does not know are collected once
    /// they are this old (see [`DEFAULT_ORPHAN_GRACE`]).
    pub orphan_grace: Duration,
    /// A removal running longer than this is taken over (see
    /// [`DEFAULT_REMOVAL_LEASE`]). Gateways' clocks must agree to well
    /// within it.
    pub removal_lease: Duration,
}

impl VolumeConfig {
    /// The embedded defaults: `index.sqlite` and `blobs/` in `data_dir`.
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            database: DatabaseUrl::in_data_dir(data_dir),
            blobs: BlobUrl::Local(data_dir.join("blobs")),
            s3: S3Settings::default(),
            orphan_grace: DEFAULT_ORPHAN_GRACE,
            removal_lease: DEFAULT_REMOVAL_LEASE,
        }
    }
}

/// The store: blobs in a blob store, metadata in a database. Several
/// processes may open the same database and blob store at once (each with
/// its own data directory); the ledger keeps them consistent.
#[derive(Debug)]
pub struct Volume {
    blobs: BlobStore,
    index: Index,
    tmp: PathBuf,
    orphan_grace: Duration,
    removal_lease: Duration,
}

impl Volume {
    /// Open (creating if needed) the store: run migrations, clear this
    /// process's temp files, then collect what an interrupted run left.
    pub async fn open(config: &VolumeConfig) -> Result<(Self, SweepReport), VolumeError> {
        let tmp = config.data_dir.join("tmp");
        std::fs::create_dir_all(&tmp)
            .map_err(|e| VolumeError::io("creating the data directory", e))?;
        let blobs = BlobStore::open(&config.blobs, &config.s3)?;
        let index = Index::new(Database::open(&config.database).await?);
        let volume = Self {
            blobs,
            index,
            tmp,
            orphan_grace: config.orphan_grace,
            removal_lease: config.removal_lease,
        };
        let temp_files_removed = blobs::clear_temp(&volume.tmp).await?;
        let report = SweepReport {
            temp_files_removed,
            ..volume.collect_garbage().await?
        };
        Ok((volume, report))
    }

    fn db(&self) -> &Database {
        self.index.db()
    }

    /// Somewhere to stage an upload's bytes as they arrive (memory, then a
    /// temp file); hand it to [`Volume::put`] once they are all there.
    pub fn stage(&self) -> StagedBlob {
        StagedBlob::new(&self.tmp)
    }

    /// Store the `staged` bytes, whose digests are `digests`, at `path`.
    /// With `overwrite` false an existing path is refused with
    /// `AlreadyExists`.
    ///
    /// The blob is written unless the ledger has it stored; then, in one
    /// transaction holding the blob's ledger row (claimed by inserting it if
    /// there was none), the blob is recorded as stored (checked present if
    /// this call wrote it, since a removal may have run meanwhile) and the
    /// file row committed.
    pub async fn put(
        &self,
        owner: Owner,
        path: &FilePath,
        mut staged: StagedBlob,
        digests: &Digests,
        content_type: &str,
        overwrite: bool,
    ) -> Result<FileMeta, VolumeError> {
        let digest = &digests.sha256;
        if !overwrite && self.index.get(owner, path).await?.is_some() {
            return Err(VolumeError::AlreadyExists(path.to_string()));
        }
        let size = staged.len();
        let mut written = false;
        let mut waited = Duration::ZERO;
        loop {
            match ledger::peek(self.db(), digest).await? {
                Some(BlobState::Deleting { since_ms }) => {
                    if self.is_stale(since_ms) {
                        // Its remover stopped: finish it (or let whoever
                        // took it over first do so).
                        self.take_over_removal(digest, since_ms).await?;
                    }
                    waited += self.wait_for_removal(digest, waited).await?;
                    continue;
                }
                None if !written => {
                    self.blobs.write(digest, &mut staged).await?;
                    written = true;
                }
                _ => {}
            }
            let mut tx = self.db().begin_write().await?;
            match ledger::lock(self.db(), &mut tx, digest).await? {
                Some(BlobState::Stored) => {}
                // A removal began, or finished and took the blob: look again.
                Some(BlobState::Deleting { .. }) => {
                    tx.rollback().await?;
                    continue;
                }
                None if !written => {
                    tx.rollback().await?;
                    continue;
                }
                None => {
                    // Claim the row first. Until this transaction ends no
                    // removal can start (a release needs a committed
                    // `stored` row, an orphan removal this very key), and
                    // one that finished before the claim finished deleting
                    // first: so the blob found now stays.
                    if !ledger::insert(&mut tx, digest, BlobState::Stored, now_ms()).await? {
                        tx.rollback().await?;
                        continue;
                    }
                    if !self.blobs.exists(digest).await? {
                        tx.rollback().await?;
                        written = false;
                        continue;
                    }
                }
            }
            let upserted = match self.check_quota(&mut tx, owner, path, size).await {
                Ok(()) => {
                    self.index
                        .upsert(
                            &mut tx,
                            owner,
                            path,
                            size,
                            digests,
                            content_type,
                            overwrite,
                            now_ms(),
                        )
                        .await
                }
                Err(error) => Err(error),
            };
            return match upserted {
                Ok(replaced) => {
                    tx.commit().await?;
                    if let Some(previous) = replaced.previous.filter(|previous| previous != digest)
                    {
                        self.release_logged(&previous).await;
                    }
                    Ok(replaced.meta)
                }
                Err(
                    error @ (VolumeError::AlreadyExists(_) | VolumeError::QuotaExceeded { .. }),
                ) => {
                    // Keep the blob recorded, then let it go: nothing names it.
                    tx.commit().await?;
                    self.release_logged(digest).await;
                    Err(error)
                }
                // Rolled back; a blob this call wrote is an orphan the next
                // collection removes.
                Err(error) => Err(error),
            };
        }
    }

    /// Refuse (with `QuotaExceeded`) to make `owner`'s `path` `size` bytes
    /// when that takes the owner's files over their quota. Runs in the
    /// write transaction that stores the file, holding the owner's row.
    async fn check_quota(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        path: &FilePath,
        size: u64,
    ) -> Result<(), VolumeError> {
        let Some(quota) = accounts::locked_quota(self.db(), tx, owner).await? else {
            return Ok(());
        };
        let used = self.index.usage_except(tx, owner, path).await?;
        if used.saturating_add(size) > quota {
            return Err(VolumeError::QuotaExceeded { quota, used, size });
        }
        Ok(())
    }

    /// Sleep a little while another process removes blob `digest`; fails
    /// with `Busy` once [`REMOVAL_WAIT`] has passed. Returns the time slept.
    async fn wait_for_removal(
        &self,
        digest: &Digest,
        waited: Duration,
    ) -> Result<Duration, VolumeError> {
        if waited >= REMOVAL_WAIT {
            return Err(VolumeError::Busy(digest.to_string()));
        }
        let pause = (Duration::from_millis(5) + waited / 2).min(Duration::from_millis(500));
        tokio::time::sleep(pause).await;
        Ok(pause)
    }

    pub async fn stat(&self, owner: Owner, path: &FilePath) -> Result<FileMeta, VolumeError> {
        self.index
            .get(owner, path)
            .await?
            .ok_or_else(|| VolumeError::NotFound(path.to_string()))
    }

    /// The metadata of `path` and its content, opened for reading a chunk at
    /// a time.
    pub async fn read(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<(FileMeta, BlobReader), VolumeError> {
        self.read_looked_up(owner, path, None).await
    }

    /// [`Volume::read`], starting from `looked_up`, the row of `path` the
    /// caller read a moment ago (what [`Volume::stat`] gave), when it has
    /// one: the index is not asked again unless its blob is gone.
    pub async fn read_looked_up(
        &self,
        owner: Owner,
        path: &FilePath,
        mut looked_up: Option<FileMeta>,
    ) -> Result<(FileMeta, BlobReader), VolumeError> {
        // A concurrent replace may remove the blob between reading the row
        // and opening the blob; the row read again then names the new blob.
        const ATTEMPTS: usize = 3;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let meta = match looked_up.take() {
                Some(meta) => meta,
                None => self.stat(owner, path).await?,
            };
            let digest = Digest::parse(&meta.sha256)?;
            match self.blobs.open_blob(&digest, meta.size).await? {
                Some(reader) => return Ok((meta, reader)),
                None if attempt == ATTEMPTS => return Err(VolumeError::MissingBlob(meta.sha256)),
                None => {}
            }
        }
    }

    pub async fn delete(&self, owner: Owner, path: &FilePath) -> Result<(), VolumeError> {
        let digest = self
            .index
            .delete(owner, path)
            .await?
            .ok_or_else(|| VolumeError::NotFound(path.to_string()))?;
        self.release_logged(&digest).await;
        Ok(())
    }

    /// One page of what lies directly under `prefix`, strictly after `after`.
    pub async fn list(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, VolumeError> {
        self.index.list(owner, prefix, after, limit).await
    }

    /// Make the empty folder `prefix` in `owner`'s tree (it lists, and
    /// stays, until deleted); whether it was new.
    pub async fn make_folder(&self, owner: Owner, prefix: &Prefix) -> Result<bool, VolumeError> {
        if prefix.as_str().is_empty() {
            return Ok(false);
        }
        self.index.make_folder(owner, prefix, now_ms()).await
    }

    /// Delete the folder `prefix` and everything in it: files (their blobs
    /// released once nothing names them) and folders. `NotFound` when
    /// nothing was there; otherwise how many files and folders went.
    pub async fn delete_folder(&self, owner: Owner, prefix: &Prefix) -> Result<u64, VolumeError> {
        let (digests, removed) = self.index.delete_tree(owner, prefix).await?;
        if removed == 0 {
            return Err(VolumeError::NotFound(prefix.to_string()));
        }
        for digest in &digests {
            self.release_logged(digest).await;
        }
        Ok(removed)
    }

    /// Whether blob `digest` is in the blob store.
    pub async fn blob_exists(&self, digest: &Digest) -> Result<bool, VolumeError> {
        self.blobs.exists(digest).await
    }

    /// [`Volume::release`], with a failure logged rather than returned: the
    /// change that dropped the reference has committed already, and the
    /// next collection finishes the removal.
    async fn release_logged(&self, digest: &Digest) {
        if let Err(error) = self.release(digest).await {
            tracing::warn!(%digest, %error, "could not remove an unreferenced blob; the next collection will");
        }
    }

    /// Remove blob `digest` if it is stored and no file names it; returns
    /// whether it did.
    async fn release(&self, digest: &Digest) -> Result<bool, VolumeError> {
        let mut tx = self.db().begin_write().await?;
        if ledger::lock(self.db(), &mut tx, digest).await? != Some(BlobState::Stored)
            || ledger::references(&mut tx, digest).await? > 0
        {
            return Ok(false);
        }
        let claim_ms = now_ms();
        ledger::mark_deleting(&mut tx, digest, claim_ms).await?;
        tx.commit().await?;
        self.finish_removal(digest, claim_ms).await?;
        Ok(true)
    }

    /// Remove blob `digest`, whose removal this process claimed at
    /// `claim_ms`, and then its ledger row (if the claim still holds).
    async fn finish_removal(&self, digest: &Digest, claim_ms: i64) -> Result<(), VolumeError> {
        self.blobs.remove(digest).await?;
        ledger::forget(self.db(), digest, claim_ms).await
    }

    /// Whether a removal stamped `since_ms` has outlived the lease.
    fn is_stale(&self, since_ms: i64) -> bool {
        let lease_ms = i64::try_from(self.removal_lease.as_millis()).unwrap_or(i64::MAX);
        now_ms().saturating_sub(since_ms) > lease_ms
    }

    /// Finish a removal stamped `seen_ms` whose remover stopped, unless
    /// another process took it over (or finished it) first; returns
    /// whether this call did.
    async fn take_over_removal(&self, digest: &Digest, seen_ms: i64) -> Result<bool, VolumeError> {
        let claim_ms = now_ms();
        if !ledger::take_over(self.db(), digest, seen_ms, claim_ms).await? {
            return Ok(false);
        }
        self.finish_removal(digest, claim_ms).await?;
        Ok(true)
    }

    /// Remove a blob the ledger does not know, unless it is recorded
    /// meanwhile; returns whether it did.
    async fn remove_unrecorded(&self, digest: &Digest) -> Result<bool, VolumeError> {
        let mut tx = self.db().begin_write().await?;
        let claim_ms = now_ms();
        let claimed = BlobState::Deleting { since_ms: claim_ms };
        // No file can name a blob without a ledger row; checked anyway.
        if !ledger::insert(&mut tx, digest, claimed, claim_ms).await?
            || ledger::references(&mut tx, digest).await? > 0
        {
            return Ok(false);
        }
        tx.commit().await?;
        self.finish_removal(digest, claim_ms).await?;
        Ok(true)
    }

    /// Collect garbage: take over removals that outlived the lease, remove
    /// stored blobs no file names, and blobs the ledger does not know that
    /// are older than the grace period; count (and log) files whose blob is
    /// missing; clear expired WebDAV locks. Safe to run on every gateway at once. A blob that cannot be
    /// removed is logged and left for the next collection.
    pub async fn collect_garbage(&self) -> Result<SweepReport, VolumeError> {
        let lease_ms = i64::try_from(self.removal_lease.as_millis()).unwrap_or(i64::MAX);
        let mut removed = 0;
        let mut count = |digest: &Digest, outcome: Result<bool, VolumeError>| match outcome {
            Ok(done) => removed += usize::from(done),
            Err(error) => {
                tracing::warn!(%digest, %error, "could not remove a blob; the next collection will")
            }
        };
        let stale_before = now_ms().saturating_sub(lease_ms);
        for (digest, seen_ms) in ledger::stale_deletions(self.db(), stale_before).await? {
            count(&digest, self.take_over_removal(&digest, seen_ms).await);
        }
        for digest in ledger::unreferenced(self.db()).await? {
            count(&digest, self.release(&digest).await);
        }
        let known: HashSet<String> = ledger::all(self.db()).await?.into_iter().collect();
        let listed = self.blobs.list().await?;
        let old_enough = SystemTime::now()
            .checked_sub(self.orphan_grace)
            .unwrap_or(UNIX_EPOCH);
        for blob in &listed {
            if !known.contains(blob.digest.as_str()) && blob.modified <= old_enough {
                count(&blob.digest, self.remove_unrecorded(&blob.digest).await);
            }
        }
        let present: HashSet<&str> = listed.iter().map(|blob| blob.digest.as_str()).collect();
        let mut files_missing_blobs = 0;
        for named in self.index.referenced().await? {
            if present.contains(named.as_str()) {
                continue;
            }
            // Perhaps written after the listing: look once more.
            let digest = Digest::parse(&named)?;
            if !self.blobs.exists(&digest).await? {
                tracing::error!(sha256 = %named, "a file's blob is missing from the blob store");
                files_missing_blobs += 1;
            }
        }
        let expired_locks = self.webdav().clear_expired().await?;
        if expired_locks > 0 {
            tracing::debug!(expired_locks, "cleared expired WebDAV locks");
        }
        let report = SweepReport {
            temp_files_removed: 0,
            orphan_blobs_removed: removed,
            files_missing_blobs,
        };
        if report != SweepReport::default() {
            tracing::info!(?report, "collected garbage");
        }
        Ok(report)
    }

    /// Users, tokens, sessions and share links, kept in the same database.
    pub fn accounts(&self) -> Accounts {
        Accounts::new(self.db().clone())
    }

    /// The estimator's samples, kept in the same database.
    pub fn samples(&self) -> SampleStore<'_> {
        SampleStore::new(self.db())
    }

    /// Close the database's connections (waits for in-flight queries).
    pub async fn close(&self) {
        self.db().close().await;
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
