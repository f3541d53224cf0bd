//! The instance pool under the real gateway: queueing, traps, replacement and
//! the memory figures, over real HTTP.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{TestServer, random_bytes, sha256_hex};
use gateway::config::ByteSize;
use reqwest::StatusCode;
use reqwest::header;
use serde_json::Value;

fn instances(pool: &Value) -> &Vec<Value> {
    pool["instances"].as_array().unwrap()
}

#[tokio::test]
async fn a_full_queue_answers_503_with_retry_after() {
    let server = TestServer::start(|config| {
        config.instances = 1;
        config.queue_capacity = 0;
    })
    .await;
    server.put("f", b"x".to_vec()).await;
    // Hold the only instance, as a long request would.
    let lease = server
        .state
        .pool
        .lease(gateway::pool::BodySize::None)
        .await
        .unwrap();
    let refused = server.get("f").await;
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"], "unavailable");
    lease.release().await;
    assert_eq!(server.get("f").await.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn a_wait_past_the_queue_timeout_answers_503() {
    let server = TestServer::start(|config| {
        config.instances = 1;
        config.queue_capacity = 8;
        config.queue_timeout = Duration::from_millis(200);
    })
    .await;
    let lease = server
        .state
        .pool
        .lease(gateway::pool::BodySize::None)
        .await
        .unwrap();
    let waited = server.get("anything").await;
    assert_eq!(waited.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(waited.headers().contains_key(header::RETRY_AFTER));
    // A waiter that gets the instance in time is served.
    let pending = tokio::spawn({
        let client = server.client.clone();
        let url = server.url("/files/later");
        async move { client.put(url).body("later").send().await.unwrap().status() }
    });
    while server.state.pool.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lease.release().await;
    assert_eq!(pending.await.unwrap(), StatusCode::CREATED);
    server.stop().await;
}

#[tokio::test]
async fn a_trapping_request_fails_cleanly_and_its_instance_is_replaced() {
    let server = TestServer::start(|config| {
        config.instances = 1;
        config.instance_memory_cap = Some(ByteSize(16 << 20));
        config.max_body = ByteSize(64 << 20);
    })
    .await;
    let before = server.json("/admin/pool").await;
    let first_id = instances(&before)[0]["id"].as_u64().unwrap();

    let too_big = server.put("huge", random_bytes(20 << 20)).await;
    assert_eq!(too_big.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let error: Value = too_big.json().await.unwrap();
    assert_eq!(error["error"], "instance_memory_exceeded");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("16777216 bytes")
    );

    // The pool replaced the instance and keeps serving.
    let content = random_bytes(1 << 20);
    assert_eq!(
        server.put("fine", content.clone()).await.status(),
        StatusCode::CREATED
    );
    let fetched = server.get("fine").await.bytes().await.unwrap();
    assert_eq!(sha256_hex(&fetched), sha256_hex(&content));
    assert_eq!(server.get("huge").await.status(), StatusCode::NOT_FOUND);
    let after = server.json("/admin/pool").await;
    assert_eq!(instances(&after).len(), 1);
    assert_ne!(instances(&after)[0]["id"].as_u64().unwrap(), first_id);
    assert_eq!(after["replacements"]["trap"], 1);

    // The same, in Prometheus text.
    let metrics = server.text("/metrics").await;
    assert!(
        metrics.contains("wasm_storage_replacements_total{reason=\"trap\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("wasm_storage_instances 1\n"), "{metrics}");
    assert!(metrics.contains("# TYPE wasm_storage_instance_memory_bytes gauge"));
    assert!(
        metrics.contains("wasm_storage_instance_memory_bytes{instance=\""),
        "{metrics}"
    );
    server.stop().await;
}

#[tokio::test]
async fn memory_figures_grow_with_uploads_and_a_replaced_instance_starts_small() {
    let server = TestServer::start(|config| config.instances = 1).await;
    let fresh = server.json("/admin/pool").await;
    let baseline = instances(&fresh)[0]["memory_bytes"].as_u64().unwrap();
    assert!(baseline > 0);
    assert!(fresh["process"]["rss_bytes"].as_u64().unwrap() > 0);

    let mut seen = Vec::new();
    for size in [1 << 20, 8 << 20, 1 << 20] {
        server.put("grow", random_bytes(size)).await;
        let pool = server.json("/admin/pool").await;
        seen.push(instances(&pool)[0]["memory_bytes"].as_u64().unwrap());
    }
    // It grows to hold each body it buffered, and never shrinks.
    assert!(seen[0] > baseline && seen[0] >= 1 << 20, "{seen:?}");
    assert!(seen[1] > seen[0] && seen[1] >= 8 << 20, "{seen:?}");
    assert_eq!(seen[2], seen[1], "linear memory never shrinks");

    let id = instances(&server.json("/admin/pool").await)[0]["id"]
        .as_u64()
        .unwrap();
    let replaced = server
        .client
        .post(server.url(&format!("/admin/pool/instances/{id}/replace")))
        .send()
        .await
        .unwrap();
    assert_eq!(replaced.status(), StatusCode::ACCEPTED);
    let pool = server.json("/admin/pool").await;
    assert_eq!(instances(&pool).len(), 1);
    assert_ne!(instances(&pool)[0]["id"].as_u64().unwrap(), id);
    assert_eq!(
        instances(&pool)[0]["memory_bytes"].as_u64().unwrap(),
        baseline
    );
    assert_eq!(pool["replacements"]["manual"], 1);
    let unknown = server
        .client
        .post(server.url("/admin/pool/instances/999999/replace"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn concurrent_clients_all_get_verified_answers() {
    let server = TestServer::start(|config| config.instances = 3).await;
    let mut clients = Vec::new();
    for client in 0..12 {
        let http = server.client.clone();
        let base = server.url("/files");
        clients.push(tokio::spawn(async move {
            for round in 0..5 {
                let content = random_bytes(1000 + client * 7919 + round * 65_537);
                let url = format!("{base}/c{client}/r{round}");
                let stored = http.put(&url).body(content.clone()).send().await.unwrap();
                assert_eq!(stored.status(), StatusCode::CREATED);
                let fetched = http.get(&url).send().await.unwrap();
                assert_eq!(fetched.status(), StatusCode::OK);
                assert_eq!(
                    sha256_hex(&fetched.bytes().await.unwrap()),
                    sha256_hex(&content)
                );
            }
        }));
    }
    for client in clients {
        client.await.unwrap();
    }
    // Every request was served (counted across instances the estimator may
    // have replaced meanwhile).
    let served = server.json("/admin/estimator").await["requests"]
        .as_u64()
        .unwrap();
    assert!(served >= 120, "served {served}");
    server.stop().await;
}

#[tokio::test]
async fn shutdown_finishes_the_request_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), |config| config.instances = 1).await;
    let content = random_bytes(16 << 20);
    let upload = tokio::spawn({
        let client = server.client.clone();
        let url = server.url("/files/in-flight");
        let content = content.clone();
        async move { client.put(url).body(content).send().await.unwrap().status() }
    });
    // Wait until the upload holds the instance, then ask the server to stop.
    while server.state.pool.instances()[0].requests == 0
        && server.state.pool.instances()[0].state != gateway::pool::InstanceState::Busy
    {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.stop().await;
    assert_eq!(upload.await.unwrap(), StatusCode::CREATED);
    let restarted = TestServer::start_in(dir.path(), |_| {}).await;
    let fetched = restarted.get("in-flight").await;
    assert_eq!(fetched.status(), StatusCode::OK);
    assert_eq!(
        sha256_hex(&fetched.bytes().await.unwrap()),
        sha256_hex(&content)
    );
    restarted.stop().await;
}

#[tokio::test]
async fn lru_dispatch_spreads_requests_and_mru_keeps_them_on_one_instance() {
    for (dispatch, expected) in [
        (gateway::pool::Dispatch::Lru, vec![3, 3, 3]),
        (gateway::pool::Dispatch::Mru, vec![0, 0, 9]),
    ] {
        let server = TestServer::start(|config| {
            config.instances = 3;
            config.dispatch = dispatch;
        })
        .await;
        for i in 0..9 {
            assert_eq!(
                server.put(&format!("f{i}"), vec![1; 10]).await.status(),
                StatusCode::CREATED
            );
        }
        let pool = server.json("/admin/pool").await;
        let mut served: Vec<u64> = instances(&pool)
            .iter()
            .map(|i| i["requests"].as_u64().unwrap())
            .collect();
        served.sort_unstable();
        assert_eq!(served, expected, "{dispatch:?}");
        server.stop().await;
    }
}

#[tokio::test]
async fn memory_aware_dispatch_keeps_large_requests_on_few_instances() {
    let large_instances = |pool: &Value| {
        instances(pool)
            .iter()
            .filter(|i| i["memory_bytes"].as_u64().unwrap() > 3 << 20)
            .count()
    };
    let mut seen = Vec::new();
    for dispatch in [
        gateway::pool::Dispatch::MemoryAware,
        gateway::pool::Dispatch::Lru,
    ] {
        let server = TestServer::start(|config| {
            config.instances = 3;
            config.dispatch = dispatch;
        })
        .await;
        // One large upload, small ones, a large download, another large upload.
        assert_eq!(
            server.put("big", random_bytes(4 << 20)).await.status(),
            StatusCode::CREATED
        );
        for i in 0..4 {
            assert_eq!(
                server
                    .put(&format!("small{i}"), random_bytes(1000))
                    .await
                    .status(),
                StatusCode::CREATED
            );
        }
        assert_eq!(
            server.get("big").await.bytes().await.unwrap().len(),
            4 << 20
        );
        assert_eq!(
            server.put("big2", random_bytes(3 << 20)).await.status(),
            StatusCode::CREATED
        );
        seen.push(large_instances(&server.json("/admin/pool").await));
        server.stop().await;
    }
    assert_eq!(seen[0], 1, "memory-aware: one large instance");
    assert!(seen[1] >= 2, "lru spreads the large requests: {seen:?}");
}
