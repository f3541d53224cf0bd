//! A throwaway PostgreSQL cluster.

use std::fs::{self, File};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use tempfile::TempDir;

use crate::child::{ChildGuard, log_tail};
use crate::port::free_port;

/// Where Debian installs each major version's server binaries.
const PG_ROOT: &str = "/usr/lib/postgresql";
/// How long the server may take to accept queries.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a fast shutdown may take before `SIGKILL`.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// A PostgreSQL server on 127.0.0.1 with a fresh cluster in a temporary
/// directory; superuser `postgres`, no password (trust auth), fsync off.
///
/// Dropping it does a fast shutdown (`SIGINT`), then `SIGKILL` after 10 s,
/// and deletes the cluster.
#[derive(Debug)]
pub struct Postgres {
    // Declared before `dir` so the server stops before its files go.
    server: ChildGuard,
    bin: PathBuf,
    port: u16,
    dir: TempDir,
}

impl Postgres {
    /// Runs `initdb` and starts `postgres`, returning once it answers a
    /// query. As root, both run as the `postgres` system user.
    pub fn start() -> anyhow::Result<Self> {
        let bin = find_bin()?;
        let owner = server_owner()?;
        let dir = tempfile::Builder::new()
            .prefix("testsupport-pg-")
            .tempdir()
            .context("creating the PostgreSQL temp dir")?;
        let data = dir.path().join("data");
        let sockets = dir.path().join("sockets");
        fs::create_dir(&sockets).context("creating the socket dir")?;
        if let Some((uid, gid)) = owner {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{uid}:{gid}"))
                .arg(dir.path())
                .status()
                .context("running chown")?;
            ensure!(status.success(), "chown -R {uid}:{gid} failed: {status}");
        }

        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-A", "trust", "-U", "postgres", "--no-sync"])
            .args(["-E", "UTF8", "--locale=C"])
            .current_dir(dir.path());
        as_owner(&mut initdb, owner);
        let out = initdb.output().context("running initdb")?;
        ensure!(
            out.status.success(),
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        let port = free_port();
        let log_path = dir.path().join("postgres.log");
        let log = File::create(&log_path).context("creating postgres.log")?;
        let mut cmd = Command::new(bin.join("postgres"));
        cmd.arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string())
            .arg("-k")
            .arg(&sockets)
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "fsync=off"])
            .args(["-c", "max_connections=200"])
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().context("cloning the log handle")?)
            .stderr(log);
        as_owner(&mut cmd, owner);
        let server =
            ChildGuard::spawn(&mut cmd, "INT", false, STOP_GRACE).context("spawning postgres")?;

        let pg = Self {
            server,
            bin,
            port,
            dir,
        };
        pg.wait_ready(&log_path)?;
        Ok(pg)
    }

    /// Polls until a TCP connect and `SELECT 1` succeed.
    fn wait_ready(&self, log: &Path) -> anyhow::Result<()> {
        let started = Instant::now();
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port);
        loop {
            if self.server.has_exited() {
                bail!(
                    "postgres exited during startup; log:\n{}",
                    log_tail(log, 30)
                );
            }
            let tcp = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(1)).is_ok();
            if tcp && self.psql("postgres", "SELECT 1").is_ok() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                bail!(
                    "postgres did not accept queries on port {} within {START_TIMEOUT:?}; log:\n{}",
                    self.port,
                    log_tail(log, 30)
                );
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates database `name` (letters, digits and `_` only) and returns its
    /// URL.
    pub fn create_database(&self, name: &str) -> anyhow::Result<String> {
        ensure!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "database name {name:?} must be non-empty and only letters, digits and _"
        );
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""))?;
        Ok(self.url(name))
    }

    /// Runs `sql` in `database` with `psql` and returns its unaligned,
    /// tuples-only output (e.g. `"1\n"` for `SELECT 1`).
    pub fn psql(&self, database: &str, sql: &str) -> anyhow::Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres"])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-d")
            .arg(database)
            .arg("-c")
            .arg(sql)
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null())
            .output()
            .context("running psql")?;
        ensure!(
            out.status.success(),
            "psql {sql:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's PID.
    pub fn pid(&self) -> u32 {
        self.server.pid()
    }

    /// The temporary directory holding the cluster, sockets and
    /// `postgres.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The `bin` directory of the highest PostgreSQL version under [`PG_ROOT`].
fn find_bin() -> anyhow::Result<PathBuf> {
    let missing = "PostgreSQL is not installed: apt-get install postgresql";
    let versions = fs::read_dir(PG_ROOT).context(missing)?;
    versions
        .flatten()
        .filter(|e| e.path().join("bin/postgres").is_file())
        .filter_map(|e| Some((version_key(e.file_name().to_str()?)?, e.path())))
        .max()
        .map(|(_, path)| path.join("bin"))
        .context(missing)
}

/// Sort key for version directory names like `15` or `9.6`.
fn version_key(name: &str) -> Option<(u32, u32)> {
    let (major, minor) = name.split_once('.').unwrap_or((name, "0"));
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// `Some((uid, gid))` of the `postgres` system user when running as root
/// (initdb refuses root); `None` to run as ourselves.
fn server_owner() -> anyhow::Result<Option<(u32, u32)>> {
    let euid = fs::metadata("/proc/self")
        .context("reading /proc/self")?
        .uid();
    if euid != 0 {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd").context("reading /etc/passwd")?;
    let ids = passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        match fields.as_slice() {
            ["postgres", _, uid, gid, ..] => Some((uid.parse().ok()?, gid.parse().ok()?)),
            _ => None,
        }
    });
    ids.map(Some).context(
        "running as root but there is no `postgres` user to run the server as: \
         apt-get install postgresql",
    )
}

/// Makes `cmd` run as `owner`, if any.
fn as_owner(cmd: &mut Command, owner: Option<(u32, u32)>) {
    if let Some((uid, gid)) = owner {
        cmd.uid(uid).gid(gid);
    }
}

#[cfg(test)]
mod tests {
    use super::version_key;

    #[test]
    fn versions_sort_numerically() {
        assert!(version_key("15") > version_key("9.6"));
        assert!(version_key("16") > version_key("15"));
        assert_eq!(version_key("main"), None);
    }
}
