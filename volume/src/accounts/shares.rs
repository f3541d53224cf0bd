//! Share links (the `shares` table): a file of its owner's tree, readable
//! by anyone with the link until it expires or is revoked. Each costs an
//! entry's overhead against its owner's quota (`quota` weighs a new one,
//! then records it with [`insert_in`]).

use crate::db::Conn;

use super::{Accounts, Share};
use crate::db::owned::{Adopt, OwnedRows};
use crate::db::{WriteTx, sql};
use crate::error::VolumeError;
use crate::path::FilePath;
use crate::types::{Owner, now_ms};

impl Accounts {
    pub async fn share(&self, id: &str) -> Result<Option<Share>, VolumeError> {
        let row: Option<(String, i64, String, i64, Option<i64>)> = sql::query_as(
            "SELECT id, owner, path, file_created_ms, expires_ms FROM shares WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(self.db.pool())
        .await?;
        Ok(
            row.map(|(id, owner, path, file_created_ms, expires_ms)| Share {
                id,
                owner: Owner::from_id(owner),
                path,
                file_created_ms,
                expires_ms,
            }),
        )
    }

    /// Revoke `owner`'s share link `id`; whether there was one.
    pub async fn revoke_share(&self, id: &str, owner: Owner) -> Result<bool, VolumeError> {
        let done = sql::query("DELETE FROM shares WHERE id = $1 AND owner = $2")
            .bind(id)
            .bind(owner.id())
            .execute(self.db.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// How many share links `owner` has, read on `conn` (each costs an entry's
/// overhead against their quota).
pub(crate) async fn share_count(conn: &mut Conn, owner: Owner) -> Result<u64, VolumeError> {
    let (shares,): (i64,) = sql::query_as("SELECT COUNT(*) FROM shares WHERE owner = $1")
        .bind(owner.id())
        .fetch_one(conn)
        .await?;
    Ok(u64::try_from(shares).unwrap_or_default())
}

/// Record, in `tx`, a share link `id` for `owner`'s `path` (the caller
/// weighs it against the quota first).
pub(crate) async fn insert_in(
    tx: &mut WriteTx,
    id: &str,
    owner: Owner,
    path: &FilePath,
    file_created_ms: i64,
    expires_ms: Option<i64>,
) -> Result<(), VolumeError> {
    sql::query(
        "INSERT INTO shares (id, owner, path, file_created_ms, expires_ms, created_ms)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(owner.id())
    .bind(path.as_str())
    .bind(file_created_ms)
    .bind(expires_ms)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The share links, for `owners`' cascades: a user's go with them; the
/// open tree's all go to a user who adopts it.
pub(crate) const OWNED: OwnedRows = OwnedRows::new("shares", "owner", Adopt::All);
