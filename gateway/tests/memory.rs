//! The memory model over real HTTP: large files with default flags, admission
//! by bytes against the memory budget, and bodies that are never buffered on
//! the host before their request holds an instance.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::{TestServer, random_bytes, sha256_hex, stored_blobs};
use gateway::config::ByteSize;
use gateway::pool::BodySize;
use reqwest::StatusCode;
use reqwest::header;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;

fn temp_files(server: &TestServer) -> usize {
    std::fs::read_dir(server.data_dir.join("tmp"))
        .unwrap()
        .count()
}

/// A body sent chunked (no Content-Length) in `chunk`-sized pieces, counting
/// the bytes the server has pulled from the client so far.
fn chunked_body(content: Vec<u8>, chunk: usize, pulled: Arc<AtomicU64>) -> reqwest::Body {
    let pieces: Vec<Vec<u8>> = content.chunks(chunk).map(<[u8]>::to_vec).collect();
    reqwest::Body::wrap_stream(futures_util::stream::iter(pieces.into_iter().map(
        move |piece| {
            pulled.fetch_add(piece.len() as u64, Ordering::Relaxed);
            Ok::<_, std::io::Error>(piece)
        },
    )))
}

#[tokio::test]
async fn a_300_mb_file_round_trips_through_the_window_with_default_flags() {
    let server = TestServer::start(|_| {}).await;
    let content = random_bytes(300 * MIB);
    let digest = sha256_hex(&content);

    let stored = server.put("videos/big.bin", content.clone()).await;
    assert_eq!(stored.status(), StatusCode::CREATED);
    let meta: Value = stored.json().await.unwrap();
    assert_eq!(meta["size"], 300 * MIB);
    assert_eq!(meta["sha256"], digest);

    let full = server.get("videos/big.bin").await;
    assert_eq!(full.status(), StatusCode::OK);
    assert_eq!(full.headers()[header::CONTENT_LENGTH], "314572800");
    let body = full.bytes().await.unwrap();
    assert_eq!(body.len(), content.len());
    assert_eq!(sha256_hex(&body), digest);

    let (first, last) = (200 * MIB + 7, 200 * MIB + 7 + 99_999);
    let ranged = server
        .client
        .get(server.url("/files/videos/big.bin"))
        .header(header::RANGE, format!("bytes={first}-{last}"))
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        ranged.headers()[header::CONTENT_RANGE],
        format!("bytes {first}-{last}/314572800").as_str()
    );
    assert_eq!(ranged.bytes().await.unwrap(), &content[first..=last]);

    // The instance that held it held a window's worth (32 MiB by default),
    // never the file, within the budget's count.
    let pool = server.json("/admin/pool").await;
    let largest = pool["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["memory_bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(largest >= 32 * MIB as u64, "{pool}");
    assert!(largest <= 40 * MIB as u64, "{pool}");
    assert_eq!(pool["budget_reserved_bytes"], 0, "{pool}");
    assert!(pool["budget_used_bytes"].as_u64().unwrap() >= largest);
    assert_eq!(temp_files(&server), 0);
    server.stop().await;
}

#[tokio::test]
async fn concurrent_uploads_over_a_small_budget_end_in_201_or_503() {
    let server = TestServer::start(|config| {
        config.instances = 4;
        config.memory_budget = Some(ByteSize(48 << 20));
        config.queue_timeout = Duration::from_millis(300);
    })
    .await;
    let uploads: Vec<_> = (0..12)
        .map(|n| {
            let client = server.client.clone();
            let url = server.url(&format!("/files/burst/{n}"));
            let content = random_bytes(12 * MIB);
            tokio::spawn(async move {
                let response = client.put(url).body(content.clone()).send().await.unwrap();
                let status = response.status();
                let retry_after = response.headers().get(header::RETRY_AFTER).cloned();
                let error: Option<Value> = response.json().await.ok();
                (n, content, status, retry_after, error)
            })
        })
        .collect();
    let mut stored = 0;
    let mut refused = 0;
    for upload in uploads {
        let (n, content, status, retry_after, answer) = upload.await.unwrap();
        let read = server.get(&format!("burst/{n}")).await;
        match status {
            StatusCode::CREATED => {
                stored += 1;
                assert_eq!(read.status(), StatusCode::OK);
                assert_eq!(read.bytes().await.unwrap(), content);
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                refused += 1;
                assert!(retry_after.is_some(), "a 503 says when to retry");
                assert_eq!(answer.unwrap()["error"], "unavailable");
                assert_eq!(read.status(), StatusCode::NOT_FOUND, "nothing left behind");
            }
            other => panic!("upload {n} ended in {other}: {answer:?}"),
        }
    }
    assert!(stored > 0, "some uploads fit the budget");
    assert_eq!(stored + refused, 12);
    assert_eq!(stored_blobs(&server.data_dir).len(), stored);
    assert_eq!(temp_files(&server), 0);
    let pool = server.json("/admin/pool").await;
    assert!(
        pool["budget_used_bytes"].as_u64().unwrap() <= 48 << 20,
        "{pool}"
    );
    assert_eq!(pool["budget_reserved_bytes"], 0, "{pool}");
    server.stop().await;
}

#[tokio::test]
async fn a_body_larger_than_the_budget_is_refused_before_it_is_read() {
    let server = TestServer::start(|config| {
        config.memory_budget = Some(ByteSize(32 << 20));
    })
    .await;
    // Headers only: the answer must come without a byte of the body.
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let request = format!(
        "PUT /files/too-big HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        64 * MIB
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = vec![0; 4096];
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("over_memory_budget"), "{answer}");
    assert!(
        answer.contains("33554432"),
        "the message names the budget: {answer}"
    );
    assert!(stored_blobs(&server.data_dir).is_empty());
    server.stop().await;
}

#[tokio::test]
async fn a_chunked_upload_past_the_limit_gets_413_and_stores_nothing() {
    let server = TestServer::start(|config| config.max_body = ByteSize(MIB as u64)).await;
    let pulled = Arc::new(AtomicU64::new(0));
    let response = server
        .client
        .put(server.url("/files/chunked"))
        .body(chunked_body(random_bytes(3 * MIB), 64 << 10, pulled))
        .send()
        .await;
    // The server may answer and close before the client has sent it all.
    if let Ok(response) = response {
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"], "body_too_large");
    }
    assert_eq!(server.get("chunked").await.status(), StatusCode::NOT_FOUND);
    assert!(stored_blobs(&server.data_dir).is_empty());
    assert_eq!(temp_files(&server), 0);

    // Within the limit, an undeclared length is stored like any other.
    let content = random_bytes(MIB - 1);
    let stored = server
        .client
        .put(server.url("/files/chunked"))
        .body(chunked_body(
            content.clone(),
            100_000,
            Arc::new(AtomicU64::new(0)),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), StatusCode::CREATED);
    assert_eq!(server.get("chunked").await.bytes().await.unwrap(), content);
    server.stop().await;
}

#[tokio::test]
async fn a_queued_upload_holds_no_body() {
    let server = TestServer::start(|config| {
        config.instances = 1;
        config.queue_timeout = Duration::from_secs(30);
    })
    .await;
    // Hold the only instance, as a long request would.
    let lease = server.state.pool.lease(BodySize::None).await.unwrap();
    let pulled = Arc::new(AtomicU64::new(0));
    let content = random_bytes(64 * MIB);
    let upload = tokio::spawn({
        let request = server
            .client
            .put(server.url("/files/queued"))
            .body(chunked_body(content.clone(), 256 << 10, pulled.clone()));
        async move { request.send().await.unwrap().status() }
    });
    while server.state.pool.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // While it waits, only what fits in socket buffers has left the client.
    let while_queued = pulled.load(Ordering::Relaxed);
    assert!(
        while_queued < 24 * MIB as u64,
        "{while_queued} bytes were pulled while the request waited"
    );
    lease.release().await;
    assert_eq!(upload.await.unwrap(), StatusCode::CREATED);
    assert_eq!(pulled.load(Ordering::Relaxed), 64 * MIB as u64);
    assert_eq!(server.get("queued").await.bytes().await.unwrap(), content);
    server.stop().await;
}
