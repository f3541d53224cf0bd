//! The metadata index: one SQL row per file, in SQLite.
//!
//! Writers take SQLite's write lock at `BEGIN IMMEDIATE`, so a transaction
//! that reads then writes never fails half-way on a lock upgrade.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use crate::path::{FilePath, Prefix};
use crate::{Digest, Entry, FileMeta, Listing, VolumeError};

const COLUMNS: &str = "path, size, sha256, content_type, created_ms, modified_ms";

#[derive(Debug, Clone)]
pub(crate) struct Index {
    pool: SqlitePool,
}

#[derive(sqlx::FromRow)]
struct Row {
    path: String,
    size: i64,
    sha256: String,
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
            content_type: row.content_type,
            created_ms: row.created_ms,
            modified_ms: row.modified_ms,
        }
    }
}

/// What an upsert replaced.
pub(crate) struct Replaced {
    pub(crate) meta: FileMeta,
    /// The digest the path named before, if it existed.
    pub(crate) previous: Option<Digest>,
}

impl Index {
    pub(crate) async fn open(file: &Path) -> Result<Self, VolumeError> {
        let options = SqliteConnectOptions::new()
            .filename(file)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: a commit acknowledged to a client survives power loss.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Self { pool })
    }

    pub(crate) async fn get(&self, path: &FilePath) -> Result<Option<FileMeta>, VolumeError> {
        let row: Option<Row> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM files WHERE path = ?"))
                .bind(path.as_str())
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(FileMeta::from))
    }

    /// Point `path` at the blob `digest`, creating the row or replacing it
    /// (keeping its creation time) when `overwrite` allows.
    pub(crate) async fn upsert(
        &self,
        path: &FilePath,
        size: u64,
        digest: &Digest,
        content_type: &str,
        overwrite: bool,
        now_ms: i64,
    ) -> Result<Replaced, VolumeError> {
        let size = i64::try_from(size).map_err(|_| VolumeError::TooLarge(size))?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        let previous: Option<(String,)> = sqlx::query_as("SELECT sha256 FROM files WHERE path = ?")
            .bind(path.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        if previous.is_some() && !overwrite {
            return Err(VolumeError::AlreadyExists(path.to_string()));
        }
        let row: Row = sqlx::query_as(&format!(
            "INSERT INTO files ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?5)
             ON CONFLICT (path) DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                 content_type = excluded.content_type, modified_ms = excluded.modified_ms
             RETURNING {COLUMNS}"
        ))
        .bind(path.as_str())
        .bind(size)
        .bind(digest.as_str())
        .bind(content_type)
        .bind(now_ms)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Replaced {
            meta: row.into(),
            previous: previous.and_then(|(hex,)| Digest::parse(&hex).ok()),
        })
    }

    /// Remove `path`; returns the digest it named, or `None` if it was absent.
    pub(crate) async fn delete(&self, path: &FilePath) -> Result<Option<Digest>, VolumeError> {
        let gone: Option<(String,)> =
            sqlx::query_as("DELETE FROM files WHERE path = ? RETURNING sha256")
                .bind(path.as_str())
                .fetch_optional(&self.pool)
                .await?;
        Ok(gone.and_then(|(hex,)| Digest::parse(&hex).ok()))
    }

    /// How many files name the blob `digest`.
    pub(crate) async fn references(&self, digest: &Digest) -> Result<u64, VolumeError> {
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM files WHERE sha256 = ?")
            .bind(digest.as_str())
            .fetch_one(&self.pool)
            .await?;
        Ok(u64::try_from(count).unwrap_or_default())
    }

    /// Every digest some file names.
    pub(crate) async fn referenced(&self) -> Result<HashSet<String>, VolumeError> {
        let rows: Vec<(String,)> = sqlx::query_as("SELECT DISTINCT sha256 FROM files")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(|(hex,)| hex).collect())
    }

    /// One page of the entries directly under `prefix`: files, and folders
    /// collapsed to one entry each, in path order, strictly after `after`.
    pub(crate) async fn list(
        &self,
        prefix: &Prefix,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, VolumeError> {
        let limit = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
        let upper = prefix.upper_bound();
        let mut lower = Lower::start(prefix, after);
        let mut entries = Vec::new();

        'pages: while entries.len() < limit {
            let wanted = limit - entries.len();
            let rows = self.range(&lower, upper.as_deref(), wanted).await?;
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
                return Ok(Listing {
                    entries,
                    next_after: None,
                });
            }
        }
        let more = !self.range(&lower, upper.as_deref(), 1).await?.is_empty();
        let next_after = more
            .then(|| entries.last().map(Entry::name).map(str::to_owned))
            .flatten();
        Ok(Listing {
            entries,
            next_after,
        })
    }

    async fn range(
        &self,
        lower: &Lower,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Row>, VolumeError> {
        let (op, bound) = match lower {
            Lower::Inclusive(bound) => (">=", bound),
            Lower::Exclusive(bound) => (">", bound),
        };
        let upper_clause = if upper.is_some() { "AND path < ?" } else { "" };
        let sql = format!(
            "SELECT {COLUMNS} FROM files WHERE path {op} ? {upper_clause} ORDER BY path LIMIT ?"
        );
        let mut query = sqlx::query_as(&sql).bind(bound.as_str());
        if let Some(upper) = upper {
            query = query.bind(upper);
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(query.bind(limit).fetch_all(&self.pool).await?)
    }

    pub(crate) fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(crate) async fn close(&self) {
        self.pool.close().await;
    }
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
