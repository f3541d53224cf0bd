//! What WebDAV needs of a volume beyond files, under the names the gateway
//! uses: what a name is and copies and moves of trees (see `transfer`),
//! and [`WebDavStore`], the dead properties and locks of a volume's trees.
//! The tables are kept by their own modules (`properties`, `locks`, the
//! tree's folders); this module only orders the steps a WebDAV request
//! takes across them.

use std::collections::HashMap;

pub use crate::locks::{DavLock, LockOutcome, MAX_LOCKS_PER_OWNER, NewLock};
pub use crate::properties::{DeadProperty, MAX_PROPERTIES_PER_RESOURCE, PropertyChange};
pub use crate::tree::transfer::{Depth, FolderMeta, MAX_TREE_ROWS, Node, Transfer};

use crate::Volume;
use crate::db::{Database, WriteTx};
use crate::error::VolumeError;
use crate::types::Owner;
use crate::{locks, properties, quota};

impl Volume {
    /// Dead properties and locks, kept in the same database.
    pub fn webdav(&self) -> WebDavStore<'_> {
        WebDavStore { volume: self }
    }
}

/// Dead properties and locks of a [`Volume`]'s trees. Properties and locks
/// are kept by a resource's *key*: a file's path, or a folder's prefix
/// ending with `/` (the root folder's key is empty).
#[derive(Debug, Clone, Copy)]
pub struct WebDavStore<'a> {
    volume: &'a Volume,
}

impl WebDavStore<'_> {
    fn db(&self) -> &Database {
        self.volume.db()
    }

    /// Drop what is left at `key` of a resource that is gone (a folder that
    /// only held files leaves its properties and locks when they go): a
    /// new resource made there starts clean.
    pub async fn forget(&self, owner: Owner, key: &str) -> Result<(), VolumeError> {
        let mut tx = self.db().begin_write().await?;
        properties::forget(&mut tx, owner, key).await?;
        locks::forget_within(&mut tx, owner, key, "", "").await?;
        tx.commit().await?;
        Ok(())
    }

    /// The dead properties of the resources `keys` (a folder's listing),
    /// keyed by resource.
    pub async fn properties_of(
        &self,
        owner: Owner,
        keys: &[String],
    ) -> Result<Vec<(String, DeadProperty)>, VolumeError> {
        properties::of_keys(self.db(), owner, keys).await
    }

    /// When the folders among `keys` that were made on purpose were made
    /// (a folder that only holds files has no date), keyed by folder.
    pub async fn folders_made(
        &self,
        owner: Owner,
        keys: &[String],
    ) -> Result<HashMap<String, i64>, VolumeError> {
        self.volume.tree.folders_made(owner, keys).await
    }

    /// Apply `changes` to the properties of `key`, in order, all or none.
    /// What properties take counts against the owner's quota as files do:
    /// a change that leaves them taking more bytes than before and the
    /// owner past their quota is refused (`QuotaExceeded`), weighed in the
    /// same transaction and under the same user row lock as an upload; one
    /// that frees bytes always goes through.
    pub async fn change_properties(
        &self,
        owner: Owner,
        key: &str,
        changes: &[PropertyChange],
    ) -> Result<(), VolumeError> {
        let db = self.db();
        db.write(async |tx: &mut WriteTx| {
            let quota = quota::lock(db, tx, owner).await?;
            let before = match quota {
                Some(_) => properties::usage(db, tx, owner).await?,
                None => 0,
            };
            properties::apply(tx, owner, key, changes).await?;
            if quota.is_some() {
                let after = properties::usage(db, tx, owner).await?;
                let added = after.saturating_sub(before);
                quota::check_made(db, tx, owner, quota, added).await?;
            }
            Ok(())
        })
        .await
    }

    /// The locks of `owner`'s tree that have not expired.
    pub async fn locks(&self, owner: Owner) -> Result<Vec<DavLock>, VolumeError> {
        locks::locks(self.db(), owner).await
    }

    /// The holders (the clients' `DAV:owner` fragments) of `owner`'s live
    /// locks, by token: what lock discovery shows.
    pub async fn holders(&self, owner: Owner) -> Result<HashMap<String, String>, VolumeError> {
        locks::holders(self.db(), owner).await
    }

    /// Grant `lock` unless a live lock is in its way (see [`locks::lock`]).
    pub async fn lock(&self, owner: Owner, lock: NewLock) -> Result<LockOutcome, VolumeError> {
        locks::lock(self.db(), owner, lock).await
    }

    /// Remove every lock that has expired (they count for nothing already);
    /// how many went.
    pub async fn clear_expired(&self) -> Result<u64, VolumeError> {
        locks::clear_expired(self.db()).await
    }

    /// Give the live lock `token` a new timeout; the lock, if it was live.
    pub async fn refresh_lock(
        &self,
        owner: Owner,
        token: &str,
        timeout_s: u64,
    ) -> Result<Option<DavLock>, VolumeError> {
        locks::refresh_lock(self.db(), owner, token, timeout_s).await
    }

    /// Remove the lock `token`; whether it was there.
    pub async fn unlock(&self, owner: Owner, token: &str) -> Result<bool, VolumeError> {
        locks::unlock(self.db(), owner, token).await
    }
}
