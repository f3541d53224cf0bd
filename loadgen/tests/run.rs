//! `loadgen run` against a real gateway on a free loopback port.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use gateway::config::Config;
use loadgen::corpus::{self, Shape, SizeDistribution};
use loadgen::load::{self, Op, RunSpec, Stop, Workload};

async fn gateway(dir: &std::path::Path) -> String {
    let mut config = Config::for_data_dir(dir);
    config.instances = 4;
    // Blobs counted below are the current files' (kept versions would
    // keep every body an overwrite replaced).
    config.versions = false;
    let state = gateway::start(&config).await.unwrap();
    let listener = tokio::net::TcpListener::bind(config.listen).await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(gateway::serve(listener, state, std::future::pending()));
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_normal_sizes_are_all_verified() {
    let data = tempfile::tempdir().unwrap();
    let url = gateway(data.path()).await;
    let spec = RunSpec {
        base_url: url,
        op: Op::Mixed,
        workload: Workload::Sizes {
            sizes: SizeDistribution {
                mean: 200_000.0,
                stddev: 50_000.0,
                min: 1,
                max: 400_000,
                shape: Shape::Normal,
            },
            working_set: 8,
        },
        concurrency: 4,
        rate: None,
        stop: Stop::Requests(120),
        prefix: "t".into(),
        seed: 3,
        assume_stored: false,
        drift: false,
        fresh_bodies: false,
    };
    let summary = load::run(&spec, false).await.unwrap();
    assert_eq!(summary.requests, 120);
    assert_eq!(summary.failed, 0, "{:?}", summary.errors);
    assert!(
        summary.uploads > 20 && summary.downloads > 20,
        "{summary:?}"
    );
    assert!(summary.latency_ms.p50 > 0.0 && summary.latency_ms.p99 >= summary.latency_ms.p50);
    assert!(summary.megabytes_per_second > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_downloads_at_a_rate_and_a_wrong_digest_is_counted() {
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let url = gateway(data.path()).await;
    let sizes = SizeDistribution {
        mean: 50_000.0,
        stddev: 10_000.0,
        min: 1,
        max: 100_000,
        shape: Shape::Normal,
    };
    let manifest = corpus::generate(files.path(), 16, sizes, 9).unwrap();
    let spec = RunSpec {
        base_url: url.clone(),
        op: Op::Download,
        workload: Workload::Corpus {
            dir: files.path().to_owned(),
            manifest: manifest.clone(),
        },
        concurrency: 2,
        rate: Some(100.0),
        stop: Stop::After(Duration::from_millis(500)),
        prefix: "c".into(),
        seed: 1,
        assume_stored: false,
        drift: false,
        fresh_bodies: false,
    };
    let summary = load::run(&spec, false).await.unwrap();
    assert_eq!(summary.failed, 0, "{:?}", summary.errors);
    assert_eq!(summary.uploads, 0);
    // Paced at 100/s for half a second: about 50, never hundreds.
    assert!(
        (20..=80).contains(&summary.requests),
        "{} requests",
        summary.requests
    );

    // A digest that does not match what the gateway answers is caught.
    let mut lying = manifest.clone();
    lying.files.truncate(1);
    lying.files[0].sha256 = "0".repeat(64);
    let spec = RunSpec {
        workload: Workload::Corpus {
            dir: files.path().to_owned(),
            manifest: lying,
        },
        stop: Stop::Requests(5),
        rate: None,
        ..spec
    };
    let error = load::run(&spec, false).await.unwrap_err();
    assert!(error.to_string().contains("digest mismatch"), "{error}");
}

/// The distinct contents (blobs) the files under `prefix` hold, from the
/// gateway's listing (small blobs are records in segment files, not files
/// of their own, so the data directory cannot be counted).
async fn blobs(base_url: &str, prefix: &str) -> usize {
    let listing: serde_json::Value = reqwest::get(format!("{base_url}/files/{prefix}/?limit=1000"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let digests: std::collections::BTreeSet<String> = listing["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no files in {listing}"))
        .iter()
        .filter_map(|entry| Some(entry["sha256"].as_str()?.to_owned()))
        .collect();
    digests.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_bodies_make_every_upload_a_new_blob() {
    let sizes = SizeDistribution {
        mean: 4096.0,
        stddev: 0.0,
        min: 4096,
        max: 4096,
        shape: Shape::Normal,
    };
    // One worker cycles through 8 paths: 40 uploads of 2 bodies leave at
    // most 2 blobs; with fresh bodies each path holds content of its own.
    for (fresh, expected_blobs) in [(false, 1..=2), (true, 8..=8)] {
        let data = tempfile::tempdir().unwrap();
        let base_url = gateway(data.path()).await;
        let spec = RunSpec {
            base_url: base_url.clone(),
            op: Op::Upload,
            workload: Workload::Sizes {
                sizes,
                working_set: 2,
            },
            concurrency: 1,
            rate: None,
            stop: Stop::Requests(40),
            prefix: "f".into(),
            seed: 5,
            assume_stored: false,
            drift: false,
            fresh_bodies: fresh,
        };
        let summary = load::run(&spec, false).await.unwrap();
        assert_eq!(summary.failed, 0, "{:?}", summary.errors);
        let stored = blobs(&base_url, "f/uploads/w0").await;
        assert!(
            expected_blobs.contains(&stored),
            "fresh bodies {fresh}: {stored} blobs"
        );
    }
}
