//! The blob ledger: the `blobs` table, one row per blob the store holds,
//! `stored` or `deleting`. It is what makes reference counting safe across
//! gateways: every transaction that makes a file row name a digest first
//! locks that digest's ledger row and finds it `stored`, and a blob is
//! removed only after a transaction that holds the same lock saw no file
//! naming it and marked it `deleting`. So an upload on one gateway and the
//! removal of the last reference on another serialise on one row, in
//! PostgreSQL as in SQLite. A `deleting` row carries its claim: the stamp
//! and the claimant (the remover's data directory id), so that a gateway
//! restarted on the same directory finds the removals its last run left.

use rusqlite::OptionalExtension as _;

use crate::blobs::Packed;
use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;
use crate::types::Digest;

/// A ledger row's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlobState {
    /// Complete in the blob store; file rows may name it.
    Stored,
    /// Being removed since `since_ms`; nothing may name it until the row is
    /// gone and the blob written again.
    Deleting { since_ms: i64 },
}

impl BlobState {
    fn from_row(state: &str, changed_ms: i64) -> Self {
        match state {
            "stored" => Self::Stored,
            _ => Self::Deleting {
                since_ms: changed_ms,
            },
        }
    }
}

/// `digest`'s state without a lock (a hint: decide under [`lock`]).
pub(crate) async fn peek(db: &Database, digest: &Digest) -> Result<Option<BlobState>, VolumeError> {
    if let Some(reader) = db.sync_reader() {
        // Every upload asks this first: on the caller's thread (`db::reader`).
        let row = reader.read(|connection| {
            connection
                .prepare_cached("SELECT state, changed_ms FROM blobs WHERE sha256 = ?1")?
                .query_row([digest.as_str()], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
                })
                .optional()
        })?;
        return Ok(row.map(|(state, changed)| BlobState::from_row(&state, changed)));
    }
    let row: Option<(String, i64)> =
        sql::query_as("SELECT state, changed_ms FROM blobs WHERE sha256 = $1")
            .bind(digest.as_str())
            .fetch_optional(db.pool())
            .await?;
    Ok(row.map(|(state, changed)| BlobState::from_row(&state, changed)))
}

/// `digest`'s state, its row locked until `tx` ends.
pub(crate) async fn lock(
    db: &Database,
    tx: &mut WriteTx,
    digest: &Digest,
) -> Result<Option<BlobState>, VolumeError> {
    let sql = format!(
        "SELECT state, changed_ms FROM blobs WHERE sha256 = $1{}",
        db.locking()
    );
    let row: Option<(String, i64)> = sql::query_as(&sql)
        .bind(digest.as_str())
        .fetch_optional(&mut **tx)
        .await?;
    Ok(row.map(|(state, changed)| BlobState::from_row(&state, changed)))
}

/// Insert `digest`'s row as stored (packed at `packed`, if it is); `false`
/// if a row appeared meanwhile (another process's) or `packed`'s segment
/// was retired, in which case nothing changed.
pub(crate) async fn insert_stored(
    tx: &mut WriteTx,
    digest: &Digest,
    now_ms: i64,
    packed: Option<Packed>,
) -> Result<bool, VolumeError> {
    insert(tx, digest, "stored", now_ms, None, packed).await
}

/// Insert `digest`'s row as being removed, claimed by `claimant` at
/// `now_ms` (a blob the ledger did not know); `false` if a row appeared
/// meanwhile, in which case nothing changed.
pub(crate) async fn insert_deleting(
    tx: &mut WriteTx,
    digest: &Digest,
    claimant: &str,
    now_ms: i64,
) -> Result<bool, VolumeError> {
    insert(tx, digest, "deleting", now_ms, Some(claimant), None).await
}

async fn insert(
    tx: &mut WriteTx,
    digest: &Digest,
    state: &str,
    now_ms: i64,
    claimant: Option<&str>,
    packed: Option<Packed>,
) -> Result<bool, VolumeError> {
    // A packed blob's row only while its segment is not retired (see
    // `packing`): checked in the same statement, not one more.
    let inserted = sql::query(
        "INSERT INTO blobs (sha256, state, changed_ms, claimant, segment, segment_offset, packed_len)
         SELECT $1, $2, $3, $4, $5, $6, $7
         WHERE NOT EXISTS (SELECT 1 FROM retired_segments WHERE id = $5)
         ON CONFLICT (sha256) DO NOTHING",
    )
    .bind(digest.as_str())
    .bind(state)
    .bind(now_ms)
    .bind(claimant)
    .bind(packed.map(|packed| packed.segment))
    .bind(packed.map(|packed| packed.offset))
    .bind(packed.map(|packed| packed.len))
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// Mark `digest` (locked) as being removed by `claimant`, stamped
/// `now_ms`: stamp and claimant are the removal's claim, which [`forget`]
/// checks. A row already `deleting` is claimed anew (a take-over).
pub(crate) async fn mark_deleting(
    tx: &mut WriteTx,
    digest: &Digest,
    claimant: &str,
    now_ms: i64,
) -> Result<(), VolumeError> {
    sql::query(
        "UPDATE blobs SET state = 'deleting', changed_ms = $2, claimant = $3 WHERE sha256 = $1",
    )
    .bind(digest.as_str())
    .bind(now_ms)
    .bind(claimant)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Mark `digest` (locked, `deleting`) as stored again, as of `now_ms`: a
/// removal undone because a file names the blob.
pub(crate) async fn mark_stored(
    tx: &mut WriteTx,
    digest: &Digest,
    now_ms: i64,
) -> Result<(), VolumeError> {
    sql::query(
        "UPDATE blobs SET state = 'stored', changed_ms = $2, claimant = NULL WHERE sha256 = $1",
    )
    .bind(digest.as_str())
    .bind(now_ms)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Drop `digest`'s row (locked) if it is a packed blob's and `stored`: a
/// packed blob needs no removal (its record is dead space, which the
/// segment's compaction gives back); whether it went.
pub(crate) async fn forget_packed(tx: &mut WriteTx, digest: &Digest) -> Result<bool, VolumeError> {
    let forgotten = sql::query(
        "DELETE FROM blobs WHERE sha256 = $1 AND state = 'stored' AND segment IS NOT NULL",
    )
    .bind(digest.as_str())
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(forgotten == 1)
}

/// Drop the row of a removed blob, if the removal `claimant` stamped
/// `claim_ms` still holds it (a later take-over owns it otherwise).
pub(crate) async fn forget(
    db: &Database,
    digest: &Digest,
    claimant: &str,
    claim_ms: i64,
) -> Result<(), VolumeError> {
    db.write(async |tx: &mut WriteTx| {
        sql::query(
            "DELETE FROM blobs
             WHERE sha256 = $1 AND state = 'deleting' AND changed_ms = $2 AND claimant = $3",
        )
        .bind(digest.as_str())
        .bind(claim_ms)
        .bind(claimant)
        .execute(&mut **tx)
        .await?;
        Ok(())
    })
    .await
}

/// Every digest in the ledger, in either state.
pub(crate) async fn all(db: &Database) -> Result<Vec<String>, VolumeError> {
    let rows: Vec<(String,)> = sql::query_as("SELECT sha256 FROM blobs")
        .fetch_all(db.pool())
        .await?;
    Ok(rows.into_iter().map(|(hex,)| hex).collect())
}

/// Every blob recorded as stored (the collector releases those no file
/// names: a crash came between a delete's commit and the blob's removal).
pub(crate) async fn stored(db: &Database) -> Result<Vec<Digest>, VolumeError> {
    let rows: Vec<(String,)> = sql::query_as("SELECT sha256 FROM blobs WHERE state = 'stored'")
        .fetch_all(db.pool())
        .await?;
    Ok(digests(rows))
}

/// Removals stamped before `before_ms` (their remover stopped), with their
/// stamps.
pub(crate) async fn stale_deletions(
    db: &Database,
    before_ms: i64,
) -> Result<Vec<(Digest, i64)>, VolumeError> {
    let rows: Vec<(String, i64)> = sql::query_as(
        "SELECT sha256, changed_ms FROM blobs WHERE state = 'deleting' AND changed_ms < $1",
    )
    .bind(before_ms)
    .fetch_all(db.pool())
    .await?;
    Ok(with_stamps(rows))
}

/// Removals `claimant` claimed, with their stamps: at a gateway's start,
/// what its previous run on the same data directory left unfinished.
pub(crate) async fn claimed_by(
    db: &Database,
    claimant: &str,
) -> Result<Vec<(Digest, i64)>, VolumeError> {
    let rows: Vec<(String, i64)> = sql::query_as(
        "SELECT sha256, changed_ms FROM blobs WHERE state = 'deleting' AND claimant = $1",
    )
    .bind(claimant)
    .fetch_all(db.pool())
    .await?;
    Ok(with_stamps(rows))
}

/// The well-formed digests among `rows` (the table's CHECK admits no other).
fn digests(rows: Vec<(String,)>) -> Vec<Digest> {
    rows.into_iter()
        .filter_map(|(hex,)| Digest::parse(&hex).ok())
        .collect()
}

/// The well-formed digests among `rows`, with their stamps.
fn with_stamps(rows: Vec<(String, i64)>) -> Vec<(Digest, i64)> {
    rows.into_iter()
        .filter_map(|(hex, stamp)| Some((Digest::parse(&hex).ok()?, stamp)))
        .collect()
}
