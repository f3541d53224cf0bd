//! The quota rule, over tables it does not own: what an owner uses is the
//! bytes of their files (the tree's) and of their earlier versions and
//! trash (the history's), of every dead property they keep
//! (namespace, name and value: the properties') and of every part of their
//! unfinished uploads (the uploads'), plus [`ENTRY_OVERHEAD`] for each
//! file, folder, share link, kept version, delete marker and kept upload
//! part, so that nothing an owner can make is free. A change that needs
//! room first takes it from the oldest versions the operator's retention
//! governs ([`make_room`]), never from current files. A change that would take them past their quota is
//! refused in the transaction that makes it, after taking their user row
//! (accounts) so one owner's changes are weighed one at a time.
//!
//! Lock order, for every writer that can add to an owner's usage: a blob's
//! ledger row (an upload's), then the owner's user row ([`lock`]), then the
//! owner's tree (`Database::lock_tree`), then the rows it changes; so none
//! deadlocks.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::db::Conn;

use crate::accounts;
use crate::db::{Database, WriteTx};
use crate::error::VolumeError;
use crate::history;
use crate::history::Kept;
use crate::path::FilePath;
use crate::properties;
use crate::tree::Tree;
use crate::types::Owner;
use crate::uploads;

/// What one entry costs against the quota beyond its bytes: a file, a
/// folder, a share link or a kept upload part. Measured on SQLite (every
/// migration applied, 20 000 rows inserted in random order, the file's
/// growth divided by the rows): a file's row with its indexes takes about
/// 335 bytes, a share link's 210, a multipart part's 165, a tus part's 130
/// and a folder's 100. A kept part is also an object of its own in the
/// blob store (a file of at least one 4 KiB block on a local directory).
/// 1 KiB is three times the largest row: the B-tree's free space, the
/// write-ahead log and PostgreSQL's larger tuples, and a round figure a
/// user can reckon with.
pub const ENTRY_OVERHEAD: u64 = 1024;

/// What [`usage`] leaves out: the file a change replaces, the upload a
/// change completes (its parts become the file, counted once).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Leaving<'a> {
    pub(crate) file: Option<&'a FilePath>,
    pub(crate) upload: Option<&'a str>,
}

impl Leaving<'_> {
    /// Nothing left out.
    pub(crate) const NOTHING: Self = Self {
        file: None,
        upload: None,
    };
}

/// What one entry of `bytes` bytes costs against the quota.
pub(crate) fn cost(bytes: u64) -> u64 {
    cost_of(bytes, 1)
}

/// What `entries` entries taking `bytes` bytes in all cost against the
/// quota: every charge is reckoned here.
pub(crate) fn cost_of(bytes: u64, entries: u64) -> u64 {
    bytes.saturating_add(entries.saturating_mul(ENTRY_OVERHEAD))
}

/// Take `owner`'s user row until `tx` ends; their quota (`None`: none).
/// Every writer that can add to an owner's usage takes it first (after
/// an upload's ledger row), always in that order, so none deadlocks.
pub(crate) async fn lock(
    db: &Database,
    tx: &mut WriteTx,
    owner: Owner,
) -> Result<Option<u64>, VolumeError> {
    accounts::locked_quota(db, tx, owner).await
}

/// What `owner` uses, leaving out what `leaving` names, read on `conn`:
/// the one statement of the quota rule.
pub(crate) async fn usage(
    db: &Database,
    conn: &mut Conn,
    owner: Owner,
    leaving: Leaving<'_>,
) -> Result<u64, VolumeError> {
    let (file_bytes, files) = Tree::usage(conn, owner, leaving.file).await?;
    let folders = Tree::folder_count(conn, owner).await?;
    let shares = accounts::share_count(conn, owner).await?;
    let properties = properties::usage(db, conn, owner).await?;
    let (part_bytes, parts) = uploads::kept(conn, owner, leaving.upload).await?;
    let (kept_bytes, kept) = history::usage(conn, owner).await?;
    let entries = files
        .saturating_add(kept)
        .saturating_add(folders)
        .saturating_add(shares)
        .saturating_add(parts);
    let bytes = file_bytes
        .saturating_add(kept_bytes)
        .saturating_add(properties)
        .saturating_add(part_bytes);
    Ok(cost_of(bytes, entries))
}

/// Take `owner`'s user row (see [`lock`]), then refuse (`QuotaExceeded`)
/// to add `size` to what they use (leaving out what `leaving` names) past
/// their quota: the weighing of a file about to be stored. Their quota.
pub(crate) async fn weigh(
    db: &Database,
    tx: &mut WriteTx,
    owner: Owner,
    leaving: Leaving<'_>,
    size: u64,
) -> Result<Option<u64>, VolumeError> {
    let quota = lock(db, tx, owner).await?;
    check(db, tx, owner, quota, leaving, size).await?;
    Ok(quota)
}

/// Refuse (`QuotaExceeded`) to add `size` to what `owner` uses (leaving
/// out what `leaving` names) past `quota`.
pub(crate) async fn check(
    db: &Database,
    conn: &mut Conn,
    owner: Owner,
    quota: Option<u64>,
    leaving: Leaving<'_>,
    size: u64,
) -> Result<(), VolumeError> {
    let Some(quota) = quota else {
        return Ok(());
    };
    let used = usage(db, conn, owner, leaving).await?;
    if used.saturating_add(size) > quota && !make_room(conn, owner, quota, used, size).await? {
        let used = usage(db, conn, owner, leaving).await?;
        return Err(VolumeError::QuotaExceeded { quota, used, size });
    }
    Ok(())
}

/// Refuse (`QuotaExceeded`) a change that added `added` in this
/// transaction (and so is counted by [`usage`] already) and took what
/// `owner` uses past `quota`; the transaction is then rolled back. One
/// that added nothing (freed bytes, or changed none) always goes through.
pub(crate) async fn check_made(
    db: &Database,
    conn: &mut Conn,
    owner: Owner,
    quota: Option<u64>,
    added: u64,
) -> Result<(), VolumeError> {
    let Some(quota) = quota else {
        return Ok(());
    };
    if added == 0 {
        return Ok(());
    }
    let after = usage(db, conn, owner, Leaving::NOTHING).await?;
    if after > quota && !make_room(conn, owner, quota, after, 0).await? {
        return Err(VolumeError::QuotaExceeded {
            quota,
            used: after.saturating_sub(added),
            size: added,
        });
    }
    Ok(())
}

/// After a change that was weighed leaving out a file it then kept as an
/// earlier version the retention governs (see `Volume::put_with`): take
/// room from the oldest such versions (that one last) until `owner` is
/// within `quota` again.
pub(crate) async fn settle(
    db: &Database,
    conn: &mut Conn,
    owner: Owner,
    quota: Option<u64>,
) -> Result<(), VolumeError> {
    let Some(quota) = quota else {
        return Ok(());
    };
    let used = usage(db, conn, owner, Leaving::NOTHING).await?;
    if used > quota && !make_room(conn, owner, quota, used, 0).await? {
        return Err(VolumeError::QuotaExceeded {
            quota,
            used,
            size: 0,
        });
    }
    Ok(())
}

/// What `owner` could free to make room: every earlier version the
/// retention governs, read on `conn` (and the file a write replaces, which
/// the caller adds when it is let go or kept so).
pub(crate) async fn reclaimable(conn: &mut Conn, owner: Owner) -> Result<u64, VolumeError> {
    let (bytes, files) = history::retained_usage(conn, owner).await?;
    Ok(cost_of(bytes, files))
}

/// What the quota weighs on the accounts' side: what an owner uses, and a
/// share link's cost (the `shares` table's module records it).
impl accounts::Accounts {
    /// What `owner` uses against a quota (see [`usage`]: their files',
    /// properties' and unfinished uploads' bytes, and an overhead for each
    /// entry).
    pub async fn usage(&self, owner: Owner) -> Result<u64, VolumeError> {
        self.usage_completing(owner, None).await
    }

    /// [`accounts::Accounts::usage`], leaving out the parts of upload
    /// `completing` (which become the file it completes, counted once).
    pub async fn usage_completing(
        &self,
        owner: Owner,
        completing: Option<&str>,
    ) -> Result<u64, VolumeError> {
        let mut conn = self.db().connection().await?;
        let leaving = Leaving {
            file: None,
            upload: completing,
        };
        usage(self.db(), &mut conn, owner, leaving).await
    }

    /// Record a share link `id` for `owner`'s `path`. A link costs
    /// [`ENTRY_OVERHEAD`] against the owner's quota: refused
    /// (`QuotaExceeded`) past it, weighed under the owner's user row.
    pub async fn add_share(
        &self,
        id: &str,
        owner: Owner,
        path: &FilePath,
        file_created_ms: i64,
        expires_ms: Option<i64>,
    ) -> Result<(), VolumeError> {
        let db = self.db();
        db.write(async |tx: &mut WriteTx| {
            let quota = lock(db, tx, owner).await?;
            check(db, tx, owner, quota, Leaving::NOTHING, cost(0)).await?;
            accounts::shares::insert_in(tx, id, owner, path, file_created_ms, expires_ms).await
        })
        .await
    }
}

/// How many kept versions made room for an upload, since the process
/// started (`/metrics`: `wasm_storage_versions_evicted_total`).
static EVICTED: AtomicU64 = AtomicU64::new(0);

/// How many kept versions made room for an upload since the process
/// started.
pub fn versions_evicted() -> u64 {
    EVICTED.load(Ordering::Relaxed)
}

/// Make room for `needed` more bytes of `owner`'s, who uses `used` of
/// `quota`, inside `tx`: remove their oldest versions the retention
/// governs (never a current file, never a version S3's rules keep), and
/// the markers that then hide nothing, until it fits. Whether it does:
/// nothing is removed when even all of them would not make room. The
/// blobs let go are released by the next collection.
pub(crate) async fn make_room(
    tx: &mut Conn,
    owner: Owner,
    quota: u64,
    used: u64,
    needed: u64,
) -> Result<bool, VolumeError> {
    let (bytes, files) = history::retained_usage(tx, owner).await?;
    if used
        .saturating_sub(cost_of(bytes, files))
        .saturating_add(needed)
        > quota
    {
        return Ok(false);
    }
    let mut used = used;
    let mut evicted = 0u64;
    'room: while used.saturating_add(needed) > quota {
        let oldest = history::oldest_retained(tx, owner, 64).await?;
        let mut progress = false;
        for kept in oldest {
            if used.saturating_add(needed) <= quota {
                break 'room;
            }
            // Oldest first, a file goes before the marker that hides it (the
            // marker was made after it); a marker still hiding a file (one
            // S3's rules keep) stays.
            if kept.marker && !hides_nothing(tx, owner, &kept).await? {
                continue;
            }
            history::remove(tx, kept.seq).await?;
            let markers = history::drop_dangling_markers(tx, owner, &kept.meta.path).await?;
            used = used
                .saturating_sub(cost(kept.meta.size))
                .saturating_sub(cost_of(0, markers));
            evicted += 1;
            progress = true;
        }
        if !progress {
            break;
        }
    }
    if evicted > 0 {
        EVICTED.fetch_add(evicted, Ordering::Relaxed);
        tracing::info!(
            owner = owner.id(),
            evicted,
            "removed the oldest kept versions to make room for an upload"
        );
    }
    Ok(used.saturating_add(needed) <= quota)
}

/// Whether the delete marker `marker` hides no file (none below it, or
/// another marker), read on `conn`.
async fn hides_nothing(conn: &mut Conn, owner: Owner, marker: &Kept) -> Result<bool, VolumeError> {
    let below = history::of_path(conn, owner, &marker.meta.path)
        .await?
        .into_iter()
        .find(|kept| kept.seq < marker.seq);
    Ok(below.is_none_or(|kept| kept.marker))
}
