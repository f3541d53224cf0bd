//! Versions and trash: every replace and delete kept where the tree keeps
//! versions, S3's three states per bucket, paging every version, the quota
//! counting history and taking room from its oldest, retention, and blobs
//! kept while any version names them.

use std::time::Duration;

use super::*;

const DAY: Duration = Duration::from_secs(24 * 3600);

fn file_of(version: &Version) -> &FileMeta {
    match version {
        Version::File { meta, .. } => meta,
        Version::DeleteMarker { .. } => panic!("a delete marker, not a file: {version:?}"),
    }
}

/// The whole content of the version `meta` names.
async fn content_of(volume: &Volume, owner: Owner, meta: &FileMeta) -> Vec<u8> {
    let (_, mut reader) = volume
        .read_looked_up(owner, &path(&meta.path), Some(meta.clone()))
        .await
        .unwrap();
    reader.read_to_end().await.unwrap()
}

async fn overwrites_and_deletes_keep_every_version(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    let first = put(&volume, "docs/f.txt", b"one").await.unwrap();
    let second = put(&volume, "docs/f.txt", b"two").await.unwrap();
    let third = put(&volume, "docs/f.txt", b"three").await.unwrap();
    let ids = [&first, &second, &third].map(|meta| meta.version_id.clone());
    assert!(ids.iter().all(|id| id.len() == 32 && id != NULL_VERSION));
    assert!(ids[0] != ids[1] && ids[1] != ids[2]);

    let versions = volume
        .versions_of(owner, &path("docs/f.txt"))
        .await
        .unwrap();
    let listed: Vec<&str> = versions.iter().map(Version::version_id).collect();
    assert_eq!(listed, [&ids[2], &ids[1], &ids[0]]);
    assert_eq!(
        versions.iter().map(Version::is_latest).collect::<Vec<_>>(),
        [true, false, false]
    );
    for (version, content) in versions.iter().zip([&b"three"[..], b"two", b"one"]) {
        assert_eq!(content_of(&volume, owner, file_of(version)).await, content);
        let again = volume
            .version(owner, &path("docs/f.txt"), version.version_id())
            .await
            .unwrap();
        assert_eq!(&again, version);
    }
    assert!(matches!(
        volume.version(owner, &path("docs/f.txt"), "0123").await,
        Err(VolumeError::NoSuchVersion { .. })
    ));

    // A delete leaves a marker; the file is in the trash, every blob kept.
    volume.delete(owner, &path("docs/f.txt")).await.unwrap();
    assert!(matches!(
        volume.stat(owner, &path("docs/f.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    let versions = volume
        .versions_of(owner, &path("docs/f.txt"))
        .await
        .unwrap();
    assert!(matches!(
        &versions[0],
        Version::DeleteMarker { latest: true, .. }
    ));
    assert_eq!(versions.len(), 4);
    volume.collect_garbage().await.unwrap();
    for content in [&b"one"[..], b"two", b"three"] {
        assert!(exists(&volume, &digest_of(content)).await);
    }
    let trash = volume.trash(owner, None, 100).await.unwrap();
    assert_eq!(trash.items.len(), 1);
    assert_eq!(trash.items[0].file, third);

    // Restored where it was: current again, the same version.
    let restored = volume
        .restore_trashed(owner, trash.items[0].id)
        .await
        .unwrap();
    assert_eq!(restored, third);
    assert!(
        volume
            .trash(owner, None, 100)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(read(&volume, "docs/f.txt").await.unwrap().1, b"three");

    // An earlier version made current again is a new version of its content.
    let back = volume
        .restore_version(owner, &path("docs/f.txt"), &ids[0])
        .await
        .unwrap();
    assert_ne!(back.version_id, ids[0]);
    assert_eq!(read(&volume, "docs/f.txt").await.unwrap().1, b"one");

    // One version removed for good: its blob goes (no other names it).
    let removed = volume
        .delete_version(owner, &path("docs/f.txt"), &ids[1], false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(removed.version_id(), ids[1]);
    assert!(!exists(&volume, &digest_of(b"two")).await);
    assert_eq!(
        volume
            .delete_version(owner, &path("docs/f.txt"), &ids[1], false)
            .await
            .unwrap(),
        None
    );
    // The current one removed: the newest before it is current again.
    volume
        .delete_version(owner, &path("docs/f.txt"), &back.version_id, false)
        .await
        .unwrap();
    assert_eq!(read(&volume, "docs/f.txt").await.unwrap().1, b"three");
}

async fn a_restore_beside_when_the_path_is_taken_and_purge(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    put(&volume, "notes.txt", b"old notes").await.unwrap();
    volume.delete(owner, &path("notes.txt")).await.unwrap();
    put(&volume, "notes.txt", b"new notes").await.unwrap();
    let trash = volume.trash(owner, None, 100).await.unwrap();
    assert_eq!(trash.items.len(), 1);
    let restored = volume
        .restore_trashed(owner, trash.items[0].id)
        .await
        .unwrap();
    assert_eq!(restored.path, "notes (restored).txt");
    assert_eq!(
        read(&volume, "notes (restored).txt").await.unwrap().1,
        b"old notes"
    );
    assert_eq!(read(&volume, "notes.txt").await.unwrap().1, b"new notes");
    assert!(
        volume
            .trash(owner, None, 100)
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Purged: the file and every version before its delete go for good.
    put(&volume, "gone.txt", b"v1").await.unwrap();
    put(&volume, "gone.txt", b"v2").await.unwrap();
    volume.delete(owner, &path("gone.txt")).await.unwrap();
    let trash = volume.trash(owner, None, 100).await.unwrap();
    volume
        .purge_trashed(owner, trash.items[0].id)
        .await
        .unwrap();
    assert!(
        volume
            .versions_of(owner, &path("gone.txt"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!exists(&volume, &digest_of(b"v1")).await);
    assert!(!exists(&volume, &digest_of(b"v2")).await);
    assert!(matches!(
        volume.purge_trashed(owner, trash.items[0].id).await,
        Err(VolumeError::NotFound(_))
    ));
}

async fn a_folder_delete_keeps_every_file_inside(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    put(&volume, "trip/a.jpg", b"a").await.unwrap();
    put(&volume, "trip/day2/b.jpg", b"b").await.unwrap();
    volume
        .delete_folder(owner, &Prefix::parse("trip/").unwrap())
        .await
        .unwrap();
    let trash = volume.trash(owner, None, 100).await.unwrap();
    let mut paths: Vec<&str> = trash
        .items
        .iter()
        .map(|item| item.file.path.as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["trip/a.jpg", "trip/day2/b.jpg"]);
    assert_eq!(volume.empty_trash(owner).await.unwrap(), 2);
    assert!(!exists(&volume, &digest_of(b"a")).await);
}

async fn buckets_follow_s3s_three_states(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    // A bucket S3 made is unversioned: a replace is final.
    volume
        .set_bucket_versioning(owner, "plain", Versioning::Unversioned)
        .await
        .unwrap();
    assert_eq!(
        volume.bucket_versioning(owner, "plain").await.unwrap(),
        None
    );
    put(&volume, "plain/k", b"p1").await.unwrap();
    let second = put(&volume, "plain/k", b"p2").await.unwrap();
    assert_eq!(second.version_id, NULL_VERSION);
    assert_eq!(
        volume
            .versions_of(owner, &path("plain/k"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(!exists(&volume, &digest_of(b"p1")).await);
    let deleted = volume.delete_latest(owner, &path("plain/k")).await.unwrap();
    assert_eq!(deleted.marker, None);
    assert!(
        volume
            .versions_of(owner, &path("plain/k"))
            .await
            .unwrap()
            .is_empty()
    );

    // Enabled, then suspended: new writes take (and replace) the null one.
    volume
        .set_bucket_versioning(owner, "b", Versioning::Enabled)
        .await
        .unwrap();
    let enabled = put(&volume, "b/k", b"e1").await.unwrap();
    volume
        .set_bucket_versioning(owner, "b", Versioning::Suspended)
        .await
        .unwrap();
    assert_eq!(
        volume.bucket_versioning(owner, "b").await.unwrap(),
        Some(Versioning::Suspended)
    );
    put(&volume, "b/k", b"s1").await.unwrap();
    let null = put(&volume, "b/k", b"s2").await.unwrap();
    assert_eq!(null.version_id, NULL_VERSION);
    let ids: Vec<String> = volume
        .versions_of(owner, &path("b/k"))
        .await
        .unwrap()
        .iter()
        .map(|version| version.version_id().to_owned())
        .collect();
    assert_eq!(ids, [NULL_VERSION.to_owned(), enabled.version_id.clone()]);
    assert!(!exists(&volume, &digest_of(b"s1")).await);
    // A delete under Suspended: a null marker, the null file gone.
    let deleted = volume.delete_latest(owner, &path("b/k")).await.unwrap();
    assert_eq!(deleted.marker.as_deref(), Some(NULL_VERSION));
    let versions = volume.versions_of(owner, &path("b/k")).await.unwrap();
    assert!(
        matches!(&versions[0], Version::DeleteMarker { version_id, latest: true, .. } if version_id == NULL_VERSION)
    );
    assert_eq!(versions[1].version_id(), enabled.version_id);
    assert!(!exists(&volume, &digest_of(b"s2")).await);
    // S3's DeleteObject over no file still leaves a marker where kept.
    volume
        .set_bucket_versioning(owner, "b", Versioning::Enabled)
        .await
        .unwrap();
    let marker = volume.delete_latest(owner, &path("b/none")).await.unwrap();
    assert!(marker.marker.is_some_and(|id| id.len() == 32));
    // Removing the latest marker brings the version under it back.
    volume
        .delete_version(owner, &path("b/k"), NULL_VERSION, false)
        .await
        .unwrap();
    assert_eq!(read(&volume, "b/k").await.unwrap().1, b"e1");
}

async fn every_version_pages_in_order(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    for content in [&b"a1"[..], b"a2"] {
        put(&volume, "v/a", content).await.unwrap();
    }
    put(&volume, "v/b", b"b1").await.unwrap();
    volume.delete(owner, &path("v/b")).await.unwrap();
    for content in [&b"c1"[..], b"c2", b"c3"] {
        put(&volume, "v/c", content).await.unwrap();
    }
    let all = volume
        .list_versions(owner, "v/", None, Some("v0"), 100)
        .await
        .unwrap();
    assert!(!all.truncated);
    let shape: Vec<(String, bool)> = all
        .versions
        .iter()
        .map(|version| (version.path().to_owned(), version.is_latest()))
        .collect();
    let expected = [
        ("v/a", true),
        ("v/a", false),
        ("v/b", true),
        ("v/b", false),
        ("v/c", true),
        ("v/c", false),
        ("v/c", false),
    ];
    assert_eq!(
        shape,
        expected.map(|(path, latest)| (path.to_owned(), latest))
    );
    assert!(matches!(all.versions[2], Version::DeleteMarker { .. }));
    // Paged two at a time, resuming after a path and a version.
    for size in 1..=3 {
        let mut paged = Vec::new();
        let mut after: Option<(String, String)> = None;
        loop {
            let page = volume
                .list_versions(
                    owner,
                    "v/",
                    after.as_ref().map(|(p, v)| (p.as_str(), Some(v.as_str()))),
                    Some("v0"),
                    size,
                )
                .await
                .unwrap();
            let last = page.versions.last().cloned();
            paged.extend(page.versions);
            if !page.truncated {
                break;
            }
            let last = last.unwrap();
            after = Some((last.path().to_owned(), last.version_id().to_owned()));
        }
        assert_eq!(paged, all.versions, "pages of {size}");
    }
}

async fn history_counts_against_the_quota_and_makes_room_oldest_first(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let quota = 3 * 4096 + 3 * ENTRY_OVERHEAD + ENTRY_OVERHEAD / 2;
    let user = add_user(&volume, "ann", Some(quota)).await;
    let owner = Owner::user(user.id);
    let block = |fill: u8| vec![fill; 4096];
    put_as(&volume, owner, "a", &block(1)).await.unwrap();
    put_as(&volume, owner, "b", &block(2)).await.unwrap();
    // Deleting gains no room: the file is in the trash (3 entries, a
    // marker's included, and 2 blocks in use).
    volume.delete(owner, &path("a")).await.unwrap();
    let used = volume.accounts().usage(owner).await.unwrap();
    assert_eq!(used, 2 * 4096 + 3 * ENTRY_OVERHEAD);
    // Two more blocks need room: the oldest trash goes first (with its
    // marker), never a current file.
    let evicted = versions_evicted();
    put_as(&volume, owner, "c", &block(3)).await.unwrap();
    put_as(&volume, owner, "d", &block(4)).await.unwrap();
    assert!(versions_evicted() > evicted);
    assert!(
        volume
            .trash(owner, None, 10)
            .await
            .unwrap()
            .items
            .is_empty()
    );
    for name in ["b", "c", "d"] {
        assert!(volume.stat(owner, &path(name)).await.is_ok());
    }
    // Nothing left to take: refused, nothing current lost.
    assert!(matches!(
        put_as(&volume, owner, "e", &block(5)).await,
        Err(VolumeError::QuotaExceeded { .. })
    ));
    // A user's removal takes every version with them.
    put_as(&volume, owner, "b", &block(6)).await.ok();
    assert!(volume.accounts().remove_user("ann").await.unwrap());
    volume.collect_garbage().await.unwrap();
    assert!(!exists(&volume, &digest_of(&block(2))).await);
}

async fn retention_expires_history_and_keeps_what_s3_keeps(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(Duration::ZERO).await;
    let owner = Owner::OPEN;
    volume
        .set_bucket_versioning(owner, "s3", Versioning::Enabled)
        .await
        .unwrap();
    put(&volume, "home/f", b"h1").await.unwrap();
    put(&volume, "home/f", b"h2").await.unwrap();
    put(&volume, "home/g", b"g1").await.unwrap();
    volume.delete(owner, &path("home/g")).await.unwrap();
    put(&volume, "s3/k", b"k1").await.unwrap();
    put(&volume, "s3/k", b"k2").await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    volume.collect_garbage().await.unwrap();
    assert_eq!(
        volume
            .versions_of(owner, &path("home/f"))
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(
        volume
            .versions_of(owner, &path("home/g"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!exists(&volume, &digest_of(b"h1")).await);
    assert!(!exists(&volume, &digest_of(b"g1")).await);
    // S3's versions stay until deleted.
    assert_eq!(
        volume
            .versions_of(owner, &path("s3/k"))
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(exists(&volume, &digest_of(b"k1")).await);
}

async fn a_copy_of_an_earlier_version_and_moves_carry_history(backend: &Backend) {
    let (_dir, volume, _) = backend.open_keeping_versions(DAY).await;
    let owner = Owner::OPEN;
    let first = put(&volume, "src/f", b"first").await.unwrap();
    put(&volume, "src/f", b"second").await.unwrap();
    let copied = volume
        .copy_file(
            owner,
            &path("src/f"),
            Some(&first.version_id),
            &path("dst/f"),
        )
        .await
        .unwrap();
    assert_ne!(copied.version_id, first.version_id);
    assert_eq!(read(&volume, "dst/f").await.unwrap().1, b"first");
    // Onto itself where versions are kept: a new version (S3's metadata
    // replace), the one before kept.
    let again = volume
        .copy_file(owner, &path("dst/f"), None, &path("dst/f"))
        .await
        .unwrap();
    assert_ne!(again.version_id, copied.version_id);
    assert_eq!(
        volume
            .versions_of(owner, &path("dst/f"))
            .await
            .unwrap()
            .len(),
        2
    );
    volume.delete(owner, &path("src/f")).await.unwrap();
    let marker = volume.versions_of(owner, &path("src/f")).await.unwrap()[0].clone();
    assert!(matches!(
        volume
            .copy_file(owner, &path("src/f"), Some(marker.version_id()), &path("x"))
            .await,
        Err(VolumeError::DeleteMarker { .. })
    ));
    // A move takes the file's history with it.
    put(&volume, "m/a", b"m1").await.unwrap();
    put(&volume, "m/a", b"m2").await.unwrap();
    volume
        .move_node(owner, &path("m/a"), &path("m/b"), false)
        .await
        .unwrap();
    assert_eq!(
        volume.versions_of(owner, &path("m/b")).await.unwrap().len(),
        2
    );
    assert!(
        volume
            .versions_of(owner, &path("m/a"))
            .await
            .unwrap()
            .is_empty()
    );
}

suite!(
    overwrites_and_deletes_keep_every_version,
    a_restore_beside_when_the_path_is_taken_and_purge,
    a_folder_delete_keeps_every_file_inside,
    buckets_follow_s3s_three_states,
    every_version_pages_in_order,
    history_counts_against_the_quota_and_makes_room_oldest_first,
    retention_expires_history_and_keeps_what_s3_keeps,
    a_copy_of_an_earlier_version_and_moves_carry_history,
);
