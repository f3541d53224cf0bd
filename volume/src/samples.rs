//! The estimator's evidence in the metadata database (SQLite or PostgreSQL,
//! wherever the files' metadata is), so it survives a
//! restart and can be exported: each instance's memory
//! ([`estimator::Sample`], stored as it is) and the process's at every
//! sampling round. [`SampleStore`] is their one home.

use estimator::Sample;
use serde::Serialize;

use crate::db::{Database, WriteTx, sql};
use crate::error::VolumeError;

/// The whole process's memory at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcessSample {
    pub timestamp_ms: i64,
    pub rss_bytes: u64,
    pub private_dirty_bytes: u64,
}

fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn from_sql(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

/// The samples, kept in the metadata database beside the files.
#[derive(Debug, Clone, Copy)]
pub struct SampleStore<'a> {
    db: &'a Database,
}

impl<'a> SampleStore<'a> {
    pub(crate) fn new(db: &'a Database) -> Self {
        Self { db }
    }

    /// Store one sampling round in one transaction.
    pub async fn record(
        &self,
        instances: &[Sample],
        process: &ProcessSample,
    ) -> Result<(), VolumeError> {
        let mut tx = self.db.begin_write().await?;
        for sample in instances {
            sql::query(
                "INSERT INTO memory_samples (timestamp_ms, instance, bytes) VALUES ($1, $2, $3)",
            )
            .bind(sample.timestamp_ms)
            .bind(to_sql(sample.instance))
            .bind(to_sql(sample.bytes))
            .execute(&mut *tx)
            .await?;
        }
        sql::query("INSERT INTO process_samples (timestamp_ms, rss_bytes, private_dirty_bytes) VALUES ($1, $2, $3)")
            .bind(process.timestamp_ms)
            .bind(to_sql(process.rss_bytes))
            .bind(to_sql(process.private_dirty_bytes))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Instance samples taken in `[from_ms, to_ms]`, in time order.
    pub async fn memory(&self, from_ms: i64, to_ms: i64) -> Result<Vec<Sample>, VolumeError> {
        self.window(
            "SELECT timestamp_ms, instance, bytes FROM memory_samples
             WHERE timestamp_ms BETWEEN $1 AND $2 ORDER BY timestamp_ms, instance",
            from_ms,
            to_ms,
            |timestamp_ms, instance, bytes| Sample {
                timestamp_ms,
                instance: from_sql(instance),
                bytes: from_sql(bytes),
            },
        )
        .await
    }

    /// Process samples taken in `[from_ms, to_ms]`, in time order.
    pub async fn process(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<ProcessSample>, VolumeError> {
        self.window(
            "SELECT timestamp_ms, rss_bytes, private_dirty_bytes FROM process_samples
             WHERE timestamp_ms BETWEEN $1 AND $2 ORDER BY timestamp_ms",
            from_ms,
            to_ms,
            |timestamp_ms, rss, dirty| ProcessSample {
                timestamp_ms,
                rss_bytes: from_sql(rss),
                private_dirty_bytes: from_sql(dirty),
            },
        )
        .await
    }

    /// The rows `query` selects (three integers each, of the samples taken
    /// between `$1` and `$2`) for `[from_ms, to_ms]`, each made a `T` by
    /// `sample`.
    async fn window<T>(
        &self,
        query: &str,
        from_ms: i64,
        to_ms: i64,
        sample: impl Fn(i64, i64, i64) -> T,
    ) -> Result<Vec<T>, VolumeError> {
        let rows: Vec<(i64, i64, i64)> = sql::query_as(query)
            .bind(from_ms)
            .bind(to_ms)
            .fetch_all(self.db.pool())
            .await?;
        Ok(rows.into_iter().map(|(a, b, c)| sample(a, b, c)).collect())
    }

    /// The highest instance id any stored sample names: a new run numbers
    /// its instances above it, so two runs' samples never share an id.
    pub async fn last_instance(&self) -> Result<Option<u64>, VolumeError> {
        let (last,): (Option<i64>,) = sql::query_as("SELECT MAX(instance) FROM memory_samples")
            .fetch_one(self.db.pool())
            .await?;
        Ok(last.map(from_sql))
    }

    /// Forget samples older than `before_ms`; returns how many rows went.
    pub async fn prune(&self, before_ms: i64) -> Result<u64, VolumeError> {
        self.db
            .write(async |tx: &mut WriteTx| {
                let mut removed = 0;
                for table in ["memory_samples", "process_samples"] {
                    removed += sql::query(&format!("DELETE FROM {table} WHERE timestamp_ms < $1"))
                        .bind(before_ms)
                        .execute(&mut **tx)
                        .await?
                        .rows_affected();
                }
                Ok(removed)
            })
            .await
    }
}
