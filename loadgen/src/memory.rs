//! `loadgen burst` and `loadgen soak`: what the gateway process costs in
//! memory, measured from outside by the kernel's own figures.
//!
//! - `burst`: N concurrent uploads of large bodies against a gateway child;
//!   peak RSS (VmHWM), RSS right after, RSS after replacing every instance,
//!   throughput, and whether the gateway still serves. A 503 is retried after
//!   its `Retry-After`, as a client should.
//! - `soak`: closed-loop verified uploads and downloads of heavy-tailed sizes
//!   for a while with recycling on; RSS sampled throughout, and the slope of
//!   its least-squares line over the run after warm-up.
//!
//! Bodies are generated as they are sent (never held whole here), each one
//! different, and hashed on the way out; the gateway's answer must name the
//! same SHA-256.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::{Rng as _, RngCore as _, SeedableRng as _};
use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::child::{Gateway, Program};

const CHUNK: usize = 256 << 10;

/// What `burst` does.
#[derive(Debug, Clone)]
pub struct BurstSpec {
    pub uploads: usize,
    pub size: u64,
    /// Extra flags for the gateway child (e.g. `--memory-budget 1GiB`).
    pub gateway_flags: Vec<String>,
    /// Give up retrying 503s after this long.
    pub give_up_after: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct BurstReport {
    pub uploads: usize,
    pub size_bytes: u64,
    pub gateway_flags: Vec<String>,
    pub memory_budget_bytes: u64,
    /// Uploads answered 201 with the right digest.
    pub stored: usize,
    /// 503 answers that were retried.
    pub retried_503: usize,
    /// Uploads that failed for good (any other answer, or out of time).
    pub failed: usize,
    pub seconds: f64,
    /// Stored body bytes per second over the burst, in MB/s.
    pub throughput_mb_s: f64,
    pub rss_before_bytes: u64,
    /// VmHWM at the end of the burst: the process's peak.
    pub peak_rss_bytes: u64,
    pub rss_after_burst_bytes: u64,
    pub pool_memory_after_burst_bytes: u64,
    pub rss_after_replacement_bytes: u64,
    pub pool_memory_after_replacement_bytes: u64,
    /// `/healthz` answered after it all.
    pub serving_after: bool,
}

/// Run a burst against a fresh gateway child (`program`) on `data_dir`.
pub async fn burst(
    program: Program<'_>,
    data_dir: &Path,
    spec: &BurstSpec,
) -> anyhow::Result<BurstReport> {
    let flags: Vec<&str> = spec.gateway_flags.iter().map(String::as_str).collect();
    let gateway = Gateway::launch(program, data_dir, &flags).await?;
    let client = reqwest::Client::new();
    let pool: serde_json::Value = get_json(&client, &format!("{}/admin/pool", gateway.url)).await?;
    let memory_budget_bytes = pool["memory_budget_bytes"].as_u64().unwrap_or_default();
    let before = gateway.memory()?;

    let started = Instant::now();
    let give_up = started + spec.give_up_after;
    let tasks: Vec<_> = (0..spec.uploads)
        .map(|n| {
            let client = client.clone();
            let url = format!("{}/files/burst/{n}", gateway.url);
            let size = spec.size;
            tokio::spawn(
                async move { upload_retrying(&client, &url, size, n as u64, give_up).await },
            )
        })
        .collect();
    let (mut stored, mut retried_503, mut failed) = (0, 0, 0);
    for task in tasks {
        match task.await? {
            Ok(retries) => {
                stored += 1;
                retried_503 += retries;
            }
            Err(error) => {
                failed += 1;
                eprintln!("upload failed: {error:#}");
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let peak = gateway.memory()?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_burst = gateway.memory()?;
    let pool_after_burst = pool_memory(&client, &gateway.url).await?;

    replace_every_instance(&client, &gateway.url).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after_replacement = gateway.memory()?;
    let pool_after_replacement = pool_memory(&client, &gateway.url).await?;
    let serving_after = gateway.healthy().await;
    gateway.stop()?;

    Ok(BurstReport {
        uploads: spec.uploads,
        size_bytes: spec.size,
        gateway_flags: spec.gateway_flags.clone(),
        memory_budget_bytes,
        stored,
        retried_503,
        failed,
        seconds,
        throughput_mb_s: (stored as u64 * spec.size) as f64 / 1e6 / seconds,
        rss_before_bytes: before.rss_bytes,
        peak_rss_bytes: peak.peak_rss_bytes,
        rss_after_burst_bytes: after_burst.rss_bytes,
        pool_memory_after_burst_bytes: pool_after_burst,
        rss_after_replacement_bytes: after_replacement.rss_bytes,
        pool_memory_after_replacement_bytes: pool_after_replacement,
        serving_after,
    })
}

/// Upload a generated body of `size` bytes to `url` until it is stored,
/// retrying 503s after their `Retry-After`. Returns how many 503s it met.
async fn upload_retrying(
    client: &reqwest::Client,
    url: &str,
    size: u64,
    seed: u64,
    give_up: Instant,
) -> anyhow::Result<usize> {
    let mut retries = 0;
    loop {
        let (body, digest) = generated_body(size, seed);
        let response = client
            .put(url)
            .header(reqwest::header::CONTENT_LENGTH, size)
            .body(body)
            .send()
            .await
            .with_context(|| format!("PUT {url}"))?;
        let status = response.status();
        if status == reqwest::StatusCode::SERVICE_UNAVAILABLE && Instant::now() < give_up {
            let wait = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|value| value.to_str().ok()?.parse::<u64>().ok())
                .unwrap_or(1);
            retries += 1;
            tokio::time::sleep(Duration::from_secs(wait)).await;
            continue;
        }
        let answer: serde_json::Value = response.json().await.unwrap_or_default();
        anyhow::ensure!(status.is_success(), "PUT {url}: {status} {answer}");
        let expected = hex::encode(
            digest
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .clone()
                .finalize(),
        );
        anyhow::ensure!(
            answer["sha256"] == expected.as_str(),
            "PUT {url}: the gateway recorded {} for content hashing to {expected}",
            answer["sha256"]
        );
        return Ok(retries);
    }
}

/// A body of `size` pseudo-random bytes made as it is sent, and the hasher
/// that sees every byte on its way out.
fn generated_body(size: u64, seed: u64) -> (reqwest::Body, Arc<Mutex<Sha256>>) {
    let hasher = Arc::new(Mutex::new(Sha256::new()));
    let seen = hasher.clone();
    let rng = rand::rngs::StdRng::seed_from_u64(seed);
    let stream = futures_util::stream::unfold((rng, size), move |(mut rng, left)| {
        let seen = seen.clone();
        async move {
            if left == 0 {
                return None;
            }
            let len = usize::try_from(left).unwrap_or(usize::MAX).min(CHUNK);
            let mut chunk = vec![0; len];
            rng.fill_bytes(&mut chunk);
            if let Ok(mut hasher) = seen.lock() {
                hasher.update(&chunk);
            }
            Some((Ok::<_, std::io::Error>(chunk), (rng, left - len as u64)))
        }
    });
    (reqwest::Body::wrap_stream(stream), hasher)
}

async fn get_json(client: &reqwest::Client, url: &str) -> anyhow::Result<serde_json::Value> {
    let response = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    anyhow::ensure!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    Ok(response.json().await?)
}

async fn pool_memory(client: &reqwest::Client, url: &str) -> anyhow::Result<u64> {
    let pool = get_json(client, &format!("{url}/admin/pool")).await?;
    Ok(pool["total_memory_bytes"].as_u64().unwrap_or_default())
}

/// Ask for every live instance to be replaced, then wait until none of the
/// old ones is left.
async fn replace_every_instance(client: &reqwest::Client, url: &str) -> anyhow::Result<()> {
    let ids = |pool: &serde_json::Value| -> Vec<u64> {
        pool["instances"]
            .as_array()
            .map(|all| all.iter().filter_map(|i| i["id"].as_u64()).collect())
            .unwrap_or_default()
    };
    let old = ids(&get_json(client, &format!("{url}/admin/pool")).await?);
    for id in &old {
        client
            .post(format!("{url}/admin/pool/instances/{id}/replace"))
            .send()
            .await?;
    }
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        let now = ids(&get_json(client, &format!("{url}/admin/pool")).await?);
        if !now.iter().any(|id| old.contains(id)) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("old instances were still live 30 s after being replaced")
}

/// What `soak` does.
#[derive(Debug, Clone)]
pub struct SoakSpec {
    pub duration: Duration,
    pub concurrency: usize,
    /// Body sizes are log-uniform between these (bytes).
    pub min_size: u64,
    pub max_size: u64,
    /// How often RSS is sampled.
    pub every: Duration,
    pub gateway_flags: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub seconds: f64,
    pub concurrency: usize,
    pub gateway_flags: Vec<String>,
    pub requests: u64,
    pub failed: u64,
    pub uploaded_mb: f64,
    pub replacements: serde_json::Value,
    /// `(seconds since start, RSS bytes)`.
    pub rss: Vec<(f64, u64)>,
    pub peak_rss_bytes: u64,
    /// Least-squares slope of RSS over the run after its first fifth, in
    /// MiB per hour: a leak shows as a steady positive slope.
    pub rss_slope_mib_per_hour: f64,
    pub rss_first_after_warmup_bytes: u64,
    pub rss_last_bytes: u64,
}

/// Run verified uploads and downloads against a fresh gateway child for
/// `spec.duration`, sampling its RSS.
pub async fn soak(exe: &Path, data_dir: &Path, spec: &SoakSpec) -> anyhow::Result<SoakReport> {
    let flags: Vec<&str> = spec.gateway_flags.iter().map(String::as_str).collect();
    let gateway = Gateway::start(exe, data_dir, &flags).await?;
    let client = reqwest::Client::new();
    let started = Instant::now();
    let end = started + spec.duration;
    let workers: Vec<_> = (0..spec.concurrency)
        .map(|worker| {
            let client = client.clone();
            let url = gateway.url.clone();
            let spec = spec.clone();
            tokio::spawn(async move { soak_worker(&client, &url, &spec, worker, end).await })
        })
        .collect();
    let mut rss = Vec::new();
    while Instant::now() < end {
        rss.push((started.elapsed().as_secs_f64(), gateway.memory()?.rss_bytes));
        tokio::time::sleep(spec.every).await;
    }
    let (mut requests, mut failed, mut uploaded) = (0, 0, 0);
    for worker in workers {
        let (r, f, u) = worker.await?;
        requests += r;
        failed += f;
        uploaded += u;
    }
    rss.push((started.elapsed().as_secs_f64(), gateway.memory()?.rss_bytes));
    let pool = get_json(&client, &format!("{}/admin/pool", gateway.url)).await?;
    let peak_rss_bytes = gateway.memory()?.peak_rss_bytes;
    gateway.stop()?;
    let steady = &rss[rss.len() / 5..];
    Ok(SoakReport {
        seconds: started.elapsed().as_secs_f64(),
        concurrency: spec.concurrency,
        gateway_flags: spec.gateway_flags.clone(),
        requests,
        failed,
        uploaded_mb: uploaded as f64 / 1e6,
        replacements: pool["replacements"].clone(),
        peak_rss_bytes,
        rss_slope_mib_per_hour: slope(steady) / f64::from(1 << 20) * 3600.0,
        rss_first_after_warmup_bytes: steady.first().map_or(0, |s| s.1),
        rss_last_bytes: rss.last().map_or(0, |s| s.1),
        rss,
    })
}

/// Least-squares slope of `points` (bytes per second).
pub fn slope(points: &[(f64, u64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let covariance: f64 = points
        .iter()
        .map(|p| (p.0 - mean_x) * (p.1 as f64 - mean_y))
        .sum();
    let variance: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if variance == 0.0 {
        0.0
    } else {
        covariance / variance
    }
}

/// One closed-loop worker: upload a generated body, read it back verified.
/// Returns (requests, failed, bytes uploaded).
async fn soak_worker(
    client: &reqwest::Client,
    url: &str,
    spec: &SoakSpec,
    worker: usize,
    end: Instant,
) -> (u64, u64, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(worker as u64);
    let (mut requests, mut failed, mut uploaded) = (0, 0, 0);
    let (low, high) = ((spec.min_size as f64).ln(), (spec.max_size as f64).ln());
    let mut round: u64 = 0;
    while Instant::now() < end {
        round += 1;
        let size = rng.random_range(low..=high).exp() as u64;
        // A few paths per worker: overwrites keep the disk bounded.
        let file = format!("{url}/files/soak/{worker}/{}", round % 8);
        let seed = (worker as u64) << 32 | round;
        requests += 2;
        match upload_retrying(client, &file, size, seed, end).await {
            Ok(_) => uploaded += size,
            Err(error) => {
                failed += 1;
                eprintln!("soak upload: {error:#}");
                continue;
            }
        }
        if let Err(error) = download_verified(client, &file, size, seed).await {
            failed += 1;
            eprintln!("soak download: {error:#}");
        }
    }
    (requests, failed, uploaded)
}

async fn download_verified(
    client: &reqwest::Client,
    url: &str,
    size: u64,
    seed: u64,
) -> anyhow::Result<()> {
    use futures_util::StreamExt as _;
    let response = client.get(url).send().await?;
    anyhow::ensure!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    let mut expected = ExpectedStream::new(seed);
    let mut stream = response.bytes_stream();
    let mut got = 0u64;
    let mut want = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        want.resize(chunk.len(), 0);
        expected.fill(got, &mut want);
        anyhow::ensure!(
            chunk[..] == want[..],
            "GET {url}: bytes differ near offset {got}"
        );
        got += chunk.len() as u64;
    }
    anyhow::ensure!(got == size, "GET {url}: {got} bytes, expected {size}");
    Ok(())
}

/// The bytes `generated_body` sends for one seed, in order, for checking a
/// download against them however its pieces are cut.
struct ExpectedStream {
    rng: rand::rngs::StdRng,
    /// The last generated chunk, and where it starts in the stream.
    chunk: Vec<u8>,
    chunk_start: u64,
}

impl ExpectedStream {
    fn new(seed: u64) -> Self {
        Self {
            rng: rand::rngs::StdRng::seed_from_u64(seed),
            chunk: Vec::new(),
            chunk_start: 0,
        }
    }

    /// The next `out.len()` bytes, starting at `offset` (which must follow
    /// on from the previous call).
    fn fill(&mut self, offset: u64, out: &mut [u8]) {
        let mut filled = 0;
        while filled < out.len() {
            let at = offset + filled as u64;
            if at >= self.chunk_start + self.chunk.len() as u64 {
                self.chunk_start += self.chunk.len() as u64;
                self.chunk.resize(CHUNK, 0);
                self.rng.fill_bytes(&mut self.chunk);
            }
            let from = usize::try_from(at - self.chunk_start).unwrap_or_default();
            let take = (self.chunk.len() - from).min(out.len() - filled);
            out[filled..filled + take].copy_from_slice(&self.chunk[from..from + take]);
            filled += take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line() {
        let points: Vec<(f64, u64)> = (0..10)
            .map(|t| (f64::from(t), 100 + 5 * t as u64))
            .collect();
        assert!((slope(&points) - 5.0).abs() < 1e-9);
        assert_eq!(slope(&[(0.0, 1)]), 0.0);
    }

    #[test]
    fn downloads_are_checked_against_the_generated_stream() {
        let size = 3 * CHUNK as u64 + 17;
        let mut sent = Vec::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let mut left = size;
        while left > 0 {
            let len = (left as usize).min(CHUNK);
            let mut chunk = vec![0; len];
            rng.fill_bytes(&mut chunk);
            sent.extend_from_slice(&chunk);
            left -= len as u64;
        }
        // Read back in pieces that do not line up with the chunks.
        let mut expected = ExpectedStream::new(9);
        let mut offset = 0;
        for piece in sent.chunks(100_000) {
            let mut want = vec![0; piece.len()];
            expected.fill(offset, &mut want);
            assert_eq!(want, piece);
            offset += piece.len() as u64;
        }
    }
}
