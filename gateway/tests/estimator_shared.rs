//! Request footprints kept in the metadata database: a gateway restarted
//! on the same data has a threshold in force at its first request (unless
//! told not to share them); two
//! gateways on one PostgreSQL learn from each other's traffic (traffic only
//! through A: B shows A's threshold within about a recompute interval, and
//! a gateway started later has it at once); the table stays bounded.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::TestServer;
use gateway::config::Config;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use volume::BlobUrl;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Small round trips through `server` until its threshold is engaged;
/// the threshold then.
async fn learn(server: &TestServer, rng: &mut StdRng) -> u64 {
    for i in 0..100 {
        let size = rng.random_range(KIB..MIB);
        server.round_trip(&format!("small/{i}"), rng, size).await;
        let report = server.json("/admin/estimator").await;
        if let Some(threshold) = report["threshold_bytes"].as_u64() {
            return threshold;
        }
    }
    panic!("no threshold after 200 requests");
}

fn threshold(report: &Value) -> Option<u64> {
    report["threshold_bytes"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_restarted_on_the_same_data_has_a_threshold_at_its_first_request() {
    let dir = tempfile::tempdir().unwrap();
    let configure = |config: &mut Config| {
        config.sample_interval = Duration::from_millis(200);
    };
    let first = TestServer::start_in(dir.path(), configure).await;
    let mut rng = StdRng::seed_from_u64(25);
    let learned = learn(&first, &mut rng).await;
    // Stopping stores what the last round had not.
    first.stop().await;

    let second = TestServer::start_in(dir.path(), configure).await;
    let report = second.json("/admin/estimator").await;
    let in_force = threshold(&report).unwrap_or_else(|| panic!("no threshold at start: {report}"));
    assert_eq!(second.state.pool.threshold(), Some(in_force));
    assert_eq!(report["calibration"]["state"], "rolling", "{report}");
    assert_eq!(report["requests"], 0, "{report}");
    assert!(
        report["footprints_from_others"].as_u64().unwrap() >= 32,
        "{report}"
    );
    assert!(in_force < 4 * MIB as u64, "{in_force}");
    println!("restarted: {learned} B learned before, {in_force} B in force at start");

    // The first request grows its instance far above: replaced at once.
    let mut large = vec![0; 16 * MIB];
    rng.fill(&mut large[..]);
    assert!(second.put("large", large).await.status().is_success());
    let give_up = Instant::now() + Duration::from_secs(5);
    let pool = loop {
        let pool = second.json("/admin/pool").await;
        if pool["replacements"]["threshold"].as_u64().unwrap_or(0) >= 1 || Instant::now() > give_up
        {
            break pool;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(pool["replacements"]["threshold"], 1, "{pool}");
    assert_eq!(second.json("/admin/estimator").await["requests"], 1);
    second.stop().await;

    // Not shared: learns from its own requests alone, and stores none.
    let third = TestServer::start_in(dir.path(), |config| {
        configure(config);
        config.share_footprints = false;
    })
    .await;
    let before = third.state.volume.footprints().count().await.unwrap();
    let report = third.json("/admin/estimator").await;
    assert_eq!(threshold(&report), None, "{report}");
    assert_eq!(report["footprints_from_others"], 0, "{report}");
    third.round_trip("small/again", &mut rng, 100 * KIB).await;
    let recycler = third.state.recycler.clone();
    recycler.round().await.unwrap();
    assert_eq!(
        third.state.volume.footprints().count().await.unwrap(),
        before
    );
    assert_eq!(third.json("/admin/estimator").await["requests"], 2);
    third.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateways_on_one_postgresql_learn_from_each_others_traffic() {
    const INTERVAL: Duration = Duration::from_millis(300);
    let postgres = tokio::task::spawn_blocking(|| testsupport::Postgres::start().unwrap())
        .await
        .unwrap();
    let database = postgres.create_database("shared").unwrap();
    let blobs = tempfile::tempdir().unwrap();
    let configure = |config: &mut Config| {
        config.database_url = Some(database.parse().unwrap());
        config.blob_store = Some(BlobUrl::Local(blobs.path().to_owned()));
        config.sample_interval = INTERVAL;
    };
    let a = TestServer::start(configure).await;
    let b = TestServer::start(configure).await;
    assert_eq!(threshold(&b.json("/admin/estimator").await), None);

    // Traffic only through A, until A's threshold is engaged.
    let mut rng = StdRng::seed_from_u64(26);
    learn(&a, &mut rng).await;
    let engaged = Instant::now();

    // B learns A's threshold from the database: A stores its footprints at
    // its next round, B reads them at its next, so within two intervals
    // (plus the slack of a busy machine).
    let give_up = engaged + 2 * INTERVAL + Duration::from_secs(3);
    let (of_a, of_b) = loop {
        let of_b = b.json("/admin/estimator").await;
        let of_a = a.json("/admin/estimator").await;
        if threshold(&of_b).is_some() && threshold(&of_b) == threshold(&of_a)
            || Instant::now() > give_up
        {
            break (of_a, of_b);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let took = engaged.elapsed();
    assert_eq!(threshold(&of_b), threshold(&of_a), "A: {of_a}\nB: {of_b}");
    assert!(threshold(&of_b).is_some());
    assert_eq!(of_b["requests"], 0, "{of_b}");
    assert!(
        of_b["footprints_from_others"].as_u64().unwrap() >= 32,
        "{of_b}"
    );
    assert_eq!(b.state.pool.threshold(), threshold(&of_b));
    println!(
        "B had A's threshold ({} B) {} ms after A engaged (interval {} ms)",
        threshold(&of_a).unwrap(),
        took.as_millis(),
        INTERVAL.as_millis()
    );

    // A gateway that joins now has it before its first request.
    let c = TestServer::start(configure).await;
    let of_c = c.json("/admin/estimator").await;
    assert_eq!(threshold(&of_c), threshold(&of_a), "{of_c}");
    for server in [a, b, c] {
        server.stop().await;
    }
    drop(postgres);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_footprints_stay_within_the_window() {
    const WINDOW: u64 = 20;
    let server = TestServer::start(|config| {
        config.footprint_window = WINDOW;
        config.estimator_min_requests = 10;
        config.sample_interval = Duration::from_millis(50);
    })
    .await;
    let mut rng = StdRng::seed_from_u64(27);
    for i in 0..60 {
        server
            .round_trip(&format!("small/{}", i % 5), &mut rng, 4 * KIB)
            .await;
    }
    // Every footprint stored by the next round, and none beyond the
    // window of this (only) gateway.
    let stored = async || {
        let footprints = server.state.volume.footprints();
        let recent = footprints.recent(u64::MAX, 0).await.unwrap();
        (footprints.count().await.unwrap(), recent)
    };
    let give_up = Instant::now() + Duration::from_secs(5);
    let (count, recent) = loop {
        let (count, recent) = stored().await;
        let newest = recent.last().map_or(0, |f| f.record.seq);
        if newest == 120 || Instant::now() > give_up {
            break (count, recent);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(count, WINDOW);
    let seqs: Vec<u64> = recent.iter().map(|f| f.record.seq).collect();
    assert_eq!(seqs, (101..=120).collect::<Vec<_>>());
    server.stop().await;
}
