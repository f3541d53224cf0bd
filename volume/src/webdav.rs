//! What WebDAV needs of a tree beyond files: what a name is (a file, a
//! folder, or nothing), server-side copies and moves of whole trees (rows,
//! never bytes: content is addressed by digest), dead properties and locks.
//!
//! Properties and locks are stored by a resource's *key*: a file's path, or
//! a folder's prefix ending with `/` (the root folder's key is empty). Both
//! live in the database, so every gateway on it sees the same locks.
//!
//! Copies and moves run in one write transaction each, taking the owner's
//! user row first (as an upload does after its blob's ledger row) and then
//! every source file row, locked; they never touch the ledger: every digest
//! they copy is named by a source row they hold, so no removal can count it
//! unnamed, and after the commit the copies name it too.

use sqlx::Any;

use crate::db::WriteTx;
use crate::path::{FilePath, MAX_PATH_BYTES, PathError, Prefix};
use crate::{Digest, FileMeta, Owner, Volume, VolumeError, accounts, now_ms};

/// The most locks one tree may hold at once: a client that locks without
/// end gets refused rather than slowing every write of its owner (each
/// write reads its tree's locks).
pub const MAX_LOCKS_PER_OWNER: usize = 256;

/// The most dead properties one resource may hold.
pub const MAX_PROPERTIES_PER_RESOURCE: usize = 256;

/// The most files and folders one `COPY` may duplicate (a copy is rows, and
/// holds SQLite's one write lock while it runs).
pub const MAX_TREE_ROWS: usize = 100_000;

/// What a name is in a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File(FileMeta),
    Folder(FolderMeta),
    Missing,
}

/// A folder: made on purpose (it has a creation time) or there because
/// files are in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderMeta {
    pub prefix: Prefix,
    pub created_ms: Option<i64>,
}

/// How much of a folder a copy takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// The folder alone (and its properties), none of its members.
    Zero,
    Infinity,
}

/// What a copy or move did at its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    Created,
    /// Something was there and was replaced (with `overwrite`).
    Replaced,
}

/// A property a client stored on a resource.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct DeadProperty {
    /// Empty for a property in no namespace.
    pub namespace: String,
    pub name: String,
    /// An XML fragment (text and elements, each element declaring its
    /// namespace), as it goes back inside the property's element.
    pub value: String,
}

/// One step of a `PROPPATCH`, applied in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyChange {
    Set(DeadProperty),
    Remove { namespace: String, name: String },
}

/// A write lock on a resource (and, `infinite`, everything under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DavLock {
    /// The lock token, a URI.
    pub token: String,
    /// The locked resource's key (the lock root).
    pub root: String,
    pub infinite: bool,
    pub exclusive: bool,
    pub timeout_s: u64,
    pub expires_ms: i64,
}

impl DavLock {
    /// Whether this lock applies to the resource `key`: its root, or
    /// (depth infinity) anything under a locked folder.
    pub fn covers(&self, key: &str) -> bool {
        self.root == key || (self.infinite && self.root_is_folder() && key.starts_with(&self.root))
    }

    /// Whether this lock's root is `key` or lies under the folder `key`.
    pub fn within(&self, key: &str) -> bool {
        self.root == key || (key_is_folder(key) && self.root.starts_with(key))
    }

    /// Whether this lock and a lock on `root` would lock a resource in
    /// common.
    fn overlaps(&self, root: &str, infinite: bool) -> bool {
        self.covers(root) || (infinite && key_is_folder(root) && self.root.starts_with(root))
    }

    fn root_is_folder(&self) -> bool {
        key_is_folder(&self.root)
    }
}

/// Folder keys end with `/`; the root folder's key is empty.
fn key_is_folder(key: &str) -> bool {
    key.is_empty() || key.ends_with('/')
}

/// A lock asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewLock {
    pub token: String,
    pub root: String,
    pub infinite: bool,
    pub exclusive: bool,
    pub holder: String,
    pub timeout_s: u64,
}

/// Whether a lock was granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockOutcome {
    Granted(DavLock),
    /// A lock in the way (an exclusive one, or any for an exclusive ask).
    Conflict,
    /// The tree holds [`MAX_LOCKS_PER_OWNER`] locks already.
    TooMany,
}

#[derive(sqlx::FromRow)]
struct LockRow {
    token: String,
    path: String,
    infinite: i64,
    exclusive: i64,
    timeout_s: i64,
    expires_ms: i64,
}

impl From<LockRow> for DavLock {
    fn from(row: LockRow) -> Self {
        Self {
            token: row.token,
            root: row.path,
            infinite: row.infinite != 0,
            exclusive: row.exclusive != 0,
            timeout_s: u64::try_from(row.timeout_s).unwrap_or_default(),
            expires_ms: row.expires_ms,
        }
    }
}

/// Everything of a lock but its holder, which only lock discovery reads.
const LOCK_COLUMNS: &str = "token, path, infinite, exclusive, timeout_s, expires_ms";

/// What a name was found to be inside a write transaction.
enum Found {
    File(FileMeta),
    Folder,
    Missing,
}

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
        if let Some(meta) = self.index.get(owner, name).await? {
            return Ok(Node::File(meta));
        }
        let prefix = folder_of(name)?;
        let made: Option<(i64,)> =
            sqlx::query_as("SELECT created_ms FROM folders WHERE owner = $1 AND path = $2")
                .bind(owner.id())
                .bind(prefix.as_str())
                .fetch_optional(self.db().pool())
                .await?;
        if let Some((created_ms,)) = made {
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
        folder_in_use(self.db().pool(), owner, prefix).await
    }

    /// Copy the file or folder `from` to `to` in `owner`'s tree, with its
    /// properties (never its locks): a folder with everything in it, or
    /// (`Depth::Zero`) alone. Whatever was at `to` is replaced when
    /// `overwrite` allows (else `AlreadyExists`). The copy counts against
    /// the owner's quota. `to` must not be inside `from`, nor `from`
    /// inside `to` (the caller refuses those).
    pub async fn copy_node(
        &self,
        owner: Owner,
        from: &FilePath,
        to: &FilePath,
        depth: Depth,
        overwrite: bool,
    ) -> Result<Transfer, VolumeError> {
        refuse_nested(from, to)?;
        let mut tx = self.db().begin_write().await?;
        let quota = accounts::locked_quota(self.db(), &mut tx, owner).await?;
        let source = self.find(&mut tx, owner, from).await?;
        let now = now_ms();
        let copied_bytes = match &source {
            Found::Missing => return Err(VolumeError::NotFound(from.to_string())),
            Found::File(meta) => meta.size,
            Found::Folder if depth == Depth::Zero => 0,
            Found::Folder => {
                self.hold_tree(&mut tx, owner, from, to, Some(MAX_TREE_ROWS))
                    .await?
            }
        };
        let (transfer, released) = self
            .clear_destination(&mut tx, owner, to, overwrite)
            .await?;
        if let Some(quota) = quota {
            check_room(&mut tx, owner, quota, copied_bytes).await?;
        }
        match source {
            Found::Missing => {}
            Found::File(_) => {
                sqlx::query(
                    "INSERT INTO files (owner, path, size, sha256, blake3, content_type, created_ms, modified_ms)
                     SELECT owner, $3, size, sha256, blake3, content_type, $4, $4 FROM files
                     WHERE owner = $1 AND path = $2",
                )
                .bind(owner.id())
                .bind(from.as_str())
                .bind(to.as_str())
                .bind(now)
                .execute(&mut *tx)
                .await?;
                copy_properties(&mut tx, owner, from.as_str(), to.as_str()).await?;
            }
            Found::Folder => {
                let (from, to) = (folder_of(from)?, folder_of(to)?);
                let upper = upper_of(&from);
                if depth == Depth::Infinity {
                    for sql in [
                        "INSERT INTO files (owner, path, size, sha256, blake3, content_type, created_ms, modified_ms)
                         SELECT owner, $2 || SUBSTR(path, CAST($3 AS INTEGER)), size, sha256,
                                blake3, content_type, $6, $6
                         FROM files WHERE owner = $1 AND path >= $4 AND path < $5",
                        "INSERT INTO folders (owner, path, created_ms)
                         SELECT owner, $2 || SUBSTR(path, CAST($3 AS INTEGER)), $6
                         FROM folders WHERE owner = $1 AND path > $4 AND path < $5",
                        "INSERT INTO dav_properties (owner, path, namespace, name, value)
                         SELECT owner, $2 || SUBSTR(path, CAST($3 AS INTEGER)), namespace, name, value
                         FROM dav_properties WHERE owner = $1 AND path > $4 AND path < $5",
                    ] {
                        rewrite(sql, owner, &from, &to, &upper)
                            .bind(now)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
                ensure_folder(&mut tx, owner, &to, now).await?;
                copy_properties(&mut tx, owner, from.as_str(), to.as_str()).await?;
            }
        }
        tx.commit().await?;
        self.release_all(&released).await;
        Ok(transfer)
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
        let mut tx = self.db().begin_write().await?;
        // The user's row first, as uploads and copies take it.
        accounts::locked_quota(self.db(), &mut tx, owner).await?;
        let source = self.find(&mut tx, owner, from).await?;
        match source {
            Found::Missing => return Err(VolumeError::NotFound(from.to_string())),
            Found::Folder => {
                self.hold_tree(&mut tx, owner, from, to, None).await?;
            }
            Found::File(_) => {}
        }
        let (transfer, released) = self
            .clear_destination(&mut tx, owner, to, overwrite)
            .await?;
        match source {
            Found::Missing => {}
            Found::File(_) => {
                for sql in [
                    "UPDATE files SET path = $3 WHERE owner = $1 AND path = $2",
                    "UPDATE dav_properties SET path = $3 WHERE owner = $1 AND path = $2",
                ] {
                    sqlx::query(sql)
                        .bind(owner.id())
                        .bind(from.as_str())
                        .bind(to.as_str())
                        .execute(&mut *tx)
                        .await?;
                }
                // Exactly as many arguments as placeholders: PostgreSQL
                // keeps each SQL text prepared as first bound (see `db`).
                sqlx::query("DELETE FROM dav_locks WHERE owner = $1 AND path = $2")
                    .bind(owner.id())
                    .bind(from.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
            Found::Folder => {
                let (from, to) = (folder_of(from)?, folder_of(to)?);
                let upper = upper_of(&from);
                for sql in [
                    "UPDATE files SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
                     WHERE owner = $1 AND path >= $4 AND path < $5",
                    "UPDATE folders SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
                     WHERE owner = $1 AND path >= $4 AND path < $5",
                    "UPDATE dav_properties SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
                     WHERE owner = $1 AND path >= $4 AND path < $5",
                ] {
                    rewrite(sql, owner, &from, &to, &upper)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query("DELETE FROM dav_locks WHERE owner = $1 AND path >= $2 AND path < $3")
                    .bind(owner.id())
                    .bind(from.as_str())
                    .bind(&upper)
                    .execute(&mut *tx)
                    .await?;
                // A folder that only held files is made on purpose at its
                // destination, so that it stays if they go.
                ensure_folder(&mut tx, owner, &to, now_ms()).await?;
            }
        }
        tx.commit().await?;
        self.release_all(&released).await;
        Ok(transfer)
    }

    /// What `name` is, read inside `tx` (a file's row locked until it ends).
    async fn find(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        name: &FilePath,
    ) -> Result<Found, VolumeError> {
        if let Some(meta) = self.index.get_locked(tx, owner, name).await? {
            return Ok(Found::File(meta));
        }
        Ok(
            if folder_in_use(&mut **tx, owner, &folder_of(name)?).await? {
                Found::Folder
            } else {
                Found::Missing
            },
        )
    }

    /// Take the rows of the tree under `from` (file rows locked, on
    /// PostgreSQL, until `tx` ends) and check it may go to `to`: no path
    /// grows past [`MAX_PATH_BYTES`], and at most `max_rows` files and
    /// folders. Returns the bytes its files take.
    async fn hold_tree(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        from: &FilePath,
        to: &FilePath,
        max_rows: Option<usize>,
    ) -> Result<u64, VolumeError> {
        let (from, to) = (folder_of(from)?, folder_of(to)?);
        let upper = upper_of(&from);
        let files: Vec<(String, i64)> = sqlx::query_as(&format!(
            "SELECT path, size FROM files WHERE owner = $1 AND path >= $2 AND path < $3
             ORDER BY path{}",
            self.db().locking()
        ))
        .bind(owner.id())
        .bind(from.as_str())
        .bind(&upper)
        .fetch_all(&mut **tx)
        .await?;
        let (folders, longest_folder): (i64, Option<i64>) = sqlx::query_as(&format!(
            "SELECT COUNT(*), CAST(MAX({}) AS BIGINT) FROM folders
             WHERE owner = $1 AND path >= $2 AND path < $3",
            self.db().byte_length("path")
        ))
        .bind(owner.id())
        .bind(from.as_str())
        .bind(&upper)
        .fetch_one(&mut **tx)
        .await?;
        let rows = files.len() + usize::try_from(folders).unwrap_or(usize::MAX);
        if let Some(limit) = max_rows
            && rows > limit
        {
            return Err(VolumeError::TreeTooLarge { rows, limit });
        }
        let longest = files
            .iter()
            .map(|(path, _)| path.len())
            .chain(longest_folder.and_then(|len| usize::try_from(len).ok()))
            .max()
            .unwrap_or(0);
        let grown = (longest + to.as_str().len()).saturating_sub(from.as_str().len());
        if grown > MAX_PATH_BYTES {
            return Err(VolumeError::InvalidPath(PathError::TooLong(grown)));
        }
        Ok(files
            .iter()
            .map(|(_, size)| u64::try_from(*size).unwrap_or(0))
            .sum())
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
        let transfer = match self.find(tx, owner, to).await? {
            Found::Missing => Transfer::Created,
            _ if !overwrite => return Err(VolumeError::AlreadyExists(to.to_string())),
            _ => Transfer::Replaced,
        };
        let folder = folder_of(to)?;
        let upper = upper_of(&folder);
        let mut removed: Vec<(String,)> = Vec::new();
        if transfer == Transfer::Replaced {
            removed =
                sqlx::query_as("DELETE FROM files WHERE owner = $1 AND path = $2 RETURNING sha256")
                    .bind(owner.id())
                    .bind(to.as_str())
                    .fetch_all(&mut **tx)
                    .await?;
            removed.extend(
                sqlx::query_as::<_, (String,)>(
                    "DELETE FROM files WHERE owner = $1 AND path >= $2 AND path < $3
                     RETURNING sha256",
                )
                .bind(owner.id())
                .bind(folder.as_str())
                .bind(&upper)
                .fetch_all(&mut **tx)
                .await?,
            );
            sqlx::query("DELETE FROM folders WHERE owner = $1 AND path >= $2 AND path < $3")
                .bind(owner.id())
                .bind(folder.as_str())
                .bind(&upper)
                .execute(&mut **tx)
                .await?;
        }
        for table in ["dav_properties", "dav_locks"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE owner = $1
                 AND (path = $2 OR (path >= $3 AND path < $4))"
            ))
            .bind(owner.id())
            .bind(to.as_str())
            .bind(folder.as_str())
            .bind(&upper)
            .execute(&mut **tx)
            .await?;
        }
        Ok((transfer, crate::index::digests(removed)))
    }

    /// Let go of blobs that changes which committed may have left unnamed.
    async fn release_all(&self, released: &[Digest]) {
        for digest in released {
            self.release_logged(digest).await;
        }
    }

    /// Dead properties and locks, kept in the same database.
    pub fn webdav(&self) -> WebDavStore<'_> {
        WebDavStore { volume: self }
    }
}

/// Whether a folder row at or under `prefix` (not the root), or a file
/// under it, exists: one query, on the pool or inside a transaction.
async fn folder_in_use<'e, E>(
    executor: E,
    owner: Owner,
    prefix: &Prefix,
) -> Result<bool, VolumeError>
where
    E: sqlx::Executor<'e, Database = Any>,
{
    let upper = upper_of(prefix);
    let (found,): (i64,) = sqlx::query_as(
        "SELECT CAST(CASE WHEN
             EXISTS (SELECT 1 FROM folders WHERE owner = $1 AND path >= $2 AND path < $3)
             OR EXISTS (SELECT 1 FROM files WHERE owner = $1 AND path >= $2 AND path < $3)
         THEN 1 ELSE 0 END AS BIGINT)",
    )
    .bind(owner.id())
    .bind(prefix.as_str())
    .bind(&upper)
    .fetch_one(executor)
    .await?;
    Ok(found != 0)
}

/// The folder named like `name`: `name/`.
fn folder_of(name: &FilePath) -> Result<Prefix, VolumeError> {
    Ok(Prefix::parse(name.as_str())?)
}

/// The upper bound of a prefix that is not the root.
fn upper_of(prefix: &Prefix) -> String {
    prefix.upper_bound().unwrap_or_default()
}

/// Refuse a copy or move of `from` onto itself, into itself, or onto a
/// folder that holds it (replacing which would remove the source).
fn refuse_nested(from: &FilePath, to: &FilePath) -> Result<(), VolumeError> {
    let (from, to) = (from.as_str(), to.as_str());
    let inside = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
    };
    if from == to || inside(to, from) || inside(from, to) {
        return Err(VolumeError::Nested {
            from: from.to_owned(),
            to: to.to_owned(),
        });
    }
    Ok(())
}

/// A statement that rewrites paths under `from` to lie under `to`: `$1`
/// owner, `$2` the new prefix, `$3` where the rest of a path starts (in
/// characters, as both engines' `SUBSTR` counts), `$4`..`$5` the range.
fn rewrite<'q>(
    sql: &'q str,
    owner: Owner,
    from: &'q Prefix,
    to: &'q Prefix,
    upper: &'q str,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    let rest_starts = i64::try_from(from.as_str().chars().count() + 1).unwrap_or(i64::MAX);
    sqlx::query(sql)
        .bind(owner.id())
        .bind(to.as_str())
        .bind(rest_starts)
        .bind(from.as_str())
        .bind(upper)
}

/// Make `folder` a folder made on purpose, inside `tx` (a no-op if it is).
async fn ensure_folder(
    tx: &mut WriteTx,
    owner: Owner,
    folder: &Prefix,
    now_ms: i64,
) -> Result<(), VolumeError> {
    sqlx::query(
        "INSERT INTO folders (owner, path, created_ms) VALUES ($1, $2, $3)
         ON CONFLICT (owner, path) DO NOTHING",
    )
    .bind(owner.id())
    .bind(folder.as_str())
    .bind(now_ms)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Refuse (with `QuotaExceeded`) to add `size` bytes to `owner`'s files.
async fn check_room(
    tx: &mut WriteTx,
    owner: Owner,
    quota: u64,
    size: u64,
) -> Result<(), VolumeError> {
    let (used,): (i64,) =
        sqlx::query_as("SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM files WHERE owner = $1")
            .bind(owner.id())
            .fetch_one(&mut **tx)
            .await?;
    let used = u64::try_from(used).unwrap_or_default();
    if used.saturating_add(size) > quota {
        return Err(VolumeError::QuotaExceeded { quota, used, size });
    }
    Ok(())
}

async fn copy_properties(
    tx: &mut WriteTx,
    owner: Owner,
    from: &str,
    to: &str,
) -> Result<(), VolumeError> {
    sqlx::query(
        "INSERT INTO dav_properties (owner, path, namespace, name, value)
         SELECT owner, $3, namespace, name, value FROM dav_properties
         WHERE owner = $1 AND path = $2
         ON CONFLICT (owner, path, namespace, name) DO UPDATE SET value = excluded.value",
    )
    .bind(owner.id())
    .bind(from)
    .bind(to)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Dead properties and locks of a [`Volume`]'s trees.
#[derive(Debug, Clone, Copy)]
pub struct WebDavStore<'a> {
    volume: &'a Volume,
}

impl WebDavStore<'_> {
    fn db(&self) -> &crate::db::Database {
        self.volume.db()
    }

    /// Drop what is left at `key` of a resource that is gone (a folder that
    /// only held files leaves its properties and locks when they go): a
    /// new resource made there starts clean.
    pub async fn forget(&self, owner: Owner, key: &str) -> Result<(), VolumeError> {
        let mut tx = self.db().begin_write().await?;
        for table in ["dav_properties", "dav_locks"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE owner = $1 AND path = $2"
            ))
            .bind(owner.id())
            .bind(key)
            .execute(&mut *tx)
            .await?;
        }
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
        #[derive(sqlx::FromRow)]
        struct Row {
            path: String,
            #[sqlx(flatten)]
            property: DeadProperty,
        }
        let mut found = Vec::new();
        for chunk in keys.chunks(KEYS_PER_QUERY) {
            let sql = format!(
                "SELECT path, namespace, name, value FROM dav_properties
                 WHERE owner = $1 AND path IN ({}) ORDER BY path, namespace, name",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query_as::<_, Row>(&sql).bind(owner.id());
            for key in chunk {
                query = query.bind(key);
            }
            let rows = query.fetch_all(self.db().pool()).await?;
            found.extend(rows.into_iter().map(|row| (row.path, row.property)));
        }
        Ok(found)
    }

    /// When the folders among `keys` that were made on purpose were made
    /// (a folder that only holds files has no date), keyed by folder.
    pub async fn folders_made(
        &self,
        owner: Owner,
        keys: &[String],
    ) -> Result<std::collections::HashMap<String, i64>, VolumeError> {
        let mut made = std::collections::HashMap::new();
        for chunk in keys.chunks(KEYS_PER_QUERY) {
            let sql = format!(
                "SELECT path, created_ms FROM folders WHERE owner = $1 AND path IN ({})",
                placeholders(chunk.len())
            );
            let mut query = sqlx::query_as::<_, (String, i64)>(&sql).bind(owner.id());
            for key in chunk {
                query = query.bind(key);
            }
            made.extend(query.fetch_all(self.db().pool()).await?);
        }
        Ok(made)
    }

    /// Apply `changes` to the properties of `key`, in order, all or none.
    pub async fn change_properties(
        &self,
        owner: Owner,
        key: &str,
        changes: &[PropertyChange],
    ) -> Result<(), VolumeError> {
        let mut tx = self.db().begin_write().await?;
        for change in changes {
            match change {
                PropertyChange::Set(property) => {
                    sqlx::query(
                        "INSERT INTO dav_properties (owner, path, namespace, name, value)
                         VALUES ($1, $2, $3, $4, $5)
                         ON CONFLICT (owner, path, namespace, name)
                         DO UPDATE SET value = excluded.value",
                    )
                    .bind(owner.id())
                    .bind(key)
                    .bind(&property.namespace)
                    .bind(&property.name)
                    .bind(&property.value)
                    .execute(&mut *tx)
                    .await?;
                }
                PropertyChange::Remove { namespace, name } => {
                    sqlx::query(
                        "DELETE FROM dav_properties
                         WHERE owner = $1 AND path = $2 AND namespace = $3 AND name = $4",
                    )
                    .bind(owner.id())
                    .bind(key)
                    .bind(namespace)
                    .bind(name)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        let (count,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM dav_properties WHERE owner = $1 AND path = $2")
                .bind(owner.id())
                .bind(key)
                .fetch_one(&mut *tx)
                .await?;
        if usize::try_from(count).unwrap_or(usize::MAX) > MAX_PROPERTIES_PER_RESOURCE {
            return Err(VolumeError::TooManyProperties {
                limit: MAX_PROPERTIES_PER_RESOURCE,
            });
        }
        tx.commit().await?;
        Ok(())
    }

    /// The locks of `owner`'s tree that have not expired.
    pub async fn locks(&self, owner: Owner) -> Result<Vec<DavLock>, VolumeError> {
        let rows: Vec<LockRow> = sqlx::query_as(&format!(
            "SELECT {LOCK_COLUMNS} FROM dav_locks WHERE owner = $1 AND expires_ms > $2"
        ))
        .bind(owner.id())
        .bind(now_ms())
        .fetch_all(self.db().pool())
        .await?;
        Ok(rows.into_iter().map(DavLock::from).collect())
    }

    /// The holders (the clients' `DAV:owner` fragments) of `owner`'s live
    /// locks, by token: what lock discovery shows.
    pub async fn holders(
        &self,
        owner: Owner,
    ) -> Result<std::collections::HashMap<String, String>, VolumeError> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT token, holder FROM dav_locks WHERE owner = $1 AND expires_ms > $2",
        )
        .bind(owner.id())
        .bind(now_ms())
        .fetch_all(self.db().pool())
        .await?;
        Ok(rows.into_iter().collect())
    }

    /// Grant `lock` unless a live lock is in its way, in one write
    /// transaction that holds the tree's lock: two gateways cannot both
    /// grant an exclusive lock on one resource. (It deletes nothing, so it
    /// never waits on rows a copy or move holds; expired locks are cleared
    /// by [`WebDavStore::clear_expired`].)
    pub async fn lock(&self, owner: Owner, lock: NewLock) -> Result<LockOutcome, VolumeError> {
        let now = now_ms();
        let mut tx = self.db().begin_write().await?;
        self.db().lock_tree(&mut tx, owner.id()).await?;
        let rows: Vec<LockRow> = sqlx::query_as(&format!(
            "SELECT {LOCK_COLUMNS} FROM dav_locks WHERE owner = $1 AND expires_ms > $2"
        ))
        .bind(owner.id())
        .bind(now)
        .fetch_all(&mut *tx)
        .await?;
        let held: Vec<DavLock> = rows.into_iter().map(DavLock::from).collect();
        if held.len() >= MAX_LOCKS_PER_OWNER {
            return Ok(LockOutcome::TooMany);
        }
        if held.iter().any(|other| {
            (other.exclusive || lock.exclusive) && other.overlaps(&lock.root, lock.infinite)
        }) {
            return Ok(LockOutcome::Conflict);
        }
        let expires_ms = now.saturating_add(seconds_ms(lock.timeout_s));
        sqlx::query(&format!(
            "INSERT INTO dav_locks ({LOCK_COLUMNS}, holder, owner)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        ))
        .bind(&lock.token)
        .bind(&lock.root)
        .bind(i64::from(lock.infinite))
        .bind(i64::from(lock.exclusive))
        .bind(i64::try_from(lock.timeout_s).unwrap_or(i64::MAX))
        .bind(expires_ms)
        .bind(&lock.holder)
        .bind(owner.id())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(LockOutcome::Granted(DavLock {
            token: lock.token,
            root: lock.root,
            infinite: lock.infinite,
            exclusive: lock.exclusive,
            timeout_s: lock.timeout_s,
            expires_ms,
        }))
    }

    /// Remove every lock that has expired (they count for nothing already);
    /// how many went.
    pub async fn clear_expired(&self) -> Result<u64, VolumeError> {
        let gone = sqlx::query("DELETE FROM dav_locks WHERE expires_ms <= $1")
            .bind(now_ms())
            .execute(self.db().pool())
            .await?;
        Ok(gone.rows_affected())
    }

    /// Give the live lock `token` a new timeout; the lock, if it was live.
    pub async fn refresh_lock(
        &self,
        owner: Owner,
        token: &str,
        timeout_s: u64,
    ) -> Result<Option<DavLock>, VolumeError> {
        let now = now_ms();
        let row: Option<LockRow> = sqlx::query_as(&format!(
            "UPDATE dav_locks SET timeout_s = $3, expires_ms = $4
             WHERE owner = $1 AND token = $2 AND expires_ms > $5 RETURNING {LOCK_COLUMNS}"
        ))
        .bind(owner.id())
        .bind(token)
        .bind(i64::try_from(timeout_s).unwrap_or(i64::MAX))
        .bind(now.saturating_add(seconds_ms(timeout_s)))
        .bind(now)
        .fetch_optional(self.db().pool())
        .await?;
        Ok(row.map(DavLock::from))
    }

    /// Remove the lock `token`; whether it was there.
    pub async fn unlock(&self, owner: Owner, token: &str) -> Result<bool, VolumeError> {
        let done = sqlx::query("DELETE FROM dav_locks WHERE owner = $1 AND token = $2")
            .bind(owner.id())
            .bind(token)
            .execute(self.db().pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// Keys bound in one `IN (…)` list (both engines take far more).
const KEYS_PER_QUERY: usize = 500;

/// `$2, $3, …` for `count` keys after the owner's `$1`.
fn placeholders(count: usize) -> String {
    (0..count)
        .map(|at| format!("${}", at + 2))
        .collect::<Vec<_>>()
        .join(", ")
}

fn seconds_ms(seconds: u64) -> i64 {
    i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(root: &str, infinite: bool) -> DavLock {
        DavLock {
            token: "urn:uuid:x".into(),
            root: root.into(),
            infinite,
            exclusive: true,
            timeout_s: 60,
            expires_ms: 0,
        }
    }

    #[test]
    fn locks_cover_their_root_and_with_depth_infinity_what_is_under_it() {
        assert!(lock("a/", false).covers("a/"));
        assert!(!lock("a/", false).covers("a/b"));
        assert!(lock("a/", true).covers("a/b"));
        assert!(lock("a/", true).covers("a/b/c/"));
        assert!(!lock("a/", true).covers("ab"));
        assert!(lock("", true).covers("x"));
        assert!(!lock("a", true).covers("a/b"), "a file lock has no members");
        assert!(lock("a/b", false).within("a/"));
        assert!(!lock("a/b", false).within("a/b/"));
        assert!(!lock("a/", false).overlaps("a/b", false));
        assert!(lock("a/b", false).overlaps("a/", true));
        assert!(lock("a/", true).overlaps("a/b", false));
    }
}
