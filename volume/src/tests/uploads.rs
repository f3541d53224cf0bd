//! Resumable uploads: parts recorded in order, an append at a stale offset
//! refused, an owner's uploads their own, removal and expiry freeing parts.

use super::*;
use crate::uploads::NewUpload;

fn new_upload(owner: Owner, length: Option<u64>, expires_ms: i64) -> NewUpload {
    NewUpload {
        kind: crate::uploads::UploadKind::Tus,
        owner,
        path: path("videos/film.webm"),
        length,
        content_type: "video/webm".into(),
        create_only: false,
        metadata: "filename ZmlsbS53ZWJt".into(),
        expires_ms,
    }
}

fn in_an_hour() -> i64 {
    now_ms() + 3_600_000
}

async fn append(
    volume: &Volume,
    owner: Owner,
    id: &str,
    offset: u64,
    bytes: &[u8],
    length: Option<u64>,
) -> Option<crate::uploads::Upload> {
    append_bytes(volume, owner, id, offset, bytes, length, in_an_hour())
        .await
        .unwrap()
}

/// The bytes upload `id` keeps, read back as the next request would.
async fn content_of(volume: &Volume, owner: Owner, id: &str) -> Vec<u8> {
    let upload = volume.find_upload(owner, id).await.unwrap().unwrap();
    let mut appending = volume.resume_upload(&upload, 0, 0).await.unwrap();
    let mut all = Vec::new();
    loop {
        let chunk = appending.replay.read(1 << 16).await.unwrap();
        if chunk.is_empty() {
            break;
        }
        all.extend_from_slice(&chunk);
    }
    assert_eq!(all.len() as u64, upload.received);
    all
}

/// Whether the blob store keeps anything of upload `id`.
async fn keeps_bytes_of(volume: &Volume, id: &str) -> bool {
    let kept = volume.blobs.uploads_with_parts().await.unwrap();
    kept.iter().any(|(upload, _)| upload == id)
}

async fn parts_are_recorded_in_order_and_read_back(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let owner = Owner::OPEN;
    let created = volume
        .create_upload("u1", &new_upload(owner, None, in_an_hour()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((created.received, created.length), (0, None));
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let first = append(&volume, owner, "u1", 0, &content[..100], None)
        .await
        .unwrap();
    assert_eq!(first.received, 100);
    // The length, deferred, comes with the second part.
    let second = append(
        &volume,
        owner,
        "u1",
        100,
        &content[100..200_000],
        Some(300_000),
    )
    .await
    .unwrap();
    assert_eq!((second.received, second.length), (200_000, Some(300_000)));
    let third = append(&volume, owner, "u1", 200_000, &content[200_000..], None)
        .await
        .unwrap();
    assert_eq!(third.received, 300_000);
    assert_eq!(content_of(&volume, owner, "u1").await, content);
    let found = volume.find_upload(owner, "u1").await.unwrap().unwrap();
    assert_eq!(found, third);
    assert_eq!(found.metadata, "filename ZmlsbS53ZWJt");
    assert_eq!(volume.uploads_in_progress().await.unwrap(), 1);
}

async fn an_append_at_a_stale_offset_is_refused(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let owner = Owner::OPEN;
    volume
        .create_upload("u2", &new_upload(owner, Some(10), in_an_hour()))
        .await
        .unwrap()
        .unwrap();
    append(&volume, owner, "u2", 0, b"abcd", None)
        .await
        .unwrap();
    // Two requests sent from offset 0: the second finds the upload moved.
    assert_eq!(append(&volume, owner, "u2", 0, b"wxyz", None).await, None);
    assert_eq!(append(&volume, owner, "u2", 8, b"wx", None).await, None);
    let found = volume.find_upload(owner, "u2").await.unwrap().unwrap();
    assert_eq!(found.received, 4);
    assert_eq!(content_of(&volume, owner, "u2").await, b"abcd");
    // Two requests that found it at 4: on a local store the second is
    // told it is busy; on an object store the first to record wins and
    // the other's bytes are not kept.
    let upload = volume.find_upload(owner, "u2").await.unwrap().unwrap();
    let mut first = volume.resume_upload(&upload, 0, 0).await.unwrap();
    let hashed = crate::appending::HashedAt {
        text: "",
        offset: 0,
        outboard_len: 0,
    };
    match volume.resume_upload(&upload, 0, 0).await {
        Err(VolumeError::UploadBusy(_)) => {}
        Ok(mut second) => {
            first.staged.write(b"efgh").await.unwrap();
            volume
                .checkpoint_upload(
                    &mut first.log,
                    &mut first.staged,
                    hashed,
                    None,
                    in_an_hour(),
                )
                .await
                .unwrap();
            second.staged.write(b"ijkl").await.unwrap();
            let refusals = second.log.refusals();
            assert!(
                volume
                    .checkpoint_upload(
                        &mut second.log,
                        &mut second.staged,
                        hashed,
                        None,
                        in_an_hour()
                    )
                    .await
                    .is_err()
            );
            assert!(matches!(
                refusals.take(),
                Some(VolumeError::UploadMovedOn(_))
            ));
            drop(first);
            assert_eq!(content_of(&volume, owner, "u2").await, b"abcdefgh");
        }
        Err(other) => panic!("{other}"),
    }
}

async fn an_owners_uploads_are_their_own(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let alice = add_user(&volume, "alice", None).await.owner();
    let bob = add_user(&volume, "bob", None).await.owner();
    volume
        .create_upload("u3", &new_upload(alice, Some(4), in_an_hour()))
        .await
        .unwrap()
        .unwrap();
    append(&volume, alice, "u3", 0, b"ab", None).await.unwrap();
    assert_eq!(volume.find_upload(bob, "u3").await.unwrap(), None);
    assert_eq!(append(&volume, bob, "u3", 0, b"evil", None).await, None);
    assert!(!volume.remove_upload(Some(bob), "u3").await.unwrap());
    assert!(volume.find_upload(alice, "u3").await.unwrap().is_some());
    // Bob's attempt took none of Alice's parts with it.
    assert_eq!(content_of(&volume, alice, "u3").await, b"ab");
    // And their number is bounded.
    for n in 1..crate::uploads::MAX_UPLOADS_PER_OWNER {
        let id = format!("many{n}");
        assert!(
            volume
                .create_upload(&id, &new_upload(alice, None, in_an_hour()))
                .await
                .unwrap()
                .is_some()
        );
    }
    assert_eq!(
        volume
            .create_upload("one-too-many", &new_upload(alice, None, in_an_hour()))
            .await
            .unwrap(),
        None
    );
}

async fn removal_and_expiry_free_an_uploads_parts(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let owner = Owner::OPEN;
    volume
        .create_upload("gone", &new_upload(owner, None, in_an_hour()))
        .await
        .unwrap()
        .unwrap();
    append(&volume, owner, "gone", 0, &[1; 100_000], None)
        .await
        .unwrap();
    assert!(keeps_bytes_of(&volume, "gone").await);
    assert!(volume.remove_upload(Some(owner), "gone").await.unwrap());
    assert!(!keeps_bytes_of(&volume, "gone").await);
    assert!(volume.upload_parts("gone").await.unwrap().is_empty());

    // An upload past its expiry is no longer found, and the collection
    // removes it and its parts.
    volume
        .create_upload("stale", &new_upload(owner, None, now_ms() + 300))
        .await
        .unwrap()
        .unwrap();
    // A part moves the expiry on; this one by little.
    append_bytes(
        &volume,
        owner,
        "stale",
        0,
        &[2; 100_000],
        None,
        now_ms() + 300,
    )
    .await
    .unwrap()
    .unwrap();
    assert!(keeps_bytes_of(&volume, "stale").await);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(volume.find_upload(owner, "stale").await.unwrap(), None);
    assert_eq!(
        append(&volume, owner, "stale", 100_000, b"late", None).await,
        None
    );
    let report = volume.collect_garbage().await.unwrap();
    assert_eq!(report.uploads_removed, 1);
    assert!(!keeps_bytes_of(&volume, "stale").await);
    assert_eq!(volume.uploads_in_progress().await.unwrap(), 0);
}

/// Parts of several uploads recorded at once (tus's appended and S3's
/// numbered) are weighed one at a time against their owner's quota, with
/// every other upload's: at most what fits is kept, the refused parts are
/// `QuotaExceeded` and their objects removed.
async fn concurrent_parts_never_pass_the_quota(backend: &Backend) {
    const PART: usize = 3000;
    let (_dir, volume) = backend.open().await;
    let quota = 2 * (PART as u64 + crate::ENTRY_OVERHEAD);
    let gus = add_user(&volume, "gus", Some(quota)).await.owner();
    let volume = std::sync::Arc::new(volume);
    let mut tasks = Vec::new();
    for n in 0..8 {
        let kind = if n % 2 == 0 {
            crate::uploads::UploadKind::Tus
        } else {
            crate::uploads::UploadKind::Multipart
        };
        let id = format!("race-{n}");
        let new = NewUpload {
            kind,
            ..new_upload(gus, None, in_an_hour())
        };
        volume.create_upload(&id, &new).await.unwrap().unwrap();
        let volume = volume.clone();
        tasks.push(tokio::spawn(async move {
            let mut staged = volume.stage();
            staged.write(&[n; PART]).await.unwrap();
            let kept = match kind {
                crate::uploads::UploadKind::Tus | crate::uploads::UploadKind::TusPartial => {
                    append_bytes(&volume, gus, &id, 0, &[n; PART], None, in_an_hour())
                        .await
                        .map(|upload| upload.is_some())
                }
                crate::uploads::UploadKind::Multipart => volume
                    .store_multipart_part(
                        gus,
                        &id,
                        1,
                        staged,
                        "e".into(),
                        String::new(),
                        in_an_hour(),
                    )
                    .await
                    .map(|part| part.is_some()),
            };
            (id, kept)
        }));
    }
    let mut kept = 0;
    for task in tasks {
        let (id, answer) = task.await.unwrap();
        match answer {
            Ok(true) => kept += 1,
            Err(VolumeError::QuotaExceeded { .. }) => {
                // Nothing of the refused part is kept.
                assert!(volume.upload_parts(&id).await.unwrap().is_empty());
                let upload = volume.find_upload(gus, &id).await.unwrap().unwrap();
                assert_eq!(upload.received, 0);
                assert!(volume.multipart_parts(&id).await.unwrap().is_empty());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(kept, 2, "two parts fit");
    // A tus upload appended in place on a local store keeps no part row,
    // so no entry's overhead: its bytes alone.
    let usage = volume.accounts().usage(gus).await.unwrap();
    assert!(
        usage <= quota && usage >= 2 * PART as u64,
        "{usage} of {quota}"
    );
}

suite!(
    concurrent_parts_never_pass_the_quota,
    parts_are_recorded_in_order_and_read_back,
    an_append_at_a_stale_offset_is_refused,
    an_owners_uploads_are_their_own,
    removal_and_expiry_free_an_uploads_parts,
);
