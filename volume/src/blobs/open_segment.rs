//! The segment being appended to, and how its records become durable: one
//! `fdatasync` for every writer that wrote before it began (group commit).
//!
//! Two ways to wait for it. A writer whose row goes through SQLite's group
//! commit hands its [`RecordSync`] to its transaction, and the group's
//! commit thread syncs the segment just before the `COMMIT` (one blocking
//! trip for both fsyncs: see `db::durable_first`); any other waits on
//! [`GroupSync`], which runs one sync for every writer waiting. Either way
//! at most one sync of a segment runs at a time: after a failed `fsync`
//! Linux may report the next one clean with the bytes lost (the error is
//! told once, to whichever sync sees it), so a failure marks the segment
//! failed, no later sync of it is believed, and it takes no more records.

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio::sync::Notify;

use crate::db::MustBeDurable;
use crate::error::VolumeError;

/// A segment being appended to.
#[derive(Debug)]
pub(super) struct OpenSegment {
    pub(super) id: i64,
    pub(super) file: File,
    /// Bytes reserved so far: where the next record goes.
    pub(super) end: Mutex<u64>,
    pub(super) sync: GroupSync,
}

impl OpenSegment {
    pub(super) fn new(id: i64, file: File, end: u64) -> Self {
        Self {
            id,
            file,
            end: Mutex::new(end),
            sync: GroupSync::default(),
        }
    }

    /// Whether a sync of it failed (it takes no more records).
    pub(super) fn failed(&self) -> bool {
        self.sync.failed.load(Ordering::SeqCst)
    }

    /// A record has been written to it (to the page cache): what makes it
    /// durable.
    pub(super) fn written(self: &Arc<Self>) -> RecordSync {
        let mut state = self
            .sync
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.written += 1;
        RecordSync {
            segment: self.clone(),
            ticket: state.written,
        }
    }

    /// On this (blocking) thread: make every record written so far
    /// durable, unless a sync since `ticket` was taken has already.
    fn sync_now(&self, ticket: u64) -> Result<(), VolumeError> {
        let sync = &self.sync;
        let one_at_a_time = sync.running.lock().unwrap_or_else(PoisonError::into_inner);
        let target = {
            let state = sync.state.lock().unwrap_or_else(PoisonError::into_inner);
            if ticket <= state.synced {
                return Ok(());
            }
            if self.failed() {
                return Err(earlier_failure());
            }
            state.written
        };
        let synced = self.file.sync_data();
        if let Err(error) = &synced {
            tracing::error!(segment = self.id, %error, "a segment's sync failed; it takes no more records");
            sync.failed.store(true, Ordering::SeqCst);
        } else {
            let mut state = sync.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.synced = state.synced.max(target);
        }
        drop(one_at_a_time);
        sync.done.notify_waiters();
        synced.map_err(|e| VolumeError::io("syncing a segment", e))
    }
}

fn earlier_failure() -> VolumeError {
    VolumeError::io(
        "syncing a segment",
        io::Error::other("an earlier sync of this segment failed"),
    )
}

/// The syncs of one segment: tickets handed out as records are written,
/// and how far they are durable.
#[derive(Debug, Default)]
pub(super) struct GroupSync {
    state: Mutex<SyncState>,
    /// Held while a sync runs (on a blocking thread).
    running: Mutex<()>,
    /// Told when a sync ends.
    done: Notify,
    failed: AtomicBool,
}

#[derive(Debug, Default)]
struct SyncState {
    /// Tickets taken.
    written: u64,
    /// Every ticket up to this one is durable.
    synced: u64,
    /// A writer waiting in [`RecordSync::durable`] has started a sync that
    /// has not ended.
    started: bool,
}

/// One record written to a segment, until it is durable.
#[derive(Debug, Clone)]
pub(crate) struct RecordSync {
    segment: Arc<OpenSegment>,
    ticket: u64,
}

impl RecordSync {
    /// Wait until the record is durable: when no sync is under way, start
    /// one (covering every record written so far) on a blocking thread of
    /// its own, which runs to its end whoever gives up; else wait for the
    /// one under way, and look again.
    pub(crate) async fn durable(&self) -> Result<(), VolumeError> {
        let sync = &self.segment.sync;
        loop {
            let notified = sync.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = sync.state.lock().unwrap_or_else(PoisonError::into_inner);
                if self.ticket <= state.synced {
                    return Ok(());
                }
                if self.segment.failed() {
                    return Err(earlier_failure());
                }
                if !state.started {
                    state.started = true;
                    let segment = self.segment.clone();
                    let ticket = self.ticket;
                    drop(tokio::task::spawn_blocking(move || {
                        // Its outcome reaches the waiters through the state.
                        let _ = segment.sync_now(ticket);
                        let mut state = segment
                            .sync
                            .state
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner);
                        state.started = false;
                        drop(state);
                        segment.sync.done.notify_waiters();
                    }));
                }
            }
            notified.await;
        }
    }
}

impl MustBeDurable for RecordSync {
    fn sync_now(&self) -> Result<(), VolumeError> {
        self.segment.sync_now(self.ticket)
    }

    fn sync(&self) -> BoxFuture<'_, Result<(), VolumeError>> {
        self.durable().boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileExt as _;

    use super::*;

    /// A sync covers every record written before it began, whichever way
    /// it is asked for; a record written after it needs another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sync_covers_the_records_written_before_it() {
        let file = tempfile::tempfile().expect("temp file");
        let segment = Arc::new(OpenSegment::new(1, file, 0));
        let write = |at: u64| {
            segment.file.write_all_at(b"record", at).expect("write");
            segment.written()
        };
        let (first, second) = (write(0), write(6));
        let syncs = |segment: &OpenSegment| segment.sync.state.lock().expect("state").synced;
        tokio::task::spawn_blocking({
            let first = first.clone();
            move || MustBeDurable::sync_now(&first)
        })
        .await
        .expect("the sync's thread")
        .expect("synced");
        assert_eq!(syncs(&segment), 2, "both records are covered");
        second.durable().await.expect("durable");
        let third = write(12);
        assert_eq!(syncs(&segment), 2);
        third.durable().await.expect("durable");
        assert_eq!(syncs(&segment), 3);
        assert!(!segment.failed());
    }
}
