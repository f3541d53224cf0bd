//! The memory footprints of the most recent requests, recorded by the pool
//! as each request hands its instance back: what the restart-budget
//! threshold is learned from.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use estimator::Footprint;
use tokio::sync::Notify;

/// Wake the estimator after this many new footprints.
pub const STEP_EVERY: u64 = 8;

/// The last `capacity` footprints, oldest first, and how many were ever
/// recorded.
#[derive(Debug)]
pub struct FootprintLog {
    window: Mutex<Window>,
    capacity: usize,
    every_few: Notify,
}

/// The most recent footprints (oldest first), and how many were recorded
/// since start: read together, so they agree.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Window {
    pub footprints: VecDeque<Footprint>,
    pub recorded: u64,
}

impl FootprintLog {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            window: Mutex::new(Window {
                footprints: VecDeque::with_capacity(capacity),
                recorded: 0,
            }),
            capacity,
            every_few: Notify::new(),
        }
    }

    pub fn record(&self, footprint: Footprint) {
        let recorded = {
            let mut window = self.lock();
            if window.footprints.len() == self.capacity {
                window.footprints.pop_front();
            }
            window.footprints.push_back(footprint);
            window.recorded += 1;
            window.recorded
        };
        if recorded.is_multiple_of(STEP_EVERY) {
            self.every_few.notify_one();
        }
    }

    /// The most recent `last` footprints (at most the window), oldest
    /// first, with the count recorded so far.
    pub fn recent(&self, last: u64) -> Window {
        let window = self.lock();
        let take = usize::try_from(last)
            .unwrap_or(usize::MAX)
            .min(window.footprints.len());
        let skip = window.footprints.len() - take;
        Window {
            footprints: window.footprints.iter().skip(skip).copied().collect(),
            recorded: window.recorded,
        }
    }

    /// Footprints recorded since start.
    pub fn recorded(&self) -> u64 {
        self.lock().recorded
    }

    /// Resolves after every [`STEP_EVERY`] new footprints.
    pub async fn next_few(&self) {
        self.every_few.notified().await;
    }

    fn lock(&self) -> MutexGuard<'_, Window> {
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
        assert_eq!(log.recent(10).footprints, vec![grew(3), grew(4), grew(5)]);
        assert_eq!(log.recent(2).footprints, vec![grew(4), grew(5)]);
        assert_eq!(log.recent(0).footprints, vec![]);
        assert_eq!(log.recent(0).recorded, 5);
    }
}
