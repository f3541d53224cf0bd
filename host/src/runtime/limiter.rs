//! The `ResourceLimiter` of every store: the exact linear-memory figure of
//! one instance, its cap, and its share of the pool's memory budget.
//!
//! Every growth of every linear memory of an instance passes through
//! [`MemoryLimiter::memory_growing`], creation included, so the figure is
//! exact (an atomic, readable while the instance is busy). Growth is paid for
//! first from the request's allowance (bytes it reserved when admitted), then
//! from what the budget has left; growth that fits neither, or that would
//! pass the per-instance cap, is refused, which makes the guest trap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::budget::MemoryBudget;

/// Why a growth was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It would pass the per-instance cap.
    Cap,
    /// Neither the request's allowance nor the budget had room.
    Budget,
}

#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    cap: u64,
    bytes: Arc<AtomicU64>,
    budget: Arc<MemoryBudget>,
    /// Reserved bytes the current request may still grow into.
    allowance: u64,
    /// While true (instantiation), growth is taken from the budget whatever
    /// its balance: a fresh instance replaces an old one.
    instantiating: bool,
    refused: Option<Refusal>,
}

impl MemoryLimiter {
    pub(crate) fn new(cap: u64, budget: Arc<MemoryBudget>) -> Self {
        Self {
            cap,
            bytes: Arc::new(AtomicU64::new(0)),
            budget,
            allowance: 0,
            instantiating: true,
            refused: None,
        }
    }

    pub(crate) fn cap(&self) -> u64 {
        self.cap
    }

    pub(crate) fn budget_total(&self) -> u64 {
        self.budget.total()
    }

    /// The linear-memory figure, shared with the pool.
    pub(crate) fn gauge(&self) -> Arc<AtomicU64> {
        self.bytes.clone()
    }

    /// Instantiation is over: growth from now on must fit the budget.
    pub(crate) fn instantiated(&mut self) {
        self.instantiating = false;
    }

    /// Let the next request grow by `bytes` it reserved.
    pub(crate) fn grant(&mut self, bytes: u64) {
        self.allowance += bytes;
        self.refused = None;
    }

    /// The request is over: give back what it reserved and did not use.
    pub(crate) fn return_unspent(&mut self) {
        self.budget.unreserve(std::mem::take(&mut self.allowance));
    }

    /// Why the last growth was refused, if one was.
    pub(crate) fn refused(&self) -> Option<Refusal> {
        self.refused
    }

    fn grow(&mut self, delta: u64) -> Result<(), Refusal> {
        let total = self.bytes.load(Ordering::Relaxed) + delta;
        if total > self.cap {
            return Err(Refusal::Cap);
        }
        let from_allowance = delta.min(self.allowance);
        let beyond = delta - from_allowance;
        if beyond > 0 {
            if self.instantiating {
                self.budget.grow_forced(beyond);
            } else if !self.budget.try_grow(beyond) {
                return Err(Refusal::Budget);
            }
        }
        self.allowance -= from_allowance;
        self.budget.spend(from_allowance);
        self.bytes.store(total, Ordering::Relaxed);
        Ok(())
    }
}

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let delta = desired.saturating_sub(current) as u64;
        match self.grow(delta) {
            Ok(()) => Ok(true),
            Err(refusal) => {
                self.refused = Some(refusal);
                Ok(false)
            }
        }
    }

    fn table_growing(
        &mut self,
        _current: usize,
        _desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(true)
    }
}

impl Drop for MemoryLimiter {
    /// The store, and with it the instance's memory, is going: everything it
    /// held or was allowed goes back to the budget.
    fn drop(&mut self) {
        self.return_unspent();
        self.budget.release(self.bytes.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use wasmtime::ResourceLimiter as _;

    use super::*;

    const PAGE: usize = 64 << 10;

    fn limiter(cap: u64, budget: u64) -> (MemoryLimiter, Arc<MemoryBudget>) {
        let budget = MemoryBudget::new(budget);
        (MemoryLimiter::new(cap, budget.clone()), budget)
    }

    fn grow(limiter: &mut MemoryLimiter, from: usize, to: usize) -> bool {
        limiter.memory_growing(from, to, None).expect("never errs")
    }

    #[test]
    fn instantiation_is_counted_and_forced() {
        let (mut limiter, budget) = limiter(1 << 30, PAGE as u64);
        assert!(grow(&mut limiter, 0, 2 * PAGE));
        assert_eq!(limiter.gauge().load(Ordering::Relaxed), 2 * PAGE as u64);
        assert_eq!(budget.used(), 2 * PAGE as u64);
    }

    #[test]
    fn growth_is_paid_from_the_allowance_first() {
        let (mut limiter, budget) = limiter(1 << 30, 10 * PAGE as u64);
        limiter.instantiated();
        let allowance = budget
            .try_reserve(4 * PAGE as u64)
            .expect("fits")
            .into_allowance();
        limiter.grant(allowance);
        assert!(grow(&mut limiter, 0, 3 * PAGE));
        assert_eq!(budget.reserved(), PAGE as u64);
        assert_eq!(budget.used(), 4 * PAGE as u64);
        // Two more pages: one from the allowance, one from the budget.
        assert!(grow(&mut limiter, 3 * PAGE, 5 * PAGE));
        assert_eq!((budget.used(), budget.reserved()), (5 * PAGE as u64, 0));
        limiter.return_unspent();
        assert_eq!(budget.used(), 5 * PAGE as u64);
    }

    #[test]
    fn growth_past_the_budget_is_refused() {
        let (mut limiter, budget) = limiter(1 << 30, 2 * PAGE as u64);
        limiter.instantiated();
        assert!(grow(&mut limiter, 0, 2 * PAGE));
        assert!(!grow(&mut limiter, 2 * PAGE, 3 * PAGE));
        assert_eq!(limiter.refused(), Some(Refusal::Budget));
        assert_eq!(budget.used(), 2 * PAGE as u64);
        assert_eq!(limiter.gauge().load(Ordering::Relaxed), 2 * PAGE as u64);
    }

    #[test]
    fn growth_past_the_cap_is_refused_whatever_the_budget() {
        let (mut limiter, _budget) = limiter(2 * PAGE as u64, 1 << 30);
        assert!(grow(&mut limiter, 0, 2 * PAGE));
        assert!(!grow(&mut limiter, 2 * PAGE, 3 * PAGE));
        assert_eq!(limiter.refused(), Some(Refusal::Cap));
    }

    #[test]
    fn dropping_gives_everything_back() {
        let (mut limiter, budget) = limiter(1 << 30, 10 * PAGE as u64);
        assert!(grow(&mut limiter, 0, PAGE));
        limiter.instantiated();
        let allowance = budget
            .try_reserve(3 * PAGE as u64)
            .expect("fits")
            .into_allowance();
        limiter.grant(allowance);
        assert!(grow(&mut limiter, PAGE, 2 * PAGE));
        drop(limiter);
        assert_eq!((budget.used(), budget.reserved()), (0, 0));
    }
}
