//! Paginated listings of a tree: files, and folders collapsed to one entry
//! each, whether they hold files or were made empty, merged from both of
//! the tree's tables.

use super::{COLUMNS, Tree};
use crate::db::sql;
use crate::error::VolumeError;
use crate::path::Prefix;
use crate::types::{Entry, FileMeta, Listing, Owner};

impl Tree {
    /// Whether any owner's tree holds the folder `prefix` (made, or
    /// holding a file): what a request without credentials naming a
    /// bucket learns of it, as S3's global bucket names tell.
    pub(crate) async fn held_by_anyone(&self, prefix: &Prefix) -> Result<bool, VolumeError> {
        let Some(upper) = prefix.upper_bound() else {
            return Ok(true);
        };
        let found: Option<(i64,)> = sql::query_as(
            "SELECT 1 FROM folders WHERE path = $1
             UNION ALL SELECT 1 FROM files WHERE path >= $1 AND path < $2 LIMIT 1",
        )
        .bind(prefix.as_str())
        .bind(upper)
        .fetch_optional(self.db().pool())
        .await?;
        Ok(found.is_some())
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
                .range::<FileMeta>("files", COLUMNS, owner, &lower, upper.as_deref(), wanted)
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
                        entries.push(Entry::File(row));
                    }
                }
            }
            if exhausted {
                return Ok((entries, false));
            }
        }
        let more = !self
            .range::<FileMeta>("files", COLUMNS, owner, &lower, upper.as_deref(), 1)
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

    /// Up to `limit` of `owner`'s files from `from` and before `upper`, in
    /// byte order of their paths, however deep: what S3's flat listings
    /// page through.
    pub(crate) async fn scan(
        &self,
        owner: Owner,
        from: std::ops::Bound<&str>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<FileMeta>, VolumeError> {
        let lower = match from {
            std::ops::Bound::Included(bound) => Lower::Inclusive(bound.to_owned()),
            std::ops::Bound::Excluded(bound) => Lower::Exclusive(bound.to_owned()),
            std::ops::Bound::Unbounded => Lower::Inclusive(String::new()),
        };
        self.range("files", COLUMNS, owner, &lower, upper, limit)
            .await
    }

    /// Up to `limit` of the folders `owner` made on purpose, from `from`
    /// and before `upper`, in byte order: their prefixes and when they
    /// were made.
    pub(crate) async fn scan_folders(
        &self,
        owner: Owner,
        from: std::ops::Bound<&str>,
        upper: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(String, i64)>, VolumeError> {
        let lower = match from {
            std::ops::Bound::Included(bound) => Lower::Inclusive(bound.to_owned()),
            std::ops::Bound::Excluded(bound) => Lower::Exclusive(bound.to_owned()),
            std::ops::Bound::Unbounded => Lower::Inclusive(String::new()),
        };
        self.range("folders", "path, created_ms", owner, &lower, upper, limit)
            .await
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
        R: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + crate::db::SqliteRow + Send + Unpin,
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
        let mut query = sql::query_as(&sql).bind(owner.id()).bind(bound.as_str());
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
