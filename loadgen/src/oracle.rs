//! The oracle: the best fixed threshold in hindsight, from every file's
//! true footprint.
//!
//! With an instance replaced after each request that leaves it above a
//! fixed threshold T, every instance sits at or under T between requests,
//! so a request restarts its instance exactly when its own footprint X
//! (the linear memory it needs from a fresh instance) is above T. The
//! restart rate of T is therefore `P(X > T)` over the requests, whatever
//! the dispatch, concurrency or order, and the lowest threshold at a
//! restart rate r (the one that saves the most at that rate) is the
//! `1 − r` quantile of the true footprints, weighted by how often each file
//! is read.
//!
//! The gateway's estimator sees a footprint only when a request grows its
//! instance; a request that fits gives a bound. So [`measure`] reads every
//! file once on a fresh instance, from outside, through the admin API (one
//! instance; read, note its memory, replace it), and [`lowest_threshold`]
//! takes the quantile. [`request_weights`] is how often the load generator
//! reads each file (uniformly, or through the drift window).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::child::Gateway;
use crate::corpus::Manifest;

/// One file's true footprint: the linear memory of a fresh instance after
/// it served the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileFootprint {
    pub name: String,
    pub size: u64,
    pub footprint_bytes: u64,
}

/// What the true footprints say of one threshold.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Quantile {
    pub threshold_bytes: u64,
    /// The share of requests whose footprint is above it: the restart rate
    /// it gives.
    pub restart_rate: f64,
}

/// How often each file (in `sizes`' order, one entry each) is read out of
/// `requests` reads: uniformly, or, under drift, through a window of a
/// quarter of the files sorted by size that slides from the smallest to
/// the largest (as `load::pick` draws them). Sums to one.
pub fn request_weights(sizes: &[u64], drift: bool, requests: u64) -> Vec<f64> {
    let items = sizes.len();
    if items == 0 {
        return Vec::new();
    }
    if !drift || items < 4 || requests == 0 {
        return vec![1.0 / items as f64; items];
    }
    // The load generator sorts by size (stably) and draws positions.
    let mut order: Vec<usize> = (0..items).collect();
    order.sort_by_key(|&index| sizes[index]);
    let width = items / 4;
    let mut by_position = vec![0.0; items];
    for number in 0..requests {
        let progress = number as f64 / requests as f64;
        let start = ((items - width) as f64 * progress.min(1.0)) as usize;
        for weight in &mut by_position[start..start + width] {
            *weight += 1.0 / (width as f64 * requests as f64);
        }
    }
    let mut weights = vec![0.0; items];
    for (position, &index) in order.iter().enumerate() {
        weights[index] = by_position[position];
    }
    weights
}

/// The restart rate of `threshold`: the weight of footprints above it.
pub fn restart_rate(footprints: &[u64], weights: &[f64], threshold: u64) -> f64 {
    footprints
        .iter()
        .zip(weights)
        .filter(|(footprint, _)| **footprint > threshold)
        .fold(0.0, |sum, (_, weight)| sum + weight)
}

/// The lowest threshold whose restart rate is at most `rate` (the
/// weighted `1 − rate` quantile of the footprints). Candidates are the
/// footprints themselves: the rate changes only there.
pub fn lowest_threshold(footprints: &[u64], weights: &[f64], rate: f64) -> Option<Quantile> {
    let mut candidates: Vec<u64> = footprints.to_vec();
    candidates.sort_unstable();
    candidates.dedup();
    candidates.into_iter().find_map(|threshold| {
        let above = restart_rate(footprints, weights, threshold);
        // (A rate equal to the target is within it, rounding aside.)
        (above <= rate + 1e-12).then_some(Quantile {
            threshold_bytes: threshold,
            restart_rate: above,
        })
    })
}

/// Every threshold on the frontier: each distinct footprint and the rate
/// it gives, lowest threshold first.
pub fn frontier(footprints: &[u64], weights: &[f64]) -> Vec<Quantile> {
    let mut candidates: Vec<u64> = footprints.to_vec();
    candidates.sort_unstable();
    candidates.dedup();
    candidates
        .into_iter()
        .map(|threshold| Quantile {
            threshold_bytes: threshold,
            restart_rate: restart_rate(footprints, weights, threshold),
        })
        .collect()
}

/// Read every file of `manifest` (stored under `experiment/corpus/`) once
/// on a fresh instance of a one-instance gateway started from `exe` on
/// `data_dir`, and note the instance's memory after each: the files' true
/// footprints.
pub async fn measure(
    exe: &Path,
    data_dir: &Path,
    manifest: &Manifest,
) -> anyhow::Result<Vec<FileFootprint>> {
    let gateway = Gateway::start(
        exe,
        data_dir,
        &[
            "--instances",
            "1",
            "--estimator-mode",
            "monitor",
            "--dispatch",
            "lru",
        ],
    )
    .await?;
    let http = crate::load::client(1)?;
    let mut footprints = Vec::with_capacity(manifest.files.len());
    let mut fresh = settled(&http, &gateway.url, |_| true).await?;
    for file in &manifest.files {
        let url = format!("{}/files/experiment/corpus/{}", gateway.url, file.name);
        let body = http
            .get(&url)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        anyhow::ensure!(
            body.len() as u64 == file.size,
            "{}: read {} bytes, expected {}",
            file.name,
            body.len(),
            file.size
        );
        let served = settled(&http, &gateway.url, |instance| {
            instance.id == fresh.id && instance.requests >= 1
        })
        .await?;
        footprints.push(FileFootprint {
            name: file.name.clone(),
            size: file.size,
            footprint_bytes: served.memory_bytes,
        });
        http.post(format!(
            "{}/admin/pool/instances/{}/replace",
            gateway.url, served.id
        ))
        .send()
        .await?
        .error_for_status()?;
        fresh = settled(&http, &gateway.url, |instance| {
            instance.id != served.id && instance.requests == 0
        })
        .await?;
    }
    gateway.stop()?;
    Ok(footprints)
}

/// The one instance as `/admin/pool` shows it.
#[derive(Debug, Clone, Deserialize)]
struct InstanceView {
    id: u64,
    state: String,
    memory_bytes: u64,
    requests: u64,
}

/// Wait until the pool's one instance is idle and `ready` says it is the
/// one waited for.
async fn settled(
    http: &reqwest::Client,
    url: &str,
    ready: impl Fn(&InstanceView) -> bool,
) -> anyhow::Result<InstanceView> {
    #[derive(Deserialize)]
    struct PoolView {
        instances: Vec<InstanceView>,
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pool: PoolView = http
            .get(format!("{url}/admin/pool"))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
            .context("reading /admin/pool")?;
        if let [instance] = &pool.instances[..]
            && instance.state == "idle"
            && ready(instance)
        {
            return Ok(instance.clone());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the instance did not settle within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn uniform_weights_give_the_plain_upper_quantile() {
        let footprints: Vec<u64> = (1..=200).collect();
        let weights = request_weights(&footprints, false, 1600);
        // 1 % of 200 files above: the threshold leaves 198 and under.
        let q = lowest_threshold(&footprints, &weights, 0.01).unwrap();
        assert_eq!(q.threshold_bytes, 198);
        assert!((q.restart_rate - 0.01).abs() < 1e-9);
        // No restarts: the largest; every request: the smallest.
        assert_eq!(
            lowest_threshold(&footprints, &weights, 0.0)
                .unwrap()
                .threshold_bytes,
            200
        );
        assert_eq!(
            lowest_threshold(&footprints, &weights, 1.0)
                .unwrap()
                .threshold_bytes,
            1
        );
    }

    #[test]
    fn drift_weights_follow_the_sliding_window() {
        // Eight files, sizes in reverse: the window (two files wide) slides
        // over them by size, so the smallest and largest are read least.
        let sizes: Vec<u64> = (1..=8).rev().collect();
        let weights = request_weights(&sizes, true, 6000);
        assert!((weights.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // The file of size 1 (index 7) is read only at the start.
        assert!(weights[7] < weights[4]);
        assert!(weights[0] < weights[3]);
        // The window spends equal time at every start position: the middle
        // files are read equally.
        assert!((weights[3] - weights[4]).abs() < 1e-3);
    }

    #[test]
    fn the_frontier_falls_as_the_threshold_rises() {
        let footprints = [5, 1, 3, 3, 9];
        let weights = request_weights(&footprints, false, 100);
        let frontier = frontier(&footprints, &weights);
        let thresholds: Vec<u64> = frontier.iter().map(|q| q.threshold_bytes).collect();
        assert_eq!(thresholds, vec![1, 3, 5, 9]);
        let rates: Vec<f64> = frontier.iter().map(|q| q.restart_rate).collect();
        assert!((rates[0] - 0.8).abs() < 1e-9);
        assert!((rates[1] - 0.4).abs() < 1e-9);
        assert!((rates[2] - 0.2).abs() < 1e-9);
        assert_eq!(rates[3], 0.0);
    }
}
