//! The `bucket_configs` table: a bucket's configurations that S3 sets as
//! one document each (`kind`: `lifecycle`), as JSON, by the bucket's
//! folder (`name/`). What a document says is its own module's business
//! (`lifecycle`); this module keeps them.

use sqlx::AnyConnection;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, sql};
use crate::error::VolumeError;
use crate::types::Owner;

/// The configurations, for `owners`' cascades: a user's go with them; the
/// open tree's go to a user who adopts it, a bucket both have keeping the
/// user's.
pub(crate) const OWNED: OwnedRows = OwnedRows::new("bucket_configs", "owner", Adopt::KeepingTheirs);

fn key(bucket: &str) -> String {
    format!("{bucket}/")
}

/// `owner`'s bucket `bucket`'s document of `kind`, if it has one.
pub(crate) async fn get(
    db: &Database,
    owner: Owner,
    bucket: &str,
    kind: &str,
) -> Result<Option<String>, VolumeError> {
    let row: Option<(String,)> = sql::query_as(
        "SELECT body FROM bucket_configs WHERE owner = $1 AND path = $2 AND kind = $3",
    )
    .bind(owner.id())
    .bind(key(bucket))
    .bind(kind)
    .fetch_optional(db.pool())
    .await?;
    Ok(row.map(|(body,)| body))
}

/// Set `owner`'s bucket `bucket`'s document of `kind` inside `tx`.
pub(crate) async fn put(
    tx: &mut AnyConnection,
    owner: Owner,
    bucket: &str,
    kind: &str,
    body: &str,
) -> Result<(), VolumeError> {
    sql::query(
        "INSERT INTO bucket_configs (owner, path, kind, body) VALUES ($1, $2, $3, $4)
         ON CONFLICT (owner, path, kind) DO UPDATE SET body = excluded.body",
    )
    .bind(owner.id())
    .bind(key(bucket))
    .bind(kind)
    .bind(body)
    .execute(tx)
    .await?;
    Ok(())
}

/// Remove `owner`'s bucket `bucket`'s document of `kind` (every kind:
/// `None`, the bucket is gone) inside `tx`; whether there was one.
pub(crate) async fn delete(
    tx: &mut AnyConnection,
    owner: Owner,
    bucket: &str,
    kind: Option<&str>,
) -> Result<bool, VolumeError> {
    let done = match kind {
        Some(kind) => {
            sql::query("DELETE FROM bucket_configs WHERE owner = $1 AND path = $2 AND kind = $3")
                .bind(owner.id())
                .bind(key(bucket))
                .bind(kind)
                .execute(tx)
                .await?
        }
        None => {
            sql::query("DELETE FROM bucket_configs WHERE owner = $1 AND path = $2")
                .bind(owner.id())
                .bind(key(bucket))
                .execute(tx)
                .await?
        }
    };
    Ok(done.rows_affected() > 0)
}

/// Every bucket's document of `kind`: its owner, the bucket's name and the
/// document.
pub(crate) async fn all_of(
    db: &Database,
    kind: &str,
) -> Result<Vec<(Owner, String, String)>, VolumeError> {
    let rows: Vec<(i64, String, String)> = sql::query_as(
        "SELECT owner, path, body FROM bucket_configs WHERE kind = $1 ORDER BY owner, path",
    )
    .bind(kind)
    .fetch_all(db.pool())
    .await?;
    Ok(rows
        .into_iter()
        .map(|(owner, path, body)| {
            let bucket = path.strip_suffix('/').unwrap_or(&path).to_owned();
            (Owner::from_id(owner), bucket, body)
        })
        .collect())
}
