//! The estimator's evidence kept in the database: memory samples, and
//! request footprints shared by the gateways on one database.

use super::*;

async fn samples_are_kept_until_pruned(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    assert_eq!(volume.samples().last_instance().await.unwrap(), None);
    let round = |t: i64| {
        let instances = [
            estimator::Sample {
                timestamp_ms: t,
                instance: 1,
                bytes: 100 + t as u64,
            },
            estimator::Sample {
                timestamp_ms: t,
                instance: 2,
                bytes: 200,
            },
        ];
        let process = ProcessSample {
            timestamp_ms: t,
            rss_bytes: 10,
            private_dirty_bytes: 5,
        };
        (instances, process)
    };
    for t in [1000, 2000, 3000] {
        let (instances, process) = round(t);
        volume.samples().record(&instances, &process).await.unwrap();
    }
    assert_eq!(volume.samples().last_instance().await.unwrap(), Some(2));
    let all = volume.samples().memory(0, i64::MAX).await.unwrap();
    assert_eq!(all.len(), 6);
    assert_eq!(
        all[0],
        estimator::Sample {
            timestamp_ms: 1000,
            instance: 1,
            bytes: 1100
        }
    );
    assert_eq!(volume.samples().memory(2000, 2000).await.unwrap().len(), 2);
    assert_eq!(
        volume.samples().process(0, i64::MAX).await.unwrap().len(),
        3
    );

    assert_eq!(volume.samples().prune(2500).await.unwrap(), 6);
    assert_eq!(volume.samples().memory(0, i64::MAX).await.unwrap().len(), 2);
    assert_eq!(
        volume.samples().process(0, i64::MAX).await.unwrap()[0].timestamp_ms,
        3000
    );
}

fn records(
    seqs: std::ops::RangeInclusive<u64>,
    at_ms: impl Fn(u64) -> i64,
) -> Vec<FootprintRecord> {
    seqs.map(|seq| FootprintRecord {
        seq,
        timestamp_ms: at_ms(seq),
        footprint: if seq % 2 == 0 {
            estimator::Footprint::Grew(seq * 10)
        } else {
            estimator::Footprint::Within(seq * 10)
        },
    })
    .collect()
}

/// Keeps everything these cases write.
const KEEP_ALL: FootprintRetention = FootprintRetention {
    per_gateway: u64::MAX,
    total: u64::MAX,
    before_ms: 0,
};

async fn footprints_of_every_gateway_are_read_most_recent_first(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let store = volume.footprints();
    assert_eq!(store.recent(10, 0).await.unwrap(), vec![]);
    // 300 rows in one batch: every statement size (256, 32, 4 and 1) at once.
    let a = records(1..=301, |seq| 1000 + 2 * seq as i64);
    store.append("a", &a[..300], &KEEP_ALL).await.unwrap();
    // The other gateway's, in between in time.
    let b = records(1..=3, |seq| 1001 + 2 * seq as i64);
    store.append("b", &b, &KEEP_ALL).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 303);

    let recent = store.recent(5, 0).await.unwrap();
    let seen: Vec<(&str, u64)> = recent
        .iter()
        .map(|f| (f.gateway.as_str(), f.record.seq))
        .collect();
    assert_eq!(
        seen,
        [("a", 296), ("a", 297), ("a", 298), ("a", 299), ("a", 300)]
    );
    assert_eq!(recent[4].record, a[299]);
    let all = store.recent(1000, 0).await.unwrap();
    assert_eq!(all.len(), 303);
    assert!(
        all.windows(2)
            .all(|w| w[0].record.timestamp_ms <= w[1].record.timestamp_ms)
    );
    let early: Vec<(&str, u64)> = all[..6]
        .iter()
        .map(|f| (f.gateway.as_str(), f.record.seq))
        .collect();
    assert_eq!(
        early,
        [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("a", 3), ("b", 3)]
    );
    assert_eq!(all[1].record, b[0]);
    // Only those recorded since a moment.
    let since = store.recent(1000, 1000 + 2 * 295).await.unwrap();
    assert_eq!(since.first().map(|f| f.record.seq), Some(295));
    assert_eq!(since.len(), 6);

    // A batch sent again (its commit's answer lost) is stored once, with
    // what it holds that is new.
    store.append("a", &a[298..], &KEEP_ALL).await.unwrap();
    assert_eq!(store.count().await.unwrap(), 304);
    let newest = store.recent(2, 0).await.unwrap();
    assert_eq!(newest[0].record, a[299]);
    assert_eq!(newest[1].record, a[300]);
}

async fn footprints_stay_bounded_per_gateway_and_in_all(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let store = volume.footprints();
    let keep = FootprintRetention {
        per_gateway: 50,
        total: 120,
        before_ms: 0,
    };
    // Four gateways, far more than the bound each.
    for round in 0..4u64 {
        for gateway in ["a", "b", "c", "d"] {
            let from = round * 40 + 1;
            let batch = records(from..=from + 39, |seq| 10 * seq as i64);
            store.append(gateway, &batch, &keep).await.unwrap();
            assert!(store.count().await.unwrap() <= 120);
        }
    }
    let all = store.recent(u64::MAX, 0).await.unwrap();
    assert_eq!(all.len(), 120);
    for gateway in ["a", "b", "c", "d"] {
        let seqs: Vec<u64> = all
            .iter()
            .filter(|f| f.gateway == gateway)
            .map(|f| f.record.seq)
            .collect();
        assert!(seqs.len() <= 50, "{gateway}: {}", seqs.len());
        // What stays of each gateway is its newest.
        assert!(
            seqs.iter().all(|&seq| seq > 160 - 50),
            "{gateway}: {seqs:?}"
        );
    }
    // The newest 120 in all: the last 30 of each (they share their times).
    assert_eq!(all[0].record.timestamp_ms, 10 * 131);

    // Older than the cut-off: gone at the next append, even an empty one.
    let keep = FootprintRetention {
        before_ms: 10 * 150,
        ..keep
    };
    let removed = store.append("a", &[], &keep).await.unwrap();
    assert!(removed > 0);
    let left = store.recent(u64::MAX, 0).await.unwrap();
    assert!(left.iter().all(|f| f.record.timestamp_ms >= 10 * 150));
    assert_eq!(left.len(), 4 * 11);
}

suite!(
    samples_are_kept_until_pruned,
    footprints_of_every_gateway_are_read_most_recent_first,
    footprints_stay_bounded_per_gateway_and_in_all,
);
