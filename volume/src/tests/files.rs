//! Files: store, read, replace, delete, list, folders; create-only races;
//! blobs staged, chunked and sent in parts.

use std::sync::Arc;

use super::*;

async fn put_read_stat_delete(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let meta = put(&volume, "a/b.txt", b"hello").await.unwrap();
    assert_eq!(meta.size, 5);
    assert_eq!(meta.sha256, digest_of(b"hello").as_str());
    assert_eq!(meta.created_ms, meta.modified_ms);

    let (read_meta, content) = read(&volume, "a/b.txt").await.unwrap();
    assert_eq!(
        (read_meta, content.as_slice()),
        (meta.clone(), &b"hello"[..])
    );
    assert_eq!(
        volume.stat(Owner::OPEN, &path("a/b.txt")).await.unwrap(),
        meta
    );

    volume.delete(Owner::OPEN, &path("a/b.txt")).await.unwrap();
    assert!(matches!(
        volume.stat(Owner::OPEN, &path("a/b.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(matches!(
        volume.delete(Owner::OPEN, &path("a/b.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(!exists(&volume, &digest_of(b"hello")).await);
}

async fn a_read_starts_from_the_row_looked_up_and_survives_a_replace(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let first = put(&volume, "f", b"one").await.unwrap();
    // The row as a caller read it: the read starts from it.
    let (meta, mut reader) = volume
        .read_looked_up(Owner::OPEN, &path("f"), Some(first.clone()))
        .await
        .unwrap();
    assert_eq!(meta, first);
    assert_eq!(reader.read_to_end().await.unwrap(), b"one");
    // Replaced after the caller read the row (its blob freed): never an
    // error, and never one row's metadata with another's content. A blob
    // of its own is gone, so the read asks the index again and gets the
    // new file; a packed one may still be read where it was (like a file
    // opened before its unlink), and then the read is of the row it had.
    let second = put(&volume, "f", b"two").await.unwrap();
    assert!(!exists(&volume, &digest_of(b"one")).await);
    let (meta, mut reader) = volume
        .read_looked_up(Owner::OPEN, &path("f"), Some(first.clone()))
        .await
        .unwrap();
    let content = reader.read_to_end().await.unwrap();
    assert!(
        (meta == second && content == b"two") || (meta == first && content == b"one"),
        "{meta:?} with {content:?}"
    );
}

async fn replace_keeps_created_and_frees_the_old_blob(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let first = put(&volume, "f", b"one").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = put(&volume, "f", b"two").await.unwrap();
    assert_eq!(second.created_ms, first.created_ms);
    assert!(second.modified_ms > first.modified_ms);
    assert!(!exists(&volume, &digest_of(b"one")).await);
    assert!(exists(&volume, &digest_of(b"two")).await);
}

async fn create_only_refuses_an_existing_path(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    put(&volume, "f", b"one").await.unwrap();
    let refused = volume
        .put(
            Owner::OPEN,
            &path("f"),
            staged(&volume, b"new").await,
            &Digests {
                sha256: digest_of(b"new"),
                blake3: None,
            },
            "text/plain",
            false,
        )
        .await;
    assert!(matches!(refused, Err(VolumeError::AlreadyExists(_))));
    // Nothing of the refused write is left behind.
    assert!(!exists(&volume, &digest_of(b"new")).await);
    assert_eq!(temp_files(&_dir), 0);
    assert_eq!(read(&volume, "f").await.unwrap().1, b"one");
}

async fn identical_content_is_stored_once(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    put(&volume, "x", b"same").await.unwrap();
    put(&volume, "y/z", b"same").await.unwrap();
    let blob = digest_of(b"same");
    assert!(exists(&volume, &blob).await);
    volume.delete(Owner::OPEN, &path("x")).await.unwrap();
    assert!(exists(&volume, &blob).await);
    assert_eq!(read(&volume, "y/z").await.unwrap().1, b"same");
    volume.delete(Owner::OPEN, &path("y/z")).await.unwrap();
    assert!(!exists(&volume, &blob).await);
}

async fn concurrent_writers_of_one_content_never_lose_the_blob(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let volume = Arc::new(volume);
    let mut tasks = Vec::new();
    for round in 0..8 {
        let volume = volume.clone();
        tasks.push(tokio::spawn(async move {
            let mine = format!("p{round}");
            for _ in 0..10 {
                put(&volume, &mine, b"shared").await.unwrap();
                volume.delete(Owner::OPEN, &path(&mine)).await.unwrap();
            }
            put(&volume, &mine, b"shared").await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    for round in 0..8 {
        assert_eq!(
            read(&volume, &format!("p{round}")).await.unwrap().1,
            b"shared"
        );
    }
}

async fn listing_collapses_folders_and_pages(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    for p in [
        "a.txt", "b/1", "b/2", "b/c/3", "b0", "c/x", "d.txt", "e/f/g",
    ] {
        put(&volume, p, p.as_bytes()).await.unwrap();
    }
    let names = |listing: &Listing| {
        listing
            .entries
            .iter()
            .map(|e| e.name().to_owned())
            .collect::<Vec<_>>()
    };

    let root = volume
        .list(Owner::OPEN, &Prefix::root(), None, 100)
        .await
        .unwrap();
    assert_eq!(names(&root), ["a.txt", "b/", "b0", "c/", "d.txt", "e/"]);
    assert_eq!(root.next_after, None);

    let inside = volume
        .list(Owner::OPEN, &Prefix::parse("b").unwrap(), None, 100)
        .await
        .unwrap();
    assert_eq!(names(&inside), ["b/1", "b/2", "b/c/"]);

    // Pages of two, each continuing after the last entry of the one before.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = volume
            .list(Owner::OPEN, &Prefix::root(), after.as_deref(), 2)
            .await
            .unwrap();
        assert!(page.entries.len() <= 2);
        seen.extend(names(&page));
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, names(&root));

    let empty = volume
        .list(Owner::OPEN, &Prefix::parse("nothing").unwrap(), None, 10)
        .await
        .unwrap();
    assert!(empty.entries.is_empty());
}

async fn a_staged_blob_dropped_unfinished_leaves_nothing(backend: &Backend) {
    let (dir, volume) = backend.open().await;
    // A few bytes wait in memory: no temp file.
    let mut staged = volume.stage();
    staged.write(b"half an upload").await.unwrap();
    assert_eq!(temp_files(&dir), 0);
    // More go to a temp file, which goes with the staged blob.
    staged.write(&vec![7; 100 << 10]).await.unwrap();
    assert_eq!(temp_files(&dir), 1);
    drop(staged);
    assert_eq!(temp_files(&dir), 0);
    assert!(read(&volume, "anything").await.is_err());
}

async fn reads_come_in_chunks_and_stop_at_the_recorded_size(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let content: Vec<u8> = (0..=255).cycle().take(10_000).collect();
    put(&volume, "big", &content).await.unwrap();
    let (meta, mut reader) = volume.read(Owner::OPEN, &path("big")).await.unwrap();
    assert_eq!(meta.size, 10_000);
    let mut sizes = Vec::new();
    let mut all = Vec::new();
    loop {
        let chunk = reader.read(4096).await.unwrap();
        if chunk.is_empty() {
            break;
        }
        sizes.push(chunk.len());
        all.extend_from_slice(&chunk);
    }
    assert_eq!(sizes, [4096, 4096, 1808]);
    assert_eq!(all, content);
}

/// An outboard staged beside the content (in pieces, interleaved with it,
/// as an upload hashes) is stored after it in the same blob: reads of the
/// content stop at its size, seek anywhere, and the outboard is read back
/// by pieces; a blob written without one has none.
async fn an_outboard_is_stored_after_the_content_and_read_by_pieces(backend: &Backend) {
    let (dir, volume) = backend.open().await;
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let outboard: Vec<u8> = (0..200_000u32).map(|i| (i % 13) as u8).collect();
    let mut staged = volume.stage();
    for (part, tree) in content.chunks(60_000).zip(outboard.chunks(40_000)) {
        staged.write(part).await.unwrap();
        staged.write_outboard(tree).await.unwrap();
    }
    let meta = volume
        .put(
            Owner::OPEN,
            &path("tree"),
            staged,
            &digests_of(&content),
            "application/octet-stream",
            true,
        )
        .await
        .unwrap();
    assert_eq!(meta.size, content.len() as u64);
    assert_eq!(temp_files(&dir), 0);

    let (_, mut reader) = volume.read(Owner::OPEN, &path("tree")).await.unwrap();
    assert_eq!(reader.outboard_len(), outboard.len() as u64);
    assert_eq!(reader.read_to_end().await.unwrap(), content);
    reader.seek(123_456);
    assert_eq!(reader.read(10).await.unwrap(), &content[123_456..123_466]);
    reader.seek(5);
    assert_eq!(reader.read(3).await.unwrap(), &content[5..8]);
    let pieces = reader
        .read_outboard(&[(0, 8), (100_000, 32), (199_968, 32)])
        .await
        .unwrap();
    let mut expected = outboard[..8].to_vec();
    expected.extend_from_slice(&outboard[100_000..100_032]);
    expected.extend_from_slice(&outboard[199_968..]);
    assert_eq!(pieces, expected);
    assert!(reader.read_outboard(&[(199_990, 32)]).await.is_err());
    // The content read after outboard reads goes on from where it was.
    assert_eq!(reader.read(3).await.unwrap(), &content[8..11]);

    put(&volume, "plain", b"no tree here, and a little more")
        .await
        .unwrap();
    let (_, reader) = volume.read(Owner::OPEN, &path("plain")).await.unwrap();
    assert_eq!(reader.outboard_len(), 0);
}

/// A blob stored without an outboard gets one attached: the blob is
/// replaced by content then outboard, and its content reads the same.
async fn an_outboard_is_attached_to_a_blob_stored_without_one(backend: &Backend) {
    let (dir, volume) = backend.open().await;
    let content: Vec<u8> = (0..200_000u32).map(|i| (i % 241) as u8).collect();
    let meta = put(&volume, "legacy", &content).await.unwrap();
    let digest = digest_of(&content);
    let (_, reader) = volume.read(Owner::OPEN, &path("legacy")).await.unwrap();
    assert_eq!(reader.outboard_len(), 0);

    let outboard = vec![9u8; 4_000];
    volume
        .attach_outboard(&digest, meta.size, &outboard)
        .await
        .unwrap();
    let (_, mut reader) = volume.read(Owner::OPEN, &path("legacy")).await.unwrap();
    assert_eq!(reader.outboard_len(), 4_000);
    assert_eq!(
        reader.read_outboard(&[(3_968, 32)]).await.unwrap(),
        vec![9u8; 32]
    );
    assert_eq!(reader.read_to_end().await.unwrap(), content);
    assert_eq!(temp_files(&dir), 0);

    // One that has an outboard already is left alone.
    volume
        .attach_outboard(&digest, meta.size, &[1u8; 64])
        .await
        .unwrap();
    let (_, reader) = volume.read(Owner::OPEN, &path("legacy")).await.unwrap();
    assert_eq!(reader.outboard_len(), 4_000);
}

/// Create-only writes racing to make one new path: exactly one wins, the
/// others are refused, and the path holds the winner's content.
async fn create_only_admits_one_writer_per_new_path(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let volume = Arc::new(volume);
    for round in 0..10 {
        let name = format!("contested{round}");
        let writers: Vec<_> = (0..4)
            .map(|writer| {
                let (volume, name) = (volume.clone(), name.clone());
                tokio::spawn(async move {
                    let content = format!("writer {writer}").into_bytes();
                    let staged = staged(&volume, &content).await;
                    let outcome = volume
                        .put(
                            Owner::OPEN,
                            &path(&name),
                            staged,
                            &digests_of(&content),
                            "text/plain",
                            false,
                        )
                        .await;
                    (content, outcome)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for writer in writers {
            match writer.await.unwrap() {
                (content, Ok(_)) => winners.push(content),
                (_, Err(VolumeError::AlreadyExists(_))) => {}
                (_, Err(error)) => panic!("{name}: {error}"),
            }
        }
        assert_eq!(
            winners.len(),
            1,
            "{name}: {} writers created it",
            winners.len()
        );
        assert_eq!(read(&volume, &name).await.unwrap().1, winners[0]);
    }
}

/// Larger than one request to an object store: sent in parts.
async fn a_blob_larger_than_one_part_round_trips(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let content: Vec<u8> = (0..(19 << 20) + 3).map(|i| (i % 251) as u8).collect();
    put(&volume, "large", &content).await.unwrap();
    let (meta, read_back) = read(&volume, "large").await.unwrap();
    assert_eq!(meta.size, content.len() as u64);
    assert!(read_back == content, "the large blob came back different");
    volume.delete(Owner::OPEN, &path("large")).await.unwrap();
    assert!(!exists(&volume, &digest_of(&content)).await);
}

async fn empty_folders_list_and_go_with_their_tree(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let folder = |p: &str| Prefix::parse(p).unwrap();
    let names = |listing: Listing| -> Vec<String> {
        listing
            .entries
            .iter()
            .map(|e| e.name().to_owned())
            .collect()
    };
    assert!(
        volume
            .make_folder(Owner::OPEN, &folder("empty"))
            .await
            .unwrap()
    );
    assert!(
        !volume
            .make_folder(Owner::OPEN, &folder("empty/"))
            .await
            .unwrap()
    );
    assert!(
        volume
            .make_folder(Owner::OPEN, &folder("deep/er/est"))
            .await
            .unwrap()
    );
    assert!(
        volume
            .make_folder(Owner::OPEN, &folder("docs"))
            .await
            .unwrap()
    );
    put(&volume, "docs/a.txt", b"a").await.unwrap();
    put(&volume, "b.txt", b"b").await.unwrap();
    put(&volume, "z/c.txt", b"c").await.unwrap();
    let root = volume
        .list(Owner::OPEN, &Prefix::root(), None, 100)
        .await
        .unwrap();
    assert_eq!(names(root), ["b.txt", "deep/", "docs/", "empty/", "z/"]);
    // Pages of two, across both sources.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = volume
            .list(Owner::OPEN, &Prefix::root(), after.as_deref(), 2)
            .await
            .unwrap();
        after = page.next_after.clone();
        seen.extend(names(page));
        if after.is_none() {
            break;
        }
    }
    assert_eq!(seen, ["b.txt", "deep/", "docs/", "empty/", "z/"]);
    let deep = volume
        .list(Owner::OPEN, &folder("deep"), None, 10)
        .await
        .unwrap();
    assert_eq!(names(deep), ["deep/er/"]);
    assert!(
        volume
            .list(Owner::OPEN, &folder("empty"), None, 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
    // Other owners do not see them.
    let other = Owner::user(add_user(&volume, "erin", None).await.id);
    assert!(
        volume
            .list(other, &Prefix::root(), None, 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
    // Deleting a folder takes its tree, and the blobs nothing else names.
    assert_eq!(
        volume
            .delete_folder(Owner::OPEN, &folder("docs"))
            .await
            .unwrap(),
        2
    );
    assert!(matches!(
        volume.stat(Owner::OPEN, &path("docs/a.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(!exists(&volume, &digest_of(b"a")).await);
    assert_eq!(
        volume
            .delete_folder(Owner::OPEN, &folder("empty"))
            .await
            .unwrap(),
        1
    );
    assert!(matches!(
        volume.delete_folder(Owner::OPEN, &folder("empty")).await,
        Err(VolumeError::NotFound(_))
    ));
    let root = volume
        .list(Owner::OPEN, &Prefix::root(), None, 100)
        .await
        .unwrap();
    assert_eq!(names(root), ["b.txt", "deep/", "z/"]);
}

suite!(
    put_read_stat_delete,
    a_read_starts_from_the_row_looked_up_and_survives_a_replace,
    replace_keeps_created_and_frees_the_old_blob,
    create_only_refuses_an_existing_path,
    identical_content_is_stored_once,
    concurrent_writers_of_one_content_never_lose_the_blob,
    listing_collapses_folders_and_pages,
    a_staged_blob_dropped_unfinished_leaves_nothing,
    reads_come_in_chunks_and_stop_at_the_recorded_size,
    an_outboard_is_stored_after_the_content_and_read_by_pieces,
    an_outboard_is_attached_to_a_blob_stored_without_one,
    create_only_admits_one_writer_per_new_path,
    a_blob_larger_than_one_part_round_trips,
    empty_folders_list_and_go_with_their_tree,
);
