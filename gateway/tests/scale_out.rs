//! Two gateway processes on one PostgreSQL and one SeaweedFS (real servers,
//! started here on loopback ports and stopped by PID): 8 clients for 20 s
//! doing PUT / GET / DELETE through both on a few paths with a few bodies,
//! so that uploads and removals of the same content race across processes
//! all the time; one gateway is killed with SIGKILL mid-run and restarted.
//! Afterwards every path reads, through both, the last acknowledged
//! version, every digest a row names is in the bucket, and the orphans the
//! kill left are collected within the grace period. A second test kills one
//! gateway on SQLite and a local directory again and again mid-delete: the
//! restart finishes every removal a kill cut off.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use sha2::{Digest as _, Sha256};
use volume::{BlobUrl, S3Settings, Volume, VolumeConfig};

const RUN: Duration = Duration::from_secs(20);
const KILL_AT: Duration = Duration::from_secs(7);
const DOWN_FOR: Duration = Duration::from_secs(2);
const CLIENTS: usize = 8;
const PATHS_PER_CLIENT: usize = 3;
const GRACE: Duration = Duration::from_secs(2);
const GC_INTERVAL: Duration = Duration::from_secs(1);
const BUCKET: &str = "scale-out";

/// A few bodies, shared by every client, so the same content is uploaded
/// and released on both gateways at once.
fn bodies() -> Vec<Vec<u8>> {
    (0..4u8)
        .map(|i| {
            let len = [1, 4096, 70_000, 300_000][usize::from(i)];
            (0..len)
                .map(|j| (j as u8).wrapping_mul(31).wrapping_add(i))
                .collect()
        })
        .collect()
}

/// A gateway child process.
struct Gateway {
    addr: SocketAddr,
    data_dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Gateway {
    fn spawn(addr: SocketAddr, database: &str, s3: &[(String, String)]) -> Self {
        let mut gateway = Self {
            addr,
            data_dir: tempfile::tempdir().unwrap(),
            child: None,
        };
        gateway.restart(database, s3);
        gateway
    }

    /// (Re)start the process on the same address and data directory.
    fn restart(&mut self, database: &str, s3: &[(String, String)]) {
        self.kill();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.path().join("gateway.log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--listen", &self.addr.to_string()])
            .arg("--data-dir")
            .arg(self.data_dir.path().join("data"))
            .args(["--database-url", database])
            .args(["--blob-store", &format!("s3://{BUCKET}/blobs")])
            .args(["--instances", "4"])
            .args(["--orphan-grace", &format!("{}s", GRACE.as_secs())])
            .args(["--gc-interval", &format!("{}s", GC_INTERVAL.as_secs())])
            .args(["--removal-lease", &format!("{}s", GRACE.as_secs())])
            .envs(s3.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("AWS_CA_BUNDLE")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Wait until it answers `/healthz`.
    async fn wait_ready(&self, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(answer) = client
                .get(format!("http://{}/healthz", self.addr))
                .send()
                .await
                && answer.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "gateway {} did not start:\n{}",
                self.addr,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.data_dir.path().join("gateway.log")).unwrap_or_default()
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a path may hold: the body index of the last acknowledged PUT, or
/// `None` after a DELETE; several candidates while a request's outcome is
/// unknown (its gateway was killed under it).
#[derive(Debug, Clone)]
struct Expected(Vec<Option<usize>>);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_gateways_share_postgres_and_s3_through_a_crash() {
    let (postgres, seaweed) = tokio::task::spawn_blocking(|| {
        (
            testsupport::Postgres::start().unwrap(),
            testsupport::Seaweed::start(BUCKET).unwrap(),
        )
    })
    .await
    .unwrap();
    let database = postgres.create_database("scale_out").unwrap();
    let s3_env = seaweed.env();
    let addrs: Vec<SocketAddr> = (0..2)
        .map(|_| SocketAddr::from(([127, 0, 0, 1], testsupport::free_port())))
        .collect();
    let mut gateways: Vec<Gateway> = addrs
        .iter()
        .map(|addr| Gateway::spawn(*addr, &database, &s3_env))
        .collect();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for gateway in &gateways {
        gateway.wait_ready(&client).await;
    }

    let bodies = Arc::new(bodies());
    let start = Instant::now();
    let mut workers = Vec::new();
    for id in 0..CLIENTS {
        let (client, bodies, addrs) = (client.clone(), bodies.clone(), addrs.clone());
        workers.push(tokio::spawn(async move {
            let mut expected: HashMap<String, Expected> = (0..PATHS_PER_CLIENT)
                .map(|p| (format!("c{id}/p{p}"), Expected(vec![None])))
                .collect();
            let mut counts = [0usize; 3];
            while start.elapsed() < RUN {
                let (path, op, body, gateway) = {
                    let mut rng = rand::rng();
                    (
                        format!("c{id}/p{}", rng.random_range(0..PATHS_PER_CLIENT)),
                        rng.random_range(0..3),
                        rng.random_range(0..bodies.len()),
                        addrs[rng.random_range(0..addrs.len())],
                    )
                };
                let url = format!("http://{gateway}/files/{path}");
                let state = expected.get_mut(&path).unwrap();
                match op {
                    0 => match client.put(&url).body(bodies[body].clone()).send().await {
                        Ok(answer) if answer.status().is_success() => state.0 = vec![Some(body)],
                        Ok(answer) => panic!("PUT {url}: {}", answer.status()),
                        Err(error) if error.is_connect() => {}
                        Err(_) => state.0.push(Some(body)),
                    },
                    1 => match client.get(&url).send().await {
                        Ok(answer) => {
                            let status = answer.status().as_u16();
                            let Ok(got) = answer.bytes().await else {
                                continue;
                            };
                            let seen = match status {
                                200 => bodies.iter().position(|b| b[..] == got[..]).map(Some),
                                404 => Some(None),
                                other => panic!("GET {url}: {other}"),
                            };
                            let seen =
                                seen.unwrap_or_else(|| panic!("GET {url}: a body no one uploaded"));
                            assert!(
                                state.0.contains(&seen),
                                "GET {url}: {seen:?}, expected one of {:?}",
                                state.0
                            );
                            state.0 = vec![seen];
                        }
                        Err(error) if error.is_connect() => {}
                        Err(_) => {}
                    },
                    _ => match client.delete(&url).send().await {
                        Ok(answer) if matches!(answer.status().as_u16(), 204 | 404) => {
                            state.0 = vec![None]
                        }
                        Ok(answer) => panic!("DELETE {url}: {}", answer.status()),
                        Err(error) if error.is_connect() => {}
                        Err(_) => state.0.push(None),
                    },
                }
                counts[op] += 1;
            }
            (expected, counts)
        }));
    }

    // Kill one gateway mid-run, then bring it back on the same port.
    tokio::time::sleep(KILL_AT).await;
    gateways[0].kill();
    tokio::time::sleep(DOWN_FOR).await;
    gateways[0].restart(&database, &s3_env);
    gateways[0].wait_ready(&client).await;

    let mut expected = HashMap::new();
    let mut totals = [0usize; 3];
    for worker in workers {
        let (mine, counts) = worker.await.unwrap();
        expected.extend(mine);
        for (total, count) in totals.iter_mut().zip(counts) {
            *total += count;
        }
    }
    eprintln!(
        "requests: {} PUT, {} GET, {} DELETE",
        totals[0], totals[1], totals[2]
    );
    assert!(
        totals.iter().all(|&count| count > 100),
        "too few requests: {totals:?}"
    );

    // Every path reads the last acknowledged version, the same through both.
    for (path, state) in &expected {
        let mut seen_by = Vec::new();
        for addr in &addrs {
            let answer = client
                .get(format!("http://{addr}/files/{path}"))
                .send()
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let got = answer.bytes().await.unwrap();
            seen_by.push(match status {
                200 => Some(
                    bodies
                        .iter()
                        .position(|b| b[..] == got[..])
                        .expect("a known body"),
                ),
                404 => None,
                other => panic!("GET {path}: {other}"),
            });
        }
        assert_eq!(seen_by[0], seen_by[1], "{path}: the gateways disagree");
        assert!(
            state.0.contains(&seen_by[0]),
            "{path}: {:?}, expected one of {:?}",
            seen_by[0],
            state.0
        );
    }

    // Orphans (uploads the kill cut off) are gone within the grace period
    // plus a collection interval; every digest a row names is in the bucket.
    tokio::time::sleep(GRACE + GC_INTERVAL * 3).await;
    let check_dir = tempfile::tempdir().unwrap();
    let mut config = VolumeConfig::in_data_dir(check_dir.path());
    config.database = database.parse().unwrap();
    config.blobs = BlobUrl::S3 {
        bucket: BUCKET.into(),
        prefix: "blobs".into(),
    };
    config.s3 = S3Settings {
        endpoint: Some(seaweed.endpoint()),
        region: Some(seaweed.region().to_owned()),
        access_key_id: Some(seaweed.access_key().to_owned()),
        secret_access_key: Some(seaweed.secret_key().to_owned()),
        allow_http: Some(true),
    };
    config.orphan_grace = GRACE;
    config.removal_lease = GRACE;
    let (checker, report) = Volume::open(&config).await.unwrap();
    assert_eq!(
        report.files_missing_blobs, 0,
        "rows name blobs the bucket lacks"
    );
    assert_eq!(
        report.orphan_blobs_removed, 0,
        "the gateways left orphans past the grace period"
    );
    checker.close().await;

    for gateway in &gateways {
        let log = gateway.log();
        assert!(!log.contains("panicked"), "a gateway panicked:\n{log}");
    }
}

// ---------------------------------------------------------------------------
// One gateway on SQLite and a local directory, killed with SIGKILL again and
// again while clients upload, overwrite and delete (issue 30's crash test):
// a kill that cuts a blob's removal off leaves its ledger row `deleting`, and
// the restart must finish it, not leave it (and its blob) for a whole lease.
// ---------------------------------------------------------------------------

const STORM_CLIENTS: usize = 6;
const STORM_PATHS: usize = 4;
/// How long the clients storm before each kill.
const STORM_FOR: Duration = Duration::from_millis(1500);
/// Kills until one has cut a removal off (each is checked while the gateway
/// is down), and at most this many.
const MAX_KILLS: usize = 40;

/// The gateway's data directory, the same at every start.
struct Local {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// `--versions`: whether replaced and deleted files are kept.
    versions: bool,
}

impl Local {
    /// A gateway on a fresh data directory and a free loopback port (not
    /// started; `versions`: whether it keeps them), and a client for it.
    fn fresh(versions: bool) -> (Self, reqwest::Client) {
        let gateway = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], testsupport::free_port())),
            dir: tempfile::tempdir().unwrap(),
            child: None,
            versions,
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        (gateway, client)
    }

    fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("gateway.log"))
            .unwrap();
        // The default lease and collection interval (minutes): only the
        // collection at start can finish what a kill left.
        let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--listen", &self.addr.to_string()])
            .arg("--data-dir")
            .arg(self.data())
            .args(["--instances", "2", "--orphan-grace", "0s"])
            .arg(format!("--versions={}", self.versions))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    async fn wait_ready(&self, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !client
            .get(format!("http://{}/healthz", self.addr))
            .send()
            .await
            .is_ok_and(|answer| answer.status().is_success())
        {
            assert!(
                Instant::now() < deadline,
                "the gateway did not start:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("gateway.log")).unwrap_or_default()
    }

    /// Read the index directly (the gateway is down, or only reading).
    fn query(&self, sql: &str) -> Vec<String> {
        let db = rusqlite::Connection::open(self.data().join("index.sqlite")).unwrap();
        let mut statement = db.prepare(sql).unwrap();
        statement
            .query_map([], |row| row.get::<_, String>(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// Change the index directly (the gateway is down).
    fn execute(&self, sql: &str) {
        let db = rusqlite::Connection::open(self.data().join("index.sqlite")).unwrap();
        db.execute_batch(sql).unwrap();
    }

    /// Every blob in the local store: files (`blobs/<fan-out>/<sha256>`)
    /// and records packed into segments (`blobs/segments/<n>`, where the
    /// index's row says, the segment long enough to hold it).
    fn blob_files(&self) -> std::collections::BTreeSet<String> {
        let mut found = std::collections::BTreeSet::new();
        for fan_out in std::fs::read_dir(self.data().join("blobs")).unwrap() {
            let fan_out = fan_out.unwrap();
            if fan_out.file_name().len() == 2 {
                for blob in std::fs::read_dir(fan_out.path()).unwrap() {
                    found.insert(blob.unwrap().file_name().to_string_lossy().into_owned());
                }
            }
        }
        let packed = self.query(
            "SELECT sha256 || ' ' || segment || ' ' || (segment_offset + packed_len) FROM blobs \
             WHERE segment IS NOT NULL AND state = 'stored'",
        );
        for row in packed {
            let mut fields = row.split(' ');
            let (digest, segment, end) = (fields.next(), fields.next(), fields.next());
            let (Some(digest), Some(segment), Some(end)) = (digest, segment, end) else {
                continue;
            };
            let segment = self.data().join("blobs/segments").join(segment);
            let end: u64 = end.parse().unwrap();
            if std::fs::metadata(segment).is_ok_and(|meta| meta.len() >= end) {
                found.insert(digest.to_owned());
            }
        }
        found
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A body of `client`'s `n`th upload: unique, so each overwrite and delete
/// releases a blob. Three in four are over 64 KiB, blobs of their own: on
/// SQLite a packed blob is let go of in the very transaction that leaves it
/// unnamed, but a blob of its own is claimed there and removed after the
/// commit, a window a kill can cut.
fn storm_body(client: usize, n: usize) -> Vec<u8> {
    let repeats = if n.is_multiple_of(4) { 40 } else { 3500 };
    format!("client {client} upload {n} ")
        .repeat(repeats)
        .into_bytes()
}

/// One client's loop until `stop`: PUT (overwrite) or DELETE one of its
/// paths. Returns what each path may hold: the acknowledged body, or one of
/// several while a request's outcome is unknown (the kill cut it).
async fn storm(
    client: reqwest::Client,
    addr: SocketAddr,
    id: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> HashMap<String, Vec<Option<Vec<u8>>>> {
    let mut expected: HashMap<String, Vec<Option<Vec<u8>>>> = (0..STORM_PATHS)
        .map(|p| (format!("s{id}/p{p}"), vec![None]))
        .collect();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let path = format!("s{id}/p{}", n % STORM_PATHS);
        let url = format!("http://{addr}/files/{path}");
        let state = expected.get_mut(&path).unwrap();
        if n % 3 == 0 {
            match client.delete(&url).send().await {
                Ok(answer) if matches!(answer.status().as_u16(), 204 | 404) => *state = vec![None],
                Ok(answer) => panic!("DELETE {url}: {}", answer.status()),
                Err(error) if error.is_connect() => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(_) => state.push(None),
            }
        } else {
            let body = storm_body(id, n);
            match client.put(&url).body(body.clone()).send().await {
                Ok(answer) if answer.status().is_success() => *state = vec![Some(body)],
                Ok(answer) => panic!("PUT {url}: {}", answer.status()),
                Err(error) if error.is_connect() => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(_) => state.push(Some(body)),
            }
        }
    }
    expected
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_killed_mid_delete_finishes_every_removal_at_restart() {
    // No versions kept: a delete is a blob's removal, which the kills cut
    // off.
    let (mut gateway, client) = Local::fresh(false);
    gateway.start();
    gateway.wait_ready(&client).await;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..STORM_CLIENTS)
        .map(|id| tokio::spawn(storm(client.clone(), gateway.addr, id, stop.clone())))
        .collect();
    let (mut kills, mut cut_off) = (0, Vec::new());
    while cut_off.is_empty() && kills < MAX_KILLS {
        tokio::time::sleep(STORM_FOR).await;
        gateway.kill();
        kills += 1;
        cut_off = gateway.query("SELECT sha256 FROM blobs WHERE state = 'deleting'");
        gateway.start();
        gateway.wait_ready(&client).await;
    }
    eprintln!("{kills} kills; the last cut {} removals off", cut_off.len());
    assert!(
        !cut_off.is_empty(),
        "no kill cut a removal off: the test proved nothing"
    );
    // The restart's collection has run (the gateway answers only after it).
    // Bodies are never uploaded twice, so nothing names these digests again
    // and their rows and blobs must simply be gone (the clients go on, so
    // other removals may be under way).
    let blobs = gateway.blob_files();
    for digest in &cut_off {
        let rows = gateway.query(&format!(
            "SELECT state FROM blobs WHERE sha256 = '{digest}'"
        ));
        assert!(
            rows.is_empty(),
            "{digest}: a removal the kill cut off is left {rows:?}"
        );
        assert!(!blobs.contains(digest), "{digest}: its blob is left");
    }

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut expected = HashMap::new();
    for worker in clients {
        expected.extend(worker.await.unwrap());
    }
    // Every path reads what was last acknowledged (or one of the candidates
    // a cut request left).
    for (path, candidates) in &expected {
        let answer = client
            .get(format!("http://{}/files/{path}", gateway.addr))
            .send()
            .await
            .unwrap();
        let got = match answer.status().as_u16() {
            200 => Some(answer.bytes().await.unwrap().to_vec()),
            404 => None,
            other => panic!("GET {path}: {other}"),
        };
        assert!(
            candidates.contains(&got),
            "{path}: not a body it was given last"
        );
    }
    // No blob file without a file naming it (the clients stopped, so every
    // removal has finished).
    let named: std::collections::BTreeSet<String> = gateway
        .query("SELECT DISTINCT sha256 FROM files")
        .into_iter()
        .collect();
    let unnamed: Vec<_> = gateway.blob_files().difference(&named).cloned().collect();
    assert!(unnamed.is_empty(), "blob files no file names: {unnamed:?}");
    let log = gateway.log();
    assert!(!log.contains("panicked"), "the gateway panicked:\n{log}");
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One client's loop until `stop` on a gateway that keeps versions: PUT
/// (overwrite) or DELETE one of its paths. Every version a PUT was
/// acknowledged with: its path, id and body's SHA-256.
async fn version_storm(
    client: reqwest::Client,
    addr: SocketAddr,
    id: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(String, String, String)> {
    let mut acknowledged = Vec::new();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let path = format!("v{id}/p{}", n % STORM_PATHS);
        let url = format!("http://{addr}/files/{path}");
        if n % 3 == 0 {
            match client.delete(&url).send().await {
                Ok(answer) => assert!(
                    matches!(answer.status().as_u16(), 204 | 404),
                    "DELETE {url}: {}",
                    answer.status()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        } else {
            let body = storm_body(id, n);
            match client.put(&url).body(body.clone()).send().await {
                Ok(answer) if answer.status().is_success() => {
                    let Ok(meta) = answer.json::<serde_json::Value>().await else {
                        continue; // cut off mid-answer: not acknowledged
                    };
                    let version = meta["version_id"].as_str().unwrap().to_owned();
                    acknowledged.push((path, version, sha256_hex(&body)));
                }
                Ok(answer) => panic!("PUT {url}: {}", answer.status()),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    acknowledged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_during_overwrites_and_deletes_lose_no_acknowledged_version() {
    let (mut gateway, client) = Local::fresh(true);
    gateway.start();
    gateway.wait_ready(&client).await;
    let acknowledged = storm_through_kills(&mut gateway, &client, version_storm).await;
    assert!(
        acknowledged.len() > 20,
        "too few writes: {}",
        acknowledged.len()
    );
    every_version_reads_back(&client, gateway.addr, &acknowledged).await;
    // A restart collects with no grace: what a kill left is finished or
    // undone.
    restart_and_check_every_blob(&mut gateway, &client).await;
}

/// Run `STORM_CLIENTS` of `storm` against `gateway`, killing it with
/// SIGKILL and restarting it four times meanwhile; every version the
/// clients were acknowledged (path, id, SHA-256).
async fn storm_through_kills<F, S>(
    gateway: &mut Local,
    client: &reqwest::Client,
    storm: F,
) -> Vec<(String, String, String)>
where
    F: Fn(reqwest::Client, SocketAddr, usize, Arc<std::sync::atomic::AtomicBool>) -> S,
    S: std::future::Future<Output = Vec<(String, String, String)>> + Send + 'static,
{
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..STORM_CLIENTS)
        .map(|id| tokio::spawn(storm(client.clone(), gateway.addr, id, stop.clone())))
        .collect();
    for _ in 0..4 {
        tokio::time::sleep(STORM_FOR).await;
        gateway.kill();
        gateway.start();
        gateway.wait_ready(client).await;
    }
    tokio::time::sleep(STORM_FOR).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut acknowledged = Vec::new();
    for worker in clients {
        acknowledged.extend(worker.await.unwrap());
    }
    acknowledged
}

/// Every acknowledged version (path, id, SHA-256) reads back by its id,
/// its content intact.
async fn every_version_reads_back(
    client: &reqwest::Client,
    addr: SocketAddr,
    acknowledged: &[(String, String, String)],
) {
    for (path, version, digest) in acknowledged {
        let answer = client
            .get(format!("http://{addr}/files/{path}?version={version}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path} version {version}");
        let body = answer.bytes().await.unwrap();
        assert_eq!(&sha256_hex(&body), digest, "{path} version {version}");
    }
}

/// Restart `gateway` (its collection has no grace): every blob file is then
/// one a current file or a kept version names, every one named is there,
/// no removal is left unfinished, and nothing panicked.
async fn restart_and_check_every_blob(gateway: &mut Local, client: &reqwest::Client) {
    gateway.kill();
    gateway.start();
    gateway.wait_ready(client).await;
    let named: std::collections::BTreeSet<String> = gateway
        .query(
            "SELECT sha256 FROM files UNION SELECT sha256 FROM file_versions \
             WHERE sha256 IS NOT NULL",
        )
        .into_iter()
        .collect();
    let blobs = gateway.blob_files();
    let unnamed: Vec<_> = blobs.difference(&named).cloned().collect();
    assert!(
        unnamed.is_empty(),
        "orphan blobs after the grace: {unnamed:?}"
    );
    let missing: Vec<_> = named.difference(&blobs).cloned().collect();
    assert!(
        missing.is_empty(),
        "versions without their blobs: {missing:?}"
    );
    let deleting = gateway.query("SELECT sha256 FROM blobs WHERE state = 'deleting'");
    assert!(
        deleting.is_empty(),
        "removals left unfinished: {deleting:?}"
    );
    let log = gateway.log();
    assert!(!log.contains("panicked"), "the gateway panicked:\n{log}");
}

/// One client's loop until `stop` over a locked bucket (`vault/`, every
/// version retained by its default) and an unlocked folder (`plain/`):
/// PUT, DELETE, and the trash's delete-forever and empty, which must
/// refuse every locked version and may take the others. Every version of
/// `vault/` a PUT was acknowledged with: its path, id and body's SHA-256.
async fn locked_storm(
    client: reqwest::Client,
    addr: SocketAddr,
    id: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<(String, String, String)> {
    let mut acknowledged = Vec::new();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        n += 1;
        let folder = if n % 2 == 0 { "vault" } else { "plain" };
        let path = format!("{folder}/c{id}-p{}", n % STORM_PATHS);
        let url = format!("http://{addr}/files/{path}");
        let sent = match n % 5 {
            0 => client.delete(&url).send().await.map(|answer| {
                assert!(
                    matches!(answer.status().as_u16(), 204 | 404),
                    "DELETE {url}"
                );
            }),
            1 => client
                .delete(format!("http://{addr}/trash"))
                .send()
                .await
                .map(|answer| {
                    assert_eq!(answer.status(), 200, "empty the trash");
                }),
            2 => match client.get(format!("http://{addr}/trash")).send().await {
                Ok(answer) if answer.status() == 200 => {
                    let Ok(trash) = answer.json::<serde_json::Value>().await else {
                        continue;
                    };
                    for item in trash["items"].as_array().into_iter().flatten() {
                        let purge = format!("http://{addr}/trash/{}", item["id"]);
                        let locked = item["path"].as_str().unwrap_or("").starts_with("vault/");
                        if let Ok(answer) = client.delete(&purge).send().await {
                            let status = answer.status().as_u16();
                            assert!(
                                if locked {
                                    matches!(status, 403 | 404)
                                } else {
                                    matches!(status, 204 | 403 | 404)
                                },
                                "{purge} of {item}: {status}"
                            );
                        }
                    }
                    Ok(())
                }
                Ok(answer) => panic!("GET /trash: {}", answer.status()),
                Err(error) => Err(error),
            },
            _ => {
                let body = storm_body(id, n);
                match client.put(&url).body(body.clone()).send().await {
                    Ok(answer) if answer.status().is_success() => {
                        let Ok(meta) = answer.json::<serde_json::Value>().await else {
                            continue; // cut off mid-answer: not acknowledged
                        };
                        if folder == "vault" {
                            let version = meta["version_id"].as_str().unwrap().to_owned();
                            acknowledged.push((path, version, sha256_hex(&body)));
                        }
                        Ok(())
                    }
                    Ok(answer) => panic!("PUT {url}: {}", answer.status()),
                    Err(error) => Err(error),
                }
            }
        };
        if sent.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    acknowledged
}

/// kill -9 during writes, deletes and the trash's purges of locked and
/// unlocked versions (issue 33): every acknowledged locked version reads
/// back by its id, and after a restart no blob is orphaned or missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kills_during_deletes_of_locked_versions_lose_none_of_them() {
    let (mut gateway, client) = Local::fresh(true);
    // The index made, then `vault/` locked as S3's CreateBucket with
    // object lock and a default retention of a day leave it.
    gateway.start();
    gateway.wait_ready(&client).await;
    gateway.kill();
    gateway.execute(
        "INSERT INTO versioning (owner, path, state, object_lock) \
         VALUES (0, 'vault/', 'enabled', 'GOVERNANCE 1d')",
    );
    gateway.start();
    gateway.wait_ready(&client).await;
    let acknowledged = storm_through_kills(&mut gateway, &client, locked_storm).await;
    assert!(
        acknowledged.len() > 10,
        "too few writes: {}",
        acknowledged.len()
    );
    every_version_reads_back(&client, gateway.addr, &acknowledged).await;
    let retained = gateway.query(
        "SELECT version_id FROM object_locks WHERE path LIKE 'vault/%' AND retain_until_ms > 0",
    );
    for (_, version, _) in &acknowledged {
        assert!(
            retained.contains(version),
            "version {version} lost its retention"
        );
    }
    restart_and_check_every_blob(&mut gateway, &client).await;
}
