//! The `files` table: one row per file, folder-collapsing paginated
//! listings. Runs on either engine of [`Database`]; a writer that names a
//! blob does so inside the transaction that locked the blob's ledger row
//! (see `ledger`).

use std::collections::HashSet;

use crate::db::{Database, WriteTx};
use crate::path::{FilePath, Prefix};
use crate::{Digest, Digests, Entry, FileMeta, Listing, Owner, VolumeError};

const COLUMNS: &str = "path, size, sha256, blake3, content_type, created_ms, modified_ms";

#[derive(Debug, Clone)]
pub(crate) struct Index {
    db: Database,
}

#[derive(sqlx::FromRow)]
struct Row {
    path: String,
    size: i64,
    sha256: String,
    blake3: Option<String>,
    content_type: String,
    created_ms: i64,
    modified_ms: i64,
}

impl From<Row> for FileMeta {
    fn from(row: Row) -> Self {
        Self {
            path: row.path,
            size: u64::try_from(row.size).unwrap_or_default(),
            sha256: row.sha256,
            blake3: row.blake3,
            content_type: row.content_type,
            created_ms: row.created_ms,
            modified_ms: row.modified_ms,
        }
    }
}

/// A file row about to be written.
struct NewRow<'a> {
    owner: Owner,
    path: &'a FilePath,
    size: i64,
    digest: &'a Digest,
    blake3: Option<&'a Digest>,
    content_type: &'a str,
    now_ms: i64,
}

/// What an upsert replaced.
pub(crate) struct Replaced {
    pub(crate) meta: FileMeta,
    /// The digest the path named before, if it existed.
    pub(crate) previous: Option<Digest>,
}

impl Index {
    pub(crate) fn new(db: Database) -> Self {
        Self { db }
    }

    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    pub(crate) async fn get(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<FileMeta>, VolumeError> {
        let row: Option<Row> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM files WHERE owner = $1 AND path = $2"
        ))
        .bind(owner.id())
        .bind(path.as_str())
        .fetch_optional(self.db.pool())
        .await?;
        Ok(row.map(FileMeta::from))
    }

    /// The row of `path`, read inside `tx` and locked until it ends
    /// (PostgreSQL; SQLite's writers are serialised already).
    pub(crate) async fn get_locked(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<FileMeta>, VolumeError> {
        let row: Option<Row> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM files WHERE owner = $1 AND path = $2{}",
            self.db.locking()
        ))
        .bind(owner.id())
        .bind(path.as_str())
        .fetch_optional(&mut **tx)
        .await?;
        Ok(row.map(FileMeta::from))
    }

    /// The bytes `owner`'s files take, leaving out `except` (the path an
    /// upload is about to replace), read inside the write transaction `tx`.
    pub(crate) async fn usage_except(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        except: &FilePath,
    ) -> Result<u64, VolumeError> {
        let (used,): (i64,) = sqlx::query_as(
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM files
             WHERE owner = $1 AND path <> $2",
        )
        .bind(owner.id())
        .bind(except.as_str())
        .fetch_one(&mut **tx)
        .await?;
        Ok(u64::try_from(used).unwrap_or_default())
    }

    /// Point `path` at the blob `digest` inside `tx` (which holds the
    /// blob's ledger row), creating the row or replacing it (keeping its
    /// creation time) when `overwrite` allows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        path: &FilePath,
        size: u64,
        digests: &Digests,
        content_type: &str,
        overwrite: bool,
        now_ms: i64,
    ) -> Result<Replaced, VolumeError> {
        let row = NewRow {
            owner,
            path,
            size: i64::try_from(size).map_err(|_| VolumeError::TooLarge(size))?,
            digest: &digests.sha256,
            blake3: digests.blake3.as_ref(),
            content_type,
            now_ms,
        };
        let mut previous = self.locked_digest(tx, owner, path).await?;
        if previous.is_none() {
            // A new path. The lock above took nothing (there was no row),
            // so another writer may be creating it right now: insert only
            // if it is still new.
            if let Some(created) = self.insert(tx, &row, "DO NOTHING").await? {
                return Ok(Replaced {
                    meta: created.into(),
                    previous: None,
                });
            }
            // Created meanwhile: lock it, then replace it if allowed.
            previous = self.locked_digest(tx, owner, path).await?;
        }
        if previous.is_some() && !overwrite {
            return Err(VolumeError::AlreadyExists(path.to_string()));
        }
        let replaced = self
            .insert(
                tx,
                &row,
                "DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                 blake3 = excluded.blake3, content_type = excluded.content_type,
                 modified_ms = excluded.modified_ms",
            )
            .await?
            .ok_or_else(|| VolumeError::NotFound(path.to_string()))?;
        Ok(Replaced {
            meta: replaced.into(),
            previous,
        })
    }

    /// `INSERT` `row`, doing `on_conflict` if the path exists; the row as
    /// written, if one was.
    async fn insert(
        &self,
        tx: &mut WriteTx,
        row: &NewRow<'_>,
        on_conflict: &str,
    ) -> Result<Option<Row>, VolumeError> {
        Ok(sqlx::query_as(&format!(
            "INSERT INTO files (owner, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
             ON CONFLICT (owner, path) {on_conflict} RETURNING {COLUMNS}"
        ))
        .bind(row.owner.id())
        .bind(row.path.as_str())
        .bind(row.size)
        .bind(row.digest.as_str())
        .bind(row.blake3.map(Digest::as_str))
        .bind(row.content_type)
        .bind(row.now_ms)
        .fetch_optional(&mut **tx)
        .await?)
    }

    /// The digest `path` names, its row locked until `tx` ends (PostgreSQL;
    /// SQLite's writers are serialised already).
    async fn locked_digest(
        &self,
        tx: &mut WriteTx,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<Digest>, VolumeError> {
        let sql = format!(
            "SELECT sha256 FROM files WHERE owner = $1 AND path = $2{}",
            self.db.locking()
        );
        let row: Option<(String,)> = sqlx::query_as(&sql)
            .bind(owner.id())
            .bind(path.as_str())
            .fetch_optional(&mut **tx)
            .await?;
        Ok(row.and_then(|(hex,)| Digest::parse(&hex).ok()))
    }

    /// Remove `path`; returns the digest it named, or `None` if it was absent.
    pub(crate) async fn delete(
        &self,
        owner: Owner,
        path: &FilePath,
    ) -> Result<Option<Digest>, VolumeError> {
        // In a write transaction: on SQLite that is this process's turn to
        // write, rather than the busy handler's race against the writers
        // that wait their turn.
        let mut tx = self.db.begin_write().await?;
        let gone: Option<(String,)> =
            sqlx::query_as("DELETE FROM files WHERE owner = $1 AND path = $2 RETURNING sha256")
                .bind(owner.id())
                .bind(path.as_str())
                .fetch_optional(&mut *tx)
                .await?;
        if gone.is_some() {
            // What WebDAV kept about the file goes with it.
            for table in ["dav_properties", "dav_locks"] {
                sqlx::query(&format!(
                    "DELETE FROM {table} WHERE owner = $1 AND path = $2"
                ))
                .bind(owner.id())
                .bind(path.as_str())
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(gone.and_then(|(hex,)| Digest::parse(&hex).ok()))
    }

    /// Every digest some file names.
    pub(crate) async fn referenced(&self) -> Result<HashSet<String>, VolumeError> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT DISTINCT sha256 FROM files")
            .fetch_all(self.db.pool())
            .await?;
        Ok(rows.into_iter().map(|(hex,)| hex).collect())
    }

    /// One page of the entries directly under `prefix`: files, and folders
    /// collapsed to one entry each (whether they hold files or were made
    /// empty), in path order, strictly after `after`.
    pub(crate) async fn list(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, VolumeError> {
        let limit = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
        let (files, more_files) = self.list_files(owner, prefix, after, limit).await?;
        let (folders, more_folders) = self.list_folders(owner, prefix, after, limit).await?;
        // Both are sorted and at most `limit` long: merge them, a folder
        // that holds files and was made on purpose appearing once.
        let mut entries: Vec<Entry> = Vec::with_capacity(files.len() + folders.len());
        let (mut files, mut folders) =
            (files.into_iter().peekable(), folders.into_iter().peekable());
        loop {
            let next = match (files.peek(), folders.peek()) {
                (Some(file), Some(folder)) if folder.as_str() < file.name() => {
                    folders.next().map(Entry::Folder)
                }
                (Some(file), Some(folder)) if folder.as_str() == file.name() => {
                    folders.next();
                    files.next()
                }
                (Some(_), _) => files.next(),
                (None, Some(_)) => folders.next().map(Entry::Folder),
                (None, None) => break,
            };
            entries.extend(next);
        }
        let more = if entries.len() > limit {
            entries.truncate(limit);
            true
        } else {
            more_files || more_folders
        };
        let next_after = more
            .then(|| entries.last().map(Entry::name).map(str::to_owned))
            .flatten();
        Ok(Listing {
            entries,
            next_after,
        })
    }

    /// Up to `limit` entries under `prefix` from the files (a folder for
    /// every sub-path), and whether there are more.
    async fn list_files(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<Entry>, bool), VolumeError> {
        let upper = prefix.upper_bound();
        let mut lower = Lower::start(prefix, after);
        let mut entries = Vec::new();

        'pages: while entries.len() < limit {
            let wanted = limit - entries.len();
            let rows = self
                .range::<Row>("files", COLUMNS, owner, &lower, upper.as_deref(), wanted)
                .await?;
            let exhausted = rows.len() < wanted;
            for row in rows {
                let rest = &row.path[prefix.as_str().len()..];
                match rest.find('/') {
                    Some(slash) => {
                        // A folder: one entry, then skip everything inside it.
                        let folder = format!("{}{}", prefix.as_str(), &rest[..=slash]);
                        lower = Lower::past_folder(&folder);
                        entries.push(Entry::Folder(folder));
                        continue 'pages;
                    }
                    None => {
                        lower = Lower::Exclusive(row.path.clone());
                        entries.push(Entry::File(row.into()));
                    }
                }
            }
            if exhausted {
                return Ok((entries, false));
            }
        }
        let more = !self
            .range::<Row>("files", COLUMNS, owner, &lower, upper.as_deref(), 1)
            .await?
            .is_empty();
        Ok((entries, more))
    }

    /// Up to `limit` folders directly under `prefix` from the folders made
    /// on purpose (a deeper one shows as its top folder here), and whether
    /// there are more.
    async fn list_folders(
        &self,
        owner: Owner,
        prefix: &Prefix,
        after: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<String>, bool), VolumeError> {
        let upper = prefix.upper_bound();
        let mut lower = match Lower::start(prefix, after) {
            // The prefix's own row is not an entry under it.
            Lower::Inclusive(bound) if bound == prefix.as_str() => Lower::Exclusive(bound),
            other => other,
        };
        let mut folders = Vec::new();
        while folders.len() < limit {
            let Some(path) = self.folder_after(owner, &lower, upper.as_deref()).await? else {
                return Ok((folders, false));
            };
            let rest = &path[prefix.as_str().len()..];
            let slash = rest.find('/').unwrap_or(rest.len().saturating_sub(1));
            let folder = format!("{}{}", prefix.as_str(), &rest[..=slash]);
            lower = Lower::past_folder(&folder);
            folders.push(folder);
        }
        let more = self
            .folder_after(owner, &lower, upper.as_deref())
            .await?
            .is_some();
        Ok((folders, more))
    }

    /// The first folder row past `lower` and before `upper`.
    async fn folder_after(
        &self,
        owner: Owner,
        lower: &Lower,
        upper: Option<&str>,
    ) -> Result<Option<String>, VolumeError> {
        let mut rows: Vec<(String,)> = self
            .range("folders", "path", owner, lower, upper, 1)
            .await?;
        Ok(rows.pop().map(|(path,)| path))
    }

    /// Make the folder `prefix` (not the root); whether it was new.
    pub(crate) async fn make_folder(
        &self,
        owner: Owner,
        prefix: &Prefix,
        now_ms: i64,
    ) -> Result<bool, VolumeError> {
        let made = sqlx::query(
            "INSERT INTO folders (owner, path, created_ms) VALUES ($1, $2, $3)
             ON CONFLICT (owner, path) DO NOTHING",
        )
        .bind(owner.id())
        .bind(prefix.as_str())
        .bind(now_ms)
        .execute(self.db.pool())
        .await?;
        Ok(made.rows_affected() > 0)
    }

    /// Remove everything under `prefix` (and its own row) in one
    /// transaction: the digests the removed files named, and how many
    /// files and folders went.
    pub(crate) async fn delete_tree(
        &self,
        owner: Owner,
        prefix: &Prefix,
    ) -> Result<(Vec<Digest>, u64), VolumeError> {
        let upper = prefix
            .upper_bound()
            .ok_or_else(|| VolumeError::NotFound("the root folder".into()))?;
        let mut tx = self.db.begin_write().await?;
        let files: Vec<(String,)> = sqlx::query_as(
            "DELETE FROM files WHERE owner = $1 AND path >= $2 AND path < $3 RETURNING sha256",
        )
        .bind(owner.id())
        .bind(prefix.as_str())
        .bind(&upper)
        .fetch_all(&mut *tx)
        .await?;
        let folders =
            sqlx::query("DELETE FROM folders WHERE owner = $1 AND path >= $2 AND path < $3")
                .bind(owner.id())
                .bind(prefix.as_str())
                .bind(&upper)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        for table in ["dav_properties", "dav_locks"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE owner = $1 AND path >= $2 AND path < $3"
            ))
            .bind(owner.id())
            .bind(prefix.as_str())
            .bind(&upper)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        let removed = files.len() as u64 + folders;
        Ok((digests(files), removed))
    }

    /// Up to `limit` rows (`columns` of `table`) of `owner`'s paths past
    /// `lower` and before `upper`, in path order: the one range query both
    /// listings page with.
    async fn range<R>(
        &self,
        table: &str,
        columns: &str,
        owner: Owner,
        lower: &Lower,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<R>, VolumeError>
    where
        R: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let (op, bound) = match lower {
            Lower::Inclusive(bound) => (">=", bound),
            Lower::Exclusive(bound) => (">", bound),
        };
        let (upper_clause, limit_param) = if upper.is_some() {
            ("AND path < $3", "$4")
        } else {
            ("", "$3")
        };
        let sql = format!(
            "SELECT {columns} FROM {table} WHERE owner = $1 AND path {op} $2 {upper_clause} \
             ORDER BY path LIMIT {limit_param}"
        );
        let mut query = sqlx::query_as(&sql).bind(owner.id()).bind(bound.as_str());
        if let Some(upper) = upper {
            query = query.bind(upper);
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(query.bind(limit).fetch_all(self.db.pool()).await?)
    }
}

/// The distinct digests named by removed rows (`RETURNING sha256`).
pub(crate) fn digests(rows: Vec<(String,)>) -> Vec<Digest> {
    let mut digests: Vec<Digest> = rows
        .into_iter()
        .filter_map(|(hex,)| Digest::parse(&hex).ok())
        .collect();
    digests.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    digests.dedup();
    digests
}

/// Where the next page of a listing starts.
enum Lower {
    Inclusive(String),
    Exclusive(String),
}

impl Lower {
    fn start(prefix: &Prefix, after: Option<&str>) -> Self {
        match after {
            Some(after) if after > prefix.as_str() => {
                if after.ends_with('/') {
                    Self::past_folder(after)
                } else {
                    Self::Exclusive(after.to_owned())
                }
            }
            _ => Self::Inclusive(prefix.as_str().to_owned()),
        }
    }

    /// Just past everything inside `folder` (which ends with `/`).
    fn past_folder(folder: &str) -> Self {
        let without_slash = folder.strip_suffix('/').unwrap_or(folder);
        Self::Inclusive(format!("{without_slash}0"))
    }
}
