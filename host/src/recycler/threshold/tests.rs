//! The threshold's policy over virtual time: simulated requests and
//! samples, no clock, no pool.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::recycler::settings::Method;

const MIB: u64 = 1 << 20;
const FRESH: u64 = MIB;

fn config() -> PolicyConfig {
    PolicyConfig {
        warmup: Warmup::Stable(2),
        min_requests: 32,
        footprint_window: 1000,
        calibration_instances: 2,
        calibration_samples: 3,
        calibration_requests: 5,
        rolling_window_ms: 60_000,
        floor_margin: 256 * 1024,
    }
}

fn settings(mode: Mode, method: Method) -> Settings {
    Settings {
        mode,
        method,
        alpha: 0.05,
        restart_budget: 0.01,
        fixed_threshold: None,
    }
}

/// A virtual pool: one instance under `mru` at concurrency 1, serving
/// requests whose footprints are given, replaced when the policy's
/// threshold says so. Returns the policy, the thresholds after each
/// request and the restarts.
struct Simulation {
    policy: Policy,
    memory: u64,
    footprints: Vec<Footprint>,
    now_ms: i64,
    threshold: Option<u64>,
    restarts: u64,
}

impl Simulation {
    fn new(mode: Mode, method: Method) -> Self {
        Self {
            policy: Policy::new(config(), settings(mode, method), 0).unwrap(),
            memory: FRESH,
            footprints: Vec::new(),
            now_ms: 0,
            threshold: None,
            restarts: 0,
        }
    }

    /// Serve one request needing `need` bytes, then step the policy
    /// (as the shell does every few requests; here every request).
    fn serve(&mut self, need: u64) {
        self.now_ms += 100;
        let before = self.memory;
        self.memory = self.memory.max(need);
        self.footprints
            .push(Footprint::observed(before, self.memory));
        if self.threshold.is_some_and(|t| self.memory > t) {
            self.memory = FRESH;
            self.restarts += 1;
        }
        let window = self.footprints.len().saturating_sub(1000);
        self.threshold = self.policy.step(&Observed {
            now_ms: self.now_ms,
            baseline_bytes: FRESH,
            samples: &[],
            served: &[],
            footprints: &self.footprints[window..],
            requests_recorded: self.footprints.len() as u64,
        });
    }
}

/// Sizes 1.1..=2 MiB in a fixed shuffle, with one in `rare` of 100 MiB.
fn small(i: u64) -> u64 {
    FRESH + (i * 7919 % 1000 + 100) * MIB / 1000
}

#[test]
fn restart_budget_engages_after_min_requests_at_concurrency_one() {
    let mut sim = Simulation::new(Mode::Rolling, Method::RestartBudget);
    for i in 0..31 {
        sim.serve(small(i));
        assert_eq!(sim.threshold, None, "request {i}");
    }
    assert!(matches!(
        sim.policy.calibration(),
        Calibration::Collecting {
            progress: Progress::Requests {
                seen: 31,
                needed: 32
            },
            ..
        }
    ));
    sim.serve(small(31));
    let threshold = sim.threshold.expect("a threshold from the 32nd request");
    assert!(threshold < 100 * MIB);
    // One rare large request: its instance is replaced at once.
    sim.serve(100 * MIB);
    assert_eq!(sim.restarts, 1);
    assert_eq!(sim.memory, FRESH);
}

#[test]
fn restart_rate_stays_within_the_budget() {
    let mut sim = Simulation::new(Mode::Rolling, Method::RestartBudget);
    for i in 0..5000 {
        sim.serve(small(i));
    }
    let rate = sim.restarts as f64 / 5000.0;
    assert!(rate <= 0.012, "restart rate {rate}");
    assert!(rate > 0.0, "restart rate {rate}");
}

#[test]
fn the_threshold_follows_drift_up_with_a_bounded_lag() {
    let mut sim = Simulation::new(Mode::Rolling, Method::RestartBudget);
    let first = {
        for i in 0..1000 {
            sim.serve(small(i));
        }
        sim.threshold.unwrap()
    };
    let restarts_before = sim.restarts;
    for i in 1000..5000 {
        // Sizes creep up by a fifth over the next 4000 requests.
        let drift = 1.0 + 0.2 * (i - 1000) as f64 / 4000.0;
        sim.serve((small(i) as f64 * drift) as u64);
    }
    let threshold = sim.threshold.unwrap();
    assert!(
        threshold as f64 > first as f64 * 1.15,
        "{first} → {threshold}"
    );
    // The window lags the drift by half its length: more restarts than
    // the budget, but bounded (see the README's drift workload).
    let rate = (sim.restarts - restarts_before) as f64 / 4000.0;
    assert!(rate <= 0.05, "restart rate {rate} under drift");
}

/// The policy suite's drift workload (`loadgen policy`, workload
/// `drift`): 256 files of normal sizes, N(2 MiB, 0.5 MiB), footprints on
/// 64 KiB pages, read so each request draws from a quarter of the files,
/// sorted by size, that slides from the smallest to the largest over
/// `requests` reads. Deterministic (a fixed linear congruential stream).
fn drifting(requests: u64) -> Vec<u64> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    const PAGE: u64 = 64 * 1024;
    let mut sizes: Vec<u64> = (0..256)
        .map(|_| {
            // Irwin–Hall: twelve uniforms less six is close to N(0, 1).
            let z = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
            let size = (2.0 + 0.5 * z).max(0.0625) * MIB as f64;
            FRESH + (size as u64).div_ceil(PAGE) * PAGE
        })
        .collect();
    sizes.sort_unstable();
    let width = sizes.len() / 4;
    (0..requests)
        .map(|number| {
            let start = ((sizes.len() - width) as f64 * number as f64 / requests as f64) as usize;
            sizes[start + (uniform() * width as f64) as usize]
        })
        .collect()
}

/// The default pool at concurrency 1: 16 instances under `memory-aware`
/// dispatch (the smallest instance that holds the body, else the largest),
/// the policy stepped every 8 requests as the shell steps it. Each request
/// needs its footprint; its body is that less 256 KiB. Returns the
/// restarts and the last threshold.
fn memory_aware_pool(needs: &[u64]) -> (u64, Option<u64>) {
    let mut policy =
        Policy::new(config(), settings(Mode::Rolling, Method::RestartBudget), 0).unwrap();
    let mut instances = [FRESH; 16];
    let mut footprints = Vec::new();
    let (mut threshold, mut restarts) = (None, 0);
    for &need in needs {
        let body = need - 256 * 1024;
        let fitting = (0..16)
            .filter(|&at| instances[at] >= body)
            .min_by_key(|&at| instances[at]);
        let at = fitting
            .or_else(|| (0..16).max_by_key(|&at| instances[at]))
            .unwrap();
        let before = instances[at];
        instances[at] = before.max(need);
        footprints.push(Footprint::observed(before, instances[at]));
        if threshold.is_some_and(|t| instances[at] > t) {
            instances[at] = FRESH;
            restarts += 1;
        }
        if footprints.len() % 8 == 0 {
            let window = footprints.len().saturating_sub(1000);
            threshold = policy.step(&Observed {
                footprints: &footprints[window..],
                requests_recorded: footprints.len() as u64,
                ..observed(0, &[], &[])
            });
            // A threshold that fell under an idle instance replaces it
            // (the pool's sweep, reason `drift`): a restart too.
            for memory in &mut instances {
                if threshold.is_some_and(|t| *memory > t) {
                    *memory = FRESH;
                    restarts += 1;
                }
            }
        }
    }
    (restarts, threshold)
}

#[test]
fn sizes_that_keep_creeping_up_stay_within_the_budget() {
    // Trailing the sizes, a threshold at the window's quantile restarts
    // every request that reaches a new page: about 3 % of requests here,
    // as in the suite. Leading them by the quarters' rise keeps within
    // 1.2 %.
    let needs = drifting(1600);
    let (restarts, threshold) = memory_aware_pool(&needs);
    let rate = restarts as f64 / needs.len() as f64;
    assert!(rate <= 0.012, "restart rate {rate} under drift");
    // It is not simply the largest size so far.
    let largest = needs.iter().copied().max().unwrap();
    assert!(threshold.unwrap() < largest + MIB);
    // Where sizes hold still, the budget is used, not overshot.
    let steady: Vec<u64> = (0..5000).map(small).collect();
    let (restarts, _) = memory_aware_pool(&steady);
    let rate = restarts as f64 / steady.len() as f64;
    assert!((0.002..=0.012).contains(&rate), "restart rate {rate}");
}

#[test]
fn a_rising_trend_leads_and_holds_lowering_off() {
    let config = PolicyConfig {
        footprint_window: 400,
        ..config()
    };
    let mut policy =
        Policy::new(config, settings(Mode::Rolling, Method::RestartBudget), 0).unwrap();
    // `later` requests pass with the same footprints in the window.
    let step = |policy: &mut Policy, footprints: &[Footprint], later: u64| {
        let window = footprints.len().saturating_sub(400);
        policy.step(&Observed {
            footprints: &footprints[window..],
            requests_recorded: footprints.len() as u64 + later,
            ..observed(0, &[], &[])
        })
    };
    let page = 64 * 1024;
    let level = |pages: u64| Footprint::Grew(2 * MIB + pages * page);
    // Four quarters of 100, each a page above the one before: the
    // threshold leads the last by the mean rise.
    let lead = 2 * MIB + 4 * page;
    let mut footprints: Vec<Footprint> = (0..4).flat_map(|q| [level(q); 100]).collect();
    assert_eq!(step(&mut policy, &footprints, 0), Some(lead));
    match policy.current() {
        Some(ThresholdEstimate::RestartBudget(estimate)) => {
            assert_eq!(estimate.lead_bytes, Some(lead));
            assert_eq!(estimate.raw_threshold_bytes, 2 * MIB + 3 * page);
        }
        other => panic!("no restart-budget estimate: {other:?}"),
    }
    // Now quarters of [3, 0, 0, 2] pages at their top: no steady rise,
    // and the estimate (the latest quarter's, 2 pages) is below the lead;
    // but the latest quarter is above the whole window (0 pages: four
    // large ones in 400 are within 1 %), so the threshold holds, however
    // many requests pass.
    footprints.extend([level(0); 400]);
    let window = footprints.len() - 400;
    footprints[window] = level(3);
    footprints[window + 1] = level(3);
    footprints[window + 398] = level(2);
    footprints[window + 399] = level(2);
    for later in [0, 100, 300] {
        assert_eq!(step(&mut policy, &footprints, later), Some(lead), "{later}");
    }
    // Steady again: after the hold of 1 / budget requests the threshold
    // follows the estimate down.
    footprints.extend([level(0); 400]);
    assert_eq!(step(&mut policy, &footprints, 300), Some(lead));
    assert_eq!(step(&mut policy, &footprints, 400), Some(2 * MIB));
}

#[test]
fn the_threshold_rises_at_once_and_lowers_only_after_a_hold() {
    let config = PolicyConfig {
        footprint_window: 200,
        ..config()
    };
    let mut policy =
        Policy::new(config, settings(Mode::Rolling, Method::RestartBudget), 0).unwrap();
    let mut footprints = Vec::new();
    let step = |policy: &mut Policy, footprints: &[Footprint]| {
        let window = footprints.len().saturating_sub(200);
        policy.step(&Observed {
            footprints: &footprints[window..],
            requests_recorded: footprints.len() as u64,
            ..observed(0, &[], &[])
        })
    };
    footprints.extend([Footprint::Grew(2 * MIB); 200]);
    assert_eq!(step(&mut policy, &footprints), Some(2 * MIB));
    // Three large footprints in 200 are over the 1 % budget: up at once.
    footprints.extend([Footprint::Grew(50 * MIB); 3]);
    assert_eq!(step(&mut policy, &footprints), Some(50 * MIB));
    // They leave the window: the estimate falls, the threshold holds
    // for 1 / budget = 100 requests, then follows.
    footprints.extend([Footprint::Grew(2 * MIB); 203]);
    assert_eq!(step(&mut policy, &footprints), Some(50 * MIB));
    footprints.extend([Footprint::Grew(2 * MIB); 99]);
    assert_eq!(step(&mut policy, &footprints), Some(50 * MIB));
    footprints.push(Footprint::Grew(2 * MIB));
    assert_eq!(step(&mut policy, &footprints), Some(2 * MIB));
    // A window where every request fit where it ran says nothing about
    // a lower threshold: the one in force stays.
    footprints.extend([Footprint::Within(2 * MIB); 400]);
    assert_eq!(step(&mut policy, &footprints), Some(2 * MIB));
}

#[test]
fn calibrate_freezes_the_first_restart_budget_threshold() {
    let mut sim = Simulation::new(Mode::Calibrate, Method::RestartBudget);
    for i in 0..40 {
        sim.serve(small(i));
    }
    let frozen = sim.threshold.unwrap();
    for i in 0..200 {
        sim.serve(small(i) * 2);
    }
    assert_eq!(sim.threshold, Some(frozen));
    assert!(matches!(
        sim.policy.calibration(),
        Calibration::Engaged { .. }
    ));
}

fn samples(instances: &[(u64, u64)], rounds: i64) -> Vec<Sample> {
    (0..rounds)
        .flat_map(|round| {
            instances.iter().map(move |&(instance, bytes)| Sample {
                timestamp_ms: round * 1000,
                instance,
                bytes,
            })
        })
        .collect()
}

fn observed<'a>(now_ms: i64, samples: &'a [Sample], served: &'a [(u64, u64)]) -> Observed<'a> {
    Observed {
        now_ms,
        baseline_bytes: FRESH,
        samples,
        served,
        footprints: &[],
        requests_recorded: 0,
    }
}

#[test]
fn median_methods_use_the_instances_that_served_and_wait_for_no_other() {
    let mut policy = Policy::new(config(), settings(Mode::Calibrate, Method::CiMean), 0).unwrap();
    assert_eq!(policy.samples_window(5000), Some((0, 5000)));
    // Sixteen instances; only 1 and 2 ever served (mru at low load).
    let memory: Vec<(u64, u64)> = (1..=16)
        .map(|id| (id, if id <= 2 { 4 * MIB + id * MIB } else { FRESH }))
        .collect();
    let all = samples(&memory, 5);
    let mut served: Vec<(u64, u64)> = (1..=16).map(|id| (id, 0)).collect();
    served[0].1 = 10;
    assert_eq!(policy.step(&observed(5000, &all, &served)), None);
    assert!(matches!(
        policy.calibration(),
        Calibration::Collecting {
            progress: Progress::Instances {
                ready: 1,
                needed: 2
            },
            ..
        }
    ));
    served[1].1 = 10;
    let threshold = policy.step(&observed(6000, &all, &served)).unwrap();
    assert!(threshold > 5 * MIB, "threshold {threshold}");
    match policy.calibration() {
        Calibration::Engaged {
            evidence: Evidence::Samples { instances, .. },
            ..
        } => assert_eq!(instances, &BTreeSet::from([1, 2])),
        other => panic!("not engaged: {other:?}"),
    }
    // Frozen: no more samples needed, the same threshold.
    assert_eq!(policy.samples_window(7000), None);
    assert_eq!(policy.step(&observed(7000, &[], &served)), Some(threshold));
    // A change of method asks for the same evidence again.
    let change = SettingsChange {
        method: Some(Method::Prediction),
        ..SettingsChange::default()
    };
    assert_eq!(policy.change(&change, 8000, 0), Ok(Some((0, 6000))));
    policy.reestimate(&all, FRESH).unwrap();
    assert!(policy.current().unwrap().threshold_bytes() > threshold);
}

#[test]
fn rolling_medians_never_go_below_the_calibrated_threshold() {
    let mut policy = Policy::new(config(), settings(Mode::Rolling, Method::Quantile), 0).unwrap();
    let grown = samples(&[(1, 6 * MIB), (2, 8 * MIB)], 5);
    let served = [(1, 10), (2, 10)];
    let calibrated = policy.step(&observed(5000, &grown, &served)).unwrap();
    // Restarts pulled every median down to a fresh instance.
    let fresh = samples(&[(3, FRESH), (4, FRESH)], 5);
    assert_eq!(
        policy.samples_window(100_000),
        Some((100_000 - 60_000, 100_000))
    );
    assert_eq!(
        policy.step(&observed(100_000, &fresh, &served)),
        Some(calibrated)
    );
}

#[test]
fn changes_are_validated_and_recalibrate_on_request() {
    let mut policy =
        Policy::new(config(), settings(Mode::Rolling, Method::RestartBudget), 0).unwrap();
    let bad = SettingsChange {
        restart_budget: Some(1.5),
        ..SettingsChange::default()
    };
    assert_eq!(
        policy.change(&bad, 0, 0),
        Err(SettingsError::RestartBudget(1.5))
    );
    let bad = SettingsChange {
        alpha: Some(0.0),
        ..SettingsChange::default()
    };
    assert_eq!(policy.change(&bad, 0, 0), Err(SettingsError::Alpha(0.0)));
    // A refused change leaves the settings as they were.
    assert_eq!(
        policy.settings(),
        settings(Mode::Rolling, Method::RestartBudget)
    );
    let fixed = SettingsChange {
        threshold: Some(8 * MIB),
        ..SettingsChange::default()
    };
    assert_eq!(policy.change(&fixed, 0, 0), Ok(None));
    assert_eq!(policy.settings().mode, Mode::Fixed);
    assert_eq!(policy.calibration(), &Calibration::Unused);
    assert_eq!(policy.step(&observed(0, &[], &[])), Some(8 * MIB));
    let again = SettingsChange {
        mode: Some(Mode::Calibrate),
        ..SettingsChange::default()
    };
    assert_eq!(policy.change(&again, 10, 500), Ok(None));
    assert!(matches!(
        policy.calibration(),
        Calibration::Collecting { since_ms: 10, .. }
    ));
    // Counting starts again from the 500th request.
    let footprints = vec![Footprint::Grew(2 * MIB); 520];
    let step = Observed {
        footprints: &footprints,
        requests_recorded: 520,
        ..observed(20, &[], &[])
    };
    assert_eq!(policy.step(&step), None);
    assert!(policy.problem().is_none());
    assert_eq!(
        Policy::new(config(), settings(Mode::Fixed, Method::CiMean), 0).err(),
        Some(SettingsError::FixedWithoutThreshold)
    );
}
