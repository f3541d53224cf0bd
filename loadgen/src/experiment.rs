//! `loadgen experiment`: the paper's experiment end to end (section 4–5).
//!
//! N identical instances read randomly chosen files of a corpus whose sizes
//! are normally distributed, R reads per instance, memory sampled every
//! tick. Time is compressed (our sampler is exact and instances are in
//! process): one tick stands for the paper's 10 s, and reads are paced so
//! each instance reads about once per tick, spread evenly (`--dispatch
//! lru`), as the paper's processes each read once per 10 s.
//!
//! Every arm starts a fresh gateway process on the same data directory, so
//! it starts from fresh instances and its RSS is the gateway's alone:
//! - `monitor`: no restarts; its samples are exported as CSV;
//! - `paper`: the threshold `estimator threshold` computes from the monitor
//!   CSV (ci-mean, α = 0.05, warm-up stable:2), applied as a fixed threshold;
//! - further arms: other methods and α; memory-aware dispatch without a
//!   threshold, with the paper's, and with one calibrated on memory-aware
//!   traffic; and a fresh instance per request (the lower bound);
//! - `oracle` and the frontier (`loadgen policy`): fixed thresholds at a
//!   restart rate by every file's true footprint, measured on a fresh
//!   instance before the arms run ([`crate::oracle`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use estimator::{Method, Warmup};
use serde::{Deserialize, Serialize};

use crate::child::Gateway;
use crate::corpus::{self, Manifest, Shape, SizeDistribution};
use crate::load::{self, Op, RunSpec, Stop, Workload};
use crate::oracle::{self, FileFootprint};

/// The shape of one experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub instances: u32,
    pub files: usize,
    pub sizes: SizeDistribution,
    pub reads_per_instance: u64,
    /// Stands for the paper's 10 s sampling period.
    pub tick: Duration,
    /// Concurrent readers.
    pub concurrency: usize,
    pub seed: u64,
    /// Pace reads so each instance reads about once per tick (the paper);
    /// otherwise the readers are closed-loop, as fast as the pool serves.
    #[serde(default = "yes")]
    pub paced: bool,
    /// Sizes creep up over the run (see `RunSpec::drift`).
    #[serde(default)]
    pub drift: bool,
}

fn yes() -> bool {
    true
}

impl Plan {
    /// The paper's scale: 50 instances, 1024 files, 60 reads each.
    pub fn full() -> Self {
        Self {
            instances: 50,
            files: 1024,
            sizes: SizeDistribution {
                mean: 2.0 * 1048576.0,
                stddev: 0.5 * 1048576.0,
                min: 64 * 1024,
                max: 8 * 1048576,
                shape: Shape::Normal,
            },
            reads_per_instance: 60,
            tick: Duration::from_millis(1000),
            concurrency: 8,
            seed: 1,
            paced: true,
            drift: false,
        }
    }

    /// A small version that finishes in well under two minutes.
    pub fn quick() -> Self {
        Self {
            instances: 12,
            files: 128,
            sizes: SizeDistribution {
                mean: 512.0 * 1024.0,
                stddev: 128.0 * 1024.0,
                min: 16 * 1024,
                max: 2 * 1048576,
                shape: Shape::Normal,
            },
            reads_per_instance: 30,
            tick: Duration::from_millis(250),
            concurrency: 4,
            seed: 1,
            paced: true,
            drift: false,
        }
    }
}

/// How an arm sets the threshold.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Policy {
    /// Sample only.
    Monitor,
    /// A threshold computed from the samples of the earlier arm `from`
    /// (a monitor arm), as `estimator threshold` computes it.
    Estimated {
        method: Method,
        alpha: f64,
        from: String,
    },
    /// Replace after every request (threshold of one byte).
    FreshPerRequest,
    /// The gateway's defaults: no estimator flag at all.
    Default,
    /// The restart-budget method with this budget, learned on line.
    RestartBudget { budget: f64 },
    /// The oracle: the lowest fixed threshold whose restart rate, by the
    /// files' true footprints, is at most the rate the earlier arm `of`
    /// reached (`crate::oracle`). The gateway's defaults otherwise.
    Oracle { of: String },
    /// A point of the frontier: the lowest fixed threshold at this restart
    /// rate by the true footprints. The gateway's defaults otherwise.
    FixedAtRate { rate: f64 },
}

impl Policy {
    /// Whether the arm needs the files' true footprints.
    fn needs_footprints(&self) -> bool {
        matches!(self, Self::Oracle { .. } | Self::FixedAtRate { .. })
    }

    /// A threshold fixed for the whole run at a point of the true
    /// footprints' distribution: with the default's dispatch, a point of
    /// the frontier.
    pub fn on_frontier(&self) -> bool {
        matches!(
            self,
            Self::FreshPerRequest | Self::Oracle { .. } | Self::FixedAtRate { .. }
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Arm {
    pub name: String,
    pub policy: Policy,
    /// The gateway's `--dispatch`: `lru` spreads reads evenly, as the
    /// paper's processes each read in turn; `memory-aware` routes by size;
    /// none leaves the gateway's default.
    pub dispatch: Option<String>,
}

/// The arms of a standard experiment.
pub fn standard_arms() -> Vec<Arm> {
    let arm = |name: &str, policy, dispatch: &str| Arm {
        name: name.into(),
        policy,
        dispatch: Some(dispatch.into()),
    };
    let estimated = |method, alpha, from: &str| Policy::Estimated {
        method,
        alpha,
        from: from.into(),
    };
    vec![
        arm("monitor", Policy::Monitor, "lru"),
        arm("paper", estimated(Method::CiMean, 0.05, "monitor"), "lru"),
        arm(
            "ci-mean-a0.5",
            estimated(Method::CiMean, 0.5, "monitor"),
            "lru",
        ),
        arm(
            "prediction-a0.05",
            estimated(Method::Prediction, 0.05, "monitor"),
            "lru",
        ),
        arm(
            "quantile-a0.5",
            estimated(Method::Quantile, 0.5, "monitor"),
            "lru",
        ),
        arm("mru", Policy::Monitor, "mru"),
        arm("memory-aware", Policy::Monitor, "memory-aware"),
        arm(
            "memory-aware-paper",
            estimated(Method::CiMean, 0.05, "monitor"),
            "memory-aware",
        ),
        arm(
            "memory-aware-calibrated",
            estimated(Method::CiMean, 0.05, "memory-aware"),
            "memory-aware",
        ),
        arm("fresh-per-request", Policy::FreshPerRequest, "lru"),
    ]
}

/// What one arm measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmResult {
    pub name: String,
    pub policy: Policy,
    /// The gateway's `--dispatch`, if the arm set one.
    #[serde(default)]
    pub dispatch: Option<String>,
    pub threshold_bytes: Option<u64>,
    /// Per sampling round, the mean over instances; then the mean over rounds.
    pub mean_memory_bytes: f64,
    /// Against the monitor arm, in percent (positive: less memory).
    pub reduction_percent: f64,
    pub restarts: u64,
    pub restarts_per_request: f64,
    pub requests: u64,
    pub failed_requests: u64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// The gateway process's RSS, averaged over the run.
    pub mean_rss_bytes: f64,
    /// The sample file of this arm.
    pub samples_csv: String,
    /// The restart rate the files' true footprints give its threshold (the
    /// one in force at the end), when they were measured.
    #[serde(default)]
    pub predicted_restarts_per_request: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub plan: Plan,
    pub arms: Vec<ArmResult>,
    /// Every file's true footprint, when an arm needed them
    /// ([`crate::oracle::measure`]).
    #[serde(default)]
    pub footprints: Vec<FileFootprint>,
}

impl Report {
    /// The true footprints and how often each file is read, in the
    /// manifest's order.
    pub fn weighted_footprints(&self) -> (Vec<u64>, Vec<f64>) {
        let footprints: Vec<u64> = self.footprints.iter().map(|f| f.footprint_bytes).collect();
        let sizes: Vec<u64> = self.footprints.iter().map(|f| f.size).collect();
        let requests = u64::from(self.plan.instances) * self.plan.reads_per_instance;
        let weights = oracle::request_weights(&sizes, self.plan.drift, requests);
        (footprints, weights)
    }
}

/// Run `arms` (the first must be `monitor`) with a gateway started from
/// `loadgen_exe serve`, writing sample CSVs into `out`.
pub async fn run(
    loadgen_exe: &Path,
    plan: &Plan,
    arms: &[Arm],
    out: &Path,
) -> anyhow::Result<Report> {
    anyhow::ensure!(
        matches!(arms.first().map(|a| &a.policy), Some(Policy::Monitor)),
        "the first arm must be the monitor arm"
    );
    std::fs::create_dir_all(out)?;
    let work = out.join("work");
    let data_dir = work.join("data");
    let corpus_dir = work.join("corpus");
    let _ = std::fs::remove_dir_all(&work);
    let manifest = corpus::generate(&corpus_dir, plan.files, plan.sizes, plan.seed)?;

    // Upload the corpus once; every arm then starts fresh on the same data.
    {
        let gateway = start_gateway(
            loadgen_exe,
            &data_dir,
            plan,
            true,
            &["--estimator-mode", "monitor", "--dispatch", "lru"],
        )
        .await?;
        let mut upload = read_spec(
            &gateway.url,
            plan,
            &corpus_dir,
            &manifest,
            Stop::Requests(0),
        );
        upload.assume_stored = false;
        load::run(&upload, false).await?;
        gateway.stop()?;
    }
    let footprints = if arms.iter().any(|arm| arm.policy.needs_footprints()) {
        tracing::info!("measuring every file's footprint on a fresh instance");
        oracle::measure(loadgen_exe, &data_dir, &manifest).await?
    } else {
        Vec::new()
    };
    let mut report = Report {
        plan: plan.clone(),
        arms: Vec::new(),
        footprints,
    };
    let (true_footprints, weights) = report.weighted_footprints();
    let at_rate = |rate: f64| {
        oracle::lowest_threshold(&true_footprints, &weights, rate)
            .map(|quantile| quantile.threshold_bytes)
            .context("no footprints measured")
    };

    let mut results: Vec<ArmResult> = Vec::new();
    let mut monitor_samples: BTreeMap<String, Vec<estimator::Sample>> = BTreeMap::new();
    for arm in arms {
        let threshold = match &arm.policy {
            Policy::Monitor | Policy::Default | Policy::RestartBudget { .. } => None,
            Policy::FreshPerRequest => Some(1),
            Policy::FixedAtRate { rate } => Some(at_rate(*rate)?),
            Policy::Oracle { of } => {
                let rate = results
                    .iter()
                    .find(|done| &done.name == of)
                    .with_context(|| format!("arm {}: no earlier arm named {of}", arm.name))?
                    .restarts_per_request;
                Some(at_rate(rate)?)
            }
            Policy::Estimated {
                method,
                alpha,
                from,
            } => {
                let samples = monitor_samples.get(from).with_context(|| {
                    format!("arm {}: no earlier monitor arm named {from}", arm.name)
                })?;
                // Exactly what `estimator threshold --csv monitor.csv` computes.
                let estimate = estimator::threshold_from_samples(
                    samples,
                    Warmup::default(),
                    *method,
                    *alpha,
                    None,
                )?;
                Some(estimate.threshold_bytes)
            }
        };
        let threshold_arg = threshold.map(|t| t.to_string());
        let budget_arg = match &arm.policy {
            Policy::RestartBudget { budget } => Some(budget.to_string()),
            _ => None,
        };
        let mut flags: Vec<&str> = Vec::new();
        match (&arm.policy, &threshold_arg, &budget_arg) {
            (Policy::Default, _, _) => {}
            (_, Some(threshold), _) => {
                flags.extend([
                    "--estimator-mode",
                    "fixed",
                    "--threshold",
                    threshold.as_str(),
                ]);
            }
            (_, None, Some(budget)) => flags.extend(["--restart-budget", budget.as_str()]),
            (_, None, None) => flags.extend(["--estimator-mode", "monitor"]),
        }
        if let Some(dispatch) = &arm.dispatch {
            flags.extend(["--dispatch", dispatch.as_str()]);
        }
        tracing::info!(arm = %arm.name, ?threshold, "starting arm");
        // Every arm's gateway keeps its samples in the same database: this
        // arm's are the ones taken from now on.
        let started_ms = unix_ms();
        // The oracle and the frontier run as the default does, but for the
        // threshold.
        let tuned = !matches!(
            arm.policy,
            Policy::Default | Policy::Oracle { .. } | Policy::FixedAtRate { .. }
        );
        let gateway = start_gateway(loadgen_exe, &data_dir, plan, tuned, &flags).await?;
        let reads = u64::from(plan.instances) * plan.reads_per_instance;
        let spec = read_spec(
            &gateway.url,
            plan,
            &corpus_dir,
            &manifest,
            Stop::Requests(reads),
        );
        let http = load::client(2)?;
        let summary = load::run(&spec, false).await?;
        // One more sampling round after the last read.
        tokio::time::sleep(plan.tick + plan.tick / 2).await;
        let csv = http
            .get(format!(
                "{}/admin/samples.csv?from={started_ms}",
                gateway.url
            ))
            .send()
            .await?
            .text()
            .await?;
        let process_csv = http
            .get(format!(
                "{}/admin/process-samples.csv?from={started_ms}",
                gateway.url
            ))
            .send()
            .await?
            .text()
            .await?;
        let rss = column_mean(&process_csv, 1);
        let pool: serde_json::Value = http
            .get(format!("{}/admin/pool", gateway.url))
            .send()
            .await?
            .json()
            .await?;
        // A learned threshold: the one in force at the end.
        let estimator: serde_json::Value = http
            .get(format!("{}/admin/estimator", gateway.url))
            .send()
            .await?
            .json()
            .await?;
        let threshold = threshold.or(estimator["threshold_bytes"].as_u64());
        gateway.stop()?;

        let csv_path = out.join(format!("{}.csv", arm.name));
        std::fs::write(&csv_path, &csv)?;
        let samples = estimator::read_csv(csv.as_bytes())?;
        let mean_memory = time_averaged_mean(&samples);
        if matches!(arm.policy, Policy::Monitor) {
            monitor_samples.insert(arm.name.clone(), samples);
        }
        let restarts = ["threshold", "drift"]
            .iter()
            .map(|reason| pool["replacements"][reason].as_u64().unwrap_or(0))
            .sum::<u64>();
        let baseline = results
            .first()
            .map_or(mean_memory, |monitor| monitor.mean_memory_bytes);
        results.push(ArmResult {
            name: arm.name.clone(),
            policy: arm.policy.clone(),
            dispatch: arm.dispatch.clone(),
            threshold_bytes: threshold,
            mean_memory_bytes: mean_memory,
            reduction_percent: 100.0 * (baseline - mean_memory) / baseline,
            restarts,
            restarts_per_request: restarts as f64 / summary.requests.max(1) as f64,
            requests: summary.requests,
            failed_requests: summary.failed,
            latency_p50_ms: summary.latency_ms.p50,
            latency_p99_ms: summary.latency_ms.p99,
            mean_rss_bytes: rss,
            samples_csv: csv_path.display().to_string(),
            predicted_restarts_per_request: threshold
                .filter(|_| !true_footprints.is_empty())
                .map(|t| oracle::restart_rate(&true_footprints, &weights, t)),
        });
    }
    let _ = std::fs::remove_dir_all(&work);
    report.arms = results;
    Ok(report)
}

/// The read workload: the corpus, downloads only, paced so each instance
/// reads about once per tick.
fn read_spec(url: &str, plan: &Plan, dir: &Path, manifest: &Manifest, stop: Stop) -> RunSpec {
    RunSpec {
        base_url: url.to_owned(),
        op: Op::Download,
        workload: Workload::Corpus {
            dir: dir.to_owned(),
            manifest: manifest.clone(),
        },
        concurrency: plan.concurrency,
        rate: plan
            .paced
            .then(|| f64::from(plan.instances) / plan.tick.as_secs_f64()),
        stop,
        prefix: "experiment".into(),
        seed: plan.seed,
        assume_stored: true,
        drift: plan.drift,
        fresh_bodies: false,
    }
}

/// Mean over sampling rounds of the mean memory over the instances sampled
/// in that round.
pub fn time_averaged_mean(samples: &[estimator::Sample]) -> f64 {
    let mut rounds: std::collections::BTreeMap<i64, (f64, usize)> =
        std::collections::BTreeMap::new();
    for sample in samples {
        let round = rounds.entry(sample.timestamp_ms).or_default();
        round.0 += sample.bytes as f64;
        round.1 += 1;
    }
    if rounds.is_empty() {
        return 0.0;
    }
    rounds.values().map(|(sum, n)| sum / *n as f64).sum::<f64>() / rounds.len() as f64
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

/// The mean of column `index` of a CSV with a header line.
fn column_mean(csv: &str, index: usize) -> f64 {
    let values: Vec<f64> = csv
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').nth(index)?.trim().parse().ok())
        .collect();
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// A gateway child for one arm: the plan's pool size and sampling tick;
/// `tuned` also allows recycling from the first request and for the whole
/// pool at once (the paper's arms), where untuned keeps the gateway's
/// defaults.
async fn start_gateway(
    exe: &Path,
    data_dir: &Path,
    plan: &Plan,
    tuned: bool,
    flags: &[&str],
) -> anyhow::Result<Gateway> {
    let instances = plan.instances.to_string();
    let tick = format!("{}ms", plan.tick.as_millis());
    let mut args = vec!["--instances", &instances, "--sample-interval", &tick];
    if tuned {
        args.extend([
            "--min-requests-before-recycle",
            "1",
            "--max-recycling-fraction",
            "1",
        ]);
    }
    args.extend_from_slice(flags);
    Gateway::start(exe, data_dir, &args).await
}
