//! Restart thresholds for pooled Wasm instances, from their own memory.
//!
//! Pure statistics, no I/O beyond parsing: samples `(timestamp, instance,
//! bytes)` → each instance's median after its warm-up → a threshold over
//! those medians → which instances are above it. This is the paper's
//! Estimator (`../shared/seeds/000_*`, section 3), with two more methods and
//! a normality diagnostic for its open problems (section 6), and the
//! restart-budget threshold over single requests' footprints that answers
//! them.
//!
//! Layout:
//! - [`samples`]: the sample type and its CSV form.
//! - [`warmup`]: telling warm-up samples apart; the median.
//! - [`threshold`]: the `ci-mean`, `prediction` and `quantile` methods and
//!   the floor.
//! - [`normality`]: the Shapiro–Wilk test reported beside every threshold.
//! - [`footprint`]: the restart-budget threshold, from what each request
//!   needed rather than from per-instance medians.
//!
//! The `estimator` binary (`src/main.rs`) runs this on a sample CSV.

pub mod footprint;
pub mod normality;
pub mod samples;
pub mod threshold;
pub mod warmup;

use std::collections::BTreeMap;

pub use footprint::{
    BudgetError, BudgetEstimate, Footprint, restart_budget_threshold, rising_lead,
};
pub use samples::{Sample, read_csv, write_csv};
pub use threshold::{Estimate, EstimateError, Method, estimate};
pub use warmup::Warmup;

/// One instance's samples, summarised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceSummary {
    /// Median of the samples after warm-up.
    pub median: f64,
    /// How many samples followed the warm-up.
    pub steady_samples: usize,
}

/// Each instance's samples after its warm-up, summarised, by instance id.
/// Instances with no steady sample are left out.
pub fn summarize(samples: &[Sample], warmup: Warmup) -> BTreeMap<u64, InstanceSummary> {
    let mut by_instance: BTreeMap<u64, Vec<(i64, u64)>> = BTreeMap::new();
    for sample in samples {
        by_instance
            .entry(sample.instance)
            .or_default()
            .push((sample.timestamp_ms, sample.bytes));
    }
    by_instance
        .into_iter()
        .filter_map(|(instance, mut series)| {
            series.sort_unstable();
            let bytes: Vec<u64> = series.into_iter().map(|(_, bytes)| bytes).collect();
            let steady = warmup.steady(&bytes);
            warmup::median(steady).map(|median| {
                let summary = InstanceSummary {
                    median,
                    steady_samples: steady.len(),
                };
                (instance, summary)
            })
        })
        .collect()
}

/// Each instance's median memory after its warm-up, by instance id.
/// Instances with no steady sample are left out.
pub fn instance_medians(samples: &[Sample], warmup: Warmup) -> BTreeMap<u64, f64> {
    summarize(samples, warmup)
        .into_iter()
        .map(|(instance, summary)| (instance, summary.median))
        .collect()
}

/// Everything at once: medians after warm-up, then the threshold over them.
pub fn threshold_from_samples(
    samples: &[Sample],
    warmup: Warmup,
    method: Method,
    alpha: f64,
    floor_bytes: Option<u64>,
) -> Result<Estimate, EstimateError> {
    let medians: Vec<f64> = instance_medians(samples, warmup).into_values().collect();
    estimate(&medians, method, alpha, floor_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(timestamp_ms: i64, instance: u64, bytes: u64) -> Sample {
        Sample {
            timestamp_ms,
            instance,
            bytes,
        }
    }

    #[test]
    fn medians_per_instance_follow_time_not_file_order() {
        let samples = [
            sample(30, 1, 300),
            sample(10, 1, 100),
            sample(20, 1, 300),
            sample(40, 1, 500),
            sample(10, 2, 50),
            sample(20, 2, 60),
        ];
        // Instance 1 in time order: 100, 300, 300, 500 → steady from 300.
        // Instance 2 never holds still for two samples: left out.
        let medians = instance_medians(&samples, Warmup::Stable(2));
        assert_eq!(medians, BTreeMap::from([(1, 300.0)]));
        let all = instance_medians(&samples, Warmup::None);
        assert_eq!(all, BTreeMap::from([(1, 300.0), (2, 55.0)]));
        assert_eq!(summarize(&samples, Warmup::Stable(2))[&1].steady_samples, 3);
    }
}
