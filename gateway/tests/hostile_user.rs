//! What a hostile signed-in user (or a page on another site) found, over
//! real HTTP: WebDAV dead properties stored around the quota, a PROPFIND
//! answer built whole in memory outside the budget and the body-rate
//! limit, the open tree's share links outliving open mode, and a page that
//! another site could frame.

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TestServer;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const MIB: u64 = 1 << 20;
/// What each file, folder, share link and kept upload part costs against
/// the quota beyond its bytes (`volume::ENTRY_OVERHEAD`).
const ENTRY: u64 = 1024;

fn propfind() -> Method {
    Method::from_bytes(b"PROPFIND").unwrap()
}

fn proppatch() -> Method {
    Method::from_bytes(b"PROPPATCH").unwrap()
}

/// A PROPPATCH body setting `count` properties of `length` characters,
/// named from `first` on.
fn set_properties(first: usize, count: usize, length: usize) -> String {
    let value = "v".repeat(length);
    let mut body = String::from(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:propertyupdate xmlns:D=\"DAV:\" \
         xmlns:Z=\"urn:hostile\"><D:set><D:prop>",
    );
    for n in first..first + count {
        body.push_str(&format!("<Z:p{n}>{value}</Z:p{n}>"));
    }
    body.push_str("</D:prop></D:set></D:propertyupdate>");
    body
}

async fn used(server: &TestServer, user: &str) -> u64 {
    let listing: Value = server
        .client
        .get(server.url("/files/"))
        .basic_auth(user, Some("correct horse battery"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listing["usage"]["used"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_properties_count_against_the_quota_and_are_refused_past_it() {
    let server = TestServer::start(|_| {}).await;
    server
        .add_user("mallory", "correct horse battery", false, Some(10 * MIB))
        .await;
    let as_mallory = |request: reqwest::RequestBuilder| {
        request.basic_auth("mallory", Some("correct horse battery"))
    };
    let stored = as_mallory(server.client.put(server.url("/files/big.bin")))
        .body(vec![7u8; 8 * MIB as usize])
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), StatusCode::CREATED);
    let before = used(&server, "mallory").await;
    // The file's bytes and an entry's overhead.
    assert_eq!(before, 8 * MIB + ENTRY);

    // Empty files cost an entry's overhead; their properties their bytes.
    let mut answers = Vec::new();
    let mut stored_properties = 0u64;
    'files: for file in 0..4 {
        let path = format!("/dav/empty-{file}");
        let made = as_mallory(server.client.put(server.url(&path)))
            .body(Vec::new())
            .send()
            .await
            .unwrap();
        assert_eq!(made.status(), StatusCode::CREATED);
        for round in 0..16 {
            let response = as_mallory(server.client.request(proppatch(), server.url(&path)))
                .header("content-type", "application/xml")
                .body(set_properties(round * 15, 15, 12_000))
                .send()
                .await
                .unwrap();
            answers.push(response.status());
            if response.status() == StatusCode::INSUFFICIENT_STORAGE {
                break 'files;
            }
            assert_eq!(response.status(), StatusCode::MULTI_STATUS);
            stored_properties += 15 * 12_000;
        }
    }
    assert_eq!(
        answers.last(),
        Some(&StatusCode::INSUFFICIENT_STORAGE),
        "properties past the quota are refused with 507: {answers:?}"
    );
    let after = used(&server, "mallory").await;
    assert!(
        after >= before + stored_properties,
        "the properties kept count: {before} then {after}, {stored_properties} bytes of values stored"
    );
    assert!(after <= 10 * MIB, "usage {after} stays within the quota");
    // And what the properties took is no longer there for a file.
    let refused = as_mallory(server.client.put(server.url("/files/more.bin")))
        .body(vec![1u8; (10 * MIB - before) as usize])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::INSUFFICIENT_STORAGE);
    server.stop().await;
}

/// A gateway process of its own, so its memory is measured alone; stopped
/// by PID when dropped.
struct Gateway {
    process: testsupport::ChildGuard,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Gateway {
    async fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], testsupport::free_port()));
        let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
        command
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        let process =
            testsupport::ChildGuard::spawn(&mut command, "TERM", false, Duration::from_secs(5))
                .unwrap();
        let client = reqwest::Client::new();
        let give_up = Instant::now() + Duration::from_secs(120);
        while client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .is_err()
        {
            assert!(Instant::now() < give_up, "the gateway did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            process,
            addr,
            _dir: dir,
        }
    }

    fn rss(&self) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.process.pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap();
        kib * 1024
    }
}

/// A PROPFIND asking for `count` properties (about 10 bytes each).
fn asking(count: usize) -> String {
    let mut body = String::from(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><D:propfind xmlns:D=\"DAV:\" \
         xmlns:Z=\"urn:amp\"><D:prop>",
    );
    for n in 0..count {
        body.push_str(&format!("<Z:a{n}/>"));
    }
    body.push_str("</D:prop></D:propfind>");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_propfind_answer_streams_within_the_budget_and_unread_ones_are_cut() {
    const BUDGET: u64 = 256 * MIB;
    let gateway = Gateway::start(&[
        "--instances",
        "2",
        "--memory-budget",
        "256MiB",
        // The body-rate limit a download meets: silent for at most this.
        "--request-timeout",
        "3s",
    ])
    .await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", gateway.addr);
    let made = client
        .request(Method::from_bytes(b"MKCOL").unwrap(), url("/dav/amp/"))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    for n in 0..300 {
        let stored = client
            .put(url(&format!("/files/amp/f{n:03}")))
            .body(Vec::new())
            .send()
            .await
            .unwrap();
        assert_eq!(stored.status(), StatusCode::CREATED);
    }
    let body = asking(9000);
    assert!(body.len() > 80_000);

    // A client that reads gets the whole answer: every member described.
    let answer = client
        .request(propfind(), url("/dav/amp/"))
        .header("depth", "1")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::MULTI_STATUS);
    let whole = answer.bytes().await.unwrap();
    let text = std::str::from_utf8(&whole).unwrap();
    assert_eq!(text.matches("<D:response>").count(), 301);
    assert!(text.trim_end().ends_with("</D:multistatus>"));
    let full_size = whole.len();
    assert!(full_size > 40_000_000, "a large answer: {full_size} bytes");

    // Six that never read.
    let request = format!(
        "PROPFIND /dav/amp/ HTTP/1.1\r\nHost: localhost\r\nDepth: 1\r\n\
         Content-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut unread = Vec::new();
    for _ in 0..6 {
        let mut stream = TcpStream::connect(gateway.addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        unread.push(stream);
    }
    let mut peak = 0;
    let watch_until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < watch_until {
        peak = peak.max(gateway.rss());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        peak <= BUDGET + 128 * MIB,
        "the gateway's RSS stays within the budget + 128 MiB: peak {} MiB",
        peak / MIB
    );
    // Each was cut: what a late reader gets falls short of the answer and
    // never ends as a complete chunked body would.
    for mut stream in unread {
        let mut received = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut received))
            .await
            .expect("the cut connection is closed");
        let _ = read;
        assert!(
            received.len() < full_size,
            "cut short: {} of {full_size} bytes",
            received.len()
        );
        assert!(
            !received.ends_with(b"0\r\n\r\n"),
            "a cut answer must not look complete"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_trees_share_links_stop_when_a_user_is_added_unless_adopted() {
    let server = TestServer::start(|_| {}).await;
    assert_eq!(
        server.put("dropped.txt", b"shared".to_vec()).await.status(),
        StatusCode::CREATED
    );
    let link = |name: &'static str| {
        let server = &server;
        async move {
            let made: Value = server
                .client
                .post(server.url(&format!("/files/{name}?share")))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            made["token"].as_str().unwrap().to_owned()
        }
    };
    let dropped = link("dropped.txt").await;
    let fetch = |token: String| {
        let server = &server;
        async move {
            server
                .client
                .get(server.url(&format!("/share/{token}")))
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(fetch(dropped.clone()).await, StatusCode::OK);

    // The first user, without adopting the open tree: nobody owns the
    // link any more, so it stops working.
    server
        .add_user("alice", "correct horse battery", true, None)
        .await;
    assert_eq!(fetch(dropped).await, StatusCode::NOT_FOUND);

    // Adopted, a link is its new owner's: it works and they can revoke it.
    let server2 = TestServer::start(|_| {}).await;
    assert_eq!(
        server2.put("kept.txt", b"shared".to_vec()).await.status(),
        StatusCode::CREATED
    );
    let made: Value = server2
        .client
        .post(server2.url("/files/kept.txt?share"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kept = made["token"].as_str().unwrap().to_owned();
    let accounts = server2.state.auth.accounts();
    let bob = gateway::cli::add_user(accounts, "bob", "correct horse battery", true, None)
        .await
        .unwrap();
    accounts.adopt_open_tree(bob.id).await.unwrap();
    let shared = server2.url(&format!("/share/{kept}"));
    assert_eq!(
        server2.client.get(&shared).send().await.unwrap().status(),
        StatusCode::OK
    );
    let revoked = server2
        .client
        .delete(&shared)
        .basic_auth("bob", Some("correct horse battery"))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        server2.client.get(&shared).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    server.stop().await;
    server2.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_other_site_may_frame_the_page() {
    let server = TestServer::start(|_| {}).await;
    let page = server.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let headers = page.headers();
    assert_eq!(headers["x-frame-options"], "DENY");
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("frame-ancestors 'none'")
    );
    server.stop().await;
}

// ---------------------------------------------------------------------------
// Issue 30: nothing a user makes is free. Each file, folder and share link
// costs an entry's overhead against the quota, so a user with a small
// quota cannot fill the index with empty things.

/// Under a 4 KiB quota: four empty files fit, the fifth is refused (507);
/// with one file gone, a folder fits and the next is refused; with a
/// folder gone, a share link fits and the next is refused. The listing's
/// `usage.used` counts every entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_files_folders_and_share_links_count_against_the_quota() {
    let server = TestServer::start(|_| {}).await;
    server
        .add_user("mallory", "correct horse battery", false, Some(4 * ENTRY))
        .await;
    let as_mallory = |request: reqwest::RequestBuilder| {
        request.basic_auth("mallory", Some("correct horse battery"))
    };
    for n in 0..4 {
        let made = as_mallory(server.client.put(server.url(&format!("/files/empty-{n}"))))
            .body(Vec::new())
            .send()
            .await
            .unwrap();
        assert_eq!(made.status(), StatusCode::CREATED, "empty file {n}");
    }
    assert_eq!(used(&server, "mallory").await, 4 * ENTRY);
    let refused = as_mallory(server.client.put(server.url("/files/empty-4")))
        .body(Vec::new())
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::INSUFFICIENT_STORAGE,
        "a fifth empty file"
    );
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"], "quota_exceeded");
    // Over WebDAV too.
    let refused = as_mallory(server.client.put(server.url("/dav/empty-dav")))
        .body(Vec::new())
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::INSUFFICIENT_STORAGE,
        "an empty file over WebDAV"
    );

    let deleted = as_mallory(server.client.delete(server.url("/files/empty-3")))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let made = as_mallory(server.client.post(server.url("/files/one/?folder")))
        .send()
        .await
        .unwrap();
    assert!(
        made.status().is_success(),
        "a folder fits: {}",
        made.status()
    );
    assert_eq!(used(&server, "mallory").await, 4 * ENTRY);
    let refused = as_mallory(server.client.post(server.url("/files/two/?folder")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::INSUFFICIENT_STORAGE,
        "a second folder"
    );
    let mkcol = Method::from_bytes(b"MKCOL").unwrap();
    let refused = as_mallory(server.client.request(mkcol, server.url("/dav/three")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::INSUFFICIENT_STORAGE,
        "a folder over WebDAV"
    );

    let deleted = as_mallory(server.client.delete(server.url("/files/one/?recursive")))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let shared = as_mallory(server.client.post(server.url("/files/empty-0?share")))
        .send()
        .await
        .unwrap();
    assert!(
        shared.status().is_success(),
        "a share link fits: {}",
        shared.status()
    );
    assert_eq!(used(&server, "mallory").await, 4 * ENTRY);
    let refused = as_mallory(server.client.post(server.url("/files/empty-1?share")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused.status(),
        StatusCode::INSUFFICIENT_STORAGE,
        "a second share link"
    );
    server.stop().await;
}
