//! What WebDAV asks of a tree beyond files: what a name is, and
//! server-side copies and moves of whole trees. Each runs in one write
//! transaction that orders the steps across the tables' owners: the
//! owner's user row first (as an upload takes it, after its blob's ledger
//! row), then the owner's tree lock (`Database::lock_tree`, which folder
//! deletes take too), then every source file row, locked (the tree); then the
//! destination cleared (the tree, properties, locks), the quota weighed
//! (a copy), the rows copied or renamed with their properties, and locks
//! dropped (a move). They never touch the ledger: every digest they copy
//! is named by a source row they hold, so no removal can count it unnamed,
//! and after the commit the copies name it too. Owns no table.

use crate::db::Conn;

use crate::Volume;
use crate::error::VolumeError;
use crate::path::{FilePath, Prefix};
use crate::tree::Tree;
use crate::tree::transfer::{
    self as rows, Depth, FOLDER_IN_USE, FolderMeta, Found, MAX_TREE_ROWS, Node, Transfer,
    folder_in_use, folder_of, refuse_nested, upper_of,
};
use crate::types::{Digest, Owner, now_ms};
use crate::{db::WriteTx, history, locks, properties, quota};

impl Volume {
    /// What `name` is in `owner`'s tree: the file at that path, else the
    /// folder of that name, else nothing. `None` is the root folder, which
    /// always exists. (The REST API lets a file and a folder share a name;
    /// WebDAV then sees the file.)
    pub async fn node(&self, owner: Owner, name: Option<&FilePath>) -> Result<Node, VolumeError> {
        let Some(name) = name else {
            return Ok(Node::Folder(FolderMeta {
                prefix: Prefix::root(),
                created_ms: None,
            }));
        };
        if let Some(meta) = self.tree.get(owner, name).await? {
            return Ok(Node::File(meta));
        }
        let prefix = folder_of(name)?;
        if let Some(created_ms) = self.tree.folder_made(owner, &prefix).await? {
            return Ok(Node::Folder(FolderMeta {
                prefix,
                created_ms: Some(created_ms),
            }));
        }
        Ok(if self.folder_exists(owner, &prefix).await? {
            Node::Folder(FolderMeta {
                prefix,
                created_ms: None,
            })
        } else {
            Node::Missing
        })
    }

    /// Whether the folder `prefix` exists: the root, one made on purpose,
    /// or one that files or folders are in.
    pub async fn folder_exists(&self, owner: Owner, prefix: &Prefix) -> Result<bool, VolumeError> {
        if prefix.as_str().is_empty() {
            return Ok(true);
        }
        // On SQLite on the caller's thread: every S3 request on an object
        // asks whether its bucket exists (see `db::reader`).
        if let Some(reader) = self.db().sync_reader() {
            let upper = upper_of(prefix);
            return reader.read(|connection| {
                let mut statement = connection.prepare_cached(FOLDER_IN_USE)?;
                let bind = [
                    ("$1", &owner.id() as &dyn rusqlite::ToSql),
                    ("$2", &prefix.as_str()),
                    ("$3", &upper),
                ];
                statement.query_row(&bind[..], |row| {
                    row.get::<_, i64>(0).map(|found| found != 0)
                })
            });
        }
        folder_in_use(self.db().pool(), owner, prefix).await
    }

    /// Copy the file or folder `from` to `to` in `owner`'s tree, with its
    /// properties (never its locks): a folder with everything in it, or
    /// (`Depth::Zero`) alone. Whatever was at `to` is replaced when
    /// `overwrite` allows (else `AlreadyExists`). The copy, its properties
    /// included, counts against the owner's quota. `to` must not be inside
    /// `from`, nor `from` inside `to` (the caller refuses those).
    pub async fn copy_node(
        &self,
        owner: Owner,
        from: &FilePath,
        to: &FilePath,
        depth: Depth,
        overwrite: bool,
    ) -> Result<Transfer, VolumeError> {
        refuse_nested(from, to)?;
        let db = self.db();
        self.write_tree(owner, async |tx: &mut WriteTx, quota| {
            let source = self.tree.find(tx, owner, from).await?;
            let now = now_ms();
            // The bytes copied, and an entry's overhead for each file
            // and folder (and the destination folder itself).
            let (file_bytes, property_bytes) = match &source {
                Found::Missing => return Err(VolumeError::NotFound(from.to_string())),
                Found::File(meta) => (
                    quota::cost(meta.size),
                    properties::bytes_of(db, tx, owner, from.as_str(), None).await?,
                ),
                Found::Folder => {
                    let folder = folder_of(from)?;
                    let under = (depth == Depth::Infinity).then(|| upper_of(&folder));
                    let (files, entries) = match depth {
                        Depth::Zero => (0, 0),
                        Depth::Infinity => {
                            self.tree
                                .hold_tree(tx, owner, from, to, Some(MAX_TREE_ROWS))
                                .await?
                        }
                    };
                    let files = quota::cost_of(files, entries.saturating_add(1));
                    let within = under.as_deref().map(|upper| (&folder, upper));
                    let bytes =
                        properties::bytes_of(db, tx, owner, folder.as_str(), within).await?;
                    (files, bytes)
                }
            };
            let (transfer, released) = self.clear_destination(tx, owner, to, overwrite).await?;
            let copied = file_bytes.saturating_add(property_bytes);
            quota::check(db, tx, owner, quota, quota::Leaving::NOTHING, copied).await?;
            match source {
                Found::Missing => {}
                Found::File(_) => {
                    rows::copy_file(tx, owner, from, to, now).await?;
                    properties::copy(tx, owner, from.as_str(), to.as_str()).await?;
                }
                Found::Folder => {
                    let (from, to) = (folder_of(from)?, folder_of(to)?);
                    if depth == Depth::Infinity {
                        rows::copy_range(tx, owner, &from, &to, now).await?;
                        properties::copy_range(tx, owner, &from, &to, &upper_of(&from)).await?;
                    }
                    rows::ensure_folder(tx, owner, &to, now).await?;
                    properties::copy(tx, owner, from.as_str(), to.as_str()).await?;
                }
            }
            Ok((transfer, released))
        })
        .await
    }

    /// Copy the file `from` to the file `to` in `owner`'s tree as a row
    /// (S3's CopyObject): only a file at `to` is replaced, never a folder
    /// of that name or what is in it (in S3 `photos` and `photos/…` are
    /// unrelated keys); `from` and `to` may be one inside the other, and
    /// may be the same (then nothing changes). `version` names an earlier
    /// version of `from` to copy (`NoSuchVersion`, `DeleteMarker`). The
    /// copy is a new version of `to`, the file it replaces kept or let go
    /// as any replace's. What S3 kept of the object goes with the row;
    /// dead properties do not.
    pub async fn copy_file(
        &self,
        owner: Owner,
        from: &FilePath,
        version: Option<&str>,
        to: &FilePath,
    ) -> Result<crate::FileMeta, VolumeError> {
        let db = self.db();
        self.write_tree(owner, async |tx: &mut WriteTx, quota| {
            let current = self.tree.get_locked(tx, owner, from).await?;
            let source = match (version, current) {
                (None, current) => {
                    current.ok_or_else(|| VolumeError::NotFound(from.to_string()))?
                }
                (Some(version), Some(current)) if current.version_id == version => current,
                // Locked, so a removal of the version waits for this copy,
                // and then finds its blob named.
                (Some(version), _) => {
                    let kept = crate::history::get_locked(db, tx, owner, from.as_str(), version)
                        .await?
                        .ok_or_else(|| VolumeError::NoSuchVersion {
                            path: from.to_string(),
                            version_id: version.to_owned(),
                        })?;
                    if kept.marker {
                        return Err(VolumeError::DeleteMarker {
                            path: from.to_string(),
                            version_id: version.to_owned(),
                        });
                    }
                    kept.meta
                }
            };
            // Onto itself: nothing changes, unless the path keeps
            // versions (S3 makes a new one, its metadata replaced).
            let keeping = self.keeping(tx, owner, to.as_str()).await?;
            if from == to && version.is_none() && keeping.state != crate::Versioning::Enabled {
                return Ok((source, Vec::new()));
            }
            properties::forget(tx, owner, to.as_str()).await?;
            let cost = quota::cost(source.size);
            quota::check(db, tx, owner, quota, quota::Leaving::NOTHING, cost).await?;
            let mut released = Vec::new();
            let copied = self
                .place(tx, owner, to, source, keeping, false, &mut released)
                .await?;
            Ok((copied, released))
        })
        .await
    }

    /// Delete the folder `prefix` of `owner`'s tree only if nothing is in
    /// it (no file, no folder made in it, no earlier version or delete
    /// marker of a path in it), checked and done in one
    /// transaction, so a file stored meanwhile is never taken with it.
    /// Whether it was empty (and so is gone, if it was there).
    pub async fn delete_folder_if_empty(
        &self,
        owner: Owner,
        prefix: &Prefix,
    ) -> Result<bool, VolumeError> {
        self.write_folder(owner, prefix, async |tx: &mut WriteTx, upper: &str| {
            if rows::holds_anything(tx, owner, prefix, upper).await?
                || history::any_within(tx, owner, prefix.as_str(), upper).await?
            {
                return Ok(false);
            }
            let (rows, _) = Tree::delete_range(tx, owner, prefix.as_str(), upper).await?;
            debug_assert!(rows.is_empty());
            forget_keys(tx, owner, prefix.as_str(), prefix).await?;
            Ok(true)
        })
        .await
    }

    /// Forget that the folder `prefix` was made on purpose (S3's deleting
    /// a folder marker, `key/`): what is in it stays, and so does the
    /// folder while anything is; an empty one goes. Whether it had been
    /// made.
    pub async fn remove_folder_marker(
        &self,
        owner: Owner,
        prefix: &Prefix,
    ) -> Result<bool, VolumeError> {
        self.write_folder(owner, prefix, async |tx: &mut WriteTx, upper: &str| {
            let removed = Tree::unmake_folder(tx, owner, prefix).await?;
            if removed && !rows::holds_anything(tx, owner, prefix, upper).await? {
                forget_keys(tx, owner, prefix.as_str(), prefix).await?;
            }
            Ok(removed)
        })
        .await
    }

    /// Move the file or folder `from` to `to` in `owner`'s tree, with its
    /// properties; its locks (and those under it) are dropped. Whatever was
    /// at `to` is replaced when `overwrite` allows (else `AlreadyExists`).
    /// Neither may be inside the other (the caller refuses those).
    pub async fn move_node(
        &self,
        owner: Owner,
        from: &FilePath,
        to: &FilePath,
        overwrite: bool,
    ) -> Result<Transfer, VolumeError> {
        refuse_nested(from, to)?;
        self.write_tree(owner, async |tx: &mut WriteTx, _quota| {
            let source = self.tree.find(tx, owner, from).await?;
            match source {
                Found::Missing => return Err(VolumeError::NotFound(from.to_string())),
                Found::Folder => {
                    self.tree.hold_tree(tx, owner, from, to, None).await?;
                }
                Found::File(_) => {}
            }
            let (transfer, released) = self.clear_destination(tx, owner, to, overwrite).await?;
            match source {
                Found::Missing => {}
                Found::File(_) => {
                    rows::move_file(tx, owner, from, to).await?;
                    history::rename(tx, owner, from.as_str(), to.as_str()).await?;
                    properties::rename(tx, owner, from.as_str(), to.as_str()).await?;
                    locks::forget_within(tx, owner, from.as_str(), "", "").await?;
                }
                Found::Folder => {
                    let (from, to) = (folder_of(from)?, folder_of(to)?);
                    let upper = upper_of(&from);
                    rows::move_range(tx, owner, &from, &to).await?;
                    history::rename_range(tx, owner, from.as_str(), to.as_str(), &upper).await?;
                    properties::rename_range(tx, owner, &from, &to, &upper).await?;
                    locks::forget_within(tx, owner, from.as_str(), from.as_str(), &upper).await?;
                    // A folder that only held files is made on purpose at its
                    // destination, so that it stays if they go.
                    rows::ensure_folder(tx, owner, &to, now_ms()).await?;
                }
            }
            Ok((transfer, released))
        })
        .await
    }

    /// Run `work` in one write transaction that takes `owner`'s user row
    /// first (as uploads take it; `work` gets the quota it read) and then
    /// their tree lock, the order every transfer keeps; let go of the
    /// digests `work` returns (those the rows it removed named) in it and
    /// after the commit (see [`Volume::let_go_in`]).
    async fn write_tree<T>(
        &self,
        owner: Owner,
        work: impl AsyncFnOnce(&mut WriteTx, Option<u64>) -> Result<(T, Vec<Digest>), VolumeError>,
    ) -> Result<T, VolumeError> {
        let db = self.db();
        let (done, let_go) = db
            .write(async |tx: &mut WriteTx| {
                let quota = quota::lock(db, tx, owner).await?;
                db.lock_tree(tx, owner.id()).await?;
                let (done, released) = work(tx, quota).await?;
                Ok((done, self.let_go_in(tx, released).await?))
            })
            .await?;
        self.finish_letting_go(let_go).await;
        Ok(done)
    }

    /// Run `work` on the folder `prefix` (given the upper bound of its
    /// range) in one write transaction under `owner`'s tree lock, which
    /// every folder delete takes; `false` without it for the root, which
    /// has no range and never goes.
    async fn write_folder(
        &self,
        owner: Owner,
        prefix: &Prefix,
        work: impl AsyncFnOnce(&mut WriteTx, &str) -> Result<bool, VolumeError>,
    ) -> Result<bool, VolumeError> {
        let Some(upper) = prefix.upper_bound() else {
            return Ok(false);
        };
        let db = self.db();
        db.write(async |tx: &mut WriteTx| {
            db.lock_tree(tx, owner.id()).await?;
            work(tx, &upper).await
        })
        .await
    }

    /// Make room at `to` inside `tx`: refuse (`AlreadyExists`) if a file or
    /// folder of that name exists and `overwrite` does not allow replacing
    /// it; else remove the file of that name and the folder of that name
    /// with all it holds, and any properties and locks left at those keys
    /// (a folder that only held files leaves its own behind). Returns what
    /// the transfer will be and the digests the removed files named.
    async fn clear_destination(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        to: &FilePath,
        overwrite: bool,
    ) -> Result<(Transfer, Vec<Digest>), VolumeError> {
        let transfer = match self.tree.find(tx, owner, to).await? {
            Found::Missing => Transfer::Created,
            _ if !overwrite => return Err(VolumeError::AlreadyExists(to.to_string())),
            _ => Transfer::Replaced,
        };
        let mut removed = Vec::new();
        if transfer == Transfer::Replaced {
            // The file replaced is kept as an earlier version where
            // versions are kept; files the folder held are deleted.
            let (file, under) = rows::clear(tx, owner, to).await?;
            if let Some(file) = file {
                let keeping = self.keeping(tx, owner, file.path.as_str()).await?;
                self.retire(tx, owner, file, keeping, &mut removed).await?;
            }
            self.delete_rows_in(tx, owner, under, &mut removed).await?;
        }
        forget_keys(tx, owner, to.as_str(), &folder_of(to)?).await?;
        Ok((transfer, removed))
    }
}

/// Drop the properties and locks at `key` and at every key in the folder
/// `folder`, inside `tx`.
async fn forget_keys(
    tx: &mut Conn,
    owner: Owner,
    key: &str,
    folder: &Prefix,
) -> Result<(), VolumeError> {
    let upper = upper_of(folder);
    properties::forget_within(tx, owner, key, folder.as_str(), &upper).await?;
    locks::forget_within(tx, owner, key, folder.as_str(), &upper).await
}
