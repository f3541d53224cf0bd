//! Request footprints in the metadata database (the `footprints` table):
//! what the restart-budget estimator learns from, kept so that a restarted
//! gateway starts from what it knew and the gateways of one scale-out learn
//! from each other's traffic. [`FootprintStore`] is their one home.
//!
//! Each gateway process appends its footprints in batches (one write
//! transaction each, off the request path), reads the most recent ones of
//! every gateway, and prunes: the newest `per_gateway` of each gateway, the
//! newest `total` in all, nothing older than a cut-off.

use estimator::Footprint;

use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;

/// One request's footprint as the gateway that served it recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FootprintRecord {
    /// Its number in that gateway process: 1, 2, … in the order recorded.
    pub seq: u64,
    pub timestamp_ms: i64,
    pub footprint: Footprint,
}

/// A stored footprint and the gateway process that recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFootprint {
    pub gateway: String,
    pub record: FootprintRecord,
}

/// How many footprints are kept (see [`FootprintStore::append`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FootprintRetention {
    /// The newest this many of each gateway.
    pub per_gateway: u64,
    /// The newest this many in all (at least one is kept).
    pub total: u64,
    /// Nothing recorded before this (Unix milliseconds).
    pub before_ms: i64,
}

/// Rows per `INSERT`, largest first: a batch is written as few statements
/// of these few fixed texts (each prepared once per connection).
const ROWS_PER_INSERT: [usize; 4] = [256, 32, 4, 1];

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

fn kind_and_bytes(footprint: Footprint) -> (&'static str, u64) {
    match footprint {
        Footprint::Grew(bytes) => ("grew", bytes),
        Footprint::Within(bytes) => ("within", bytes),
    }
}

/// `INSERT` of `rows` footprints of one gateway (`$1`).
fn insert_statement(rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|row| {
            let at = 2 + 4 * row;
            format!("($1, ${}, ${}, ${}, ${})", at, at + 1, at + 2, at + 3)
        })
        .collect();
    format!(
        "INSERT INTO footprints (gateway, seq, timestamp_ms, kind, bytes) VALUES {} \
         ON CONFLICT (gateway, seq) DO NOTHING",
        values.join(", ")
    )
}

/// The footprints, kept in the metadata database beside the files.
#[derive(Debug, Clone, Copy)]
pub struct FootprintStore<'a> {
    db: &'a Database,
}

impl<'a> FootprintStore<'a> {
    pub(crate) fn new(db: &'a Database) -> Self {
        Self { db }
    }

    /// Store `batch`, recorded by `gateway`, then forget what `keep` no
    /// longer keeps: all in one write transaction. A footprint already
    /// stored (same gateway and number: a batch sent again after a commit
    /// whose answer was lost) is kept once. Returns how many rows were
    /// forgotten.
    pub async fn append(
        &self,
        gateway: &str,
        batch: &[FootprintRecord],
        keep: &FootprintRetention,
    ) -> Result<u64, VolumeError> {
        self.db
            .write(async |tx: &mut WriteTx| {
                let mut rest = batch;
                for rows in ROWS_PER_INSERT {
                    let statement = insert_statement(rows);
                    while rest.len() >= rows {
                        let (chunk, after) = rest.split_at(rows);
                        let mut insert = sql::query(&statement).bind(gateway);
                        for record in chunk {
                            let (kind, bytes) = kind_and_bytes(record.footprint);
                            insert = insert
                                .bind(to_sql(record.seq))
                                .bind(record.timestamp_ms)
                                .bind(kind)
                                .bind(to_sql(bytes));
                        }
                        insert.execute(&mut **tx).await?;
                        rest = after;
                    }
                }
                // Gateways prune the same rows in different orders: on
                // PostgreSQL two could deadlock (one aborted with 40P01), so
                // pruning takes turns under one row-less lock, with a key no
                // owner's tree has.
                self.db.lock_tree(tx, PRUNE_LOCK).await?;
                prune(tx, keep).await
            })
            .await
    }

    /// The most recent `limit` footprints of every gateway recorded at or
    /// after `since_ms`, oldest first.
    pub async fn recent(
        &self,
        limit: u64,
        since_ms: i64,
    ) -> Result<Vec<SharedFootprint>, VolumeError> {
        let rows: Vec<(String, i64, i64, String, i64)> = sql::query_as(
            "SELECT gateway, seq, timestamp_ms, kind, bytes FROM footprints
             WHERE timestamp_ms >= $1
             ORDER BY timestamp_ms DESC, gateway DESC, seq DESC LIMIT $2",
        )
        .bind(since_ms)
        .bind(to_sql(limit))
        .fetch_all(self.db.pool())
        .await?;
        Ok(rows
            .into_iter()
            .rev()
            .filter_map(|(gateway, seq, timestamp_ms, kind, bytes)| {
                let bytes = from_sql(bytes);
                let footprint = match kind.as_str() {
                    "grew" => Footprint::Grew(bytes),
                    "within" => Footprint::Within(bytes),
                    // The table's CHECK admits no other.
                    _ => return None,
                };
                Some(SharedFootprint {
                    gateway,
                    record: FootprintRecord {
                        seq: from_sql(seq),
                        timestamp_ms,
                        footprint,
                    },
                })
            })
            .collect())
    }

    /// How many footprints are stored, of every gateway.
    pub async fn count(&self) -> Result<u64, VolumeError> {
        let (count,): (i64,) = sql::query_as("SELECT COUNT(*) FROM footprints")
            .fetch_one(self.db.pool())
            .await?;
        Ok(from_sql(count))
    }
}

/// The advisory lock's key pruning takes (owners' trees use ids ≥ 0).
const PRUNE_LOCK: i64 = -25;

/// Forget the footprints `keep` does not keep; how many went.
async fn prune(tx: &mut WriteTx, keep: &FootprintRetention) -> Result<u64, VolumeError> {
    let old = sql::query("DELETE FROM footprints WHERE timestamp_ms < $1")
        .bind(keep.before_ms)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    // Each gateway's numbers run without gaps, so its newest N are the
    // last N numbers (the primary key answers the MAX).
    let per_gateway = sql::query(
        "DELETE FROM footprints WHERE seq <= (
             SELECT MAX(newer.seq) FROM footprints newer WHERE newer.gateway = footprints.gateway
         ) - $1",
    )
    .bind(to_sql(keep.per_gateway))
    .execute(&mut **tx)
    .await?
    .rows_affected();
    // Everything before the `total`-th newest (in the order they are
    // read); nothing when there are no more than `total`.
    let beyond_total = sql::query(
        "DELETE FROM footprints WHERE (timestamp_ms, gateway, seq) < (
             SELECT timestamp_ms, gateway, seq FROM footprints
             ORDER BY timestamp_ms DESC, gateway DESC, seq DESC LIMIT 1 OFFSET $1
         )",
    )
    .bind(to_sql(keep.total.max(1) - 1))
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(old + per_gateway + beyond_total)
}
