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
    let mut staged = volume.stage();
    staged.write(bytes).await.unwrap();
    volume
        .append_upload(owner, id, offset, staged, length, in_an_hour())
        .await
        .unwrap()
}

async fn content_of(volume: &Volume, id: &str) -> Vec<u8> {
    let mut all = Vec::new();
    for part in volume.upload_parts(id).await.unwrap() {
        let mut reader = volume.open_upload_part(id, &part).await.unwrap();
        let bytes = reader.read_to_end().await.unwrap();
        assert_eq!(bytes.len() as u64, part.size);
        assert_eq!(part.offset, all.len() as u64);
        all.extend_from_slice(&bytes);
    }
    all
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
    assert_eq!(content_of(&volume, "u1").await, content);
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
    assert_eq!(content_of(&volume, "u2").await, b"abcd");
    // A part stored but not recorded (the last one, while its file is
    // being stored) leaves the upload where it was.
    let mut staged = volume.stage();
    staged.write(b"efgh").await.unwrap();
    let last = volume.store_upload_part("u2", 4, staged).await.unwrap();
    assert_eq!((last.offset, last.size), (4, 4));
    let found = volume.find_upload(owner, "u2").await.unwrap().unwrap();
    assert_eq!(found.received, 4);
    assert_eq!(content_of(&volume, "u2").await, b"abcd");
    let mut reader = volume.open_upload_part("u2", &last).await.unwrap();
    assert_eq!(reader.read_to_end().await.unwrap(), b"efgh");
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
    assert_eq!(content_of(&volume, "u3").await, b"ab");
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
    let parts = volume.upload_parts("gone").await.unwrap();
    assert!(volume.remove_upload(Some(owner), "gone").await.unwrap());
    assert!(volume.open_upload_part("gone", &parts[0]).await.is_err());
    assert!(volume.upload_parts("gone").await.unwrap().is_empty());

    // An upload past its expiry is no longer found, and the collection
    // removes it and its parts.
    volume
        .create_upload("stale", &new_upload(owner, None, now_ms() + 300))
        .await
        .unwrap()
        .unwrap();
    // A part moves the expiry on; this one by little.
    let mut staged = volume.stage();
    staged.write(&[2; 100_000]).await.unwrap();
    volume
        .append_upload(owner, "stale", 0, staged, None, now_ms() + 300)
        .await
        .unwrap()
        .unwrap();
    let parts = volume.upload_parts("stale").await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(volume.find_upload(owner, "stale").await.unwrap(), None);
    assert_eq!(
        append(&volume, owner, "stale", 100_000, b"late", None).await,
        None
    );
    let report = volume.collect_garbage().await.unwrap();
    assert_eq!(report.uploads_removed, 1);
    assert!(volume.open_upload_part("stale", &parts[0]).await.is_err());
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
                crate::uploads::UploadKind::Tus => volume
                    .append_upload(gus, &id, 0, staged, None, in_an_hour())
                    .await
                    .map(|upload| upload.is_some()),
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
                // Nothing of the refused part is left.
                assert!(volume.upload_parts(&id).await.unwrap().is_empty());
                assert!(volume.multipart_parts(&id).await.unwrap().is_empty());
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(kept, 2, "two parts fit");
    assert_eq!(volume.accounts().usage(gus).await.unwrap(), quota);
}

suite!(
    concurrent_parts_never_pass_the_quota,
    parts_are_recorded_in_order_and_read_back,
    an_append_at_a_stale_offset_is_refused,
    an_owners_uploads_are_their_own,
    removal_and_expiry_free_an_uploads_parts,
);
