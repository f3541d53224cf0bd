//! The restart threshold's policy, pure: how far calibration is, and the
//! threshold each step gives, under the operator's [`Settings`], from the
//! evidence handed to it with the time. No clock, no database, no pool:
//! unit-tested with virtual time (`threshold/tests.rs`). Which instance the
//! threshold replaces, and when, is the pool's `pool::recycling`.
//!
//! Two kinds of evidence, by method:
//! - `restart-budget` (the default) learns from the footprints of recent
//!   requests (`estimator::footprint`): it needs `min_requests` of them,
//!   whatever the dispatch and load, and no instance in particular.
//! - `ci-mean`, `prediction` and `quantile` (the paper's and its kin) learn
//!   from per-instance medians of memory samples: they need at least
//!   `calibration_instances` (at least two) instances that served
//!   `calibration_requests` and have `calibration_samples` steady samples.
//!   Instances that never served are never waited for.

use std::collections::BTreeSet;

use estimator::{BudgetEstimate, Estimate, EstimateError, Footprint, Sample, Warmup};
use serde::Serialize;

use super::settings::{Mode, Settings, SettingsChange, SettingsError};

/// Footprints a recent part must hold above its budget quantile for its
/// estimate to count (`Policy::over_recent_windows`).
const TAIL_SUPPORT: f64 = 4.0;

/// The fixed part of the policy (flags that cannot change at run time).
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    pub warmup: Warmup,
    /// Requests observed before `restart-budget` gives a threshold.
    pub min_requests: u64,
    /// Footprints `restart-budget` estimates over (the most recent).
    pub footprint_window: u64,
    /// Median methods: instances that must be ready (at least two).
    pub calibration_instances: usize,
    /// Median methods: steady samples each ready instance has.
    pub calibration_samples: usize,
    /// Median methods: requests each ready instance served.
    pub calibration_requests: u64,
    /// Median methods in `rolling`: the window of samples, milliseconds.
    pub rolling_window_ms: i64,
    /// The threshold never goes below a fresh instance plus this.
    pub floor_margin: u64,
}

/// An estimate behind a threshold, by the kind of evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ThresholdEstimate {
    RestartBudget(BudgetEstimate),
    Medians(Estimate),
}

impl ThresholdEstimate {
    pub fn threshold_bytes(&self) -> u64 {
        match self {
            Self::RestartBudget(estimate) => estimate.threshold_bytes,
            Self::Medians(estimate) => estimate.threshold_bytes,
        }
    }
}

/// How far the evidence has come.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "needs")]
pub enum Progress {
    /// `restart-budget`: requests observed against those needed.
    Requests { seen: u64, needed: u64 },
    /// Median methods: instances ready against those needed.
    Instances { ready: usize, needed: usize },
}

/// Where the threshold comes from now.
#[derive(Debug, Clone, PartialEq)]
pub enum Calibration {
    /// `monitor` and `fixed` learn nothing.
    Unused,
    /// Gathering evidence since `since_ms`; no threshold yet.
    Collecting { since_ms: i64, progress: Progress },
    /// A threshold is in force since `at_ms`, from `first`: frozen in
    /// `calibrate`, the first of many in `rolling`.
    Engaged {
        since_ms: i64,
        at_ms: i64,
        first: ThresholdEstimate,
        evidence: Evidence,
    },
}

/// What the first estimate rested on, so a change of method or α can
/// re-estimate from the same evidence.
#[derive(Debug, Clone, PartialEq)]
pub enum Evidence {
    /// The footprints of recent requests (restart budget).
    Requests,
    /// These instances' samples in `[from, to]` (Unix milliseconds).
    Samples {
        from: i64,
        to: i64,
        instances: BTreeSet<u64>,
    },
}

/// Everything one step may look at.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    pub now_ms: i64,
    /// Linear memory of a fresh instance.
    pub baseline_bytes: u64,
    /// Instance samples in the window [`Policy::samples_window`] asked for.
    pub samples: &'a [Sample],
    /// `(id, requests served)` of every live instance.
    pub served: &'a [(u64, u64)],
    /// The most recent footprints, oldest first (at most the window).
    pub footprints: &'a [Footprint],
    /// Footprints recorded since the process started.
    pub requests_recorded: u64,
}

/// The policy's state. One per gateway, kept by the recycler shell.
#[derive(Debug, Clone)]
pub struct Policy {
    config: PolicyConfig,
    settings: Settings,
    calibration: Calibration,
    /// The estimate behind the threshold in force now.
    current: Option<ThresholdEstimate>,
    /// Why the last step could not estimate, if it could not.
    problem: Option<String>,
    /// The running count of footprints at which learning (re)started.
    learning_from: u64,
    /// Restart-budget estimates have been below the threshold in force
    /// since this running count of footprints.
    lowering_since: Option<u64>,
    /// The last restart-budget step saw footprints rising: the recent
    /// quarter's threshold above the whole window's.
    rising: bool,
}

impl Policy {
    pub fn new(
        config: PolicyConfig,
        settings: Settings,
        now_ms: i64,
    ) -> Result<Self, SettingsError> {
        settings.validate()?;
        let mut policy = Self {
            config,
            settings,
            calibration: Calibration::Unused,
            current: None,
            problem: None,
            learning_from: 0,
            lowering_since: None,
            rising: false,
        };
        policy.restart_learning(now_ms, 0);
        Ok(policy)
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    pub fn calibration(&self) -> &Calibration {
        &self.calibration
    }

    pub fn current(&self) -> Option<&ThresholdEstimate> {
        self.current.as_ref()
    }

    /// How far learning is, with the requests counted up to
    /// `requests_recorded` (steps run only every few requests).
    pub fn progress(&self, requests_recorded: u64) -> Option<Progress> {
        match &self.calibration {
            Calibration::Collecting {
                progress: Progress::Requests { needed, .. },
                ..
            } => Some(Progress::Requests {
                seen: requests_recorded.saturating_sub(self.learning_from),
                needed: *needed,
            }),
            Calibration::Collecting { progress, .. } => Some(progress.clone()),
            _ => None,
        }
    }

    /// Whether a step reads request footprints (the restart budget, while
    /// it learns or follows).
    pub fn learns_from_footprints(&self) -> bool {
        matches!(self.settings.mode, Mode::Calibrate | Mode::Rolling)
            && self.settings.method.over_medians().is_none()
    }

    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }

    pub fn config(&self) -> &PolicyConfig {
        &self.config
    }

    /// The instance samples the next step needs, `[from, to]`; `None` when
    /// it needs none (monitor, fixed, restart-budget, a frozen threshold).
    pub fn samples_window(&self, now_ms: i64) -> Option<(i64, i64)> {
        self.settings.method.over_medians()?;
        match (&self.calibration, self.settings.mode) {
            (Calibration::Collecting { since_ms, .. }, _) => Some((*since_ms, now_ms)),
            (Calibration::Engaged { .. }, Mode::Rolling) => {
                Some((now_ms.saturating_sub(self.config.rolling_window_ms), now_ms))
            }
            _ => None,
        }
    }

    /// The floor: a fresh instance plus the margin.
    pub fn floor_bytes(&self, baseline_bytes: u64) -> u64 {
        baseline_bytes.saturating_add(self.config.floor_margin)
    }

    /// One step: learn from `observed`, return the threshold to enforce
    /// (`None`: replace nothing).
    pub fn step(&mut self, observed: &Observed<'_>) -> Option<u64> {
        match self.settings.mode {
            Mode::Monitor => None,
            Mode::Fixed => self.settings.fixed_threshold,
            Mode::Calibrate | Mode::Rolling => match self.settings.method.over_medians() {
                None => self.step_restart_budget(observed),
                Some(method) => self.step_medians(method, observed),
            },
        }
    }

    fn step_restart_budget(&mut self, observed: &Observed<'_>) -> Option<u64> {
        if let (Mode::Calibrate, Calibration::Engaged { first, .. }) =
            (self.settings.mode, &self.calibration)
        {
            return Some(first.threshold_bytes());
        }
        let from = self.learning_from;
        let seen = observed.requests_recorded.saturating_sub(from);
        if let Calibration::Collecting { since_ms, .. } = self.calibration
            && seen < self.config.min_requests
        {
            self.calibration = Calibration::Collecting {
                since_ms,
                progress: Progress::Requests {
                    seen,
                    needed: self.config.min_requests,
                },
            };
            return None;
        }
        let usable = usize::try_from(seen.min(self.config.footprint_window)).unwrap_or(usize::MAX);
        let recent = &observed.footprints[observed.footprints.len().saturating_sub(usable)..];
        let floor = self.floor_bytes(observed.baseline_bytes);
        match self.over_recent_windows(recent, floor) {
            Ok(estimate) => {
                self.problem = None;
                let in_force = self
                    .current
                    .as_ref()
                    .map(ThresholdEstimate::threshold_bytes);
                // Every request fit where it ran: nothing says what a fresh
                // instance would need, so nothing to lower the threshold on.
                if estimate.grew == 0 && in_force.is_some() {
                    return in_force;
                }
                if let Some(held) = self.hold_before_lowering(
                    in_force,
                    estimate.threshold_bytes,
                    observed.requests_recorded,
                ) {
                    return Some(held);
                }
                let estimate = ThresholdEstimate::RestartBudget(estimate);
                Some(self.put_in_force(observed.now_ms, estimate, Evidence::Requests))
            }
            Err(error) => {
                self.problem = Some(error.to_string());
                self.current
                    .as_ref()
                    .map(ThresholdEstimate::threshold_bytes)
            }
        }
    }

    /// The restart-budget estimate over the whole window and over its most
    /// recent half and quarter (those holding at least `TAIL_SUPPORT /
    /// budget` and `min_requests` requests),
    /// whichever is highest. When sizes creep up, the recent part sees it
    /// first and keeps restarts within the budget; when they hold still,
    /// the three agree; when they fall, the whole window holds the
    /// threshold up a while longer (less saving, never churn).
    ///
    /// A recent part still trails sizes that keep creeping up: every
    /// request that reaches a size never seen restarts its instance. So the
    /// window is also cut into four quarters of at least `min_requests`,
    /// each estimated alone; when their thresholds rise steadily
    /// ([`estimator::rising_lead`]) the threshold goes one quarter's rise
    /// ahead of the latest. It also notes whether the latest quarter's
    /// threshold is above the whole window's (`rising`), which holds any
    /// lowering off.
    fn over_recent_windows(
        &mut self,
        recent: &[Footprint],
        floor: u64,
    ) -> Result<BudgetEstimate, estimator::BudgetError> {
        let budget = self.settings.restart_budget;
        let whole = estimator::restart_budget_threshold(recent, budget, Some(floor))?;
        let mut best = whole.clone();
        self.rising = false;
        let quarter = recent.len() / 4;
        if quarter as u64 >= self.config.min_requests.max(1) {
            let mut parts = [0; 4];
            for (index, part) in parts.iter_mut().enumerate() {
                let end = recent.len() - (3 - index) * quarter;
                let slice = &recent[end - quarter..end];
                *part = estimator::restart_budget_threshold(slice, budget, Some(floor))?
                    .threshold_bytes;
            }
            self.rising = parts[3] > whole.threshold_bytes;
            if let Some(lead) = estimator::rising_lead(parts) {
                best = best.lead_to(lead);
            }
        }
        // A part's budget quantile rests on the footprints above it: in a
        // part of 1/budget requests that is its largest alone, and the
        // highest of several such parts is the noise of the rarest sizes
        // (heavy tails lean it up). A part counts with at least
        // `TAIL_SUPPORT` above its quantile.
        let shortest = (TAIL_SUPPORT / budget)
            .ceil()
            .max(self.config.min_requests as f64);
        for part in [2, 4] {
            let len = recent.len() / part;
            if (len as f64) < shortest {
                break;
            }
            let tail = &recent[recent.len() - len..];
            let estimate = estimator::restart_budget_threshold(tail, budget, Some(floor))?;
            if estimate.threshold_bytes > best.threshold_bytes {
                best = estimate.lead_to(best.lead_bytes.unwrap_or(0));
            }
        }
        Ok(best)
    }

    fn step_medians(&mut self, method: estimator::Method, observed: &Observed<'_>) -> Option<u64> {
        let floor = self.floor_bytes(observed.baseline_bytes);
        match &self.calibration {
            Calibration::Engaged { first, .. } => {
                let calibrated = first.threshold_bytes();
                if self.settings.mode == Mode::Calibrate {
                    return Some(calibrated);
                }
                // Rolling: every instance of the recent window, never below
                // the calibrated threshold (restarts pull medians down, and
                // a threshold that followed them would spiral into churn).
                let (_, estimate) =
                    self.over_medians(method, observed.samples, |_| true, floor.max(calibrated));
                match estimate {
                    Ok(estimate) => {
                        let threshold = estimate.threshold_bytes;
                        self.current = Some(ThresholdEstimate::Medians(estimate));
                        Some(threshold)
                    }
                    Err(_) => Some(calibrated),
                }
            }
            Calibration::Collecting { since_ms, .. } => {
                let since_ms = *since_ms;
                let worked: BTreeSet<u64> = observed
                    .served
                    .iter()
                    .filter(|(_, requests)| *requests >= self.config.calibration_requests)
                    .map(|(id, _)| *id)
                    .collect();
                let steady = self.config.calibration_samples;
                let (used, estimate) = self.over_medians(
                    method,
                    observed.samples,
                    |(id, summary)| worked.contains(id) && summary.steady_samples >= steady,
                    floor,
                );
                let needed = self.config.calibration_instances.max(2);
                if used.len() < needed {
                    self.calibration = Calibration::Collecting {
                        since_ms,
                        progress: Progress::Instances {
                            ready: used.len(),
                            needed,
                        },
                    };
                    return None;
                }
                match estimate {
                    Ok(estimate) => {
                        self.problem = None;
                        let evidence = Evidence::Samples {
                            from: since_ms,
                            to: observed.now_ms,
                            instances: used,
                        };
                        let estimate = ThresholdEstimate::Medians(estimate);
                        Some(self.put_in_force(observed.now_ms, estimate, evidence))
                    }
                    Err(error) => {
                        self.problem = Some(error.to_string());
                        None
                    }
                }
            }
            Calibration::Unused => None,
        }
    }

    /// The one path from samples to a median-method estimate: each kept
    /// instance's median after warm-up, then the statistic, floored.
    fn over_medians(
        &self,
        method: estimator::Method,
        samples: &[Sample],
        keep: impl Fn(&(&u64, &estimator::InstanceSummary)) -> bool,
        floor: u64,
    ) -> (BTreeSet<u64>, Result<Estimate, EstimateError>) {
        let summaries = estimator::summarize(samples, self.config.warmup);
        let (used, medians): (BTreeSet<u64>, Vec<f64>) = summaries
            .iter()
            .filter(|entry| keep(entry))
            .map(|(id, summary)| (*id, summary.median))
            .unzip();
        let estimate = estimator::estimate(&medians, method, self.settings.alpha, Some(floor));
        (used, estimate)
    }

    /// Raise at once, lower only after a while: a threshold that dips
    /// whenever a rare large footprint leaves the window would replace the
    /// instances between the two values each time (`drift` restarts beyond
    /// the budget). A lower estimate takes effect once the estimates have
    /// stayed below the threshold in force for `1 / budget` requests, and
    /// never while footprints are rising (a lead that flickers off would
    /// replace the instances that grew into it).
    /// Returns the threshold to keep, or `None` to put the estimate in force.
    fn hold_before_lowering(
        &mut self,
        in_force: Option<u64>,
        estimate: u64,
        requests_recorded: u64,
    ) -> Option<u64> {
        let Some(in_force) = in_force.filter(|&t| estimate < t) else {
            self.lowering_since = None;
            return None;
        };
        if self.rising {
            self.lowering_since = None;
            return Some(in_force);
        }
        let hold = (1.0 / self.settings.restart_budget).ceil() as u64;
        let since = *self.lowering_since.get_or_insert(requests_recorded);
        if requests_recorded.saturating_sub(since) < hold {
            return Some(in_force);
        }
        self.lowering_since = None;
        None
    }

    /// Make `estimate` the one in force (the first one engages the
    /// threshold) and return its threshold.
    fn put_in_force(
        &mut self,
        now_ms: i64,
        estimate: ThresholdEstimate,
        evidence: Evidence,
    ) -> u64 {
        if let Calibration::Collecting { since_ms, .. } = self.calibration {
            self.calibration = Calibration::Engaged {
                since_ms,
                at_ms: now_ms,
                first: estimate.clone(),
                evidence,
            };
        }
        let threshold = estimate.threshold_bytes();
        self.current = Some(estimate);
        threshold
    }

    /// Apply a change of settings. Returns the window of samples to
    /// re-estimate a frozen median-method threshold from (hand them to
    /// [`Policy::reestimate`]), if the change needs that.
    pub fn change(
        &mut self,
        change: &SettingsChange,
        now_ms: i64,
        requests_recorded: u64,
    ) -> Result<Option<(i64, i64)>, SettingsError> {
        let before = self.settings;
        let settings = before.apply(change)?;
        self.settings = settings;
        let learns = |mode| matches!(mode, Mode::Calibrate | Mode::Rolling);
        let kind_changed =
            before.method.over_medians().is_some() != settings.method.over_medians().is_some();
        let relearn = change.mode == Some(Mode::Calibrate)
            || learns(settings.mode) != learns(before.mode)
            || (learns(settings.mode) && kind_changed);
        let statistics_changed = settings.method != before.method
            || settings.alpha != before.alpha
            || settings.restart_budget != before.restart_budget;
        if relearn {
            self.restart_learning(now_ms, requests_recorded);
            return Ok(None);
        }
        if !statistics_changed {
            return Ok(None);
        }
        match &self.calibration {
            Calibration::Engaged {
                evidence: Evidence::Samples { from, to, .. },
                ..
            } => Ok(Some((*from, *to))),
            // A frozen restart-budget threshold is learned again under the
            // new budget; a rolling one follows at the next step.
            Calibration::Engaged { .. } if settings.mode == Mode::Calibrate => {
                self.restart_learning(now_ms, requests_recorded);
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// Re-estimate the engaged median-method threshold from the samples of
    /// its own window and instances, under the current method and α.
    pub fn reestimate(
        &mut self,
        samples: &[Sample],
        baseline_bytes: u64,
    ) -> Result<(), SettingsError> {
        let Some(method) = self.settings.method.over_medians() else {
            return Ok(());
        };
        let Calibration::Engaged {
            evidence: Evidence::Samples { instances, .. },
            ..
        } = &self.calibration
        else {
            return Ok(());
        };
        let instances = instances.clone();
        let floor = self.floor_bytes(baseline_bytes);
        let (_, estimate) =
            self.over_medians(method, samples, |(id, _)| instances.contains(id), floor);
        let estimate = ThresholdEstimate::Medians(estimate.map_err(SettingsError::Reestimate)?);
        if let Calibration::Engaged { first, .. } = &mut self.calibration {
            *first = estimate.clone();
        }
        self.current = Some(estimate);
        Ok(())
    }

    /// Start learning afresh: nothing engaged, evidence from now on.
    fn restart_learning(&mut self, now_ms: i64, requests_recorded: u64) {
        self.current = None;
        self.problem = None;
        self.lowering_since = None;
        self.rising = false;
        self.learning_from = requests_recorded;
        self.calibration = match (self.settings.mode, self.settings.method.over_medians()) {
            (Mode::Monitor | Mode::Fixed, _) => Calibration::Unused,
            (_, None) => Calibration::Collecting {
                since_ms: now_ms,
                progress: Progress::Requests {
                    seen: 0,
                    needed: self.config.min_requests,
                },
            },
            (_, Some(_)) => Calibration::Collecting {
                since_ms: now_ms,
                progress: Progress::Instances {
                    ready: 0,
                    needed: self.config.calibration_instances.max(2),
                },
            },
        };
    }
}

#[cfg(test)]
mod tests;
