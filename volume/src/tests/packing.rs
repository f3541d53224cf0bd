//! Small blobs packed into segments (a local store) and compacted while
//! files come and go; an object store keeps every blob an object of its
//! own, and the same load must hold there too.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rand::{Rng as _, SeedableRng as _};

use super::*;
use crate::packing::placement;

async fn small_blobs_are_packed_and_read_back(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let sizes = [0, 1, 4096, 64 << 10, (64 << 10) + 1];
    for size in sizes {
        let content: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        put(&volume, &format!("f{size}"), &content).await.unwrap();
        let packed = placement(volume.db(), &digest_of(&content)).await.unwrap();
        let expect_packed = volume.blobs.segments().is_some() && size <= 64 << 10;
        assert_eq!(packed.is_some(), expect_packed, "{size} bytes: {packed:?}");
        assert_eq!(read(&volume, &format!("f{size}")).await.unwrap().1, content);
    }
    let report = volume.collect_garbage().await.unwrap();
    assert_eq!(report.files_missing_blobs, 0);
    assert_eq!(report.orphan_blobs_removed, 0);
}

/// Four writers overwrite and delete small files of their own (reading
/// each back at once) while a fifth keeps sealing the open segment and
/// compacting: no read ever sees other bytes, no file loses its blob, and
/// the dead space is given back.
async fn compaction_under_load_loses_nothing(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let volume = Arc::new(volume);
    let writing = Arc::new(AtomicBool::new(true));
    let compacted = Arc::new(AtomicUsize::new(0));
    let compactor = {
        let (volume, writing, compacted) = (volume.clone(), writing.clone(), compacted.clone());
        tokio::spawn(async move {
            while writing.load(Ordering::SeqCst) {
                if let Some(segments) = volume.blobs.segments()
                    && let Some(open) = segments.open_id()
                {
                    segments.abandon(open);
                }
                let report = volume.collect_garbage().await.unwrap();
                assert_eq!(report.files_missing_blobs, 0);
                compacted.fetch_add(report.segments_compacted, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let mut writers = Vec::new();
    for writer in 0..4u64 {
        let volume = volume.clone();
        writers.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(writer);
            let mut last: Vec<Option<Vec<u8>>> = vec![None; 5];
            for round in 0..150 {
                let slot = rng.random_range(0..last.len());
                let name = format!("w{writer}/f{slot}");
                if rng.random_range(0..5) == 0 {
                    if last[slot].take().is_some() {
                        volume.delete(Owner::OPEN, &path(&name)).await.unwrap();
                    }
                    continue;
                }
                let size = rng.random_range(0..=(64usize << 10));
                let mut content = vec![0u8; size];
                rng.fill(&mut content[..]);
                put(&volume, &name, &content).await.unwrap();
                let (_, back) = read(&volume, &name)
                    .await
                    .unwrap_or_else(|e| panic!("{name}, round {round}: {e:?}"));
                assert!(back == content, "{name}, round {round}: other bytes");
                last[slot] = Some(content);
            }
            last
        }));
    }
    let mut finals = Vec::new();
    for (writer, task) in writers.into_iter().enumerate() {
        finals.push((writer, task.await.unwrap()));
    }
    writing.store(false, Ordering::SeqCst);
    compactor.await.unwrap();

    // Once more after the load, the open segment sealed: every dead record
    // is given back.
    if let Some(segments) = volume.blobs.segments()
        && let Some(open) = segments.open_id()
    {
        segments.abandon(open);
    }
    let report = volume.collect_garbage().await.unwrap();
    assert_eq!(report.files_missing_blobs, 0);
    for (writer, last) in &finals {
        for (slot, content) in last.iter().enumerate() {
            let name = format!("w{writer}/f{slot}");
            match content {
                Some(content) => assert!(read(&volume, &name).await.unwrap().1 == *content),
                None => assert!(matches!(
                    read(&volume, &name).await,
                    Err(VolumeError::NotFound(_))
                )),
            }
        }
    }
    if let Some(segments) = volume.blobs.segments() {
        compacted.fetch_add(report.segments_compacted, Ordering::SeqCst);
        assert!(compacted.load(Ordering::SeqCst) > 0, "nothing compacted");
        // What is left on disk is what lives, plus the segment the last
        // compaction copied into.
        let stored: u64 = segments
            .list()
            .await
            .unwrap()
            .iter()
            .map(|segment| segment.len)
            .sum();
        let live: u64 = finals
            .iter()
            .flat_map(|(_, last)| last.iter().flatten())
            .map(|content| content.len() as u64 + crate::blobs::RECORD_HEADER)
            .sum();
        assert!(
            stored <= 2 * live + (64 << 10),
            "{stored} bytes in segments for {live} live"
        );
    }
}

/// An overwrite or a delete has let go of the blob it left unnamed by the
/// time it returns (in its own transaction on SQLite, a change after it on
/// PostgreSQL), packed or of its own; one another file still names, or
/// the one it wrote again, stays.
async fn overwrites_and_deletes_let_go_of_what_they_leave_unnamed(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let gone = async |content: &[u8]| {
        let digest = digest_of(content);
        crate::ledger::peek(volume.db(), &digest)
            .await
            .unwrap()
            .is_none()
            && !exists(&volume, &digest).await
    };
    for (size, name) in [(4096, "small"), (1 << 20, "large")] {
        let [first, second, shared]: [Vec<u8>; 3] =
            std::array::from_fn(|n| (0..size).map(|i| ((i * 7 + n * 13) % 251) as u8).collect());
        put(&volume, name, &first).await.unwrap();
        put(&volume, name, &second).await.unwrap();
        assert!(gone(&first).await, "{name}: the overwritten blob");
        put(&volume, name, &second).await.unwrap();
        assert!(!gone(&second).await, "{name}: the same content again");
        volume.delete(Owner::OPEN, &path(name)).await.unwrap();
        assert!(gone(&second).await, "{name}: the deleted blob");
        put(&volume, &format!("{name}-a"), &shared).await.unwrap();
        put(&volume, &format!("{name}-b"), &shared).await.unwrap();
        put(&volume, &format!("{name}-a"), &first).await.unwrap();
        assert!(!gone(&shared).await, "{name}: named by another file");
        assert_eq!(read(&volume, &format!("{name}-b")).await.unwrap().1, shared);
    }
    let report = volume.collect_garbage().await.unwrap();
    assert_eq!(report.files_missing_blobs, 0, "{report:?}");
    assert_eq!(report.orphan_blobs_removed, 0, "{report:?}");
}

suite!(
    small_blobs_are_packed_and_read_back,
    compaction_under_load_loses_nothing,
    overwrites_and_deletes_let_go_of_what_they_leave_unnamed,
);
