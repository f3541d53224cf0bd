//! S3 multipart uploads whose parts are appended as they come: a part whose
//! number follows parts 1..k that were all appended in order is appended
//! to the upload's own file (a local store's `<data>/blobs/uploads/<id>/`
//! `content` and `outboard`; an object store's kept parts) and hashed on
//! its way, and a completion that chooses those parts takes up their hashes
//! and reads none of them again. A part out of order is kept as a part of
//! its own (`part-NNNNN-…`), and its completion streams the chosen parts
//! through an instance.
//!
//! Each case runs on both backends: SQLite and a local directory, and
//! PostgreSQL with blobs in SeaweedFS (real servers, started here on
//! loopback ports and stopped by PID), against a gateway child process
//! (`--s3-listen`) with the open tree's key (`gateway key create`). The
//! cases:
//!
//! - parts of 5 MiB, 5 MiB and 1 MiB + 123 bytes sent 1, 2, 3 are the
//!   upload's `content` (every byte) and `outboard` and nothing else on a
//!   local store; the completion stores the object with the right bytes
//!   and S3's multipart ETag. Sent 2, 1, 3 (each a part of its own), or
//!   1, 2, 3 and part 2 again, the completion stores the bytes last sent
//!   for each part too;
//! - a completion of 96 MiB sent in 8 MiB parts in reverse (streamed
//!   through an instance) is cut by SIGKILL 300 ms in; a gateway restarted
//!   on the same data directory, database and blob store completes it when
//!   asked again with the same list. The same with the parts sent in order
//!   (a fast completion: the kill as soon as the request leaves; a retry
//!   may find the upload gone, but then the object is there whole). No
//!   upload is left in progress, and nothing under a local store's
//!   `<data>/blobs/uploads/`.
//!
//! The S3 calls go through boto3 (`tests/s3_multipart/calls.py`, a list of
//! calls a run, each outcome a JSON line), from `.tools/venv`;
//! PostgreSQL and SeaweedFS too: `scripts/install-test-deps.sh` installs
//! them.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::backends::{Backend, BackendKind, GatewayProcess, both_backends, eventually, within};
use common::clients::clean;
use common::{multipart_etag, random_bytes, sha256_hex};
use md5::Digest as _;
use serde_json::{Value, json};

const MIB: usize = 1 << 20;
/// How long a case may take once its backend's servers are up.
const CASE_LIMIT: Duration = Duration::from_secs(90);
/// How long one run of `calls.py` may take.
const CALLS_LIMIT: Duration = Duration::from_secs(60);
/// The bucket every case uses.
const BUCKET: &str = "multipart";

// ---------------------------------------------------------------------------
// The gateway.

/// The open tree's key, made by `gateway key create` on `data_dir` (and
/// the backend's database): `(ACCESS_KEY_ID, SECRET_ACCESS_KEY)`.
async fn key_create(backend: &Backend, data_dir: &Path) -> (String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
    command.arg("--data-dir").arg(data_dir);
    backend.point_cli(&mut command);
    command
        .args(["key", "create", "--label", "multipart"])
        .env("RUST_LOG", "warn");
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "gateway key create: {output:?}");
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields.len(), 2, "key create printed {stdout:?}");
    (fields[0].to_owned(), fields[1].to_owned())
}

// ---------------------------------------------------------------------------
// boto3.

/// `tests/s3_multipart/calls.py` against one gateway's S3 API with a key.
struct S3 {
    endpoint: String,
    key: (String, String),
}

/// A run of `calls.py`, its lines read as they come; killed (by PID) if
/// dropped before it ends.
struct Running {
    child: Option<std::process::Child>,
    lines: tokio::sync::mpsc::UnboundedReceiver<Value>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    /// The next line within `limit`; `None` once the script has ended.
    async fn next(&mut self, limit: Duration) -> Option<Value> {
        tokio::time::timeout(limit, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("calls.py printed nothing for {limit:?}"))
    }

    /// Every line left once the script ends (which it must within
    /// `limit`), asserting it ended well.
    async fn finish(mut self, limit: Duration) -> Vec<Value> {
        let deadline = Instant::now() + limit;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.lines.recv()).await {
                Ok(Some(line)) => lines.push(line),
                Ok(None) => break,
                Err(_) => panic!("calls.py ran longer than {limit:?}; its lines: {lines:?}"),
            }
        }
        let mut child = self.child.take().unwrap();
        let stderr = self.stderr.take().unwrap();
        let (status, stderr) =
            tokio::task::spawn_blocking(move || (child.wait().unwrap(), stderr.join().unwrap()))
                .await
                .unwrap();
        assert!(
            status.success(),
            "calls.py failed ({status}): {lines:?}\n{stderr}"
        );
        lines
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl S3 {
    fn new(gateway: &GatewayProcess, key: (String, String)) -> Self {
        Self {
            endpoint: gateway.endpoint(),
            key,
        }
    }

    /// Starts `calls` (`(operation, params)`) in one run of `calls.py`;
    /// with `announce`, it prints `{"sending": OPERATION}` as each request
    /// leaves.
    fn start(&self, calls: &[(&str, Value)], announce: bool) -> Running {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(operation, params)| json!([operation, params]))
            .collect();
        // None of the caller's AWS settings or proxies.
        let mut command = clean(&testsupport::find_tool("python3").unwrap());
        command
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_multipart/calls.py"))
            .args(["--endpoint", &self.endpoint])
            // `=`: a secret may begin with `-`.
            .arg(format!("--access-key={}", self.key.0))
            .arg(format!("--secret={}", self.key.1));
        if announce {
            command.arg("--announce");
        }
        command
            .arg(Value::Array(calls).to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|error| {
            panic!("calls.py did not start ({error}); is boto3 installed?")
        });
        let stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (sender, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if sender.send(value).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        Running {
            child: Some(child),
            lines,
            stderr: Some(stderr),
        }
    }

    /// The outcomes of `calls`, one each (`{"ok": …}` or `{"error": CODE,
    /// "status": N, …}`, with `"seconds"`).
    async fn calls(&self, calls: &[(&str, Value)]) -> Vec<Value> {
        let outcomes = self.start(calls, false).finish(CALLS_LIMIT).await;
        assert_eq!(
            outcomes.len(),
            calls.len(),
            "one outcome a call: {outcomes:?}"
        );
        outcomes
    }

    /// The outcome of one call.
    async fn call(&self, operation: &str, params: Value) -> Value {
        self.calls(&[(operation, params)]).await.remove(0)
    }

    /// The result of a call that must succeed.
    async fn ok(&self, operation: &str, params: Value) -> Value {
        let outcome = self.call(operation, params.clone()).await;
        assert!(
            outcome.get("ok").is_some(),
            "{operation} {params}: {outcome}"
        );
        outcome["ok"].clone()
    }

    /// A new multipart upload of `key`: its id.
    async fn create_upload(&self, key: &str) -> String {
        let created = self
            .ok(
                "create_multipart_upload",
                json!({"Bucket": BUCKET, "Key": key}),
            )
            .await;
        created["UploadId"].as_str().unwrap().to_owned()
    }

    /// Sends `parts` of upload `upload` of `key` in the order given, in one
    /// run: each `(number, bytes of file from offset, their length)`;
    /// asserts each answered its MD5 as its ETag, and returns the ETags.
    async fn upload_parts(
        &self,
        (key, upload): (&str, &str),
        file: &Path,
        content: &[u8],
        parts: &[(u32, usize, usize)],
    ) -> Vec<(u32, String)> {
        let calls: Vec<(&str, Value)> = parts
            .iter()
            .map(|&(number, offset, length)| {
                (
                    "upload_part",
                    json!({"Bucket": BUCKET, "Key": key, "UploadId": upload,
                           "PartNumber": number,
                           "Body": {"file": file, "offset": offset, "length": length}}),
                )
            })
            .collect();
        let outcomes = self.calls(&calls).await;
        parts
            .iter()
            .zip(outcomes)
            .map(|(&(number, offset, length), outcome)| {
                assert!(
                    outcome.get("ok").is_some(),
                    "part {number} of {key}: {outcome}"
                );
                let etag = outcome["ok"]["ETag"].as_str().unwrap().to_owned();
                assert_eq!(
                    etag,
                    format!(
                        "\"{}\"",
                        hex::encode(md5::Md5::digest(&content[offset..offset + length]))
                    ),
                    "part {number}'s ETag"
                );
                (number, etag)
            })
            .collect()
    }

    /// Completes upload `upload` of `key` with the parts `etags`, asserts
    /// it answered `etag` and stored exactly `content` under it; the
    /// seconds the completion took.
    async fn complete(
        &self,
        (key, upload): (&str, &str),
        etags: &[(u32, String)],
        content: &[u8],
        etag: &str,
    ) -> Value {
        let done = self
            .call("complete_multipart_upload", completion(key, upload, etags))
            .await;
        assert!(done.get("ok").is_some(), "completing {key}: {done}");
        assert_eq!(done["ok"]["ETag"], etag, "the completion's ETag");
        self.assert_stored(key, content, etag).await;
        done["seconds"].clone()
    }

    /// Asserts `key` is stored with exactly `content` under `etag`.
    async fn assert_stored(&self, key: &str, content: &[u8], etag: &str) {
        let got = self
            .ok("get_object", json!({"Bucket": BUCKET, "Key": key}))
            .await;
        assert_eq!(got["Body"]["len"], content.len(), "the length of {key}");
        assert_eq!(
            got["Body"]["sha256"],
            sha256_hex(content).as_str(),
            "the SHA-256 of {key}"
        );
        assert_eq!(got["ETag"], etag, "the ETag of {key}");
    }

    /// Asserts no multipart upload is left in the bucket.
    async fn assert_no_uploads(&self) {
        let uploads = self
            .ok("list_multipart_uploads", json!({"Bucket": BUCKET}))
            .await;
        assert!(
            uploads
                .get("Uploads")
                .is_none_or(|listed| listed.as_array().is_some_and(Vec::is_empty)),
            "uploads left: {uploads}"
        );
    }
}

/// `CompleteMultipartUpload`'s arguments choosing `parts` of `upload`.
fn completion(key: &str, upload: &str, parts: &[(u32, String)]) -> Value {
    let parts: Vec<Value> = parts
        .iter()
        .map(|(number, etag)| json!({"PartNumber": number, "ETag": etag}))
        .collect();
    json!({"Bucket": BUCKET, "Key": key, "UploadId": upload,
           "MultipartUpload": {"Parts": parts}})
}

/// The names in `dir` (none if it does not exist), sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Everything under `dir`, files and folders, at any depth (nothing if it
/// does not exist).
fn everything_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            found.push(path.clone());
            if path.is_dir() {
                walk(&path, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, &mut found);
    found
}

/// Asserts that within 5 s nothing is left under a local store's
/// `<data>/blobs/uploads/` (`after` what, for the message).
async fn assert_no_upload_left(data_dir: &Path, after: &str) {
    let uploads = data_dir.join("blobs/uploads");
    let empty = eventually(Duration::from_secs(5), || async {
        everything_under(&uploads).is_empty()
    })
    .await;
    assert!(
        empty,
        "left under {} 5 s after {after}: {:?}",
        uploads.display(),
        everything_under(&uploads)
    );
}

/// Where a local store keeps upload `id`'s bytes.
fn upload_dir(data_dir: &Path, id: &str) -> PathBuf {
    data_dir.join("blobs/uploads").join(id)
}

// ---------------------------------------------------------------------------
// 1. Parts in order, out of order, and one sent again.

both_backends!(parts_in_order_complete_without_reading_them_again);
/// Parts of 5 MiB, 5 MiB and 1 MiB + 123 bytes: sent 1, 2, 3 they are
/// (local store) the upload's `content`, every byte of it, and `outboard`,
/// no part of their own; the completion stores the bytes under S3's
/// multipart ETag. Sent 2, 1, 3 (each kept as a part of its own), and sent
/// 1, 2, 3 then part 2 again with other bytes, the completion stores the
/// bytes last sent for each part.
async fn parts_in_order_complete_without_reading_them_again(kind: BackendKind) {
    const SIZES: [usize; 3] = [5 * MIB, 5 * MIB, MIB + 123];
    let total: usize = SIZES.iter().sum();
    let backend = Backend::start(kind, "s3-multipart-order").await;
    within(CASE_LIMIT, async {
        let scratch = tempfile::tempdir().unwrap();
        let data_dir = scratch.path().join("data");
        let mut gateway = GatewayProcess::new(&data_dir, &scratch.path().join("gateway.log"))
            .serving_s3()
            .started(&backend)
            .await;
        let s3 = S3::new(&gateway, key_create(&backend, &data_dir).await);
        s3.ok("create_bucket", json!({"Bucket": BUCKET})).await;

        let content = random_bytes(total);
        let file = scratch.path().join("content.bin");
        std::fs::write(&file, &content).unwrap();
        // (number, offset, length) of each part in `content`.
        let part = |number: u32| {
            let index = number as usize - 1;
            let offset: usize = SIZES[..index].iter().sum();
            (number, offset, SIZES[index])
        };
        let pieces = |number: u32| {
            let (_, offset, length) = part(number);
            &content[offset..offset + length]
        };
        let etag = multipart_etag([pieces(1), pieces(2), pieces(3)]);
        let mut timings = Vec::new();

        // 1, 2, 3: appended to the upload's own file.
        let key = "in-order.bin";
        let upload = s3.create_upload(key).await;
        let etags = s3
            .upload_parts(
                (key, upload.as_str()),
                &file,
                &content,
                &[part(1), part(2), part(3)],
            )
            .await;
        if backend.is_local() {
            let dir = upload_dir(&data_dir, &upload);
            assert_eq!(
                names_in(&dir),
                ["content", "outboard"],
                "what {} holds after parts 1, 2, 3 in order",
                dir.display()
            );
            assert_eq!(
                std::fs::metadata(dir.join("content")).unwrap().len(),
                total as u64,
                "the upload's content file after parts 1, 2, 3"
            );
            assert!(
                std::fs::read(dir.join("content")).unwrap() == content,
                "the upload's content file is not the parts' bytes"
            );
        }
        let seconds = s3.complete((key, &upload), &etags, &content, &etag).await;
        timings.push(("1, 2, 3", seconds));

        // 2, 1, 3: each a part of its own.
        let key = "out-of-order.bin";
        let upload = s3.create_upload(key).await;
        let mut etags = s3
            .upload_parts(
                (key, upload.as_str()),
                &file,
                &content,
                &[part(2), part(1), part(3)],
            )
            .await;
        etags.sort();
        if backend.is_local() {
            let dir = upload_dir(&data_dir, &upload);
            let names = names_in(&dir);
            let kept: Vec<&String> = names
                .iter()
                .filter(|name| name.starts_with("part-"))
                .collect();
            assert_eq!(
                kept.len(),
                3,
                "parts 2, 1, 3 each kept as a part of its own in {}: {names:?}",
                dir.display()
            );
            for (number, name) in (1..).zip(&kept) {
                assert!(name.starts_with(&format!("part-{number:05}-")), "{names:?}");
            }
        }
        let seconds = s3.complete((key, &upload), &etags, &content, &etag).await;
        timings.push(("2, 1, 3", seconds));

        // 1, 2, 3, then 2 again with other bytes.
        let key = "part-two-again.bin";
        let upload = s3.create_upload(key).await;
        let mut etags = s3
            .upload_parts(
                (key, upload.as_str()),
                &file,
                &content,
                &[part(1), part(2), part(3)],
            )
            .await;
        let again = random_bytes(SIZES[1]);
        let again_file = scratch.path().join("again.bin");
        std::fs::write(&again_file, &again).unwrap();
        let resent = s3
            .upload_parts(
                (key, upload.as_str()),
                &again_file,
                &again,
                &[(2, 0, SIZES[1])],
            )
            .await;
        etags[1] = resent[0].clone();
        if backend.is_local() {
            let dir = upload_dir(&data_dir, &upload);
            let names = names_in(&dir);
            assert!(
                names.contains(&"content".to_owned()) && names.contains(&"outboard".to_owned()),
                "the upload's own file in {}: {names:?}",
                dir.display()
            );
            let kept: Vec<&String> = names
                .iter()
                .filter(|name| name.starts_with("part-"))
                .collect();
            assert!(
                kept.len() == 1 && kept[0].starts_with("part-00002-"),
                "part 2 sent again is a part of its own in {}: {names:?}",
                dir.display()
            );
        }
        let expected = [pieces(1), again.as_slice(), pieces(3)].concat();
        let expected_etag = multipart_etag([pieces(1), again.as_slice(), pieces(3)]);
        let seconds = s3
            .complete((key, &upload), &etags, &expected, &expected_etag)
            .await;
        timings.push(("1, 2, 3 and 2 again", seconds));

        eprintln!("{kind:?}: CompleteMultipartUpload of {total} bytes sent {timings:?} (seconds)");
        s3.assert_no_uploads().await;
        assert_eq!(gateway.uploads_in_progress().await, 0.0);
        if backend.is_local() {
            assert_no_upload_left(&data_dir, "every upload completed").await;
        }
        gateway.assert_no_panic();
        gateway.kill().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 2. A gateway killed in the middle of a completion.

/// How the parts of an upload are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    /// Last to first: every part kept as one of its own, and the
    /// completion streams them through an instance.
    Reversed,
    /// First to last: appended as they come, and the completion reads
    /// none of them again.
    InOrder,
}

both_backends!(a_killed_completion_completes_on_retry);
/// An upload of 96 MiB in 8 MiB parts: its CompleteMultipartUpload cut by
/// SIGKILL of the gateway (300 ms into it when the parts came in reverse,
/// as soon as it leaves when they came in order), then asked again with
/// the same list of a gateway restarted on the same data directory,
/// database and blob store, stores the object whole (SHA-256 and S3's
/// multipart ETag). Parts in reverse: the completion was still under way
/// at the kill, and the one asked again succeeds. Parts in order: the
/// completion may have finished before the kill, and the one asked again
/// may then find no such upload, the object being there whole. After
/// both, no upload is left in progress and (local store) nothing under
/// `<data>/blobs/uploads/`.
async fn a_killed_completion_completes_on_retry(kind: BackendKind) {
    const PART: usize = 8 * MIB;
    const PARTS: u32 = 12;
    const SIZE: usize = PART * PARTS as usize;
    let backend = Backend::start(kind, "s3-multipart-killed").await;
    within(CASE_LIMIT, async {
        let scratch = tempfile::tempdir().unwrap();
        let data_dir = scratch.path().join("data");
        let mut gateway = GatewayProcess::new(&data_dir, &scratch.path().join("gateway.log"))
            .serving_s3()
            .started(&backend)
            .await;
        let s3 = S3::new(&gateway, key_create(&backend, &data_dir).await);
        s3.ok("create_bucket", json!({"Bucket": BUCKET})).await;

        for order in [Order::Reversed, Order::InOrder] {
            let started = Instant::now();
            let key = match order {
                Order::Reversed => "reversed.bin",
                Order::InOrder => "in-order.bin",
            };
            let content = random_bytes(SIZE);
            let file = scratch.path().join(key);
            std::fs::write(&file, &content).unwrap();
            let mut parts: Vec<(u32, usize, usize)> = (1..=PARTS)
                .map(|number| (number, (number as usize - 1) * PART, PART))
                .collect();
            if order == Order::Reversed {
                parts.reverse();
            }
            let upload = s3.create_upload(key).await;
            let mut etags = s3
                .upload_parts((key, upload.as_str()), &file, &content, &parts)
                .await;
            etags.sort();
            let etag = multipart_etag(content.chunks(PART));
            let params = completion(key, &upload, &etags);
            let sent_after = started.elapsed();

            // The completion, killed.
            let mut completing = s3.start(&[("complete_multipart_upload", params.clone())], true);
            let sending = completing.next(Duration::from_secs(30)).await;
            assert_eq!(
                sending,
                Some(json!({"sending": "CompleteMultipartUpload"})),
                "calls.py's first line"
            );
            let sent = Instant::now();
            if order == Order::Reversed {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            gateway.kill().await;
            let killed_after = sent.elapsed();
            let lines = completing.finish(Duration::from_secs(20)).await;
            let cut = lines
                .iter()
                .find(|line| line.get("ok").is_some() || line.get("error").is_some())
                .cloned()
                .unwrap_or(Value::Null);
            eprintln!(
                "{kind:?}, parts {order:?}: the completion killed {killed_after:?} after it \
                 was sent: {cut}"
            );
            if order == Order::Reversed {
                assert!(
                    cut.get("ok").is_none(),
                    "the completion of parts sent in reverse finished within {killed_after:?}, \
                     before the kill; the test's timing is off: {cut}"
                );
                assert!(
                    cut["error"] == "transport"
                        && !cut["message"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("Could not connect"),
                    "the completion was not cut under way by the kill: {cut}"
                );
            }

            // Asked again of a gateway restarted on the same data.
            gateway.restart(&backend).await;
            let retried = s3.call("complete_multipart_upload", params).await;
            eprintln!(
                "{kind:?}, parts {order:?}: the completion asked again after the restart: \
                 {retried}"
            );
            match order {
                Order::Reversed => assert!(
                    retried.get("ok").is_some(),
                    "the completion asked again after the kill: {retried}\ngateway log:\n{}",
                    gateway.log_text()
                ),
                Order::InOrder => assert!(
                    retried.get("ok").is_some() || retried["error"] == "NoSuchUpload",
                    "the completion asked again after the kill: {retried}\ngateway log:\n{}",
                    gateway.log_text()
                ),
            }
            if retried.get("ok").is_some() {
                assert_eq!(
                    retried["ok"]["ETag"],
                    etag.as_str(),
                    "the completion's ETag"
                );
            }
            s3.assert_stored(key, &content, &etag).await;
            eprintln!(
                "{kind:?}, parts {order:?}: {SIZE} bytes sent in {sent_after:?}, stored in {:?}",
                started.elapsed()
            );
        }

        s3.assert_no_uploads().await;
        let none_left = eventually(Duration::from_secs(5), || async {
            gateway.uploads_in_progress().await == 0.0
        })
        .await;
        assert!(
            none_left,
            "wasm_storage_uploads_in_progress is {} 5 s after both completed",
            gateway.uploads_in_progress().await
        );
        if backend.is_local() {
            assert_no_upload_left(&data_dir, "both uploads completed").await;
        }
        gateway.assert_no_panic();
        gateway.kill().await;
    })
    .await;
}
