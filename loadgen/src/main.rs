//! The `loadgen` binary: `corpus` makes files, `run` drives a gateway.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use loadgen::corpus::{self, SizeDistribution};
use loadgen::experiment::{self, Plan};
use loadgen::load::{self, Op, RunSpec, Stop, Workload};
use loadgen::memory;
use loadgen::suite;

#[derive(Debug, Parser)]
#[command(name = "loadgen", version, about = "Load generator for wasm-storage")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write N files with normally distributed sizes and a manifest of their SHA-256.
    Corpus {
        /// Directory to write the files and `manifest.json` into.
        #[arg(long)]
        dir: PathBuf,
        /// How many files.
        #[arg(long, default_value_t = 1024)]
        count: usize,
        #[command(flatten)]
        sizes: SizeArgs,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Upload and/or download against a gateway, verifying every response.
    Run(RunArgs),
    /// The paper's experiment end to end: monitor, then thresholds from its
    /// samples (the paper's and others), each arm on a fresh gateway.
    Experiment {
        /// A small version that finishes in well under two minutes.
        #[arg(long)]
        quick: bool,
        #[command(flatten)]
        plan: PlanArgs,
        /// Directory for the sample CSVs and the figures (and work files
        /// while running).
        #[arg(long, default_value = "experiment")]
        out: PathBuf,
        /// Also write the results as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The estimator against the paper at concurrency 1, 8 and 32 on the
    /// paper's workload, a heavy-tailed one and one that drifts, with the
    /// gateway's defaults, restart budgets, and a trade-off curve.
    Policy {
        /// 25 reads per instance instead of 100 (a few minutes).
        #[arg(long)]
        quick: bool,
        /// Run only these workloads (normal, heavy-tailed, drift).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Leave out the frontier (fixed thresholds at restart rates of 0
        /// to 30 % by the true footprints, six arms a cell): about half as
        /// long.
        #[arg(long)]
        no_sweep: bool,
        /// Directory for the sample CSVs (and work files while running).
        #[arg(long, default_value = "policy")]
        out: PathBuf,
        /// Also write the results as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Draw the figures of a saved experiment report again.
    Figures {
        /// The report written by `experiment --json` or `policy --json`.
        #[arg(long)]
        json: PathBuf,
        /// Where to write the PNG and SVG files.
        #[arg(long)]
        out: PathBuf,
    },
    /// Memory of the whole gateway process under a burst of concurrent large
    /// uploads: peak RSS, RSS after, RSS after replacing every instance,
    /// throughput. Starts its own gateway child on a temp data directory.
    Burst {
        /// Concurrent uploads.
        #[arg(long, default_value_t = 40)]
        uploads: usize,
        /// Bytes per upload.
        #[arg(long, default_value_t = 100_000_000)]
        size: u64,
        /// Retry 503s for this long before counting an upload as failed.
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        give_up_after: Duration,
        /// Also write the report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Run this `gateway` binary instead of the gateway built into
        /// loadgen (to measure another build the same way).
        #[arg(long)]
        gateway_bin: Option<PathBuf>,
        /// Flags for the gateway child, after `--` (e.g. `-- --memory-budget 1GiB`).
        #[arg(last = true)]
        gateway_flags: Vec<String>,
    },
    /// Verified uploads and downloads of heavy-tailed sizes for a while with
    /// recycling on, sampling the gateway's RSS: does it grow?
    Soak {
        #[arg(long, default_value = "20m", value_parser = humantime::parse_duration)]
        duration: Duration,
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Body sizes are log-uniform between these (bytes).
        #[arg(long, default_value_t = 4096)]
        min_size: u64,
        #[arg(long, default_value_t = 64 << 20)]
        max_size: u64,
        /// How often RSS is sampled.
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        every: Duration,
        /// Also write the report (with every RSS sample) as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Flags for the gateway child, after `--`. Default: a fixed 16 MiB
        /// threshold, so recycling happens throughout.
        #[arg(last = true)]
        gateway_flags: Vec<String>,
    },
    /// Run a gateway (same flags as the `gateway` binary); the experiment
    /// starts one per arm this way.
    #[command(hide = true)]
    Serve {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Changes to the experiment's plan (the defaults are the paper's scale, or
/// `--quick`'s).
#[derive(Debug, Args)]
struct PlanArgs {
    /// Instances in the pool (paper: 50).
    #[arg(long)]
    instances: Option<u32>,
    /// Files in the corpus (paper: 1024).
    #[arg(long)]
    files: Option<usize>,
    /// Reads per instance (paper: 60).
    #[arg(long)]
    reads_per_instance: Option<u64>,
    /// What stands for the paper's 10 s between samples and between reads.
    #[arg(long, value_parser = humantime::parse_duration)]
    tick: Option<Duration>,
    /// Mean file size in bytes.
    #[arg(long)]
    file_mean: Option<f64>,
    /// Standard deviation of the file size in bytes.
    #[arg(long)]
    file_stddev: Option<f64>,
}

impl PlanArgs {
    fn apply(&self, mut plan: Plan) -> Plan {
        plan.instances = self.instances.unwrap_or(plan.instances);
        plan.files = self.files.unwrap_or(plan.files);
        plan.reads_per_instance = self.reads_per_instance.unwrap_or(plan.reads_per_instance);
        plan.tick = self.tick.unwrap_or(plan.tick);
        plan.sizes.mean = self.file_mean.unwrap_or(plan.sizes.mean);
        plan.sizes.stddev = self.file_stddev.unwrap_or(plan.sizes.stddev);
        plan
    }
}

#[derive(Debug, Args)]
struct SizeArgs {
    /// Mean file size in bytes.
    #[arg(long, default_value_t = 4_194_304.0)]
    mean: f64,
    /// Standard deviation of the size in bytes.
    #[arg(long, default_value_t = 1_048_576.0)]
    stddev: f64,
    /// Sizes are clipped to at least this many bytes.
    #[arg(long, default_value_t = 0)]
    min_size: u64,
    /// Sizes are clipped to at most this many bytes.
    #[arg(long, default_value_t = 16_777_216)]
    max_size: u64,
}

impl SizeArgs {
    fn distribution(&self) -> SizeDistribution {
        SizeDistribution {
            mean: self.mean,
            stddev: self.stddev,
            min: self.min_size,
            max: self.max_size,
            shape: corpus::Shape::Normal,
        }
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The gateway's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// upload, download, or mixed (half each).
    #[arg(long, value_enum, default_value = "mixed")]
    op: Op,
    /// Read and write the files of this corpus (from `loadgen corpus`)
    /// instead of random bodies of normally distributed sizes.
    #[arg(long)]
    corpus: Option<PathBuf>,
    #[command(flatten)]
    sizes: SizeArgs,
    /// Random bodies made up front and reused (without --corpus).
    #[arg(long, default_value_t = 32)]
    working_set: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Pace to this many requests per second in all (default: as fast as
    /// the concurrency allows).
    #[arg(long)]
    rate: Option<f64>,
    /// Stop after this long.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "requests")]
    duration: Option<Duration>,
    /// Stop after this many requests.
    #[arg(long)]
    requests: Option<u64>,
    /// Folder on the gateway the run's files live under.
    #[arg(long, default_value = "loadgen")]
    prefix: String,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Make every upload's content new (its first 8 bytes are the
    /// request's number), so none is deduplicated and each writes a blob.
    #[arg(long)]
    fresh_bodies: bool,
    /// Also write the summary as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Serve { args } => {
            let config = gateway::config::Config::parse_from(
                std::iter::once("gateway".to_owned()).chain(args),
            );
            gateway::run(config).await?;
        }
        Command::Figures { json, out } => {
            let text = std::fs::read(&json)?;
            std::fs::create_dir_all(&out)?;
            // A policy suite's report, or one experiment's.
            let figures = match serde_json::from_slice::<suite::SuiteReport>(&text) {
                Ok(suite) => loadgen::figures::draw_suite(&suite, &out)?,
                Err(_) => {
                    let report: experiment::Report = serde_json::from_slice(&text)?;
                    loadgen::figures::draw_all(&report, &out)?
                }
            };
            for figure in figures {
                println!("figure: {}", figure.display());
            }
        }
        Command::Experiment {
            quick,
            plan,
            out,
            json,
        } => {
            let plan = plan.apply(if quick { Plan::quick() } else { Plan::full() });
            let exe = std::env::current_exe()?;
            let report = experiment::run(&exe, &plan, &experiment::standard_arms(), &out).await?;
            print_report(&report);
            for figure in loadgen::figures::draw_all(&report, &out)? {
                println!("figure: {}", figure.display());
            }
            if let Some(path) = &json {
                std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
            }
            let failed: u64 = report.arms.iter().map(|arm| arm.failed_requests).sum();
            anyhow::ensure!(failed == 0, "{failed} requests failed");
        }
        Command::Policy {
            quick,
            only,
            no_sweep,
            out,
            json,
        } => {
            let exe = std::env::current_exe()?;
            let cells: Vec<_> = suite::policy_suite(quick, !no_sweep)
                .into_iter()
                .filter(|cell| only.is_empty() || only.contains(&cell.workload.to_string()))
                .collect();
            let mut reports = Vec::new();
            for cell in &cells {
                let done = suite::run_cell(&exe, cell, &out).await?;
                println!(
                    "\n### {} sizes, concurrency {}\n",
                    done.workload, done.concurrency
                );
                print_report(&done.report);
                reports.push(done);
                // Written after every cell, so a long run keeps what it has.
                if let Some(path) = &json {
                    let suite = suite::SuiteReport {
                        cells: reports.clone(),
                    };
                    std::fs::write(path, serde_json::to_vec_pretty(&suite)?)?;
                }
            }
            let failed: u64 = reports
                .iter()
                .flat_map(|cell| &cell.report.arms)
                .map(|arm| arm.failed_requests)
                .sum();
            anyhow::ensure!(failed == 0, "{failed} requests failed");
        }
        Command::Burst {
            uploads,
            size,
            give_up_after,
            json,
            gateway_bin,
            gateway_flags,
        } => {
            let data = tempfile::tempdir()?;
            let exe = std::env::current_exe()?;
            let program = match &gateway_bin {
                Some(bin) => loadgen::child::Program::Gateway(bin),
                None => loadgen::child::Program::LoadgenServe(&exe),
            };
            let spec = memory::BurstSpec {
                uploads,
                size,
                gateway_flags,
                give_up_after,
            };
            let report = memory::burst(program, data.path(), &spec).await?;
            print_burst(&report);
            if let Some(path) = &json {
                std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
            }
            anyhow::ensure!(report.failed == 0, "{} uploads failed", report.failed);
            anyhow::ensure!(report.serving_after, "the gateway stopped serving");
        }
        Command::Soak {
            duration,
            concurrency,
            min_size,
            max_size,
            every,
            json,
            mut gateway_flags,
        } => {
            if gateway_flags.is_empty() {
                gateway_flags = ["--estimator-mode", "fixed", "--threshold", "16MiB"]
                    .map(str::to_owned)
                    .to_vec();
            }
            let data = tempfile::tempdir()?;
            let spec = memory::SoakSpec {
                duration,
                concurrency,
                min_size,
                max_size,
                every,
                gateway_flags,
            };
            let report = memory::soak(&std::env::current_exe()?, data.path(), &spec).await?;
            print_soak(&report);
            if let Some(path) = &json {
                std::fs::write(path, serde_json::to_vec_pretty(&report)?)?;
            }
            anyhow::ensure!(report.failed == 0, "{} requests failed", report.failed);
        }
        Command::Corpus {
            dir,
            count,
            sizes,
            seed,
        } => {
            let manifest = corpus::generate(&dir, count, sizes.distribution(), seed)?;
            let total: u64 = manifest.files.iter().map(|f| f.size).sum();
            println!(
                "wrote {count} files ({:.1} MB) and {} to {}",
                total as f64 / 1e6,
                corpus::MANIFEST,
                dir.display()
            );
        }
        Command::Run(args) => {
            let workload = match &args.corpus {
                Some(dir) => Workload::Corpus {
                    manifest: corpus::load(dir)?,
                    dir: dir.clone(),
                },
                None => Workload::Sizes {
                    sizes: args.sizes.distribution(),
                    working_set: args.working_set,
                },
            };
            let stop = match (args.duration, args.requests) {
                (_, Some(requests)) => Stop::Requests(requests),
                (Some(duration), None) => Stop::After(duration),
                (None, None) => Stop::After(Duration::from_secs(30)),
            };
            let spec = RunSpec {
                base_url: args.url.trim_end_matches('/').to_owned(),
                op: args.op,
                workload,
                concurrency: args.concurrency,
                rate: args.rate,
                stop,
                prefix: args.prefix.clone(),
                seed: args.seed,
                assume_stored: false,
                drift: false,
                fresh_bodies: args.fresh_bodies,
            };
            let summary = load::run(&spec, true).await?;
            print_summary(&summary);
            if let Some(path) = &args.json {
                std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
            }
            anyhow::ensure!(
                summary.failed == 0,
                "{} of {} requests failed",
                summary.failed,
                summary.requests
            );
        }
    }
    Ok(())
}

fn print_summary(summary: &load::Summary) {
    let l = summary.latency_ms;
    println!(
        "{} requests ({} uploads, {} downloads) in {:.1} s: {:.1} req/s, {:.1} MB/s verified",
        summary.requests,
        summary.uploads,
        summary.downloads,
        summary.seconds,
        summary.requests_per_second,
        summary.megabytes_per_second
    );
    println!(
        "latency ms: p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
        l.p50, l.p90, l.p99, l.max
    );
    if summary.errors.is_empty() {
        println!("errors: none");
    } else {
        for (kind, count) in &summary.errors {
            println!("errors: {count} × {kind}");
        }
    }
}

fn print_report(report: &experiment::Report) {
    let kib = |bytes: f64| bytes / 1024.0;
    println!(
        "| arm | threshold KiB | mean memory KiB | reduction | restarts | restarts/request | by true footprints | failed | p50 ms | p99 ms | p99 / monitor | mean RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let monitor_p99 = report.arms.first().map_or(1.0, |arm| arm.latency_p99_ms);
    for arm in &report.arms {
        println!(
            "| {} | {} | {:.0} | {:.2} % | {} | {:.4} | {} | {} | {:.2} | {:.2} | {:.2} | {:.1} |",
            arm.name,
            arm.threshold_bytes
                .map_or("-".to_owned(), |t| format!("{:.0}", kib(t as f64))),
            kib(arm.mean_memory_bytes),
            arm.reduction_percent,
            arm.restarts,
            arm.restarts_per_request,
            arm.predicted_restarts_per_request
                .map_or("-".to_owned(), |rate| format!("{rate:.4}")),
            arm.failed_requests,
            arm.latency_p50_ms,
            arm.latency_p99_ms,
            arm.latency_p99_ms / monitor_p99,
            arm.mean_rss_bytes / 1048576.0,
        );
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn print_burst(report: &memory::BurstReport) {
    println!(
        "burst: {} uploads of {:.0} MB, gateway flags {:?}, memory budget {:.0} MiB",
        report.uploads,
        report.size_bytes as f64 / 1e6,
        report.gateway_flags,
        mib(report.memory_budget_bytes)
    );
    println!(
        "  stored {} ({} 503s retried, {} failed) in {:.1} s: {:.0} MB/s",
        report.stored, report.retried_503, report.failed, report.seconds, report.throughput_mb_s
    );
    println!(
        "  RSS before                 {:>8.0} MiB",
        mib(report.rss_before_bytes)
    );
    println!(
        "  peak RSS (VmHWM)           {:>8.0} MiB",
        mib(report.peak_rss_bytes)
    );
    println!(
        "  RSS after the burst        {:>8.0} MiB   (pool linear memory {:.0} MiB)",
        mib(report.rss_after_burst_bytes),
        mib(report.pool_memory_after_burst_bytes)
    );
    println!(
        "  RSS after replacing all    {:>8.0} MiB   (pool linear memory {:.0} MiB)",
        mib(report.rss_after_replacement_bytes),
        mib(report.pool_memory_after_replacement_bytes)
    );
    println!("  still serving              {}", report.serving_after);
}

fn print_soak(report: &memory::SoakReport) {
    let rss: Vec<u64> = report.rss.iter().map(|s| s.1).collect();
    let mut sorted = rss.clone();
    sorted.sort_unstable();
    println!(
        "soak: {:.0} s at concurrency {}, gateway flags {:?}",
        report.seconds, report.concurrency, report.gateway_flags
    );
    println!(
        "  {} requests ({} failed), {:.0} MB uploaded, replacements {}",
        report.requests, report.failed, report.uploaded_mb, report.replacements
    );
    println!(
        "  RSS min / median / max     {:.0} / {:.0} / {:.0} MiB; peak (VmHWM) {:.0} MiB",
        mib(sorted.first().copied().unwrap_or_default()),
        mib(sorted.get(sorted.len() / 2).copied().unwrap_or_default()),
        mib(sorted.last().copied().unwrap_or_default()),
        mib(report.peak_rss_bytes)
    );
    println!(
        "  RSS after warm-up {:.0} MiB, at the end {:.0} MiB; slope {:+.1} MiB/hour",
        mib(report.rss_first_after_warmup_bytes),
        mib(report.rss_last_bytes),
        report.rss_slope_mib_per_hour
    );
}
