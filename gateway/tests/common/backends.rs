//! The two backends a case runs on (SQLite and a local directory;
//! PostgreSQL with blobs in SeaweedFS), a gateway child process of its own
//! on one of them (started, killed with SIGKILL and restarted on the same
//! data), and the time limits of a case.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gateway::config::Config;

use super::TestServer;

/// Runs a case (`async fn case(kind: BackendKind)` in the test file) twice:
/// on SQLite and a local directory, and on PostgreSQL with blobs in
/// SeaweedFS.
#[allow(unused_macros)]
macro_rules! both_backends {
    ($case:ident) => {
        mod $case {
            use $crate::common::backends::BackendKind;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_and_a_local_directory() {
                super::$case(BackendKind::Local).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_and_seaweedfs() {
                super::$case(BackendKind::Shared).await;
            }
        }
    };
}
#[allow(unused_imports)]
pub(crate) use both_backends;

#[derive(Debug, Clone, Copy)]
pub enum BackendKind {
    /// SQLite and a local directory, both in the data directory.
    Local,
    /// PostgreSQL and blobs in an S3 bucket (SeaweedFS).
    Shared,
}

/// The servers of the shared backend, stopped by PID when dropped.
struct Shared {
    postgres: testsupport::Postgres,
    seaweed: testsupport::Seaweed,
}

/// Where a case's gateways keep their data; for the shared backend, the
/// servers it runs on, for as long as the case.
pub struct Backend {
    shared: Option<Shared>,
}

impl Backend {
    /// The backend of `kind`; for the shared one, a PostgreSQL and a
    /// SeaweedFS with bucket `bucket` of its own.
    pub async fn start(kind: BackendKind, bucket: &'static str) -> Self {
        let shared = match kind {
            BackendKind::Local => None,
            BackendKind::Shared => Some(
                tokio::task::spawn_blocking(move || Shared {
                    postgres: testsupport::Postgres::start().unwrap(),
                    seaweed: testsupport::Seaweed::start(bucket).unwrap(),
                })
                .await
                .unwrap(),
            ),
        };
        Self { shared }
    }

    /// The local backend: a gateway's data directory is all of it.
    pub fn local() -> Self {
        Self { shared: None }
    }

    pub fn is_local(&self) -> bool {
        self.shared.is_none()
    }

    /// A gateway's configuration pointed at this backend.
    pub fn configure(&self, config: &mut Config) {
        if let Some(shared) = &self.shared {
            config.database_url = Some(shared.postgres.url("postgres").parse().unwrap());
            config.blob_store = Some(
                format!("s3://{}/blobs", shared.seaweed.bucket())
                    .parse()
                    .unwrap(),
            );
            config.s3 = volume::S3Settings {
                endpoint: Some(shared.seaweed.endpoint()),
                region: Some(shared.seaweed.region().to_owned()),
                access_key_id: Some(shared.seaweed.access_key().to_owned()),
                secret_access_key: Some(shared.seaweed.secret_key().to_owned()),
                allow_http: Some(true),
            };
        }
    }

    /// A gateway in this process on this backend, in a fresh temp dir.
    pub async fn server(&self) -> TestServer {
        TestServer::start(|config| self.configure(config)).await
    }

    /// The flags and environment that point a gateway process at this
    /// backend (nothing for the local one: its data directory is all).
    pub fn point(&self, command: &mut Command) {
        if let Some(shared) = &self.shared {
            command
                .args(["--database-url", &shared.postgres.url("postgres")])
                .args([
                    "--blob-store",
                    &format!("s3://{}/blobs", shared.seaweed.bucket()),
                ])
                .envs(shared.seaweed.env())
                .env_remove("AWS_CA_BUNDLE");
        }
    }

    /// The flag that points the CLI (`gateway key create`) at this
    /// backend's database (none for the local one).
    pub fn point_cli(&self, command: &mut Command) {
        if let Some(shared) = &self.shared {
            command.args(["--database-url", &shared.postgres.url("postgres")]);
        }
    }
}

/// Runs `case`, failing it if it takes longer than `limit`; prints how
/// long it took.
pub async fn within<F: std::future::Future<Output = ()>>(limit: Duration, case: F) {
    let started = Instant::now();
    tokio::time::timeout(limit, case)
        .await
        .unwrap_or_else(|_| panic!("the case took longer than {limit:?}"));
    eprintln!("the case took {:?}", started.elapsed());
}

/// Polls `check` every 100 ms until it holds or `limit` passes; whether it
/// held.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------
// A gateway process of its own, to kill with SIGKILL.

/// A `gateway` child process on a free loopback port (and one for its S3
/// API if it serves one), its stdout and stderr appended to a log file.
/// Stopping it is SIGKILL (by PID), nothing gentler; it restarts on the
/// same addresses, data directory and backend.
pub struct GatewayProcess {
    process: Option<testsupport::ChildGuard>,
    pub addr: SocketAddr,
    s3_addr: Option<SocketAddr>,
    data_dir: PathBuf,
    log: PathBuf,
    start_limit: Duration,
    /// Flags of its own, given at every start.
    args: Vec<String>,
}

impl GatewayProcess {
    /// A gateway on `data_dir` logging to `log`, not started yet (see
    /// [`Self::started`]); it has 30 s to answer at each start.
    pub fn new(data_dir: &Path, log: &Path) -> Self {
        Self {
            process: None,
            addr: SocketAddr::from(([127, 0, 0, 1], testsupport::free_port())),
            s3_addr: None,
            data_dir: data_dir.to_owned(),
            log: log.to_owned(),
            start_limit: Duration::from_secs(30),
            args: Vec::new(),
        }
    }

    /// It starts with `arg` too (a flag such as `--versions=false`), at
    /// every start.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// It serves the S3 API too (`--s3-listen`), on a port of its own.
    pub fn serving_s3(mut self) -> Self {
        self.s3_addr = Some(SocketAddr::from(([127, 0, 0, 1], testsupport::free_port())));
        self
    }

    /// It has `limit` to answer `/healthz` at each start.
    pub fn start_limit(mut self, limit: Duration) -> Self {
        self.start_limit = limit;
        self
    }

    /// Starts it on `backend`; returns once it answers `/healthz`.
    pub async fn started(mut self, backend: &Backend) -> Self {
        self.restart(backend).await;
        self
    }

    /// A gateway (no S3 API) on `backend` and `data_dir`, logging to
    /// `log`, started.
    pub async fn start(backend: &Backend, data_dir: &Path, log: &Path) -> Self {
        Self::new(data_dir, log).started(backend).await
    }

    /// (Re)starts it on the same addresses, data directory and backend;
    /// returns once it answers `/healthz`.
    pub async fn restart(&mut self, backend: &Backend) {
        assert!(self.process.is_none(), "already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
        command.args(["--listen", &self.addr.to_string()]);
        if let Some(s3_addr) = self.s3_addr {
            command.args(["--s3-listen", &s3_addr.to_string()]);
        }
        command
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(["--instances", "2"])
            .args(&self.args)
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log);
        backend.point(&mut command);
        // Stopping it is SIGKILL, nothing gentler.
        self.process = Some(
            testsupport::ChildGuard::spawn(&mut command, "KILL", false, Duration::from_secs(5))
                .unwrap(),
        );
        let client = reqwest::Client::new();
        let deadline = Instant::now() + self.start_limit;
        loop {
            if let Ok(answer) = client
                .get(format!("http://{}/healthz", self.addr))
                .send()
                .await
                && answer.status().is_success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not start:\n{}",
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL (by PID), and wait until it is gone.
    pub async fn kill(&mut self) {
        let mut process = self.process.take().expect("running");
        tokio::task::spawn_blocking(move || process.stop())
            .await
            .unwrap();
    }

    /// `http://127.0.0.1:PORT` of its S3 API (see [`Self::serving_s3`]).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.s3_addr.expect("it serves no S3 API"))
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `wasm_storage_uploads_in_progress` in its `/metrics`.
    pub async fn uploads_in_progress(&self) -> f64 {
        super::uploads_in_progress(self.addr).await
    }

    /// Asserts its log shows no panic.
    pub fn assert_no_panic(&self) {
        let log = self.log_text();
        assert!(!log.contains("panicked"), "a gateway panicked:\n{log}");
    }
}
