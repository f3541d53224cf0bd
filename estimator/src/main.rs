//! `estimator threshold --csv FILE`: the restart threshold from a sample CSV,
//! printed as JSON. What an operator runs on `/admin/samples.csv`.

use std::fs::File;
use std::io::BufReader;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use estimator::{Method, Warmup};

#[derive(Debug, Parser)]
#[command(
    name = "estimator",
    version,
    about = "Restart thresholds from per-instance memory samples"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compute the threshold from a `timestamp,instance,bytes` CSV.
    Threshold {
        /// The sample file (header line optional).
        #[arg(long)]
        csv: PathBuf,
        /// Significance level: the threshold is the upper alpha/2 point.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// ci-mean (the paper), prediction, or quantile.
        #[arg(long, default_value = "ci-mean")]
        method: Method,
        /// Warm-up samples to drop per instance: none, first:N or stable:K.
        #[arg(long, default_value = "stable:2")]
        warmup: Warmup,
        /// Never report a threshold below this many bytes.
        #[arg(long)]
        floor: Option<u64>,
    },
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Threshold {
            csv,
            alpha,
            method,
            warmup,
            floor,
        } => {
            let file = File::open(&csv).with_context(|| format!("opening {}", csv.display()))?;
            let samples = estimator::read_csv(BufReader::new(file))?;
            let estimate =
                estimator::threshold_from_samples(&samples, warmup, method, alpha, floor)
                    .with_context(|| format!("{} samples in {}", samples.len(), csv.display()))?;
            let mut report = serde_json::to_value(&estimate)?;
            report["warmup"] = warmup.to_string().into();
            report["samples"] = samples.len().into();
            println!("{}", serde_json::to_string_pretty(&report)?);
            Ok(())
        }
    }
}
