//! Garbage collection and the ledger: what a crash leaves, removals
//! finished or taken over, two gateways racing on one content.

use std::sync::Arc;

use super::*;
use crate::ledger::BlobState;

async fn sweep_removes_leftovers_of_a_crash(backend: &Backend) {
    let (dir, volume, config) = backend.open_with_config().await;
    let orphan = digest_of(b"orphan");
    put(&volume, "kept", b"kept").await.unwrap();
    // A crash between the blob write and the commit leaves an orphan blob
    // and possibly a temp file.
    let mut leftover = staged(&volume, b"orphan").await;
    volume.blobs.write(&orphan, &mut leftover).await.unwrap();
    drop(leftover);
    std::fs::write(dir.path().join("tmp/upload-interrupted"), b"partial").unwrap();
    volume.close().await;
    drop(volume);

    let (volume, report) = Volume::open(&config).await.unwrap();
    assert_eq!(
        report,
        SweepReport {
            temp_files_removed: 1,
            orphan_blobs_removed: 1,
            files_missing_blobs: 0,
            uploads_removed: 0,
            // "kept" was packed into a segment left small by the stop:
            // compacted into a new one (and read back below).
            segments_compacted: usize::from(volume.blobs.segments().is_some()),
        }
    );
    assert!(!exists(&volume, &orphan).await);
    assert_eq!(read(&volume, "kept").await.unwrap().1, b"kept");
}

async fn a_missing_blob_is_reported_not_hidden(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    put(&volume, "f", b"content").await.unwrap();
    // Packed into a segment of its own (on a local store): the segment goes.
    let digest = digest_of(b"content");
    match crate::packing::placement(volume.db(), &digest)
        .await
        .unwrap()
    {
        Some(packed) => {
            let segments = volume.blobs.segments().unwrap();
            assert!(segments.holds(packed).unwrap());
            segments.remove(packed.segment).await.unwrap();
        }
        None => volume.blobs.remove(&digest).await.unwrap(),
    }
    assert!(matches!(
        read(&volume, "f").await,
        Err(VolumeError::MissingBlob(_))
    ));
    assert_eq!(
        volume.collect_garbage().await.unwrap().files_missing_blobs,
        1
    );
}

/// Two volumes on one database and one blob store, as two gateways: one
/// keeps deleting the last reference to a content while the other keeps
/// uploading the same content under other paths. Every row must always
/// name a blob that is there.
async fn two_gateways_racing_on_one_content_never_lose_a_blob(backend: &Backend) {
    let (_dir_a, a, config) = backend.open_with_config().await;
    let dir_b = tempfile::tempdir().unwrap();
    let config_b = VolumeConfig {
        data_dir: dir_b.path().to_path_buf(),
        ..config
    };
    let (b, _) = Volume::open(&config_b).await.unwrap();
    let (a, b) = (Arc::new(a), Arc::new(b));
    let contents: [&[u8]; 2] = [b"raced content one", b"raced content two"];
    let mut tasks = Vec::new();
    for (side, volume) in [a.clone(), b.clone(), a.clone(), b.clone()]
        .into_iter()
        .enumerate()
    {
        tasks.push(tokio::spawn(async move {
            // One path each: the last reference to a content goes away (on
            // one volume) as often as it comes back (on the other).
            let mine = format!("side{side}");
            for round in 0..60 {
                let content = contents[round % 2];
                put(&volume, &mine, content).await.unwrap();
                let (meta, read_back) = read(&volume, &mine)
                    .await
                    .unwrap_or_else(|e| panic!("{mine}, round {round}: {e:?}"));
                assert_eq!(read_back, content);
                assert_eq!(meta.sha256, digest_of(content).as_str());
                volume.delete(Owner::OPEN, &path(&mine)).await.unwrap();
            }
            put(&volume, &mine, contents[side % 2]).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for volume in [&a, &b] {
        let report = volume.collect_garbage().await.unwrap();
        assert_eq!(report.files_missing_blobs, 0);
    }
    for side in 0..4 {
        let (_, content) = read(&b, &format!("side{side}")).await.unwrap();
        assert_eq!(content, contents[side % 2]);
    }
    // Nothing unreferenced is left once both have collected.
    for content in contents {
        let digest = digest_of(content);
        let named = a.tree.referenced().await.unwrap();
        assert_eq!(named.contains(digest.as_str()), exists(&a, &digest).await);
    }
}

/// A removal marked in the ledger whose process stopped before removing
/// the blob is finished by the next collection, and an upload of the same
/// content waits for it rather than naming a blob about to go.
async fn an_unfinished_removal_is_finished_then_written_again(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let digest = digest_of(b"interrupted");
    put(&volume, "f", b"interrupted").await.unwrap();
    // Drop the row and mark the blob as a stopped remover would have.
    delete_row_only(&volume, "f").await;
    let mut tx = volume.db().begin_write().await.unwrap();
    ledger::mark_deleting(&mut tx, &digest, &volume.claimant.id, 0)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert!(exists(&volume, &digest).await);

    let report = volume.collect_garbage().await.unwrap();
    assert_eq!(report.orphan_blobs_removed, 1);
    assert!(!exists(&volume, &digest).await);
    put(&volume, "g", b"interrupted").await.unwrap();
    assert_eq!(read(&volume, "g").await.unwrap().1, b"interrupted");
    assert!(exists(&volume, &digest).await);
}

/// Two processes both find the same removal stale; the first takes it over
/// and finishes it, the content is uploaded again, and the second, late,
/// must not remove the new blob.
async fn a_stale_removal_is_taken_over_once(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let digest = digest_of(b"taken over");
    put(&volume, "f", b"taken over").await.unwrap();
    delete_row_only(&volume, "f").await;
    let mut tx = volume.db().begin_write().await.unwrap();
    ledger::mark_deleting(&mut tx, &digest, &volume.claimant.id, 0)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert!(volume.take_over_removal(&digest, 0).await.unwrap());
    assert!(!exists(&volume, &digest).await);
    put(&volume, "g", b"taken over").await.unwrap();
    assert!(!volume.take_over_removal(&digest, 0).await.unwrap());
    assert!(exists(&volume, &digest).await);
    assert_eq!(read(&volume, "g").await.unwrap().1, b"taken over");
}

/// A blob the ledger does not know is left alone within the grace period
/// (an upload elsewhere may be about to record it).
async fn a_young_unrecorded_blob_is_left_alone(backend: &Backend) {
    let (_dir, volume, config) = backend.open_with_config().await;
    let patient = Volume {
        orphan_grace: Duration::from_secs(3600),
        ..Volume::open(&config).await.unwrap().0
    };
    let digest = digest_of(b"in flight");
    let mut bytes = staged(&volume, b"in flight").await;
    volume.blobs.write(&digest, &mut bytes).await.unwrap();
    assert_eq!(
        patient
            .collect_garbage()
            .await
            .unwrap()
            .orphan_blobs_removed,
        0
    );
    assert!(exists(&volume, &digest).await);
    assert_eq!(
        volume.collect_garbage().await.unwrap().orphan_blobs_removed,
        1
    );
    assert!(!exists(&volume, &digest).await);
}

/// Mark `digest` as being removed by `claimant` since `since_ms`, as a
/// remover does before it removes the blob, and commit.
async fn mark_deleting(volume: &Volume, digest: &Digest, claimant: &str, since_ms: i64) {
    let mut tx = volume.db().begin_write().await.unwrap();
    ledger::mark_deleting(&mut tx, digest, claimant, since_ms)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

async fn ledger_state(volume: &Volume, digest: &Digest) -> Option<BlobState> {
    ledger::peek(volume.db(), digest).await.unwrap()
}

/// A kill cuts removals off at either point: after the mark committed and
/// before the blob went, or after the blob went and before its row did.
/// The next start on the same data directory finishes both at once, not a
/// lease later (until then the content could not even be uploaded again);
/// another gateway's fresh removal it leaves to its lease.
async fn removals_cut_off_by_a_kill_are_finished_at_the_next_start(backend: &Backend) {
    let (_dir, volume, config) = backend.open_with_config().await;
    let (marked, removed, elsewhere) = (
        digest_of(b"marked"),
        digest_of(b"removed"),
        digest_of(b"elsewhere"),
    );
    for (name, content) in [
        ("m", &b"marked"[..]),
        ("r", b"removed"),
        ("e", b"elsewhere"),
    ] {
        put(&volume, name, content).await.unwrap();
        delete_row_only(&volume, name).await;
    }
    let now = now_ms();
    mark_deleting(&volume, &marked, &volume.claimant.id, now).await;
    mark_deleting(&volume, &removed, &volume.claimant.id, now).await;
    volume.blobs.remove(&removed).await.unwrap();
    let other_gateway = "0123456789abcdef0123456789abcdef";
    mark_deleting(&volume, &elsewhere, other_gateway, now).await;
    // The kill: nothing closes, nothing finishes.
    drop(volume);

    let (volume, report) = Volume::open(&config).await.unwrap();
    assert_eq!(report.orphan_blobs_removed, 2, "{report:?}");
    for digest in [&marked, &removed] {
        assert!(!exists(&volume, digest).await);
        assert_eq!(ledger_state(&volume, digest).await, None);
    }
    assert!(exists(&volume, &elsewhere).await);
    assert!(matches!(
        ledger_state(&volume, &elsewhere).await,
        Some(BlobState::Deleting { .. })
    ));
    let uploaded = tokio::time::timeout(Duration::from_secs(5), put(&volume, "again", b"marked"));
    uploaded.await.unwrap().unwrap();
    assert_eq!(read(&volume, "again").await.unwrap().1, b"marked");

    // Once the other gateway's lease is over, a collection finishes it.
    let after_lease = Volume {
        removal_lease: Duration::ZERO,
        ..Volume::open(&config).await.unwrap().0
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(
        after_lease
            .collect_garbage()
            .await
            .unwrap()
            .orphan_blobs_removed,
        1
    );
    assert!(!exists(&volume, &elsewhere).await);
    assert_eq!(ledger_state(&volume, &elsewhere).await, None);
}

/// A removal whose blob a file names (nothing should, but a file must never
/// lose its content to one) is undone, not finished: at the next start for
/// this directory's own removal, after the lease for another's. The row is
/// `stored` again and the blob stays.
async fn a_removal_of_a_blob_a_file_names_is_undone(backend: &Backend) {
    let (_dir, volume, config) = backend.open_with_config().await;
    let (mine, theirs) = (digest_of(b"mine"), digest_of(b"theirs"));
    put(&volume, "mine", b"mine").await.unwrap();
    put(&volume, "theirs", b"theirs").await.unwrap();
    mark_deleting(&volume, &mine, &volume.claimant.id, now_ms()).await;
    mark_deleting(&volume, &theirs, "0123456789abcdef0123456789abcdef", 0).await;
    drop(volume);

    let (volume, report) = Volume::open(&config).await.unwrap();
    assert_eq!(report.orphan_blobs_removed, 0, "{report:?}");
    for (name, digest) in [("mine", &mine), ("theirs", &theirs)] {
        assert_eq!(ledger_state(&volume, digest).await, Some(BlobState::Stored));
        assert_eq!(read(&volume, name).await.unwrap().1, name.as_bytes());
    }
    // Stored again means releasable again once the file goes.
    volume.delete(Owner::OPEN, &path("mine")).await.unwrap();
    assert!(!exists(&volume, &mine).await);
    assert_eq!(ledger_state(&volume, &mine).await, None);
}

suite!(
    sweep_removes_leftovers_of_a_crash,
    a_missing_blob_is_reported_not_hidden,
    two_gateways_racing_on_one_content_never_lose_a_blob,
    an_unfinished_removal_is_finished_then_written_again,
    a_stale_removal_is_taken_over_once,
    a_young_unrecorded_blob_is_left_alone,
    removals_cut_off_by_a_kill_are_finished_at_the_next_start,
    a_removal_of_a_blob_a_file_names_is_undone,
);
