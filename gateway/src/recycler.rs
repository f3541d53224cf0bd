//! The embedded estimator: every `sample_interval` it samples each
//! instance's linear memory and the process's RSS into the metadata
//! database, keeps the restart threshold according to its mode, and has the
//! pool replace the idle instances above it (busy ones are checked by the
//! pool the moment their request ends).
//!
//! Modes:
//! - `monitor`: sample only, never replace.
//! - `calibrate` (the paper's procedure): monitor until enough instances have
//!   enough post-warm-up samples, then freeze the threshold and enforce it.
//! - `fixed`: the operator's number.
//! - `rolling`: calibrate first, then recompute over a recent window at every
//!   round, never below the calibrated threshold (replacing instances pulls
//!   the medians down, and a threshold that followed them would spiral).

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use estimator::{Estimate, Method, Sample, Warmup};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use volume::{ProcessSample, Volume, VolumeError};

use crate::pool::{Pool, ReplaceReason};
use crate::procstat::ProcessMemory;

/// How the threshold is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Sample only, never replace.
    Monitor,
    /// Monitor until the sample is big enough, then freeze a threshold and
    /// enforce it (the paper's procedure).
    Calibrate,
    /// The operator's threshold.
    Fixed,
    /// Calibrate, then recompute over a recent window, never below the
    /// calibrated value.
    Rolling,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use clap::ValueEnum as _;
        match self.to_possible_value() {
            Some(value) => f.write_str(value.get_name()),
            None => write!(f, "{self:?}"),
        }
    }
}

/// Why the estimator could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum EstimatorError {
    /// The settings asked for are not valid (a client's mistake: 400).
    #[error("{0}")]
    Invalid(String),
    /// The samples could not be read or written (the server's: 500).
    #[error(transparent)]
    Volume(#[from] VolumeError),
}

/// The estimator's configuration (see `config.rs` for the flags).
#[derive(Debug, Clone)]
pub struct EstimatorConfig {
    pub mode: Mode,
    pub method: Method,
    pub alpha: f64,
    /// The operator's threshold for `fixed` mode, in bytes.
    pub fixed_threshold: Option<u64>,
    pub warmup: Warmup,
    pub sample_interval: Duration,
    /// Instances that must be ready before the threshold is frozen. Ready:
    /// at least `calibration_samples` steady samples, and at least
    /// `calibration_requests` requests served (an instance idle since it
    /// started is steady, but shows nothing of the workload).
    pub calibration_instances: usize,
    pub calibration_samples: usize,
    pub calibration_requests: u64,
    /// The window `rolling` recomputes over.
    pub rolling_window: Duration,
    /// The threshold never goes below a fresh instance's memory plus this.
    pub floor_margin: u64,
    /// How long samples are kept in the database.
    pub retention: Duration,
}

/// A change asked for through `PUT /admin/estimator`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsChange {
    pub mode: Option<Mode>,
    pub method: Option<Method>,
    pub alpha: Option<f64>,
    /// Bytes; for `fixed` mode.
    pub threshold: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CalibrationProgress {
    /// `collecting`, `frozen`, or `unused` (in `monitor` and `fixed`).
    pub state: &'static str,
    pub instances_ready: usize,
    pub instances_needed: usize,
    pub samples_per_instance: usize,
    pub requests_per_instance: u64,
    /// The instances whose medians the frozen estimate used.
    pub instances_used: Vec<u64>,
    /// Unix milliseconds.
    pub started_ms: i64,
    pub frozen_ms: Option<i64>,
}

/// `GET /admin/estimator`.
#[derive(Debug, Clone, Serialize)]
pub struct EstimatorReport {
    pub mode: Mode,
    pub method: Method,
    pub alpha: f64,
    pub warmup: String,
    /// The threshold the pool enforces now; none while only monitoring.
    pub threshold_bytes: Option<u64>,
    pub fixed_threshold_bytes: Option<u64>,
    /// The estimate behind the threshold (the rolling one in `rolling`).
    pub estimate: Option<Estimate>,
    /// The frozen estimate of calibration.
    pub calibrated: Option<Estimate>,
    pub calibration: CalibrationProgress,
    pub baseline_bytes: u64,
    pub floor_bytes: u64,
    pub sample_interval_ms: u64,
    pub last_sample_ms: Option<i64>,
    pub last_error: Option<String>,
    pub restarts: u64,
}

#[derive(Debug, Clone, Copy)]
struct Settings {
    mode: Mode,
    method: Method,
    alpha: f64,
    fixed_threshold: Option<u64>,
}

#[derive(Debug)]
struct Frozen {
    estimate: Estimate,
    /// The samples it was computed from: `[from, to]` in Unix milliseconds.
    window: (i64, i64),
}

#[derive(Debug)]
struct State {
    settings: Settings,
    calibration_started_ms: i64,
    calibrated: Option<Frozen>,
    /// The instances whose medians the frozen estimate used.
    calibration_instances: BTreeSet<u64>,
    current: Option<Estimate>,
    instances_ready: usize,
    last_sample_ms: Option<i64>,
    last_error: Option<String>,
}

/// The estimator task's shared half. Share it as `Arc<Recycler>`.
#[derive(Debug)]
pub struct Recycler {
    pool: Arc<Pool>,
    volume: Arc<Volume>,
    config: EstimatorConfig,
    state: Mutex<State>,
    stop: watch::Sender<bool>,
}

impl Recycler {
    pub fn new(
        pool: Arc<Pool>,
        volume: Arc<Volume>,
        config: EstimatorConfig,
    ) -> Result<Arc<Self>, String> {
        let settings = Settings {
            mode: config.mode,
            method: config.method,
            alpha: config.alpha,
            fixed_threshold: config.fixed_threshold,
        };
        validate(&settings)?;
        let recycler = Arc::new(Self {
            pool,
            volume,
            state: Mutex::new(State {
                settings,
                calibration_started_ms: volume::now_ms(),
                calibrated: None,
                calibration_instances: BTreeSet::new(),
                current: None,
                instances_ready: 0,
                last_sample_ms: None,
                last_error: None,
            }),
            config,
            stop: watch::channel(false).0,
        });
        recycler.apply_fixed();
        Ok(recycler)
    }

    /// Sample every `sample_interval` until [`Recycler::stop`].
    pub async fn run(self: Arc<Self>) {
        let mut stopped = self.stop.subscribe();
        let mut ticks = tokio::time::interval(self.config.sample_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                _ = stopped.wait_for(|stop| *stop) => return,
            }
            if let Err(error) = self.round().await {
                tracing::error!(%error, "estimator round failed");
                self.lock().last_error = Some(error.to_string());
            }
        }
    }

    pub fn stop(&self) {
        self.stop.send_replace(true);
    }

    /// One round: sample, store, update the threshold, enforce it.
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
        self.lock().last_sample_ms = Some(now);
        self.update_threshold(now).await?;
        self.pool.enforce().await;
        Ok(())
    }

    async fn update_threshold(&self, now: i64) -> Result<(), VolumeError> {
        let (settings, started, calibrated) = {
            let state = self.lock();
            let calibrated = state
                .calibrated
                .as_ref()
                .map(|frozen| frozen.estimate.threshold_bytes);
            (state.settings, state.calibration_started_ms, calibrated)
        };
        match settings.mode {
            Mode::Monitor => self.pool.set_threshold(None),
            Mode::Fixed => self.pool.set_threshold(settings.fixed_threshold),
            Mode::Calibrate | Mode::Rolling => {
                let calibrated = match calibrated {
                    Some(threshold) => threshold,
                    None => match self.try_calibrate(&settings, started, now).await? {
                        Some(threshold) => threshold,
                        None => {
                            self.pool.set_threshold(None);
                            return Ok(());
                        }
                    },
                };
                let threshold = if settings.mode == Mode::Rolling {
                    self.rolling(&settings, now, calibrated).await?
                } else {
                    calibrated
                };
                self.pool.set_threshold(Some(threshold));
            }
        }
        Ok(())
    }

    /// Freeze the threshold if enough instances have enough steady samples.
    async fn try_calibrate(
        &self,
        settings: &Settings,
        started: i64,
        now: i64,
    ) -> Result<Option<u64>, VolumeError> {
        let samples = self.samples(started, now).await?;
        let summaries = estimator::summarize(&samples, self.config.warmup);
        let worked: BTreeSet<u64> = self
            .pool
            .instances()
            .into_iter()
            .filter(|instance| instance.requests >= self.config.calibration_requests)
            .map(|instance| instance.id)
            .collect();
        let (used, ready): (BTreeSet<u64>, Vec<f64>) = summaries
            .iter()
            .filter(|(id, summary)| {
                worked.contains(id) && summary.steady_samples >= self.config.calibration_samples
            })
            .map(|(id, summary)| (*id, summary.median))
            .unzip();
        let needed = self.instances_needed();
        self.lock().instances_ready = ready.len();
        if ready.len() < needed {
            return Ok(None);
        }
        match estimator::estimate(
            &ready,
            settings.method,
            settings.alpha,
            Some(self.floor_bytes()),
        ) {
            Ok(estimate) => {
                tracing::info!(
                    threshold_bytes = estimate.threshold_bytes,
                    n = estimate.n,
                    mean_bytes = estimate.mean_bytes,
                    normality_p = estimate.normality_p,
                    "calibrated the restart threshold"
                );
                let threshold = estimate.threshold_bytes;
                let mut state = self.lock();
                state.current = Some(estimate.clone());
                state.calibration_instances = used;
                state.calibrated = Some(Frozen {
                    estimate,
                    window: (started, now),
                });
                Ok(Some(threshold))
            }
            Err(error) => {
                self.lock().last_error = Some(error.to_string());
                Ok(None)
            }
        }
    }

    /// The estimate over the recent window, never below `calibrated`.
    async fn rolling(
        &self,
        settings: &Settings,
        now: i64,
        calibrated: u64,
    ) -> Result<u64, VolumeError> {
        let window = i64::try_from(self.config.rolling_window.as_millis()).unwrap_or(i64::MAX);
        let samples = self.samples(now.saturating_sub(window), now).await?;
        let medians: Vec<f64> = estimator::instance_medians(&samples, self.config.warmup)
            .into_values()
            .collect();
        let floor = self.floor_bytes().max(calibrated);
        match estimator::estimate(&medians, settings.method, settings.alpha, Some(floor)) {
            Ok(estimate) => {
                let threshold = estimate.threshold_bytes;
                self.lock().current = Some(estimate);
                Ok(threshold)
            }
            Err(_) => Ok(calibrated),
        }
    }

    /// Instance samples taken in `[from, to]` (Unix milliseconds).
    pub async fn samples(&self, from: i64, to: i64) -> Result<Vec<Sample>, VolumeError> {
        self.volume.samples().memory(from, to).await
    }

    /// Change mode, method, alpha or the fixed threshold now.
    pub async fn update(&self, change: SettingsChange) -> Result<EstimatorReport, EstimatorError> {
        let now = volume::now_ms();
        let (settings, recompute) = {
            // Re-estimation uses the instances that calibration used.
            let state = self.lock();
            let mut settings = state.settings;
            if let Some(mode) = change.mode {
                settings.mode = mode;
            }
            if let Some(method) = change.method {
                settings.method = method;
            }
            if let Some(alpha) = change.alpha {
                settings.alpha = alpha;
            }
            if let Some(threshold) = change.threshold {
                settings.fixed_threshold = Some(threshold);
                // A threshold alone means "use this number".
                if change.mode.is_none() {
                    settings.mode = Mode::Fixed;
                }
            }
            validate(&settings).map_err(EstimatorError::Invalid)?;
            let statistics_changed =
                settings.method != state.settings.method || settings.alpha != state.settings.alpha;
            let window = state.calibrated.as_ref().map(|frozen| frozen.window);
            (settings, window.filter(|_| statistics_changed))
        };
        // Re-estimate the frozen threshold from the same evidence.
        let refrozen = match recompute {
            Some((from, to)) => {
                let samples = self.samples(from, to).await?;
                let used = self.lock().calibration_instances.clone();
                let medians: Vec<f64> = estimator::summarize(&samples, self.config.warmup)
                    .into_iter()
                    .filter(|(id, _)| used.contains(id))
                    .map(|(_, summary)| summary.median)
                    .collect();
                let estimate = estimator::estimate(
                    &medians,
                    settings.method,
                    settings.alpha,
                    Some(self.floor_bytes()),
                )
                .map_err(|e| {
                    EstimatorError::Invalid(format!(
                        "cannot re-estimate from the calibration samples: {e}"
                    ))
                })?;
                Some(Frozen {
                    estimate,
                    window: (from, to),
                })
            }
            None => None,
        };
        {
            let mut state = self.lock();
            let restart_calibration = change.mode == Some(Mode::Calibrate);
            state.settings = settings;
            if restart_calibration {
                state.calibrated = None;
                state.calibration_instances.clear();
                state.current = None;
                state.calibration_started_ms = now;
                state.instances_ready = 0;
            } else if let Some(frozen) = refrozen {
                state.current = Some(frozen.estimate.clone());
                state.calibrated = Some(frozen);
            }
            state.last_error = None;
        }
        tracing::info!(mode = %settings.mode, method = %settings.method, alpha = settings.alpha, fixed = ?settings.fixed_threshold, "estimator settings changed");
        self.update_threshold(now).await?;
        self.pool.enforce().await;
        Ok(self.report())
    }

    pub fn report(&self) -> EstimatorReport {
        let state = self.lock();
        let settings = state.settings;
        let uses_calibration = matches!(settings.mode, Mode::Calibrate | Mode::Rolling);
        EstimatorReport {
            mode: settings.mode,
            method: settings.method,
            alpha: settings.alpha,
            warmup: self.config.warmup.to_string(),
            threshold_bytes: self.pool.threshold(),
            fixed_threshold_bytes: settings.fixed_threshold,
            estimate: state.current.clone().filter(|_| uses_calibration),
            calibrated: state
                .calibrated
                .as_ref()
                .map(|frozen| frozen.estimate.clone()),
            calibration: CalibrationProgress {
                state: match (uses_calibration, &state.calibrated) {
                    (false, _) => "unused",
                    (true, None) => "collecting",
                    (true, Some(_)) => "frozen",
                },
                instances_ready: state.instances_ready,
                instances_needed: self.instances_needed(),
                samples_per_instance: self.config.calibration_samples,
                requests_per_instance: self.config.calibration_requests,
                instances_used: state.calibration_instances.iter().copied().collect(),
                started_ms: state.calibration_started_ms,
                frozen_ms: state.calibrated.as_ref().map(|frozen| frozen.window.1),
            },
            baseline_bytes: self.pool.baseline_bytes(),
            floor_bytes: self.floor_bytes(),
            sample_interval_ms: u64::try_from(self.config.sample_interval.as_millis())
                .unwrap_or(u64::MAX),
            last_sample_ms: state.last_sample_ms,
            last_error: state.last_error.clone(),
            restarts: self
                .pool
                .replacements()
                .get(&ReplaceReason::Threshold)
                .copied()
                .unwrap_or_default(),
        }
    }

    fn apply_fixed(&self) {
        let settings = self.lock().settings;
        if settings.mode == Mode::Fixed {
            self.pool.set_threshold(settings.fixed_threshold);
        }
    }

    fn instances_needed(&self) -> usize {
        let all = self.pool.config().size;
        let wanted = if self.config.calibration_instances == 0 {
            all
        } else {
            self.config.calibration_instances
        };
        wanted.max(2)
    }

    fn floor_bytes(&self) -> u64 {
        self.pool
            .baseline_bytes()
            .saturating_add(self.config.floor_margin)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn validate(settings: &Settings) -> Result<(), String> {
    if !(settings.alpha > 0.0 && settings.alpha < 1.0) {
        return Err(format!(
            "alpha must lie strictly between 0 and 1, got {}",
            settings.alpha
        ));
    }
    if settings.mode == Mode::Fixed && settings.fixed_threshold.is_none_or(|t| t == 0) {
        return Err(
            "fixed mode needs a threshold in bytes (--threshold, or \"threshold\" in the request)"
                .into(),
        );
    }
    Ok(())
}
