//! Admission: what a request needs before it may take an instance.
//!
//! A request is admitted by bytes, not only by free instances: it first
//! reserves its [`BodySize`]'s bytes in the memory budget, then takes an idle
//! instance. While it waits for either it holds no body (the client is held
//! by TCP back-pressure) and one place in a bounded queue; past the queue's
//! capacity or timeout it gets 503. A request that could never fit the
//! budget is refused at once.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Linear memory a call needs beyond its body: the guest's chunk buffer,
/// the hash state, the answer.
pub const CALL_OVERHEAD: u64 = 1 << 20;

/// What an upload of undeclared length reserves before it starts; past
/// that it takes what the budget has free as it grows, or fails with 413.
pub const UNDECLARED_UPLOAD_RESERVE: u64 = 16 << 20;

/// The body a call will hold in its instance's linear memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodySize {
    /// No body: listings, deletes, metadata.
    None,
    /// A body of this many bytes (a declared upload, or a stored file).
    Known(u64),
    /// An upload with no declared length.
    Unknown,
}

impl BodySize {
    /// Bytes of the memory budget the call reserves.
    pub fn reservation(self) -> u64 {
        CALL_OVERHEAD
            + match self {
                Self::None => 0,
                Self::Known(bytes) => bytes,
                Self::Unknown => UNDECLARED_UPLOAD_RESERVE,
            }
    }

    /// Body bytes the call will buffer, as far as is known.
    pub fn body_bytes(self) -> u64 {
        match self {
            Self::Known(bytes) => bytes,
            Self::None | Self::Unknown => 0,
        }
    }
}

/// A place in the wait queue, given back on drop.
#[derive(Debug)]
pub(crate) struct QueueSlot<'a>(&'a AtomicUsize);

impl<'a> QueueSlot<'a> {
    /// A place, if fewer than `capacity` are taken.
    pub(crate) fn take(waiting: &'a AtomicUsize, capacity: usize) -> Option<Self> {
        let before = waiting.fetch_add(1, Ordering::AcqRel);
        let slot = Self(waiting);
        (before < capacity).then_some(slot)
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_cover_the_body_and_the_call() {
        assert_eq!(BodySize::None.reservation(), CALL_OVERHEAD);
        assert_eq!(BodySize::Known(10).reservation(), CALL_OVERHEAD + 10);
        assert_eq!(
            BodySize::Unknown.reservation(),
            CALL_OVERHEAD + UNDECLARED_UPLOAD_RESERVE
        );
    }

    #[test]
    fn the_queue_holds_at_most_its_capacity() {
        let waiting = AtomicUsize::new(0);
        let first = QueueSlot::take(&waiting, 2);
        let second = QueueSlot::take(&waiting, 2);
        assert!(first.is_some() && second.is_some());
        assert!(QueueSlot::take(&waiting, 2).is_none());
        drop(first);
        assert!(QueueSlot::take(&waiting, 2).is_some());
        drop(second);
        assert_eq!(waiting.load(Ordering::Relaxed), 0);
    }
}
