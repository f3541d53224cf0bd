//! The memory footprints of the most recent requests, recorded by the pool
//! as each request hands its instance back: what the restart-budget
//! threshold is learned from.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use estimator::Footprint;
use tokio::sync::Notify;

/// Wake the estimator after this many new footprints.
pub const STEP_EVERY: u64 = 8;

/// The last `capacity` footprints, oldest first, and how many were ever
/// recorded.
#[derive(Debug)]
pub struct FootprintLog {
    window: Mutex<VecDeque<Footprint>>,
    capacity: usize,
    recorded: AtomicU64,
    every_few: Notify,
}

impl FootprintLog {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            window: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            recorded: AtomicU64::new(0),
            every_few: Notify::new(),
        }
    }

    pub fn record(&self, footprint: Footprint) {
        {
            let mut window = self.lock();
            if window.len() == self.capacity {
                window.pop_front();
            }
            window.push_back(footprint);
        }
        let recorded = self.recorded.fetch_add(1, Ordering::Relaxed) + 1;
        if recorded.is_multiple_of(STEP_EVERY) {
            self.every_few.notify_one();
        }
    }

    /// The most recent `last` footprints (at most the window), oldest first.
    pub fn recent(&self, last: u64) -> Vec<Footprint> {
        let window = self.lock();
        let take = usize::try_from(last)
            .unwrap_or(usize::MAX)
            .min(window.len());
        window.iter().skip(window.len() - take).copied().collect()
    }

    /// Footprints recorded since start.
    pub fn recorded(&self) -> u64 {
        self.recorded.load(Ordering::Relaxed)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Resolves after every [`STEP_EVERY`] new footprints.
    pub async fn next_few(&self) {
        self.every_few.notified().await;
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Footprint>> {
        self.window
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
        assert_eq!(log.recent(10), vec![grew(3), grew(4), grew(5)]);
        assert_eq!(log.recent(2), vec![grew(4), grew(5)]);
        assert_eq!(log.recent(0), vec![]);
    }
}
