//! Bytes written outside the index that a transaction's rows name (a packed
//! blob's record in its segment): made durable before that transaction
//! commits, so that no committed row names bytes a crash could take.
//!
//! A writer hands them to its transaction ([`super::WriteTx::durable_first`])
//! rather than waiting for them itself: on SQLite the group's commit thread
//! makes them durable and then commits, in one trip to a blocking thread
//! for the whole group (see [`super::write_tx`]); on PostgreSQL the writer
//! waits for them just before its own `COMMIT`.

use std::fmt::Debug;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::error::VolumeError;

/// Something that must be durable before the commit that names it.
pub(crate) trait MustBeDurable: Send + Sync + Debug {
    /// Make it durable on this thread (a blocking one), or say why not.
    fn sync_now(&self) -> Result<(), VolumeError>;

    /// Wait until it is durable (sharing a sync with others where it can).
    fn sync(&self) -> BoxFuture<'_, Result<(), VolumeError>>;
}

/// What one transaction (or one SQLite group) must make durable first.
#[derive(Debug, Default)]
pub(crate) struct DurableFirst(Vec<Arc<dyn MustBeDurable>>);

impl DurableFirst {
    pub(crate) fn push(&mut self, what: Arc<dyn MustBeDurable>) {
        self.0.push(what);
    }

    /// Durable now, in order, on this (blocking) thread.
    pub(crate) fn sync_now(&self) -> Result<(), VolumeError> {
        self.0.iter().try_for_each(|what| what.sync_now())
    }

    /// Wait until every one is durable.
    pub(crate) async fn sync(&self) -> Result<(), VolumeError> {
        for what in &self.0 {
            what.sync().await?;
        }
        Ok(())
    }
}
