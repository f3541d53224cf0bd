//! What a tus upload keeps of a request that does not finish (issue 35):
//! the bytes of a PATCH are appended as they arrive and made durable and
//! recorded every few MiB and when the request ends or is cut, so a client
//! that asks where the upload stands (`HEAD`) after a cut resumes from
//! there and does not send again what the server had already kept.
//!
//! Each case runs on both backends: SQLite and a local directory, and
//! PostgreSQL with blobs in SeaweedFS (real servers, started here on
//! loopback ports and stopped by PID). The cases:
//!
//! - a PATCH whose body fails after 7 MiB of 20 keeps some of those 7 MiB
//!   (the offset `HEAD` reports, printed), and the rest sent from there
//!   stores the file with the right SHA-256;
//! - a gateway process killed with SIGKILL in the middle of a slow 20 MiB
//!   PATCH and restarted on the same data directory, database and blob
//!   store keeps some of what was sent, resumes from there, and leaves no
//!   part of the upload behind once it completes;
//! - tus-js-client with its default chunk size (none: the whole file in
//!   one PATCH) aborted at a random point resumes from what the server
//!   kept, sending again no more than what was in flight;
//! - two PATCHes racing from the same offset never both land: one is
//!   stored, the other refused (`409`, `423`) or cut off, and what is
//!   stored is one body's bytes, never a mix; a PATCH at an offset another
//!   has moved past is a `409`.
//!
//! Needs tus-js-client in `.tools/node` with Node on PATH, PostgreSQL and
//! SeaweedFS: `scripts/install-test-deps.sh` installs them.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use common::{TestServer, random_bytes, sha256_hex};
use gateway::config::Config;
use rand::Rng;
use reqwest::header::{self, HeaderMap};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const TUS_VERSION: &str = "1.0.0";
const OFFSET_STREAM: &str = "application/offset+octet-stream";
/// How long a case may take once its backend's servers are up.
const CASE_LIMIT: Duration = Duration::from_secs(60);
/// How long `HEAD` may take to show what a cut request kept.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// The two backends.

/// Runs a case twice: on SQLite and a local directory, and on PostgreSQL
/// with blobs in SeaweedFS.
macro_rules! both_backends {
    ($case:ident) => {
        mod $case {
            use super::BackendKind;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_and_a_local_directory() {
                super::$case(BackendKind::Local).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_and_seaweedfs() {
                super::$case(BackendKind::Shared).await;
            }
        }
    };
}

#[derive(Debug, Clone, Copy)]
enum BackendKind {
    /// SQLite and a local directory, both in the data directory.
    Local,
    /// PostgreSQL and blobs in an S3 bucket (SeaweedFS).
    Shared,
}

/// The servers of the shared backend, stopped by PID when dropped.
struct Shared {
    postgres: testsupport::Postgres,
    seaweed: testsupport::Seaweed,
}

/// Where a case's gateways keep their data; for the shared backend, the
/// servers it runs on, for as long as the case.
struct Backend {
    shared: Option<Shared>,
}

impl Backend {
    /// The backend of `kind`; for the shared one, a PostgreSQL and a
    /// SeaweedFS with bucket `bucket` of its own.
    async fn start(kind: BackendKind, bucket: &'static str) -> Self {
        let shared = match kind {
            BackendKind::Local => None,
            BackendKind::Shared => Some(
                tokio::task::spawn_blocking(move || Shared {
                    postgres: testsupport::Postgres::start().unwrap(),
                    seaweed: testsupport::Seaweed::start(bucket).unwrap(),
                })
                .await
                .unwrap(),
            ),
        };
        Self { shared }
    }

    fn is_local(&self) -> bool {
        self.shared.is_none()
    }

    /// A gateway's configuration pointed at this backend.
    fn configure(&self, config: &mut Config) {
        if let Some(shared) = &self.shared {
            config.database_url = Some(shared.postgres.url("postgres").parse().unwrap());
            config.blob_store = Some(
                format!("s3://{}/blobs", shared.seaweed.bucket())
                    .parse()
                    .unwrap(),
            );
            config.s3 = volume::S3Settings {
                endpoint: Some(shared.seaweed.endpoint()),
                region: Some(shared.seaweed.region().to_owned()),
                access_key_id: Some(shared.seaweed.access_key().to_owned()),
                secret_access_key: Some(shared.seaweed.secret_key().to_owned()),
                allow_http: Some(true),
            };
        }
    }

    /// A gateway in this process on this backend, in a fresh temp dir.
    async fn server(&self) -> TestServer {
        TestServer::start(|config| self.configure(config)).await
    }

    /// The flags and environment that point a gateway process at this
    /// backend (nothing for the local one: its data directory is all).
    fn point(&self, command: &mut Command) {
        if let Some(shared) = &self.shared {
            command
                .args(["--database-url", &shared.postgres.url("postgres")])
                .args([
                    "--blob-store",
                    &format!("s3://{}/blobs", shared.seaweed.bucket()),
                ])
                .envs(shared.seaweed.env())
                .env_remove("AWS_CA_BUNDLE");
        }
    }
}

/// Runs `case`, failing it if it takes longer than `limit`.
async fn within<F: std::future::Future<Output = ()>>(limit: Duration, case: F) {
    tokio::time::timeout(limit, case)
        .await
        .unwrap_or_else(|_| panic!("the case took longer than {limit:?}"));
}

// ---------------------------------------------------------------------------
// A gateway process of its own, to kill with SIGKILL.

struct GatewayProcess {
    process: Option<testsupport::ChildGuard>,
    addr: SocketAddr,
    data_dir: PathBuf,
    log: PathBuf,
}

impl GatewayProcess {
    async fn start(backend: &Backend, data_dir: &Path, log: &Path) -> Self {
        let mut gateway = Self {
            process: None,
            addr: SocketAddr::from(([127, 0, 0, 1], testsupport::free_port())),
            data_dir: data_dir.to_owned(),
            log: log.to_owned(),
        };
        gateway.restart(backend).await;
        gateway
    }

    /// (Re)starts it on the same address, data directory and backend;
    /// returns once it answers `/healthz`.
    async fn restart(&mut self, backend: &Backend) {
        assert!(self.process.is_none(), "already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
        command
            .args(["--listen", &self.addr.to_string()])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--instances", "2"])
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        backend.point(&mut command);
        // Stopping it is SIGKILL, nothing gentler.
        self.process = Some(
            testsupport::ChildGuard::spawn(&mut command, "KILL", false, Duration::from_secs(5))
                .unwrap(),
        );
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
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
                "the gateway did not start:\n{}",
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL (by PID), and wait until it is gone.
    async fn kill(&mut self) {
        let mut process = self.process.take().expect("running");
        tokio::task::spawn_blocking(move || process.stop())
            .await
            .unwrap();
    }
}

// ---------------------------------------------------------------------------
// The protocol by hand.

/// tus requests to one gateway.
struct Tus {
    base: String,
    client: reqwest::Client,
}

impl Tus {
    fn new(addr: SocketAddr) -> Self {
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
        }
    }

    fn endpoint(&self) -> String {
        format!("{}/uploads/", self.base)
    }

    fn request(&self, method: Method, url: &str) -> RequestBuilder {
        self.client
            .request(method, url)
            .header("Tus-Resumable", TUS_VERSION)
    }

    /// Creates an upload of `length` bytes for `path`; its absolute URL.
    async fn created(&self, length: usize, path: &str) -> String {
        let answer = self
            .request(Method::POST, &self.endpoint())
            .header("Upload-Length", length.to_string())
            .header("Upload-Metadata", upload_metadata(&[("path", path)]))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::CREATED, "POST for {path}");
        let location = header_str(answer.headers(), "location")
            .unwrap_or_else(|| panic!("a 201 without Location: {:?}", answer.headers()));
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_owned()
        } else {
            assert!(location.starts_with("/uploads/"), "Location {location}");
            format!("{}{location}", self.base)
        }
    }

    /// A PATCH at `offset`, its body still to be given.
    fn patch(&self, url: &str, offset: usize) -> RequestBuilder {
        self.request(Method::PATCH, url)
            .header("Upload-Offset", offset.to_string())
            .header(header::CONTENT_TYPE, OFFSET_STREAM)
    }

    async fn head(&self, url: &str) -> Response {
        self.request(Method::HEAD, url).send().await.unwrap()
    }

    /// The server's offset for `url` (asserting the HEAD is a 200).
    async fn offset(&self, url: &str) -> usize {
        let answer = self.head(url).await;
        assert_eq!(answer.status(), StatusCode::OK, "HEAD {url}");
        header_usize(answer.headers(), "upload-offset")
    }

    /// Where the upload stands once no request is changing it any more:
    /// polls `HEAD` until it answers the same three times in a row (150 ms
    /// apart), within [`SETTLE_LIMIT`]: `None` once the upload is gone (it
    /// completed), else its offset. With `above_zero`, an offset of 0 does
    /// not count as settled (a cut request may not have recorded yet).
    async fn settled(&self, url: &str, above_zero: bool) -> Option<usize> {
        let started = Instant::now();
        let mut last = None;
        let mut same = 0;
        loop {
            let answer = self.head(url).await;
            let now = match answer.status() {
                StatusCode::NOT_FOUND => None,
                StatusCode::OK => Some(header_usize(answer.headers(), "upload-offset")),
                other => panic!("HEAD {url}: {other}"),
            };
            let counts = !above_zero || now != Some(0);
            if counts && last == Some(now) {
                same += 1;
            } else {
                same = 0;
            }
            if same >= 2 {
                eprintln!(
                    "HEAD {url}: {}, settled after {:?}",
                    now.map_or_else(|| "gone".to_owned(), |offset| format!("offset {offset}")),
                    started.elapsed()
                );
                return now;
            }
            last = Some(now);
            assert!(
                started.elapsed() < SETTLE_LIMIT,
                "HEAD {url}: {now:?} after {SETTLE_LIMIT:?}; it never settled"
            );
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// What the server kept of a request that was cut: its offset once
    /// settled above 0 (see [`Tus::settled`]).
    async fn settled_offset(&self, url: &str) -> usize {
        self.settled(url, true)
            .await
            .unwrap_or_else(|| panic!("upload {url} is gone; it was not complete"))
    }

    /// PATCHes `content` from `from` to its end in one request; asserts
    /// the 204 and the offset at the end. A `423` (the upload still busy
    /// with a request that was cut) is tried again, as tus clients do,
    /// for up to 10 s; each is printed.
    async fn finish(&self, url: &str, from: usize, content: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self
                .patch(url, from)
                .body(content[from..].to_vec())
                .send()
                .await
                .unwrap();
            let status = answer.status();
            if status == StatusCode::LOCKED && Instant::now() < deadline {
                eprintln!("PATCH {url} at {from}: 423, the upload is busy; trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            let headers = answer.headers().clone();
            assert_eq!(
                status,
                StatusCode::NO_CONTENT,
                "PATCH {url} of the rest from {from}: {}",
                answer.text().await.unwrap_or_default()
            );
            assert_eq!(
                header_usize(&headers, "upload-offset"),
                content.len(),
                "the offset after the last PATCH: {headers:?}"
            );
            return;
        }
    }

    /// `GET /files/<path>`.
    async fn file(&self, path: &str) -> Response {
        self.client
            .get(format!("{}/files/{path}", self.base))
            .send()
            .await
            .unwrap()
    }

    /// Asserts `path` is stored with exactly `content`: the body and the
    /// ETag (its SHA-256).
    async fn assert_stored(&self, path: &str, content: &[u8]) {
        let stored = self.stored(path).await;
        assert_eq!(stored.len(), content.len(), "the length of {path}");
        assert_eq!(
            sha256_hex(&stored),
            sha256_hex(content),
            "the SHA-256 of {path}"
        );
    }

    /// The content stored at `path`, checked against its ETag.
    async fn stored(&self, path: &str) -> Bytes {
        let answer = self.file(path).await;
        assert_eq!(answer.status(), StatusCode::OK, "GET /files/{path}");
        let etag = header_str(answer.headers(), "etag")
            .unwrap_or_default()
            .to_owned();
        let body = answer.bytes().await.unwrap();
        assert_eq!(
            etag,
            format!("\"{}\"", sha256_hex(&body)),
            "the ETag of {path} is its content's SHA-256"
        );
        body
    }

    /// `wasm_storage_uploads_in_progress` in `/metrics`.
    async fn uploads_in_progress(&self) -> f64 {
        let metrics = self
            .client
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics
            .lines()
            .find_map(|line| {
                line.strip_prefix("wasm_storage_uploads_in_progress")
                    .and_then(|rest| rest.trim().rsplit(' ').next()?.parse().ok())
            })
            .unwrap_or_else(|| {
                panic!("no wasm_storage_uploads_in_progress in /metrics:\n{metrics}")
            })
    }
}

fn upload_metadata(pairs: &[(&str, &str)]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    pairs
        .iter()
        .map(|(key, value)| format!("{key} {}", b64.encode(value)))
        .collect::<Vec<_>>()
        .join(",")
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|value| value.to_str().unwrap())
}

fn header_usize(headers: &HeaderMap, name: &str) -> usize {
    header_str(headers, name)
        .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
        .parse()
        .unwrap()
}

/// A PATCH body that hands `content` to the connection `piece` bytes at a
/// time, one piece every `every`. With `cut_at`, it fails once that many
/// bytes have gone (after one more pause, so they have left), which aborts
/// the request in the middle of its body: the server sees a cut body.
/// `sent` counts the bytes handed to the connection.
fn paced_body(
    content: Bytes,
    piece: usize,
    every: Duration,
    cut_at: Option<usize>,
    sent: Arc<AtomicUsize>,
) -> reqwest::Body {
    /// The state after the body has failed: nothing more to send.
    const DONE: usize = usize::MAX;
    let stream = futures_util::stream::unfold(0usize, move |at: usize| {
        let content = content.clone();
        let sent = sent.clone();
        async move {
            if at == DONE {
                return None;
            }
            let cut = cut_at.is_some_and(|cut| at >= cut);
            if at >= content.len() && !cut {
                return None;
            }
            if at > 0 {
                tokio::time::sleep(every).await;
            }
            if cut {
                let failed: Result<Bytes, std::io::Error> =
                    Err(std::io::Error::other("the test cuts this PATCH"));
                return Some((failed, DONE));
            }
            let end = (at + piece)
                .min(content.len())
                .min(cut_at.unwrap_or(usize::MAX));
            sent.fetch_add(end - at, Ordering::SeqCst);
            Some((Ok(content.slice(at..end)), end))
        }
    });
    reqwest::Body::wrap_stream(stream)
}

/// Every file under `dir`, at any depth (none if it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, &mut found);
    found
}

// ---------------------------------------------------------------------------
// 1. A PATCH cut by its client.

both_backends!(a_cut_patch_keeps_what_was_durable);
/// One PATCH of a 20 MiB upload whose body fails after 7 MiB: `HEAD` then
/// reports some of those 7 MiB kept (more than 0, no more than 7 MiB), the
/// rest sent from there in one PATCH completes the upload, and the file
/// has the original's SHA-256.
async fn a_cut_patch_keeps_what_was_durable(kind: BackendKind) {
    const SIZE: usize = 20 * MIB;
    const CUT: usize = 7 * MIB;
    let backend = Backend::start(kind, "tus-cut-patch").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);
        let content = Bytes::from(random_bytes(SIZE));
        let path = "resume/cut.bin";
        let url = tus.created(SIZE, path).await;

        let sent = Arc::new(AtomicUsize::new(0));
        let cut = tus
            .patch(&url, 0)
            .header(header::CONTENT_LENGTH, SIZE.to_string())
            .body(paced_body(
                content.clone(),
                512 * KIB,
                Duration::from_millis(10),
                Some(CUT),
                sent.clone(),
            ))
            .send()
            .await;
        match &cut {
            Ok(answer) => assert!(
                !answer.status().is_success(),
                "a PATCH cut at {CUT} of {SIZE} was answered {}",
                answer.status()
            ),
            Err(error) => eprintln!("the cut PATCH failed as meant: {error}"),
        }
        let sent = sent.load(Ordering::SeqCst);
        assert_eq!(sent, CUT, "the body handed over before the cut");

        let kept = tus.settled_offset(&url).await;
        eprintln!("a PATCH cut after {CUT} bytes of {SIZE}: the server kept {kept}");
        assert!(
            kept > 0 && kept <= CUT,
            "the server's offset {kept} after a PATCH cut at {CUT}"
        );
        let head = tus.head(&url).await;
        assert_eq!(header_usize(head.headers(), "upload-length"), SIZE);
        assert_eq!(
            tus.file(path).await.status(),
            StatusCode::NOT_FOUND,
            "a file visible before its last byte"
        );

        tus.finish(&url, kept, &content).await;
        assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        tus.assert_stored(path, &content).await;
        server.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 2. A gateway killed in the middle of a PATCH.

both_backends!(a_gateway_killed_mid_patch_keeps_what_was_durable);
/// A gateway process receives a 20 MiB PATCH at 1 MiB every 100 ms and is
/// killed with SIGKILL once the server reports a checkpoint (or 16 MiB
/// went); restarted on the
/// same data directory, database and blob store, it reports some of them
/// kept (more than 0, no more than was sent), the rest from there
/// completes the upload with the right SHA-256, and nothing of the upload
/// is left: no upload in progress, and (local backend) no file under
/// `<data>/blobs/uploads/`.
async fn a_gateway_killed_mid_patch_keeps_what_was_durable(kind: BackendKind) {
    const SIZE: usize = 20 * MIB;
    const KILL_AFTER: usize = 16 * MIB;
    let backend = Backend::start(kind, "tus-killed").await;
    within(CASE_LIMIT, async {
        let scratch = tempfile::tempdir().unwrap();
        let data_dir = scratch.path().join("data");
        let mut gateway =
            GatewayProcess::start(&backend, &data_dir, &scratch.path().join("gateway.log")).await;
        let tus = Tus::new(gateway.addr);
        let content = Bytes::from(random_bytes(SIZE));
        let path = "resume/killed.bin";
        let url = tus.created(SIZE, path).await;

        let sent = Arc::new(AtomicUsize::new(0));
        let patch = tus
            .patch(&url, 0)
            .header(header::CONTENT_LENGTH, SIZE.to_string())
            .body(paced_body(
                content.clone(),
                MIB,
                Duration::from_millis(250),
                None,
                sent.clone(),
            ));
        let patch = tokio::spawn(async move { patch.send().await.map(|answer| answer.status()) });
        // Killed mid-PATCH once the server says it keeps something (a
        // checkpoint: at least every 4 MiB), or once KILL_AFTER bytes went.
        let deadline = Instant::now() + Duration::from_secs(20);
        while sent.load(Ordering::SeqCst) < KILL_AFTER && tus.offset(&url).await == 0 {
            assert!(Instant::now() < deadline, "the PATCH made no progress");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gateway.kill().await;
        // All the server could have had: what was handed over until it died.
        let sent_by_kill = sent.load(Ordering::SeqCst);
        let answer = tokio::time::timeout(Duration::from_secs(10), patch)
            .await
            .expect("the PATCH still hangs 10 s after the kill")
            .unwrap();
        match answer {
            Ok(status) => assert_ne!(
                status,
                StatusCode::NO_CONTENT,
                "the PATCH completed before the kill; the test's timing is off"
            ),
            Err(error) => eprintln!("the PATCH failed with the gateway: {error}"),
        }

        gateway.restart(&backend).await;
        let kept = tus.offset(&url).await;
        eprintln!(
            "a gateway killed after {sent_by_kill} bytes of a {SIZE}-byte PATCH had been sent: \
             it kept {kept}"
        );
        assert!(
            kept > 0,
            "nothing kept across the kill; the gateway's log:\n{}",
            std::fs::read_to_string(&gateway.log).unwrap_or_default()
        );
        assert!(
            kept <= sent_by_kill,
            "offset {kept} but {sent_by_kill} bytes sent"
        );
        assert_eq!(
            tus.file(path).await.status(),
            StatusCode::NOT_FOUND,
            "a file visible before its last byte"
        );

        tus.finish(&url, kept, &content).await;
        assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        tus.assert_stored(path, &content).await;
        assert_eq!(tus.uploads_in_progress().await, 0.0);
        if backend.is_local() {
            // The upload's files go when it completes.
            let uploads = data_dir.join("blobs/uploads");
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                let left = files_under(&uploads);
                if left.is_empty() {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "files left under {} 5 s after the upload completed: {left:?}",
                    uploads.display()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        gateway.kill().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 3. tus-js-client with its default chunk size.

/// What a client script printed (one JSON object), and how it ended.
#[derive(Debug)]
struct Report {
    success: bool,
    json: Value,
    stderr: String,
}

impl Report {
    fn of(what: &str, output: Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{what} printed no report ({e}; {}):\n{stdout}\n{stderr}",
                output.status
            )
        });
        Self {
            success: output.status.success(),
            json,
            stderr,
        }
    }

    fn u64(&self, key: &str) -> u64 {
        self.json[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key} in {}", self.json))
    }

    fn url(&self) -> String {
        self.json["url"].as_str().unwrap().to_owned()
    }

    /// Panics with everything known unless the run succeeded.
    fn assert_success(&self, what: &str) {
        assert!(
            self.success,
            "{what} failed: {}\n{}",
            self.json, self.stderr
        );
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tus")
        .join(name)
}

/// Node's `node_modules` with tus-js-client.
fn node_modules() -> PathBuf {
    let modules = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join(".tools/node/node_modules");
    assert!(
        modules.join("tus-js-client/package.json").is_file(),
        "no tus-js-client in {}: run scripts/install-test-deps.sh",
        modules.display()
    );
    modules
}

/// Runs `command` to its end off the runtime's threads, killing it (by
/// its PID) after `limit`.
async fn run_bounded(mut command: Command, limit: Duration) -> Output {
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + limit;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() >= deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// One run of `tests/tus/tus_js_upload.cjs`, its PATCH bodies paced to
/// `pace` bytes a second if given.
async fn tus_js(args: &[String], pace: Option<usize>) -> Report {
    let node = testsupport::find_tool("node").unwrap();
    let mut command = Command::new(node);
    command
        .arg(script("tus_js_upload.cjs"))
        .args(args)
        .env("NODE_PATH", node_modules());
    match pace {
        Some(rate) => command.env("TUS_JS_PACE", rate.to_string()),
        None => command.env_remove("TUS_JS_PACE"),
    };
    Report::of(
        "tus-js-client",
        run_bounded(command, Duration::from_secs(40)).await,
    )
}

both_backends!(tus_js_client_with_its_default_chunk_size_resumes_without_resending_what_was_kept);
/// tus-js-client under Node uploads 24 MiB with no chunkSize (its default,
/// unlimited: one PATCH), paced to 8 MiB/s, and aborts at a random point
/// between 6 and 18 MiB; a new Upload finds it (findPreviousUploads) and
/// resumes it (resumeFromPreviousUpload). The resume starts past 0, at the
/// server's offset, and what was sent twice is no more than what was in
/// flight at the abort (sent but not kept); the file has the right SHA-256.
async fn tus_js_client_with_its_default_chunk_size_resumes_without_resending_what_was_kept(
    kind: BackendKind,
) {
    const SIZE: usize = 24 * MIB;
    const PACE: usize = 8 * MIB;
    let backend = Backend::start(kind, "tus-js-default").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);
        let scratch = tempfile::tempdir().unwrap();
        let content = random_bytes(SIZE);
        let file = scratch.path().join("js.bin");
        std::fs::write(&file, &content).unwrap();
        let storage = scratch.path().join("tus-urls.json");
        let abort_at = rand::rng().random_range(6 * MIB..18 * MIB);
        eprintln!("abort once {abort_at} bytes are out");
        let args = |mode: &str| -> Vec<String> {
            vec![
                mode.to_owned(),
                tus.endpoint(),
                file.display().to_string(),
                storage.display().to_string(),
                "default".to_owned(),
                abort_at.to_string(),
            ]
        };

        let first = tus_js(&args("start"), Some(PACE)).await;
        first.assert_success("tus-js-client's first upload");
        assert!(
            first.json["aborted"].is_u64(),
            "the upload ended before the abort; the test's timing is off: {}",
            first.json
        );
        let aborted = first.u64("aborted") as usize;
        assert!(
            aborted >= abort_at && aborted < SIZE,
            "aborted at {aborted}"
        );
        let patches = first.json["patch_offsets"].as_array().unwrap();
        assert_eq!(
            patches.len(),
            1,
            "one PATCH without a chunkSize: {patches:?}"
        );
        // What left the client in the first run.
        let first_out = (first.u64("sent") as usize).max(aborted);
        let url = first.url();
        let kept = tus.settled_offset(&url).await;
        assert!(
            kept <= first_out,
            "the server's offset {kept}, but {first_out} bytes sent"
        );

        let second = tus_js(&args("resume"), None).await;
        second.assert_success("tus-js-client's resumed upload");
        assert!(second.u64("previous") >= 1);
        assert_eq!(second.url(), url, "it resumed the same upload");
        let offsets = second.json["patch_offsets"].as_array().unwrap();
        let start = offsets.first().and_then(Value::as_u64).unwrap() as usize;
        assert!(start > 0, "the resumed upload started at 0: nothing kept");
        assert_eq!(start, kept, "it resumed from the server's offset");
        let second_out = second.u64("sent") as usize;
        let resent = (first_out + second_out).saturating_sub(SIZE);
        let in_flight = first_out - start;
        eprintln!(
            "tus-js-client aborted at {aborted} ({first_out} out), the server kept {kept}, \
             the resume started at {start} with {} PATCHes and sent {second_out}: \
             {resent} bytes sent twice, {in_flight} were in flight",
            offsets.len()
        );
        assert!(
            resent <= in_flight,
            "{resent} bytes sent twice, more than the {in_flight} in flight at the abort"
        );
        assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        tus.assert_stored("js.bin", &content).await;
        server.stop().await;
    })
    .await;
}

both_backends!(tus_js_client_parallel_uploads_are_joined_into_one_file);
/// tus-js-client with `parallelUploads: 4` (tus's `concatenation`) sends a
/// 24 MiB file as four partial uploads side by side, then the final one
/// that joins them: the file has the right SHA-256, and no upload is left
/// (the partial uploads went with the join).
async fn tus_js_client_parallel_uploads_are_joined_into_one_file(kind: BackendKind) {
    const SIZE: usize = 24 * MIB;
    let backend = Backend::start(kind, "tus-js-parallel").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);
        let scratch = tempfile::tempdir().unwrap();
        let content = random_bytes(SIZE);
        let file = scratch.path().join("js.bin");
        std::fs::write(&file, &content).unwrap();
        let storage = scratch.path().join("tus-urls.json");
        let node = testsupport::find_tool("node").unwrap();
        let mut command = Command::new(node);
        command
            .arg(script("tus_js_upload.cjs"))
            .args([
                "start".to_owned(),
                tus.endpoint(),
                file.display().to_string(),
                storage.display().to_string(),
                "default".to_owned(),
                // Never: the upload runs to its end.
                (SIZE + 1).to_string(),
            ])
            .env("NODE_PATH", node_modules())
            .env("TUS_JS_PARALLEL", "4")
            .env_remove("TUS_JS_PACE");
        let report = Report::of(
            "tus-js-client",
            run_bounded(command, Duration::from_secs(40)).await,
        );
        report.assert_success("tus-js-client's parallel upload");
        let offsets = report.json["patch_offsets"].as_array().unwrap();
        assert!(offsets.len() >= 4, "four partial uploads: {}", report.json);
        tus.assert_stored("js.bin", &content).await;
        assert_eq!(tus.uploads_in_progress().await, 0.0);
        server.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 4. PATCHes racing from one offset.

/// How a PATCH ended: its status and `Upload-Offset`, or how it failed.
#[derive(Debug)]
enum Outcome {
    Answered(StatusCode, Option<usize>),
    Failed(String),
}

/// Sends each of `bodies` at once as a PATCH at offset 0 of `url`, paced
/// at 2 MiB every 50 ms; how each ended.
async fn race(tus: &Tus, url: &str, bodies: [&Bytes; 2]) -> Vec<Outcome> {
    let patches = bodies.map(|body| {
        let request = tus
            .patch(url, 0)
            .header(header::CONTENT_LENGTH, body.len().to_string())
            .body(paced_body(
                body.clone(),
                2 * MIB,
                Duration::from_millis(50),
                None,
                Arc::new(AtomicUsize::new(0)),
            ));
        async move {
            match request.send().await {
                Ok(answer) => {
                    let offset = header_str(answer.headers(), "upload-offset")
                        .and_then(|offset| offset.parse().ok());
                    Outcome::Answered(answer.status(), offset)
                }
                Err(error) => Outcome::Failed(error.to_string()),
            }
        }
    });
    futures_util::future::join_all(patches).await
}

/// Asserts no two of `outcomes` landed, the one that did (a 204) at
/// `size`, and every other refused (`409`, `423`), cut off, or, once the
/// one that landed had completed the upload, not found; the index of the
/// one that landed.
fn at_most_one_landed(outcomes: &[Outcome], size: usize) -> Option<usize> {
    let landed: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, outcome)| matches!(outcome, Outcome::Answered(StatusCode::NO_CONTENT, _)))
        .map(|(index, _)| index)
        .collect();
    assert!(landed.len() <= 1, "both PATCHes landed: {outcomes:?}");
    let winner = landed.first().copied();
    for (index, outcome) in outcomes.iter().enumerate() {
        if Some(index) == winner {
            assert!(
                matches!(outcome, Outcome::Answered(_, Some(offset)) if *offset == size),
                "the PATCH that landed did not complete the upload: {outcomes:?}"
            );
            continue;
        }
        match outcome {
            Outcome::Answered(StatusCode::CONFLICT | StatusCode::LOCKED, _) => {}
            Outcome::Failed(why) => eprintln!("PATCH {index} of the race was cut off: {why}"),
            // It came after the other had completed the upload, which is gone.
            Outcome::Answered(StatusCode::NOT_FOUND | StatusCode::GONE, _) if winner.is_some() => {}
            other => panic!("PATCH {index} of the race: {other:?}; all: {outcomes:?}"),
        }
    }
    winner
}

both_backends!(racing_patches_from_one_offset_never_both_land);
/// Two PATCHes of the same 16 MiB sent at once from offset 0, slowly: at
/// most one lands (204, at 16 MiB), the other is refused (409 or 423) or
/// cut off; whatever is left is finished from `HEAD`'s offset and the file
/// has the right SHA-256. Then two bodies alike in their first half only:
/// what is stored is one body's bytes, never a mix. Last, a PATCH at an
/// offset another PATCH has moved past is a 409 and changes nothing.
async fn racing_patches_from_one_offset_never_both_land(kind: BackendKind) {
    const SIZE: usize = 16 * MIB;
    const HALF: usize = SIZE / 2;
    let backend = Backend::start(kind, "tus-race").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);

        // The same bytes twice.
        let same = Bytes::from(random_bytes(SIZE));
        let path = "race/same.bin";
        let url = tus.created(SIZE, path).await;
        let outcomes = race(&tus, &url, [&same, &same]).await;
        eprintln!("the same body twice: {outcomes:?}");
        let winner = at_most_one_landed(&outcomes, SIZE);
        match tus.settled(&url, false).await {
            None => assert!(winner.is_some(), "the upload is gone, yet no PATCH landed"),
            Some(kept) => {
                assert!(winner.is_none(), "a PATCH landed, yet the upload is there");
                eprintln!("no PATCH landed; the server kept {kept}, finishing from there");
                tus.finish(&url, kept, &same).await;
            }
        }
        tus.assert_stored(path, &same).await;

        // Bodies alike in their first half only.
        let mut a = random_bytes(HALF);
        let mut b = a.clone();
        a.extend_from_slice(&random_bytes(SIZE - HALF));
        b.extend_from_slice(&random_bytes(SIZE - HALF));
        let (a, b) = (Bytes::from(a), Bytes::from(b));
        let path = "race/different.bin";
        let url = tus.created(SIZE, path).await;
        let outcomes = race(&tus, &url, [&a, &b]).await;
        eprintln!("bodies alike in their first half: {outcomes:?}");
        let winner = at_most_one_landed(&outcomes, SIZE);
        if let Some(kept) = tus.settled(&url, false).await {
            assert!(winner.is_none(), "a PATCH landed, yet the upload is there");
            eprintln!(
                "no PATCH landed; the server kept {kept}, finishing from there with the first body"
            );
            tus.finish(&url, kept, &a).await;
            let stored = tus.stored(path).await;
            assert_eq!(stored.len(), SIZE);
            assert!(stored[..HALF] == a[..HALF], "the first half, alike in both");
            assert!(
                stored[..kept] == a[..kept] || stored[..kept] == b[..kept],
                "the {kept} bytes kept are neither body's"
            );
            assert!(stored[kept..] == a[kept..], "the rest sent from {kept}");
        } else {
            let winner = winner.expect("the upload is gone, yet no PATCH landed");
            let expected = if winner == 0 { &a } else { &b };
            tus.assert_stored(path, expected).await;
        }

        // A PATCH at an offset another has moved past.
        let content = random_bytes(2 * MIB);
        let path = "race/stale.bin";
        let url = tus.created(content.len(), path).await;
        let answer = tus
            .patch(&url, 0)
            .body(content[..MIB].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT, "the first PATCH");
        assert_eq!(header_usize(answer.headers(), "upload-offset"), MIB);
        let stale = tus
            .patch(&url, 0)
            .body(random_bytes(MIB))
            .send()
            .await
            .unwrap();
        assert_eq!(
            stale.status(),
            StatusCode::CONFLICT,
            "a PATCH at a stale offset"
        );
        assert_eq!(
            tus.offset(&url).await,
            MIB,
            "the stale PATCH changed the offset"
        );
        tus.finish(&url, MIB, &content).await;
        tus.assert_stored(path, &content).await;
        server.stop().await;
    })
    .await;
}
