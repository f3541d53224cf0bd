//! The `file_versions` table: every path's earlier versions and delete
//! markers, newest last (`seq`). A row with no sha256 is a delete marker.
//! A path's current file stays in `files` (the tree's); a version comes
//! here when a write replaces it or a delete removes it, and goes back
//! only when the version above it goes. This module alone reads and writes
//! the table: keeping, finding, listing, removing, the quota's share of it
//! and the blobs it names; `retention` what the retention and the quota's
//! room take from it.

use std::collections::HashSet;
use std::ops::Bound;

use crate::db::{Conn, SqliteRow};

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, sql};
use crate::error::VolumeError;
use crate::object_lock::{self, Paths};
use crate::tree::COLUMNS;
use crate::types::{Digest, FileMeta, NULL_VERSION, Owner, Version, new_version_id, now_ms};

mod retention;

pub(crate) use retention::{drop_dangling_markers, expired, oldest_retained, retained_usage};

/// A row of `file_versions`, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    /// Its place in the history: newer rows have larger ones.
    pub(crate) seq: i64,
    /// The file; of a delete marker only `path`, `version_id` and
    /// `modified_ms` (when the delete happened) mean anything.
    pub(crate) meta: FileMeta,
    /// A delete marker (its row has no sha256).
    pub(crate) marker: bool,
    /// When it stopped being the latest (a marker: when it was made).
    pub(crate) archived_ms: i64,
    /// Whether the operator's retention expires it (else S3's rules keep it).
    pub(crate) retained: bool,
}

impl Kept {
    /// As a [`Version`], `latest` or not.
    pub(crate) fn version(self, latest: bool) -> Version {
        if self.marker {
            Version::DeleteMarker {
                path: self.meta.path,
                version_id: self.meta.version_id,
                made_ms: self.meta.modified_ms,
                latest,
            }
        } else {
            Version::File {
                meta: self.meta,
                latest,
            }
        }
    }
}

/// The columns read, in [`Kept`]'s decoding order.
const READ: &str = "seq, path, size, sha256, blake3, content_type, created_ms, modified_ms, \
                    s3_info, version_id, archived_ms, retained";

type Columns = (
    i64,
    String,
    i64,
    Option<String>,
    Option<String>,
    String,
    i64,
    i64,
    Option<String>,
    String,
    i64,
    i64,
);

impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for Kept {
    fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        <Columns as sqlx::FromRow<'r, sqlx::any::AnyRow>>::from_row(row).map(kept)
    }
}

impl SqliteRow for Kept {
    fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        <Columns as SqliteRow>::from_sqlite(row).map(kept)
    }
}

/// A version from its columns ([`READ`]).
fn kept(columns: Columns) -> Kept {
    let (seq, path, size, sha256, blake3, content_type, created_ms, modified_ms) = (
        columns.0, columns.1, columns.2, columns.3, columns.4, columns.5, columns.6, columns.7,
    );
    let (s3_info, version_id, archived_ms, retained) =
        (columns.8, columns.9, columns.10, columns.11);
    Kept {
        seq,
        marker: sha256.is_none(),
        meta: crate::tree::file_meta((
            path,
            size,
            sha256.unwrap_or_default(),
            blake3,
            content_type,
            created_ms,
            modified_ms,
            s3_info,
            version_id,
        )),
        archived_ms,
        retained: retained != 0,
    }
}

/// The earlier versions, for `owners`' cascades: a user's go with them;
/// the open tree's go to a user who adopts it ([`adopt_in`]).
pub(crate) const OWNED: OwnedRows = OwnedRows::new("file_versions", "owner", Adopt::All);

/// Give the open tree's versions to `to` inside `tx`: a null version both
/// keep at one path takes a version id of its own first (one path has one
/// null version). How many moved.
pub(crate) async fn adopt_in(tx: &mut Conn, to: Owner) -> Result<u64, VolumeError> {
    let clashing: Vec<(i64,)> = sql::query_as(
        "SELECT seq FROM file_versions WHERE owner = 0 AND version_id = 'null' AND path IN
             (SELECT path FROM file_versions WHERE owner = $1 AND version_id = 'null')",
    )
    .bind(to.id())
    .fetch_all(&mut *tx)
    .await?;
    for (seq,) in clashing {
        sql::query("UPDATE file_versions SET version_id = $1 WHERE seq = $2")
            .bind(new_version_id())
            .bind(seq)
            .execute(&mut *tx)
            .await?;
    }
    OWNED.adopt_in(tx, to).await
}

/// Keep `meta`, a file that stops being current now, as `path`'s newest
/// earlier version, inside `tx`.
pub(crate) async fn archive(
    tx: &mut Conn,
    owner: Owner,
    meta: &FileMeta,
    retained: bool,
    now_ms: i64,
) -> Result<(), VolumeError> {
    sql::query(&format!(
        "INSERT INTO file_versions (owner, {COLUMNS}, archived_ms, retained)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    ))
    .bind(owner.id())
    .bind(meta.path.as_str())
    .bind(i64::try_from(meta.size).map_err(|_| VolumeError::TooLarge(meta.size))?)
    .bind(Some(meta.sha256.as_str()))
    .bind(meta.blake3.as_deref())
    .bind(meta.content_type.as_str())
    .bind(meta.created_ms)
    .bind(meta.modified_ms)
    .bind(meta.s3_info.as_deref())
    .bind(meta.version_id.as_str())
    .bind(now_ms)
    .bind(i64::from(retained))
    .execute(tx)
    .await?;
    Ok(())
}

/// Make a delete marker `version_id` the newest version of `path`, inside
/// `tx`.
pub(crate) async fn mark(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
    retained: bool,
    now_ms: i64,
) -> Result<(), VolumeError> {
    sql::query(&format!(
        "INSERT INTO file_versions (owner, {COLUMNS}, archived_ms, retained)
         VALUES ($1, $2, 0, NULL, NULL, '', $3, $3, NULL, $4, $3, $5)"
    ))
    .bind(owner.id())
    .bind(path)
    .bind(now_ms)
    .bind(version_id)
    .bind(i64::from(retained))
    .execute(tx)
    .await?;
    Ok(())
}

/// The version `version_id` of `path`, read on `conn`.
pub(crate) async fn get(
    conn: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
) -> Result<Option<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND path = $2 AND version_id = $3"
    ))
    .bind(owner.id())
    .bind(path)
    .bind(version_id)
    .fetch_optional(conn)
    .await?)
}

/// [`get`] inside `tx`, the row locked until it ends (PostgreSQL;
/// SQLite's writers are serialised already).
pub(crate) async fn get_locked(
    db: &Database,
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
) -> Result<Option<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND path = $2 AND version_id = $3{}",
        db.locking()
    ))
    .bind(owner.id())
    .bind(path)
    .bind(version_id)
    .fetch_optional(tx)
    .await?)
}

/// `path`'s newest kept version (a marker or a file), read on `conn`.
pub(crate) async fn newest(
    conn: &mut Conn,
    owner: Owner,
    path: &str,
) -> Result<Option<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND path = $2
         ORDER BY seq DESC LIMIT 1"
    ))
    .bind(owner.id())
    .bind(path)
    .fetch_optional(conn)
    .await?)
}

/// Every kept version of `path`, newest first, read on `conn`.
pub(crate) async fn of_path(
    conn: &mut Conn,
    owner: Owner,
    path: &str,
) -> Result<Vec<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND path = $2 ORDER BY seq DESC"
    ))
    .bind(owner.id())
    .bind(path)
    .fetch_all(conn)
    .await?)
}

/// Remove the kept row `seq` inside `tx`: the blob it named, if any.
pub(crate) async fn remove(tx: &mut Conn, seq: i64) -> Result<Option<Digest>, VolumeError> {
    let gone: Option<(Option<String>,)> =
        sql::query_as("DELETE FROM file_versions WHERE seq = $1 RETURNING sha256")
            .bind(seq)
            .fetch_optional(tx)
            .await?;
    Ok(gone
        .and_then(|(sha256,)| sha256)
        .and_then(|hex| Digest::parse(&hex).ok()))
}

/// Remove `path`'s kept null version, if it has one, inside `tx` (a
/// suspended tree's write replaces it): the blob it named.
pub(crate) async fn remove_null(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
) -> Result<Option<Digest>, VolumeError> {
    match get(tx, owner, path, NULL_VERSION).await? {
        Some(kept) => remove(tx, kept.seq).await,
        None => Ok(None),
    }
}

/// Remove every kept version of `path` older than `seq` (and `seq`
/// itself), inside `tx`: the blobs they named.
pub(crate) async fn remove_through(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    seq: i64,
) -> Result<Vec<Digest>, VolumeError> {
    let gone: Vec<(Option<String>,)> = sql::query_as(
        "DELETE FROM file_versions WHERE owner = $1 AND path = $2 AND seq <= $3
         RETURNING sha256",
    )
    .bind(owner.id())
    .bind(path)
    .bind(seq)
    .fetch_all(tx)
    .await?;
    Ok(digests(gone))
}

/// Set what S3 keeps of the kept version `version_id` of `path` inside
/// `tx`; whether there was one.
pub(crate) async fn set_s3_info(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
    version_id: &str,
    info: &str,
) -> Result<bool, VolumeError> {
    let done = sql::query(
        "UPDATE file_versions SET s3_info = $4
         WHERE owner = $1 AND path = $2 AND version_id = $3 AND sha256 IS NOT NULL",
    )
    .bind(owner.id())
    .bind(path)
    .bind(version_id)
    .bind(info)
    .execute(tx)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Move the history of `from` to `to` (a file moved), inside `tx`;
/// refused (`Locked`) while object lock holds a version of `from`, or
/// the null version of `to` this would replace.
pub(crate) async fn rename(
    tx: &mut Conn,
    owner: Owner,
    from: &str,
    to: &str,
) -> Result<(), VolumeError> {
    let now = now_ms();
    object_lock::refuse_held(tx, owner, Paths::One(from), now).await?;
    let replaced = object_lock::get(tx, owner, to, NULL_VERSION).await?;
    if let Some(reason) = replaced.refuses_removal(now, false) {
        return Err(VolumeError::Locked {
            path: to.to_owned(),
            version_id: NULL_VERSION.to_owned(),
            reason,
        });
    }
    // One path keeps one null version: the one moved in wins.
    sql::query(
        "DELETE FROM file_versions WHERE owner = $1 AND path = $3 AND version_id = 'null'
         AND EXISTS (SELECT 1 FROM file_versions
                     WHERE owner = $1 AND path = $2 AND version_id = 'null')",
    )
    .bind(owner.id())
    .bind(from)
    .bind(to)
    .execute(&mut *tx)
    .await?;
    sql::query("UPDATE file_versions SET path = $3 WHERE owner = $1 AND path = $2")
        .bind(owner.id())
        .bind(from)
        .bind(to)
        .execute(tx)
        .await?;
    Ok(())
}

/// Move the history of every path under the folder `from` (to `upper`) to
/// lie under `to`, inside `tx`; refused (`Locked`) while object lock holds
/// a version there.
pub(crate) async fn rename_range(
    tx: &mut Conn,
    owner: Owner,
    from: &str,
    to: &str,
    upper: &str,
) -> Result<(), VolumeError> {
    let within = Paths::Within { lower: from, upper };
    object_lock::refuse_held(tx, owner, within, now_ms()).await?;
    sql::query(
        "UPDATE file_versions SET path = $2 || SUBSTR(path, CAST($3 AS INTEGER))
         WHERE owner = $1 AND path >= $4 AND path < $5",
    )
    .bind(owner.id())
    .bind(to)
    .bind(i64::try_from(from.len() + 1).unwrap_or(i64::MAX))
    .bind(from)
    .bind(upper)
    .execute(tx)
    .await?;
    Ok(())
}

/// Up to `limit` kept rows of `owner` from `from` and before `upper`, in
/// path order and each path's newest first.
pub(crate) async fn scan(
    db: &Database,
    owner: Owner,
    from: Bound<&str>,
    upper: Option<&str>,
    limit: usize,
) -> Result<Vec<Kept>, VolumeError> {
    let (lower, op) = match from {
        Bound::Included(bound) => (bound, ">="),
        Bound::Excluded(bound) => (bound, ">"),
        Bound::Unbounded => ("", ">="),
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let statement = match upper {
        Some(_) => format!(
            "SELECT {READ} FROM file_versions WHERE owner = $1 AND path {op} $2 AND path < $4
             ORDER BY path, seq DESC LIMIT $3"
        ),
        None => format!(
            "SELECT {READ} FROM file_versions WHERE owner = $1 AND path {op} $2
             ORDER BY path, seq DESC LIMIT $3"
        ),
    };
    let mut query = sql::query_as(&statement)
        .bind(owner.id())
        .bind(lower)
        .bind(limit);
    if let Some(upper) = upper {
        query = query.bind(upper);
    }
    Ok(query.fetch_all(db.pool()).await?)
}

/// Up to `limit` kept rows of `path` older than `seq`, newest first.
pub(crate) async fn older_than(
    db: &Database,
    owner: Owner,
    path: &str,
    seq: i64,
    limit: usize,
) -> Result<Vec<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND path = $2 AND seq < $3
         ORDER BY seq DESC LIMIT $4"
    ))
    .bind(owner.id())
    .bind(path)
    .bind(seq)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(db.pool())
    .await?)
}

/// Up to `limit` of `owner`'s delete markers older than `before_seq`
/// (all of them: `i64::MAX`), newest first: the trash is what they hide.
pub(crate) async fn markers(
    db: &Database,
    owner: Owner,
    before_seq: i64,
    limit: usize,
) -> Result<Vec<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND sha256 IS NULL AND seq < $2
         ORDER BY seq DESC LIMIT $3"
    ))
    .bind(owner.id())
    .bind(before_seq)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(db.pool())
    .await?)
}

/// The row `seq` of `owner`, read on `conn`.
pub(crate) async fn by_seq(
    conn: &mut Conn,
    owner: Owner,
    seq: i64,
) -> Result<Option<Kept>, VolumeError> {
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND seq = $2"
    ))
    .bind(owner.id())
    .bind(seq)
    .fetch_optional(conn)
    .await?)
}

/// The bytes `owner`'s kept versions take and how many rows they are
/// (markers included), read on `conn`: their share of the quota.
pub(crate) async fn usage(conn: &mut Conn, owner: Owner) -> Result<(u64, u64), VolumeError> {
    let (bytes, rows): (i64, i64) = sql::query_as(
        "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT), COUNT(*) FROM file_versions
         WHERE owner = $1",
    )
    .bind(owner.id())
    .fetch_one(conn)
    .await?;
    Ok((
        u64::try_from(bytes).unwrap_or_default(),
        u64::try_from(rows).unwrap_or_default(),
    ))
}

/// How many kept versions name `digest`, read inside `tx` (after the
/// ledger locked the blob's row).
pub(crate) async fn references(tx: &mut Conn, digest: &Digest) -> Result<u64, VolumeError> {
    let (count,): (i64,) = sql::query_as("SELECT COUNT(*) FROM file_versions WHERE sha256 = $1")
        .bind(digest.as_str())
        .fetch_one(tx)
        .await?;
    Ok(u64::try_from(count).unwrap_or_default())
}

/// Whether `owner` keeps any version of a path from `lower` to `upper`.
pub(crate) async fn any_within(
    conn: &mut Conn,
    owner: Owner,
    lower: &str,
    upper: &str,
) -> Result<bool, VolumeError> {
    let found: Option<(i64,)> = sql::query_as(
        "SELECT seq FROM file_versions WHERE owner = $1 AND path >= $2 AND path < $3 LIMIT 1",
    )
    .bind(owner.id())
    .bind(lower)
    .bind(upper)
    .fetch_optional(conn)
    .await?;
    Ok(found.is_some())
}

/// Every digest a kept version names.
pub(crate) async fn referenced(db: &Database) -> Result<HashSet<String>, VolumeError> {
    let rows: Vec<(String,)> =
        sql::query_as("SELECT DISTINCT sha256 FROM file_versions WHERE sha256 IS NOT NULL")
            .fetch_all(db.pool())
            .await?;
    Ok(rows.into_iter().map(|(hex,)| hex).collect())
}

/// The distinct digests named by removed rows (markers name none).
fn digests(rows: Vec<(Option<String>,)>) -> Vec<Digest> {
    let mut digests: Vec<Digest> = rows
        .into_iter()
        .filter_map(|(hex,)| hex.and_then(|hex| Digest::parse(&hex).ok()))
        .collect();
    digests.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    digests.dedup();
    digests
}
