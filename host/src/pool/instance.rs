//! One instance as the pool keeps it: the figures it shares with the pool
//! (memory, requests served, busy, draining and why), what the recycling
//! decision reads of them, and the snapshot the admin API shows.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use super::recycling::{Record, ReplaceReason};
use crate::runtime::HandlerInstance;

/// What an instance is doing, as shown by the admin API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceState {
    Idle,
    Busy,
    /// Gets no new requests; replaced as soon as it is idle.
    Draining,
}

/// The figures of one instance, shared between the pool and the instance.
#[derive(Debug)]
pub(super) struct InstanceInfo {
    pub(super) id: u64,
    created: Instant,
    /// Linear-memory bytes, kept exact by the instance's limiter.
    memory: Arc<AtomicU64>,
    pub(super) requests: AtomicU64,
    pub(super) busy: AtomicBool,
    /// Set when the instance must take no new request; says why.
    drain: Mutex<Option<ReplaceReason>>,
    /// Its last request took it over the threshold, but the recycling cap
    /// was full: the next `enforce` replaces it for `Threshold`.
    pub(super) held_back: AtomicBool,
}

impl InstanceInfo {
    /// A fresh instance's figures; `memory` is its limiter's gauge.
    pub(super) fn new(id: u64, memory: Arc<AtomicU64>) -> Self {
        Self {
            id,
            created: Instant::now(),
            memory,
            requests: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            drain: Mutex::new(None),
            held_back: AtomicBool::new(false),
        }
    }

    pub(super) fn drain_reason(&self) -> Option<ReplaceReason> {
        *self
            .drain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Mark draining for `reason`; false if it was draining already.
    pub(super) fn start_draining(&self, reason: ReplaceReason) -> bool {
        let mut drain = self
            .drain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if drain.is_some() {
            return false;
        }
        *drain = Some(reason);
        true
    }

    pub(super) fn stop_draining(&self) {
        *self
            .drain
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    pub(super) fn memory_bytes(&self) -> u64 {
        self.memory.load(Ordering::Relaxed)
    }

    /// What the recycling decision looks at, as it is now.
    pub(super) fn record(&self) -> Record {
        Record {
            memory_bytes: self.memory_bytes(),
            requests: self.requests.load(Ordering::Relaxed),
            held_back: self.held_back.load(Ordering::Relaxed),
            draining: self.drain_reason(),
        }
    }

    /// What the admin API shows of it at `now`.
    pub(super) fn status(&self, now: Instant) -> InstanceStatus {
        InstanceStatus {
            id: self.id,
            state: if self.drain_reason().is_some() {
                InstanceState::Draining
            } else if self.busy.load(Ordering::Relaxed) {
                InstanceState::Busy
            } else {
                InstanceState::Idle
            },
            memory_bytes: self.memory_bytes(),
            requests: self.requests.load(Ordering::Relaxed),
            age_ms: u64::try_from(now.duration_since(self.created).as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// A snapshot of one instance.
#[derive(Debug, Clone, Serialize)]
pub struct InstanceStatus {
    pub id: u64,
    pub state: InstanceState,
    pub memory_bytes: u64,
    pub requests: u64,
    pub age_ms: u64,
}

/// An instance as the pool holds it: its figures and its store.
#[derive(Debug)]
pub(super) struct Instance {
    pub(super) info: Arc<InstanceInfo>,
    pub(super) handler: HandlerInstance,
}
