//! Measures the foundation's numbers in one run, on this machine:
//! instance lifecycle cost, 1 MiB upload/download latency over real HTTP,
//! per-instance memory as bodies grow it, and process RSS before and after
//! replacing grown instances.
//!
//! `cargo run --release -p gateway --example foundation`

use std::sync::Arc;
use std::time::{Duration, Instant};

use gateway::AppState;
use gateway::budget::MemoryBudget;
use gateway::config::Config;
use gateway::pool::ReplaceReason;
use gateway::procstat::ProcessMemory;
use gateway::runtime::FetchRequest;
use gateway::runtime::{BUILTIN_GUEST, HandlerKind, Runtime, RuntimeLimits};
use rand::RngCore;
use tokio::net::TcpListener;

const MIB: usize = 1 << 20;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    lifecycle().await?;
    latency().await?;
    memory_growth().await?;
    rss_after_replacement().await?;
    replacement_time().await?;
    Ok(())
}

/// Instance create + first call + drop, against a real volume.
async fn lifecycle() -> anyhow::Result<()> {
    const ROUNDS: usize = 500;
    let dir = tempfile::tempdir()?;
    let (volume, _) = volume::Volume::open(&volume::VolumeConfig::in_data_dir(dir.path())).await?;
    let limits = RuntimeLimits {
        max_instances: 4,
        memory_cap: 256 * MIB as u64,
        request_timeout: Duration::from_secs(60),
        min_body_rate: 0,
        handler: HandlerKind::Wasm,
    };
    let budget = MemoryBudget::new(1 << 30);
    let runtime = Runtime::new(BUILTIN_GUEST, Arc::new(volume), budget, limits)?;
    let (mut create, mut call, mut drop_, mut total) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        let mut instance = runtime.instantiate().await?;
        let created = Instant::now();
        let request = FetchRequest {
            path: "missing".into(),
            want_body: false,
            range: None,
            if_range: None,
            if_none_match: Vec::new(),
            window: 32 * MIB as u64,
        };
        let answer = instance.fetch(volume::Owner::OPEN, request, None).await?;
        assert!(answer.is_err(), "the file does not exist");
        let called = Instant::now();
        drop(instance);
        let dropped = Instant::now();
        create.push(created - start);
        call.push(called - created);
        drop_.push(dropped - called);
        total.push(dropped - start);
    }
    print_percentiles(
        &format!(
            "Instance lifecycle ({ROUNDS} rounds; first call = fetch of a missing path through the volume)"
        ),
        "step",
        &mut [
            ("create", create),
            ("first call", call),
            ("drop", drop_),
            ("total", total),
        ],
        micros,
    );
    Ok(())
}

/// Sequential 1 MiB uploads and downloads from one client over loopback HTTP.
async fn latency() -> anyhow::Result<()> {
    const ROUNDS: usize = 300;
    let server = Server::start(16).await?;
    let client = reqwest::Client::new();
    let bodies: Vec<Vec<u8>> = (0..ROUNDS).map(|_| random_bytes(MIB)).collect();
    let (mut uploads, mut downloads) = (Vec::new(), Vec::new());
    for (i, body) in bodies.iter().enumerate() {
        let start = Instant::now();
        let response = server
            .upload(&client, &format!("/files/latency/{i}"), body.clone())
            .await?;
        response.bytes().await?;
        uploads.push(start.elapsed());
    }
    for (i, body) in bodies.iter().enumerate() {
        let start = Instant::now();
        let response = client
            .get(server.url(&format!("/files/latency/{i}")))
            .send()
            .await?;
        anyhow::ensure!(
            response.status().is_success(),
            "download: {}",
            response.status()
        );
        let bytes = response.bytes().await?;
        downloads.push(start.elapsed());
        anyhow::ensure!(&bytes[..] == body.as_slice(), "download {i} differs");
    }
    print_percentiles(
        &format!("1 MiB requests over loopback HTTP ({ROUNDS} each, one client, 16 instances)"),
        "request",
        &mut [
            ("upload (PUT)", uploads),
            ("download (GET, verified)", downloads),
        ],
        millis,
    );
    Ok(())
}

/// One instance's linear memory after 1 MiB, 8 MiB, then 1 MiB uploads.
async fn memory_growth() -> anyhow::Result<()> {
    let server = Server::start(1).await?;
    let client = reqwest::Client::new();
    println!("## Linear memory of one instance as uploads grow it");
    println!("| after | instance memory |");
    println!("|---|---|");
    println!(
        "| start | {} |",
        kib(server.state.pool.instances()[0].memory_bytes)
    );
    for (step, size) in [MIB, 8 * MIB, MIB].into_iter().enumerate() {
        server
            .upload(&client, &format!("/files/grow/{step}"), random_bytes(size))
            .await?;
        let memory = server.state.pool.instances()[0].memory_bytes;
        println!("| {} MiB upload | {} |", size / MIB, kib(memory));
    }
    println!();
    Ok(())
}

/// Grow every instance with a large upload at once, then replace them all.
async fn rss_after_replacement() -> anyhow::Result<()> {
    const INSTANCES: usize = 8;
    const BODY: usize = 32 * MIB;
    let server = Server::start(INSTANCES as u32).await?;
    let client = reqwest::Client::new();
    let before = ProcessMemory::read();
    // As many concurrent uploads as instances, so each instance takes one.
    let body = random_bytes(BODY);
    let mut uploads = Vec::new();
    for i in 0..INSTANCES {
        let (client, url, body) = (
            client.clone(),
            server.url(&format!("/files/big/{i}")),
            body.clone(),
        );
        uploads.push(tokio::spawn(async move {
            client.put(url).body(body).send().await
        }));
    }
    for upload in uploads {
        anyhow::ensure!(upload.await??.status().is_success());
    }
    let grown = ProcessMemory::read();
    let grown_pool = server.pool_memory();
    let started = Instant::now();
    for instance in server.state.pool.instances() {
        server
            .state
            .pool
            .drain(instance.id, ReplaceReason::Manual)
            .await;
    }
    let replaced_in = started.elapsed();
    let after = ProcessMemory::read();
    let after_pool = server.pool_memory();
    println!(
        "## Process memory before and after replacing grown instances ({INSTANCES} instances, one {} MiB upload each)",
        BODY / MIB
    );
    println!("| moment | pool linear memory | process RSS | private dirty |");
    println!("|---|---|---|---|");
    println!(
        "| before uploads | - | {} | {} |",
        mib(before.rss_bytes),
        mib(before.private_dirty_bytes)
    );
    println!(
        "| after uploads | {} | {} | {} |",
        mib(grown_pool),
        mib(grown.rss_bytes),
        mib(grown.private_dirty_bytes)
    );
    println!(
        "| after replacing all {INSTANCES} (took {}) | {} | {} | {} |",
        millis(replaced_in),
        mib(after_pool),
        mib(after.rss_bytes),
        mib(after.private_dirty_bytes)
    );
    println!();
    Ok(())
}

/// How long replacing a grown idle instance takes: create the fresh one,
/// swap it in, drop the old (its pages go back to the OS).
async fn replacement_time() -> anyhow::Result<()> {
    const ROUNDS: usize = 200;
    let server = Server::start(1).await?;
    let client = reqwest::Client::new();
    let body = random_bytes(8 * MIB);
    let mut times = Vec::new();
    for round in 0..ROUNDS {
        server
            .upload(
                &client,
                &format!("/files/replace/{}", round % 4),
                body.clone(),
            )
            .await?;
        let grown = server.state.pool.instances()[0].clone();
        anyhow::ensure!(grown.memory_bytes > 8 * MIB as u64);
        let start = Instant::now();
        server
            .state
            .pool
            .drain(grown.id, ReplaceReason::Manual)
            .await;
        times.push(start.elapsed());
        anyhow::ensure!(
            server.state.pool.instances()[0].id != grown.id,
            "not replaced"
        );
    }
    print_percentiles(
        &format!("Replacing a grown idle instance ({ROUNDS} rounds, 8 MiB of linear memory each)"),
        "step",
        &mut [("create fresh + swap in + drop old", times)],
        micros,
    );
    Ok(())
}

struct Server {
    state: AppState,
    url: String,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(instances: u32) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut config = Config::for_data_dir(dir.path());
        config.instances = instances;
        let state = gateway::start(&config).await?;
        let listener = TcpListener::bind(config.listen).await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(gateway::serve(
            listener,
            state.clone(),
            std::future::pending(),
        ));
        Ok(Self {
            state,
            url,
            _dir: dir,
        })
    }

    /// `PUT path` with `body`; an error unless it succeeded.
    async fn upload(
        &self,
        client: &reqwest::Client,
        path: &str,
        body: Vec<u8>,
    ) -> anyhow::Result<reqwest::Response> {
        let response = client.put(self.url(path)).body(body).send().await?;
        anyhow::ensure!(
            response.status().is_success(),
            "upload {path}: {}",
            response.status()
        );
        Ok(response)
    }

    /// Sum of every instance's linear memory.
    fn pool_memory(&self) -> u64 {
        self.state
            .pool
            .instances()
            .iter()
            .map(|i| i.memory_bytes)
            .sum()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// A markdown table of medians and p99s.
fn print_percentiles(
    title: &str,
    what: &str,
    rows: &mut [(&str, Vec<Duration>)],
    unit: fn(Duration) -> String,
) {
    println!("## {title}");
    println!("| {what} | median | p99 |");
    println!("|---|---|---|");
    for (name, samples) in rows {
        println!(
            "| {name} | {} | {} |",
            unit(percentile(samples, 50.0)),
            unit(percentile(samples, 99.0))
        );
    }
    println!();
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let rank = ((p / 100.0) * (samples.len() - 1) as f64).round() as usize;
    samples[rank]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn millis(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / MIB as f64)
}
