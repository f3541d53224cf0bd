//! What time and the quota take from the history: the rows the
//! operator's retention governs (their cost, the oldest first, those past
//! it) and the delete markers left hiding nothing.

use crate::db::{Conn, SqliteRow};

use super::{Kept, READ};
use crate::db::{Database, sql};
use crate::error::VolumeError;
use crate::object_lock;
use crate::types::{Owner, now_ms};

/// The bytes and rows (delete markers included) of `owner`'s kept
/// versions the retention governs, read on `conn`: what making room could
/// free at most.
pub(crate) async fn retained_usage(
    conn: &mut Conn,
    owner: Owner,
) -> Result<(u64, u64), VolumeError> {
    let (bytes, rows): (i64, i64) = sql::query_as(
        "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT), COUNT(*) FROM file_versions
         WHERE owner = $1 AND retained = 1",
    )
    .bind(owner.id())
    .fetch_one(conn)
    .await?;
    Ok((
        u64::try_from(bytes).unwrap_or_default(),
        u64::try_from(rows).unwrap_or_default(),
    ))
}

/// The oldest of `owner`'s kept versions and delete markers the retention
/// governs, up to `limit`, read on `conn`: what makes room first.
pub(crate) async fn oldest_retained(
    conn: &mut Conn,
    owner: Owner,
    limit: usize,
) -> Result<Vec<Kept>, VolumeError> {
    let unheld = object_lock::unheld(now_ms());
    Ok(sql::query_as(&format!(
        "SELECT {READ} FROM file_versions WHERE owner = $1 AND retained = 1 AND {unheld}
         ORDER BY archived_ms, seq LIMIT $2"
    ))
    .bind(owner.id())
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(conn)
    .await?)
}

/// Rows the retention governs that stopped being current before
/// `before_ms`, up to `limit`, oldest first: their owner and row.
pub(crate) async fn expired(
    db: &Database,
    before_ms: i64,
    limit: usize,
) -> Result<Vec<(Owner, Kept)>, VolumeError> {
    struct Row(Owner, Kept);
    impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for Row {
        fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
            use sqlx::Row as _;
            // The owner after the row's own columns, which decode by place.
            let owner: i64 = row.try_get(12)?;
            Ok(Self(Owner::from_id(owner), Kept::from_row(row)?))
        }
    }
    impl SqliteRow for Row {
        fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
            let owner: i64 = row.get(12)?;
            Ok(Self(Owner::from_id(owner), Kept::from_sqlite(row)?))
        }
    }
    let unheld = object_lock::unheld(now_ms());
    let rows: Vec<Row> = sql::query_as(&format!(
        "SELECT {READ}, owner FROM file_versions
         WHERE retained = 1 AND archived_ms < $1 AND {unheld}
         ORDER BY archived_ms, seq LIMIT $2"
    ))
    .bind(before_ms)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(db.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|Row(owner, kept)| (owner, kept))
        .collect())
}

/// Remove `owner`'s delete markers at `path` that hide no file any more
/// (no kept file below them), inside `tx`: what a removal below them
/// leaves dangling.
pub(crate) async fn drop_dangling_markers(
    tx: &mut Conn,
    owner: Owner,
    path: &str,
) -> Result<u64, VolumeError> {
    let oldest_file: Option<(i64,)> = sql::query_as(
        "SELECT MIN(seq) FROM file_versions WHERE owner = $1 AND path = $2 AND sha256 IS NOT NULL
         HAVING COUNT(*) > 0",
    )
    .bind(owner.id())
    .bind(path)
    .fetch_optional(&mut *tx)
    .await?;
    let below = oldest_file.map_or(i64::MAX, |(seq,)| seq);
    let removed = sql::query(
        "DELETE FROM file_versions WHERE owner = $1 AND path = $2 AND sha256 IS NULL AND seq < $3",
    )
    .bind(owner.id())
    .bind(path)
    .bind(below)
    .execute(tx)
    .await?
    .rows_affected();
    Ok(removed)
}
