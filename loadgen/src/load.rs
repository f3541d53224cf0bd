//! `loadgen run`: uploads and/or downloads against a gateway, closed-loop at
//! a concurrency or paced at a request rate, every response verified
//! (status, length, SHA-256), latencies in an HDR histogram.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use reqwest::StatusCode;
use serde::Serialize;
use tokio::sync::Mutex;

use crate::corpus::{self, Manifest, SizeDistribution};

/// What each request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Upload,
    Download,
    /// Half uploads, half downloads.
    Mixed,
}

/// Where bodies come from.
#[derive(Debug, Clone)]
pub enum Workload {
    /// Random bodies with normally distributed sizes; `working_set` of them
    /// are made up front and reused.
    Sizes {
        sizes: SizeDistribution,
        working_set: usize,
    },
    /// The files of a corpus directory (see `loadgen corpus`).
    Corpus { dir: PathBuf, manifest: Manifest },
}

/// When a run ends.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    After(Duration),
    Requests(u64),
}

#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The gateway, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    pub op: Op,
    pub workload: Workload,
    pub concurrency: usize,
    /// Requests per second in all, if paced; closed-loop otherwise.
    pub rate: Option<f64>,
    pub stop: Stop,
    /// Folder the run's files live under.
    pub prefix: String,
    pub seed: u64,
    /// Downloads only: trust that the files are stored already and send no
    /// request to check (the experiment, whose setup uploaded them).
    pub assume_stored: bool,
    /// Make the sizes drift up over the run: items are ordered by size and
    /// each request draws from a window of a quarter of them that slides
    /// from the smallest to the largest as the run goes (needs
    /// `Stop::Requests`).
    pub drift: bool,
    /// Uploads only: make every upload's body unlike any before (its first
    /// 8 bytes are the request's number), so the store deduplicates none
    /// and each one writes a new blob.
    pub fresh_bodies: bool,
}

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// The result of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    pub requests: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Failures by kind (`status 503`, `digest mismatch`, `connect`, …).
    pub errors: BTreeMap<String, u64>,
    pub uploads: u64,
    pub downloads: u64,
    pub seconds: f64,
    pub requests_per_second: f64,
    /// Verified payload bytes moved, per second, in MB (10^6).
    pub megabytes_per_second: f64,
    pub latency_ms: Latency,
}

/// One file the run knows the content digest of.
#[derive(Debug, Clone)]
struct Item {
    path: String,
    sha256: String,
    size: u64,
    /// The body for uploads: in memory (generated) or on disk (corpus).
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    Memory(bytes::Bytes),
    File(PathBuf),
}

impl Item {
    /// This item with its first 8 bytes replaced by `number` (and its
    /// digest recomputed): content no earlier request sent.
    async fn with_fresh_body(&self, number: u64) -> anyhow::Result<Self> {
        let mut body = self.body.load().await?.to_vec();
        let stamp = number.to_le_bytes();
        let len = stamp.len().min(body.len());
        body[..len].copy_from_slice(&stamp[..len]);
        Ok(Self {
            path: self.path.clone(),
            sha256: corpus::sha256_hex(&body),
            size: self.size,
            body: Body::Memory(body.into()),
        })
    }
}

impl Body {
    async fn load(&self) -> anyhow::Result<bytes::Bytes> {
        match self {
            Self::Memory(bytes) => Ok(bytes.clone()),
            Self::File(path) => Ok(tokio::fs::read(path).await?.into()),
        }
    }
}

#[derive(Debug)]
struct Tally {
    histogram: Histogram<u64>,
    errors: BTreeMap<String, u64>,
    succeeded: u64,
    uploads: u64,
    downloads: u64,
    bytes: u64,
}

impl Tally {
    fn new() -> Self {
        Self {
            // 1 µs to 10 min, 3 significant digits.
            histogram: Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("valid histogram bounds"),
            errors: BTreeMap::new(),
            succeeded: 0,
            uploads: 0,
            downloads: 0,
            bytes: 0,
        }
    }
}

/// An HTTP client for `concurrency` parallel requests.
pub fn client(concurrency: usize) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency.max(1))
        .timeout(Duration::from_secs(300))
        .build()?)
}

/// Run the load described by `spec`; `progress` shows a bar on a terminal
/// and plain lines elsewhere.
pub async fn run(spec: &RunSpec, progress: bool) -> anyhow::Result<Summary> {
    anyhow::ensure!(spec.concurrency > 0, "concurrency must be at least 1");
    let http = client(spec.concurrency)?;
    let items = Arc::new(prepare(spec, &http).await?);
    anyhow::ensure!(
        !items.is_empty(),
        "nothing to send: the workload has no files"
    );

    let issued = Arc::new(AtomicU64::new(0));
    let pacer = spec.rate.map(|rate| Arc::new(Pacer::new(rate)));
    let started = Instant::now();
    let reporter = progress.then(|| spawn_progress(spec.stop, issued.clone(), started));
    let mut workers = Vec::new();
    for worker in 0..spec.concurrency {
        let (http, items, issued, pacer, spec) = (
            http.clone(),
            items.clone(),
            issued.clone(),
            pacer.clone(),
            spec.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(spec.seed.wrapping_add(worker as u64 + 1));
            let mut tally = Tally::new();
            let mut round = 0u64;
            loop {
                let number = issued.fetch_add(1, Ordering::Relaxed);
                let done = match spec.stop {
                    Stop::After(duration) => started.elapsed() >= duration,
                    Stop::Requests(limit) => number >= limit,
                };
                if done {
                    break;
                }
                if let Some(pacer) = &pacer {
                    pacer.wait().await;
                }
                let upload = match spec.op {
                    Op::Upload => true,
                    Op::Download => false,
                    Op::Mixed => rng.random_bool(0.5),
                };
                let item = &items[pick(&spec, number, items.len(), &mut rng)];
                let begun = Instant::now();
                let outcome = if upload {
                    let path = format!("{}/uploads/w{worker}/{}", spec.prefix, round % 8);
                    if spec.fresh_bodies {
                        match item.with_fresh_body(number).await {
                            Ok(fresh) => upload_one(&http, &spec.base_url, &path, &fresh).await,
                            Err(error) => Err(format!("reading the body: {error}")),
                        }
                    } else {
                        upload_one(&http, &spec.base_url, &path, item).await
                    }
                } else {
                    download_one(&http, &spec.base_url, item).await
                };
                let micros = begun.elapsed().as_micros().max(1) as u64;
                tally.histogram.saturating_record(micros);
                if upload {
                    tally.uploads += 1;
                } else {
                    tally.downloads += 1;
                }
                match outcome {
                    Ok(()) => {
                        tally.succeeded += 1;
                        tally.bytes += item.size;
                    }
                    Err(kind) => *tally.errors.entry(kind).or_default() += 1,
                }
                round += 1;
            }
            tally
        }));
    }
    let mut total = Tally::new();
    for worker in workers {
        let tally = worker.await.context("a load worker panicked")?;
        total
            .histogram
            .add(&tally.histogram)
            .context("merging histograms")?;
        for (kind, count) in tally.errors {
            *total.errors.entry(kind).or_default() += count;
        }
        total.succeeded += tally.succeeded;
        total.uploads += tally.uploads;
        total.downloads += tally.downloads;
        total.bytes += tally.bytes;
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(reporter) = reporter {
        reporter.abort();
    }
    Ok(summarize(&total, seconds))
}

/// The index of the item request `number` takes: uniform over all, or over
/// the drift window where the run has got to.
fn pick(spec: &RunSpec, number: u64, items: usize, rng: &mut StdRng) -> usize {
    match (spec.drift, spec.stop) {
        (true, Stop::Requests(limit)) if items >= 4 => {
            let width = items / 4;
            let progress = number as f64 / limit.max(1) as f64;
            let start = ((items - width) as f64 * progress.min(1.0)) as usize;
            start + rng.random_range(0..width)
        }
        _ => rng.random_range(0..items),
    }
}

fn summarize(tally: &Tally, seconds: f64) -> Summary {
    let failed: u64 = tally.errors.values().sum();
    let requests = tally.succeeded + failed;
    let ms = |micros: u64| micros as f64 / 1000.0;
    let h = &tally.histogram;
    Summary {
        requests,
        succeeded: tally.succeeded,
        failed,
        errors: tally.errors.clone(),
        uploads: tally.uploads,
        downloads: tally.downloads,
        seconds,
        requests_per_second: requests as f64 / seconds.max(1e-9),
        megabytes_per_second: tally.bytes as f64 / 1e6 / seconds.max(1e-9),
        latency_ms: if h.is_empty() {
            Latency::default()
        } else {
            Latency {
                p50: ms(h.value_at_quantile(0.50)),
                p90: ms(h.value_at_quantile(0.90)),
                p99: ms(h.value_at_quantile(0.99)),
                max: ms(h.max()),
                mean: h.mean() / 1000.0,
            }
        },
    }
}

/// The files the run will use, uploaded first when it downloads.
async fn prepare(spec: &RunSpec, http: &reqwest::Client) -> anyhow::Result<Vec<Item>> {
    let items: Vec<Item> = match &spec.workload {
        Workload::Sizes { sizes, working_set } => {
            let sample = sizes.sampler()?;
            let mut rng = StdRng::seed_from_u64(spec.seed);
            (0..*working_set)
                .map(|index| {
                    let mut body = vec![0; sample(&mut rng)];
                    rng.fill_bytes(&mut body);
                    Item {
                        path: format!("{}/set/{index:05}.bin", spec.prefix),
                        sha256: corpus::sha256_hex(&body),
                        size: body.len() as u64,
                        body: Body::Memory(body.into()),
                    }
                })
                .collect()
        }
        Workload::Corpus { dir, manifest } => manifest
            .files
            .iter()
            .map(|file| Item {
                path: format!("{}/corpus/{}", spec.prefix, file.name),
                sha256: file.sha256.clone(),
                size: file.size,
                body: Body::File(dir.join(&file.name)),
            })
            .collect(),
    };
    let mut items = items;
    if spec.drift {
        items.sort_by_key(|item| item.size);
    }
    if spec.op != Op::Upload && !spec.assume_stored {
        upload_all(http, &spec.base_url, &items, spec.concurrency).await?;
    }
    Ok(items)
}

/// Upload every item not already stored with the same digest.
async fn upload_all(
    http: &reqwest::Client,
    base: &str,
    items: &[Item],
    concurrency: usize,
) -> anyhow::Result<()> {
    use futures_util::StreamExt as _;
    let results: Vec<Result<(), String>> = futures_util::stream::iter(items)
        .map(|item| async move {
            let head = http
                .head(format!("{base}/files/{}", item.path))
                .send()
                .await;
            let stored = head
                .ok()
                .and_then(|r| r.headers().get("etag")?.to_str().ok().map(str::to_owned));
            if stored.as_deref() == Some(format!("\"{}\"", item.sha256).as_str()) {
                return Ok(());
            }
            upload_one(http, base, &item.path, item).await
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    if let Some(Err(kind)) = results.into_iter().find(Result::is_err) {
        anyhow::bail!("uploading the files to read failed: {kind}");
    }
    Ok(())
}

async fn upload_one(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    item: &Item,
) -> Result<(), String> {
    let body = item
        .body
        .load()
        .await
        .map_err(|e| format!("reading the body: {e}"))?;
    let response = http
        .put(format!("{base}/files/{path}"))
        .body(body)
        .send()
        .await
        .map_err(|e| transport_error(&e))?;
    let status = response.status();
    if status != StatusCode::CREATED && status != StatusCode::OK {
        return Err(format!("status {}", status.as_u16()));
    }
    let meta: serde_json::Value = response
        .json()
        .await
        .map_err(|_| "bad metadata".to_owned())?;
    if meta["sha256"] != item.sha256.as_str() {
        return Err("digest mismatch".into());
    }
    Ok(())
}

async fn download_one(http: &reqwest::Client, base: &str, item: &Item) -> Result<(), String> {
    let response = http
        .get(format!("{base}/files/{}", item.path))
        .send()
        .await
        .map_err(|e| transport_error(&e))?;
    if response.status() != StatusCode::OK {
        return Err(format!("status {}", response.status().as_u16()));
    }
    let body = response.bytes().await.map_err(|e| transport_error(&e))?;
    if body.len() as u64 != item.size {
        return Err("size mismatch".into());
    }
    if corpus::sha256_hex(&body) != item.sha256 {
        return Err("digest mismatch".into());
    }
    Ok(())
}

fn transport_error(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timeout".into()
    } else if error.is_connect() {
        "connect".into()
    } else {
        "transport".into()
    }
}

/// Hands out send times `1/rate` apart to every worker.
#[derive(Debug)]
struct Pacer {
    interval: Duration,
    next: Mutex<Instant>,
}

impl Pacer {
    fn new(rate: f64) -> Self {
        Self {
            interval: Duration::from_secs_f64(1.0 / rate.max(1e-3)),
            next: Mutex::new(Instant::now()),
        }
    }

    async fn wait(&self) {
        let at = {
            let mut next = self.next.lock().await;
            let at = (*next).max(Instant::now());
            *next = at + self.interval;
            at
        };
        tokio::time::sleep_until(at.into()).await;
    }
}

fn spawn_progress(
    stop: Stop,
    issued: Arc<AtomicU64>,
    started: Instant,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let terminal = std::io::stderr().is_terminal();
        let bar = match stop {
            Stop::After(duration) => indicatif::ProgressBar::new(duration.as_secs()),
            Stop::Requests(limit) => indicatif::ProgressBar::new(limit),
        };
        if terminal {
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
        }
        let mut ticks = tokio::time::interval(if terminal {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        });
        loop {
            ticks.tick().await;
            let sent = issued.load(Ordering::Relaxed);
            let elapsed = started.elapsed();
            let rate = sent as f64 / elapsed.as_secs_f64().max(1e-9);
            if terminal {
                bar.set_position(match stop {
                    Stop::After(_) => elapsed.as_secs(),
                    Stop::Requests(_) => sent,
                });
                bar.set_message(format!("{rate:.0} req/s"));
            } else {
                eprintln!(
                    "{:>6.1} s  {sent} requests  {rate:.0} req/s",
                    elapsed.as_secs_f64()
                );
            }
        }
    })
}
