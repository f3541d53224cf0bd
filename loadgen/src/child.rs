//! A gateway child process (`loadgen serve …` on a free loopback port),
//! killed on drop, and what the kernel says of its memory.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use gateway::procstat::kib_field;

/// A gateway child process, killed on drop.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    pub url: String,
}

/// What to run as the gateway.
#[derive(Debug, Clone, Copy)]
pub enum Program<'a> {
    /// `loadgen serve`: the gateway this loadgen was built with.
    LoadgenServe(&'a Path),
    /// A `gateway` binary (another build, e.g. an older one to compare).
    Gateway(&'a Path),
}

impl Gateway {
    /// Start `exe serve --listen 127.0.0.1:PORT --data-dir DATA_DIR FLAGS…`
    /// and wait until it answers `/healthz`.
    pub async fn start(exe: &Path, data_dir: &Path, flags: &[&str]) -> anyhow::Result<Self> {
        Self::launch(Program::LoadgenServe(exe), data_dir, flags).await
    }

    /// Start `program` on a free loopback port and wait until it answers
    /// `/healthz`.
    pub async fn launch(
        program: Program<'_>,
        data_dir: &Path,
        flags: &[&str],
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let listen = format!("127.0.0.1:{port}");
        let (exe, serve) = match program {
            Program::LoadgenServe(exe) => (exe, &["serve"][..]),
            Program::Gateway(exe) => (exe, &[][..]),
        };
        let child = Command::new(exe)
            .args(serve)
            .args(["--listen", &listen])
            .arg("--data-dir")
            .arg(data_dir)
            .args(flags)
            .env("RUST_LOG", "warn")
            // Every arm of an experiment runs on the same data dir, one
            // after another: each must learn from its own traffic, as one
            // gateway started fresh does, not from the footprints the
            // arms before it left in the database.
            .env("WASM_STORAGE_SHARE_FOOTPRINTS", "false")
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {} serve", exe.display()))?;
        let mut gateway = Self {
            child,
            url: format!("http://{listen}"),
        };
        let give_up = Instant::now() + Duration::from_secs(60);
        loop {
            if gateway.healthy().await {
                return Ok(gateway);
            }
            if let Some(status) = gateway.child.try_wait()? {
                anyhow::bail!("the gateway exited at start ({status}); its error is above");
            }
            anyhow::ensure!(Instant::now() < give_up, "the gateway did not come up");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// True when `/healthz` answers 200.
    pub async fn healthy(&self) -> bool {
        reqwest::get(format!("{}/healthz", self.url))
            .await
            .is_ok_and(|response| response.status().is_success())
    }

    /// The child's memory now, from `/proc/PID/status`.
    pub fn memory(&self) -> anyhow::Result<ProcMemory> {
        ProcMemory::of(self.child.id())
    }

    pub fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Resident bytes of a process now (VmRSS) and at its peak (VmHWM).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ProcMemory {
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
}

impl ProcMemory {
    pub fn of(pid: u32) -> anyhow::Result<Self> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .with_context(|| format!("reading /proc/{pid}/status"))?;
        Ok(Self::parse(&status))
    }

    fn parse(status: &str) -> Self {
        Self {
            rss_bytes: kib_field(status, "VmRSS"),
            peak_rss_bytes: kib_field(status, "VmHWM"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProcMemory;

    #[test]
    fn parses_proc_status() {
        let status = "Name:\tgateway\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(
            ProcMemory::parse(status),
            ProcMemory {
                rss_bytes: 100 << 20,
                peak_rss_bytes: 200 << 20
            }
        );
        assert!(ProcMemory::of(std::process::id()).is_ok_and(|m| m.rss_bytes > 0));
    }
}
