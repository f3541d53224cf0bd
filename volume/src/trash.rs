//! The trash, and what time and the quota take from the history. A
//! deleted file is the version a delete marker hides: the trash lists
//! them (newest delete first), restores one to its path (or beside it, if
//! the path holds a file again), or removes it for good with the versions
//! before it. Versions the operator's retention governs expire after it
//! ([`Volume::expire_history`], run by every collection); the quota takes
//! the oldest first when a change needs room (`quota::make_room`). Owns no
//! table.

use crate::db::Conn;

use crate::Volume;
use crate::db::{Database, WriteTx};
use crate::error::VolumeError;
use crate::history::{self, Kept};
use crate::object_lock;
use crate::path::FilePath;
use crate::tree::Tree;
use crate::types::{Digest, FileMeta, Owner, now_ms};
use crate::versions::promote_newest;

/// A deleted file, as the trash lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trashed {
    /// What names it to restore or purge: its delete's place in history.
    pub id: i64,
    /// The file as it was when deleted (its path, size, version…).
    pub file: FileMeta,
    pub deleted_ms: i64,
}

/// One page of the trash, newest delete first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrashPage {
    pub items: Vec<Trashed>,
    /// Pass as `before` for the next page; `None` on the last.
    pub next_before: Option<i64>,
}

impl Volume {
    /// Up to `limit` of `owner`'s deleted files, newest delete first,
    /// from before `before` (a page's `next_before`).
    pub async fn trash(
        &self,
        owner: Owner,
        before: Option<i64>,
        limit: usize,
    ) -> Result<TrashPage, VolumeError> {
        let limit = limit.clamp(1, 1000);
        let mut items = Vec::new();
        let mut cursor = before.unwrap_or(i64::MAX);
        let mut more = true;
        while items.len() < limit && more {
            let markers = history::markers(self.db(), owner, cursor, limit).await?;
            more = markers.len() == limit;
            for marker in markers {
                cursor = marker.seq;
                if let Some(file) = hidden(self.db(), owner, &marker).await? {
                    items.push(Trashed {
                        id: marker.seq,
                        deleted_ms: marker.meta.modified_ms,
                        file: file.meta,
                    });
                    if items.len() == limit {
                        break;
                    }
                }
            }
        }
        let next_before = (items.len() == limit && more).then_some(cursor);
        Ok(TrashPage { items, next_before })
    }

    /// Restore the deleted file `id` of `owner`'s trash: at its path when
    /// the delete is still the path's latest version (the file is current
    /// again, with its own version id), else beside it (`name (restored).ext`)
    /// as a new file. The file as restored.
    pub async fn restore_trashed(&self, owner: Owner, id: i64) -> Result<FileMeta, VolumeError> {
        let db = self.db();
        let (marker, file, latest) = db
            .write(async |tx: &mut WriteTx| {
                let (marker, file) = trashed_in(tx, owner, id).await?;
                let path = FilePath::parse(&marker.meta.path)?;
                let latest = !Tree::exists_in(tx, owner, &path).await?
                    && history::newest(tx, owner, &marker.meta.path)
                        .await?
                        .is_some_and(|newest| newest.seq == marker.seq);
                if latest {
                    history::remove(tx, marker.seq).await?;
                    promote_newest(tx, owner, &marker.meta.path).await?;
                }
                Ok((marker, file, latest))
            })
            .await?;
        if latest {
            return self.stat(owner, &FilePath::parse(&file.meta.path)?).await;
        }
        let beside = self.free_path_beside(owner, &marker.meta.path).await?;
        let restored = self.write_version(owner, &beside, file.meta).await?;
        // The delete is undone: it leaves the trash (its marker stays in
        // the path's history only while it hides something).
        db.write(async |tx: &mut WriteTx| {
            history::remove(tx, marker.seq).await?;
            Ok(())
        })
        .await?;
        Ok(restored)
    }

    /// Remove the deleted file `id` of `owner`'s trash for good, with every
    /// version of its path before the delete; refused (`Locked`) while
    /// object lock holds one of them.
    pub async fn purge_trashed(&self, owner: Owner, id: i64) -> Result<(), VolumeError> {
        let released = self
            .db()
            .write(async |tx: &mut WriteTx| {
                let (marker, _) = trashed_in(tx, owner, id).await?;
                let path = &marker.meta.path;
                let now = now_ms();
                for kept in history::of_path(tx, owner, path).await? {
                    if kept.seq > marker.seq || kept.marker {
                        continue;
                    }
                    let version_id = kept.meta.version_id;
                    let lock = object_lock::get(tx, owner, path, &version_id).await?;
                    if let Some(reason) = lock.refuses_removal(now, false) {
                        return Err(VolumeError::Locked {
                            path: path.clone(),
                            version_id,
                            reason,
                        });
                    }
                }
                history::remove_through(tx, owner, path, marker.seq).await
            })
            .await?;
        self.release_all(&released).await;
        Ok(())
    }

    /// Remove every file in `owner`'s trash for good, except those object
    /// lock holds (they stay); how many went.
    pub async fn empty_trash(&self, owner: Owner) -> Result<u64, VolumeError> {
        let mut removed = 0;
        let mut before = None;
        loop {
            let page = self.trash(owner, before, 1000).await?;
            for item in page.items {
                match self.purge_trashed(owner, item.id).await {
                    Ok(()) => removed += 1,
                    Err(VolumeError::Locked { .. } | VolumeError::NotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
            match page.next_before {
                Some(next) => before = Some(next),
                None => return Ok(removed),
            }
        }
    }

    /// Remove the kept versions the operator's retention governs that are
    /// older than it, and the delete markers left hiding nothing; how many
    /// went. Every collection runs it.
    pub async fn expire_history(&self) -> Result<u64, VolumeError> {
        let retention_ms = i64::try_from(self.policy.retention.as_millis()).unwrap_or(i64::MAX);
        let before = now_ms().saturating_sub(retention_ms);
        let mut removed = 0;
        loop {
            let expired = history::expired(self.db(), before, 500).await?;
            if expired.is_empty() {
                return Ok(removed);
            }
            let count = expired.len();
            let released = self
                .db()
                .write(async |tx: &mut WriteTx| {
                    let mut released = Vec::new();
                    for (owner, kept) in &expired {
                        if !kept.marker {
                            released.extend(history::remove(tx, kept.seq).await?);
                        }
                        history::drop_dangling_markers(tx, *owner, &kept.meta.path).await?;
                    }
                    Ok(released)
                })
                .await?;
            self.release_all(&released).await;
            removed += count as u64;
            if count < 500 {
                return Ok(removed);
            }
        }
    }

    /// A path beside `path` that holds no file: `name (restored).ext`, then
    /// `name (restored 2).ext`, …
    async fn free_path_beside(&self, owner: Owner, path: &str) -> Result<FilePath, VolumeError> {
        let (folder, name) = path.rsplit_once('/').map_or(("", path), |(f, n)| (f, n));
        let (stem, extension) = match name.rsplit_once('.') {
            Some((stem, extension)) if !stem.is_empty() => (stem, format!(".{extension}")),
            _ => (name, String::new()),
        };
        for attempt in 1..1000 {
            let suffix = if attempt == 1 {
                " (restored)".to_owned()
            } else {
                format!(" (restored {attempt})")
            };
            let candidate = if folder.is_empty() {
                format!("{stem}{suffix}{extension}")
            } else {
                format!("{folder}/{stem}{suffix}{extension}")
            };
            let candidate = FilePath::parse(&candidate)?;
            if self.tree.get(owner, &candidate).await?.is_none() {
                return Ok(candidate);
            }
        }
        Err(VolumeError::AlreadyExists(path.to_owned()))
    }
}

/// The file the delete marker `marker` hides (the kept version just below
/// it), if it hides one.
async fn hidden(db: &Database, owner: Owner, marker: &Kept) -> Result<Option<Kept>, VolumeError> {
    let below = history::older_than(db, owner, &marker.meta.path, marker.seq, 1).await?;
    Ok(below.into_iter().next().filter(|kept| !kept.marker))
}

/// The trash item `id` of `owner` inside `tx`: its marker and the file it
/// hides; `NotFound` when it is not one.
async fn trashed_in(tx: &mut Conn, owner: Owner, id: i64) -> Result<(Kept, Kept), VolumeError> {
    let not_found = || VolumeError::NotFound(format!("trash item {id}"));
    let marker = history::by_seq(tx, owner, id)
        .await?
        .filter(|kept| kept.marker)
        .ok_or_else(not_found)?;
    let below = history::of_path(tx, owner, &marker.meta.path)
        .await?
        .into_iter()
        .find(|kept| kept.seq < marker.seq)
        .filter(|kept| !kept.marker)
        .ok_or_else(not_found)?;
    Ok((marker, below))
}

/// Whether `digest` is named by no current file and no kept version,
/// inside `tx`: what a blob's removal checks.
pub(crate) async fn unnamed(tx: &mut Conn, digest: &Digest) -> Result<bool, VolumeError> {
    Ok(Tree::references(tx, digest).await? == 0 && history::references(tx, digest).await? == 0)
}
