//! A full disk, for real: the data directory (SQLite index, blobs, temp
//! files) on a 4 MiB tmpfs, filled by uploads until the kernel says
//! ENOSPC. Needs root (for `mount`); skipped with a message otherwise.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{TestServer, random_bytes, sha256_hex, stored_blobs};
use reqwest::StatusCode;

/// Size of each file that fills the disk.
const SMALL: usize = 64 << 10;
/// More than the whole tmpfs could hold once the index is there.
const LARGE: usize = 3 << 20;

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A small tmpfs mounted at a directory, lazily unmounted when dropped
/// (even if a test panicked with files still open on it).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Self {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "mount -t tmpfs at {} failed (running as root, so this needs CAP_SYS_ADMIN): {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            dir: dir.to_owned(),
        }
    }
}

impl Tmpfs {
    /// Give the file system more room, as an operator would.
    fn grow(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "remount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// What an upload came to: stored, or refused for want of space. Anything
/// else fails the test, with the answer.
async fn outcome(response: reqwest::Response, what: &str) -> bool {
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    if status.is_success() {
        return true;
    }
    assert_eq!(
        status,
        StatusCode::INSUFFICIENT_STORAGE,
        "{what}: expected 2xx or 507, got {status}: {body}"
    );
    let error: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"], "insufficient_storage", "{what}: {body}");
    false
}

/// Temp files left in `tmp`, waiting briefly: a failed upload's temp file
/// goes when the instance lets go of the upload, which may be just after
/// the answer was sent.
async fn leftover_temp_files(tmp: &Path) -> Vec<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<PathBuf> = std::fs::read_dir(tmp)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn blob_names(data_dir: &Path) -> BTreeSet<String> {
    stored_blobs(data_dir)
}

#[tokio::test]
async fn a_full_disk_refuses_uploads_with_507_and_loses_nothing() {
    if !is_root() {
        eprintln!("skipped: mounting a tmpfs needs root (`id -u` is not 0)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mount = Tmpfs::mount(dir.path(), "4m");
    let data_dir = mount.dir.join("data");
    std::fs::create_dir(&data_dir).unwrap();
    // No grace for orphans, so the collection below may take any blob a
    // refused upload left unrecorded (nothing else runs meanwhile).
    // No versions kept: the deletes below must free the disk, not fill
    // the trash (emptying a trash frees it the same way).
    let server = TestServer::start_in(&data_dir, |config| {
        config.orphan_grace = Duration::ZERO;
        config.versions = false;
    })
    .await;

    // (path, content) of every upload the server acknowledged.
    let mut stored: Vec<(String, Vec<u8>)> = Vec::new();
    // (path, sha256) of every upload refused with 507.
    let mut refused: Vec<(String, String)> = Vec::new();

    // A first megabyte fits.
    for i in 0..16 {
        let path = format!("fill/first-{i}.bin");
        let content = random_bytes(SMALL);
        let response = server.put(&path, content.clone()).await;
        assert_eq!(response.status(), StatusCode::CREATED, "{path}");
        stored.push((path, content));
    }

    // Bodies larger than what is left: declared, then undeclared (chunked).
    let content = random_bytes(LARGE);
    let response = server.put("large/declared.bin", content.clone()).await;
    assert!(
        !outcome(response, "3 MiB declared").await,
        "a 3 MiB upload fitted on a 4 MiB tmpfs already holding 1 MiB"
    );
    refused.push(("large/declared.bin".into(), sha256_hex(&content)));
    let content = random_bytes(LARGE);
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        content.chunks(64 << 10).map(|c| Ok(c.to_vec())).collect();
    let response = server
        .client
        .put(server.url("/files/large/chunked.bin"))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert!(!outcome(response, "3 MiB chunked").await);
    refused.push(("large/chunked.bin".into(), sha256_hex(&content)));
    assert_eq!(
        leftover_temp_files(&data_dir.join("tmp")).await,
        Vec::<PathBuf>::new(),
        "a refused large upload left its temp file"
    );

    // Fill up with small files until one is refused, then a few more
    // (smaller ones may still squeeze in: whatever is acknowledged counts).
    let mut first_refusal = None;
    for i in 0..200 {
        let path = format!("fill/{i}.bin");
        let content = random_bytes(SMALL);
        if outcome(server.put(&path, content.clone()).await, &path).await {
            stored.push((path, content));
        } else {
            refused.push((path, sha256_hex(&content)));
            first_refusal = Some(i);
            break;
        }
    }
    assert!(
        first_refusal.is_some(),
        "200 uploads of 64 KiB fitted on a 4 MiB tmpfs"
    );
    for (i, size) in [SMALL, 4096, 1, 0].into_iter().enumerate() {
        let path = format!("after/{i}-{size}.bin");
        let content = random_bytes(size);
        if outcome(server.put(&path, content.clone()).await, &path).await {
            stored.push((path, content));
        } else {
            refused.push((path, sha256_hex(&content)));
        }
    }
    eprintln!(
        "{} uploads acknowledged, {} refused with 507",
        stored.len(),
        refused.len()
    );

    // Nothing half-written: every acknowledged file reads back whole...
    for (path, content) in &stored {
        let response = server.get(path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let body = response.bytes().await.unwrap();
        assert_eq!(body.len(), content.len(), "{path}");
        assert_eq!(sha256_hex(&body), sha256_hex(content), "{path}");
    }
    // ...and every refused one is absent.
    for (path, _) in &refused {
        assert_eq!(
            server.get(path).await.status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    assert_eq!(
        leftover_temp_files(&data_dir.join("tmp")).await,
        Vec::<PathBuf>::new(),
        "temp files left behind"
    );
    let expected: BTreeSet<String> = stored.iter().map(|(_, c)| sha256_hex(c)).collect();
    let on_disk = blob_names(&data_dir);
    let missing: Vec<_> = expected.difference(&on_disk).collect();
    assert!(
        missing.is_empty(),
        "acknowledged blobs missing: {missing:?}"
    );
    // A refusal that came from the index (after the blob was linked into
    // place) leaves an orphan blob. Removing it takes a database write,
    // which a full disk may refuse too: the collection after space is
    // freed (below) must take every one.
    let orphans: Vec<&str> = refused
        .iter()
        .filter(|(_, digest)| on_disk.contains(digest) && !expected.contains(digest))
        .map(|(path, _)| path.as_str())
        .collect();
    eprintln!("refused uploads that left orphan blobs: {orphans:?}");

    // A disk this full cannot even record removals (the index must write
    // to mark a blob as going), so freeing room is the operator's part:
    // once there is some, deletions, collection and uploads all work.
    mount.grow("16m");
    let (deleted, kept) = stored.split_at(stored.len() / 2);
    for (path, _) in deleted {
        let response = server.delete(path).await;
        assert!(
            response.status().is_success(),
            "DELETE {path} on a full disk: {}",
            response.status()
        );
    }
    // Removals refused while the disk was full: a collection finishes them.
    let report = server.state.volume.collect_garbage().await;
    eprintln!("the collection after the deletions: {report:?}");
    let content = random_bytes(SMALL);
    let response = server.put("recovered.bin", content.clone()).await;
    assert_eq!(
        response.status(),
        StatusCode::CREATED,
        "an upload after freeing space: {}",
        response.text().await.unwrap_or_default()
    );
    let read = server.get("recovered.bin").await.bytes().await.unwrap();
    assert_eq!(sha256_hex(&read), sha256_hex(&content));
    for (path, content) in kept {
        let body = server.get(path).await.bytes().await.unwrap();
        assert_eq!(
            sha256_hex(&body),
            sha256_hex(content),
            "{path} after the deletions"
        );
    }
    // With room again, a collection takes the orphans the refusals left:
    // the blobs are exactly those of the files.
    let report = server.state.volume.collect_garbage().await.unwrap();
    eprintln!("the collection after freeing space: {report:?}");
    let mut expected: BTreeSet<String> = kept.iter().map(|(_, c)| sha256_hex(c)).collect();
    expected.insert(sha256_hex(&content));
    assert_eq!(blob_names(&data_dir), expected);

    server.stop().await;
    drop(mount);
}
