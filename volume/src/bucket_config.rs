//! The `bucket_configs` table: a bucket's configurations that S3 sets as
//! one document each ([`ConfigKind`]), by the bucket's folder (`name/`).
//! What a document says is its reader's business (`lifecycle`, the S3
//! adapter's CORS, policy and tagging); this module keeps them. A CORS or
//! policy document claims its bucket's name across owners (a unique
//! index): requests without credentials find their bucket by name.

use crate::db::Conn;

use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{Database, sql};
use crate::error::VolumeError;
use crate::types::Owner;

/// The configurations, for `owners`' cascades: a user's go with them; the
/// open tree's go to a user who adopts it, a bucket both have keeping the
/// user's.
pub(crate) const OWNED: OwnedRows = OwnedRows::new("bucket_configs", "owner", Adopt::KeepingTheirs);

/// What a bucket's document configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    /// Lifecycle rules (`volume::Lifecycle`, as JSON).
    Lifecycle,
    /// CORS rules (the S3 adapter's JSON).
    Cors,
    /// A bucket policy (its JSON, as put).
    Policy,
    /// The bucket's tags (the S3 adapter's JSON).
    Tagging,
}

impl ConfigKind {
    pub(crate) fn as_db(self) -> &'static str {
        match self {
            Self::Lifecycle => "lifecycle",
            Self::Cors => "cors",
            Self::Policy => "policy",
            Self::Tagging => "tagging",
        }
    }

    /// Whether the document claims its bucket's name across owners.
    pub fn claims_the_name(self) -> bool {
        matches!(self, Self::Cors | Self::Policy)
    }
}

fn key(bucket: &str) -> String {
    format!("{bucket}/")
}

/// `owner`'s bucket `bucket`'s document of `kind`, if it has one.
pub(crate) async fn get(
    db: &Database,
    owner: Owner,
    bucket: &str,
    kind: ConfigKind,
) -> Result<Option<String>, VolumeError> {
    let row: Option<(String,)> = sql::query_as(
        "SELECT body FROM bucket_configs WHERE owner = $1 AND path = $2 AND kind = $3",
    )
    .bind(owner.id())
    .bind(key(bucket))
    .bind(kind.as_db())
    .fetch_optional(db.pool())
    .await?;
    Ok(row.map(|(body,)| body))
}

/// Set `owner`'s bucket `bucket`'s document of `kind` inside `tx`.
pub(crate) async fn put(
    tx: &mut Conn,
    owner: Owner,
    bucket: &str,
    kind: ConfigKind,
    body: &str,
) -> Result<(), VolumeError> {
    sql::query(
        "INSERT INTO bucket_configs (owner, path, kind, body) VALUES ($1, $2, $3, $4)
         ON CONFLICT (owner, path, kind) DO UPDATE SET body = excluded.body",
    )
    .bind(owner.id())
    .bind(key(bucket))
    .bind(kind.as_db())
    .bind(body)
    .execute(tx)
    .await?;
    Ok(())
}

/// Remove `owner`'s bucket `bucket`'s document of `kind` (every kind:
/// `None`, the bucket is gone) inside `tx`; whether there was one.
pub(crate) async fn delete(
    tx: &mut Conn,
    owner: Owner,
    bucket: &str,
    kind: Option<ConfigKind>,
) -> Result<bool, VolumeError> {
    let done = match kind {
        Some(kind) => {
            sql::query("DELETE FROM bucket_configs WHERE owner = $1 AND path = $2 AND kind = $3")
                .bind(owner.id())
                .bind(key(bucket))
                .bind(kind.as_db())
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
    kind: ConfigKind,
) -> Result<Vec<(Owner, String, String)>, VolumeError> {
    let rows: Vec<(i64, String, String)> = sql::query_as(
        "SELECT owner, path, body FROM bucket_configs WHERE kind = $1 ORDER BY owner, path",
    )
    .bind(kind.as_db())
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

/// The owner whose bucket `bucket` has a document of `kind` (one that
/// claims the name: at most one has), read on `conn`, and the document.
pub(crate) async fn claimed(
    conn: &mut Conn,
    bucket: &str,
    kind: ConfigKind,
) -> Result<Option<(Owner, String)>, VolumeError> {
    let row: Option<(i64, String)> = sql::query_as(
        "SELECT owner, body FROM bucket_configs WHERE path = $1 AND kind = $2 LIMIT 1",
    )
    .bind(key(bucket))
    .bind(kind.as_db())
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|(owner, body)| (Owner::from_id(owner), body)))
}
