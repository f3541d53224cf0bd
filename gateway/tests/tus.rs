//! Resumable uploads over tus 1.0.0 at `/uploads/` (issue 23), driven by
//! real clients: tuspy (PyPI) and tus-js-client (npm, under Node), through
//! the helper scripts in `tests/tus/`, and by hand with reqwest for the
//! protocol's corners.
//!
//! An upload cut at a random offset resumes from the server's offset and
//! stores the same SHA-256; so does one whose gateway was killed with
//! SIGKILL in the middle and restarted on the same data directory;
//! termination and expiration free the parts under
//! `<data>/blobs/uploads/<id>/`.
//!
//! Needs tuspy in `.tools/venv` and tus-js-client in `.tools/node` with
//! Node on PATH: `scripts/install-test-deps.sh` installs them.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use common::backends::{Backend, GatewayProcess};
use common::clients::{Report, python_with, tus_js_command, tus_script};
use common::tus::{OFFSET_STREAM, TUS_VERSION, Tus, header_str, header_usize, upload_metadata};
use common::{TestServer, files_under, random_bytes, sha256_hex, uploads_in_progress};
use gateway::config::ByteSize;
use rand::Rng;
use reqwest::header::{self, HeaderMap};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde_json::Value;
use sha1::Sha1;
use sha2::{Digest, Sha256};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

// ---------------------------------------------------------------------------
// The clients.

/// One run of `tests/tus/tuspy_upload.py`.
#[derive(Debug, Clone)]
struct Tuspy {
    endpoint: String,
    file: PathBuf,
    url_file: PathBuf,
    chunk: usize,
    path: String,
    chunks: Option<usize>,
    cut: Option<usize>,
    checksum: bool,
    pace: f64,
    progress: Option<PathBuf>,
    headers: Vec<String>,
}

impl Tuspy {
    fn new(endpoint: String, file: &Path, url_file: &Path, chunk: usize, path: &str) -> Self {
        Self {
            endpoint,
            file: file.to_owned(),
            url_file: url_file.to_owned(),
            chunk,
            path: path.to_owned(),
            chunks: None,
            cut: None,
            checksum: false,
            pace: 0.0,
            progress: None,
            headers: Vec::new(),
        }
    }

    fn command(&self) -> Command {
        // The virtualenv's Python, which has tuspy.
        let mut command = Command::new(python_with("tusclient", "tuspy"));
        command
            .arg(tus_script("tuspy_upload.py"))
            .arg(&self.endpoint)
            .arg("--file")
            .arg(&self.file)
            .arg("--url-file")
            .arg(&self.url_file)
            .args(["--chunk-size", &self.chunk.to_string()])
            .args(["--path", &self.path])
            .args(["--pace", &self.pace.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(chunks) = self.chunks {
            command.args(["--chunks", &chunks.to_string()]);
        }
        if let Some(cut) = self.cut {
            command.args(["--cut", &cut.to_string()]);
        }
        if self.checksum {
            command.arg("--checksum");
        }
        if let Some(progress) = &self.progress {
            command.arg("--progress").arg(progress);
        }
        for header in &self.headers {
            command.args(["--header", header]);
        }
        command
    }

    /// Runs it to its end: whether it succeeded, and its report.
    async fn run(&self) -> Report {
        let mut command = self.command();
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .unwrap();
        Report::of("tuspy", output)
    }
}

/// One run of `tests/tus/tus_js_upload.cjs` (a [`tus_js_command`]) to its
/// end.
async fn tus_js(mut command: Command) -> Report {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    Report::of("tus-js-client", output)
}

// ---------------------------------------------------------------------------
// The protocol by hand.

/// This file's requests (see [`common::tus`]).
impl Tus {
    /// `POST /uploads/` declaring `length` (or deferring it) with `metadata`.
    fn create(&self, length: Option<usize>, metadata: &[(&str, &str)]) -> RequestBuilder {
        let request = self
            .request(Method::POST, &self.endpoint())
            .header("Upload-Metadata", upload_metadata(metadata));
        match length {
            Some(length) => request.header("Upload-Length", length.to_string()),
            None => request.header("Upload-Defer-Length", "1"),
        }
    }

    /// Creates an upload and returns its absolute URL.
    async fn created(&self, length: Option<usize>, metadata: &[(&str, &str)]) -> String {
        let answer = self.create(length, metadata).send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::CREATED, "POST {metadata:?}");
        self.location(&answer)
    }

    fn patch(&self, url: &str, offset: usize, body: &[u8]) -> RequestBuilder {
        self.request(Method::PATCH, url)
            .header("Upload-Offset", offset.to_string())
            .header(header::CONTENT_TYPE, OFFSET_STREAM)
            .body(body.to_vec())
    }

    /// PATCHes `body` from `offset` in one request; asserts the 204 and
    /// its new offset.
    async fn send(&self, url: &str, offset: usize, body: &[u8]) {
        let answer = self.patch(url, offset, body).send().await.unwrap();
        assert_eq!(
            answer.status(),
            StatusCode::NO_CONTENT,
            "PATCH {url} at {offset}: {}",
            answer.text().await.unwrap_or_default()
        );
        assert_eq!(
            header_usize(answer.headers(), "upload-offset"),
            offset + body.len(),
            "the offset after PATCH {url} of {} bytes at {offset}: {:?}",
            body.len(),
            answer.headers()
        );
    }

    /// Asserts `path` is stored with exactly `content`: the body and the
    /// ETag (its SHA-256).
    async fn assert_stored(&self, path: &str, content: &[u8]) {
        let expected = sha256_hex(content);
        let answer = self.file(path).await;
        assert_eq!(answer.status(), StatusCode::OK, "GET /files/{path}");
        assert_eq!(
            header_str(answer.headers(), "etag"),
            Some(format!("\"{expected}\"").as_str()),
            "the ETag of {path}"
        );
        let body = answer.bytes().await.unwrap();
        assert_eq!(body.len(), content.len(), "the length of {path}");
        assert_eq!(sha256_hex(&body), expected, "the SHA-256 of {path}");
    }
}

/// `Upload-Expires` (an HTTP date), asserted to be there and parse.
fn upload_expires(headers: &HeaderMap) -> SystemTime {
    let value = header_str(headers, "upload-expires")
        .unwrap_or_else(|| panic!("no Upload-Expires in {headers:?}"));
    httpdate::parse_http_date(value).unwrap_or_else(|e| panic!("Upload-Expires {value}: {e}"))
}

fn checksum(algorithm: &str, body: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let digest = match algorithm {
        "sha1" => b64.encode(Sha1::digest(body)),
        "sha256" => b64.encode(Sha256::digest(body)),
        other => unreachable!("{other}"),
    };
    format!("{algorithm} {digest}")
}

/// The id of an upload: its URL's last segment.
fn upload_id(url: &str) -> String {
    url.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned()
}

/// The part files of upload `id` under `<data>/blobs/uploads/<id>/`.
fn part_files(data_dir: &Path, id: &str) -> Vec<PathBuf> {
    files_under(&data_dir.join("blobs/uploads").join(id))
}

fn part_bytes(parts: &[PathBuf]) -> u64 {
    parts
        .iter()
        .map(|part| std::fs::metadata(part).map_or(0, |m| m.len()))
        .sum()
}

/// A file of `size` random bytes in `dir`; its content.
fn random_file(dir: &Path, name: &str, size: usize) -> (PathBuf, Vec<u8>) {
    let content = random_bytes(size);
    let path = dir.join(name);
    std::fs::write(&path, &content).unwrap();
    (path, content)
}

// ---------------------------------------------------------------------------
// tuspy.

/// The first case: tuspy uploads 50 MiB in 4 MiB chunks, stops
/// after a random number of them and cuts the next PATCH at a random byte
/// (closes the connection). A second tuspy run with the stored URL resumes
/// from the server's offset, re-sending at most that one chunk, and the
/// stored file has the local file's SHA-256. Every PATCH carries a sha1
/// `Upload-Checksum`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tuspy_resumes_a_cut_upload_from_the_servers_offset() {
    const SIZE: usize = 50 * MIB;
    const CHUNK: usize = 4 * MIB;
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let scratch = tempfile::tempdir().unwrap();
    let (file, content) = random_file(scratch.path(), "video.bin", SIZE);
    let url_file = scratch.path().join("url");

    let chunks = SIZE.div_ceil(CHUNK);
    let done = rand::rng().random_range(1..chunks);
    let next = CHUNK.min(SIZE - done * CHUNK);
    let cut = rand::rng().random_range(1..next);
    println!("cut after {done} chunks and {cut} bytes of the next one");

    let started = Instant::now();
    let mut first = Tuspy::new(tus.endpoint(), &file, &url_file, CHUNK, "videos/cut.bin");
    first.chunks = Some(done);
    first.cut = Some(cut);
    first.checksum = true;
    let first = first.run().await;
    first.assert_success("the first tuspy run");
    assert_eq!(first.json["created"], true);
    assert_eq!(first.u64("acknowledged") as usize, done * CHUNK);
    let sent = first.u64("sent") as usize;
    assert_eq!(sent, done * CHUNK + cut);
    let url = first.url();
    assert_eq!(std::fs::read_to_string(&url_file).unwrap().trim(), url);

    // What the server kept: every answered PATCH, and of the cut one at
    // most what arrived.
    let head = tus.head(&url).await;
    assert_eq!(head.status(), StatusCode::OK);
    let kept = header_usize(head.headers(), "upload-offset");
    assert!(
        (done * CHUNK..=sent).contains(&kept),
        "the server's offset {kept} after {done} chunks answered and {sent} bytes sent"
    );
    assert_eq!(header_usize(head.headers(), "upload-length"), SIZE);
    assert_eq!(
        header_str(head.headers(), "cache-control"),
        Some("no-store")
    );
    assert_eq!(
        header_str(head.headers(), "tus-resumable"),
        Some(TUS_VERSION)
    );
    upload_expires(head.headers());
    // Nothing at the path until the last byte is in.
    assert_eq!(
        tus.file("videos/cut.bin").await.status(),
        StatusCode::NOT_FOUND
    );

    let mut second = Tuspy::new(tus.endpoint(), &file, &url_file, CHUNK, "videos/cut.bin");
    second.checksum = true;
    let second = second.run().await;
    second.assert_success("the resuming tuspy run");
    assert_eq!(second.json["created"], false, "it resumed: {}", second.json);
    assert_eq!(second.url(), url);
    let start = second.u64("start_offset") as usize;
    assert!(start > 0, "the second run started at 0");
    assert_eq!(start, kept, "it resumed from the server's offset");
    let resent = sent - start;
    assert!(
        resent <= CHUNK,
        "{resent} bytes sent twice, more than a chunk of {CHUNK}"
    );
    assert_eq!(second.u64("acknowledged") as usize, SIZE);
    assert_eq!(second.u64("sent") as usize, SIZE - start);
    println!(
        "resumed at {start} of {SIZE} ({resent} bytes re-sent); both runs took {:?}",
        started.elapsed()
    );

    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
    tus.assert_stored("videos/cut.bin", &content).await;
    server.stop().await;
}

/// The second case: the gateway (a process of its own) is killed with
/// SIGKILL while tuspy is sending, most likely in the middle of a PATCH,
/// and restarted on the same data directory. The upload resumes from the
/// last offset the server answered (nothing of a PATCH cut mid-body is
/// kept), nothing is visible at the path before, and the stored file has
/// the local file's SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tuspy_resumes_after_the_gateway_is_killed_and_restarted() {
    const SIZE: usize = 50 * MIB;
    const CHUNK: usize = 4 * MIB;
    // Seconds a MiB of PATCH body takes: a 4 MiB chunk in about 0.4 s.
    const PACE: f64 = 0.1;
    let scratch = tempfile::tempdir().unwrap();
    let data_dir = scratch.path().join("data");
    let backend = Backend::local();
    let mut gateway = GatewayProcess::new(&data_dir, &scratch.path().join("log"))
        .start_limit(Duration::from_secs(120))
        .started(&backend)
        .await;
    let tus = Tus::new(gateway.addr);
    let (file, content) = random_file(scratch.path(), "video.bin", SIZE);
    let url_file = scratch.path().join("url");
    let progress = scratch.path().join("progress");

    let after = rand::rng().random_range(1..=9);
    let wait = Duration::from_millis(rand::rng().random_range(0..400));
    println!("SIGKILL {wait:?} after chunk {after}");

    let started = Instant::now();
    let mut first = Tuspy::new(tus.endpoint(), &file, &url_file, CHUNK, "videos/killed.bin");
    first.pace = PACE;
    first.progress = Some(progress.clone());
    let mut command = first.command();
    let child = command.spawn().unwrap();
    let answered = |progress: &Path| -> Vec<usize> {
        std::fs::read_to_string(progress)
            .unwrap_or_default()
            .lines()
            .map(|line| line.parse().unwrap())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while answered(&progress).len() < after {
        assert!(Instant::now() < deadline, "tuspy made no progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(wait).await;
    gateway.kill().await;
    let killed_at = started.elapsed();
    let first = Report::of(
        "tuspy",
        tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap(),
    );
    assert!(
        !first.success,
        "tuspy finished before the kill; the test's timing is off: {}",
        first.json
    );
    let acknowledged = answered(&progress).last().copied().unwrap();
    let sent = first.u64("sent") as usize;
    let url = std::fs::read_to_string(&url_file)
        .unwrap()
        .trim()
        .to_owned();
    println!(
        "killed at {killed_at:?}: {acknowledged} bytes answered, {sent} sent; tuspy: {}",
        first.json["error"]
    );

    gateway.restart(&backend).await;
    let kept = tus.offset(&url).await;
    assert!(kept > 0, "nothing kept across the restart");
    assert!(
        kept >= acknowledged,
        "the server lost answered bytes: offset {kept} after {acknowledged} were answered"
    );
    assert!(kept <= sent, "offset {kept} but {sent} bytes sent");
    assert_eq!(
        kept % CHUNK,
        0,
        "offset {kept}: part of a PATCH cut by the kill was kept"
    );
    assert_eq!(
        tus.file("videos/killed.bin").await.status(),
        StatusCode::NOT_FOUND,
        "a file visible before its last byte"
    );

    let second = Tuspy::new(tus.endpoint(), &file, &url_file, CHUNK, "videos/killed.bin")
        .run()
        .await;
    second.assert_success("the resuming tuspy run");
    assert_eq!(second.json["created"], false, "it resumed: {}", second.json);
    let start = second.u64("start_offset") as usize;
    assert_eq!(start, kept, "it resumed from the server's offset");
    let resent = sent - start;
    assert!(
        resent <= CHUNK,
        "{resent} bytes sent twice, more than a chunk of {CHUNK}"
    );
    println!(
        "resumed at {start} of {SIZE} ({resent} bytes re-sent); all took {:?}",
        started.elapsed()
    );
    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
    tus.assert_stored("videos/killed.bin", &content).await;
    gateway.kill().await;
}

/// Termination: tuspy sends half an upload; a DELETE frees it: HEAD is a
/// 404, the part files are gone, the metric is back to 0, nothing stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_upload_is_gone_with_its_parts() {
    const SIZE: usize = 8 * MIB;
    const CHUNK: usize = MIB;
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let scratch = tempfile::tempdir().unwrap();
    let (file, _) = random_file(scratch.path(), "half.bin", SIZE);
    let url_file = scratch.path().join("url");
    let mut half = Tuspy::new(tus.endpoint(), &file, &url_file, CHUNK, "half.bin");
    half.chunks = Some(SIZE / CHUNK / 2);
    let half = half.run().await;
    half.assert_success("tuspy");
    let url = half.url();
    let id = upload_id(&url);
    assert_eq!(tus.offset(&url).await, SIZE / 2);
    let parts = part_files(&server.data_dir, &id);
    assert!(
        !parts.is_empty(),
        "no part files under blobs/uploads/{id}/ in {}",
        server.data_dir.display()
    );
    let bytes = part_bytes(&parts);
    assert!(
        bytes >= (SIZE / 2) as u64,
        "{bytes} bytes in the parts of {} sent",
        SIZE / 2
    );
    assert_eq!(uploads_in_progress(server.addr).await, 1.0);

    let deleted = tus.request(Method::DELETE, &url).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        header_str(deleted.headers(), "tus-resumable"),
        Some(TUS_VERSION)
    );
    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
    let left = part_files(&server.data_dir, &id);
    assert!(left.is_empty(), "parts left after DELETE: {left:?}");
    assert_eq!(uploads_in_progress(server.addr).await, 0.0);
    let late = tus
        .patch(&url, SIZE / 2, &[0; 1024])
        .send()
        .await
        .unwrap()
        .status();
    assert!(
        late == StatusCode::NOT_FOUND || late == StatusCode::GONE,
        "PATCH after DELETE: {late}"
    );
    assert_eq!(tus.file("half.bin").await.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

/// Expiration: with `upload_expiry` 1 s and `gc_interval` 300 ms, an
/// upload left alone is gone within 3 s: HEAD is a 404, its part files are
/// freed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_upload_is_collected() {
    const SIZE: usize = 4 * MIB;
    const CHUNK: usize = MIB;
    let server = TestServer::start(|config| {
        config.upload_expiry = Duration::from_secs(1);
        config.gc_interval = Duration::from_millis(300);
    })
    .await;
    let tus = Tus::new(server.addr);
    let scratch = tempfile::tempdir().unwrap();
    let (file, _) = random_file(scratch.path(), "left.bin", SIZE);
    let url_file = scratch.path().join("url");
    let mut some = Tuspy::new(tus.endpoint(), &file, &url_file, CHUNK, "left.bin");
    some.chunks = Some(2);
    let some = some.run().await;
    some.assert_success("tuspy");
    let last_patch = SystemTime::now();
    let url = some.url();
    let id = upload_id(&url);

    let head = tus.head(&url).await;
    assert_eq!(head.status(), StatusCode::OK);
    let expires = upload_expires(head.headers());
    // An HTTP date has whole seconds: allow one either side.
    let earliest = last_patch - Duration::from_secs(1);
    let latest = last_patch + Duration::from_secs(3);
    assert!(
        expires >= earliest && expires <= latest,
        "Upload-Expires {} for an expiry of 1 s after {}",
        httpdate::fmt_http_date(expires),
        httpdate::fmt_http_date(last_patch)
    );
    assert!(!part_files(&server.data_dir, &id).is_empty(), "no parts");
    assert_eq!(uploads_in_progress(server.addr).await, 1.0);

    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
    let left = part_files(&server.data_dir, &id);
    assert!(left.is_empty(), "parts left 3 s after expiry: {left:?}");
    assert_eq!(uploads_in_progress(server.addr).await, 0.0);
    let late = tus
        .patch(&url, 2 * CHUNK, &[0; 1024])
        .send()
        .await
        .unwrap()
        .status();
    assert!(
        late == StatusCode::NOT_FOUND || late == StatusCode::GONE,
        "PATCH after expiry: {late}"
    );
    server.stop().await;
}

// ---------------------------------------------------------------------------
// The protocol's corners, by hand.

/// Discovery, `Tus-Resumable`, offsets, content type and checksums on one
/// upload, which then completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_protocol_and_checksums() {
    const MAX_BODY: u64 = 1 << 30;
    let server = TestServer::start(|config| config.max_body = ByteSize(MAX_BODY)).await;
    let tus = Tus::new(server.addr);

    let options = tus
        .bare(Method::OPTIONS, &tus.endpoint())
        .send()
        .await
        .unwrap();
    assert_eq!(options.status(), StatusCode::NO_CONTENT);
    let headers = options.headers();
    assert_eq!(header_str(headers, "tus-resumable"), Some(TUS_VERSION));
    assert!(
        header_str(headers, "tus-version")
            .unwrap()
            .split(',')
            .any(|v| v.trim() == TUS_VERSION)
    );
    let extensions: Vec<&str> = header_str(headers, "tus-extension")
        .unwrap()
        .split(',')
        .map(str::trim)
        .collect();
    for extension in [
        "creation",
        "creation-with-upload",
        "creation-defer-length",
        "termination",
        "expiration",
        "checksum",
    ] {
        assert!(
            extensions.contains(&extension),
            "{extension} in {extensions:?}"
        );
    }
    assert_eq!(header_usize(headers, "tus-max-size") as u64, MAX_BODY);
    let algorithms: Vec<&str> = header_str(headers, "tus-checksum-algorithm")
        .unwrap()
        .split(',')
        .map(str::trim)
        .collect();
    assert!(algorithms.contains(&"sha1") && algorithms.contains(&"sha256"));

    // No Tus-Resumable: 412 with the versions the server speaks.
    let refused = tus
        .bare(Method::POST, &tus.endpoint())
        .header("Upload-Length", "10")
        .header("Upload-Metadata", upload_metadata(&[("path", "x.bin")]))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::PRECONDITION_FAILED);
    assert!(header_str(refused.headers(), "tus-version").is_some());
    // No path, nor filename: nowhere to store it.
    let nowhere = tus
        .create(Some(10), &[("filetype", "text/plain")])
        .send()
        .await
        .unwrap();
    assert_eq!(nowhere.status(), StatusCode::BAD_REQUEST);

    const SIZE: usize = 3 * MIB;
    let content = random_bytes(SIZE);
    let created = tus
        .create(Some(SIZE), &[("path", "corners/a.bin")])
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(
        header_str(created.headers(), "tus-resumable"),
        Some(TUS_VERSION)
    );
    let expires = upload_expires(created.headers());
    assert!(expires > SystemTime::now(), "expires in the past");
    let url = tus.location(&created);

    let head = tus.bare(Method::HEAD, &url).send().await.unwrap();
    assert_eq!(head.status(), StatusCode::PRECONDITION_FAILED, "HEAD");
    let head = tus.head(&url).await;
    assert_eq!(head.status(), StatusCode::OK);
    let headers = head.headers();
    assert_eq!(header_usize(headers, "upload-offset"), 0);
    assert_eq!(header_usize(headers, "upload-length"), SIZE);
    assert_eq!(header_str(headers, "cache-control"), Some("no-store"));
    upload_expires(headers);
    let metadata = header_str(headers, "upload-metadata").unwrap();
    assert!(
        metadata.contains(&upload_metadata(&[("path", "corners/a.bin")])),
        "Upload-Metadata {metadata}"
    );

    let chunk = |n: usize| &content[n * MIB..(n + 1) * MIB];
    let status = |answer: Response| answer.status();
    // No Tus-Resumable on a PATCH.
    let bare = tus
        .bare(Method::PATCH, &url)
        .header("Upload-Offset", "0")
        .header(header::CONTENT_TYPE, OFFSET_STREAM)
        .body(chunk(0).to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(status(bare), StatusCode::PRECONDITION_FAILED);
    // An offset that is not the server's.
    let wrong = tus.patch(&url, 1, chunk(0)).send().await.unwrap();
    assert_eq!(status(wrong), StatusCode::CONFLICT);
    // Not application/offset+octet-stream.
    let typed = tus
        .request(Method::PATCH, &url)
        .header("Upload-Offset", "0")
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(chunk(0).to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(status(typed), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(tus.offset(&url).await, 0);
    // A sha1 that is not the body's: 460, and the chunk is dropped.
    let mismatch = tus
        .patch(&url, 0, chunk(0))
        .header("Upload-Checksum", checksum("sha1", chunk(1)))
        .send()
        .await
        .unwrap();
    assert_eq!(mismatch.status().as_u16(), 460);
    assert_eq!(tus.offset(&url).await, 0, "a checksum mismatch kept bytes");
    // The right sha1, then the right sha256.
    for (n, algorithm) in [(0, "sha1"), (1, "sha256")] {
        let answer = tus
            .patch(&url, n * MIB, chunk(n))
            .header("Upload-Checksum", checksum(algorithm, chunk(n)))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT, "{algorithm}");
        assert_eq!(
            header_usize(answer.headers(), "upload-offset"),
            (n + 1) * MIB
        );
        assert_eq!(
            header_str(answer.headers(), "tus-resumable"),
            Some(TUS_VERSION)
        );
        upload_expires(answer.headers());
    }
    // A sha256 mismatch too.
    let mismatch = tus
        .patch(&url, 2 * MIB, chunk(2))
        .header("Upload-Checksum", checksum("sha256", chunk(0)))
        .send()
        .await
        .unwrap();
    assert_eq!(mismatch.status().as_u16(), 460);
    // A chunk sent again after its answer was lost: a conflict.
    let again = tus.patch(&url, MIB, chunk(1)).send().await.unwrap();
    assert_eq!(status(again), StatusCode::CONFLICT);
    assert_eq!(tus.offset(&url).await, 2 * MIB);
    assert_eq!(
        tus.file("corners/a.bin").await.status(),
        StatusCode::NOT_FOUND
    );
    // The last byte: stored when answered, and the upload is gone.
    tus.send(&url, 2 * MIB, chunk(2)).await;
    tus.assert_stored("corners/a.bin", &content).await;
    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
    let unknown = format!("{}/uploads/no-such-upload", tus.base);
    assert_eq!(tus.head(&unknown).await.status(), StatusCode::NOT_FOUND);
    let unknown_patch = tus.patch(&unknown, 0, b"x").send().await.unwrap();
    assert_eq!(unknown_patch.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

/// creation-defer-length: the length comes with a later PATCH; `filename`
/// and `folder` place the file, `filetype` is its content type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_length_is_set_by_a_patch() {
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let content = random_bytes(1536 * KIB);
    let part = |n: usize| &content[n * 512 * KIB..(n + 1) * 512 * KIB];
    let url = tus
        .created(
            None,
            &[
                ("filename", "d.txt"),
                ("folder", "deferred"),
                ("filetype", "text/plain"),
            ],
        )
        .await;
    let head = tus.head(&url).await;
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(header_str(head.headers(), "upload-defer-length"), Some("1"));
    assert!(
        head.headers().get("upload-length").is_none(),
        "{:?}",
        head.headers()
    );

    tus.send(&url, 0, part(0)).await;
    let answer = tus
        .patch(&url, 512 * KIB, part(1))
        .header("Upload-Length", content.len().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NO_CONTENT);
    assert_eq!(header_usize(answer.headers(), "upload-offset"), 1024 * KIB);
    let head = tus.head(&url).await;
    assert_eq!(header_usize(head.headers(), "upload-length"), content.len());
    assert!(head.headers().get("upload-defer-length").is_none());
    assert_eq!(
        tus.file("deferred/d.txt").await.status(),
        StatusCode::NOT_FOUND
    );

    tus.send(&url, 1024 * KIB, part(2)).await;
    tus.assert_stored("deferred/d.txt", &content).await;
    let answer = tus.file("deferred/d.txt").await;
    let content_type = header_str(answer.headers(), "content-type").unwrap();
    assert!(
        content_type.starts_with("text/plain"),
        "Content-Type {content_type}"
    );
    server.stop().await;
}

/// creation-with-upload: the POST's body is the first bytes; with only a
/// `filename` the file goes into the root. A small file sent whole in the
/// POST is stored by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creation_with_upload_takes_the_first_bytes() {
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let content = random_bytes(2 * MIB);
    let created = tus
        .create(Some(content.len()), &[("filename", "cwu.bin")])
        .header(header::CONTENT_TYPE, OFFSET_STREAM)
        .body(content[..MIB].to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(header_usize(created.headers(), "upload-offset"), MIB);
    let url = tus.location(&created);
    assert_eq!(tus.offset(&url).await, MIB);
    tus.send(&url, MIB, &content[MIB..]).await;
    tus.assert_stored("cwu.bin", &content).await;

    let small = random_bytes(100 * KIB);
    let created = tus
        .create(Some(small.len()), &[("path", "whole/small.bin")])
        .header(header::CONTENT_TYPE, OFFSET_STREAM)
        .body(small.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(
        header_usize(created.headers(), "upload-offset"),
        small.len()
    );
    tus.assert_stored("whole/small.bin", &small).await;
    server.stop().await;
}

/// `If-None-Match: *` at creation: the last PATCH gets 412 when the path
/// exists, and the old file stays; on a new path it stores as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_only_refuses_an_existing_path_at_the_last_patch() {
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let old = random_bytes(10 * KIB);
    assert_eq!(
        server.put("exists.bin", old.clone()).await.status(),
        StatusCode::CREATED
    );
    let content = random_bytes(MIB);
    // A path taken already is refused at creation, before a byte is sent.
    let refused = tus
        .create(Some(content.len()), &[("path", "exists.bin")])
        .header(header::IF_NONE_MATCH, "*")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::PRECONDITION_FAILED);
    tus.assert_stored("exists.bin", &old).await;
    // One taken while the upload is under way, at its last PATCH.
    for (path, taken_meanwhile) in [("late.bin", true), ("fresh.bin", false)] {
        let created = tus
            .create(Some(content.len()), &[("path", path)])
            .header(header::IF_NONE_MATCH, "*")
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED, "{path}");
        let url = tus.location(&created);
        tus.send(&url, 0, &content[..MIB / 2]).await;
        if taken_meanwhile {
            assert_eq!(
                server.put(path, old.clone()).await.status(),
                StatusCode::CREATED
            );
        }
        let last = tus
            .patch(&url, MIB / 2, &content[MIB / 2..])
            .send()
            .await
            .unwrap();
        if taken_meanwhile {
            assert_eq!(last.status(), StatusCode::PRECONDITION_FAILED, "{path}");
            tus.assert_stored(path, &old).await;
            // A refusal no retry can change ends the upload.
            assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        } else {
            assert_eq!(last.status(), StatusCode::NO_CONTENT, "{path}");
            tus.assert_stored(path, &content).await;
        }
    }
    server.stop().await;
}

/// The end of an upload that cannot be stored now (its path locked over
/// WebDAV: 423) leaves the upload where its last request began, so a
/// client that asks where it stands sends those bytes again rather than
/// taking an upload at its full length for a stored file; once the lock
/// is gone they store it. An empty file is stored at its creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_that_cannot_be_stored_now_is_sent_again_and_an_empty_file_needs_no_patch() {
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let content = random_bytes(MIB);
    assert_eq!(
        server
            .put("kept/locked.bin", b"old".to_vec())
            .await
            .status(),
        StatusCode::CREATED
    );
    let url = tus
        .created(Some(content.len()), &[("path", "kept/locked.bin")])
        .await;
    tus.send(&url, 0, &content[..MIB / 2]).await;
    let lock = server
        .client
        .request(
            Method::from_bytes(b"LOCK").unwrap(),
            server.url("/dav/kept/locked.bin"),
        )
        .body("<?xml version=\"1.0\"?><lockinfo xmlns=\"DAV:\"><lockscope><exclusive/></lockscope><locktype><write/></locktype><owner>me</owner></lockinfo>")
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let token = lock.headers()["lock-token"].to_str().unwrap().to_owned();

    let refused = tus
        .patch(&url, MIB / 2, &content[MIB / 2..])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::LOCKED);
    assert_eq!(tus.offset(&url).await, MIB / 2);
    tus.assert_stored("kept/locked.bin", b"old").await;

    let unlock = server
        .client
        .request(
            Method::from_bytes(b"UNLOCK").unwrap(),
            server.url("/dav/kept/locked.bin"),
        )
        .header("lock-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(unlock.status(), StatusCode::NO_CONTENT);
    tus.send(&url, MIB / 2, &content[MIB / 2..]).await;
    tus.assert_stored("kept/locked.bin", &content).await;
    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);

    let empty = tus.created(Some(0), &[("path", "empty.bin")]).await;
    tus.assert_stored("empty.bin", b"").await;
    assert_eq!(tus.head(&empty).await.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

/// Uploads belong to their user: another one gets 404 on HEAD, PATCH and
/// DELETE, and those change nothing of it; no credentials get 401 once
/// users exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_users_upload_is_not_found_and_left_alone() {
    let server = TestServer::start(|_| {}).await;
    server
        .add_user("alice", "alice's long password", false, None)
        .await;
    server
        .add_user("bob", "bob's long password", false, None)
        .await;
    let alice = Tus::with_token(server.addr, &server.create_token("alice").await);
    let bob = Tus::with_token(server.addr, &server.create_token("bob").await);
    let nobody = Tus::new(server.addr);

    let anonymous = nobody
        .create(Some(10), &[("path", "x.bin")])
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);

    let content = random_bytes(512 * KIB);
    let half = content.len() / 2;
    let url = alice
        .created(Some(content.len()), &[("path", "mine.bin")])
        .await;
    alice.send(&url, 0, &content[..half]).await;
    assert_eq!(bob.head(&url).await.status(), StatusCode::NOT_FOUND);
    let patched = bob
        .patch(&url, half, &content[half..])
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::NOT_FOUND);
    let deleted = bob.request(Method::DELETE, &url).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NOT_FOUND);
    assert_eq!(nobody.head(&url).await.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(alice.offset(&url).await, half);

    // Bob's refused requests must not have touched a byte of it.
    alice.send(&url, half, &content[half..]).await;
    alice.assert_stored("mine.bin", &content).await;
    assert_eq!(bob.file("mine.bin").await.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

/// A declared `Upload-Length` over the quota, or over what is left of it,
/// is refused at creation with 413; one that fits is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_length_over_the_quota_is_refused_at_creation() {
    const QUOTA: u64 = 4 * MIB as u64;
    let server = TestServer::start(|_| {}).await;
    server
        .add_user("alice", "alice's long password", false, Some(QUOTA))
        .await;
    let alice = Tus::with_token(server.addr, &server.create_token("alice").await);

    let over = alice
        .create(Some(QUOTA as usize + 1), &[("path", "big.bin")])
        .send()
        .await
        .unwrap();
    assert_eq!(
        over.status(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "over the quota"
    );
    let stored = alice
        .bare(Method::PUT, &format!("{}/files/three.bin", alice.base))
        .body(random_bytes(3 * MIB))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), StatusCode::CREATED);
    let over = alice
        .create(Some(2 * MIB), &[("path", "two.bin")])
        .send()
        .await
        .unwrap();
    assert_eq!(
        over.status(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "over what is left"
    );
    let content = random_bytes(MIB / 2);
    let url = alice
        .created(Some(content.len()), &[("path", "fits.bin")])
        .await;
    alice.send(&url, 0, &content).await;
    alice.assert_stored("fits.bin", &content).await;

    // Unfinished uploads of no declared length count too: 3.5 MiB are
    // stored, so two deferred uploads may bring 0.5 MiB between them.
    let first = alice.created(None, &[("path", "first.bin")]).await;
    let second = alice.created(None, &[("path", "second.bin")]).await;
    alice.send(&first, 0, &random_bytes(MIB / 4)).await;
    let over = alice
        .patch(&second, 0, &random_bytes(MIB / 4 + KIB))
        .send()
        .await
        .unwrap();
    assert_eq!(
        over.status(),
        StatusCode::PAYLOAD_TOO_LARGE,
        "unfinished uploads over what is left"
    );
    assert_eq!(alice.offset(&second).await, 0);
    // What is left: less an entry's overhead (1 KiB) for each of the two
    // files, the first upload's part, and the part to come.
    alice
        .send(&second, 0, &random_bytes(MIB / 4 - 4 * KIB))
        .await;
    server.stop().await;
}

// ---------------------------------------------------------------------------
// tus-js-client.

/// tus-js-client under Node uploads 20 MiB in 1 MiB chunks and aborts at
/// about half (upload.abort() in the middle of a PATCH); a new Upload of the same file finds it with
/// findPreviousUploads() in a file URL storage, resumes it (not from 0,
/// not before what the server had answered) and the stored file has the
/// local file's SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tus_js_client_resumes_an_aborted_upload() {
    const SIZE: usize = 20 * MIB;
    const CHUNK: usize = MIB;
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let scratch = tempfile::tempdir().unwrap();
    let (file, content) = random_file(scratch.path(), "js.bin", SIZE);
    let storage = scratch.path().join("tus-urls.json");
    // About half: a random byte of the 11th chunk, so the abort cuts a PATCH.
    let abort_at = SIZE / 2 + rand::rng().random_range(1..CHUNK);
    println!("abort once {abort_at} bytes are out");
    let command = |mode: &str| {
        tus_js_command(
            mode,
            &tus.endpoint(),
            &file,
            &storage,
            &CHUNK.to_string(),
            abort_at,
        )
    };
    let started = Instant::now();
    let first = tus_js(command("start")).await;
    first.assert_success("tus-js-client's first upload");
    let accepted = first.u64("accepted") as usize;
    let aborted = first.u64("aborted") as usize;
    assert!(
        aborted >= abort_at && aborted < SIZE,
        "aborted at {aborted}"
    );
    assert!(accepted > 0, "no chunk answered before the abort");
    let url = first.url();
    let kept = tus.offset(&url).await;
    assert!(
        kept >= accepted && kept <= aborted,
        "the server's offset {kept}: {accepted} answered, {aborted} sent"
    );

    let second = tus_js(command("resume")).await;
    second.assert_success("tus-js-client's resumed upload");
    assert!(second.u64("previous") >= 1);
    assert_eq!(second.url(), url, "it resumed the same upload");
    let offsets = second.json["patch_offsets"].as_array().unwrap();
    let start = offsets.first().and_then(Value::as_u64).unwrap() as usize;
    assert!(start > 0, "the resumed upload started at 0");
    assert_eq!(start, kept, "it resumed from the server's offset");
    let resent = aborted - start;
    assert!(
        resent <= CHUNK,
        "{resent} bytes sent twice, more than a chunk"
    );
    println!(
        "aborted at {aborted}, resumed at {start} ({resent} bytes re-sent), {} PATCHes after; {:?}",
        offsets.len(),
        started.elapsed()
    );
    assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
    tus.assert_stored("js.bin", &content).await;
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Issue 30, the quota and the parts against a hostile client.

/// Eight 3 MiB PATCHes sent at once to eight uploads under a 4 MiB quota:
/// each part is weighed as it is recorded, with every other upload's, so
/// at most one is kept; the others are refused (413, the quota's) and
/// what the uploads hold stays within the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_never_pass_the_quota() {
    const QUOTA: u64 = 4 * MIB as u64;
    let server = TestServer::start(|_| {}).await;
    server
        .add_user("alice", "alice's long password", false, Some(QUOTA))
        .await;
    let alice = Tus::with_token(server.addr, &server.create_token("alice").await);
    let mut urls = Vec::new();
    for n in 0..8 {
        // A declared 4 MiB less a file's entry overhead (1 KiB) fits at
        // creation; 3 MiB is not the last part.
        let path = format!("race-{n}.bin");
        urls.push(alice.created(Some(4 * MIB - KIB), &[("path", &path)]).await);
    }
    let body = random_bytes(3 * MIB);
    let answers = futures_util::future::join_all(
        urls.iter()
            .map(|url| async { alice.patch(url, 0, &body).send().await.unwrap().status() }),
    )
    .await;
    let kept = answers
        .iter()
        .filter(|status| **status == StatusCode::NO_CONTENT)
        .count();
    assert!(
        kept <= 1,
        "at most one 3 MiB part fits in 4 MiB: {answers:?}"
    );
    assert!(
        answers
            .iter()
            .all(|status| [StatusCode::NO_CONTENT, StatusCode::PAYLOAD_TOO_LARGE].contains(status)),
        "the others are the quota's refusals: {answers:?}"
    );
    let mut held = 0;
    for url in &urls {
        held += alice.offset(url).await;
    }
    assert!(held as u64 <= QUOTA, "{held} bytes held");
    assert_eq!(held, kept * 3 * MIB);
    // No refused byte is left behind in the uploads' files.
    let mut on_disk = 0;
    for url in &urls {
        let files = part_files(&server.data_dir, &upload_id(url));
        let content: Vec<_> = files
            .into_iter()
            .filter(|file| file.file_name().is_some_and(|name| name == "content"))
            .collect();
        on_disk += part_bytes(&content);
    }
    assert_eq!(on_disk, held as u64, "refused bytes are cut back");
    // The upload that was kept completes: its parts become the file and
    // count once, so a file of the whole quota (less its entry) fits.
    if let Some((index, _)) = answers
        .iter()
        .enumerate()
        .find(|(_, status)| **status == StatusCode::NO_CONTENT)
    {
        let rest = random_bytes(MIB - KIB);
        let last = alice
            .patch(&urls[index], 3 * MIB, &rest)
            .send()
            .await
            .unwrap();
        assert_eq!(last.status(), StatusCode::NO_CONTENT, "the last PATCH");
        let stored = server
            .client
            .get(server.url(&format!("/files/race-{index}.bin")))
            .bearer_auth(server.create_token("alice").await)
            .send()
            .await
            .unwrap();
        assert_eq!(stored.status(), StatusCode::OK);
        let bytes = stored.bytes().await.unwrap();
        assert!(bytes[..3 * MIB] == body[..] && bytes[3 * MIB..] == rest[..]);
    }
    server.stop().await;
}

/// A local store appends every PATCH to the upload's one file, however
/// small: a thousand one-byte PATCHes leave one content file (and its
/// outboard), no part per request, and the upload completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_patches_append_to_one_file() {
    const PATCHES: usize = 1_000;
    let server = TestServer::start(|_| {}).await;
    let tus = Tus::new(server.addr);
    let content = random_bytes(PATCHES + 10);
    let url = tus
        .created(Some(content.len()), &[("path", "crumbs.bin")])
        .await;
    for offset in 0..PATCHES {
        let answer = tus
            .patch(&url, offset, &content[offset..=offset])
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT, "PATCH {offset}");
    }
    assert_eq!(tus.offset(&url).await, PATCHES);
    let mut files: Vec<String> = part_files(&server.data_dir, &upload_id(&url))
        .iter()
        .filter_map(|file| Some(file.file_name()?.to_str()?.to_owned()))
        .collect();
    files.sort();
    assert_eq!(files, ["content", "outboard"]);
    tus.send(&url, PATCHES, &content[PATCHES..]).await;
    tus.assert_stored("crumbs.bin", &content).await;
    server.stop().await;
}
