//! Hostile clients cost bounded resources: half-sent request heads and idle
//! keep-alives are closed after the header timeout while others are
//! served, the connection cap holds, a stalled upload fails with 408 and
//! stores nothing, and SIGTERM exits within the shutdown grace however
//! many connections are open (the report: ten minutes).

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestServer, stored_blobs};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

const HALF_SENT: &[u8] = b"GET /files/ HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";

/// Open `count` connections that each send part of a request head.
async fn half_sent(addr: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut streams = Vec::with_capacity(count);
    for _ in 0..count {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(HALF_SENT).await.unwrap();
        streams.push(stream);
    }
    streams
}

/// Whether the server closed `stream` within `limit` (what it sent before
/// closing, a 408 perhaps, is read and dropped).
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_are_closed_after_the_header_timeout() {
    let server = TestServer::start(|config| config.header_timeout = Duration::from_secs(1)).await;
    let started = Instant::now();
    let mut streams = half_sent(server.addr, 300).await;
    // Others are served meanwhile.
    for _ in 0..20 {
        let response = server
            .client
            .get(server.url("/files/"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    let mut closed = 0;
    for stream in &mut streams {
        if closed_within(stream, Duration::from_secs(5)).await {
            closed += 1;
        }
    }
    let took = started.elapsed();
    assert_eq!(closed, streams.len(), "every half-sent request is closed");
    assert!(
        took >= Duration::from_millis(900),
        "not before the timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    eprintln!("300 half-sent requests closed {took:?} after they were opened");
    server.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let server = TestServer::start(|config| config.header_timeout = Duration::from_secs(1)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 512];
    let read = stream.read(&mut answer).await.unwrap();
    assert!(answer[..read].starts_with(b"HTTP/1.1 200"));
    let idle = Instant::now();
    assert!(closed_within(&mut stream, Duration::from_secs(4)).await);
    assert!(idle.elapsed() >= Duration::from_millis(900));
    server.stop().await;
}

#[tokio::test]
async fn the_connection_cap_holds_others_until_a_slot_frees() {
    let server = TestServer::start(|config| {
        config.header_timeout = Duration::from_secs(1);
        config.max_connections = 20;
    })
    .await;
    let started = Instant::now();
    let _streams = half_sent(server.addr, 20).await;
    // The 21st connection waits in the accept queue until the timeout
    // frees the slots, then is served.
    let response = server
        .client
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "served after {waited:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn a_stalled_upload_fails_with_408_and_stores_nothing() {
    let server = TestServer::start(|config| config.request_timeout = Duration::from_secs(1)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(
            b"PUT /files/stalled HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n",
        )
        .await
        .unwrap();
    stream.write_all(&[7u8; 30_000]).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    assert_eq!(server.get("stalled").await.status(), StatusCode::NOT_FOUND);
    assert!(stored_blobs(&server.data_dir).is_empty());
    assert_eq!(
        std::fs::read_dir(server.data_dir.join("tmp"))
            .unwrap()
            .count(),
        0
    );
    server.stop().await;
}

/// The gateway binary on a free loopback port, killed on drop.
struct Process {
    child: std::process::Child,
    addr: SocketAddr,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_within_the_grace_with_connections_open() {
    let dir = tempfile::tempdir().unwrap();
    let port = testsupport::free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let child = Command::new(env!("CARGO_BIN_EXE_gateway"))
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--instances",
            "2",
            "--shutdown-grace",
            "2s",
            "--header-timeout",
            "60s",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut process = Process { child, addr };
    let client = reqwest::Client::new();
    let give_up = Instant::now() + Duration::from_secs(60);
    while client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .is_err()
    {
        assert!(Instant::now() < give_up, "the gateway did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Half-sent heads (kept open: the header timeout is long here), and one
    // upload in flight whose body takes a second to arrive.
    let _streams = half_sent(process.addr, 200).await;
    let mut upload = TcpStream::connect(process.addr).await.unwrap();
    upload
        .write_all(
            b"PUT /files/in-flight HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8\r\n\r\nhalf",
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &process.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::sleep(Duration::from_millis(500)).await;
    upload.write_all(b"done").await.unwrap();
    let mut answer = Vec::new();
    upload.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 201"),
        "the in-flight upload finishes: {answer}"
    );

    let status = loop {
        if let Some(status) = process.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(10),
            "still running {:?} after SIGTERM",
            signalled.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = signalled.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took < Duration::from_secs(5),
        "exited {took:?} after SIGTERM (grace 2 s)"
    );
    eprintln!("exited {took:?} after SIGTERM with 200 half-sent requests open");
}
