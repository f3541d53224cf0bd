//! The volume's suite, run against both backends: a real SQLite file with
//! blob files in a temp dir, and a real PostgreSQL server with SeaweedFS's
//! S3. Every case is a test of its own on each backend
//! (`tests::AREA::sqlite_local::CASE`, `tests::AREA::postgres_s3::CASE`),
//! so one failure hides no other. The PostgreSQL and SeaweedFS servers are
//! started once per test binary and shared; each case gets its own
//! database and key prefix, so cases running at once never see each
//! other's rows or blobs.

#![allow(clippy::unwrap_used)]

mod collection;
mod dav;
mod estimator_samples;
mod files;
mod object_lock;
mod owners;
mod packing;
mod uploads;
mod versions;
mod write_turns;

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use super::*;

/// Which backend a case runs on.
enum Backend {
    SqliteLocal,
    PostgresS3(&'static Servers),
}

/// PostgreSQL and SeaweedFS, started once for every `postgres_s3` case of
/// this test binary (see [`shared_servers`]).
struct Servers {
    postgres: testsupport::Postgres,
    seaweed: testsupport::Seaweed,
}

/// Numbers each case's database and key prefix.
static CASES: AtomicUsize = AtomicUsize::new(0);

/// The servers every `postgres_s3` case shares, started by the first to
/// ask. Tests run on runtimes of their own, but the servers are child
/// processes, so one process-wide pair serves them all.
fn shared_servers() -> &'static Servers {
    static SERVERS: OnceLock<Servers> = OnceLock::new();
    SERVERS.get_or_init(|| {
        let servers = Servers {
            postgres: testsupport::Postgres::start().unwrap(),
            seaweed: testsupport::Seaweed::start("volume-suite").unwrap(),
        };
        servers.stop_when_this_process_exits();
        servers
    })
}

impl Servers {
    /// A static is never dropped, so `testsupport`'s stop-on-drop never
    /// runs for these servers. Instead a watcher process waits for this
    /// test binary to exit (however it exits: passed, failed, aborted), then
    /// stops them as their drop would (PostgreSQL's fast shutdown, SIGTERM
    /// to SeaweedFS's group, SIGKILL to both groups after a grace) and
    /// removes their files.
    // The watcher is never waited for: it must outlive this process.
    #[allow(clippy::zombie_processes)]
    fn stop_when_this_process_exits(&self) {
        let (pg, weed) = (self.postgres.pid(), self.seaweed.pid());
        let script = format!(
            "while kill -0 {me} 2>/dev/null; do sleep 0.2; done; \
             kill -INT {pg} 2>/dev/null; kill -TERM -{weed} 2>/dev/null; \
             for _ in $(seq 50); do \
                 kill -0 {pg} 2>/dev/null || kill -0 {weed} 2>/dev/null || break; \
                 sleep 0.2; \
             done; \
             kill -KILL -{pg} -{weed} 2>/dev/null; \
             rm -rf '{pg_dir}' '{weed_dir}'",
            me = std::process::id(),
            pg_dir = self.postgres.dir().display(),
            weed_dir = self.seaweed.dir().display(),
        );
        // Its own process group and no pipe of ours: it outlives this
        // process, and `cargo test` does not wait for it.
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
    }
}

impl Backend {
    /// The PostgreSQL + S3 backend on the shared servers.
    async fn postgres_s3() -> Self {
        Self::PostgresS3(tokio::task::spawn_blocking(shared_servers).await.unwrap())
    }
}

impl Backend {
    /// Where a fresh, empty volume lives, with no grace period: the cases
    /// leave nothing in flight when they collect.
    fn config(&self, dir: &std::path::Path) -> VolumeConfig {
        let mut config = VolumeConfig::in_data_dir(dir);
        config.orphan_grace = Duration::ZERO;
        // The cases test what a tree without versions does; `versions`
        // turns them on where it tests them.
        config.history.versions = false;
        if let Self::PostgresS3(servers) = *self {
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

    /// A fresh volume whose trees keep versions (the gateway's default),
    /// for `retention`.
    async fn open_keeping_versions(
        &self,
        retention: Duration,
    ) -> (tempfile::TempDir, Volume, VolumeConfig) {
        let dir = tempfile::tempdir().unwrap();
        let mut config = self.config(dir.path());
        config.history = HistoryPolicy {
            versions: true,
            retention,
        };
        let (volume, _) = Volume::open(&config).await.unwrap();
        (dir, volume, config)
    }
}

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

/// Remove the file row of `p` and nothing else, as a crash right after a
/// delete's commit leaves it: its blob is still stored.
async fn delete_row_only(volume: &Volume, p: &str) {
    let mut tx = volume.db().begin_write().await.unwrap();
    crate::tree::Tree::delete_file(&mut tx, Owner::OPEN, &path(p))
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

fn temp_files(dir: &tempfile::TempDir) -> usize {
    std::fs::read_dir(dir.path().join("tmp")).unwrap().count()
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

/// One test per case and backend: `sqlite_local::CASE` and
/// `postgres_s3::CASE`, each calling the area's `async fn CASE(&Backend)`.
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod sqlite_local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(&super::super::Backend::SqliteLocal).await;
                }
            )*
        }

        mod postgres_s3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(&super::super::Backend::postgres_s3().await).await;
                }
            )*
        }
    };
}
use suite;

/// Append `bytes` at `offset` to `owner`'s tus upload `id`, as one request
/// with no hashes (the service's part is elsewhere): kept and recorded,
/// with its `length` if it had none. `None` when the upload is elsewhere
/// or gone, or moved on meanwhile.
async fn append_bytes(
    volume: &Volume,
    owner: Owner,
    id: &str,
    offset: u64,
    bytes: &[u8],
    length: Option<u64>,
    expires_ms: i64,
) -> Result<Option<crate::uploads::Upload>, VolumeError> {
    let Some(upload) = volume.find_upload(owner, id).await? else {
        return Ok(None);
    };
    if upload.received != offset {
        return Ok(None);
    }
    let mut appending = volume.resume_upload(&upload, 0, 0).await?;
    let refusals = appending.log.refusals();
    appending.staged.write(bytes).await?;
    let hashed = crate::appending::HashedAt {
        text: "",
        offset: 0,
        outboard_len: 0,
    };
    match volume
        .checkpoint_upload(
            &mut appending.log,
            &mut appending.staged,
            hashed,
            length,
            expires_ms,
        )
        .await
    {
        Ok(_) => volume.find_upload(owner, id).await,
        Err(error) => match refusals.take() {
            Some(VolumeError::UploadMovedOn(_)) => Ok(None),
            Some(refused) => Err(refused),
            None => Err(error),
        },
    }
}
