//! A throwaway SeaweedFS S3 endpoint (`weed mini`).

use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tempfile::TempDir;

use crate::child::{ChildGuard, log_tail};
use crate::port::{GRPC_OFFSET, free_port, free_port_with_grpc};
use crate::room::roomy_temp_dir;
use crate::tool::find_tool;

/// How long until the bucket answers a signed listing.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Room a test's objects may take, besides the 1 % `weed mini` keeps free.
const WEED_ROOM: u64 = 2 << 30;
/// How long a `SIGTERM` may take before `SIGKILL`.
const STOP_GRACE: Duration = Duration::from_secs(5);
const ACCESS_KEY: &str = "testsupport-access";
const SECRET_KEY: &str = "testsupport-secret";
const REGION: &str = "us-east-1";
/// The components of `weed mini` that serve HTTP plus gRPC on HTTP + 10000.
/// The embedded worker dials the admin on its HTTP port + 10000 whatever
/// `-admin.port.grpc` says, so every gRPC port keeps that offset.
const COMPONENTS: [&str; 5] = ["master", "volume", "filer", "s3", "admin"];

/// A single-process SeaweedFS (`weed mini`) on 127.0.0.1 with every port
/// picked fresh, data in a temporary directory, one bucket created at
/// start, and fixed test credentials.
///
/// Dropping it sends `SIGTERM` to its process group, `SIGKILL` after 5 s,
/// then deletes its files.
#[derive(Debug)]
pub struct Seaweed {
    // Declared before `dir` so the server stops before its files go.
    server: ChildGuard,
    s3_port: u16,
    /// HTTP ports of [`COMPONENTS`], in that order.
    http_ports: Vec<u16>,
    bucket: String,
    dir: TempDir,
}

impl Seaweed {
    /// Starts `weed mini` and returns once `bucket` answers a signed
    /// listing with 200. `bucket` must be a valid S3 bucket name (3 to 63
    /// lowercase letters, digits, `-` and `.`), or weed would skip it.
    pub fn start(bucket: &str) -> anyhow::Result<Self> {
        ensure!(
            valid_bucket(bucket),
            "invalid S3 bucket name {bucket:?}: use 3 to 63 of a-z, 0-9, - and ., \
             starting and ending with a letter or digit"
        );
        let weed = find_tool("weed").context("SeaweedFS's `weed` is not installed")?;
        // `weed mini` refuses every write once its disk is 99 % full.
        let dir = roomy_temp_dir("testsupport-weed-", WEED_ROOM)
            .context("creating the SeaweedFS temp dir")?;
        let data = dir.path().join("data");
        let logs = dir.path().join("logs");
        fs::create_dir(&data).context("creating the data dir")?;
        fs::create_dir(&logs).context("creating the log dir")?;

        let http_ports: Vec<u16> = COMPONENTS.iter().map(|_| free_port_with_grpc()).collect();
        let mut cmd = Command::new(weed);
        // glog files would otherwise land in /tmp.
        cmd.arg(format!("-logdir={}", logs.display()))
            .arg("mini")
            .arg(format!("-dir={}", data.display()))
            .args(["-ip=127.0.0.1", "-ip.bind=127.0.0.1"])
            .args([
                "-admin.ui=false",
                "-webdav=false",
                "-master.telemetry=false",
            ])
            .arg("-volume.preStopSeconds=0")
            .arg(format!("-bucket={bucket}"));
        for (name, port) in COMPONENTS.iter().zip(&http_ports) {
            let grpc = port + GRPC_OFFSET;
            cmd.arg(format!("-{name}.port={port}"))
                .arg(format!("-{name}.port.grpc={grpc}"));
        }
        // Disabled or unused, but never left on their fixed defaults.
        cmd.arg(format!("-webdav.port={}", free_port()))
            .arg(format!("-debug.port={}", free_port()))
            .arg(format!("-s3.debug.port={}", free_port()))
            .args(["-s3.port.iceberg=0", "-s3.port.lance=0"])
            .arg(format!(
                "-filer.localSocket={}",
                dir.path().join("filer.sock").display()
            ))
            .arg(format!(
                "-s3.localSocket={}",
                dir.path().join("s3.sock").display()
            ));

        let log_path = dir.path().join("weed.log");
        let log = File::create(&log_path).context("creating weed.log")?;
        cmd.env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("TMPDIR", dir.path())
            .env_remove("AWS_CA_BUNDLE")
            .env_remove("S3_BUCKET")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("cloning the log handle")?)
            .stderr(log);
        let server =
            ChildGuard::spawn(&mut cmd, "TERM", true, STOP_GRACE).context("spawning weed mini")?;

        let s3_port = http_ports[COMPONENTS
            .iter()
            .position(|&c| c == "s3")
            .expect("s3 is a component")];
        let weed = Self {
            server,
            s3_port,
            http_ports,
            bucket: bucket.to_owned(),
            dir,
        };
        weed.wait_ready(&log_path)?;
        Ok(weed)
    }

    /// Polls a signed bucket listing until it answers 200.
    fn wait_ready(&self, log: &Path) -> anyhow::Result<()> {
        let started = Instant::now();
        let url = format!("{}/{}", self.endpoint(), self.bucket);
        loop {
            if self.server.has_exited() {
                bail!(
                    "weed mini exited during startup; log:\n{}",
                    log_tail(log, 30)
                );
            }
            let out = self
                .signed_curl()
                .args(["-o", "/dev/null", "-w", "%{http_code}"])
                .arg(&url)
                .output();
            // curl prints 000 when nothing answers, 404 until the bucket exists.
            let last = match out {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    bail!("curl is not installed: apt-get install curl")
                }
                Err(e) => return Err(e).context("running curl"),
                Ok(out) if out.stdout == b"200" => return Ok(()),
                Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
            };
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "bucket {url} not ready within {START_TIMEOUT:?} (last HTTP status: {last}); log:\n{}",
                    log_tail(log, 30)
                );
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// A quiet `curl` that signs requests with this server's credentials.
    fn signed_curl(&self) -> Command {
        let mut curl = Command::new("curl");
        curl.args(["-s", "--max-time", "5"])
            .arg("--aws-sigv4")
            .arg(format!("aws:amz:{REGION}:s3"))
            .arg("--user")
            .arg(format!("{ACCESS_KEY}:{SECRET_KEY}"))
            .stdin(Stdio::null());
        curl
    }

    /// The S3 endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// The bucket created at start.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The access key ID accepted by the server.
    pub fn access_key(&self) -> &str {
        ACCESS_KEY
    }

    /// The secret access key accepted by the server.
    pub fn secret_key(&self) -> &str {
        SECRET_KEY
    }

    /// The region to sign with (any is accepted; this is `us-east-1`).
    pub fn region(&self) -> &str {
        REGION
    }

    /// Environment for an S3 client: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` and `AWS_ALLOW_HTTP=true`.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_owned()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_owned()),
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ALLOW_HTTP", "true".to_owned()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// The `weed` process ID, which is also its process group ID.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// The temporary directory holding data, logs and `weed.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Seaweed {
    fn drop(&mut self) {
        self.server.stop();
        // weed puts its gRPC sockets in /tmp whatever TMPDIR says; a clean
        // shutdown removes them, SIGKILL leaves them behind.
        for (name, port) in COMPONENTS.iter().zip(&self.http_ports) {
            let grpc = port + GRPC_OFFSET;
            let _ = fs::remove_file(format!("/tmp/seaweedfs-{name}-grpc-{grpc}.sock"));
        }
    }
}

/// Whether `name` is a bucket name SeaweedFS accepts.
fn valid_bucket(name: &str) -> bool {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (3..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && edge_ok(name.chars().next())
        && edge_ok(name.chars().last())
}

#[cfg(test)]
mod tests {
    use super::valid_bucket;

    #[test]
    fn bucket_names() {
        assert!(valid_bucket("test-bucket"));
        assert!(valid_bucket("a.b1"));
        for bad in [
            "b",
            "Upper",
            "-dash",
            "dash-",
            "under_score",
            &"x".repeat(64),
        ] {
            assert!(!valid_bucket(bad), "{bad}");
        }
    }
}
