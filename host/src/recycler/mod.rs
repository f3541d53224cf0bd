//! The embedded estimator: a thin I/O shell around a pure policy.
//!
//! Every `sample_interval` it samples each instance's linear memory and the
//! process's RSS into the database, stores the request footprints the pool
//! recorded since the last round (one batch) and reads back the most recent
//! window of footprints of every gateway on the database; every
//! `sample_interval`, and every few requests, it hands the policy what it
//! needs (that shared window with this gateway's footprints since, samples
//! from the database), sets the threshold the policy gives, and has the
//! pool replace the idle instances above it (busy ones are checked by the
//! pool the moment their request ends). At start, before the gateway
//! serves, it reads the shared window and steps once: a restarted gateway,
//! or a new one in a running scale-out, has a threshold from its first
//! request.
//!
//! Layout:
//! - `mod.rs`: the task, the sampling, the admin view and run-time changes.
//! - [`settings`]: what the operator chooses (mode, method, α, restart
//!   budget, fixed threshold), how a change applies, why one is refused.
//! - [`threshold`]: the threshold's policy: calibration progress and the
//!   threshold each step gives, pure and unit-tested with virtual time.

pub mod settings;
pub mod threshold;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use estimator::{Footprint, Sample};
use serde::Serialize;
use tokio::sync::watch;
use volume::{FootprintRetention, ProcessSample, Volume, VolumeError};

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
    /// How long samples and footprints are kept in the database.
    pub retention: Duration,
    /// Store footprints in the database and learn from every gateway's
    /// there; `false`: from this process's alone, storing none.
    pub share_footprints: bool,
}

/// Footprints kept in the database in all, in footprint windows: room for
/// a few gateways' windows (each gateway keeps at most one of its own).
pub const SHARED_WINDOWS_KEPT: u64 = 4;

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
    /// This process's name in the database's footprints (random per start).
    pub gateway: String,
    /// Footprints recorded by the other gateways on the database (or by
    /// this gateway's earlier runs) that this one learned from: read at
    /// start and at every round.
    pub footprints_from_others: u64,
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

/// What this gateway knows of the footprints in the database.
#[derive(Debug, Default)]
struct Shared {
    /// The last read: the most recent footprints of every gateway, oldest
    /// first (at most the window).
    window: Vec<Footprint>,
    /// That read held this gateway's footprints numbered up to this.
    read_through: u64,
    /// This gateway's footprints numbered up to this are stored.
    stored_through: u64,
    /// Footprints of other gateways (or earlier runs) taken in so far.
    received: u64,
    /// Each other gateway: the highest of its numbers read so far, and
    /// when it was last read (marks older than the retention go).
    seen: HashMap<String, (u64, i64)>,
}

/// The estimator task's shared half. Share it as `Arc<Recycler>`.
#[derive(Debug)]
pub struct Recycler {
    pool: Arc<Pool>,
    volume: Arc<Volume>,
    config: EstimatorConfig,
    policy: Mutex<Policy>,
    status: Mutex<Status>,
    shared: Mutex<Shared>,
    /// This process's name in the footprints table.
    gateway: String,
    stop: watch::Sender<bool>,
}

impl Recycler {
    /// The estimator, with the threshold of its first step in force: from
    /// the footprints in the database (of earlier runs on this data, and of
    /// the other gateways on it), so call it before the gateway serves. A
    /// database that cannot be read then is reported (`last_error`), not
    /// fatal: the estimator learns from this gateway's requests alone until
    /// it can.
    pub async fn new(
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
            shared: Mutex::default(),
            gateway: format!("{:016x}", rand::random::<u64>()),
            stop: watch::channel(false).0,
        });
        let shared = recycler.share_footprints(volume::now_ms()).await;
        let stepped = recycler.step().await;
        if stepped.is_err() {
            // `fixed` holds from the first request all the same.
            recycler.step_now(&[], &[], volume::now_ms());
        }
        if let Err(error) = shared.and(stepped) {
            tracing::error!(%error, "the estimator's first step failed");
            recycler.status().last_error = Some(error.to_string());
        }
        Ok(recycler)
    }

    /// Sample every `sample_interval`, and step the policy every few
    /// requests, until [`Recycler::stop`]; then store the footprints
    /// recorded since the last round.
    pub async fn run(self: Arc<Self>) {
        let mut stopped = self.stop.subscribe();
        let mut ticks = tokio::time::interval(self.config.sample_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let sample = tokio::select! {
                _ = ticks.tick() => Some(true),
                () = self.pool.footprints().next_few() => Some(false),
                _ = stopped.wait_for(|stop| *stop) => None,
            };
            let Some(sample) = sample else {
                if self.config.share_footprints
                    && let Err(error) = self.store_footprints(volume::now_ms()).await
                {
                    tracing::error!(%error, "storing the last footprints failed");
                }
                return;
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

    /// One round: sample, store, share footprints, step the policy,
    /// enforce.
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
        store.prune(now.saturating_sub(self.retention_ms())).await?;
        self.status().last_sample_ms = Some(now);
        // A failed exchange leaves the last read and the unstored
        // footprints in place: still a step, on what is known.
        let shared = self.share_footprints(now).await;
        self.step().await?;
        shared
    }

    /// Store the footprints recorded since the last round (one batch, one
    /// transaction, pruning to the retention), then read the most recent
    /// window of every gateway's.
    async fn share_footprints(&self, now: i64) -> Result<(), VolumeError> {
        if !self.config.share_footprints {
            return Ok(());
        }
        let stored = self.store_footprints(now).await;
        let read = self.read_footprints(now).await;
        stored.and(read)
    }

    /// One batch: the footprints the pool recorded and the database does
    /// not have yet; and prune what the retention no longer keeps.
    async fn store_footprints(&self, now: i64) -> Result<(), VolumeError> {
        let log = self.pool.footprints();
        let batch = log.unstored();
        let window = self.config.policy.footprint_window;
        let keep = FootprintRetention {
            per_gateway: window,
            total: window.saturating_mul(SHARED_WINDOWS_KEPT),
            before_ms: now.saturating_sub(self.retention_ms()),
        };
        self.volume
            .footprints()
            .append(&self.gateway, &batch, &keep)
            .await?;
        if let Some(last) = batch.last() {
            log.stored(last.seq);
            self.shared().stored_through = last.seq;
        }
        Ok(())
    }

    /// Read the shared window, counting the footprints of other gateways
    /// not seen before.
    async fn read_footprints(&self, now: i64) -> Result<(), VolumeError> {
        let through = self.shared().stored_through;
        let rows = self
            .volume
            .footprints()
            .recent(
                self.config.policy.footprint_window,
                now.saturating_sub(self.retention_ms()),
            )
            .await?;
        let mut shared = self.shared();
        // What each other gateway had been counted through before this read:
        // a gateway whose rows drop out of one read and come back must not
        // have them counted again, so the marks outlive a read (kept as
        // long as its rows could be, the retention).
        let marks: HashMap<String, u64> = shared
            .seen
            .iter()
            .map(|(gateway, (seq, _))| (gateway.clone(), *seq))
            .collect();
        let mut received = 0;
        for row in &rows {
            if row.gateway == self.gateway {
                continue;
            }
            if row.record.seq > marks.get(&row.gateway).copied().unwrap_or(0) {
                received += 1;
            }
            let mark = shared.seen.entry(row.gateway.clone()).or_insert((0, now));
            *mark = (mark.0.max(row.record.seq), now);
        }
        let kept_from = now.saturating_sub(self.retention_ms());
        shared.seen.retain(|_, (_, read_ms)| *read_ms >= kept_from);
        shared.window = rows.iter().map(|row| row.record.footprint).collect();
        shared.read_through = through;
        shared.received += received;
        Ok(())
    }

    fn retention_ms(&self) -> i64 {
        i64::try_from(self.config.retention.as_millis()).unwrap_or(i64::MAX)
    }

    /// What the policy counts as requests observed: this gateway's, and
    /// the other gateways' (or earlier runs') read from the database.
    fn evidence(&self) -> u64 {
        self.pool
            .footprints()
            .recorded()
            .saturating_add(self.shared().received)
    }

    /// A step between rounds, after a few more requests: only for a policy
    /// that learns from footprints alone (one that needs samples waits for
    /// the next round rather than query the database every few requests).
    /// It learns from the last shared read and this gateway's footprints
    /// since: the database is not asked every few requests either.
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
        self.step_now(&samples, &served, now);
        self.pool.enforce().await;
        Ok(())
    }

    /// The policy's step on `samples`, `served` and the footprints known
    /// now; sets the threshold it gives.
    fn step_now(&self, samples: &[Sample], served: &[(u64, u64)], now: i64) {
        let (footprints, requests_recorded) = self.footprints();
        let threshold = self.policy().step(&threshold::Observed {
            now_ms: now,
            baseline_bytes: self.pool.baseline_bytes(),
            samples,
            served,
            footprints: &footprints,
            requests_recorded,
        });
        if threshold != self.pool.threshold() {
            tracing::info!(
                threshold_bytes = threshold,
                previous_bytes = self.pool.threshold(),
                "restart threshold changed"
            );
        }
        self.pool.set_threshold(threshold);
    }

    /// The most recent footprints (at most the window), oldest first: the
    /// last shared read, then this gateway's recorded since what that read
    /// held of them; and the count of requests they come from
    /// ([`Recycler::evidence`]), read together so they agree.
    fn footprints(&self) -> (Vec<Footprint>, u64) {
        let shared = self.shared();
        let local = self.pool.footprints().after(shared.read_through);
        let mut footprints = shared.window.clone();
        footprints.extend(local.footprints);
        let window = usize::try_from(self.config.policy.footprint_window).unwrap_or(usize::MAX);
        let excess = footprints.len().saturating_sub(window);
        footprints.drain(..excess);
        (footprints, local.recorded.saturating_add(shared.received))
    }

    /// Instance samples taken in `[from, to]` (Unix milliseconds).
    pub async fn samples(&self, from: i64, to: i64) -> Result<Vec<Sample>, VolumeError> {
        self.volume.samples().memory(from, to).await
    }

    /// Change mode, method, α, the restart budget or the fixed threshold now.
    pub async fn update(&self, change: SettingsChange) -> Result<EstimatorReport, EstimatorError> {
        let now = volume::now_ms();
        let recorded = self.evidence();
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
        let evidence = self.evidence();
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
                progress: policy.progress(evidence),
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
            summary: summary(&policy, threshold, baseline, evidence),
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
            gateway: self.gateway.clone(),
            footprints_from_others: evidence.saturating_sub(requests),
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

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared
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
