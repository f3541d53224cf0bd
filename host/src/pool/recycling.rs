//! Whether an instance is kept or replaced, and why: one pure function,
//! [`decide`], from an instance's record, the occasion and the pool's
//! limits. No clock, no lock, no I/O: every rule of recycling is here and
//! unit-tested; `mod.rs` only gathers the figures, takes the locks and makes
//! the replacements.
//!
//! It lives in `pool/`, not `recycler/`, because every input but the
//! threshold is the pool's own (its instances, the recycling cap, the
//! budget's need for room) and the pool acts on the answer the moment a
//! request ends; the recycler only learns the threshold and hands it over.

use serde::Serialize;

/// Why an instance was replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceReason {
    /// It trapped (including growth past the memory cap, or a timeout).
    Trap,
    /// An operator asked for it through the admin API.
    Manual,
    /// The request that just ended took its linear memory above the
    /// restart threshold.
    Threshold,
    /// The threshold moved below it (the workload drifted, or the estimate
    /// learned more) while it sat above.
    Drift,
    /// The memory budget was short and it was idle and grown.
    Budget,
}

/// What the pool knows of one instance when it decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Its linear memory now, in bytes.
    pub memory_bytes: u64,
    /// Requests it has served (a failed one included).
    pub requests: u64,
    /// An earlier request of its own took it over the threshold, but the
    /// recycling cap held it back ([`Decision::HeldBack`] for `Threshold`).
    pub held_back: bool,
    /// Set when it takes no new request, with why it is being replaced.
    pub draining: Option<ReplaceReason>,
}

/// When the pool asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    /// It comes back from a request: `failed` if the call failed, `grew`
    /// if the request raised its linear memory. Memory only grows during
    /// requests, so this catches every crossing of the threshold the
    /// moment it happens.
    CheckIn { grew: bool, failed: bool },
    /// The sweep after the threshold was set ([`super::Pool::enforce`]),
    /// while it sits idle.
    Sweep,
    /// A request waits for budget, and it sits idle.
    BudgetShort,
}

/// The pool's side of the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Replace instances above this many bytes; `None`: never.
    pub threshold: Option<u64>,
    /// Linear memory of a fresh instance, in bytes.
    pub baseline_bytes: u64,
    /// Requests an instance must have served before the threshold may
    /// replace it.
    pub min_requests: u64,
    /// Most replacements for the threshold under way at once (at least
    /// one, whatever is configured).
    pub max_recycling: usize,
    /// Replacements for the threshold under way now.
    pub recycling: usize,
}

/// What to do with the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep it serving.
    Keep,
    /// Replace it now; the replacement does not count against the
    /// recycling cap.
    Replace(ReplaceReason),
    /// Replace it now for the threshold (`Threshold` or `Drift`): the
    /// replacement takes one of the `max_recycling` places until it is
    /// made.
    Recycle(ReplaceReason),
    /// It is over the threshold for this reason, but every recycling place
    /// is taken: keep it serving; a later sweep replaces it.
    HeldBack(ReplaceReason),
}

impl Decision {
    /// What [`Record::held_back`] becomes when a check-in keeps the
    /// instance: whether its own request crossed the threshold, so a later
    /// sweep replaces it for `Threshold` rather than `Drift`.
    pub fn holds_back_threshold(self) -> bool {
        self == Self::HeldBack(ReplaceReason::Threshold)
    }
}

/// Keep or replace the instance `record` describes, on `occasion`.
pub fn decide(record: &Record, occasion: Occasion, limits: &Limits) -> Decision {
    match (occasion, record.draining) {
        (Occasion::CheckIn { failed: true, .. }, _) => Decision::Replace(ReplaceReason::Trap),
        // Marked while it served: now that it is back, it goes.
        (Occasion::CheckIn { .. }, Some(reason)) => Decision::Replace(reason),
        // Its replacement is already under way; do not start a second.
        (Occasion::Sweep | Occasion::BudgetShort, Some(_)) => Decision::Keep,
        (Occasion::CheckIn { grew, .. }, None) => over_threshold(record, grew, limits),
        (Occasion::Sweep, None) => over_threshold(record, false, limits),
        (Occasion::BudgetShort, None) if record.memory_bytes > limits.baseline_bytes => {
            Decision::Replace(ReplaceReason::Budget)
        }
        (Occasion::BudgetShort, None) => Decision::Keep,
    }
}

/// Recycle it if it is above the threshold and has served enough, within
/// the cap: for `Threshold` if a request of its own took it there (the
/// one that just ended, `grew`, or an earlier one the cap held back), else
/// for `Drift`.
fn over_threshold(record: &Record, grew: bool, limits: &Limits) -> Decision {
    let above = limits
        .threshold
        .is_some_and(|threshold| record.memory_bytes > threshold);
    if !above || record.requests < limits.min_requests {
        return Decision::Keep;
    }
    let reason = if grew || record.held_back {
        ReplaceReason::Threshold
    } else {
        ReplaceReason::Drift
    };
    if limits.recycling < limits.max_recycling.max(1) {
        Decision::Recycle(reason)
    } else {
        Decision::HeldBack(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// An idle instance at 3 MiB that served 10 requests.
    fn record() -> Record {
        Record {
            memory_bytes: 3 * MIB,
            requests: 10,
            held_back: false,
            draining: None,
        }
    }

    /// A 2 MiB threshold over 1 MiB fresh instances, at least 5 requests,
    /// two recycling places, none taken.
    fn limits() -> Limits {
        Limits {
            threshold: Some(2 * MIB),
            baseline_bytes: MIB,
            min_requests: 5,
            max_recycling: 2,
            recycling: 0,
        }
    }

    const GREW: Occasion = Occasion::CheckIn {
        grew: true,
        failed: false,
    };
    const STAYED: Occasion = Occasion::CheckIn {
        grew: false,
        failed: false,
    };

    #[test]
    fn below_and_at_the_threshold_it_is_kept() {
        for memory_bytes in [MIB, 2 * MIB] {
            let record = Record {
                memory_bytes,
                ..record()
            };
            for occasion in [GREW, STAYED, Occasion::Sweep] {
                assert_eq!(
                    decide(&record, occasion, &limits()),
                    Decision::Keep,
                    "{memory_bytes} on {occasion:?}"
                );
            }
        }
    }

    #[test]
    fn above_the_threshold_its_own_request_recycles_it_for_threshold() {
        assert_eq!(
            decide(&record(), GREW, &limits()),
            Decision::Recycle(ReplaceReason::Threshold)
        );
        // One byte over is over.
        let record = Record {
            memory_bytes: 2 * MIB + 1,
            ..record()
        };
        assert_eq!(
            decide(&record, GREW, &limits()),
            Decision::Recycle(ReplaceReason::Threshold)
        );
    }

    #[test]
    fn above_a_threshold_that_moved_below_it_is_drift() {
        // Its request did not grow it: the threshold came down to it.
        assert_eq!(
            decide(&record(), STAYED, &limits()),
            Decision::Recycle(ReplaceReason::Drift)
        );
        assert_eq!(
            decide(&record(), Occasion::Sweep, &limits()),
            Decision::Recycle(ReplaceReason::Drift)
        );
    }

    #[test]
    fn one_held_back_earlier_is_replaced_for_threshold_later() {
        let record = Record {
            held_back: true,
            ..record()
        };
        assert_eq!(
            decide(&record, Occasion::Sweep, &limits()),
            Decision::Recycle(ReplaceReason::Threshold)
        );
        assert_eq!(
            decide(&record, STAYED, &limits()),
            Decision::Recycle(ReplaceReason::Threshold)
        );
    }

    #[test]
    fn without_a_threshold_nothing_is_recycled() {
        let limits = Limits {
            threshold: None,
            ..limits()
        };
        let record = Record {
            memory_bytes: u64::MAX,
            held_back: true,
            ..record()
        };
        for occasion in [GREW, STAYED, Occasion::Sweep] {
            assert_eq!(decide(&record, occasion, &limits), Decision::Keep);
        }
    }

    #[test]
    fn too_few_requests_keep_it_however_large() {
        let young = Record {
            requests: 4,
            ..record()
        };
        assert_eq!(decide(&young, GREW, &limits()), Decision::Keep);
        assert_eq!(decide(&young, Occasion::Sweep, &limits()), Decision::Keep);
        let enough = Record {
            requests: 5,
            ..record()
        };
        assert_eq!(
            decide(&enough, GREW, &limits()),
            Decision::Recycle(ReplaceReason::Threshold)
        );
    }

    #[test]
    fn a_full_cap_holds_it_back_with_its_reason() {
        let full = Limits {
            recycling: 2,
            ..limits()
        };
        let held = decide(&record(), GREW, &full);
        assert_eq!(held, Decision::HeldBack(ReplaceReason::Threshold));
        assert!(held.holds_back_threshold());
        let drifted = decide(&record(), STAYED, &full);
        assert_eq!(drifted, Decision::HeldBack(ReplaceReason::Drift));
        assert!(!drifted.holds_back_threshold());
        assert_eq!(
            decide(&record(), Occasion::Sweep, &full),
            Decision::HeldBack(ReplaceReason::Drift)
        );
        // One place left is a place.
        let one_left = Limits {
            recycling: 1,
            ..limits()
        };
        assert_eq!(
            decide(&record(), GREW, &one_left),
            Decision::Recycle(ReplaceReason::Threshold)
        );
    }

    #[test]
    fn a_cap_of_zero_still_recycles_one_at_a_time() {
        let zero = Limits {
            max_recycling: 0,
            ..limits()
        };
        assert_eq!(
            decide(&record(), GREW, &zero),
            Decision::Recycle(ReplaceReason::Threshold)
        );
        let busy = Limits {
            recycling: 1,
            ..zero
        };
        assert_eq!(
            decide(&record(), GREW, &busy),
            Decision::HeldBack(ReplaceReason::Threshold)
        );
    }

    #[test]
    fn a_failed_call_replaces_it_for_trap_whatever_else_holds() {
        let failed = Occasion::CheckIn {
            grew: true,
            failed: true,
        };
        let draining = Record {
            draining: Some(ReplaceReason::Manual),
            ..record()
        };
        let full = Limits {
            recycling: 2,
            threshold: None,
            ..limits()
        };
        for record in [record(), draining] {
            for limits in [limits(), full] {
                assert_eq!(
                    decide(&record, failed, &limits),
                    Decision::Replace(ReplaceReason::Trap)
                );
            }
        }
    }

    #[test]
    fn a_draining_instance_is_replaced_at_check_in_for_its_reason_and_uncapped() {
        let full = Limits {
            recycling: 2,
            ..limits()
        };
        for reason in [
            ReplaceReason::Manual,
            ReplaceReason::Threshold,
            ReplaceReason::Drift,
            ReplaceReason::Budget,
        ] {
            let record = Record {
                draining: Some(reason),
                memory_bytes: MIB,
                requests: 0,
                ..record()
            };
            for limits in [limits(), full] {
                assert_eq!(decide(&record, STAYED, &limits), Decision::Replace(reason));
            }
        }
    }

    #[test]
    fn an_instance_already_draining_is_left_to_its_replacement() {
        let record = Record {
            draining: Some(ReplaceReason::Manual),
            memory_bytes: 100 * MIB,
            ..record()
        };
        assert_eq!(decide(&record, Occasion::Sweep, &limits()), Decision::Keep);
        assert_eq!(
            decide(&record, Occasion::BudgetShort, &limits()),
            Decision::Keep
        );
    }

    #[test]
    fn a_short_budget_replaces_only_grown_instances_uncapped() {
        let full_without_threshold = Limits {
            threshold: None,
            recycling: 2,
            ..limits()
        };
        let grown = Record {
            memory_bytes: MIB + 1,
            requests: 0,
            ..record()
        };
        let fresh = Record {
            memory_bytes: MIB,
            ..record()
        };
        for limits in [limits(), full_without_threshold] {
            assert_eq!(
                decide(&grown, Occasion::BudgetShort, &limits),
                Decision::Replace(ReplaceReason::Budget)
            );
            assert_eq!(
                decide(&fresh, Occasion::BudgetShort, &limits),
                Decision::Keep
            );
        }
    }

    #[test]
    fn only_a_threshold_held_back_counts_as_its_own_crossing() {
        assert!(!Decision::Keep.holds_back_threshold());
        assert!(!Decision::Recycle(ReplaceReason::Threshold).holds_back_threshold());
        assert!(!Decision::Replace(ReplaceReason::Threshold).holds_back_threshold());
        assert!(Decision::HeldBack(ReplaceReason::Threshold).holds_back_threshold());
    }
}
