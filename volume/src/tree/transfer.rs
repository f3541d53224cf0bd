//! What a name is in a tree (a file, a folder made or implied by files, or
//! nothing), and the tree's half of server-side copies and moves: whole
//! trees as rows in the caller's transaction, never bytes (content is
//! addressed by digest), paths rewritten with `SUBSTR`, which counts
//! characters on both engines.

use crate::db::{Conn, On};

use std::sync::LazyLock;

use super::{COLUMNS, Tree, columns_replacing};
use crate::db::{rekey, rewrite, sql};
use crate::error::VolumeError;
use crate::path::{FilePath, MAX_PATH_BYTES, PathError, Prefix};
use crate::types::{FileMeta, Owner};

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

/// What a name was found to be inside a write transaction.
pub(crate) enum Found {
    File(FileMeta),
    Folder,
    Missing,
}

impl Tree {
    /// What `name` is, read inside `tx` (a file's row locked until it ends).
    pub(crate) async fn find(
        &self,
        tx: &mut Conn,
        owner: Owner,
        name: &FilePath,
    ) -> Result<Found, VolumeError> {
        if let Some(meta) = self.get_locked(tx, owner, name).await? {
            return Ok(Found::File(meta));
        }
        Ok(if folder_in_use(tx, owner, &folder_of(name)?).await? {
            Found::Folder
        } else {
            Found::Missing
        })
    }

    /// Take the rows of the tree under `from` (file rows locked, on
    /// PostgreSQL, until `tx` ends) and check it may go to `to`: no path
    /// grows past [`MAX_PATH_BYTES`], and at most `max_rows` files and
    /// folders. Returns the bytes its files take and how many files and
    /// folders it holds.
    pub(crate) async fn hold_tree(
        &self,
        tx: &mut Conn,
        owner: Owner,
        from: &FilePath,
        to: &FilePath,
        max_rows: Option<usize>,
    ) -> Result<(u64, u64), VolumeError> {
        let (from, to) = (folder_of(from)?, folder_of(to)?);
        let upper = upper_of(&from);
        let files: Vec<(String, i64)> = sql::query_as(&format!(
            "SELECT path, size FROM files WHERE owner = $1 AND path >= $2 AND path < $3
             ORDER BY path{}",
            self.db.locking()
        ))
        .bind(owner.id())
        .bind(from.as_str())
        .bind(&upper)
        .fetch_all(&mut *tx)
        .await?;
        let (folders, longest_folder): (i64, Option<i64>) = sql::query_as(&format!(
            "SELECT COUNT(*), CAST(MAX({}) AS BIGINT) FROM folders
             WHERE owner = $1 AND path >= $2 AND path < $3",
            self.db.byte_length("path")
        ))
        .bind(owner.id())
        .bind(from.as_str())
        .bind(&upper)
        .fetch_one(&mut *tx)
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
        let bytes = files
            .iter()
            .map(|(_, size)| u64::try_from(*size).unwrap_or(0))
            .sum();
        Ok((bytes, u64::try_from(rows).unwrap_or(u64::MAX)))
    }
}

/// Remove the file named `to` and the folder of that name with all it
/// holds, inside `tx`: the row of the file `to`, and those of the files
/// the folder held.
pub(crate) async fn clear(
    tx: &mut Conn,
    owner: Owner,
    to: &FilePath,
) -> Result<(Option<FileMeta>, Vec<FileMeta>), VolumeError> {
    let folder = folder_of(to)?;
    let file = Tree::delete_file(tx, owner, to).await?;
    let (under, _) = Tree::delete_range(tx, owner, folder.as_str(), &upper_of(&folder)).await?;
    Ok((file, under))
}

/// Whether anything lies inside the folder `prefix` (strictly under it, to
/// `upper`): a file, or a folder made on purpose.
pub(crate) async fn holds_anything(
    tx: &mut Conn,
    owner: Owner,
    prefix: &Prefix,
    upper: &str,
) -> Result<bool, VolumeError> {
    for table in ["files", "folders"] {
        let found: Option<(String,)> = sql::query_as(&format!(
            "SELECT path FROM {table} WHERE owner = $1 AND path > $2 AND path < $3 \
             ORDER BY path LIMIT 1"
        ))
        .bind(owner.id())
        .bind(prefix.as_str())
        .bind(upper)
        .fetch_optional(&mut *tx)
        .await?;
        if found.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Copy the file row `from` to `to` (created now) inside `tx`.
pub(crate) async fn copy_file(
    tx: &mut Conn,
    owner: Owner,
    from: &FilePath,
    to: &FilePath,
    now_ms: i64,
) -> Result<(), VolumeError> {
    static COPY: LazyLock<String> = LazyLock::new(|| {
        let copied = columns_replacing(|column| match column {
            "path" => Some("$3"),
            "created_ms" | "modified_ms" => Some("$4"),
            // A copy is a file of its own: S3's null version of its path.
            "version_id" => Some("'null'"),
            _ => None,
        });
        format!(
            "INSERT INTO files (owner, {COLUMNS}) SELECT owner, {copied} FROM files
             WHERE owner = $1 AND path = $2"
        )
    });
    rekey(&COPY, owner, from.as_str(), to.as_str())
        .bind(now_ms)
        .execute(tx)
        .await?;
    Ok(())
}

/// Copy every file and folder under the folder `from` (not its own row)
/// to lie under `to`, created now, inside `tx`.
pub(crate) async fn copy_range(
    tx: &mut Conn,
    owner: Owner,
    from: &Prefix,
    to: &Prefix,
    now_ms: i64,
) -> Result<(), VolumeError> {
    let upper = upper_of(from);
    static COPY_FILES: LazyLock<String> = LazyLock::new(|| {
        let copied = columns_replacing(|column| match column {
            "path" => Some("$2 || SUBSTR(path, CAST($3 AS INTEGER))"),
            "created_ms" | "modified_ms" => Some("$6"),
            "version_id" => Some("'null'"),
            _ => None,
        });
        format!(
            "INSERT INTO files (owner, {COLUMNS}) SELECT owner, {copied}
             FROM files WHERE owner = $1 AND path >= $4 AND path < $5"
        )
    });
    for statement in [
        COPY_FILES.as_str(),
        "INSERT INTO folders (owner, path, created_ms)
         SELECT owner, $2 || SUBSTR(path, CAST($3 AS INTEGER)), $6
         FROM folders WHERE owner = $1 AND path > $4 AND path < $5",
    ] {
        rewrite(statement, owner, from, to, &upper)
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Rename the file row `from` to `to` inside `tx`.
pub(crate) async fn move_file(
    tx: &mut Conn,
    owner: Owner,
    from: &FilePath,
    to: &FilePath,
) -> Result<(), VolumeError> {
    let statement = "UPDATE files SET path = $3 WHERE owner = $1 AND path = $2";
    rekey(statement, owner, from.as_str(), to.as_str())
        .execute(tx)
        .await?;
    Ok(())
}

/// Rename every file and folder at or under the folder `from` to lie
/// under `to`, inside `tx`.
pub(crate) async fn move_range(
    tx: &mut Conn,
    owner: Owner,
    from: &Prefix,
    to: &Prefix,
) -> Result<(), VolumeError> {
    let upper = upper_of(from);
    for statement in [
        "UPDATE files SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
         WHERE owner = $1 AND path >= $4 AND path < $5",
        "UPDATE folders SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
         WHERE owner = $1 AND path >= $4 AND path < $5",
    ] {
        rewrite(statement, owner, from, to, &upper)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Make `folder` a folder made on purpose, inside `tx` (a no-op if it is).
pub(crate) async fn ensure_folder(
    tx: &mut Conn,
    owner: Owner,
    folder: &Prefix,
    now_ms: i64,
) -> Result<(), VolumeError> {
    sql::query(
        "INSERT INTO folders (owner, path, created_ms) VALUES ($1, $2, $3)
         ON CONFLICT (owner, path) DO NOTHING",
    )
    .bind(owner.id())
    .bind(folder.as_str())
    .bind(now_ms)
    .execute(tx)
    .await?;
    Ok(())
}

/// Whether anything is in the folder `$2` (`$3` its upper bound) of owner
/// `$1`: a folder row, or a file or folder under it. `$N` is also how SQLite
/// names a parameter, so the text serves `rusqlite` too.
pub(crate) const FOLDER_IN_USE: &str = "SELECT CAST(CASE WHEN
         EXISTS (SELECT 1 FROM folders WHERE owner = $1 AND path >= $2 AND path < $3)
         OR EXISTS (SELECT 1 FROM files WHERE owner = $1 AND path >= $2 AND path < $3)
     THEN 1 ELSE 0 END AS BIGINT)";

/// Whether a folder row at or under `prefix` (not the root), or a file
/// under it, exists: one query, on the pool or inside a transaction.
pub(crate) async fn folder_in_use<'c>(
    on: impl Into<On<'c>>,
    owner: Owner,
    prefix: &Prefix,
) -> Result<bool, VolumeError> {
    let upper = upper_of(prefix);
    let (found,): (i64,) = sql::query_as(FOLDER_IN_USE)
        .bind(owner.id())
        .bind(prefix.as_str())
        .bind(&upper)
        .fetch_one(on)
        .await?;
    Ok(found != 0)
}

/// The folder named like `name`: `name/`.
pub(crate) fn folder_of(name: &FilePath) -> Result<Prefix, VolumeError> {
    Ok(Prefix::parse(name.as_str())?)
}

/// The upper bound of a prefix that is not the root.
pub(crate) fn upper_of(prefix: &Prefix) -> String {
    prefix.upper_bound().unwrap_or_default()
}

/// Refuse a copy or move of `from` onto itself, into itself, or onto a
/// folder that holds it (replacing which would remove the source).
pub(crate) fn refuse_nested(from: &FilePath, to: &FilePath) -> Result<(), VolumeError> {
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
