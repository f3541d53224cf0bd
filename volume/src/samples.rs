//! Memory samples in the metadata database, so the estimator's evidence
//! survives a restart and can be exported.

use serde::Serialize;

use crate::VolumeError;
use crate::index::Index;

/// One instance's linear memory at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemorySample {
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    pub instance: u64,
    pub bytes: u64,
}

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

impl Index {
    /// Store one sampling round in one transaction.
    pub(crate) async fn record_samples(
        &self,
        instances: &[MemorySample],
        process: &ProcessSample,
    ) -> Result<(), VolumeError> {
        let mut tx = self.pool().begin_with("BEGIN IMMEDIATE").await?;
        for sample in instances {
            sqlx::query(
                "INSERT INTO memory_samples (timestamp_ms, instance, bytes) VALUES (?, ?, ?)",
            )
            .bind(sample.timestamp_ms)
            .bind(to_sql(sample.instance))
            .bind(to_sql(sample.bytes))
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query("INSERT INTO process_samples (timestamp_ms, rss_bytes, private_dirty_bytes) VALUES (?, ?, ?)")
            .bind(process.timestamp_ms)
            .bind(to_sql(process.rss_bytes))
            .bind(to_sql(process.private_dirty_bytes))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Instance samples taken in `[from_ms, to_ms]`, in time order.
    pub(crate) async fn memory_samples(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<MemorySample>, VolumeError> {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT timestamp_ms, instance, bytes FROM memory_samples
             WHERE timestamp_ms BETWEEN ? AND ? ORDER BY timestamp_ms, instance",
        )
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(timestamp_ms, instance, bytes)| MemorySample {
                timestamp_ms,
                instance: from_sql(instance),
                bytes: from_sql(bytes),
            })
            .collect())
    }

    /// Process samples taken in `[from_ms, to_ms]`, in time order.
    pub(crate) async fn process_samples(
        &self,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<ProcessSample>, VolumeError> {
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT timestamp_ms, rss_bytes, private_dirty_bytes FROM process_samples
             WHERE timestamp_ms BETWEEN ? AND ? ORDER BY timestamp_ms",
        )
        .bind(from_ms)
        .bind(to_ms)
        .fetch_all(self.pool())
        .await?;
        Ok(rows
            .into_iter()
            .map(|(timestamp_ms, rss, dirty)| ProcessSample {
                timestamp_ms,
                rss_bytes: from_sql(rss),
                private_dirty_bytes: from_sql(dirty),
            })
            .collect())
    }

    /// Forget samples older than `before_ms`; returns how many rows went.
    pub(crate) async fn prune_samples(&self, before_ms: i64) -> Result<u64, VolumeError> {
        let mut removed = 0;
        for table in ["memory_samples", "process_samples"] {
            removed += sqlx::query(&format!("DELETE FROM {table} WHERE timestamp_ms < ?"))
                .bind(before_ms)
                .execute(self.pool())
                .await?
                .rows_affected();
        }
        Ok(removed)
    }
}
