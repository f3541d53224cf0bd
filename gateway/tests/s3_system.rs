//! The S3 API (`--s3-listen`) as part of a system, each test against real
//! gateways on free loopback ports: one gateway's blob store kept in
//! another's S3 API; 6 GiB through multipart with the AWS CLI, read back
//! by ranges past 4 GiB; a multipart upload carried across a restart and
//! across two gateways on one PostgreSQL (parts replaced, completion
//! raced), a gateway killed while it completes one, and multipart on a
//! gateway over our own S3; abandoned uploads collected, and uploads kept
//! alive by their parts; and the keys (the open tree's, a user's, revoked,
//! a removed user's, presigned URLs, sealed under another master key).
//!
//! The S3 calls go through boto3 (`tests/s3_system/s3call.py`, one call a
//! run, its outcome as JSON) and the AWS CLI, from `.tools/venv`:
//! `scripts/install-test-deps.sh` installs them.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::os::unix::fs::{FileExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::backends::eventually;
use common::clients::{clean, run};
use common::{multipart_etag, random_bytes, roomy_dir, sha256_hex};
use futures_util::StreamExt as _;
use gateway::AppState;
use gateway::config::Config;
use gateway::s3::MasterKey;
use md5::Digest as _;
use reqwest::header;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use volume::{BlobUrl, Owner, S3Settings};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const PASSWORD: &str = "a long s3 password";

// ---------------------------------------------------------------------------
// A gateway in this process serving REST and S3, on any data directory.

struct Gateway {
    addr: SocketAddr,
    /// `None` without `--s3-listen`.
    s3_addr: Option<SocketAddr>,
    state: AppState,
    config: Config,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl Gateway {
    /// A gateway on `data_dir` (made if missing), defaults changed by
    /// `configure`, both listeners (S3 unless `configure` turns it off) on
    /// free loopback ports.
    async fn start(data_dir: &Path, configure: impl FnOnce(&mut Config)) -> Self {
        common::show_server_warnings();
        let mut config = Config::for_data_dir(data_dir);
        config.instances = 2;
        config.s3_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        configure(&mut config);
        let state = gateway::start(&config).await.unwrap();
        let listener = TcpListener::bind(config.listen).await.unwrap();
        let s3_listener = match config.s3_listen {
            Some(s3_listen) => Some(TcpListener::bind(s3_listen).await.unwrap()),
            None => None,
        };
        let addr = listener.local_addr().unwrap();
        let s3_addr = s3_listener.as_ref().map(|l| l.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(gateway::serve_with_s3(
            listener,
            s3_listener,
            state.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Self {
            addr,
            s3_addr,
            state,
            config,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(300))
                .build()
                .unwrap(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.s3_addr.unwrap())
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn accounts(&self) -> &volume::Accounts {
        self.state.auth.accounts()
    }

    /// A new key for `owner`, sealed under this gateway's master key file.
    async fn key(&self, owner: Owner, label: &str) -> Key {
        let master = MasterKey::load_or_create(&self.config.s3_master_key_path()).unwrap();
        let (id, secret) = gateway::s3::keys::create_key(self.accounts(), &master, owner, label)
            .await
            .unwrap();
        Key::Signed(id, secret)
    }

    /// `GET /files/{path}` with `range` (`first-last`) and `token`, if given.
    async fn get_file(
        &self,
        path: &str,
        range: Option<(u64, u64)>,
        token: Option<&str>,
    ) -> reqwest::Response {
        let mut request = self.client.get(self.url(&format!("/files/{path}")));
        if let Some((first, last)) = range {
            request = request.header(header::RANGE, format!("bytes={first}-{last}"));
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap()
    }

    /// The largest linear memory of any instance now.
    async fn max_instance_memory(&self) -> u64 {
        let pool: Value = self
            .client
            .get(self.url("/admin/pool"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        pool["instances"]
            .as_array()
            .unwrap()
            .iter()
            .map(|instance| instance["memory_bytes"].as_u64().unwrap())
            .max()
            .unwrap()
    }

    /// Shut down gracefully and wait until both listeners have stopped.
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// The clients.

#[derive(Clone, Debug)]
enum Key {
    Signed(String, String),
    Anonymous,
}

impl Key {
    fn id(&self) -> &str {
        match self {
            Self::Signed(id, _) => id,
            Self::Anonymous => panic!("an anonymous key has no id"),
        }
    }
}

fn tool(name: &str) -> PathBuf {
    testsupport::find_tool(name).unwrap()
}

/// The command of one boto3 call (see [`s3`]).
fn s3_command(endpoint: &str, key: &Key, operation: &str, params: &Value) -> Command {
    let mut command = clean(&tool("python3"));
    command
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/s3_system/s3call.py"))
        .args(["--endpoint", endpoint]);
    match key {
        // `=`: a secret may begin with `-`.
        Key::Signed(id, secret) => {
            command.args([format!("--access-key={id}"), format!("--secret={secret}")])
        }
        Key::Anonymous => command.arg("--anonymous"),
    };
    command.arg(operation).arg(params.to_string());
    command
}

/// One boto3 call against `endpoint`: `{"ok": …}` or `{"error": CODE,
/// "status": N, …}`.
async fn s3(endpoint: &str, key: &Key, operation: &str, params: Value) -> Value {
    let command = s3_command(endpoint, key, operation, &params);
    let output = run(command, Duration::from_secs(180)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "s3call {operation} failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|error| panic!("{error}: {stdout}"))
}

/// The result of a call that must succeed.
async fn s3_ok(endpoint: &str, key: &Key, operation: &str, params: Value) -> Value {
    let answer = s3(endpoint, key, operation, params.clone()).await;
    assert!(answer.get("ok").is_some(), "{operation} {params}: {answer}");
    answer["ok"].clone()
}

/// A call retried, as S3 clients do, while the gateway says SlowDown (a
/// loaded machine's one instance may still be busy); its last answer.
async fn s3_patient(endpoint: &str, key: &Key, operation: &str, params: Value) -> Value {
    let mut answer = Value::Null;
    for _ in 0..50 {
        answer = s3(endpoint, key, operation, params.clone()).await;
        if answer["error"] != "SlowDown" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    answer
}

/// The error (code, status) of a call that must fail.
async fn s3_err(endpoint: &str, key: &Key, operation: &str, params: Value) -> (String, u64) {
    let answer = s3(endpoint, key, operation, params.clone()).await;
    assert!(
        answer.get("error").is_some(),
        "{operation} {params} succeeded: {answer}"
    );
    (
        answer["error"].as_str().unwrap().to_owned(),
        answer["status"].as_u64().unwrap(),
    )
}

/// Upload part `number` of `bytes` (written to a file in `dir`) and return
/// its ETag.
async fn upload_part(
    endpoint: &str,
    key: &Key,
    dir: &Path,
    (bucket, object, upload): (&str, &str, &str),
    number: u32,
    bytes: &[u8],
) -> String {
    let file = dir.join(format!("part-{number}"));
    std::fs::write(&file, bytes).unwrap();
    let answer = s3_ok(
        endpoint,
        key,
        "upload_part",
        json!({"Bucket": bucket, "Key": object, "UploadId": upload, "PartNumber": number,
               "Body": {"file": file}}),
    )
    .await;
    std::fs::remove_file(&file).unwrap();
    let etag = answer["ETag"].as_str().unwrap().to_owned();
    assert_eq!(
        etag.trim_matches('"'),
        hex::encode(md5::Md5::digest(bytes)),
        "part {number}'s ETag"
    );
    etag
}

fn completed(parts: &[(u32, String)]) -> Value {
    json!({"Parts": parts.iter().map(|(number, etag)| json!({"PartNumber": number, "ETag": etag}))
        .collect::<Vec<_>>()})
}

/// Bounds a whole test.
async fn within<F: std::future::Future<Output = ()>>(limit: Duration, test: F) {
    tokio::time::timeout(limit, test)
        .await
        .unwrap_or_else(|_| panic!("the test took longer than {limit:?}"));
}

// ---------------------------------------------------------------------------
// 1. A gateway's blob store in another gateway's S3 API.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_keeps_its_blobs_in_our_own_s3() {
    within(Duration::from_secs(300), async {
        let dir_a = tempfile::tempdir().unwrap();
        let dir_b = tempfile::tempdir().unwrap();
        let a = Gateway::start(dir_a.path(), |_| {}).await;
        let key = a.key(Owner::OPEN, "blob store").await;
        s3_ok(
            &a.endpoint(),
            &key,
            "create_bucket",
            json!({"Bucket": "store"}),
        )
        .await;

        let Key::Signed(id, secret) = key.clone() else {
            unreachable!()
        };
        let b = Gateway::start(dir_b.path(), |config| {
            config.blob_store = Some(BlobUrl::S3 {
                bucket: "store".into(),
                prefix: "blobs".into(),
            });
            config.s3 = S3Settings {
                endpoint: Some(a.endpoint()),
                region: Some("us-east-1".into()),
                access_key_id: Some(id),
                secret_access_key: Some(secret),
                allow_http: Some(true),
            };
            config.orphan_grace = Duration::from_secs(1);
            config.removal_lease = Duration::from_secs(1);
            config.gc_interval = Duration::from_millis(500);
            config.s3_listen = None;
        })
        .await;

        // Sizes on both sides of the object store's single-PUT limit
        // (8 MiB; past it, B uploads the blob to A in parts).
        let files: Vec<(String, Vec<u8>)> = [0usize, 1, 70_000, 3 << 20, (20 << 20) + 3]
            .iter()
            .map(|&len| (format!("dir/f{len}.bin"), random_bytes(len)))
            .collect();
        for (path, bytes) in &files {
            let answer = b
                .client
                .put(b.url(&format!("/files/{path}")))
                .body(bytes.clone())
                .send()
                .await
                .unwrap();
            assert!(
                answer.status().is_success(),
                "PUT {path} on B: {}",
                answer.status()
            );
        }
        for (path, bytes) in &files {
            let answer = b.get_file(path, None, None).await;
            assert_eq!(answer.status(), 200, "GET {path} on B");
            let got = answer.bytes().await.unwrap();
            assert!(got[..] == bytes[..], "GET {path} on B: other bytes");
            // A range, read from A's S3 through B's object store.
            if bytes.len() > 100 {
                let len = bytes.len() as u64;
                let answer = b.get_file(path, Some((len - 100, len - 1)), None).await;
                assert_eq!(answer.status(), 206, "ranged GET {path} on B");
                assert!(answer.bytes().await.unwrap()[..] == bytes[bytes.len() - 100..]);
            }
        }

        // The same content again, at another path: B's conditional PUT of a
        // blob A already holds is refused (412), which B takes as stored.
        let (path, bytes) = &files[2];
        let again = b
            .client
            .put(b.url("/files/again/copy.bin"))
            .body(bytes.clone())
            .send()
            .await
            .unwrap();
        assert!(
            again.status().is_success(),
            "PUT again on B: {}",
            again.status()
        );
        let answer = b.get_file("again/copy.bin", None, None).await;
        assert_eq!(answer.status(), 200);
        assert!(
            answer.bytes().await.unwrap()[..] == bytes[..],
            "{path} again"
        );
        let digest = sha256_hex(bytes);
        let (code, status) = s3_err(
            &a.endpoint(),
            &key,
            "put_object",
            json!({"Bucket": "store", "Key": format!("blobs/{}/{digest}", &digest[..2]),
                   "IfNoneMatch": "*", "Body": {"hex": "00"}}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("PreconditionFailed", 412));

        // Every blob is an object of A's bucket named by its SHA-256: its
        // content (then its BLAKE3 outboard), read through A's S3 and A's
        // /files/.
        let listed = s3_ok(
            &a.endpoint(),
            &key,
            "list_objects_v2",
            json!({"Bucket": "store", "Prefix": "blobs/"}),
        )
        .await;
        let objects: std::collections::HashMap<String, u64> = listed["Contents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["Key"].as_str().unwrap().to_owned(),
                    o["Size"].as_u64().unwrap(),
                )
            })
            .collect();
        for (path, bytes) in &files {
            let digest = sha256_hex(bytes);
            let name = format!("blobs/{}/{digest}", &digest[..2]);
            let size = *objects
                .get(&name)
                .unwrap_or_else(|| panic!("{path}: no object {name} in A's bucket: {objects:?}"));
            assert!(size >= bytes.len() as u64, "{name}: {size} bytes");
            if bytes.is_empty() {
                continue;
            }
            let last = bytes.len() - 1;
            let got = s3_ok(
                &a.endpoint(),
                &key,
                "get_object",
                json!({"Bucket": "store", "Key": name, "Range": format!("bytes=0-{last}")}),
            )
            .await;
            assert_eq!(
                got["Body"]["sha256"],
                digest.as_str(),
                "{name} through A's S3"
            );
            let answer = a
                .get_file(&format!("store/{name}"), Some((0, last as u64)), None)
                .await;
            assert!(answer.status().is_success(), "{name} through A's /files/");
            assert!(answer.bytes().await.unwrap()[..] == bytes[..]);
        }

        // Deleted through B (and B's trash emptied), a blob leaves A's
        // bucket once collected.
        let (path, bytes) = &files[3];
        let answer = b
            .client
            .delete(b.url(&format!("/files/{path}")))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 204, "DELETE {path} on B");
        // In B's trash it keeps its blob; emptied, the blob goes.
        let emptied = b.client.delete(b.url("/trash")).send().await.unwrap();
        assert_eq!(emptied.status(), 200, "DELETE /trash on B");
        let digest = sha256_hex(bytes);
        let name = format!("store/blobs/{}/{digest}", &digest[..2]);
        let gone = eventually(Duration::from_secs(20), || async {
            a.get_file(&name, None, None).await.status() == 404
        })
        .await;
        assert!(
            gone,
            "{name} is still in A's bucket 20 s after its file was deleted"
        );
        let answer = b.get_file(&files[4].0, None, None).await;
        assert_eq!(answer.status(), 200);
        assert!(answer.bytes().await.unwrap()[..] == files[4].1[..]);

        b.stop().await;
        a.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 2. 6 GiB through multipart with the AWS CLI.

/// A 6 GiB file, sparse but for random 64 MiB blocks at the start, across
/// the 4 GiB boundary and at the end.
fn six_gib_file(path: &Path) -> (u64, Vec<(u64, Vec<u8>)>) {
    let size = 6 * GIB;
    let file = std::fs::File::create(path).unwrap();
    file.set_len(size).unwrap();
    let blocks: Vec<(u64, Vec<u8>)> = [0, 4 * GIB - 32 * MIB, size - 64 * MIB]
        .into_iter()
        .map(|at| (at, random_bytes(64 << 20)))
        .collect();
    for (at, block) in &blocks {
        file.write_all_at(block, *at).unwrap();
    }
    file.sync_all().unwrap();
    (size, blocks)
}

/// Bytes `first..=last` of the file `six_gib_file` made.
fn expected_range(blocks: &[(u64, Vec<u8>)], first: u64, last: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; usize::try_from(last + 1 - first).unwrap()];
    for (start, block) in blocks {
        let end = start + block.len() as u64;
        let (from, to) = (first.max(*start), (last + 1).min(end));
        if from < to {
            bytes[usize::try_from(from - first).unwrap()..usize::try_from(to - first).unwrap()]
                .copy_from_slice(
                    &block[usize::try_from(from - start).unwrap()
                        ..usize::try_from(to - start).unwrap()],
                );
        }
    }
    bytes
}

/// The ETag of `six_gib_file`'s content uploaded in 64 MiB parts (the
/// MD5 of a part of zeros computed once).
fn expected_etag(size: u64, blocks: &[(u64, Vec<u8>)]) -> String {
    const PART: u64 = 64 * MIB;
    let zeros = md5::Md5::digest(vec![0u8; PART as usize]);
    let mut digests = Vec::new();
    for index in 0..size / PART {
        let at = index * PART;
        let touched = blocks
            .iter()
            .any(|(start, block)| *start < at + PART && at < start + block.len() as u64);
        if touched {
            digests.extend_from_slice(&md5::Md5::digest(expected_range(blocks, at, at + PART - 1)));
        } else {
            digests.extend_from_slice(&zeros);
        }
    }
    format!(
        "\"{}-{}\"",
        hex::encode(md5::Md5::digest(&digests)),
        size / PART
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn six_gib_through_multipart_with_the_aws_cli() {
    within(Duration::from_secs(600), async {
        let work = tempfile::Builder::new()
            .prefix("s3-system-6g")
            .tempdir_in("/var/tmp")
            .unwrap();
        let source = work.path().join("six.bin");
        let (size, blocks) = six_gib_file(&source);
        // The parts (sent 4 at a time, so kept apart) and the blob made of
        // them at completion are on disk at once: twice the file.
        let Some(room) = roomy_dir(2 * size + GIB) else {
            return;
        };
        let data = room.path().join("data");
        let gateway = Gateway::start(&data, |_| {}).await;
        let key = gateway.key(Owner::OPEN, "aws").await;
        s3_ok(&gateway.endpoint(), &key, "create_bucket", json!({"Bucket": "big"})).await;

        let config = work.path().join("aws-config");
        std::fs::write(
            &config,
            "[default]\nregion = us-east-1\ns3 =\n  multipart_threshold = 64MB\n  multipart_chunksize = 64MB\n  max_concurrent_requests = 4\n  addressing_style = path\n",
        )
        .unwrap();
        std::fs::write(work.path().join("aws-credentials"), "").unwrap();
        let mut aws = clean(&tool("aws"));
        aws.env("AWS_CONFIG_FILE", &config)
            .env(
                "AWS_SHARED_CREDENTIALS_FILE",
                work.path().join("aws-credentials"),
            )
            .env("AWS_ACCESS_KEY_ID", key.id())
            .env("AWS_SECRET_ACCESS_KEY", match &key {
                Key::Signed(_, secret) => secret,
                Key::Anonymous => unreachable!(),
            })
            .env("AWS_MAX_ATTEMPTS", "1")
            .args(["--endpoint-url", &gateway.endpoint()])
            .args(["s3", "cp", "--no-progress"])
            .arg(&source)
            .arg("s3://big/six.bin");
        let started = Instant::now();
        let output = run(aws, Duration::from_secs(420)).await;
        eprintln!("aws s3 cp of 6 GiB: {:?}", started.elapsed());
        assert!(
            output.status.success(),
            "aws s3 cp failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::remove_file(&source).unwrap();

        let endpoint = gateway.endpoint();
        let head = s3_ok(&endpoint, &key, "head_object", json!({"Bucket": "big", "Key": "six.bin"}))
            .await;
        assert_eq!(head["ContentLength"], size, "{head}");
        assert_eq!(head["ETag"], expected_etag(size, &blocks).as_str(), "{head}");

        // The last byte, and 200 bytes across 4 GiB, through S3 and /files/.
        for (first, last) in [(size - 1, size - 1), (4 * GIB - 100, 4 * GIB + 99), (0, 99)] {
            let expected = expected_range(&blocks, first, last);
            let got = s3_ok(
                &endpoint,
                &key,
                "get_object",
                json!({"Bucket": "big", "Key": "six.bin", "Range": format!("bytes={first}-{last}")}),
            )
            .await;
            assert_eq!(got["ContentLength"], last - first + 1, "{first}-{last}");
            assert_eq!(
                got["ContentRange"],
                format!("bytes {first}-{last}/{size}").as_str()
            );
            assert_eq!(got["Body"]["hex"], hex::encode(&expected).as_str(), "S3 {first}-{last}");
            let answer = gateway.get_file("big/six.bin", Some((first, last)), None).await;
            assert_eq!(answer.status(), 206, "/files/ {first}-{last}");
            assert_eq!(
                answer.headers()[header::CONTENT_RANGE],
                format!("bytes {first}-{last}/{size}").as_str()
            );
            assert!(
                answer.bytes().await.unwrap()[..] == expected[..],
                "/files/ {first}-{last}"
            );
        }
        // The suffix form, through S3.
        let got = s3_ok(
            &endpoint,
            &key,
            "get_object",
            json!({"Bucket": "big", "Key": "six.bin", "Range": "bytes=-1"}),
        )
        .await;
        assert_eq!(
            got["Body"]["hex"],
            hex::encode(expected_range(&blocks, size - 1, size - 1)).as_str()
        );

        // Its size in listings, past 32 bits.
        let listed = s3_ok(&endpoint, &key, "list_objects_v2", json!({"Bucket": "big"})).await;
        assert_eq!(listed["Contents"][0]["Size"], size, "{listed}");
        let listed = s3_ok(&endpoint, &key, "list_objects", json!({"Bucket": "big"})).await;
        assert_eq!(listed["Contents"][0]["Size"], size, "{listed}");
        let answer = gateway
            .client
            .head(gateway.url("/files/big/six.bin"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.headers()[header::CONTENT_LENGTH], size.to_string().as_str());

        // A part copied from a range across 4 GiB and one from the end.
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "big", "Key": "copied.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap();
        let ranges = [
            (4 * GIB - 3 * MIB, 4 * GIB + 3 * MIB - 1),
            (size - 1000, size - 1),
        ];
        let mut etags = Vec::new();
        let mut expected = Vec::new();
        for (number, (first, last)) in (1..).zip(ranges) {
            let copied = s3_ok(
                &endpoint,
                &key,
                "upload_part_copy",
                json!({"Bucket": "big", "Key": "copied.bin", "UploadId": upload,
                       "PartNumber": number, "CopySource": {"Bucket": "big", "Key": "six.bin"},
                       "CopySourceRange": format!("bytes={first}-{last}")}),
            )
            .await;
            let bytes = expected_range(&blocks, first, last);
            assert_eq!(
                copied["CopyPartResult"]["ETag"],
                format!("\"{}\"", hex::encode(md5::Md5::digest(&bytes))).as_str(),
                "part {number} copied from {first}-{last}"
            );
            etags.push((number, copied["CopyPartResult"]["ETag"].as_str().unwrap().to_owned()));
            expected.extend_from_slice(&bytes);
        }
        s3_ok(
            &endpoint,
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "big", "Key": "copied.bin", "UploadId": upload,
                   "MultipartUpload": completed(&etags)}),
        )
        .await;
        let got = s3_ok(&endpoint, &key, "get_object", json!({"Bucket": "big", "Key": "copied.bin"}))
            .await;
        assert_eq!(got["Body"]["len"], expected.len());
        assert_eq!(got["Body"]["sha256"], sha256_hex(&expected).as_str());

        let largest = gateway.max_instance_memory().await;
        eprintln!("largest instance: {largest} bytes");
        assert!(largest <= 40 * MIB, "an instance of {largest} bytes");

        // No parts left behind; the object goes with a DELETE.
        let uploads = s3_ok(&endpoint, &key, "list_multipart_uploads", json!({"Bucket": "big"})).await;
        assert!(uploads.get("Uploads").is_none(), "{uploads}");
        for name in ["six.bin", "copied.bin"] {
            s3_ok(&endpoint, &key, "delete_object", json!({"Bucket": "big", "Key": name})).await;
        }
        gateway.stop().await;
        drop(work);
    })
    .await;
}

// ---------------------------------------------------------------------------
// 3. A multipart upload survives a restart.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multipart_upload_survives_a_restart() {
    within(Duration::from_secs(180), async {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let scratch = tempfile::tempdir().unwrap();
        let parts: Vec<Vec<u8>> = vec![
            random_bytes(5 << 20),
            random_bytes((5 << 20) + 1),
            random_bytes(12345),
        ];
        let first = Gateway::start(&data, |_| {}).await;
        let key = first.key(Owner::OPEN, "restart").await;
        let endpoint = first.endpoint();
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "keep"})).await;
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "keep", "Key": "a/b.bin", "Metadata": {"colour": "blue"},
                   "ContentType": "application/x-test"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let target = ("keep", "a/b.bin", upload.as_str());
        let mut etags = Vec::new();
        for (number, bytes) in (1..).zip(&parts[..2]) {
            etags.push((
                number,
                upload_part(&endpoint, &key, scratch.path(), target, number, bytes).await,
            ));
        }
        first.stop().await;

        let second = Gateway::start(&data, |_| {}).await;
        let endpoint = second.endpoint();
        let listed = s3_ok(
            &endpoint,
            &key,
            "list_parts",
            json!({"Bucket": "keep", "Key": "a/b.bin", "UploadId": upload}),
        )
        .await;
        let numbers: Vec<u64> = listed["Parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|part| part["PartNumber"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, [1, 2], "{listed}");
        etags.push((
            3,
            upload_part(&endpoint, &key, scratch.path(), target, 3, &parts[2]).await,
        ));
        let done = s3_ok(
            &endpoint,
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "keep", "Key": "a/b.bin", "UploadId": upload,
                   "MultipartUpload": completed(&etags)}),
        )
        .await;
        let etag = multipart_etag(parts.iter().map(Vec::as_slice));
        assert_eq!(done["ETag"], etag.as_str(), "{done}");

        let whole = parts.concat();
        let got = s3_ok(
            &endpoint,
            &key,
            "get_object",
            json!({"Bucket": "keep", "Key": "a/b.bin"}),
        )
        .await;
        assert_eq!(got["Body"]["len"], whole.len());
        assert_eq!(got["Body"]["sha256"], sha256_hex(&whole).as_str());
        assert_eq!(got["ETag"], etag.as_str());
        assert_eq!(got["Metadata"]["colour"], "blue", "{got}");
        assert_eq!(got["ContentType"], "application/x-test", "{got}");
        let answer = second.get_file("keep/a/b.bin", None, None).await;
        assert_eq!(answer.status(), 200);
        assert!(answer.bytes().await.unwrap()[..] == whole[..]);
        let uploads = s3_ok(
            &endpoint,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "keep"}),
        )
        .await;
        assert!(uploads.get("Uploads").is_none(), "{uploads}");
        second.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 4. Across gateways on one PostgreSQL.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multipart_upload_across_two_gateways() {
    within(Duration::from_secs(240), async {
        let postgres = tokio::task::spawn_blocking(|| testsupport::Postgres::start().unwrap())
            .await
            .unwrap();
        let database = postgres.create_database("s3_system").unwrap();
        let shared = tempfile::tempdir().unwrap();
        let blobs = shared.path().join("blobs");
        let master = shared.path().join("master.key");
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let configure = |config: &mut Config| {
            config.database_url = Some(database.parse().unwrap());
            config.blob_store = Some(BlobUrl::Local(blobs.clone()));
            config.s3_master_key_file = Some(master.clone());
        };
        let a = Gateway::start(dir_a.path(), configure).await;
        let b = Gateway::start(dir_b.path(), configure).await;
        let key = a.key(Owner::OPEN, "both").await;
        let scratch = tempfile::tempdir().unwrap();
        let gateways = [a.endpoint(), b.endpoint()];

        s3_ok(
            &gateways[0],
            &key,
            "create_bucket",
            json!({"Bucket": "shared"}),
        )
        .await;
        let head = s3(
            &gateways[1],
            &key,
            "head_bucket",
            json!({"Bucket": "shared"}),
        )
        .await;
        assert!(
            head.get("ok").is_some(),
            "B does not see A's bucket: {head}"
        );
        let created = s3_ok(
            &gateways[0],
            &key,
            "create_multipart_upload",
            json!({"Bucket": "shared", "Key": "together.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let target = ("shared", "together.bin", upload.as_str());
        let parts: Vec<Vec<u8>> = vec![
            random_bytes(5 << 20),
            random_bytes(5 << 20),
            random_bytes((5 << 20) + 7),
            random_bytes(4321),
        ];
        let mut etags = Vec::new();
        for (number, bytes) in (1..).zip(&parts) {
            let through = &gateways[(number as usize - 1) % 2];
            etags.push((
                number,
                upload_part(through, &key, scratch.path(), target, number, bytes).await,
            ));
        }
        // Both see every part and the upload.
        for endpoint in &gateways {
            let listed = s3_ok(
                endpoint,
                &key,
                "list_parts",
                json!({"Bucket": "shared", "Key": "together.bin", "UploadId": upload}),
            )
            .await;
            assert_eq!(
                listed["Parts"].as_array().unwrap().len(),
                4,
                "{endpoint}: {listed}"
            );
            let uploads = s3_ok(
                endpoint,
                &key,
                "list_multipart_uploads",
                json!({"Bucket": "shared"}),
            )
            .await;
            assert_eq!(
                uploads["Uploads"][0]["UploadId"],
                upload.as_str(),
                "{uploads}"
            );
        }
        let done = s3_ok(
            &gateways[1],
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "shared", "Key": "together.bin", "UploadId": upload,
                   "MultipartUpload": completed(&etags)}),
        )
        .await;
        let etag = multipart_etag(parts.iter().map(Vec::as_slice));
        assert_eq!(done["ETag"], etag.as_str(), "{done}");

        let whole = parts.concat();
        let got = s3_ok(
            &gateways[0],
            &key,
            "get_object",
            json!({"Bucket": "shared", "Key": "together.bin"}),
        )
        .await;
        assert_eq!(got["Body"]["len"], whole.len());
        assert_eq!(got["Body"]["sha256"], sha256_hex(&whole).as_str());
        assert_eq!(got["ETag"], etag.as_str());
        let answer = a.get_file("shared/together.bin", None, None).await;
        assert_eq!(answer.status(), 200);
        assert!(answer.bytes().await.unwrap()[..] == whole[..]);
        for endpoint in &gateways {
            let uploads = s3_ok(
                endpoint,
                &key,
                "list_multipart_uploads",
                json!({"Bucket": "shared"}),
            )
            .await;
            assert!(uploads.get("Uploads").is_none(), "{uploads}");
        }
        // The parts are gone from the shared store.
        let parts_dir = blobs.join("uploads").join(&upload);
        let gone = eventually(Duration::from_secs(10), || async { !parts_dir.exists() }).await;
        assert!(gone, "{} is still there", parts_dir.display());

        b.stop().await;
        a.stop().await;
        drop(postgres);
    })
    .await;
}

// ---------------------------------------------------------------------------
// 5. Abandoned uploads expire and are collected.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn abandoned_uploads_expire_and_are_collected() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |config| {
            config.upload_expiry = Duration::from_secs(2);
            config.gc_interval = Duration::from_millis(500);
        })
        .await;
        let key = gateway.key(Owner::OPEN, "expiry").await;
        let endpoint = gateway.endpoint();
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "gone"})).await;
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "gone", "Key": "left.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        upload_part(
            &endpoint,
            &key,
            scratch.path(),
            ("gone", "left.bin", &upload),
            1,
            &random_bytes(5 << 20),
        )
        .await;
        let parts_dir = dir.path().join("blobs").join("uploads").join(&upload);
        assert!(parts_dir.is_dir(), "no {}", parts_dir.display());
        let listed = s3_ok(
            &endpoint,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "gone"}),
        )
        .await;
        assert_eq!(
            listed["Uploads"][0]["UploadId"],
            upload.as_str(),
            "{listed}"
        );

        let started = Instant::now();
        let collected = eventually(Duration::from_secs(20), || async { !parts_dir.exists() }).await;
        assert!(collected, "{} is still there 20 s on", parts_dir.display());
        eprintln!("collected after {:?}", started.elapsed());
        let listed = s3_ok(
            &endpoint,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "gone"}),
        )
        .await;
        assert!(listed.get("Uploads").is_none(), "{listed}");
        let (code, status) = s3_err(
            &endpoint,
            &key,
            "list_parts",
            json!({"Bucket": "gone", "Key": "left.bin", "UploadId": upload}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("NoSuchUpload", 404));
        let (code, status) = s3_err(
            &endpoint,
            &key,
            "upload_part",
            json!({"Bucket": "gone", "Key": "left.bin", "UploadId": upload, "PartNumber": 2,
                   "Body": {"hex": "00"}}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("NoSuchUpload", 404));
        let (code, _) = s3_err(
            &endpoint,
            &key,
            "head_object",
            json!({"Bucket": "gone", "Key": "left.bin"}),
        )
        .await;
        assert_eq!(code, "404");
        gateway.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 6. Keys.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_reach_their_owners_tree_until_revoked() {
    within(Duration::from_secs(180), async {
        let dir = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |_| {}).await;
        let endpoint = gateway.endpoint();

        let master_file = gateway.config.s3_master_key_path();
        let mode = std::fs::metadata(&master_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{} is {mode:o}", master_file.display());

        // No user yet: the open tree's key, and unsigned requests, work.
        let open = gateway.key(Owner::OPEN, "open").await;
        s3_ok(
            &endpoint,
            &open,
            "create_bucket",
            json!({"Bucket": "public"}),
        )
        .await;
        s3_ok(
            &endpoint,
            &open,
            "put_object",
            json!({"Bucket": "public", "Key": "x", "Body": {"hex": "0102"}}),
        )
        .await;
        let listed = s3_ok(&endpoint, &Key::Anonymous, "list_buckets", json!({})).await;
        assert_eq!(listed["Buckets"][0]["Name"], "public", "{listed}");

        // Then a user: the open key and anonymous requests are refused.
        gateway::cli::add_user(gateway.accounts(), "alice", PASSWORD, false, None)
            .await
            .unwrap();
        gateway::cli::add_user(gateway.accounts(), "bob", PASSWORD, false, None)
            .await
            .unwrap();
        let refused = eventually(Duration::from_secs(3), || async {
            s3(&endpoint, &open, "list_buckets", json!({}))
                .await
                .get("error")
                .is_some()
        })
        .await;
        assert!(refused, "the open tree's key still works with a user");
        let (code, status) = s3_err(&endpoint, &open, "list_buckets", json!({})).await;
        assert_eq!((code.as_str(), status), ("InvalidAccessKeyId", 403));
        let (code, status) = s3_err(
            &endpoint,
            &open,
            "get_object",
            json!({"Bucket": "public", "Key": "x"}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("InvalidAccessKeyId", 403));
        let (code, status) = s3_err(&endpoint, &Key::Anonymous, "list_buckets", json!({})).await;
        assert_eq!(status, 403, "anonymous list_buckets with a user: {code}");
        let (code, status) = s3_err(
            &endpoint,
            &Key::Anonymous,
            "put_object",
            json!({"Bucket": "public", "Key": "y", "Body": {"hex": "00"}}),
        )
        .await;
        assert_eq!(status, 403, "anonymous put_object with a user: {code}");

        // A user's key reaches that user's tree, and only it.
        let alice = gateway
            .accounts()
            .user_named("alice")
            .await
            .unwrap()
            .unwrap();
        let bob = gateway.accounts().user_named("bob").await.unwrap().unwrap();
        let alice_key = gateway.key(alice.owner(), "alice").await;
        let bob_key = gateway.key(bob.owner(), "bob").await;
        s3_ok(
            &endpoint,
            &alice_key,
            "create_bucket",
            json!({"Bucket": "photos"}),
        )
        .await;
        s3_ok(
            &endpoint,
            &alice_key,
            "put_object",
            json!({"Bucket": "photos", "Key": "2024/beach.jpg", "Body": {"hex": "cafe"}}),
        )
        .await;
        let token = gateway::cli::create_token(gateway.accounts(), "alice", "test")
            .await
            .unwrap()
            .0;
        let answer = gateway
            .get_file("photos/2024/beach.jpg", None, Some(&token))
            .await;
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.bytes().await.unwrap()[..], [0xca, 0xfe]);
        let bob_token = gateway::cli::create_token(gateway.accounts(), "bob", "test")
            .await
            .unwrap()
            .0;
        let answer = gateway
            .get_file("photos/2024/beach.jpg", None, Some(&bob_token))
            .await;
        assert_eq!(
            answer.status(),
            404,
            "bob reads alice's file through /files/"
        );
        let listed = s3_ok(&endpoint, &bob_key, "list_buckets", json!({})).await;
        assert!(
            listed
                .get("Buckets")
                .is_none_or(|b| b.as_array().unwrap().is_empty()),
            "bob sees {listed}"
        );
        let (code, status) = s3_err(
            &endpoint,
            &bob_key,
            "get_object",
            json!({"Bucket": "photos", "Key": "2024/beach.jpg"}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("NoSuchBucket", 404));
        let listed = s3_ok(&endpoint, &alice_key, "list_buckets", json!({})).await;
        let names: Vec<&str> = listed["Buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["Name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["photos"], "alice sees {listed}");

        // Revoked, a key fails within about a second (its cache).
        assert!(
            gateway
                .accounts()
                .revoke_s3_key(alice_key.id())
                .await
                .unwrap()
        );
        let revoked = Instant::now();
        let failed = eventually(Duration::from_secs(5), || async {
            s3(&endpoint, &alice_key, "list_buckets", json!({}))
                .await
                .get("error")
                .is_some()
        })
        .await;
        let after = revoked.elapsed();
        assert!(failed, "a revoked key still works 5 s on");
        assert!(
            after < Duration::from_millis(2500),
            "a revoked key worked for {after:?}"
        );
        let (code, status) = s3_err(&endpoint, &alice_key, "list_buckets", json!({})).await;
        assert_eq!((code.as_str(), status), ("InvalidAccessKeyId", 403));
        s3_ok(&endpoint, &bob_key, "list_buckets", json!({})).await;

        // A secret sealed under another master key fails cleanly.
        let elsewhere = tempfile::tempdir().unwrap();
        let other = MasterKey::load_or_create(&elsewhere.path().join("other.key")).unwrap();
        let (id, secret) =
            gateway::s3::keys::create_key(gateway.accounts(), &other, alice.owner(), "foreign")
                .await
                .unwrap();
        let foreign = Key::Signed(id, secret);
        let (code, status) = s3_err(&endpoint, &foreign, "list_buckets", json!({})).await;
        assert_eq!((code.as_str(), status), ("InternalError", 500));
        let (code, status) = s3_err(
            &endpoint,
            &foreign,
            "put_object",
            json!({"Bucket": "photos", "Key": "no", "Body": {"hex": "00"}}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("InternalError", 500));
        // And the server goes on serving.
        s3_ok(&endpoint, &bob_key, "list_buckets", json!({})).await;
        let answer = gateway
            .get_file("photos/2024/beach.jpg", None, Some(&token))
            .await;
        assert_eq!(answer.status(), 200);
        assert!(
            gateway
                .get_file("photos/no", None, Some(&token))
                .await
                .status()
                == 404
        );
        gateway.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// More across gateways: a part replaced through the other gateway, a stale
// ETag, completion raced through both, a key revoked on one.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multipart_replaced_parts_and_races_across_gateways() {
    within(Duration::from_secs(240), async {
        let postgres = tokio::task::spawn_blocking(|| testsupport::Postgres::start().unwrap())
            .await
            .unwrap();
        let database = postgres.create_database("s3_system_races").unwrap();
        let shared = tempfile::tempdir().unwrap();
        let blobs = shared.path().join("blobs");
        let master = shared.path().join("master.key");
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let configure = |config: &mut Config| {
            config.database_url = Some(database.parse().unwrap());
            config.blob_store = Some(BlobUrl::Local(blobs.clone()));
            config.s3_master_key_file = Some(master.clone());
        };
        let a = Gateway::start(dir_a.path(), configure).await;
        let b = Gateway::start(dir_b.path(), configure).await;
        gateway::cli::add_user(a.accounts(), "carol", PASSWORD, false, None)
            .await
            .unwrap();
        let carol = a.accounts().user_named("carol").await.unwrap().unwrap();
        let key = a.key(carol.owner(), "both").await;
        let scratch = tempfile::tempdir().unwrap();
        let (ea, eb) = (a.endpoint(), b.endpoint());

        s3_ok(&ea, &key, "create_bucket", json!({"Bucket": "race"})).await;
        let created = s3_ok(
            &eb,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "race", "Key": "r.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let target = ("race", "r.bin", upload.as_str());
        let one = random_bytes(5 << 20);
        let two_old = random_bytes(5 << 20);
        let two_new = random_bytes(3 << 20);
        let e1 = upload_part(&ea, &key, scratch.path(), target, 1, &one).await;
        let e2_old = upload_part(&ea, &key, scratch.path(), target, 2, &two_old).await;
        // Part 2 again, other bytes, through B: it replaces A's.
        let e2_new = upload_part(&eb, &key, scratch.path(), target, 2, &two_new).await;
        let listed = s3_ok(
            &ea,
            &key,
            "list_parts",
            json!({"Bucket": "race", "Key": "r.bin", "UploadId": upload}),
        )
        .await;
        let parts = listed["Parts"].as_array().unwrap();
        assert_eq!(parts.len(), 2, "{listed}");
        assert_eq!(parts[1]["ETag"], e2_new.as_str(), "{listed}");
        assert_eq!(parts[1]["Size"], two_new.len(), "{listed}");

        // The replaced part's ETag no longer completes it.
        let (code, status) = s3_err(
            &ea,
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "race", "Key": "r.bin", "UploadId": upload,
                   "MultipartUpload": completed(&[(1, e1.clone()), (2, e2_old)])}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("InvalidPart", 400));

        // Completed through both at once: the object is the parts, whoever won.
        let body = completed(&[(1, e1), (2, e2_new)]);
        let params = json!({"Bucket": "race", "Key": "r.bin", "UploadId": upload,
                            "MultipartUpload": body});
        let (first, second) = tokio::join!(
            s3(&ea, &key, "complete_multipart_upload", params.clone()),
            s3(&eb, &key, "complete_multipart_upload", params.clone()),
        );
        eprintln!("complete through A: {first}\ncomplete through B: {second}");
        assert!(
            first.get("ok").is_some() || second.get("ok").is_some(),
            "neither completed: {first} {second}"
        );
        for answer in [&first, &second] {
            if let Some(code) = answer.get("error") {
                assert_eq!(code, "NoSuchUpload", "{answer}");
            }
        }
        let whole = [one.as_slice(), two_new.as_slice()].concat();
        for endpoint in [&ea, &eb] {
            let got = s3_ok(
                endpoint,
                &key,
                "get_object",
                json!({"Bucket": "race", "Key": "r.bin"}),
            )
            .await;
            assert_eq!(
                got["Body"]["sha256"],
                sha256_hex(&whole).as_str(),
                "{endpoint}"
            );
        }
        let (code, status) = s3_err(
            &eb,
            &key,
            "abort_multipart_upload",
            json!({"Bucket": "race", "Key": "r.bin", "UploadId": upload}),
        )
        .await;
        assert_eq!((code.as_str(), status), ("NoSuchUpload", 404));

        // Revoked through A's database handle, the key fails on B soon too.
        assert!(a.accounts().revoke_s3_key(key.id()).await.unwrap());
        let revoked = Instant::now();
        let failed = eventually(Duration::from_secs(5), || async {
            s3(&eb, &key, "list_buckets", json!({}))
                .await
                .get("error")
                .is_some()
        })
        .await;
        assert!(failed, "a key revoked through A still works on B 5 s on");
        assert!(
            revoked.elapsed() < Duration::from_millis(2500),
            "{:?}",
            revoked.elapsed()
        );

        b.stop().await;
        a.stop().await;
        drop(postgres);
    })
    .await;
}

// ---------------------------------------------------------------------------
// An upload kept alive by its parts; a presigned URL whose key goes; a
// removed user's key; parts past a quota.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parts_keep_an_upload_alive() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |config| {
            config.upload_expiry = Duration::from_secs(6);
            config.gc_interval = Duration::from_millis(200);
        })
        .await;
        let key = gateway.key(Owner::OPEN, "alive").await;
        let endpoint = gateway.endpoint();
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "alive"})).await;
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "alive", "Key": "slow.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let started = Instant::now();
        let parts: Vec<Vec<u8>> = (0..4)
            .map(|i| random_bytes(if i == 3 { 100 } else { 5 << 20 }))
            .collect();
        let mut etags = Vec::new();
        for (number, bytes) in (1..).zip(&parts) {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            etags.push((
                number,
                upload_part(
                    &endpoint,
                    &key,
                    scratch.path(),
                    ("alive", "slow.bin", &upload),
                    number,
                    bytes,
                )
                .await,
            ));
        }
        assert!(
            started.elapsed() > Duration::from_secs(10),
            "too quick to tell"
        );
        s3_ok(
            &endpoint,
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "alive", "Key": "slow.bin", "UploadId": upload,
                   "MultipartUpload": completed(&etags)}),
        )
        .await;
        let got = s3_ok(
            &endpoint,
            &key,
            "get_object",
            json!({"Bucket": "alive", "Key": "slow.bin"}),
        )
        .await;
        assert_eq!(got["Body"]["sha256"], sha256_hex(&parts.concat()).as_str());
        gateway.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn presigned_urls_and_removed_users() {
    within(Duration::from_secs(180), async {
        let dir = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |_| {}).await;
        let endpoint = gateway.endpoint();
        gateway::cli::add_user(gateway.accounts(), "dave", PASSWORD, false, Some(12 << 20))
            .await
            .unwrap();
        gateway::cli::add_user(gateway.accounts(), "erin", PASSWORD, false, None)
            .await
            .unwrap();
        let dave = gateway
            .accounts()
            .user_named("dave")
            .await
            .unwrap()
            .unwrap();
        let erin = gateway
            .accounts()
            .user_named("erin")
            .await
            .unwrap()
            .unwrap();
        let dave_key = gateway.key(dave.owner(), "dave").await;
        let erin_key = gateway.key(erin.owner(), "erin").await;

        // A presigned GET and PUT work until their key is revoked.
        s3_ok(
            &endpoint,
            &erin_key,
            "create_bucket",
            json!({"Bucket": "pre"}),
        )
        .await;
        s3_ok(
            &endpoint,
            &erin_key,
            "put_object",
            json!({"Bucket": "pre", "Key": "p.txt", "Body": {"hex": "6869"}}),
        )
        .await;
        let get_url = s3_ok(
            &endpoint,
            &erin_key,
            "generate_presigned_url",
            json!({"ClientMethod": "get_object", "Params": {"Bucket": "pre", "Key": "p.txt"},
                   "ExpiresIn": 600}),
        )
        .await;
        let put_url = s3_ok(
            &endpoint,
            &erin_key,
            "generate_presigned_url",
            json!({"ClientMethod": "put_object", "Params": {"Bucket": "pre", "Key": "up.txt"},
                   "ExpiresIn": 600}),
        )
        .await;
        let (get_url, put_url) = (get_url.as_str().unwrap(), put_url.as_str().unwrap());
        let answer = gateway.client.get(get_url).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(&answer.bytes().await.unwrap()[..], b"hi");
        let answer = gateway.client.put(put_url).body("up").send().await.unwrap();
        assert_eq!(answer.status(), 200, "presigned PUT");
        assert!(
            gateway
                .accounts()
                .revoke_s3_key(erin_key.id())
                .await
                .unwrap()
        );
        let refused = eventually(Duration::from_secs(3), || async {
            gateway.client.get(get_url).send().await.unwrap().status() == 403
        })
        .await;
        assert!(
            refused,
            "a presigned GET of a revoked key still works 3 s on"
        );
        let answer = gateway
            .client
            .put(put_url)
            .body("again")
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 403, "presigned PUT of a revoked key");
        let text = answer.text().await.unwrap();
        assert!(text.contains("InvalidAccessKeyId"), "{text}");

        // A removed user's key stops working, and does not come back for
        // a new user of the same name.
        let dave_token = gateway::cli::create_token(gateway.accounts(), "dave", "t")
            .await
            .unwrap()
            .0;
        assert!(gateway.accounts().remove_user("dave").await.unwrap());
        let failed = eventually(Duration::from_secs(3), || async {
            s3(&endpoint, &dave_key, "list_buckets", json!({}))
                .await
                .get("error")
                .is_some()
        })
        .await;
        assert!(failed, "a removed user's key still works 3 s on");
        gateway::cli::add_user(gateway.accounts(), "dave", PASSWORD, false, None)
            .await
            .unwrap();
        let (code, status) = s3_err(&endpoint, &dave_key, "list_buckets", json!({})).await;
        assert_eq!((code.as_str(), status), ("InvalidAccessKeyId", 403));
        let answer = gateway.get_file("quota/", None, Some(&dave_token)).await;
        assert_eq!(answer.status(), 401, "a removed user's token");
        let new_dave = gateway
            .accounts()
            .user_named("dave")
            .await
            .unwrap()
            .unwrap();
        let new_key = gateway.key(new_dave.owner(), "new dave").await;
        let listed = s3_ok(&endpoint, &new_key, "list_buckets", json!({})).await;
        assert!(
            listed
                .get("Buckets")
                .is_none_or(|b| b.as_array().unwrap().is_empty()),
            "the new dave sees {listed}"
        );
        let uploads = s3(
            &endpoint,
            &new_key,
            "list_multipart_uploads",
            json!({"Bucket": "quota"}),
        )
        .await;
        assert!(
            uploads
                .get("ok")
                .is_none_or(|ok| ok.get("Uploads").is_none()),
            "the new dave sees the old dave's uploads: {uploads}"
        );
        gateway.stop().await;
    })
    .await;
}

/// A completion that fails once its answer has begun (200, whitespace while
/// the parts stream) ends in one well-formed error document: boto3 (the AWS
/// CLI's botocore) reads its code, not a bare 500.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_completion_that_fails_late_says_why() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |_| {}).await;
        let endpoint = gateway.endpoint();
        let key = gateway.key(Owner::OPEN, "late").await;
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "late"})).await;
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "late", "Key": "late.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let target = ("late", "late.bin", upload.as_str());
        // Sent out of order, so each is a part of its own that the
        // completion streams (parts sent in order are appended as they come
        // and never read again).
        let second = upload_part(
            &endpoint,
            &key,
            scratch.path(),
            target,
            2,
            &random_bytes(1000),
        )
        .await;
        let first = upload_part(
            &endpoint,
            &key,
            scratch.path(),
            target,
            1,
            &random_bytes(5 << 20),
        )
        .await;
        let etags = vec![(1, first), (2, second)];
        // The second part's blob is gone from the disk (a disk fault): the
        // completion fails after the first part has streamed by.
        let second = files_under(dir.path())
            .into_iter()
            .find(|path| std::fs::metadata(path).is_ok_and(|meta| meta.len() == 1000))
            .expect("the second part's blob");
        std::fs::remove_file(&second).unwrap();
        let answer = s3(
            &endpoint,
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "late", "Key": "late.bin", "UploadId": upload,
                   "MultipartUpload": completed(&etags)}),
        )
        .await;
        eprintln!("completed without a part's blob: {answer}");
        // The parts are the server's to keep: its fault, not the request's.
        assert_eq!(answer["error"], "InternalError", "{answer}");
        // The upload stays, to be aborted (or its part sent again).
        let listed = s3_ok(
            &endpoint,
            &key,
            "list_parts",
            json!({"Bucket": "late", "Key": "late.bin", "UploadId": upload}),
        )
        .await;
        assert_eq!(listed["Parts"].as_array().unwrap().len(), 2, "{listed}");
        s3_ok(
            &endpoint,
            &key,
            "abort_multipart_upload",
            json!({"Bucket": "late", "Key": "late.bin", "UploadId": upload}),
        )
        .await;
        gateway.stop().await;
    })
    .await;
}

/// Parts past the owner's quota are refused as the quota's doing (403
/// QuotaExceeded, as tus and /files/ say), not as a too-large entity.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parts_past_the_quota_are_quota_exceeded() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |_| {}).await;
        let endpoint = gateway.endpoint();
        gateway::cli::add_user(gateway.accounts(), "dave", PASSWORD, false, Some(12 << 20))
            .await
            .unwrap();
        let dave = gateway
            .accounts()
            .user_named("dave")
            .await
            .unwrap()
            .unwrap();
        let dave_key = gateway.key(dave.owner(), "dave").await;
        // Parts past the quota are refused (403 QuotaExceeded), before or at
        // completion; nothing past the quota is stored.
        s3_ok(
            &endpoint,
            &dave_key,
            "create_bucket",
            json!({"Bucket": "quota"}),
        )
        .await;
        let created = s3_ok(
            &endpoint,
            &dave_key,
            "create_multipart_upload",
            json!({"Bucket": "quota", "Key": "big.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let mut refused = None;
        let mut etags = Vec::new();
        for number in 1..=3u32 {
            let file = scratch.path().join("part");
            std::fs::write(&file, random_bytes(5 << 20)).unwrap();
            let answer = s3(
                &endpoint,
                &dave_key,
                "upload_part",
                json!({"Bucket": "quota", "Key": "big.bin", "UploadId": upload,
                       "PartNumber": number, "Body": {"file": file}}),
            )
            .await;
            match answer.get("ok") {
                Some(ok) => etags.push((number, ok["ETag"].as_str().unwrap().to_owned())),
                None => {
                    refused = Some(answer);
                    break;
                }
            }
        }
        let refused = match refused {
            Some(answer) => answer,
            None => {
                s3(
                    &endpoint,
                    &dave_key,
                    "complete_multipart_upload",
                    json!({"Bucket": "quota", "Key": "big.bin", "UploadId": upload,
                           "MultipartUpload": completed(&etags)}),
                )
                .await
            }
        };
        eprintln!("15 MiB of parts under a 12 MiB quota: {refused}");
        assert_eq!(refused["error"], "QuotaExceeded", "{refused}");
        assert_eq!(refused["status"], 403, "{refused}");
        let (code, _) = s3_err(
            &endpoint,
            &dave_key,
            "head_object",
            json!({"Bucket": "quota", "Key": "big.bin"}),
        )
        .await;
        assert_eq!(code, "404");

        gateway.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// The gateway process killed (SIGKILL) while it completes an upload.

/// A gateway child process (the binary) serving S3, on `data_dir`.
struct Process {
    s3_addr: SocketAddr,
    child: std::process::Child,
}

impl Process {
    async fn start(data_dir: &Path) -> Self {
        let addr = SocketAddr::from(([127, 0, 0, 1], testsupport::free_port()));
        let s3_addr = SocketAddr::from(([127, 0, 0, 1], testsupport::free_port()));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.with_extension("log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
            .args(["--listen", &addr.to_string()])
            .args(["--s3-listen", &s3_addr.to_string()])
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--instances", "2"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let process = Self { s3_addr, child };
        let client = reqwest::Client::new();
        let ready = eventually(Duration::from_secs(60), || async {
            client
                .get(format!("http://{addr}/healthz"))
                .send()
                .await
                .is_ok_and(|answer| answer.status().is_success())
        })
        .await;
        assert!(ready, "the gateway did not start");
        process
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.s3_addr)
    }

    fn kill(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `gateway key create` of the open tree on `data_dir`: its one line.
async fn key_create(data_dir: &Path) -> Key {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(["key", "create", "--label", "crash"])
        .env("RUST_LOG", "warn");
    let output = run(command, Duration::from_secs(60)).await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "key create: {output:?}");
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields.len(), 2, "key create printed {stdout:?}");
    Key::Signed(fields[0].to_owned(), fields[1].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_killed_while_completing() {
    within(Duration::from_secs(300), async {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let scratch = tempfile::tempdir().unwrap();
        let first = Process::start(&data).await;
        let key = key_create(&data).await;
        let endpoint = first.endpoint();
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "crash"})).await;
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "crash", "Key": "c.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let target = ("crash", "c.bin", upload.as_str());
        let parts: Vec<Vec<u8>> = (0..8).map(|_| random_bytes(32 << 20)).collect();
        // Sent last first, so the completion streams them all through an
        // instance (parts sent in order are appended as they come and
        // never read again).
        let mut etags = Vec::new();
        for (number, bytes) in (1..9).zip(&parts).rev() {
            etags.push((
                number,
                upload_part(&endpoint, &key, scratch.path(), target, number, bytes).await,
            ));
        }
        etags.reverse();
        let params = json!({"Bucket": "crash", "Key": "c.bin", "UploadId": upload,
                            "MultipartUpload": completed(&etags)});
        // Killed once the object is on its way through an instance (its
        // staged file in tmp/), the client hung up on.
        let completing = tokio::spawn({
            let (endpoint, key, params) = (endpoint.clone(), key.clone(), params.clone());
            async move {
                let mut command = s3_command(&endpoint, &key, "complete_multipart_upload", &params);
                command.env("AWS_MAX_ATTEMPTS", "1");
                run(command, Duration::from_secs(120)).await
            }
        });
        let tmp = data.join("tmp");
        let staging = eventually(Duration::from_secs(60), || async {
            std::fs::read_dir(&tmp).is_ok_and(|mut entries| entries.next().is_some())
        })
        .await;
        assert!(
            staging,
            "the completion never staged a file in {}",
            tmp.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        first.kill();
        let cut = completing.await.unwrap();
        eprintln!(
            "complete, killed: {}",
            String::from_utf8_lossy(&cut.stdout).trim()
        );

        let second = Process::start(&data).await;
        let endpoint = second.endpoint();
        let whole = parts.concat();
        let uploads = s3_ok(
            &endpoint,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "crash"}),
        )
        .await;
        eprintln!("after the restart: {uploads}");
        if uploads.get("Uploads").is_some() {
            // Cut off: the upload is as it was, and completes now.
            let head = s3(
                &endpoint,
                &key,
                "head_object",
                json!({"Bucket": "crash", "Key": "c.bin"}),
            )
            .await;
            assert_eq!(head["error"], "404", "a half-completed object: {head}");
            s3_ok(&endpoint, &key, "complete_multipart_upload", params).await;
        }
        let got = s3_ok(
            &endpoint,
            &key,
            "get_object",
            json!({"Bucket": "crash", "Key": "c.bin"}),
        )
        .await;
        assert_eq!(got["Body"]["len"], whole.len());
        assert_eq!(got["Body"]["sha256"], sha256_hex(&whole).as_str());
        assert_eq!(
            got["ETag"],
            multipart_etag(parts.iter().map(Vec::as_slice)).as_str()
        );
        let uploads = s3_ok(
            &endpoint,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "crash"}),
        )
        .await;
        assert!(uploads.get("Uploads").is_none(), "{uploads}");
        let parts_dir = data.join("blobs").join("uploads").join(&upload);
        let gone = eventually(Duration::from_secs(10), || async { !parts_dir.exists() }).await;
        assert!(gone, "{} is still there", parts_dir.display());
        // `gateway key list` shows the key; `gateway key revoke` ends it on
        // the running gateway within about a second.
        let cli = |args: &[&str]| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
            command
                .arg("--data-dir")
                .arg(&data)
                .args(args)
                .env("RUST_LOG", "warn");
            command
        };
        let output = run(cli(&["key", "list"]), Duration::from_secs(60)).await;
        let listed = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "key list: {output:?}");
        assert!(listed.contains(key.id()), "key list: {listed}");
        let output = run(cli(&["key", "revoke", key.id()]), Duration::from_secs(60)).await;
        assert!(output.status.success(), "key revoke: {output:?}");
        let revoked = Instant::now();
        let failed = eventually(Duration::from_secs(5), || async {
            s3(&endpoint, &key, "list_buckets", json!({}))
                .await
                .get("error")
                .is_some()
        })
        .await;
        assert!(failed, "a key revoked by the CLI still works 5 s on");
        assert!(
            revoked.elapsed() < Duration::from_millis(2500),
            "{:?}",
            revoked.elapsed()
        );
        let (code, status) = s3_err(&endpoint, &key, "list_buckets", json!({})).await;
        assert_eq!((code.as_str(), status), ("InvalidAccessKeyId", 403));
        second.kill();
        let log = std::fs::read_to_string(data.with_extension("log")).unwrap_or_default();
        assert!(!log.contains("panicked"), "a gateway panicked:\n{log}");
    })
    .await;
}

// ---------------------------------------------------------------------------
// Multipart on a gateway whose blob store is another gateway's S3: the parts
// are objects there, read back to complete, and an abandoned upload's
// objects are collected there.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn multipart_on_a_gateway_over_our_own_s3() {
    within(Duration::from_secs(300), async {
        let dir_a = tempfile::tempdir().unwrap();
        let dir_b = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let a = Gateway::start(dir_a.path(), |_| {}).await;
        let store_key = a.key(Owner::OPEN, "blob store").await;
        s3_ok(
            &a.endpoint(),
            &store_key,
            "create_bucket",
            json!({"Bucket": "under"}),
        )
        .await;
        let Key::Signed(id, secret) = store_key.clone() else {
            unreachable!()
        };
        let b = Gateway::start(dir_b.path(), |config| {
            config.blob_store = Some(BlobUrl::S3 {
                bucket: "under".into(),
                prefix: "b".into(),
            });
            config.s3 = S3Settings {
                endpoint: Some(a.endpoint()),
                region: Some("us-east-1".into()),
                access_key_id: Some(id),
                secret_access_key: Some(secret),
                allow_http: Some(true),
            };
            config.upload_expiry = Duration::from_secs(6);
            config.gc_interval = Duration::from_millis(500);
        })
        .await;
        let key = b.key(Owner::OPEN, "over").await;
        let eb = b.endpoint();
        s3_ok(&eb, &key, "create_bucket", json!({"Bucket": "top"})).await;

        // One upload completed, one abandoned.
        let mut ids = Vec::new();
        for name in ["done.bin", "left.bin"] {
            let created = s3_ok(
                &eb,
                &key,
                "create_multipart_upload",
                json!({"Bucket": "top", "Key": name}),
            )
            .await;
            ids.push(created["UploadId"].as_str().unwrap().to_owned());
        }
        let parts: Vec<Vec<u8>> = vec![random_bytes(5 << 20), random_bytes((9 << 20) + 1)];
        let mut etags = Vec::new();
        for (number, bytes) in (1..).zip(&parts) {
            etags.push((
                number,
                upload_part(
                    &eb,
                    &key,
                    scratch.path(),
                    ("top", "done.bin", &ids[0]),
                    number,
                    bytes,
                )
                .await,
            ));
        }
        upload_part(
            &eb,
            &key,
            scratch.path(),
            ("top", "left.bin", &ids[1]),
            1,
            &random_bytes(5 << 20),
        )
        .await;
        // The parts are objects of A's bucket.
        let under = |upload: &str| {
            let (endpoint, store_key) = (a.endpoint(), store_key.clone());
            let prefix = format!("b/uploads/{upload}/");
            async move {
                let listed = s3_ok(
                    &endpoint,
                    &store_key,
                    "list_objects_v2",
                    json!({"Bucket": "under", "Prefix": prefix}),
                )
                .await;
                listed["KeyCount"].as_u64().unwrap()
            }
        };
        assert_eq!(
            under(&ids[0]).await,
            2,
            "the parts of {} in A's bucket",
            ids[0]
        );
        assert_eq!(
            under(&ids[1]).await,
            1,
            "the part of {} in A's bucket",
            ids[1]
        );

        s3_ok(
            &eb,
            &key,
            "complete_multipart_upload",
            json!({"Bucket": "top", "Key": "done.bin", "UploadId": ids[0],
                   "MultipartUpload": completed(&etags)}),
        )
        .await;
        let whole = parts.concat();
        let got = s3_ok(
            &eb,
            &key,
            "get_object",
            json!({"Bucket": "top", "Key": "done.bin"}),
        )
        .await;
        assert_eq!(got["Body"]["sha256"], sha256_hex(&whole).as_str());
        let got = s3_ok(
            &eb,
            &key,
            "get_object",
            json!({"Bucket": "top", "Key": "done.bin", "Range": "bytes=5242870-5242889"}),
        )
        .await;
        assert_eq!(
            got["Body"]["hex"],
            hex::encode(&whole[5_242_870..5_242_890]).as_str()
        );
        // The object's blob is in A's bucket; the completed upload's parts
        // are not, and the abandoned one's go once it expires.
        let digest = sha256_hex(&whole);
        let blob = s3(
            &a.endpoint(),
            &store_key,
            "head_object",
            json!({"Bucket": "under", "Key": format!("b/{}/{digest}", &digest[..2])}),
        )
        .await;
        assert!(blob.get("ok").is_some(), "no blob in A's bucket: {blob}");
        let cleared = eventually(Duration::from_secs(15), || async {
            under(&ids[0]).await == 0
        })
        .await;
        assert!(
            cleared,
            "the completed upload's parts are still in A's bucket"
        );
        let collected = eventually(Duration::from_secs(30), || async {
            under(&ids[1]).await == 0
        })
        .await;
        assert!(
            collected,
            "the abandoned upload's part is still in A's bucket 30 s on"
        );
        let listed = s3_ok(
            &eb,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "top"}),
        )
        .await;
        assert!(listed.get("Uploads").is_none(), "{listed}");

        b.stop().await;
        a.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// A gateway too busy for more: S3 clients are told to slow down.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_busy_gateway_says_slow_down() {
    within(Duration::from_secs(180), async {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |config| {
            config.instances = 1;
            config.queue_capacity = 1;
            config.queue_timeout = Duration::from_millis(100);
        })
        .await;
        let key = gateway.key(Owner::OPEN, "busy").await;
        let endpoint = gateway.endpoint();
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "busy"})).await;
        let bodies: Vec<Vec<u8>> = (0..8).map(|_| random_bytes(24 << 20)).collect();
        let mut calls = Vec::new();
        for (index, body) in bodies.iter().enumerate() {
            let file = scratch.path().join(format!("body-{index}"));
            std::fs::write(&file, body).unwrap();
            let (endpoint, key) = (endpoint.clone(), key.clone());
            calls.push(tokio::spawn(async move {
                s3(
                    &endpoint,
                    &key,
                    "put_object",
                    json!({"Bucket": "busy", "Key": format!("o{index}"), "Body": {"file": file}}),
                )
                .await
            }));
        }
        // Every PUT answered first: the reads that check them must not race
        // the PUTs still queued for the one instance.
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.unwrap());
        }
        let mut slowed = 0;
        for (index, answer) in answers.into_iter().enumerate() {
            eprintln!(
                "o{index}: {}",
                answer.to_string().chars().take(300).collect::<String>()
            );
            if answer.get("ok").is_some() {
                let got = s3_patient(
                    &endpoint,
                    &key,
                    "get_object",
                    json!({"Bucket": "busy", "Key": format!("o{index}")}),
                )
                .await;
                let got = &got["ok"];
                assert_eq!(got["Body"]["sha256"], sha256_hex(&bodies[index]).as_str());
            } else {
                assert_eq!(answer["error"], "SlowDown", "o{index}: {answer}");
                assert_eq!(answer["status"], 503, "o{index}: {answer}");
                assert_eq!(answer["retry_after"], "1", "o{index}: {answer}");
                let head = s3_patient(
                    &endpoint,
                    &key,
                    "head_object",
                    json!({"Bucket": "busy", "Key": format!("o{index}")}),
                )
                .await;
                assert_eq!(
                    head["error"], "404",
                    "o{index} slowed down but stored: {head}"
                );
                slowed += 1;
            }
        }
        eprintln!("{slowed} of 8 told to slow down");
        assert!(
            slowed > 0,
            "8 PUTs at once on 1 instance with a queue of 1: none slowed down"
        );
        gateway.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// An upload aborted while a part is on its way in: the part is refused and
// leaves nothing behind.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upload_aborted_under_a_part() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |config| {
            config.orphan_grace = Duration::from_secs(1);
            config.gc_interval = Duration::from_millis(500);
        })
        .await;
        let key = gateway.key(Owner::OPEN, "abort").await;
        let endpoint = gateway.endpoint();
        s3_ok(&endpoint, &key, "create_bucket", json!({"Bucket": "abort"})).await;
        let created = s3_ok(
            &endpoint,
            &key,
            "create_multipart_upload",
            json!({"Bucket": "abort", "Key": "a.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let url = s3_ok(
            &endpoint,
            &key,
            "generate_presigned_url",
            json!({"ClientMethod": "upload_part",
                   "Params": {"Bucket": "abort", "Key": "a.bin", "UploadId": upload,
                              "PartNumber": 1},
                   "ExpiresIn": 600}),
        )
        .await;
        let url = url.as_str().unwrap().to_owned();

        // 8 MiB of a 16 MiB part, then the abort, then the rest.
        let part = random_bytes(16 << 20);
        let (first_half, second_half) = (
            bytes::Bytes::copy_from_slice(&part[..8 << 20]),
            bytes::Bytes::copy_from_slice(&part[8 << 20..]),
        );
        let (go_on, resume) = oneshot::channel::<()>();
        let body = futures_util::stream::once(async move { Ok::<_, std::io::Error>(first_half) })
            .chain(futures_util::stream::once(async move {
                let _ = resume.await;
                Ok(second_half)
            }));
        let sending = tokio::spawn(
            gateway
                .client
                .put(&url)
                .header(header::CONTENT_LENGTH, part.len())
                .body(reqwest::Body::wrap_stream(body))
                .send(),
        );
        let parts_dir = dir.path().join("blobs").join("uploads").join(&upload);
        tokio::time::sleep(Duration::from_millis(500)).await;
        s3_ok(
            &endpoint,
            &key,
            "abort_multipart_upload",
            json!({"Bucket": "abort", "Key": "a.bin", "UploadId": upload}),
        )
        .await;
        let _ = go_on.send(());
        let answer = sending.await.unwrap().unwrap();
        let status = answer.status();
        let headers = answer.headers().clone();
        let text = answer.text().await.unwrap();
        eprintln!("the part after the abort: {status} {headers:?} {text}");
        assert_eq!(status, 404, "{text}");
        assert!(text.contains("NoSuchUpload"), "{text}");
        let clean = eventually(Duration::from_secs(10), || async { !parts_dir.exists() }).await;
        assert!(clean, "{} is left behind", parts_dir.display());
        let listed = s3_ok(
            &endpoint,
            &key,
            "list_multipart_uploads",
            json!({"Bucket": "abort"}),
        )
        .await;
        assert!(listed.get("Uploads").is_none(), "{listed}");
        gateway.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// Error documents name their request, as the header does.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn error_documents_carry_their_request_id() {
    within(Duration::from_secs(60), async {
        let dir = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |_| {}).await;
        let endpoint = gateway.endpoint();
        for (method, path) in [
            (reqwest::Method::GET, "/nosuchbucket/x"),
            (
                reqwest::Method::PUT,
                "/nosuchbucket/x?partNumber=1&uploadId=none",
            ),
        ] {
            let answer = gateway
                .client
                .request(method.clone(), format!("{endpoint}{path}"))
                .body("0123456789")
                .send()
                .await
                .unwrap();
            let id = answer.headers()["x-amz-request-id"]
                .to_str()
                .unwrap()
                .to_owned();
            let text = answer.text().await.unwrap();
            assert!(
                text.contains(&format!("<RequestId>{id}</RequestId>")),
                "{method} {path}: x-amz-request-id {id}, but {text}"
            );
        }
        gateway.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// A damaged master key file, a key for no such user: clean refusals.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_damaged_master_key_and_an_unknown_user_are_refused_cleanly() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("s3-master.key"), "not a key\n").unwrap();
        let mut config = Config::for_data_dir(&data);
        config.instances = 1;
        config.s3_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        let Err(error) = gateway::start(&config).await else {
            panic!("a gateway started on a damaged master key");
        };
        let error = format!("{error:#}");
        assert!(error.contains("s3-master.key"), "{error}");

        let cli = |args: &[&str]| {
            let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
            command
                .arg("--data-dir")
                .arg(&data)
                .args(args)
                .env("RUST_LOG", "warn");
            command
        };
        let output = run(cli(&["key", "create"]), Duration::from_secs(60)).await;
        assert!(
            !output.status.success(),
            "key create on a damaged master key: {output:?}"
        );
        assert!(output.stdout.is_empty(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("s3-master.key"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");

        std::fs::remove_file(data.join("s3-master.key")).unwrap();
        let output = run(cli(&["key", "create", "nobody"]), Duration::from_secs(60)).await;
        assert!(
            !output.status.success(),
            "key create for no such user: {output:?}"
        );
        assert!(output.stdout.is_empty(), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("nobody"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        // And then a good one.
        let key = key_create(&data).await;
        let mode = std::fs::metadata(data.join("s3-master.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "made by the CLI: {mode:o}");
        let output = run(cli(&["key", "list"]), Duration::from_secs(60)).await;
        assert!(String::from_utf8_lossy(&output.stdout).contains(key.id()));
    })
    .await;
}

// ---------------------------------------------------------------------------
// One user's upload is out of another's reach, even by its id and in a
// bucket of the same name.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upload_is_out_of_another_users_reach() {
    within(Duration::from_secs(120), async {
        let dir = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let gateway = Gateway::start(dir.path(), |_| {}).await;
        let endpoint = gateway.endpoint();
        for name in ["alice", "bob"] {
            gateway::cli::add_user(gateway.accounts(), name, PASSWORD, false, None)
                .await
                .unwrap();
        }
        let alice = gateway
            .accounts()
            .user_named("alice")
            .await
            .unwrap()
            .unwrap();
        let bob = gateway.accounts().user_named("bob").await.unwrap().unwrap();
        let alice_key = gateway.key(alice.owner(), "alice").await;
        let bob_key = gateway.key(bob.owner(), "bob").await;
        for key in [&alice_key, &bob_key] {
            s3_ok(&endpoint, key, "create_bucket", json!({"Bucket": "same"})).await;
        }
        let created = s3_ok(
            &endpoint,
            &alice_key,
            "create_multipart_upload",
            json!({"Bucket": "same", "Key": "k.bin"}),
        )
        .await;
        let upload = created["UploadId"].as_str().unwrap().to_owned();
        let part = random_bytes(5 << 20);
        let etag = upload_part(
            &endpoint,
            &alice_key,
            scratch.path(),
            ("same", "k.bin", &upload),
            1,
            &part,
        )
        .await;
        let target = json!({"Bucket": "same", "Key": "k.bin", "UploadId": upload});
        let with = |extra: Value| {
            let mut params = target.clone();
            params
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            params
        };
        for (operation, params) in [
            ("list_parts", target.clone()),
            (
                "upload_part",
                with(json!({"PartNumber": 2, "Body": {"hex": "00"}})),
            ),
            (
                "complete_multipart_upload",
                with(json!({"MultipartUpload": completed(&[(1, etag.clone())])})),
            ),
            ("abort_multipart_upload", target.clone()),
        ] {
            let (code, status) = s3_err(&endpoint, &bob_key, operation, params).await;
            assert_eq!(
                (code.as_str(), status),
                ("NoSuchUpload", 404),
                "bob's {operation}"
            );
        }
        let listed = s3_ok(
            &endpoint,
            &bob_key,
            "list_multipart_uploads",
            json!({"Bucket": "same"}),
        )
        .await;
        assert!(listed.get("Uploads").is_none(), "bob sees {listed}");
        let (code, _) = s3_err(
            &endpoint,
            &bob_key,
            "head_object",
            json!({"Bucket": "same", "Key": "k.bin"}),
        )
        .await;
        assert_eq!(code, "404");
        // Alice's upload is as she left it, and completes.
        let listed = s3_ok(&endpoint, &alice_key, "list_parts", target.clone()).await;
        assert_eq!(listed["Parts"].as_array().unwrap().len(), 1, "{listed}");
        s3_ok(
            &endpoint,
            &alice_key,
            "complete_multipart_upload",
            with(json!({"MultipartUpload": completed(&[(1, etag)])})),
        )
        .await;
        let got = s3_ok(
            &endpoint,
            &alice_key,
            "get_object",
            json!({"Bucket": "same", "Key": "k.bin"}),
        )
        .await;
        assert_eq!(got["Body"]["sha256"], sha256_hex(&part).as_str());
        let (code, _) = s3_err(
            &endpoint,
            &bob_key,
            "head_object",
            json!({"Bucket": "same", "Key": "k.bin"}),
        )
        .await;
        assert_eq!(code, "404", "alice's object in bob's bucket");
        gateway.stop().await;
    })
    .await;
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}
