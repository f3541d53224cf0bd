//! The `files` table: one row per file, folder-collapsing paginated
//! listings. Runs on either engine of [`Database`]; a writer that names a
//! blob does so inside the transaction that locked the blob's ledger row
//! (see `ledger`).

use std::collections::HashSet;

use sqlx::{Any, Transaction};

use crate::db::Database;
use crate::path::{FilePath, Prefix};
use crate::{Digest, Entry, FileMeta, Listing, VolumeError};

const COLUMNS: &str = "path, size, sha256, content_type, created_ms, modified_ms";

#[derive(Debug, Clone)]
pub(crate) struct Index {
    db: Database,
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

/// A file row about to be written.
struct NewRow<'a> {
    path: &'a FilePath,
    size: i64,
    digest: &'a Digest,
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

    pub(crate) async fn get(&self, path: &FilePath) -> Result<Option<FileMeta>, VolumeError> {
        let row: Option<Row> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM files WHERE path = $1"))
                .bind(path.as_str())
                .fetch_optional(self.db.pool())
                .await?;
        Ok(row.map(FileMeta::from))
    }

    /// Point `path` at the blob `digest` inside `tx` (which holds the
    /// blob's ledger row), creating the row or replacing it (keeping its
    /// creation time) when `overwrite` allows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upsert(
        &self,
        tx: &mut Transaction<'static, Any>,
        path: &FilePath,
        size: u64,
        digest: &Digest,
        content_type: &str,
        overwrite: bool,
        now_ms: i64,
    ) -> Result<Replaced, VolumeError> {
        let row = NewRow {
            path,
            size: i64::try_from(size).map_err(|_| VolumeError::TooLarge(size))?,
            digest,
            content_type,
            now_ms,
        };
        let mut previous = self.locked_digest(tx, path).await?;
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
            previous = self.locked_digest(tx, path).await?;
        }
        if previous.is_some() && !overwrite {
            return Err(VolumeError::AlreadyExists(path.to_string()));
        }
        let replaced = self
            .insert(
                tx,
                &row,
                "DO UPDATE SET size = excluded.size, sha256 = excluded.sha256,
                 content_type = excluded.content_type, modified_ms = excluded.modified_ms",
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
        tx: &mut Transaction<'static, Any>,
        row: &NewRow<'_>,
        on_conflict: &str,
    ) -> Result<Option<Row>, VolumeError> {
        Ok(sqlx::query_as(&format!(
            "INSERT INTO files ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $5)
             ON CONFLICT (path) {on_conflict} RETURNING {COLUMNS}"
        ))
        .bind(row.path.as_str())
        .bind(row.size)
        .bind(row.digest.as_str())
        .bind(row.content_type)
        .bind(row.now_ms)
        .fetch_optional(&mut **tx)
        .await?)
    }

    /// The digest `path` names, its row locked until `tx` ends (PostgreSQL;
    /// SQLite's writers are serialised already).
    async fn locked_digest(
        &self,
        tx: &mut Transaction<'static, Any>,
        path: &FilePath,
    ) -> Result<Option<Digest>, VolumeError> {
        let sql = format!(
            "SELECT sha256 FROM files WHERE path = $1{}",
            self.db.locking()
        );
        let row: Option<(String,)> = sqlx::query_as(&sql)
            .bind(path.as_str())
            .fetch_optional(&mut **tx)
            .await?;
        Ok(row.and_then(|(hex,)| Digest::parse(&hex).ok()))
    }

    /// Remove `path`; returns the digest it named, or `None` if it was absent.
    pub(crate) async fn delete(&self, path: &FilePath) -> Result<Option<Digest>, VolumeError> {
        let gone: Option<(String,)> =
            sqlx::query_as("DELETE FROM files WHERE path = $1 RETURNING sha256")
                .bind(path.as_str())
                .fetch_optional(self.db.pool())
                .await?;
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
        let (upper_clause, limit_param) = if upper.is_some() {
            ("AND path < $2", "$3")
        } else {
            ("", "$2")
        };
        let sql = format!(
            "SELECT {COLUMNS} FROM files WHERE path {op} $1 {upper_clause} \
             ORDER BY path LIMIT {limit_param}"
        );
        let mut query = sqlx::query_as(&sql).bind(bound.as_str());
        if let Some(upper) = upper {
            query = query.bind(upper);
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        Ok(query.bind(limit).fetch_all(self.db.pool()).await?)
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
