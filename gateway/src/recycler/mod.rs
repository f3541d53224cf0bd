//! The embedded estimator: a thin I/O shell around a pure policy.
//!
//! Every `sample_interval` it samples each instance's linear memory and the
//! process's RSS into the database; every `sample_interval`, and every few
//! requests, it hands the policy what it needs (recent request footprints
//! from the pool, samples from the database), sets the threshold the policy
//! gives, and has the pool replace the idle instances above it (busy ones
//! are checked by the pool the moment their request ends).
//!
//! Layout:
//! - `mod.rs`: the task, the sampling, the admin view and run-time changes.
//! - [`settings`]: what the operator chooses (mode, method, α, restart
//!   budget, fixed threshold), how a change applies, why one is refused.
//! - [`threshold`]: the threshold's policy: calibration progress and the
//!   threshold each step gives, pure and unit-tested with virtual time.

pub mod settings;
pub mod threshold;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use estimator::Sample;
use serde::Serialize;
use tokio::sync::watch;
use volume::{ProcessSample, Volume, VolumeError};

pub use settings::{Method, Mode, Settings, SettingsChange, SettingsError};
pub use threshold::{Calibration, Policy, PolicyConfig, Progress, ThresholdEstimate};

use crate::pool::{Pool, ReplaceReason};
use crate::procstat::ProcessMemory;

/// Why the estimator could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum EstimatorError {
    /// The settings asked for are not valid (a client's mistake: 400).
    #[error(transparent)]
    Invalid(#[from] SettingsError),
    /// The samples could not be read or written (the server's: 500).
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

/// The estimator's configuration (see `config.rs` for the flags).
#[derive(Debug, Clone)]
pub struct EstimatorConfig {
    pub settings: Settings,
    pub policy: PolicyConfig,
    pub sample_interval: Duration,
    /// How long samples are kept in the database.
    pub retention: Duration,
}

/// `GET /admin/estimator`.
#[derive(Debug, Clone, Serialize)]
pub struct EstimatorReport {
    /// In a sentence: what the estimator is doing and why.
    pub summary: String,
    pub mode: Mode,
    pub method: Method,
    pub restart_budget: f64,
    pub alpha: f64,
    pub warmup: String,
    /// The threshold the pool enforces now; none while learning or
    /// monitoring.
    pub threshold_bytes: Option<u64>,
    pub fixed_threshold_bytes: Option<u64>,
    /// The estimate behind the threshold in force.
    pub estimate: Option<ThresholdEstimate>,
    /// The first estimate that engaged the threshold (frozen in
    /// `calibrate`).
    pub calibrated: Option<ThresholdEstimate>,
    pub calibration: CalibrationReport,
    pub baseline_bytes: u64,
    pub floor_bytes: u64,
    pub sample_interval_ms: u64,
    pub last_sample_ms: Option<i64>,
    pub last_error: Option<String>,
    /// Replacements the threshold made (reasons `threshold` and `drift`).
    pub restarts: u64,
    /// Requests served since start (their footprints were observed).
    pub requests: u64,
    /// `restarts / requests`: compare with `restart_budget`.
    pub restart_rate: f64,
}

/// How far learning is, as `GET /admin/estimator` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationReport {
    /// `unused` (monitor, fixed), `collecting`, `frozen` (calibrate) or
    /// `rolling`.
    pub state: &'static str,
    pub progress: Option<Progress>,
    /// Unix milliseconds: learning started, and the threshold engaged.
    pub started_ms: Option<i64>,
    pub engaged_ms: Option<i64>,
    /// Median methods: the instances whose medians the first estimate used.
    pub instances_used: Vec<u64>,
}

#[derive(Debug, Default)]
struct Status {
    last_sample_ms: Option<i64>,
    last_error: Option<String>,
}

/// The estimator task's shared half. Share it as `Arc<Recycler>`.
#[derive(Debug)]
pub struct Recycler {
    pool: Arc<Pool>,
    volume: Arc<Volume>,
    config: EstimatorConfig,
    policy: Mutex<Policy>,
    status: Mutex<Status>,
    stop: watch::Sender<bool>,
}

impl Recycler {
    pub fn new(
        pool: Arc<Pool>,
        volume: Arc<Volume>,
        config: EstimatorConfig,
    ) -> Result<Arc<Self>, SettingsError> {
        let policy = Policy::new(config.policy.clone(), config.settings, volume::now_ms())?;
        let recycler = Arc::new(Self {
            pool,
            volume,
            config,
            policy: Mutex::new(policy),
            status: Mutex::default(),
            stop: watch::channel(false).0,
        });
        // `fixed` holds from the first request.
        let threshold = recycler.policy().step(&threshold::Observed {
            now_ms: volume::now_ms(),
            baseline_bytes: recycler.pool.baseline_bytes(),
            samples: &[],
            served: &[],
            footprints: &[],
            requests_recorded: 0,
        });
        recycler.pool.set_threshold(threshold);
        Ok(recycler)
    }

    /// Sample every `sample_interval`, and step the policy every few
    /// requests, until [`Recycler::stop`].
    pub async fn run(self: Arc<Self>) {
        let mut stopped = self.stop.subscribe();
        let mut ticks = tokio::time::interval(self.config.sample_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let sample = tokio::select! {
                _ = ticks.tick() => true,
                () = self.pool.footprints().next_few() => false,
                _ = stopped.wait_for(|stop| *stop) => return,
            };
            let result = if sample {
                self.round().await
            } else {
                self.step_on_footprints().await
            };
            if let Err(error) = result {
                tracing::error!(%error, "estimator round failed");
                self.status().last_error = Some(error.to_string());
            }
        }
    }

    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// One round: sample, store, step the policy, enforce.
    pub async fn round(&self) -> Result<(), VolumeError> {
        let now = volume::now_ms();
        let instances: Vec<Sample> = self
            .pool
            .instances()
            .into_iter()
            .map(|instance| Sample {
                timestamp_ms: now,
                instance: instance.id,
                bytes: instance.memory_bytes,
            })
            .collect();
        let process = ProcessMemory::read();
        let process = ProcessSample {
            timestamp_ms: now,
            rss_bytes: process.rss_bytes,
            private_dirty_bytes: process.private_dirty_bytes,
        };
        let store = self.volume.samples();
        store.record(&instances, &process).await?;
        let retention = i64::try_from(self.config.retention.as_millis()).unwrap_or(i64::MAX);
        store.prune(now.saturating_sub(retention)).await?;
        self.status().last_sample_ms = Some(now);
        self.step().await
    }

    /// A step between rounds, after a few more requests: only for a policy
    /// that learns from footprints alone (one that needs samples waits for
    /// the next round rather than query the database every few requests).
    async fn step_on_footprints(&self) -> Result<(), VolumeError> {
        if self.policy().samples_window(volume::now_ms()).is_some() {
            return Ok(());
        }
        self.step().await
    }

    /// Hand the policy what it needs, set the threshold it gives, enforce.
    async fn step(&self) -> Result<(), VolumeError> {
        let now = volume::now_ms();
        let window = self.policy().samples_window(now);
        let samples = match window {
            Some((from, to)) => self.samples(from, to).await?,
            None => Vec::new(),
        };
        // Instances' request counts for the median methods (which also need
        // samples), footprints for the restart budget.
        let served: Vec<(u64, u64)> = match window {
            Some(_) => self
                .pool
                .instances()
                .iter()
                .map(|instance| (instance.id, instance.requests))
                .collect(),
            None => Vec::new(),
        };
        let recent = if self.policy().learns_from_footprints() {
            self.pool.footprints().recent(u64::MAX)
        } else {
            self.pool.footprints().recent(0)
        };
        let footprints: Vec<_> = recent.footprints.into();
        let threshold = self.policy().step(&threshold::Observed {
            now_ms: now,
            baseline_bytes: self.pool.baseline_bytes(),
            samples: &samples,
            served: &served,
            footprints: &footprints,
            requests_recorded: recent.recorded,
        });
        if threshold != self.pool.threshold() {
            tracing::info!(
                threshold_bytes = threshold,
                previous_bytes = self.pool.threshold(),
                "restart threshold changed"
            );
        }
        self.pool.set_threshold(threshold);
        self.pool.enforce().await;
        Ok(())
    }

    /// Instance samples taken in `[from, to]` (Unix milliseconds).
    pub async fn samples(&self, from: i64, to: i64) -> Result<Vec<Sample>, VolumeError> {
        self.volume.samples().memory(from, to).await
    }

    /// Change mode, method, α, the restart budget or the fixed threshold now.
    pub async fn update(&self, change: SettingsChange) -> Result<EstimatorReport, EstimatorError> {
        let now = volume::now_ms();
        let recorded = self.pool.footprints().recorded();
        // Validate and apply; a frozen median threshold is re-estimated
        // from its own evidence (the samples are read outside the lock).
        let mut candidate = self.policy().clone();
        let window = candidate.change(&change, now, recorded)?;
        if let Some((from, to)) = window {
            let samples = self.samples(from, to).await?;
            candidate.reestimate(&samples, self.pool.baseline_bytes())?;
        }
        let settings = candidate.settings();
        *self.policy() = candidate;
        self.status().last_error = None;
        tracing::info!(mode = %settings.mode, method = %settings.method, alpha = settings.alpha, restart_budget = settings.restart_budget, fixed = ?settings.fixed_threshold, "estimator settings changed");
        self.step().await?;
        Ok(self.report())
    }

    pub fn report(&self) -> EstimatorReport {
        let policy = self.policy();
        let settings = policy.settings();
        let baseline = self.pool.baseline_bytes();
        let replacements = self.pool.replacements();
        let restarts = [ReplaceReason::Threshold, ReplaceReason::Drift]
            .iter()
            .filter_map(|reason| replacements.get(reason))
            .sum::<u64>();
        let requests = self.pool.footprints().recorded();
        let threshold = self.pool.threshold();
        let calibration = match policy.calibration() {
            Calibration::Unused => CalibrationReport {
                state: "unused",
                progress: None,
                started_ms: None,
                engaged_ms: None,
                instances_used: Vec::new(),
            },
            Calibration::Collecting { since_ms, .. } => CalibrationReport {
                state: "collecting",
                progress: policy.progress(requests),
                started_ms: Some(*since_ms),
                engaged_ms: None,
                instances_used: Vec::new(),
            },
            Calibration::Engaged {
                since_ms,
                at_ms,
                evidence,
                ..
            } => CalibrationReport {
                state: if settings.mode == Mode::Rolling {
                    "rolling"
                } else {
                    "frozen"
                },
                progress: None,
                started_ms: Some(*since_ms),
                engaged_ms: Some(*at_ms),
                instances_used: match evidence {
                    threshold::Evidence::Samples { instances, .. } => {
                        instances.iter().copied().collect()
                    }
                    threshold::Evidence::Requests => Vec::new(),
                },
            },
        };
        let calibrated = match policy.calibration() {
            Calibration::Engaged { first, .. } => Some(first.clone()),
            _ => None,
        };
        let status = self.status();
        EstimatorReport {
            summary: summary(&policy, threshold, baseline, requests),
            mode: settings.mode,
            method: settings.method,
            restart_budget: settings.restart_budget,
            alpha: settings.alpha,
            warmup: policy.config().warmup.to_string(),
            threshold_bytes: threshold,
            fixed_threshold_bytes: settings.fixed_threshold,
            estimate: policy.current().cloned().filter(|_| calibrated.is_some()),
            calibrated,
            calibration,
            baseline_bytes: baseline,
            floor_bytes: policy.floor_bytes(baseline),
            sample_interval_ms: u64::try_from(self.config.sample_interval.as_millis())
                .unwrap_or(u64::MAX),
            last_sample_ms: status.last_sample_ms,
            last_error: status
                .last_error
                .clone()
                .or_else(|| policy.problem().map(str::to_owned)),
            restarts,
            requests,
            restart_rate: restarts as f64 / requests.max(1) as f64,
        }
    }

    fn policy(&self) -> MutexGuard<'_, Policy> {
        self.policy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn status(&self) -> MutexGuard<'_, Status> {
        self.status
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What the estimator is doing, in a sentence an operator can act on.
fn summary(policy: &Policy, threshold: Option<u64>, baseline: u64, requests: u64) -> String {
    let settings = policy.settings();
    let mib = |bytes: u64| bytes as f64 / 1048576.0;
    match (policy.calibration(), threshold) {
        (Calibration::Unused, None) => "monitoring: sampling memory, replacing nothing".into(),
        (Calibration::Unused, Some(t)) => {
            format!("fixed: replacing instances above {:.2} MiB", mib(t))
        }
        (Calibration::Collecting { .. }, _) => match policy.progress(requests) {
            None => "learning".into(),
            Some(Progress::Requests { seen, needed }) => {
                format!("learning: {seen} of {needed} requests observed before a threshold is set")
            }
            Some(Progress::Instances { ready, needed }) => format!(
                "learning: {ready} of {needed} instances ready (served enough requests, memory steady)"
            ),
        },
        (Calibration::Engaged { .. }, threshold) => match (policy.current(), threshold) {
            (Some(ThresholdEstimate::RestartBudget(estimate)), Some(t)) => format!(
                "replacing instances above {:.2} MiB ({:.2} MiB fresh): the lowest threshold at which at most {:.1} % of the last {} requests would restart their instance (estimated {:.2} %)",
                mib(t),
                mib(baseline),
                100.0 * settings.restart_budget,
                estimate.n,
                100.0 * estimate.expected_restart_rate,
            ),
            (Some(ThresholdEstimate::Medians(estimate)), Some(t)) => format!(
                "replacing instances above {:.2} MiB: {} over the medians of {} instances, alpha {}",
                mib(t),
                settings.method,
                estimate.n,
                settings.alpha,
            ),
            (_, Some(t)) => format!("replacing instances above {:.2} MiB", mib(t)),
            (_, None) => "no threshold in force".into(),
        },
    }
}
