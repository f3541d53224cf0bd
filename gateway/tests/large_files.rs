//! Files of any size over real HTTP (issue 21): a byte flipped in a stored
//! blob is caught where it is, a file past every 32-bit offset round-trips
//! with a length and chunked, and an upload cut off leaves nothing behind.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{TestServer, random_bytes, roomy_dir, sha256_hex};
use futures_util::StreamExt as _;
use gateway::config::ByteSize;
use reqwest::StatusCode;
use reqwest::header;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
/// The unit the guest verifies (`handler::tree::GROUP`).
const GROUP: u64 = 64 * KIB;

/// Every blob file under the data directory (none when `blobs/` is not
/// made yet), sorted.
fn blobs(data_dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(fan_outs) = std::fs::read_dir(data_dir.join("blobs")) else {
        return found;
    };
    for fan_out in fan_outs {
        for blob in std::fs::read_dir(fan_out.unwrap().path()).unwrap() {
            found.push(blob.unwrap().path());
        }
    }
    found.sort();
    found
}

/// `df`'s line for the file system holding `dir`, for a message.
fn free_space(dir: &Path) -> String {
    std::process::Command::new("df")
        .args(["-h", "--output=avail,size"])
        .arg(dir)
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|error| format!("unknown ({error})"))
}

fn temp_files(data_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(data_dir.join("tmp"))
        .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
        .unwrap_or_default()
}

/// The temp files left once they had up to `limit` to go.
async fn temp_files_after(data_dir: &Path, limit: Duration) -> Vec<PathBuf> {
    let deadline = Instant::now() + limit;
    loop {
        let left = temp_files(data_dir);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn get_range(server: &TestServer, path: &str, first: u64, last: u64) -> reqwest::Response {
    server
        .client
        .get(server.url(&format!("/files/{path}")))
        .header(header::RANGE, format!("bytes={first}-{last}"))
        .send()
        .await
        .unwrap()
}

fn max_instance_memory(pool: &Value) -> u64 {
    pool["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|instance| instance["memory_bytes"].as_u64().unwrap())
        .max()
        .unwrap()
}

/// `wasm_storage_integrity_failures_total` in `/metrics`.
async fn integrity_failures(server: &TestServer) -> Option<u64> {
    let metrics = server.text("/metrics").await;
    metrics.lines().find_map(|line| {
        line.strip_prefix("wasm_storage_integrity_failures_total ")
            .map(|value| value.trim().parse().unwrap())
    })
}

/// Content of any size made on the fly and again at any offset, never held
/// whole: 1 MiB blocks, each a rotation of one pseudo-random MiB (by an
/// amount that depends on the block) that starts with its own index, so
/// every block differs and costs two copies to make.
#[derive(Clone)]
struct Generated {
    base: Arc<Vec<u8>>,
    size: u64,
}

impl Generated {
    fn new(size: u64) -> Self {
        // splitmix64 over a counter, so the content is the same every run.
        let mut state: u64 = 21;
        let mut base = Vec::with_capacity(MIB as usize);
        while base.len() < MIB as usize {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            base.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        Self {
            base: Arc::new(base),
            size,
        }
    }

    fn blocks(&self) -> u64 {
        self.size.div_ceil(MIB)
    }

    /// Block `index`: bytes `index * MIB ..` of the content.
    fn block(&self, index: u64) -> Vec<u8> {
        let len = usize::try_from(MIB.min(self.size - index * MIB)).unwrap();
        let turn = usize::try_from(index.wrapping_mul(0x9E37_79B9) % MIB).unwrap();
        let mut block = Vec::with_capacity(MIB as usize);
        block.extend_from_slice(&self.base[turn..]);
        block.extend_from_slice(&self.base[..turn]);
        block[..8].copy_from_slice(&index.to_le_bytes());
        block.truncate(len);
        block
    }

    /// Bytes `first..=last` of the content.
    fn range(&self, first: u64, last: u64) -> Vec<u8> {
        let mut bytes = Vec::new();
        for index in first / MIB..=last / MIB {
            let start = index * MIB;
            let block = self.block(index);
            let from = usize::try_from(first.saturating_sub(start)).unwrap();
            let to = usize::try_from((last + 1 - start).min(block.len() as u64)).unwrap();
            bytes.extend_from_slice(&block[from..to]);
        }
        bytes
    }

    /// The content as an upload body, hashed into `sent` as it goes out.
    fn body(&self, sent: Arc<Mutex<Sha256>>) -> reqwest::Body {
        let content = self.clone();
        reqwest::Body::wrap_stream(
            futures_util::stream::iter(0..self.blocks()).map(move |index| {
                let block = content.block(index);
                sent.lock().unwrap().update(&block);
                Ok::<_, std::io::Error>(Bytes::from(block))
            }),
        )
    }

    /// The content as an upload body that fails (the client hangs up)
    /// after its first `cut` bytes, `cut` a multiple of 1 MiB.
    fn body_cut_off(&self, cut: u64) -> reqwest::Body {
        let content = self.clone();
        reqwest::Body::wrap_stream(
            futures_util::stream::iter(0..self.blocks()).map(move |index| {
                if index * MIB >= cut {
                    Err(std::io::Error::other("the client hangs up"))
                } else {
                    Ok(Bytes::from(content.block(index)))
                }
            }),
        )
    }
}

/// The head of the request `client` sends for `PUT` with `body` (and a
/// `Content-Length` header when `length` is given), as a plain listener
/// sees it: whether the upload declares a length or goes chunked.
async fn request_head(
    client: &reqwest::Client,
    body: reqwest::Body,
    length: Option<u64>,
) -> String {
    use tokio::io::AsyncReadExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/files/probe", listener.local_addr().unwrap());
    let mut request = client.put(url).body(body);
    if let Some(length) = length {
        request = request.header(header::CONTENT_LENGTH, length);
    }
    let sending = tokio::spawn(request.send());
    let (mut stream, _) = listener.accept().await.unwrap();
    let mut head = Vec::new();
    let mut buffer = [0; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(read > 0, "the connection closed within the head");
        head.extend_from_slice(&buffer[..read]);
    }
    drop(stream);
    let _ = sending.await;
    let head = String::from_utf8_lossy(&head).to_lowercase();
    head[..head.find("\r\n\r\n").unwrap()].to_owned()
}

/// A file streamed back: its SHA-256 and length.
async fn download(server: &TestServer, path: &str) -> (String, u64) {
    let mut response = server.get(path).await;
    assert_eq!(response.status(), StatusCode::OK, "GET {path}");
    let declared: u64 = response.headers()[header::CONTENT_LENGTH]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut hash = Sha256::new();
    let mut received = 0;
    while let Some(chunk) = response.chunk().await.unwrap() {
        hash.update(&chunk);
        received += chunk.len() as u64;
    }
    assert_eq!(received, declared, "GET {path}: the body is its length");
    (hex::encode(hash.finalize()), received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corruption_is_caught_where_it_is() {
    let server = TestServer::start(|config| config.body_window = ByteSize(256 * KIB)).await;
    let content = random_bytes(usize::try_from(4 * MIB + 333).unwrap());
    let size = content.len() as u64;
    let stored = server.put("damaged.bin", content.clone()).await;
    assert_eq!(stored.status(), StatusCode::CREATED);
    let meta: Value = stored.json().await.unwrap();
    assert_eq!(meta["sha256"], sha256_hex(&content));
    assert_eq!(integrity_failures(&server).await, Some(0));

    // One byte in the middle of the content, in the blob on disk (the
    // content first, then its outboard).
    let files = blobs(&server.data_dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let blob = &files[0];
    assert!(
        std::fs::metadata(blob).unwrap().len() > size,
        "an outboard follows the content"
    );
    let flipped = 2 * MIB + 1234;
    let mut permissions = std::fs::metadata(blob).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    permissions.set_readonly(false);
    std::fs::set_permissions(blob, permissions).unwrap();
    let mut on_disk = std::fs::read(blob).unwrap();
    on_disk[usize::try_from(flipped).unwrap()] ^= 0x01;
    std::fs::write(blob, &on_disk).unwrap();
    let at = |offset: u64| usize::try_from(offset).unwrap();

    // a) Ranges elsewhere are served, exact: at the start, in the group
    //    just before the damaged one, and at the end.
    let damaged_group = flipped / GROUP * GROUP;
    for (first, last) in [
        (100, 199),
        (damaged_group - 1000, damaged_group - 1),
        (size - 500, size - 1),
    ] {
        let ranged = get_range(&server, "damaged.bin", first, last).await;
        assert_eq!(
            ranged.status(),
            StatusCode::PARTIAL_CONTENT,
            "bytes={first}-{last}"
        );
        assert_eq!(
            ranged.bytes().await.unwrap(),
            &content[at(first)..=at(last)],
            "bytes={first}-{last}"
        );
    }

    // b) A range covering the flipped byte: 500 integrity_error, no bytes
    //    of the file.
    let (first, last) = (flipped - 3000, flipped + 3000);
    let refused = get_range(&server, "damaged.bin", first, last).await;
    assert_eq!(refused.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(refused.headers().get(header::CONTENT_RANGE).is_none());
    let answer = refused.bytes().await.unwrap();
    let error: Value = serde_json::from_slice(&answer)
        .unwrap_or_else(|_| panic!("a JSON error, not {} bytes of file", answer.len()));
    assert_eq!(error["error"], "integrity_error", "{error}");
    assert!(answer.len() < 1024, "{error}");
    assert_eq!(integrity_failures(&server).await, Some(1));

    // c) A full GET: its head is sent before the damage is reached, then the
    //    body ends early with an error, every byte before it right.
    let mut full = server.get("damaged.bin").await;
    assert_eq!(full.status(), StatusCode::OK);
    assert_eq!(
        full.headers()[header::CONTENT_LENGTH],
        size.to_string().as_str()
    );
    let mut received = Vec::new();
    let failed = loop {
        match full.chunk().await {
            Ok(Some(chunk)) => received.extend_from_slice(&chunk),
            Ok(None) => break None,
            Err(error) => break Some(error),
        }
    };
    assert!(
        failed.is_some(),
        "the body ended cleanly after {} of {size} bytes",
        received.len()
    );
    assert!(
        (received.len() as u64) <= damaged_group,
        "{} bytes received, the damaged group starts at {damaged_group}",
        received.len()
    );
    assert!(
        received == content[..received.len()],
        "the {} bytes received are not the file's first bytes",
        received.len()
    );
    eprintln!(
        "full GET of the damaged file: {} bytes, then {:?}",
        received.len(),
        failed.unwrap()
    );

    // d) Both counted (the cut-short response once its instance notices).
    let deadline = Instant::now() + Duration::from_secs(5);
    while integrity_failures(&server).await != Some(2) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(integrity_failures(&server).await, Some(2));

    // The undamaged range still reads after both failures.
    let ranged = get_range(&server, "damaged.bin", 100, 199).await;
    assert_eq!(ranged.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(ranged.bytes().await.unwrap(), &content[100..=199]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_over_4_gib_round_trips_with_a_length_and_chunked() {
    let began = Instant::now();
    let size = 4 * GIB + MIB + 17;
    // Two such bodies on disk at once (the first file, the second one
    // staged), and some room.
    let Some(dir) = roomy_dir(2 * size + GIB) else {
        return;
    };
    let server = TestServer::start_in(dir.path(), |_| {}).await;
    let content = Generated::new(size);
    eprintln!("free in the data dir: {}", free_space(&server.data_dir));

    // What the two uploads below send: one declares its length, one is
    // chunked (checked on a small body against a plain listener).
    let small = Generated::new(3 * MIB + 17);
    let unused = Arc::new(Mutex::new(Sha256::new()));
    let head = request_head(&server.client, small.body(unused.clone()), Some(small.size)).await;
    assert!(
        head.contains(&format!("content-length: {}", small.size)),
        "{head}"
    );
    assert!(!head.contains("transfer-encoding"), "{head}");
    let head = request_head(&server.client, small.body(unused), None).await;
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert!(!head.contains("content-length"), "{head}");

    // With a Content-Length.
    let started = Instant::now();
    let sent = Arc::new(Mutex::new(Sha256::new()));
    let stored = server
        .client
        .put(server.url("/files/big/with-length.bin"))
        .header(header::CONTENT_LENGTH, size)
        .body(content.body(sent.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), StatusCode::CREATED);
    let meta: Value = stored.json().await.unwrap();
    let digest = hex::encode(sent.lock().unwrap().clone().finalize());
    assert_eq!(meta["size"], size, "{meta}");
    assert_eq!(meta["sha256"], digest.as_str(), "{meta}");
    eprintln!("PUT {size} bytes with a length: {:?}", started.elapsed());

    // Back, streaming.
    let started = Instant::now();
    let (read, length) = download(&server, "big/with-length.bin").await;
    assert_eq!(length, size);
    assert_eq!(read, digest);
    eprintln!("GET {size} bytes: {:?}", started.elapsed());

    // Ranges past 4 GiB: the last 100 bytes, across the 4 GiB mark, across
    // a group boundary past it, and the last byte alone.
    let started = Instant::now();
    let boundary = 4 * GIB + 5 * GROUP;
    for (first, last) in [
        (size - 100, size - 1),
        (4 * GIB - 50, 4 * GIB + 49),
        (boundary - 1000, boundary + 999),
        (size - 1, size - 1),
    ] {
        let ranged = get_range(&server, "big/with-length.bin", first, last).await;
        assert_eq!(
            ranged.status(),
            StatusCode::PARTIAL_CONTENT,
            "bytes={first}-{last}"
        );
        assert_eq!(
            ranged.headers()[header::CONTENT_RANGE],
            format!("bytes {first}-{last}/{size}").as_str()
        );
        let bytes = ranged.bytes().await.unwrap();
        assert!(
            bytes == content.range(first, last),
            "bytes={first}-{last}: {} bytes, not the file's",
            bytes.len()
        );
    }
    eprintln!("4 ranges: {:?}", started.elapsed());

    // Chunked (no length), at another path: the same digest, one blob.
    let started = Instant::now();
    let sent = Arc::new(Mutex::new(Sha256::new()));
    let stored = server
        .client
        .put(server.url("/files/big/chunked.bin"))
        .body(content.body(sent.clone()))
        .send()
        .await
        .unwrap();
    let status = stored.status();
    let meta: Value = stored.json().await.unwrap();
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{meta}; free in the data dir: {}",
        free_space(&server.data_dir)
    );
    assert_eq!(meta["size"], size, "{meta}");
    assert_eq!(meta["sha256"], digest.as_str(), "{meta}");
    assert_eq!(hex::encode(sent.lock().unwrap().clone().finalize()), digest);
    eprintln!("PUT {size} bytes chunked: {:?}", started.elapsed());
    let (first, last) = (size - 100, size - 1);
    let ranged = get_range(&server, "big/chunked.bin", first, last).await;
    assert_eq!(ranged.status(), StatusCode::PARTIAL_CONTENT);
    assert!(ranged.bytes().await.unwrap() == content.range(first, last));

    // No instance held more than its window (32 MiB by default) and some
    // room; both files are one blob; no temp file is left.
    let pool = server.json("/admin/pool").await;
    eprintln!("largest instance: {} bytes", max_instance_memory(&pool));
    assert!(
        max_instance_memory(&pool) <= 32 * MIB + 8 * MIB,
        "an instance above the window: {pool}"
    );
    let files = blobs(&server.data_dir);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(std::fs::metadata(&files[0]).unwrap().len() > size);
    assert_eq!(
        temp_files_after(&server.data_dir, Duration::from_secs(5)).await,
        Vec::<PathBuf>::new()
    );
    server.stop().await;
    eprintln!("the whole test: {:?}", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_cut_off_leaves_nothing() {
    let began = Instant::now();
    let grace = Duration::from_secs(2);
    let server = TestServer::start(|config| {
        config.orphan_grace = grace;
        config.gc_interval = Duration::from_millis(500);
    })
    .await;
    // A file already there, which a cut-off upload must not replace.
    let old = random_bytes(100_000);
    assert_eq!(
        server.put("kept.bin", old.clone()).await.status(),
        StatusCode::CREATED
    );
    let before = blobs(&server.data_dir);
    assert_eq!(before.len(), 1);

    let content = Generated::new(1536 * MIB);
    // Cut inside the first window (32 MiB by default), past it, and at
    // 1 GiB; over a new path and over the existing file.
    for (path, cut) in [
        ("new.bin", MIB),
        ("new.bin", 48 * MIB),
        ("kept.bin", 48 * MIB),
        ("new.bin", GIB),
    ] {
        let started = Instant::now();
        let sent = server
            .client
            .put(server.url(&format!("/files/{path}")))
            .body(content.body_cut_off(cut))
            .send()
            .await;
        assert!(
            sent.is_err(),
            "an upload of {path} cut off at {cut} bytes was answered: {:?}",
            sent.map(|response| response.status())
        );
        let left = temp_files_after(&server.data_dir, Duration::from_secs(5)).await;
        assert!(left.is_empty(), "cut at {cut}: temp files left: {left:?}");
        assert_eq!(
            blobs(&server.data_dir),
            before,
            "cut at {cut}: a new blob was left"
        );
        assert_eq!(
            server.get("new.bin").await.status(),
            StatusCode::NOT_FOUND,
            "cut at {cut}: something at the path"
        );
        let kept = server.get("kept.bin").await;
        assert_eq!(kept.status(), StatusCode::OK);
        assert!(
            kept.bytes().await.unwrap() == old,
            "cut at {cut}: the old file changed"
        );
        eprintln!("cut off at {cut} bytes: {:?}", started.elapsed());
    }

    // Past the orphan grace (and a few collections), still nothing.
    tokio::time::sleep(grace + Duration::from_secs(2)).await;
    assert_eq!(blobs(&server.data_dir), before);
    assert!(temp_files(&server.data_dir).is_empty());
    assert_eq!(server.get("new.bin").await.status(), StatusCode::NOT_FOUND);
    // The server still takes uploads.
    assert_eq!(
        server.put("after.bin", b"fine".to_vec()).await.status(),
        StatusCode::CREATED
    );
    server.stop().await;
    eprintln!("the whole test: {:?}", began.elapsed());
}
