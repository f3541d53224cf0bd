//! Volume tests against a real SQLite file and real blob files in a temp dir.

#![allow(clippy::unwrap_used)]

use sha2::{Digest as _, Sha256};

use super::*;

fn digest_of(content: &[u8]) -> Digest {
    Digest::parse(&hex::encode(Sha256::digest(content))).unwrap()
}

fn path(p: &str) -> FilePath {
    FilePath::parse(p).unwrap()
}

async fn open() -> (tempfile::TempDir, Volume) {
    let dir = tempfile::tempdir().unwrap();
    let (volume, report) = Volume::open(dir.path()).await.unwrap();
    assert_eq!(report, SweepReport::default());
    (dir, volume)
}

async fn staged(volume: &Volume, content: &[u8]) -> StagedBlob {
    let mut staged = volume.stage().await.unwrap();
    // In two chunks, as an upload's bytes arrive.
    let (head, tail) = content.split_at(content.len() / 2);
    staged.write(head).await.unwrap();
    staged.write(tail).await.unwrap();
    staged
}

async fn put(volume: &Volume, p: &str, content: &[u8]) -> Result<FileMeta, VolumeError> {
    let staged = staged(volume, content).await;
    volume
        .put(&path(p), staged, &digest_of(content), "text/plain", true)
        .await
}

/// The metadata and whole content of `p`.
async fn read(volume: &Volume, p: &str) -> Result<(FileMeta, Vec<u8>), VolumeError> {
    let (meta, mut reader) = volume.read(&path(p)).await?;
    Ok((meta, reader.read_to_end().await?))
}

fn temp_files(dir: &tempfile::TempDir) -> usize {
    std::fs::read_dir(dir.path().join("tmp")).unwrap().count()
}

#[tokio::test]
async fn put_read_stat_delete() {
    let (_dir, volume) = open().await;
    let meta = put(&volume, "a/b.txt", b"hello").await.unwrap();
    assert_eq!(meta.size, 5);
    assert_eq!(meta.sha256, digest_of(b"hello").as_str());
    assert_eq!(meta.created_ms, meta.modified_ms);

    let (read_meta, content) = read(&volume, "a/b.txt").await.unwrap();
    assert_eq!(
        (read_meta, content.as_slice()),
        (meta.clone(), &b"hello"[..])
    );
    assert_eq!(volume.stat(&path("a/b.txt")).await.unwrap(), meta);

    volume.delete(&path("a/b.txt")).await.unwrap();
    assert!(matches!(
        volume.stat(&path("a/b.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(matches!(
        volume.delete(&path("a/b.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(!volume.blob_path(&digest_of(b"hello")).exists());
}

#[tokio::test]
async fn replace_keeps_created_and_frees_the_old_blob() {
    let (_dir, volume) = open().await;
    let first = put(&volume, "f", b"one").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = put(&volume, "f", b"two").await.unwrap();
    assert_eq!(second.created_ms, first.created_ms);
    assert!(second.modified_ms > first.modified_ms);
    assert!(!volume.blob_path(&digest_of(b"one")).exists());
    assert!(volume.blob_path(&digest_of(b"two")).exists());
}

#[tokio::test]
async fn create_only_refuses_an_existing_path() {
    let (_dir, volume) = open().await;
    put(&volume, "f", b"one").await.unwrap();
    let refused = volume
        .put(
            &path("f"),
            staged(&volume, b"new").await,
            &digest_of(b"new"),
            "text/plain",
            false,
        )
        .await;
    assert!(matches!(refused, Err(VolumeError::AlreadyExists(_))));
    // Nothing of the refused write is left behind.
    assert!(!volume.blob_path(&digest_of(b"new")).exists());
    assert_eq!(temp_files(&_dir), 0);
    assert_eq!(read(&volume, "f").await.unwrap().1, b"one");
}

#[tokio::test]
async fn identical_content_is_stored_once() {
    let (_dir, volume) = open().await;
    put(&volume, "x", b"same").await.unwrap();
    put(&volume, "y/z", b"same").await.unwrap();
    let blob = volume.blob_path(&digest_of(b"same"));
    assert!(blob.exists());
    volume.delete(&path("x")).await.unwrap();
    assert!(blob.exists());
    assert_eq!(read(&volume, "y/z").await.unwrap().1, b"same");
    volume.delete(&path("y/z")).await.unwrap();
    assert!(!blob.exists());
}

#[tokio::test]
async fn sweep_removes_leftovers_of_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let orphan = digest_of(b"orphan");
    {
        let (volume, _) = Volume::open(dir.path()).await.unwrap();
        put(&volume, "kept", b"kept").await.unwrap();
        // A crash between the blob write and the commit leaves an orphan blob
        // and possibly a temp file.
        volume
            .blobs
            .commit(&orphan, staged(&volume, b"orphan").await)
            .await
            .unwrap();
        std::fs::write(dir.path().join("tmp/upload-interrupted"), b"partial").unwrap();
        volume.close().await;
    }
    let (volume, report) = Volume::open(dir.path()).await.unwrap();
    assert_eq!(
        report,
        SweepReport {
            temp_files_removed: 1,
            orphan_blobs_removed: 1,
            files_missing_blobs: 0
        }
    );
    assert!(!volume.blob_path(&orphan).exists());
    assert_eq!(read(&volume, "kept").await.unwrap().1, b"kept");
}

#[tokio::test]
async fn a_missing_blob_is_reported_not_hidden() {
    let (_dir, volume) = open().await;
    put(&volume, "f", b"content").await.unwrap();
    std::fs::remove_file(volume.blob_path(&digest_of(b"content"))).unwrap();
    assert!(matches!(
        read(&volume, "f").await,
        Err(VolumeError::MissingBlob(_))
    ));
    assert_eq!(volume.sweep().await.unwrap().files_missing_blobs, 1);
}

#[tokio::test]
async fn concurrent_writers_of_one_content_never_lose_the_blob() {
    let (_dir, volume) = open().await;
    let volume = std::sync::Arc::new(volume);
    let mut tasks = Vec::new();
    for round in 0..8 {
        let volume = volume.clone();
        tasks.push(tokio::spawn(async move {
            let mine = format!("p{round}");
            for _ in 0..10 {
                put(&volume, &mine, b"shared").await.unwrap();
                volume.delete(&path(&mine)).await.unwrap();
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

#[tokio::test]
async fn listing_collapses_folders_and_pages() {
    let (_dir, volume) = open().await;
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

    let root = volume.list(&Prefix::root(), None, 100).await.unwrap();
    assert_eq!(names(&root), ["a.txt", "b/", "b0", "c/", "d.txt", "e/"]);
    assert_eq!(root.next_after, None);

    let inside = volume
        .list(&Prefix::parse("b").unwrap(), None, 100)
        .await
        .unwrap();
    assert_eq!(names(&inside), ["b/1", "b/2", "b/c/"]);

    // Pages of two, each continuing after the last entry of the one before.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = volume
            .list(&Prefix::root(), after.as_deref(), 2)
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
        .list(&Prefix::parse("nothing").unwrap(), None, 10)
        .await
        .unwrap();
    assert!(empty.entries.is_empty());
}

#[tokio::test]
async fn samples_are_kept_until_pruned() {
    let (_dir, volume) = open().await;
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

#[tokio::test]
async fn a_staged_blob_dropped_unfinished_leaves_nothing() {
    let (dir, volume) = open().await;
    let mut staged = volume.stage().await.unwrap();
    staged.write(b"half an upload").await.unwrap();
    assert_eq!(temp_files(&dir), 1);
    drop(staged);
    assert_eq!(temp_files(&dir), 0);
    assert!(read(&volume, "anything").await.is_err());
}

#[tokio::test]
async fn reads_come_in_chunks_and_stop_at_the_recorded_size() {
    let (_dir, volume) = open().await;
    let content: Vec<u8> = (0..=255).cycle().take(10_000).collect();
    put(&volume, "big", &content).await.unwrap();
    let (meta, mut reader) = volume.read(&path("big")).await.unwrap();
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
