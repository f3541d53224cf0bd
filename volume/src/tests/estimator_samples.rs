//! The estimator's memory samples kept in the database.

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

suite!(samples_are_kept_until_pruned,);
