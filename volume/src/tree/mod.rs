//! The tree of each owner: the `files` table (one row per file, naming its
//! blob by digest) and the `folders` table (folders made on purpose, so an
//! empty one exists). This module alone reads and writes both: rows,
//! usage, listings ([`listing`]) and whole-tree copies and moves as rows
//! ([`transfer`]). A writer that names a blob does so inside the
//! transaction that locked the blob's ledger row (see `ledger`).

mod listing;
pub(crate) mod transfer;

use std::collections::HashSet;
use std::sync::LazyLock;

use crate::db::{Conn, SqliteRow};
use rusqlite::OptionalExtension as _;
use sqlx::any::AnyRow;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, KEYS_PER_QUERY, WriteTx, placeholders, sql};
use crate::error::VolumeError;
use crate::path::{FilePath, Prefix};
use crate::types::{Digest, Digests, FileMeta, Owner};

/// The columns of a file row after its owner, as written and read: the
/// one list of them ([`FileMeta`] is the row read back, in this order).
pub(crate) const COLUMNS: &str =
    "path, size, sha256, blake3, content_type, created_ms, modified_ms, s3_info, version_id";

/// A file row's columns as the drivers decode them, in [`COLUMNS`]' order.
type Columns = (
    String,
    i64,
    String,
    Option<String>,
    String,
    i64,
    i64,
    Option<String>,
    String,
);

/// The one mapping from a file row (read by either driver) to its
/// [`FileMeta`].
pub(crate) fn file_meta(
    (path, size, sha256, blake3, content_type, created_ms, modified_ms, s3_info, version_id): Columns,
) -> FileMeta {
    FileMeta {
        path,
        size: u64::try_from(size).unwrap_or_default(),
        sha256,
        blake3,
        content_type,
        created_ms,
        modified_ms,
        s3_info,
        version_id,
    }
}

/// A file row read through sqlx (`SELECT {COLUMNS}`).
impl<'r> sqlx::FromRow<'r, AnyRow> for FileMeta {
    fn from_row(row: &'r AnyRow) -> Result<Self, sqlx::Error> {
        <Columns as sqlx::FromRow<'r, AnyRow>>::from_row(row).map(file_meta)
    }
}

/// A file row read through rusqlite (`SELECT {COLUMNS}`).
fn file_meta_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<FileMeta> {
    <Columns as SqliteRow>::from_sqlite(row).map(file_meta)
}

impl SqliteRow for FileMeta {
    fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        file_meta_sqlite(row)
    }
}

/// [`COLUMNS`] with the columns `replace` names replaced by the SQL it
/// gives (the others kept), comma-separated: what a copy selects.
fn columns_replacing(replace: impl Fn(&str) -> Option<&'static str>) -> String {
    COLUMNS
        .split(", ")
        .map(|column| replace(column).unwrap_or(column))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What replacing a file's content sets: every column but the path and
/// the creation time, from the row that was to be inserted.
static REPLACED: LazyLock<String> = LazyLock::new(|| {
    COLUMNS
        .split(", ")
        .filter(|column| !matches!(*column, "path" | "created_ms"))
        .map(|column| format!("{column} = excluded.{column}"))
        .collect::<Vec<_>>()
        .join(", ")
});

/// What writing a whole row over another sets: every column but the path.
static REPLACED_ALL: LazyLock<String> = LazyLock::new(|| {
    COLUMNS
        .split(", ")
        .filter(|column| *column != "path")
        .map(|column| format!("{column} = excluded.{column}"))
        .collect::<Vec<_>>()
        .join(", ")
});

/// The tree tables of one database.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    db: Database,
}

/// A file row about to be written: its owner, and one time for its
/// creation and modification.
struct NewRow<'a> {
    owner: Owner,
    path: &'a FilePath,
    size: i64,
    digest: &'a Digest,
    blake3: Option<&'a Digest>,
    content_type: &'a str,
    now_ms: i64,
    s3_info: Option<&'a str>,
    version_id: &'a str,
}

/// What an upsert replaced.
pub(crate) struct Replaced {
    pub(crate) meta: FileMeta,
    /// The file the path held before, if it existed.
    pub(crate) previous: Option<FileMeta>,
}

/// What an upsert writes besides the content: the file it may replace and
/// the version it makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Upsert<'a> {
    pub(crate) overwrite: bool,
    pub(crate) now_ms: i64,
    pub(crate) s3_info: Option<&'a str>,
    pub(crate) version_id: &'a str,
}

impl Tree {
    pub(crate) fn new(db: Database) -> Self {
        Self { db }
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// The row of `path`: on SQLite read on the caller's thread (the
    /// lookup of every GET; see `db::reader`).
    pub(crate) async fn get(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<FileMeta>, VolumeError> {
        if let Some(reader) = self.db.sync_reader() {
            return reader.read(|connection| {
                static GET: LazyLock<String> = LazyLock::new(|| {
                    format!("SELECT {COLUMNS} FROM files WHERE owner = ?1 AND path = ?2")
                });
                connection
                    .prepare_cached(&GET)?
                    .query_row((owner.id(), path.as_str()), file_meta_sqlite)
                    .optional()
            });
        }
        Ok(sql::query_as(&format!(
            "SELECT {COLUMNS} FROM files WHERE owner = $1 AND path = $2"
        ))
        .bind(owner.id())
        .bind(path.as_str())
        .fetch_optional(self.db.pool())
        .await?)
    }

    /// The row of `path`, read inside `tx` and locked until it ends
    /// (PostgreSQL; SQLite's writers are serialised already).
    pub(crate) async fn get_locked(
        &self,
        tx: &mut Conn,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<FileMeta>, VolumeError> {
        Ok(sql::query_as(&format!(
            "SELECT {COLUMNS} FROM files WHERE owner = $1 AND path = $2{}",
            self.db.locking()
        ))
        .bind(owner.id())
        .bind(path.as_str())
        .fetch_optional(&mut *tx)
        .await?)
    }

    /// Whether `owner` has a current file at `path`, read on `conn`.
    pub(crate) async fn exists_in(
        conn: &mut Conn,
        owner: Owner,
        path: &FilePath,
    ) -> Result<bool, VolumeError> {
        let found: Option<(i64,)> =
            sql::query_as("SELECT CAST(1 AS BIGINT) FROM files WHERE owner = $1 AND path = $2")
                .bind(owner.id())
                .bind(path.as_str())
                .fetch_optional(conn)
                .await?;
        Ok(found.is_some())
    }

    /// The bytes `owner`'s files take and how many there are, leaving out
    /// `except` (the path an upload is about to replace), read on `conn` (a
    /// write transaction's, to weigh a change against the quota).
    pub(crate) async fn usage(
        conn: &mut Conn,
        owner: Owner,
        except: Option<&FilePath>,
    ) -> Result<(u64, u64), VolumeError> {
        let (used, files): (i64, i64) = sql::query_as(
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT), COUNT(*) FROM files
             WHERE owner = $1 AND path <> $2",
        )
        .bind(owner.id())
        // No path is empty: nothing left out.
        .bind(except.map_or("", FilePath::as_str))
        .fetch_one(conn)
        .await?;
        Ok((
            u64::try_from(used).unwrap_or_default(),
            u64::try_from(files).unwrap_or_default(),
        ))
    }

    /// How many folders `owner` made on purpose, read on `conn`.
    pub(crate) async fn folder_count(conn: &mut Conn, owner: Owner) -> Result<u64, VolumeError> {
        let (folders,): (i64,) = sql::query_as("SELECT COUNT(*) FROM folders WHERE owner = $1")
            .bind(owner.id())
            .fetch_one(conn)
            .await?;
        Ok(u64::try_from(folders).unwrap_or_default())
    }

    /// Point `path` at the blob `digest` inside `tx` (which holds the
    /// blob's ledger row), creating the row or replacing it (keeping its
    /// creation time) when `overwrite` allows.
    pub(crate) async fn upsert(
        &self,
        tx: &mut Conn,
        owner: Owner,
        path: &FilePath,
        (size, digests, content_type): (u64, &Digests, &str),
        how: Upsert<'_>,
    ) -> Result<Replaced, VolumeError> {
        let Upsert {
            overwrite,
            now_ms,
            s3_info,
            version_id,
        } = how;
        let row = NewRow {
            s3_info,
            version_id,
            owner,
            path,
            size: i64::try_from(size).map_err(|_| VolumeError::TooLarge(size))?,
            digest: &digests.sha256,
            blake3: digests.blake3.as_ref(),
            content_type,
            now_ms,
        };
        let mut previous = self.get_locked(tx, owner, path).await?;
        if previous.is_none() {
            // A new path. The lock above took nothing (there was no row),
            // so another writer may be creating it right now: insert only
            // if it is still new.
            if let Some(created) = self.insert(tx, &row, "DO NOTHING").await? {
                return Ok(Replaced {
                    meta: created,
                    previous: None,
                });
            }
            // Created meanwhile: lock it, then replace it if allowed.
            previous = self.get_locked(tx, owner, path).await?;
        }
        if previous.is_some() && !overwrite {
            return Err(VolumeError::AlreadyExists(path.to_string()));
        }
        let replaced = self
            .insert(tx, &row, &format!("DO UPDATE SET {}", *REPLACED))
            .await?
            .ok_or_else(|| VolumeError::NotFound(path.to_string()))?;
        Ok(Replaced {
            meta: replaced,
            previous,
        })
    }

    /// Set `s3_info` of `owner`'s current file at `path` if it is version
    /// `version_id`, inside `tx`; whether it was.
    pub(crate) async fn set_s3_info_of_version(
        tx: &mut Conn,
        owner: Owner,
        path: &FilePath,
        version_id: &str,
        info: &str,
    ) -> Result<bool, VolumeError> {
        let done = sql::query(
            "UPDATE files SET s3_info = $4 WHERE owner = $1 AND path = $2 AND version_id = $3",
        )
        .bind(owner.id())
        .bind(path.as_str())
        .bind(version_id)
        .bind(info)
        .execute(tx)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Set what S3 keeps of `owner`'s file `path`, if it still holds the
    /// content `sha256`; whether it did.
    pub(crate) async fn set_s3_info(
        &self,
        owner: Owner,
        path: &FilePath,
        sha256: &str,
        info: &str,
    ) -> Result<bool, VolumeError> {
        let updated = self
            .db
            .write(async |tx: &mut WriteTx| {
                Ok(sql::query(
                    "UPDATE files SET s3_info = $4 WHERE owner = $1 AND path = $2 AND sha256 = $3",
                )
                .bind(owner.id())
                .bind(path.as_str())
                .bind(sha256)
                .bind(info)
                .execute(&mut **tx)
                .await?
                .rows_affected())
            })
            .await?;
        Ok(updated == 1)
    }

    /// `INSERT` `row`, doing `on_conflict` if the path exists; the row as
    /// written, if one was.
    async fn insert(
        &self,
        tx: &mut Conn,
        row: &NewRow<'_>,
        on_conflict: &str,
    ) -> Result<Option<FileMeta>, VolumeError> {
        Ok(sql::query_as(&format!(
            "INSERT INTO files (owner, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9)
             ON CONFLICT (owner, path) {on_conflict} RETURNING {COLUMNS}"
        ))
        .bind(row.owner.id())
        .bind(row.path.as_str())
        .bind(row.size)
        .bind(row.digest.as_str())
        .bind(row.blake3.map(Digest::as_str))
        .bind(row.content_type)
        .bind(row.now_ms)
        .bind(row.s3_info)
        .bind(row.version_id)
        .fetch_optional(&mut *tx)
        .await?)
    }

    /// Remove the file `path` inside `tx`; its row, or `None` if it was
    /// absent.
    pub(crate) async fn delete_file(
        tx: &mut Conn,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<FileMeta>, VolumeError> {
        Ok(sql::query_as(&format!(
            "DELETE FROM files WHERE owner = $1 AND path = $2 RETURNING {COLUMNS}"
        ))
        .bind(owner.id())
        .bind(path.as_str())
        .fetch_optional(tx)
        .await?)
    }

    /// Remove every file and folder at or under `prefix` (from `prefix` to
    /// its `upper` bound) inside `tx`: the rows of the removed files, and
    /// how many files and folders went.
    pub(crate) async fn delete_range(
        tx: &mut Conn,
        owner: Owner,
        prefix: &str,
        upper: &str,
    ) -> Result<(Vec<FileMeta>, u64), VolumeError> {
        let files: Vec<FileMeta> = sql::query_as(&format!(
            "DELETE FROM files WHERE owner = $1 AND path >= $2 AND path < $3 RETURNING {COLUMNS}"
        ))
        .bind(owner.id())
        .bind(prefix)
        .bind(upper)
        .fetch_all(&mut *tx)
        .await?;
        let folders =
            sql::query("DELETE FROM folders WHERE owner = $1 AND path >= $2 AND path < $3")
                .bind(owner.id())
                .bind(prefix)
                .bind(upper)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        let removed = files.len() as u64 + folders;
        Ok((files, removed))
    }

    /// Write `meta` as `owner`'s current file at its path inside `tx`,
    /// replacing the row there (the caller kept or released it): a
    /// version restored, or a row copied.
    pub(crate) async fn put_row(
        tx: &mut Conn,
        owner: Owner,
        meta: &FileMeta,
    ) -> Result<(), VolumeError> {
        sql::query(&format!(
            "INSERT INTO files (owner, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (owner, path) DO UPDATE SET {}",
            *REPLACED_ALL
        ))
        .bind(owner.id())
        .bind(meta.path.as_str())
        .bind(i64::try_from(meta.size).map_err(|_| VolumeError::TooLarge(meta.size))?)
        .bind(meta.sha256.as_str())
        .bind(meta.blake3.as_deref())
        .bind(meta.content_type.as_str())
        .bind(meta.created_ms)
        .bind(meta.modified_ms)
        .bind(meta.s3_info.as_deref())
        .bind(meta.version_id.as_str())
        .execute(tx)
        .await?;
        Ok(())
    }

    /// Every digest some file names.
    pub(crate) async fn referenced(&self) -> Result<HashSet<String>, VolumeError> {
        let rows: Vec<(String,)> = sql::query_as("SELECT DISTINCT sha256 FROM files")
            .fetch_all(self.db.pool())
            .await?;
        Ok(rows.into_iter().map(|(hex,)| hex).collect())
    }

    /// How many files name `digest`, read inside `tx` (after the ledger
    /// locked the blob's row).
    pub(crate) async fn references(tx: &mut Conn, digest: &Digest) -> Result<u64, VolumeError> {
        let (count,): (i64,) = sql::query_as("SELECT COUNT(*) FROM files WHERE sha256 = $1")
            .bind(digest.as_str())
            .fetch_one(tx)
            .await?;
        Ok(u64::try_from(count).unwrap_or_default())
    }

    /// Make the folder `prefix` (not the root) inside `tx`; whether it was
    /// new.
    pub(crate) async fn make_folder(
        tx: &mut Conn,
        owner: Owner,
        prefix: &Prefix,
        now_ms: i64,
    ) -> Result<bool, VolumeError> {
        let made = sql::query(
            "INSERT INTO folders (owner, path, created_ms) VALUES ($1, $2, $3)
             ON CONFLICT (owner, path) DO NOTHING",
        )
        .bind(owner.id())
        .bind(prefix.as_str())
        .bind(now_ms)
        .execute(tx)
        .await?
        .rows_affected();
        Ok(made > 0)
    }

    /// When the folder `prefix` was made on purpose, if it was.
    pub(crate) async fn folder_made(
        &self,
        owner: Owner,
        prefix: &Prefix,
    ) -> Result<Option<i64>, VolumeError> {
        let made: Option<(i64,)> =
            sql::query_as("SELECT created_ms FROM folders WHERE owner = $1 AND path = $2")
                .bind(owner.id())
                .bind(prefix.as_str())
                .fetch_optional(self.db.pool())
                .await?;
        Ok(made.map(|(created_ms,)| created_ms))
    }

    /// When the folders among `keys` that were made on purpose were made
    /// (a folder that only holds files has no date), keyed by folder.
    pub(crate) async fn folders_made(
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
            let mut query = sql::query_as::<(String, i64)>(&sql).bind(owner.id());
            for key in chunk {
                query = query.bind(key);
            }
            made.extend(query.fetch_all(self.db.pool()).await?);
        }
        Ok(made)
    }

    /// Forget that the folder `prefix` was made on purpose, inside `tx`
    /// (what is in it stays); whether it had been.
    pub(crate) async fn unmake_folder(
        tx: &mut Conn,
        owner: Owner,
        prefix: &Prefix,
    ) -> Result<bool, VolumeError> {
        let removed = sql::query("DELETE FROM folders WHERE owner = $1 AND path = $2")
            .bind(owner.id())
            .bind(prefix.as_str())
            .execute(tx)
            .await?
            .rows_affected();
        Ok(removed > 0)
    }

    /// Give the open tree's files to `to` inside `tx`, unless `to` holds a
    /// file at one of the same paths (`AlreadyExists`); how many moved.
    pub(crate) async fn adopt_files_in(tx: &mut Conn, to: Owner) -> Result<u64, VolumeError> {
        let clash: Option<(String,)> = sql::query_as(
            "SELECT path FROM files WHERE owner = 0 AND path IN
                 (SELECT path FROM files WHERE owner = $1) LIMIT 1",
        )
        .bind(to.id())
        .fetch_optional(&mut *tx)
        .await?;
        if let Some((path,)) = clash {
            return Err(VolumeError::AlreadyExists(path));
        }
        FILES.adopt_in(tx, to).await
    }
}

/// The files, for `owners`' cascades: a user's go with them (the next
/// garbage collection releases the blobs they named); the open tree's go
/// to a user who adopts it, through [`Tree::adopt_files_in`], which first
/// refuses a path both hold.
pub(crate) const FILES: OwnedRows = OwnedRows::new("files", "owner", Adopt::All);

/// The folders made on purpose, for `owners`' cascades: a user's go with
/// them; the open tree's go to a user who adopts it, a folder both have
/// staying the user's.
pub(crate) const FOLDERS: OwnedRows = OwnedRows::new("folders", "owner", Adopt::KeepingTheirs);
