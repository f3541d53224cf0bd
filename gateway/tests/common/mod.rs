//! A real gateway on a free loopback port with a temp data directory, and
//! small HTTP helpers for the integration tests; below, the two backends
//! and a gateway child process (`backends`), the client programs the tests
//! drive (`clients`), tus by hand (`tus`) and a headless browser
//! (`browser`).

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

pub mod backends;
pub mod browser;
pub mod clients;
pub mod tus;

use std::path::{Path, PathBuf};

use gateway::AppState;
use gateway::config::Config;
use rand::RngCore;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The in-process server's warnings and errors (what a 500 was) go to
/// the test's captured output, shown with a failure; `RUST_LOG` shows more.
pub fn show_server_warnings() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,tower_http=off".into()),
        )
        .with_test_writer()
        .try_init();
}

pub struct TestServer {
    pub addr: std::net::SocketAddr,
    pub state: AppState,
    pub client: reqwest::Client,
    pub data_dir: PathBuf,
    // Kept so the directory lives as long as the server (when we made it).
    _dir: Option<tempfile::TempDir>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// A server with defaults changed by `configure`, in a fresh temp dir
    /// with room for what a test stores ([`server_dir`]).
    pub async fn start(configure: impl FnOnce(&mut Config)) -> Self {
        let dir = server_dir();
        let mut server = Self::start_in(dir.path(), configure).await;
        server._dir = Some(dir);
        server
    }

    /// A server on an existing data directory.
    pub async fn start_in(data_dir: &Path, configure: impl FnOnce(&mut Config)) -> Self {
        show_server_warnings();
        let mut config = Config::for_data_dir(data_dir);
        config.instances = 2;
        configure(&mut config);
        let state = gateway::start(&config).await.unwrap();
        let listener = TcpListener::bind(config.listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(gateway::serve(listener, state.clone(), async {
            let _ = stopped.await;
        }));
        Self {
            addr,
            state,
            client: reqwest::Client::new(),
            data_dir: data_dir.to_owned(),
            _dir: None,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Create a user in this server's database (as `gateway user add` does).
    pub async fn add_user(&self, name: &str, password: &str, admin: bool, quota: Option<u64>) {
        gateway::cli::add_user(self.state.auth.accounts(), name, password, admin, quota)
            .await
            .unwrap();
    }

    /// A new API token for `name` (as `gateway token create` prints).
    pub async fn create_token(&self, name: &str) -> String {
        gateway::cli::create_token(self.state.auth.accounts(), name, "test")
            .await
            .unwrap()
            .0
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub async fn put(&self, path: &str, body: Vec<u8>) -> reqwest::Response {
        self.client
            .put(self.url(&format!("/files/{path}")))
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(&format!("/files/{path}")))
            .send()
            .await
            .unwrap()
    }

    /// Upload `size` random bytes (from `rng`) to `path` and read them back
    /// exactly.
    pub async fn round_trip(&self, path: &str, rng: &mut impl RngCore, size: usize) {
        let mut content = vec![0; size];
        rng.fill_bytes(&mut content);
        let stored = self.put(path, content.clone()).await;
        assert!(
            stored.status().is_success(),
            "PUT {path}: {}",
            stored.status()
        );
        let fetched = self.get(path).await;
        assert_eq!(fetched.status(), reqwest::StatusCode::OK, "GET {path}");
        assert_eq!(
            sha256_hex(&fetched.bytes().await.unwrap()),
            sha256_hex(&content)
        );
    }

    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.client
            .delete(self.url(&format!("/files/{path}")))
            .send()
            .await
            .unwrap()
    }

    pub async fn json(&self, path: &str) -> serde_json::Value {
        let response = self.client.get(self.url(path)).send().await.unwrap();
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    /// The body of `GET path` as text.
    pub async fn text(&self, path: &str) -> String {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Send `request` as raw bytes (no URL normalisation on the way) and
    /// return the status code of the answer.
    pub async fn raw_status(&self, request_line: &str) -> u16 {
        let mut stream = TcpStream::connect(self.addr).await.unwrap();
        let request = format!(
            "{request_line}\r\nHost: localhost\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        answer
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or(0)
    }

    /// Shut down gracefully and wait until the server has stopped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut bytes = vec![0; len];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Every blob file under the data directory (`blobs/<fan-out>/<sha256>`):
/// the blobs that are files of their own, not those packed into segments
/// (see [`stored_blobs`]).
pub fn blob_files(data_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for fan_out in std::fs::read_dir(data_dir.join("blobs")).unwrap() {
        let fan_out = fan_out.unwrap();
        // Two hex digits; not `segments/` or `uploads/`.
        if fan_out.file_name().len() != 2 {
            continue;
        }
        for blob in std::fs::read_dir(fan_out.path()).unwrap() {
            found.push(blob.unwrap().path());
        }
    }
    found
}

/// Where blob `digest`'s bytes begin in a data directory's local store:
/// its own file from 0, or its record in a segment file (from where the
/// index's row says).
pub fn blob_location(data_dir: &Path, digest: &str) -> (PathBuf, u64) {
    let index = rusqlite::Connection::open(data_dir.join("index.sqlite")).unwrap();
    let packed: Option<(i64, u64)> = rusqlite::OptionalExtension::optional(index.query_row(
        "SELECT segment, segment_offset FROM blobs WHERE sha256 = ?1 AND segment IS NOT NULL",
        [digest],
        |row| Ok((row.get(0)?, row.get(1)?)),
    ))
    .unwrap();
    match packed {
        Some((segment, offset)) => (
            data_dir.join("blobs/segments").join(segment.to_string()),
            offset,
        ),
        None => (data_dir.join("blobs").join(&digest[..2]).join(digest), 0),
    }
}

/// The SHA-256 of every blob in a data directory's local store: the blob
/// files, and the blobs packed into segment files (the index's rows that
/// say so, whose segment holds their record).
pub fn stored_blobs(data_dir: &Path) -> std::collections::BTreeSet<String> {
    let mut found: std::collections::BTreeSet<String> = blob_files(data_dir)
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let index = rusqlite::Connection::open(data_dir.join("index.sqlite")).unwrap();
    let mut packed = index
        .prepare(
            "SELECT sha256, segment, segment_offset + packed_len FROM blobs \
             WHERE segment IS NOT NULL AND state = 'stored'",
        )
        .unwrap();
    let rows = packed
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, u64>(2)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (digest, segment, end) = row.unwrap();
        let segment = data_dir.join("blobs/segments").join(segment.to_string());
        if std::fs::metadata(segment).is_ok_and(|meta| meta.len() >= end) {
            found.insert(digest);
        }
    }
    found
}

/// Every file under `dir`, at any depth (none if it does not exist).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
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

/// The value of the `/metrics` sample `sample` (its name and labels) of
/// the gateway at `addr`.
pub async fn metric(addr: std::net::SocketAddr, sample: &str) -> f64 {
    let metrics = reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let line = format!("{sample} ");
    metrics
        .lines()
        .find_map(|found| found.strip_prefix(&line)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {sample} in /metrics:\n{metrics}"))
}

/// `wasm_storage_uploads_in_progress` in the `/metrics` of the gateway at
/// `addr`.
pub async fn uploads_in_progress(addr: std::net::SocketAddr) -> f64 {
    metric(addr, "wasm_storage_uploads_in_progress").await
}

/// S3's multipart ETag of `parts`: the MD5 of their MD5s, a dash, their
/// count, quoted.
pub fn multipart_etag<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> String {
    let mut digests = Vec::new();
    let mut count = 0;
    for part in parts {
        digests.extend_from_slice(&md5::Md5::digest(part));
        count += 1;
    }
    format!("\"{}-{count}\"", hex::encode(md5::Md5::digest(&digests)))
}

/// A [`TestServer`] that also serves the S3 API (`--s3-listen`) on a second
/// free loopback port, until the same shutdown.
pub struct S3TestServer {
    pub server: TestServer,
    pub s3_addr: std::net::SocketAddr,
}

impl S3TestServer {
    /// A server with defaults changed by `configure`, in a fresh temp dir
    /// with room for what a test stores ([`server_dir`]).
    pub async fn start(configure: impl FnOnce(&mut Config)) -> Self {
        show_server_warnings();
        let dir = server_dir();
        let mut config = Config::for_data_dir(dir.path());
        config.instances = 2;
        config.s3_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        configure(&mut config);
        let state = gateway::start(&config).await.unwrap();
        let listener = TcpListener::bind(config.listen).await.unwrap();
        let s3_listener = TcpListener::bind(config.s3_listen.unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let s3_addr = s3_listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(gateway::serve_with_s3(
            listener,
            Some(s3_listener),
            state.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        let server = TestServer {
            addr,
            state,
            client: reqwest::Client::new(),
            data_dir: dir.path().to_owned(),
            _dir: Some(dir),
            stop: Some(stop),
            task: Some(task),
        };
        Self { server, s3_addr }
    }

    /// `http://127.0.0.1:PORT` of the S3 API.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.s3_addr)
    }

    /// Shut both listeners down gracefully and wait until they have stopped.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

// ---------------------------------------------------------------------------
// If-Range (RFC 9110 §13.1.5), the same on every protocol that serves files.

/// The first content `assert_if_range` expects at a URL, and what replaces it.
pub const IF_RANGE_OLD: &[u8] = b"AAAAAAAAAAAAAAAAAAAA";
pub const IF_RANGE_NEW: &[u8] = b"BBBBBBBBBBBBBBBBBBBB";

/// `GET url` with `Range: bytes=10-` and `If-Range: validator`: the status
/// and body.
pub async fn get_if_range(
    client: &reqwest::Client,
    url: &str,
    auth: Option<&str>,
    validator: &str,
) -> (reqwest::StatusCode, Vec<u8>, reqwest::header::HeaderMap) {
    let mut request = client
        .get(url)
        .header(reqwest::header::RANGE, "bytes=10-")
        .header(reqwest::header::IF_RANGE, validator);
    if let Some(auth) = auth {
        request = request.header(reqwest::header::AUTHORIZATION, auth);
    }
    let answer = request.send().await.unwrap();
    let status = answer.status();
    let headers = answer.headers().clone();
    (status, answer.bytes().await.unwrap().to_vec(), headers)
}

/// `url` served [`IF_RANGE_OLD`] under `old_etag` and now serves
/// [`IF_RANGE_NEW`]: a range resumed with the old tag gets the whole new
/// content (200), never its tail; the current tag or `Last-Modified` gets
/// the range (206); an older date or a weak tag, the whole content.
pub async fn assert_if_range(
    client: &reqwest::Client,
    url: &str,
    auth: Option<&str>,
    old_etag: &str,
) {
    use reqwest::StatusCode;
    let mut head = client.get(url);
    if let Some(auth) = auth {
        head = head.header(reqwest::header::AUTHORIZATION, auth);
    }
    let current = head.send().await.unwrap();
    assert_eq!(current.status(), StatusCode::OK, "{url}");
    let etag = current.headers()[reqwest::header::ETAG]
        .to_str()
        .unwrap()
        .to_owned();
    let modified = current.headers()[reqwest::header::LAST_MODIFIED]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(current.bytes().await.unwrap(), IF_RANGE_NEW, "{url}");
    assert_ne!(etag, old_etag, "{url}: the file was replaced");

    let whole = |(status, body, _): (StatusCode, Vec<u8>, _), case: &str| {
        assert_eq!(status, StatusCode::OK, "{url}: {case}");
        assert_eq!(body, IF_RANGE_NEW, "{url}: {case}");
    };
    let tail = |(status, body, headers): (StatusCode, Vec<u8>, reqwest::header::HeaderMap),
                case: &str| {
        assert_eq!(status, StatusCode::PARTIAL_CONTENT, "{url}: {case}");
        assert_eq!(body, &IF_RANGE_NEW[10..], "{url}: {case}");
        assert_eq!(
            headers[reqwest::header::CONTENT_RANGE],
            "bytes 10-19/20",
            "{url}: {case}"
        );
    };
    whole(
        get_if_range(client, url, auth, old_etag).await,
        "the old entity tag",
    );
    tail(
        get_if_range(client, url, auth, &etag).await,
        "the current entity tag",
    );
    tail(
        get_if_range(client, url, auth, &modified).await,
        "the Last-Modified date",
    );
    whole(
        get_if_range(client, url, auth, "Sun, 06 Nov 1994 08:49:37 GMT").await,
        "an older date",
    );
    whole(
        get_if_range(client, url, auth, &format!("W/{etag}")).await,
        "a weak entity tag",
    );
}

/// Room a test server's data dir is given: a burst of 100 MB uploads holds
/// about 1 GiB of bodies at once.
const SERVER_ROOM: u64 = 2 << 30;

/// A data dir for a test server: where [`SERVER_ROOM`] fits (a shared disk
/// left with less once the build is there answers a burst of uploads 507,
/// rightly), else the plain temp dir.
pub fn server_dir() -> tempfile::TempDir {
    testsupport::roomy_temp_dir("wasm-storage-", SERVER_ROOM)
        .unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// A fresh directory with `need` bytes free (and 1 % of its disk besides):
/// under the temp dir when its disk has them, else on `/dev/shm` (tmpfs:
/// this machine has more RAM than the tests need, a CI machine's shared
/// disk sometimes has less room). `None`, and why on stderr, when no place
/// on this machine has them: a test that needs more room than the machine
/// has is skipped, as one that needs root is without it.
pub fn roomy_dir(need: u64) -> Option<tempfile::TempDir> {
    match testsupport::roomy_temp_dir("wasm-storage-", need) {
        Ok(dir) => Some(dir),
        Err(error) => {
            eprintln!("skipped: {error:#}");
            None
        }
    }
}
