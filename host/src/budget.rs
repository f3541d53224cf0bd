//! The memory budget: the bytes of linear memory the pool may hold.
//!
//! Invariant: `used` = every live instance's linear memory + what admitted
//! requests reserved and have not grown into yet, and `used ≤ total` except
//! for the moment a fresh instance replaces an old one (its first pages are
//! taken whatever the balance, since the old one's pages are about to go).
//!
//! A request reserves its bytes before it takes an instance ([`try_reserve`]),
//! the instance's limiter turns that reservation into instance memory as the
//! guest grows ([`spend`]), or takes more if the reservation runs out
//! ([`try_grow`]), and whatever was not spent goes back when the request ends.
//! A dropped instance gives back all its memory ([`release`]).
//!
//! [`try_reserve`]: MemoryBudget::try_reserve
//! [`spend`]: MemoryBudget::spend
//! [`try_grow`]: MemoryBudget::try_grow
//! [`release`]: MemoryBudget::release

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;
use tokio::sync::futures::Notified;

/// Bytes of linear memory the whole pool may hold, and what holds them.
#[derive(Debug)]
pub struct MemoryBudget {
    total: u64,
    /// Instance memory plus unspent reservations.
    used: AtomicU64,
    /// The unspent reservations alone (a part of `used`).
    reserved: AtomicU64,
    /// Woken whenever bytes are given back.
    freed: Notify,
}

impl MemoryBudget {
    pub fn new(total: u64) -> Arc<Self> {
        Arc::new(Self {
            total,
            used: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            freed: Notify::new(),
        })
    }

    pub fn total(&self) -> u64 {
        self.total
    }

    /// Instance memory plus unspent reservations.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Bytes admitted requests reserved and have not grown into yet.
    pub fn reserved(&self) -> u64 {
        self.reserved.load(Ordering::Acquire)
    }

    /// Bytes neither held nor reserved.
    pub fn available(&self) -> u64 {
        self.total.saturating_sub(self.used())
    }

    /// Reserve `bytes` for a request if they fit now.
    pub fn try_reserve(self: &Arc<Self>, bytes: u64) -> Option<Reservation> {
        self.try_add(bytes).then(|| {
            self.reserved.fetch_add(bytes, Ordering::AcqRel);
            Reservation {
                budget: self.clone(),
                bytes,
            }
        })
    }

    /// A future that resolves the next time bytes are given back. Create it
    /// (and enable it) before checking, so no wake-up is missed.
    pub fn freed(&self) -> Notified<'_> {
        self.freed.notified()
    }

    /// `bytes` of a reservation became instance memory.
    pub fn spend(&self, bytes: u64) {
        if bytes > 0 {
            self.reserved.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Give back `bytes` of a reservation that was never grown into.
    pub fn unreserve(&self, bytes: u64) {
        if bytes > 0 {
            self.reserved.fetch_sub(bytes, Ordering::AcqRel);
            self.give_back(bytes);
        }
    }

    /// Instance memory beyond any reservation, if it fits.
    pub fn try_grow(&self, bytes: u64) -> bool {
        self.try_add(bytes)
    }

    /// Instance memory taken whatever the balance: a fresh instance's first
    /// pages, which replace an old instance's.
    pub fn grow_forced(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::AcqRel);
    }

    /// A dropped instance's memory.
    pub fn release(&self, bytes: u64) {
        if bytes > 0 {
            self.give_back(bytes);
        }
    }

    fn try_add(&self, bytes: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&after| after <= self.total)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
        self.freed.notify_waiters();
    }
}

/// Bytes reserved for one request; given back on drop unless handed to an
/// instance's limiter with [`Reservation::into_allowance`].
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<MemoryBudget>,
    bytes: u64,
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The reserved bytes, now owed by whoever takes them: the limiter
    /// spends them or gives them back with [`MemoryBudget::unreserve`].
    pub fn into_allowance(mut self) -> u64 {
        std::mem::take(&mut self.bytes)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.unreserve(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_fit_or_are_refused() {
        let budget = MemoryBudget::new(100);
        let a = budget.try_reserve(60).expect("fits");
        assert!(budget.try_reserve(50).is_none());
        assert_eq!((budget.used(), budget.reserved()), (60, 60));
        drop(a);
        assert_eq!((budget.used(), budget.reserved()), (0, 0));
        assert!(budget.try_reserve(100).is_some());
    }

    #[test]
    fn spent_reservations_stay_used_until_released() {
        let budget = MemoryBudget::new(100);
        let allowance = budget.try_reserve(40).expect("fits").into_allowance();
        budget.spend(30);
        budget.unreserve(allowance - 30);
        assert_eq!((budget.used(), budget.reserved()), (30, 0));
        budget.release(30);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn growth_beyond_a_reservation_must_fit_unless_forced() {
        let budget = MemoryBudget::new(100);
        assert!(budget.try_grow(90));
        assert!(!budget.try_grow(20));
        budget.grow_forced(20);
        assert_eq!(budget.used(), 110);
        assert_eq!(budget.available(), 0);
        budget.release(110);
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn giving_back_wakes_waiters() {
        let budget = MemoryBudget::new(10);
        let held = budget.try_reserve(10).expect("fits");
        let waiter = {
            let budget = budget.clone();
            tokio::spawn(async move {
                loop {
                    let freed = budget.freed();
                    tokio::pin!(freed);
                    freed.as_mut().enable();
                    if let Some(reservation) = budget.try_reserve(5) {
                        return reservation.bytes();
                    }
                    freed.await;
                }
            })
        };
        tokio::task::yield_now().await;
        drop(held);
        assert_eq!(waiter.await.expect("the waiter ends"), 5);
    }
}
