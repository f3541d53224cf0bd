//! The memory footprints of the most recent requests, recorded by the pool
//! as each request hands its instance back: what the restart-budget
//! threshold is learned from. Each is numbered (1, 2, … in this process)
//! and timed, and kept until the recycler has stored it in the database
//! (where the gateways on one database share them): recording is a push
//! under a lock, never a query, so the request path does no database work.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use estimator::Footprint;
use tokio::sync::Notify;
use volume::FootprintRecord;

/// Wake the estimator after this many new footprints.
pub const STEP_EVERY: u64 = 8;

/// The last `capacity` footprints, oldest first, how many were ever
/// recorded, and those not stored yet.
#[derive(Debug)]
pub struct FootprintLog {
    log: Mutex<Log>,
    capacity: usize,
    every_few: Notify,
}

#[derive(Debug)]
struct Log {
    window: Window,
    /// Recorded, not yet stored in the database, oldest first (at most
    /// `capacity`: while the database cannot take them, the oldest go).
    unstored: VecDeque<FootprintRecord>,
}

/// The most recent footprints (oldest first), and how many were recorded
/// since start: read together, so they agree. The last one is number
/// `recorded`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Window {
    pub footprints: VecDeque<Footprint>,
    pub recorded: u64,
}

impl FootprintLog {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            log: Mutex::new(Log {
                window: Window {
                    footprints: VecDeque::with_capacity(capacity),
                    recorded: 0,
                },
                unstored: VecDeque::new(),
            }),
            capacity,
            every_few: Notify::new(),
        }
    }

    pub fn record(&self, footprint: Footprint) {
        let timestamp_ms = volume::now_ms();
        let recorded = {
            let mut log = self.lock();
            let window = &mut log.window;
            if window.footprints.len() == self.capacity {
                window.footprints.pop_front();
            }
            window.footprints.push_back(footprint);
            window.recorded += 1;
            let seq = window.recorded;
            if log.unstored.len() == self.capacity {
                log.unstored.pop_front();
            }
            log.unstored.push_back(FootprintRecord {
                seq,
                timestamp_ms,
                footprint,
            });
            seq
        };
        if recorded.is_multiple_of(STEP_EVERY) {
            self.every_few.notify_one();
        }
    }

    /// The footprints numbered above `seq` (those still in the window),
    /// oldest first, with the count recorded so far.
    pub fn after(&self, seq: u64) -> Window {
        let log = self.lock();
        let newer = log.window.recorded.saturating_sub(seq);
        let take = usize::try_from(newer)
            .unwrap_or(usize::MAX)
            .min(log.window.footprints.len());
        let skip = log.window.footprints.len() - take;
        Window {
            footprints: log.window.footprints.iter().skip(skip).copied().collect(),
            recorded: log.window.recorded,
        }
    }

    /// Footprints recorded since start.
    pub fn recorded(&self) -> u64 {
        self.lock().window.recorded
    }

    /// The footprints not stored in the database yet, oldest first.
    pub fn unstored(&self) -> Vec<FootprintRecord> {
        self.lock().unstored.iter().copied().collect()
    }

    /// Those up to number `seq` are stored now: forget them.
    pub fn stored(&self, seq: u64) {
        let mut log = self.lock();
        while log.unstored.front().is_some_and(|record| record.seq <= seq) {
            log.unstored.pop_front();
        }
    }

    /// Resolves after every [`STEP_EVERY`] new footprints.
    pub async fn next_few(&self) {
        self.every_few.notified().await;
    }

    fn lock(&self) -> MutexGuard<'_, Log> {
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_in_order() {
        let log = FootprintLog::new(3);
        for bytes in 1..=5 {
            log.record(Footprint::Grew(bytes));
        }
        assert_eq!(log.recorded(), 5);
        let grew = |b| Footprint::Grew(b);
        // Numbered from 1: those after number 3 are 4 and 5; after 1 or 0,
        // what the window still holds.
        assert_eq!(log.after(0).footprints, vec![grew(3), grew(4), grew(5)]);
        assert_eq!(log.after(1).footprints, vec![grew(3), grew(4), grew(5)]);
        assert_eq!(log.after(3).footprints, vec![grew(4), grew(5)]);
        assert_eq!(log.after(5).footprints, vec![]);
        assert_eq!(log.after(5).recorded, 5);
    }

    #[test]
    fn keeps_what_is_not_stored_until_it_is() {
        let log = FootprintLog::new(3);
        for bytes in 1..=2 {
            log.record(Footprint::Within(bytes));
        }
        let unstored = log.unstored();
        assert_eq!(
            unstored
                .iter()
                .map(|r| (r.seq, r.footprint))
                .collect::<Vec<_>>(),
            vec![(1, Footprint::Within(1)), (2, Footprint::Within(2))]
        );
        assert!(unstored[0].timestamp_ms <= unstored[1].timestamp_ms);
        // Stored through number 1; then more than the capacity while the
        // database is away: the oldest go.
        log.stored(1);
        for bytes in 3..=6 {
            log.record(Footprint::Within(bytes));
        }
        let seqs: Vec<u64> = log.unstored().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![4, 5, 6]);
        log.stored(6);
        assert_eq!(log.unstored(), vec![]);
    }
}
