//! Versions: what a replace or a delete takes off a path is kept as an
//! earlier version (where the path's versioning keeps it, see
//! `versioning`), a delete leaves a delete marker, and any version can be
//! read, listed, removed or made current again. Orders the steps across
//! the tree (current files), the history (`history`: earlier versions and
//! markers) and the ledger; owns no table. The trash and retention are
//! `trash`'s, over the same steps.

use crate::db::Conn;

use crate::Volume;
use crate::db::WriteTx;
use crate::error::VolumeError;
use crate::history::{self, Kept};
use crate::object_lock;
use crate::path::FilePath;
use crate::tree::Tree;
use crate::types::{
    Digest, FileMeta, NULL_VERSION, Owner, Version, Versioning, new_version_id, now_ms,
};
use crate::versioning::{self, Keeping};

/// What a delete of a path's latest version did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// The delete marker it left (its version id), where versions are
    /// kept; `None` where the file is gone for good.
    pub marker: Option<String>,
}

/// One page of versions, in path order and each path's newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionPage {
    pub versions: Vec<Version>,
    /// Whether more follow the last one.
    pub truncated: bool,
}

impl Volume {
    /// How `path` keeps its versions, read inside `tx`.
    pub(crate) async fn keeping(
        &self,
        tx: &mut Conn,
        owner: Owner,
        path: &str,
    ) -> Result<Keeping, VolumeError> {
        versioning::keeping(tx, owner, path, self.policy).await
    }

    /// The version id a write under `keeping` gives.
    pub(crate) fn version_for(keeping: Keeping) -> String {
        match keeping.state {
            Versioning::Enabled => new_version_id(),
            Versioning::Unversioned | Versioning::Suspended => NULL_VERSION.to_owned(),
        }
    }

    /// Keep `row`, a current file a change inside `tx` takes off its path,
    /// as `keeping` says: as the path's newest earlier version, or (not
    /// kept, or the null version a suspended tree's next write replaces)
    /// let go, its digest added to `released`. A kept null version of the
    /// path goes first when the new one takes the null version.
    pub(crate) async fn retire(
        &self,
        tx: &mut Conn,
        owner: Owner,
        row: FileMeta,
        keeping: Keeping,
        released: &mut Vec<Digest>,
    ) -> Result<(), VolumeError> {
        let null = row.version_id == NULL_VERSION;
        let keep = match keeping.state {
            Versioning::Unversioned => false,
            Versioning::Enabled => true,
            Versioning::Suspended => !null,
        };
        if keeping.state == Versioning::Suspended || (keep && null) {
            released.extend(history::remove_null(tx, owner, &row.path).await?);
        }
        if keep {
            history::archive(tx, owner, &row, keeping.retained(), now_ms()).await
        } else {
            released.extend(Digest::parse(&row.sha256).ok());
            Ok(())
        }
    }

    /// Delete `path`'s latest version inside `tx`: take its current file
    /// off (kept or let go, see [`Volume::retire`]) and, where versions are
    /// kept, leave a delete marker, even when there was no file (as S3
    /// does) unless `must_exist` (then `NotFound`). The marker's version id.
    pub(crate) async fn delete_in(
        &self,
        tx: &mut Conn,
        owner: Owner,
        path: &FilePath,
        must_exist: bool,
        released: &mut Vec<Digest>,
    ) -> Result<Option<String>, VolumeError> {
        let keeping = self.keeping(tx, owner, path.as_str()).await?;
        match Tree::delete_file(tx, owner, path).await? {
            Some(row) => self.retire(tx, owner, row, keeping, released).await?,
            None if must_exist => return Err(VolumeError::NotFound(path.to_string())),
            None => {}
        }
        leave_marker(tx, owner, path.as_str(), keeping, released).await
    }

    /// Delete `path`'s latest version (see [`Volume::delete_in`]) with the
    /// properties and locks WebDAV kept for it, in one write transaction;
    /// release what it let go once committed.
    pub(crate) async fn delete_path(
        &self,
        owner: Owner,
        path: &FilePath,
        must_exist: bool,
    ) -> Result<Option<String>, VolumeError> {
        // In a write transaction: on SQLite that is this process's turn to
        // write, rather than the busy handler's race against the writers
        // that wait their turn.
        let (marker, let_go) = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let mut released = Vec::new();
                let marker = self
                    .delete_in(tx, owner, path, must_exist, &mut released)
                    .await?;
                crate::properties::forget(tx, owner, path.as_str()).await?;
                crate::locks::forget_within(tx, owner, path.as_str(), "", "").await?;
                Ok((marker, self.let_go_in(tx, released).await?))
            })
            .await?;
        self.finish_letting_go(let_go).await;
        Ok(marker)
    }

    /// What [`Volume::delete_in`] does, for `rows`: files a folder's
    /// delete took off their paths inside `tx`.
    pub(crate) async fn delete_rows_in(
        &self,
        tx: &mut Conn,
        owner: Owner,
        rows: Vec<FileMeta>,
        released: &mut Vec<Digest>,
    ) -> Result<(), VolumeError> {
        for row in rows {
            let keeping = self.keeping(tx, owner, &row.path).await?;
            let path = row.path.clone();
            self.retire(tx, owner, row, keeping, released).await?;
            leave_marker(tx, owner, &path, keeping, released).await?;
        }
        Ok(())
    }

    /// Delete the latest version of `path` (S3's `DeleteObject` without a
    /// version): where versions are kept a delete marker is left, even
    /// over no file; elsewhere the file goes, and a missing one is not an
    /// error.
    pub async fn delete_latest(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Deleted, VolumeError> {
        let marker = self.delete_path(owner, path, false).await?;
        Ok(Deleted { marker })
    }

    /// The version `version_id` of `path`: `NoSuchVersion` if it has none.
    pub async fn version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
    ) -> Result<Version, VolumeError> {
        if let Some(meta) = self.tree.get(owner, path).await?
            && meta.version_id == version_id
        {
            return Ok(Version::File { meta, latest: true });
        }
        let mut conn = self.db().connection().await?;
        let kept = history::get(&mut conn, owner, path.as_str(), version_id)
            .await?
            .ok_or_else(|| no_such_version(path, version_id))?;
        let latest = is_latest_kept(&mut conn, owner, &kept).await?;
        Ok(kept.version(latest))
    }

    /// Every version of `path`, newest first.
    pub async fn versions_of(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Vec<Version>, VolumeError> {
        let current = self.tree.get(owner, path).await?;
        let mut conn = self.db().connection().await?;
        let kept = history::of_path(&mut conn, owner, path.as_str()).await?;
        let mut versions = Vec::with_capacity(kept.len() + 1);
        let had_current = current.is_some();
        versions.extend(current.map(|meta| Version::File { meta, latest: true }));
        for (index, row) in kept.into_iter().enumerate() {
            versions.push(row.version(!had_current && index == 0));
        }
        Ok(versions)
    }

    /// Remove the version `version_id` of `path` for good (S3's
    /// `DeleteObject` with a version): when it was the latest, the next
    /// newest becomes it (a file current again, or a marker). What was
    /// removed; `None` if there was no such version. A version object
    /// lock holds is refused (`Locked`); `bypass`: the caller may bypass
    /// governance retention and asks to.
    pub async fn delete_version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        bypass: bool,
    ) -> Result<Option<Version>, VolumeError> {
        let mut released = Vec::new();
        let removed = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let lock = object_lock::get(tx, owner, path.as_str(), version_id).await?;
                if let Some(reason) = lock.refuses_removal(now_ms(), bypass) {
                    return Err(VolumeError::Locked {
                        path: path.to_string(),
                        version_id: version_id.to_owned(),
                        reason,
                    });
                }
                if !lock.is_empty() {
                    object_lock::forget(tx, owner, path.as_str(), version_id).await?;
                }
                let current = self.tree.get_locked(tx, owner, path).await?;
                if let Some(meta) = current.clone()
                    && meta.version_id == version_id
                {
                    Tree::delete_file(tx, owner, path).await?;
                    released.extend(Digest::parse(&meta.sha256).ok());
                    promote_newest(tx, owner, path.as_str()).await?;
                    crate::properties::forget(tx, owner, path.as_str()).await?;
                    return Ok(Some(Version::File { meta, latest: true }));
                }
                let Some(kept) = history::get(tx, owner, path.as_str(), version_id).await? else {
                    return Ok(None);
                };
                let latest = current.is_none() && is_latest_kept(tx, owner, &kept).await?;
                released.extend(history::remove(tx, kept.seq).await?);
                if latest {
                    promote_newest(tx, owner, path.as_str()).await?;
                }
                Ok(Some(kept.version(latest)))
            })
            .await?;
        self.release_all(&released).await;
        Ok(removed)
    }

    /// Make the version `version_id` of `path` (a file) its current file
    /// again, as a new version with that content (the one it replaces is
    /// kept, or let go, as any replace). The new current file.
    pub async fn restore_version(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
    ) -> Result<FileMeta, VolumeError> {
        let source = match self.version(owner, path, version_id).await? {
            Version::File { meta, .. } => meta,
            Version::DeleteMarker { .. } => {
                return Err(VolumeError::DeleteMarker {
                    path: path.to_string(),
                    version_id: version_id.to_owned(),
                });
            }
        };
        self.write_version(owner, path, source).await
    }

    /// Write `source` (a version's row, of any path) as `path`'s new
    /// current file inside one transaction weighed against the quota; the
    /// file it replaces is retired as any replace's.
    pub(crate) async fn write_version(
        &self,
        owner: Owner,
        path: &FilePath,
        source: FileMeta,
    ) -> Result<FileMeta, VolumeError> {
        let db = self.db();
        let mut released = Vec::new();
        let written = db
            .write(async |tx: &mut WriteTx| {
                let digest = Digest::parse(&source.sha256)?;
                // The blob is named already (by `source`): its ledger row
                // is taken so no removal starts while this names it too.
                crate::ledger::lock(db, tx, &digest).await?;
                let keeping = self.keeping(tx, owner, path.as_str()).await?;
                crate::quota::weigh(
                    db,
                    tx,
                    owner,
                    crate::quota::Leaving::NOTHING,
                    crate::quota::cost(source.size),
                )
                .await?;
                self.place(tx, owner, path, source, keeping, true, &mut released)
                    .await
            })
            .await?;
        self.release_all(&released).await;
        Ok(written)
    }

    /// Write `source` (a version's row, of any path) as the current file at
    /// `path` inside `tx`, a new version as `keeping` says: the file there
    /// is retired as any replace's (its creation time kept if
    /// `keep_created`, else the new file is made now). The row written.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn place(
        &self,
        tx: &mut Conn,
        owner: Owner,
        path: &FilePath,
        source: FileMeta,
        keeping: Keeping,
        keep_created: bool,
        released: &mut Vec<Digest>,
    ) -> Result<FileMeta, VolumeError> {
        let now = now_ms();
        let current = self.tree.get_locked(tx, owner, path).await?;
        let created_ms = match &current {
            Some(row) if keep_created => row.created_ms,
            _ => now,
        };
        let meta = FileMeta {
            path: path.to_string(),
            version_id: Self::version_for(keeping),
            created_ms,
            modified_ms: now,
            ..source
        };
        if let Some(row) = current {
            self.retire(tx, owner, row, keeping, released).await?;
        } else if keeping.state == Versioning::Suspended {
            released.extend(history::remove_null(tx, owner, path.as_str()).await?);
        }
        Tree::put_row(tx, owner, &meta).await?;
        crate::locking::stamp(tx, owner, path.as_str(), &meta.version_id, None, keeping).await?;
        Ok(meta)
    }

    /// Up to `limit` versions of `owner`'s paths from `start` (a path, and
    /// optionally a version of it to start after; `None`: the first path at
    /// or past `lower`) and before `upper`, in path order and each path's
    /// newest first, as S3's `ListObjectVersions` pages them.
    pub async fn list_versions(
        &self,
        owner: Owner,
        lower: &str,
        after: Option<(&str, Option<&str>)>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<VersionPage, VolumeError> {
        let limit = limit.max(1);
        let mut versions = Vec::new();
        let from = match after {
            None => std::ops::Bound::Included(lower),
            Some((key, version)) => {
                if let Some(version) = version {
                    versions = self
                        .versions_after(owner, key, version, limit.saturating_add(1))
                        .await?;
                }
                std::ops::Bound::Excluded(key)
            }
        };
        let wanted = limit.saturating_add(1).saturating_sub(versions.len());
        if wanted > 0 {
            let files = self.tree.scan(owner, from, upper, wanted).await?;
            let kept = history::scan(self.db(), owner, from, upper, wanted).await?;
            versions.extend(merge(files, kept, wanted));
        }
        let truncated = versions.len() > limit;
        versions.truncate(limit);
        Ok(VersionPage {
            versions,
            truncated,
        })
    }

    /// The versions of `path` after `version_id` (older than it), newest
    /// first, up to `limit`: none of them is the latest.
    async fn versions_after(
        &self,
        owner: Owner,
        path: &str,
        version_id: &str,
        limit: usize,
    ) -> Result<Vec<Version>, VolumeError> {
        let file_path = FilePath::parse(path)?;
        let current = self.tree.get(owner, &file_path).await?;
        let seq = if current.is_some_and(|meta| meta.version_id == version_id) {
            i64::MAX
        } else {
            let mut conn = self.db().connection().await?;
            match history::get(&mut conn, owner, path, version_id).await? {
                Some(kept) => kept.seq,
                None => return Ok(Vec::new()),
            }
        };
        Ok(history::older_than(self.db(), owner, path, seq, limit)
            .await?
            .into_iter()
            .map(|kept| kept.version(false))
            .collect())
    }
}

impl Volume {
    /// Whether trees S3 set no versioning for keep versions (the
    /// operator's `--versions`).
    pub fn keeps_versions(&self) -> bool {
        self.policy.versions
    }

    /// What `owner` could free to store a file at `path`: every earlier
    /// version the retention governs, and the file there now where a write
    /// lets it go or keeps it so (S3's kept versions are not theirs to
    /// take).
    pub async fn reclaimable(&self, owner: Owner, path: &FilePath) -> Result<u64, VolumeError> {
        let mut conn = self.db().connection().await?;
        let history = crate::quota::reclaimable(&mut conn, owner).await?;
        let keeping = self.keeping(&mut conn, owner, path.as_str()).await?;
        let current = match self.tree.get(owner, path).await? {
            Some(meta) if !keeping.keeps() || keeping.retained() => crate::quota::cost(meta.size),
            _ => 0,
        };
        Ok(history.saturating_add(current))
    }

    /// Set what S3 keeps of `owner`'s version `version_id` of `path` (its
    /// tags changed): the current file's row or a kept one's; whether
    /// there was such a version.
    pub async fn set_version_s3_info(
        &self,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        info: &str,
    ) -> Result<bool, VolumeError> {
        self.db()
            .write(async |tx: &mut WriteTx| {
                if Tree::set_s3_info_of_version(tx, owner, path, version_id, info).await? {
                    return Ok(true);
                }
                history::set_s3_info(tx, owner, path.as_str(), version_id, info).await
            })
            .await
    }

    /// Whether `owner` keeps an earlier version or a delete marker of any
    /// path under the folder `prefix` (a bucket holding one is not empty).
    pub async fn keeps_versions_under(
        &self,
        owner: Owner,
        prefix: &crate::Prefix,
    ) -> Result<bool, VolumeError> {
        let Some(upper) = prefix.upper_bound() else {
            return Ok(true);
        };
        let mut conn = self.db().connection().await?;
        history::any_within(&mut conn, owner, prefix.as_str(), &upper).await
    }
}

/// Where `keeping` keeps versions, make a delete marker `path`'s latest
/// version inside `tx` (under a suspended versioning it takes the null
/// version, which goes first): its version id.
async fn leave_marker(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    keeping: Keeping,
    released: &mut Vec<Digest>,
) -> Result<Option<String>, VolumeError> {
    if !keeping.keeps() {
        return Ok(None);
    }
    if keeping.state == Versioning::Suspended {
        released.extend(history::remove_null(tx, owner, path).await?);
    }
    let marker = Volume::version_for(keeping);
    history::mark(tx, owner, path, &marker, keeping.retained(), now_ms()).await?;
    Ok(Some(marker))
}

/// `files` (current, in path order) and `kept` (earlier, in path order and
/// newest first), each at most `limit` long, merged into the first
/// `limit` versions: each path's current file, then its kept rows. A kept
/// row is the latest only as its path's first with no current file.
fn merge(files: Vec<FileMeta>, kept: Vec<Kept>, limit: usize) -> Vec<Version> {
    let mut merged = Vec::with_capacity(limit);
    let (mut files, mut kept) = (files.into_iter().peekable(), kept.into_iter().peekable());
    let mut last_path: Option<String> = None;
    while merged.len() < limit {
        let take_file = match (files.peek(), kept.peek()) {
            (Some(file), Some(row)) => file.path <= row.meta.path,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let version = if take_file {
            let Some(meta) = files.next() else { break };
            Version::File { meta, latest: true }
        } else {
            let Some(row) = kept.next() else { break };
            let first = last_path.as_deref() != Some(row.meta.path.as_str());
            row.version(first)
        };
        last_path = Some(version.path().to_owned());
        merged.push(version);
    }
    merged
}

/// Whether `kept` is its path's latest version: no current file, and no
/// newer kept row. Read on `conn`.
async fn is_latest_kept(conn: &mut Conn, owner: Owner, kept: &Kept) -> Result<bool, VolumeError> {
    let path = FilePath::parse(&kept.meta.path)?;
    if Tree::exists_in(conn, owner, &path).await? {
        return Ok(false);
    }
    let newest = history::newest(conn, owner, path.as_str()).await?;
    Ok(newest.is_some_and(|newest| newest.seq == kept.seq))
}

/// After `path`'s latest version went, inside `tx`: its newest kept row is
/// the latest now; a file one becomes its current file again (a marker
/// stays where it is: the path reads as deleted).
pub(crate) async fn promote_newest(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
) -> Result<(), VolumeError> {
    if let Some(newest) = history::newest(tx, owner, path).await?
        && !newest.marker
    {
        history::remove(tx, newest.seq).await?;
        Tree::put_row(tx, owner, &newest.meta).await?;
    }
    Ok(())
}

fn no_such_version(path: &FilePath, version_id: &str) -> VolumeError {
    VolumeError::NoSuchVersion {
        path: path.to_string(),
        version_id: version_id.to_owned(),
    }
}
