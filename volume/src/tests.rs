//! The volume's suite, run against both backends: a real SQLite file with
//! blob files in a temp dir (a test each), and a real PostgreSQL server
//! with SeaweedFS's S3 (every case in one test, `postgres_s3_suite`, which
//! starts both servers once and gives each case its own database and key
//! prefix).

#![allow(clippy::unwrap_used)]

use sha2::{Digest as _, Sha256};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

fn digest_of(content: &[u8]) -> Digest {
    Digest::parse(&hex::encode(Sha256::digest(content))).unwrap()
}

/// What an instance computes of an upload.
fn digests_of(content: &[u8]) -> Digests {
    Digests {
        sha256: digest_of(content),
        blake3: Some(Digest::parse(&blake3::hash(content).to_hex()).unwrap()),
    }
}

fn path(p: &str) -> FilePath {
    FilePath::parse(p).unwrap()
}

/// Which backend a case runs on.
enum Backend {
    SqliteLocal,
    PostgresS3(Box<Servers>),
}

/// PostgreSQL and SeaweedFS, started once for the `postgres_s3` suite and
/// stopped (by PID) when it ends.
struct Servers {
    postgres: testsupport::Postgres,
    seaweed: testsupport::Seaweed,
}

static CASES: AtomicUsize = AtomicUsize::new(0);

impl Backend {
    /// Where a fresh, empty volume lives, with no grace period: the cases
    /// leave nothing in flight when they collect.
    fn config(&self, dir: &std::path::Path) -> VolumeConfig {
        let mut config = VolumeConfig::in_data_dir(dir);
        config.orphan_grace = Duration::ZERO;
        if let Self::PostgresS3(servers) = self {
            let name = format!("case{}", CASES.fetch_add(1, Ordering::Relaxed));
            let url = servers.postgres.create_database(&name).unwrap();
            config.database = url.parse().unwrap();
            config.blobs = BlobUrl::S3 {
                bucket: servers.seaweed.bucket().to_owned(),
                prefix: name,
            };
            config.s3 = S3Settings {
                endpoint: Some(servers.seaweed.endpoint()),
                region: Some(servers.seaweed.region().to_owned()),
                access_key_id: Some(servers.seaweed.access_key().to_owned()),
                secret_access_key: Some(servers.seaweed.secret_key().to_owned()),
                allow_http: Some(true),
            };
        }
        config
    }

    /// A fresh volume, its data directory and its configuration.
    async fn open_with_config(&self) -> (tempfile::TempDir, Volume, VolumeConfig) {
        let dir = tempfile::tempdir().unwrap();
        let config = self.config(dir.path());
        let (volume, report) = Volume::open(&config).await.unwrap();
        assert_eq!(report, SweepReport::default());
        (dir, volume, config)
    }

    async fn open(&self) -> (tempfile::TempDir, Volume) {
        let (dir, volume, _) = self.open_with_config().await;
        (dir, volume)
    }
}

async fn exists(volume: &Volume, digest: &Digest) -> bool {
    volume.blob_exists(digest).await.unwrap()
}

async fn staged(volume: &Volume, content: &[u8]) -> StagedBlob {
    let mut staged = volume.stage();
    // In two chunks, as an upload's bytes arrive.
    let (head, tail) = content.split_at(content.len() / 2);
    staged.write(head).await.unwrap();
    staged.write(tail).await.unwrap();
    staged
}

async fn put(volume: &Volume, p: &str, content: &[u8]) -> Result<FileMeta, VolumeError> {
    let staged = staged(volume, content).await;
    volume
        .put(
            Owner::OPEN,
            &path(p),
            staged,
            &digests_of(content),
            "text/plain",
            true,
        )
        .await
}

/// The metadata and whole content of `p`.
async fn read(volume: &Volume, p: &str) -> Result<(FileMeta, Vec<u8>), VolumeError> {
    let (meta, mut reader) = volume.read(Owner::OPEN, &path(p)).await?;
    Ok((meta, reader.read_to_end().await?))
}

fn temp_files(dir: &tempfile::TempDir) -> usize {
    std::fs::read_dir(dir.path().join("tmp")).unwrap().count()
}

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
    // Replaced after the caller read the row (its blob freed): the read
    // asks the index again and gets the new content, never an error.
    let second = put(&volume, "f", b"two").await.unwrap();
    assert!(!exists(&volume, &digest_of(b"one")).await);
    let (meta, mut reader) = volume
        .read_looked_up(Owner::OPEN, &path("f"), Some(first))
        .await
        .unwrap();
    assert_eq!(meta, second);
    assert_eq!(reader.read_to_end().await.unwrap(), b"two");
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
            files_missing_blobs: 0
        }
    );
    assert!(!exists(&volume, &orphan).await);
    assert_eq!(read(&volume, "kept").await.unwrap().1, b"kept");
}

async fn a_missing_blob_is_reported_not_hidden(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    put(&volume, "f", b"content").await.unwrap();
    volume.blobs.remove(&digest_of(b"content")).await.unwrap();
    assert!(matches!(
        read(&volume, "f").await,
        Err(VolumeError::MissingBlob(_))
    ));
    assert_eq!(
        volume.collect_garbage().await.unwrap().files_missing_blobs,
        1
    );
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
        let named = a.index.referenced().await.unwrap();
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
    volume.index.delete(Owner::OPEN, &path("f")).await.unwrap();
    let mut tx = volume.db().begin_write().await.unwrap();
    ledger::mark_deleting(&mut tx, &digest, 0).await.unwrap();
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
    volume.index.delete(Owner::OPEN, &path("f")).await.unwrap();
    let mut tx = volume.db().begin_write().await.unwrap();
    ledger::mark_deleting(&mut tx, &digest, 0).await.unwrap();
    tx.commit().await.unwrap();

    assert!(volume.take_over_removal(&digest, 0).await.unwrap());
    assert!(!exists(&volume, &digest).await);
    put(&volume, "g", b"taken over").await.unwrap();
    assert!(!volume.take_over_removal(&digest, 0).await.unwrap());
    assert!(exists(&volume, &digest).await);
    assert_eq!(read(&volume, "g").await.unwrap().1, b"taken over");
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

async fn add_user(volume: &Volume, name: &str, quota: Option<u64>) -> accounts::User {
    volume
        .accounts()
        .add_user(&accounts::NewUser {
            name,
            password_hash: "$argon2id$placeholder",
            admin: false,
            quota,
        })
        .await
        .unwrap()
}

async fn put_as(
    volume: &Volume,
    owner: Owner,
    p: &str,
    content: &[u8],
) -> Result<FileMeta, VolumeError> {
    let staged = staged(volume, content).await;
    volume
        .put(
            owner,
            &path(p),
            staged,
            &digests_of(content),
            "text/plain",
            true,
        )
        .await
}

async fn each_owner_has_their_own_tree(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let alice = add_user(&volume, "alice", None).await.owner();
    let bob = add_user(&volume, "bob", None).await.owner();
    put_as(&volume, alice, "a.txt", b"alice's").await.unwrap();
    put_as(&volume, bob, "a.txt", b"bob's").await.unwrap();
    put(&volume, "a.txt", b"open").await.unwrap();
    let (alice_meta, _) = volume.read(alice, &path("a.txt")).await.unwrap();
    assert_eq!(alice_meta.sha256, digest_of(b"alice's").as_str());
    let (bob_meta, _) = volume.read(bob, &path("a.txt")).await.unwrap();
    assert_eq!(bob_meta.sha256, digest_of(b"bob's").as_str());
    put_as(&volume, alice, "only/alice.txt", b"x")
        .await
        .unwrap();
    assert!(matches!(
        volume.stat(bob, &path("only/alice.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(matches!(
        volume.delete(bob, &path("only/alice.txt")).await,
        Err(VolumeError::NotFound(_))
    ));
    let names = |listing: Listing| -> Vec<String> {
        listing
            .entries
            .iter()
            .map(|e| e.name().to_owned())
            .collect()
    };
    let bobs = volume.list(bob, &Prefix::root(), None, 10).await.unwrap();
    assert_eq!(names(bobs), ["a.txt"]);
    let alices = volume.list(alice, &Prefix::root(), None, 10).await.unwrap();
    assert_eq!(names(alices), ["a.txt", "only/"]);
    // Removing a user takes their files; the next collection their blobs.
    assert!(volume.accounts().remove_user("alice").await.unwrap());
    assert!(
        volume
            .list(alice, &Prefix::root(), None, 10)
            .await
            .unwrap()
            .entries
            .is_empty()
    );
    volume.collect_garbage().await.unwrap();
    assert!(!exists(&volume, &digest_of(b"alice's")).await);
    assert!(exists(&volume, &digest_of(b"bob's")).await);
}

async fn a_quota_refuses_what_would_exceed_it(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let carol = add_user(&volume, "carol", Some(10)).await.owner();
    put_as(&volume, carol, "six", b"123456").await.unwrap();
    let refused = put_as(&volume, carol, "five", b"12345").await;
    assert!(
        matches!(
            refused,
            Err(VolumeError::QuotaExceeded {
                quota: 10,
                used: 6,
                size: 5
            })
        ),
        "{refused:?}"
    );
    // Nothing of the refused upload stays: no row, and (collected) no blob.
    assert!(matches!(
        volume.stat(carol, &path("five")).await,
        Err(VolumeError::NotFound(_))
    ));
    assert!(!exists(&volume, &digest_of(b"12345")).await);
    // Replacing a file counts its new size instead of its old one.
    put_as(&volume, carol, "six", b"1234567890").await.unwrap();
    assert_eq!(volume.accounts().usage(carol).await.unwrap(), 10);
    // The open tree has no quota.
    put(&volume, "big", &[7; 64]).await.unwrap();
}

async fn accounts_keep_tokens_sessions_shares_and_secrets(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let accounts = volume.accounts();
    assert_eq!(accounts.user_count().await.unwrap(), 0);
    let dave = add_user(&volume, "dave", Some(1 << 20)).await;
    assert!(matches!(
        accounts
            .add_user(&accounts::NewUser {
                name: "dave",
                password_hash: "x",
                admin: true,
                quota: None,
            })
            .await,
        Err(VolumeError::AlreadyExists(_))
    ));
    assert_eq!(
        accounts.user_named("dave").await.unwrap(),
        Some(dave.clone())
    );
    accounts
        .add_token(dave.id, "t1", "hash-1", "laptop")
        .await
        .unwrap();
    assert_eq!(
        accounts.token_user("hash-1").await.unwrap(),
        Some(dave.clone())
    );
    assert_eq!(accounts.token_user("hash-2").await.unwrap(), None);
    assert_eq!(accounts.tokens(dave.id).await.unwrap()[0].label, "laptop");
    assert!(accounts.revoke_token("t1", "").await.unwrap());
    assert_eq!(accounts.token_user("hash-1").await.unwrap(), None);

    accounts
        .add_session(dave.id, "s1", "csrf-1", now_ms() + 60_000)
        .await
        .unwrap();
    accounts
        .add_session(dave.id, "s0", "csrf-0", now_ms() - 1)
        .await
        .unwrap();
    assert_eq!(
        accounts.session("s1").await.unwrap(),
        Some((dave.clone(), "csrf-1".to_owned()))
    );
    assert_eq!(accounts.session("s0").await.unwrap(), None, "expired");
    accounts.remove_session("s1").await.unwrap();
    assert_eq!(accounts.session("s1").await.unwrap(), None);

    accounts
        .add_share("sh1", dave.owner(), &path("a/b.txt"), 7, None)
        .await
        .unwrap();
    let share = accounts.share("sh1").await.unwrap().unwrap();
    assert_eq!(
        (share.owner, share.path.as_str()),
        (dave.owner(), "a/b.txt")
    );
    assert!(share.is_live(now_ms()));
    assert!(!accounts.revoke_share("sh1", Owner::OPEN).await.unwrap());
    assert!(accounts.revoke_share("sh1", dave.owner()).await.unwrap());
    assert_eq!(accounts.share("sh1").await.unwrap(), None);

    let first = accounts.secret("share-key", "one").await.unwrap();
    assert_eq!(first, "one");
    assert_eq!(accounts.secret("share-key", "two").await.unwrap(), "one");
    let users = accounts.users().await.unwrap();
    assert_eq!(users.len(), 1);
    // Sessions past the cap end the oldest.
    for n in 0..accounts::MAX_SESSIONS_PER_USER + 3 {
        let hash = format!("cap{n}");
        accounts
            .add_session(dave.id, &hash, "c", now_ms() + 60_000 + n)
            .await
            .unwrap();
    }
    assert_eq!(accounts.session("cap0").await.unwrap(), None);
    assert!(accounts.session("cap34").await.unwrap().is_some());
    // The open tree can be adopted by a user.
    put(&volume, "open.txt", b"from the open tree")
        .await
        .unwrap();
    assert_eq!(accounts.adopt_open_tree(dave.id).await.unwrap(), 1);
    assert!(volume.stat(dave.owner(), &path("open.txt")).await.is_ok());
    assert!(volume.stat(Owner::OPEN, &path("open.txt")).await.is_err());
    assert!(accounts.remove_user("dave").await.unwrap());
    assert!(!accounts.remove_user("dave").await.unwrap());
    assert_eq!(accounts.user_count().await.unwrap(), 0);
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

fn names_of(listing: Listing) -> Vec<String> {
    listing
        .entries
        .iter()
        .map(|e| e.name().to_owned())
        .collect()
}

async fn properties_at(
    dav: &webdav::WebDavStore<'_>,
    owner: Owner,
    key: &str,
) -> Vec<webdav::DeadProperty> {
    let keys = [key.to_owned()];
    let found = dav.properties_of(owner, &keys).await.unwrap();
    found.into_iter().map(|(_, property)| property).collect()
}

fn set(namespace: &str, name: &str, value: &str) -> webdav::PropertyChange {
    webdav::PropertyChange::Set(webdav::DeadProperty {
        namespace: namespace.into(),
        name: name.into(),
        value: value.into(),
    })
}

async fn webdav_copies_and_moves_trees_as_rows(backend: &Backend) {
    use webdav::{Depth, Node, Transfer};
    let (_dir, volume) = backend.open().await;
    let open = Owner::OPEN;
    let folder = |p: &str| Prefix::parse(p).unwrap();
    // Multi-byte names: the engines cut paths by characters, not bytes.
    put(&volume, "é€/a.txt", b"first").await.unwrap();
    put(&volume, "é€/sub/b.txt", b"second").await.unwrap();
    volume.make_folder(open, &folder("é€/empty")).await.unwrap();
    let dav = volume.webdav();
    dav.change_properties(open, "é€/a.txt", &[set("urn:t", "p", "on a")])
        .await
        .unwrap();
    dav.change_properties(open, "é€/", &[set("urn:t", "p", "on the folder")])
        .await
        .unwrap();
    assert!(matches!(
        volume.node(open, Some(&path("é€"))).await.unwrap(),
        Node::Folder(_)
    ));
    assert!(matches!(
        volume.node(open, Some(&path("é€/a.txt"))).await.unwrap(),
        Node::File(_)
    ));
    assert_eq!(
        volume.node(open, Some(&path("nothing"))).await.unwrap(),
        Node::Missing
    );

    let blobs_before = volume.blobs.list().await.unwrap().len();
    let copied = volume
        .copy_node(open, &path("é€"), &path("çà"), Depth::Infinity, false)
        .await
        .unwrap();
    assert_eq!(copied, Transfer::Created);
    assert_eq!(
        volume.blobs.list().await.unwrap().len(),
        blobs_before,
        "rows, not bytes"
    );
    let listing = volume.list(open, &folder("çà"), None, 10).await.unwrap();
    assert_eq!(names_of(listing), ["çà/a.txt", "çà/empty/", "çà/sub/"]);
    assert_eq!(read(&volume, "çà/sub/b.txt").await.unwrap().1, b"second");
    assert_eq!(properties_at(&dav, open, "çà/a.txt").await[0].value, "on a");
    assert_eq!(
        properties_at(&dav, open, "çà/").await[0].value,
        "on the folder"
    );
    assert!(matches!(
        volume
            .copy_node(open, &path("é€"), &path("çà"), Depth::Infinity, false)
            .await,
        Err(VolumeError::AlreadyExists(_))
    ));
    // Depth 0: the folder alone.
    volume
        .copy_node(open, &path("é€"), &path("shallow"), Depth::Zero, false)
        .await
        .unwrap();
    let shallow = volume
        .list(open, &folder("shallow"), None, 10)
        .await
        .unwrap();
    assert!(shallow.entries.is_empty());
    let made = dav
        .folders_made(
            open,
            &[
                "shallow/".to_owned(),
                "çà/empty/".to_owned(),
                "çà/sub/".to_owned(),
            ],
        )
        .await
        .unwrap();
    assert!(made.contains_key("shallow/") && made.contains_key("çà/empty/"));
    assert!(
        !made.contains_key("çà/sub/"),
        "a folder that only holds files has no date"
    );
    assert!(matches!(
        volume.node(open, Some(&path("shallow"))).await.unwrap(),
        Node::Folder(_)
    ));

    // The originals go; the copies keep the content alive.
    volume.delete_folder(open, &folder("é€")).await.unwrap();
    assert!(properties_at(&dav, open, "é€/a.txt").await.is_empty());
    volume.collect_garbage().await.unwrap();
    assert_eq!(read(&volume, "çà/a.txt").await.unwrap().1, b"first");

    // A move renames rows and takes properties along.
    let moved = volume
        .move_node(open, &path("çà"), &path("m"), false)
        .await
        .unwrap();
    assert_eq!(moved, Transfer::Created);
    assert_eq!(
        volume.node(open, Some(&path("çà"))).await.unwrap(),
        Node::Missing
    );
    assert_eq!(read(&volume, "m/sub/b.txt").await.unwrap().1, b"second");
    assert_eq!(properties_at(&dav, open, "m/a.txt").await[0].value, "on a");
    // Over a folder, with overwrite: the folder goes, the file takes its name.
    let replaced = volume
        .move_node(open, &path("m/a.txt"), &path("shallow"), true)
        .await
        .unwrap();
    assert_eq!(replaced, Transfer::Replaced);
    assert!(matches!(
        volume.node(open, Some(&path("shallow"))).await.unwrap(),
        Node::File(_)
    ));
    // A file copied over a file releases what the replaced one named.
    put(&volume, "lonely", b"only here").await.unwrap();
    volume
        .copy_node(
            open,
            &path("shallow"),
            &path("lonely"),
            Depth::Infinity,
            true,
        )
        .await
        .unwrap();
    assert!(!exists(&volume, &digest_of(b"only here")).await);
    assert_eq!(read(&volume, "lonely").await.unwrap().1, b"first");

    // Nothing goes into itself, or onto a folder that holds it.
    assert!(matches!(
        volume
            .move_node(open, &path("m"), &path("m/sub/x"), true)
            .await,
        Err(VolumeError::Nested { .. })
    ));
    assert!(matches!(
        volume
            .copy_node(open, &path("m/sub"), &path("m"), Depth::Infinity, true)
            .await,
        Err(VolumeError::Nested { .. })
    ));
    // No path may grow past the limit on the way.
    let long = format!(
        "p/{}/{}/{}/{}",
        "a".repeat(250),
        "b".repeat(250),
        "c".repeat(250),
        "d".repeat(250)
    );
    put(&volume, &long, b"long").await.unwrap();
    assert!(matches!(
        volume
            .move_node(open, &path("p"), &path(&"q".repeat(40)), false)
            .await,
        Err(VolumeError::InvalidPath(PathError::TooLong(_)))
    ));
    assert_eq!(read(&volume, &long).await.unwrap().1, b"long");
    // What a vanished folder left is dropped for a new one.
    dav.change_properties(open, "gone/", &[set("urn:t", "p", "stale")])
        .await
        .unwrap();
    dav.forget(open, "gone/").await.unwrap();
    assert!(properties_at(&dav, open, "gone/").await.is_empty());

    // A copy counts against the quota, all or nothing.
    let alice = add_user(&volume, "alice", Some(10)).await.owner();
    put_as(&volume, alice, "d/six", b"123456").await.unwrap();
    assert!(matches!(
        volume
            .copy_node(alice, &path("d"), &path("e"), Depth::Infinity, false)
            .await,
        Err(VolumeError::QuotaExceeded { .. })
    ));
    assert_eq!(
        volume.node(alice, Some(&path("e"))).await.unwrap(),
        Node::Missing
    );
}

async fn webdav_locks_conflict_refresh_and_expire(backend: &Backend) {
    use webdav::{LockOutcome, NewLock};
    let (_dir, volume) = backend.open().await;
    let bob = add_user(&volume, "bob", None).await.owner();
    let dav = volume.webdav();
    let ask = |token: &str, root: &str, infinite: bool, exclusive: bool, timeout_s: u64| NewLock {
        token: token.into(),
        root: root.into(),
        infinite,
        exclusive,
        holder: "<href xmlns=\"DAV:\">me</href>".into(),
        timeout_s,
    };
    let granted = |outcome: LockOutcome| matches!(outcome, LockOutcome::Granted(_));
    assert!(granted(
        dav.lock(bob, ask("urn:1", "a/", true, true, 60))
            .await
            .unwrap()
    ));
    assert_eq!(
        dav.lock(bob, ask("urn:2", "a/b/c", false, false, 60))
            .await
            .unwrap(),
        LockOutcome::Conflict,
        "inside an exclusive depth-infinity lock"
    );
    assert_eq!(
        dav.lock(bob, ask("urn:3", "", true, false, 60))
            .await
            .unwrap(),
        LockOutcome::Conflict,
        "a depth-infinity lock above it"
    );
    assert!(granted(
        dav.lock(bob, ask("urn:4", "x", false, false, 60))
            .await
            .unwrap()
    ));
    assert!(granted(
        dav.lock(bob, ask("urn:5", "x", false, false, 60))
            .await
            .unwrap()
    ));
    assert_eq!(
        dav.lock(bob, ask("urn:6", "x", false, true, 60))
            .await
            .unwrap(),
        LockOutcome::Conflict
    );
    // Another tree's locks are its own.
    assert!(granted(
        dav.lock(Owner::OPEN, ask("urn:7", "x", false, true, 60))
            .await
            .unwrap()
    ));
    let held: Vec<String> = dav
        .locks(bob)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.token)
        .collect();
    assert_eq!(held.len(), 3);
    let refreshed = dav.refresh_lock(bob, "urn:1", 600).await.unwrap().unwrap();
    assert_eq!(refreshed.timeout_s, 600);
    assert_eq!(
        dav.holders(bob).await.unwrap()["urn:1"],
        "<href xmlns=\"DAV:\">me</href>"
    );
    assert!(dav.refresh_lock(bob, "urn:7", 600).await.unwrap().is_none());
    assert!(dav.unlock(bob, "urn:1").await.unwrap());
    assert!(!dav.unlock(bob, "urn:1").await.unwrap());
    // A lock that expired is no lock.
    assert!(granted(
        dav.lock(bob, ask("urn:8", "old", false, true, 0))
            .await
            .unwrap()
    ));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert!(granted(
        dav.lock(bob, ask("urn:9", "old", false, true, 60))
            .await
            .unwrap()
    ));
    assert_eq!(dav.clear_expired().await.unwrap(), 1);
    // Deleting a file takes its locks and properties; removing the user all.
    put_as(&volume, bob, "gone", b"g").await.unwrap();
    assert!(granted(
        dav.lock(bob, ask("urn:10", "gone", false, true, 60))
            .await
            .unwrap()
    ));
    dav.change_properties(bob, "gone", &[set("", "n", "v")])
        .await
        .unwrap();
    volume.delete(bob, &path("gone")).await.unwrap();
    assert!(
        dav.locks(bob)
            .await
            .unwrap()
            .iter()
            .all(|l| l.root != "gone")
    );
    assert!(properties_at(&dav, bob, "gone").await.is_empty());
    assert!(volume.accounts().remove_user("bob").await.unwrap());
    assert!(dav.locks(bob).await.unwrap().is_empty());
}

/// On PostgreSQL, sqlx prepares each SQL text once per connection, typed by
/// its first use's arguments, and reuses it. A file move bound three
/// arguments to a two-placeholder `DELETE FROM dav_locks …` that a delete
/// binds two: whichever came second on a connection failed (`bind message
/// supplies 3 parameters, but prepared statement "sqlx_s_22" requires 2`).
async fn moves_deletes_and_forgets_interleave_on_one_connection(backend: &Backend) {
    let (_dir, volume) = backend.open().await;
    let open = Owner::OPEN;
    for _ in 0..4 {
        put(&volume, "a", b"moved").await.unwrap();
        put(&volume, "gone", b"deleted").await.unwrap();
        volume.delete(open, &path("gone")).await.unwrap();
        volume
            .move_node(open, &path("a"), &path("b"), true)
            .await
            .unwrap();
        volume.webdav().forget(open, "a").await.unwrap();
        volume.delete(open, &path("b")).await.unwrap();
    }
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod sqlite_local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(&super::Backend::SqliteLocal).await;
                }
            )*
        }

        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn postgres_s3_suite() {
            let servers = tokio::task::spawn_blocking(|| Servers {
                postgres: testsupport::Postgres::start().unwrap(),
                seaweed: testsupport::Seaweed::start("volume-suite").unwrap(),
            })
            .await
            .unwrap();
            let backend = Backend::PostgresS3(Box::new(servers));
            $(
                eprintln!("postgres + s3: {}", stringify!($case));
                $case(&backend).await;
            )*
        }
    };
}

suite!(
    put_read_stat_delete,
    a_read_starts_from_the_row_looked_up_and_survives_a_replace,
    replace_keeps_created_and_frees_the_old_blob,
    create_only_refuses_an_existing_path,
    identical_content_is_stored_once,
    sweep_removes_leftovers_of_a_crash,
    a_missing_blob_is_reported_not_hidden,
    concurrent_writers_of_one_content_never_lose_the_blob,
    listing_collapses_folders_and_pages,
    samples_are_kept_until_pruned,
    a_staged_blob_dropped_unfinished_leaves_nothing,
    reads_come_in_chunks_and_stop_at_the_recorded_size,
    two_gateways_racing_on_one_content_never_lose_a_blob,
    an_unfinished_removal_is_finished_then_written_again,
    a_stale_removal_is_taken_over_once,
    create_only_admits_one_writer_per_new_path,
    a_young_unrecorded_blob_is_left_alone,
    a_blob_larger_than_one_part_round_trips,
    each_owner_has_their_own_tree,
    a_quota_refuses_what_would_exceed_it,
    accounts_keep_tokens_sessions_shares_and_secrets,
    empty_folders_list_and_go_with_their_tree,
    webdav_copies_and_moves_trees_as_rows,
    webdav_locks_conflict_refresh_and_expire,
    moves_deletes_and_forgets_interleave_on_one_connection,
);
