//! Host-side persistence for wasm-storage: content-addressed blobs (a local
//! directory or an S3 bucket) plus a metadata database (SQLite or
//! PostgreSQL) through `sqlx`.
//!
//! Layout, ground floor first (each table has one module that reads and
//! writes it; a module imports only those below it):
//! - `types`, `error`: what every module speaks ([`FileMeta`], [`Digest`],
//!   [`Owner`], …) and [`VolumeError`]; [`path`]: decoding and validating
//!   client paths and listing prefixes.
//! - `db`: the database ([`DatabaseUrl`]), its two engines, migrations and
//!   write transactions.
//! - `blobs`: the blob stores ([`BlobUrl`]): an upload staged as it
//!   arrives, then written to the store complete and durable; read back a
//!   chunk at a time.
//! - `tree`: the `files` and `folders` tables: rows, listings, and whole
//!   trees copied and moved as rows. `properties`: `dav_properties`.
//!   `locks`: `dav_locks`. `ledger`: `blobs`, which blobs are stored and
//!   which are being removed: the lock that keeps reference counting safe
//!   across gateways. [`samples`]: the estimator's memory samples
//!   ([`SampleStore`]); `footprints`: the requests' memory footprints,
//!   shared by the gateways on one database ([`FootprintStore`]).
//!   [`accounts`]: users, tokens, sessions, S3 keys, share links and
//!   server secrets ([`Accounts`]); every file lives in its [`Owner`]'s
//!   tree. [`uploads`]: uploads in parts on their way in.
//! - Over those tables, owning none: `quota`, the quota rule once: what an
//!   owner uses (files, folders, share links, properties, unfinished
//!   uploads) and what a change costs against it (it weighs a user's usage
//!   and a new share link for [`Accounts`]); `owners`, every table that
//!   keeps an owner's rows in one list, and the two cascades over it
//!   (removing a user, adopting the open tree).
//! - This file, `put`, `gc`, `resumable` and `transfer`: [`Volume`], whose
//!   operations order the steps across those owners (`put`: storing a
//!   file; `transfer`: WebDAV's copies and moves; `gc`: releasing blobs
//!   and collecting garbage;
//!   `resumable`: uploads in parts); [`webdav`]: the
//!   WebDAV-facing names and [`webdav::WebDavStore`] (properties, locks).
//!
//! Ordering is what keeps a crash harmless: a blob is complete in its store
//! before the row that names it commits, and a blob is removed only after
//! the commit that marked it `deleting`, which no file named. So a crash at
//! any point leaves at worst a temp file, an unreferenced blob or an
//! unfinished removal, and [`Volume::collect_garbage`] (at open, then
//! periodically) finishes all three: at open this data directory's own
//! unfinished removals at once, another process's once its lease is over.
//! Identical content is stored once: a blob's reference count is the
//! number of rows naming its digest.

pub mod accounts;
pub mod appending;
pub mod path;
pub mod samples;
pub mod webdav;

mod blobs;
mod bucket_config;
mod bucket_versioning;
mod config;
mod configs;
mod db;
mod error;
mod footprints;
mod gc;
mod history;
mod ledger;
mod lifecycle;
mod locking;
mod locks;
mod object_lock;
mod owners;
mod packing;
mod properties;
mod put;
mod quota;
mod resumable;
mod transfer;
mod trash;
mod tree;
mod types;
pub mod uploads;
mod versioning;
mod versions;

use std::path::PathBuf;
use std::time::Duration;

pub use crate::accounts::Accounts;
use crate::blobs::BlobStore;
pub use crate::blobs::{BlobReader, BlobUrl, S3Settings, StagedBlob};
pub use crate::bucket_config::ConfigKind;
pub use crate::config::{DEFAULT_ORPHAN_GRACE, DEFAULT_REMOVAL_LEASE, VolumeConfig};
pub use crate::db::DatabaseUrl;
use crate::db::{Database, WriteTx};
pub use crate::error::VolumeError;
pub use crate::footprints::{FootprintRecord, FootprintRetention, FootprintStore, SharedFootprint};
pub use crate::lifecycle::{
    AndFilter, Candidate, DAY_MS, Expiration, Lifecycle, LifecycleReport, LifecycleRule,
    NoncurrentExpiration, RuleFilter, lifecycle_totals, tags_in,
};
pub use crate::object_lock::{
    BucketLock, DefaultRetention, LockMode, Retention, RetentionPeriod, VersionLock,
};
pub use crate::path::{FilePath, PathError, Prefix};
pub use crate::quota::ENTRY_OVERHEAD;
pub use crate::quota::versions_evicted;
pub use crate::samples::{ProcessSample, SampleStore};
pub use crate::trash::{TrashPage, Trashed};
use crate::tree::Tree;
pub use crate::types::{
    DEFAULT_RETENTION, Digest, Digests, Entry, FileMeta, HistoryPolicy, Listing, NULL_VERSION,
    Owner, Stored, SweepReport, Version, Versioning, now_ms, upload_version_id,
};
pub use crate::versions::{Deleted, VersionPage};

/// The store: blobs in a blob store, metadata in a database. Several
/// processes may open the same database and blob store at once (each with
/// its own data directory); the ledger keeps them consistent.
#[derive(Debug)]
pub struct Volume {
    blobs: BlobStore,
    tree: Tree,
    tmp: PathBuf,
    orphan_grace: Duration,
    /// New blobs of up to 64 KiB are packed (`VolumeConfig::pack_small_blobs`).
    pack_small_blobs: bool,
    removal_lease: Duration,
    /// What the operator chose for trees S3 set no versioning for.
    policy: HistoryPolicy,
    /// How long a lifecycle day is (shorter only under the test clock).
    lifecycle_day_ms: i64,
    /// What S3 set for buckets, as this process last read it.
    versioning: versioning::StateCache,
    /// Who this process's removals name: the data directory's id, held by
    /// this process alone, or an id of its own.
    claimant: config::Claimant,
}

impl Volume {
    /// Open (creating if needed) the store: run migrations, clear this
    /// process's temp files, then collect what an interrupted run left.
    pub async fn open(config: &VolumeConfig) -> Result<(Self, SweepReport), VolumeError> {
        let tmp = config.data_dir.join("tmp");
        std::fs::create_dir_all(&tmp)
            .map_err(|e| VolumeError::io("creating the data directory", e))?;
        let blobs = BlobStore::open(&config.blobs, &config.s3)?;
        let tree = Tree::new(Database::open(&config.database).await?);
        let volume = Self {
            blobs,
            tree,
            tmp,
            orphan_grace: config.orphan_grace,
            pack_small_blobs: config.pack_small_blobs,
            removal_lease: config.removal_lease,
            policy: config.history,
            lifecycle_day_ms: i64::try_from(config.lifecycle_day.as_millis())
                .unwrap_or(i64::MAX)
                .max(1),
            versioning: versioning::StateCache::default(),
            claimant: config::claimant(&config.data_dir)?,
        };
        let temp_files_removed = blobs::clear_temp(&volume.tmp).await?;
        volume.number_segments().await?;
        let report = SweepReport {
            temp_files_removed,
            ..volume.collect_at_open().await?
        };
        Ok((volume, report))
    }

    fn db(&self) -> &Database {
        self.tree.db()
    }

    /// Somewhere to stage an upload's bytes as they arrive (memory, then a
    /// temp file); hand it to [`Volume::put`] once they are all there.
    pub fn stage(&self) -> StagedBlob {
        StagedBlob::new(&self.tmp)
    }

    pub async fn stat(&self, owner: Owner, path: &FilePath) -> Result<FileMeta, VolumeError> {
        self.tree
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
        // A version asked for by id is that version or nothing: a retry
        // reads the path's current file only if it is still that version.
        let wanted = looked_up
            .as_ref()
            .map(|meta| meta.version_id.clone())
            .filter(|version| version != NULL_VERSION);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let meta = match looked_up.take() {
                Some(meta) => meta,
                None => {
                    let meta = self.stat(owner, path).await?;
                    if wanted
                        .as_ref()
                        .is_some_and(|wanted| *wanted != meta.version_id)
                    {
                        return Err(VolumeError::NotFound(path.to_string()));
                    }
                    meta
                }
            };
            let digest = Digest::parse(&meta.sha256)?;
            let opened = match self.read_packed(&digest, meta.size).await? {
                Some(bytes) => bytes.map(|bytes| BlobReader::in_memory(bytes.into(), meta.size)),
                None => self.blobs.open_blob(&digest, meta.size).await?,
            };
            match opened {
                Some(reader) => return Ok((meta, reader)),
                None if attempt == ATTEMPTS => return Err(VolumeError::MissingBlob(meta.sha256)),
                None => {}
            }
        }
    }

    /// Delete the file `path`, with the properties and locks WebDAV kept
    /// for it: where versions are kept it goes to the trash (a delete
    /// marker hides it), elsewhere its blob is released once nothing names
    /// it. `NotFound` when there is no file.
    pub async fn delete(&self, owner: Owner, path: &FilePath) -> Result<(), VolumeError> {
        self.delete_path(owner, path, true).await.map(|_| ())
    }

    /// One page of what lies directly under `prefix`, strictly after `after`.
    pub async fn list(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, VolumeError> {
        self.tree.list(owner, prefix, after, limit).await
    }

    /// Up to `limit` of `owner`'s files from `from` and before `upper`,
    /// however deep, in byte order of their paths.
    pub async fn scan(
        &self,
        owner: Owner,
        from: std::ops::Bound<&str>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FileMeta>, VolumeError> {
        self.tree.scan(owner, from, upper, limit).await
    }

    /// Up to `limit` of the folders `owner` made on purpose from `from` and
    /// before `upper`, however deep, in byte order: prefix and creation.
    pub async fn scan_folders(
        &self,
        owner: Owner,
        from: std::ops::Bound<&str>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, i64)>, VolumeError> {
        self.tree.scan_folders(owner, from, upper, limit).await
    }

    /// Keep `info` (what S3 keeps of an object, as JSON) with `owner`'s
    /// file `path` if it still holds the content `sha256`; whether it did
    /// (a write that replaced it since wins, and drops any).
    pub async fn set_s3_info(
        &self,
        owner: Owner,
        path: &FilePath,
        sha256: &str,
        info: &str,
    ) -> Result<bool, VolumeError> {
        self.tree.set_s3_info(owner, path, sha256, info).await
    }

    /// Make the empty folder `prefix` in `owner`'s tree (it lists, and
    /// stays, until deleted); whether it was new. A new folder costs
    /// [`ENTRY_OVERHEAD`] against the owner's quota: refused past it
    /// (`QuotaExceeded`).
    pub async fn make_folder(&self, owner: Owner, prefix: &Prefix) -> Result<bool, VolumeError> {
        if prefix.as_str().is_empty() {
            return Ok(false);
        }
        let db = self.db();
        db.write(async |tx: &mut WriteTx| {
            let quota = quota::lock(db, tx, owner).await?;
            let made = Tree::make_folder(tx, owner, prefix, now_ms()).await?;
            if made {
                quota::check_made(db, tx, owner, quota, quota::cost(0)).await?;
            }
            Ok(made)
        })
        .await
    }

    /// Delete the folder `prefix` and everything in it: files (their blobs
    /// released once nothing names them) and folders. `NotFound` when
    /// nothing was there; otherwise how many files and folders went.
    pub async fn delete_folder(&self, owner: Owner, prefix: &Prefix) -> Result<u64, VolumeError> {
        let upper = prefix
            .upper_bound()
            .ok_or_else(|| VolumeError::NotFound("the root folder".into()))?;
        let mut tx = self.db().begin_write().await?;
        // After any copy or move of the same tree (see `transfer`).
        self.db().lock_tree(&mut tx, owner.id()).await?;
        let (rows, removed) = Tree::delete_range(&mut tx, owner, prefix.as_str(), &upper).await?;
        let mut released = Vec::new();
        self.delete_rows_in(&mut tx, owner, rows, &mut released)
            .await?;
        properties::forget_within(&mut tx, owner, prefix.as_str(), prefix.as_str(), &upper).await?;
        locks::forget_within(&mut tx, owner, prefix.as_str(), prefix.as_str(), &upper).await?;
        let let_go = self.let_go_in(&mut tx, released).await?;
        tx.commit().await?;
        self.finish_letting_go(let_go).await;
        if removed == 0 {
            return Err(VolumeError::NotFound(prefix.to_string()));
        }
        Ok(removed)
    }

    /// Keep `outboard` after the content of blob `digest`, `size` bytes
    /// stored without one (before outboards were kept), which a reader read
    /// whole and verified against the outboard's root (see
    /// `BlobStore::attach_outboard`: readers of the old blob read on
    /// undisturbed, and one that has gained an outboard meanwhile is left
    /// alone).
    pub async fn attach_outboard(
        &self,
        digest: &Digest,
        size: u64,
        outboard: &[u8],
    ) -> Result<(), VolumeError> {
        self.blobs
            .attach_outboard(self.stage(), digest, size, outboard)
            .await
    }

    /// Whether blob `digest` is in the blob store.
    pub async fn blob_exists(&self, digest: &Digest) -> Result<bool, VolumeError> {
        self.blob_present(digest).await
    }

    /// Users, tokens, sessions and share links, kept in the same database.
    pub fn accounts(&self) -> Accounts {
        Accounts::new(self.db().clone())
    }

    /// The estimator's samples, kept in the same database.
    pub fn samples(&self) -> SampleStore<'_> {
        SampleStore::new(self.db())
    }

    /// The requests' footprints, kept in the same database and shared by
    /// every gateway on it.
    pub fn footprints(&self) -> FootprintStore<'_> {
        FootprintStore::new(self.db())
    }

    /// Close the database's connections (waits for in-flight queries).
    pub async fn close(&self) {
        self.db().close().await;
    }
}

#[cfg(test)]
mod tests;
