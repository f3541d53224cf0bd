//! The restart-budget threshold: the lowest threshold whose restart rate
//! stays within a budget, from the memory footprints of single requests.
//!
//! An instance is replaced when a request leaves it above the threshold T.
//! Replacing keeps every instance at or under T between requests, so a
//! request triggers a restart exactly when its own footprint X (the linear
//! memory it needs) is above T: the restart rate is `P(X > T)`, a property
//! of the workload alone. Restarting does not change it, so a threshold
//! chosen this way cannot ratchet down into churn the way one over
//! per-instance medians can (restarts pull the medians down, section 6 of
//! the paper).
//!
//! A footprint is seen exactly when the request grew its instance (the
//! memory after it), and only bounded otherwise (it fit in what the
//! instance already had: `X ≤ memory`). So the distribution of X is
//! estimated with the product-limit estimator for left-censored data (the
//! "reverse" Kaplan–Meier): distribution-free, and exact when nothing is
//! censored.
//!
//! `P(X > T)` is the rate of the traffic the footprints came from. When
//! footprints creep up, the traffic to come is larger than the traffic
//! seen, and a threshold at the seen quantile restarts every request that
//! reaches a new size. [`rising_lead`] tells a steady rise from noise in
//! the quantiles of consecutive parts of the window and says how far ahead
//! of the latest to put the threshold.

use serde::Serialize;

/// What one request showed of its memory footprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "bytes")]
pub enum Footprint {
    /// The request grew its instance to this many bytes: its footprint.
    Grew(u64),
    /// The request fit in the instance's memory of this many bytes: its
    /// footprint is at most that.
    Within(u64),
}

impl Footprint {
    /// The observation for a request that found its instance at `before`
    /// bytes and left it at `after`.
    pub fn observed(before: u64, after: u64) -> Self {
        if after > before {
            Self::Grew(after)
        } else {
            Self::Within(before)
        }
    }
}

/// The restart-budget threshold and what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetEstimate {
    /// The restart budget: the largest fraction of requests that may end in
    /// a restart.
    pub budget: f64,
    /// Requests observed.
    pub n: usize,
    /// Of those, requests that grew their instance (exact footprints).
    pub grew: usize,
    /// The estimated fraction of requests whose footprint is above the
    /// threshold: the restart rate it should give.
    pub expected_restart_rate: f64,
    /// What the method gave, before the floor.
    pub raw_threshold_bytes: u64,
    pub floor_bytes: Option<u64>,
    /// Footprints were rising ([`rising_lead`]): the threshold was raised
    /// ahead of them to this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lead_bytes: Option<u64>,
    /// The threshold: the raw one, raised to the floor (and to the lead).
    pub threshold_bytes: u64,
}

impl BudgetEstimate {
    /// Raise the threshold to `lead` (a rising trend's), if that is higher.
    pub fn lead_to(mut self, lead: u64) -> Self {
        if lead > self.threshold_bytes {
            self.lead_bytes = Some(lead);
            self.threshold_bytes = lead;
        }
        self
    }
}

/// Where to put the threshold when the restart-budget thresholds of four
/// consecutive parts of the footprints, oldest first, rise steadily: the
/// latest plus the mean rise from one part to the next, so the threshold
/// leads the sizes by one part rather than trailing them by half a window.
/// (Measured on the policy suite's drift: a quarter of that lead is under
/// a 64 KiB page and changes nothing, 3 % restarts as with none; the whole
/// lead gives 0.3–1.3 %.)
/// `None` unless they never fall and rise at two steps of the three at
/// least: one step up is a burst of large requests in the latest part, not
/// a trend; in steady traffic four parts come out strictly in order one
/// time in 24, and then the lead is only their spread.
pub fn rising_lead(parts: [u64; 4]) -> Option<u64> {
    let steady = parts.windows(2).all(|pair| pair[0] <= pair[1]);
    let rises = parts.windows(2).filter(|pair| pair[0] < pair[1]).count();
    let [oldest, .., latest] = parts;
    (steady && rises >= 2).then(|| latest + (latest - oldest) / 3)
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error("the restart budget must lie strictly between 0 and 1, got {0}")]
    InvalidBudget(f64),
    #[error("no request observed yet")]
    NoObservations,
}

/// The lowest threshold whose estimated restart rate, `P(X > T)`, is at
/// most `budget`, never below `floor_bytes`.
///
/// Candidates are the exact footprints seen (the rate only changes there)
/// and the floor. With fewer than `1 / budget` observations the empirical
/// rate of even the largest footprint is above the budget, so the threshold
/// is the largest footprint seen: a request larger than any before still
/// restarts its instance.
pub fn restart_budget_threshold(
    observations: &[Footprint],
    budget: f64,
    floor_bytes: Option<u64>,
) -> Result<BudgetEstimate, BudgetError> {
    if !(budget > 0.0 && budget < 1.0) {
        return Err(BudgetError::InvalidBudget(budget));
    }
    if observations.is_empty() {
        return Err(BudgetError::NoObservations);
    }
    let mut exact: Vec<u64> = Vec::new();
    let mut bounds: Vec<u64> = Vec::new();
    for observation in observations {
        match *observation {
            Footprint::Grew(bytes) => exact.push(bytes),
            Footprint::Within(bytes) => bounds.push(bytes),
        }
    }
    exact.sort_unstable();
    bounds.sort_unstable();
    let floor = floor_bytes.unwrap_or(0);

    // Walk the distinct exact footprints from the largest down, keeping
    // `at_most` = F(value) = P(X ≤ value) = ∏ (1 − d/n) over the exact
    // values above it, where d is how many footprints equal a value and n
    // how many are known to be at most it (exact ones, and bounds at or
    // under it; a larger bound says nothing about a smaller value). The
    // rate at a threshold just under `value` is 1 − F(value)·(1 − d/n).
    let mut at_most = 1.0_f64;
    let mut threshold = None;
    let mut end = exact.len();
    while end > 0 {
        let value = exact[end - 1];
        let start = exact.partition_point(|&bytes| bytes < value);
        let ties = end - start;
        let known_at_most = end + bounds.partition_point(|&bytes| bytes <= value);
        let under = at_most * (1.0 - ties as f64 / known_at_most as f64);
        // (A rate equal to the budget is within it, rounding aside.)
        if value <= floor || 1.0 - under > budget + 1e-12 {
            // A threshold under `value` would restart too often (or sit
            // under the floor): `value` is the lowest that keeps the budget.
            threshold = Some(value);
            break;
        }
        at_most = under;
        end = start;
    }
    // Without a stop, every exact footprint may restart within the budget.
    let raw = threshold.unwrap_or(floor);
    let rate_at_threshold = 1.0 - at_most;
    Ok(BudgetEstimate {
        budget,
        n: observations.len(),
        grew: exact.len(),
        expected_restart_rate: rate_at_threshold.max(0.0),
        raw_threshold_bytes: raw,
        floor_bytes,
        lead_bytes: None,
        threshold_bytes: raw.max(floor),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn exact_footprints_give_the_empirical_upper_quantile() {
        // 1..=200: at most 1 % above the threshold means 2 of 200 above it.
        let observations: Vec<Footprint> = (1..=200).map(Footprint::Grew).collect();
        let estimate = restart_budget_threshold(&observations, 0.01, None).unwrap();
        assert_eq!(estimate.threshold_bytes, 198);
        assert!((estimate.expected_restart_rate - 0.01).abs() < 1e-12);
        assert_eq!((estimate.n, estimate.grew), (200, 200));
    }

    #[test]
    fn too_few_requests_keep_the_largest_footprint() {
        let observations: Vec<Footprint> = (1..=50).map(Footprint::Grew).collect();
        let estimate = restart_budget_threshold(&observations, 0.01, None).unwrap();
        assert_eq!(estimate.threshold_bytes, 50);
        assert_eq!(estimate.expected_restart_rate, 0.0);
    }

    #[test]
    fn one_rare_large_request_is_above_the_threshold() {
        // The user: small files on one warm instance, one 100 MB
        // file, then small files again that fit in what it holds.
        let mut observations = vec![
            Footprint::Grew(1_500_000),
            Footprint::Grew(2_000_000),
            Footprint::Within(2_000_000),
        ];
        observations.extend(std::iter::repeat_n(Footprint::Within(2_000_000), 100));
        observations.push(Footprint::Grew(101_000_000));
        observations.extend(std::iter::repeat_n(Footprint::Within(101_000_000), 100));
        let estimate = restart_budget_threshold(&observations, 0.01, Some(1_300_000)).unwrap();
        assert_eq!(estimate.threshold_bytes, 2_000_000);
    }

    #[test]
    fn nothing_grew_means_the_floor() {
        let observations = vec![Footprint::Within(1_000_000); 10];
        let estimate = restart_budget_threshold(&observations, 0.01, Some(1_200_000)).unwrap();
        assert_eq!(estimate.threshold_bytes, 1_200_000);
        assert_eq!(estimate.grew, 0);
    }

    #[test]
    fn the_floor_bounds_the_threshold() {
        let observations: Vec<Footprint> = (1..=1000).map(Footprint::Grew).collect();
        let estimate = restart_budget_threshold(&observations, 0.5, Some(700)).unwrap();
        assert_eq!(estimate.raw_threshold_bytes, 700);
        assert_eq!(estimate.threshold_bytes, 700);
    }

    #[test]
    fn bad_input_is_refused() {
        let one = [Footprint::Grew(1)];
        assert_eq!(
            restart_budget_threshold(&one, 0.0, None),
            Err(BudgetError::InvalidBudget(0.0))
        );
        assert_eq!(
            restart_budget_threshold(&[], 0.01, None),
            Err(BudgetError::NoObservations)
        );
    }

    #[test]
    fn a_steady_rise_leads_by_one_part() {
        assert_eq!(rising_lead([100, 130, 160, 190]), Some(220));
        // Ties on the way (sizes on 64 KiB pages) are still a rise.
        assert_eq!(rising_lead([100, 100, 160, 190]), Some(220));
        // One step up is a burst, not a trend.
        assert_eq!(rising_lead([100, 100, 100, 190]), None);
        // A fall anywhere, or no rise at all, is noise.
        assert_eq!(rising_lead([100, 170, 160, 190]), None);
        assert_eq!(rising_lead([190, 160, 130, 100]), None);
        assert_eq!(rising_lead([150; 4]), None);
    }

    #[test]
    fn a_lead_only_raises() {
        let observations: Vec<Footprint> = (1..=200).map(Footprint::Grew).collect();
        let estimate = restart_budget_threshold(&observations, 0.01, None).unwrap();
        assert_eq!(estimate.clone().lead_to(100), estimate);
        let led = estimate.lead_to(250);
        assert_eq!((led.threshold_bytes, led.lead_bytes), (250, Some(250)));
        assert_eq!(led.raw_threshold_bytes, 198);
    }

    #[test]
    fn observed_tells_growth_from_fit() {
        assert_eq!(Footprint::observed(10, 20), Footprint::Grew(20));
        assert_eq!(Footprint::observed(20, 20), Footprint::Within(20));
    }

    proptest! {
        /// Without censoring, the share of footprints above the threshold
        /// is within the budget, and the next lower footprint would break it.
        #[test]
        fn exact_rate_is_within_budget_and_lowest(
            sizes in prop::collection::vec(1u64..10_000, 1..400),
            budget in 0.001f64..0.5,
        ) {
            let observations: Vec<Footprint> = sizes.iter().copied().map(Footprint::Grew).collect();
            let estimate = restart_budget_threshold(&observations, budget, None).unwrap();
            let n = sizes.len() as f64;
            let above = |t: u64| sizes.iter().filter(|&&s| s > t).count() as f64 / n;
            prop_assert!(above(estimate.threshold_bytes) <= budget + 1e-9);
            if let Some(&lower) = sizes.iter().filter(|&&s| s < estimate.threshold_bytes).max() {
                prop_assert!(above(lower) > budget - 1e-9);
            }
        }

        /// Censoring never makes the estimate restart more than the exact
        /// footprints would allow when the bounds are exact values too.
        #[test]
        fn bounds_at_or_under_the_threshold_change_nothing(
            sizes in prop::collection::vec(100u64..10_000, 100..300),
            small in prop::collection::vec(1u64..100, 0..50),
        ) {
            let mut observations: Vec<Footprint> = sizes.iter().copied().map(Footprint::Grew).collect();
            let plain = restart_budget_threshold(&observations, 0.05, None).unwrap();
            observations.extend(small.iter().map(|&s| Footprint::Within(s)));
            let censored = restart_budget_threshold(&observations, 0.05, None).unwrap();
            prop_assert!(censored.threshold_bytes <= plain.threshold_bytes);
        }
    }
}
