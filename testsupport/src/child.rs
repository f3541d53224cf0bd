//! A spawned server process that is stopped by PID when dropped.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// A server process, leader of its own process group, stopped on drop.
///
/// Stopping sends `stop_signal` (to the process, or to its whole group),
/// waits up to `grace` for the process to exit, then sends `SIGKILL` to the
/// whole group (which also takes down any children left behind) and reaps
/// the process; it returns once no member of the group is left running.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
    stop_signal: &'static str,
    signal_group: bool,
    grace: Duration,
}

impl ChildGuard {
    /// Spawns `cmd` in a new process group. `stop_signal` is a name for
    /// `kill`, e.g. `"TERM"` or `"INT"`; with `signal_group` it goes to the
    /// whole group rather than to the process alone.
    pub fn spawn(
        cmd: &mut Command,
        stop_signal: &'static str,
        signal_group: bool,
        grace: Duration,
    ) -> io::Result<Self> {
        let child = cmd.process_group(0).spawn()?;
        Ok(Self {
            child: Some(child),
            stop_signal,
            signal_group,
            grace,
        })
    }

    /// The process ID, which is also its process group ID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether the process has exited (or been stopped). Does not reap it,
    /// so its PID stays reserved until [`ChildGuard::stop`].
    pub fn has_exited(&self) -> bool {
        self.child.is_none() || is_zombie_or_gone(self.pid())
    }

    /// Stops the process as described on the type; idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id();
        if !is_zombie_or_gone(pid) {
            let _ = signal(self.stop_signal, pid, self.signal_group);
            let deadline = Instant::now() + self.grace;
            while !is_zombie_or_gone(pid) && Instant::now() < deadline {
                sleep(Duration::from_millis(20));
            }
        }
        // The unreaped leader keeps the group ID reserved, so this cannot hit
        // an unrelated process; it fails harmlessly if the group is empty.
        let _ = signal("KILL", pid, true);
        let _ = child.wait();
        // `kill` returns before the signal is delivered: a member may still
        // be running for a moment. Wait (bounded) until none is left, so a
        // stopped guard means a stopped group.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !process_group_members(pid).is_empty() && Instant::now() < deadline {
            sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends `sig` to `pid`, or to the process group `pid` with `group`, via
/// `kill(1)`.
fn signal(sig: &str, pid: u32, group: bool) -> io::Result<bool> {
    let target = if group {
        format!("-{pid}")
    } else {
        pid.to_string()
    };
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg("--")
        .arg(target)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    Ok(status.success())
}

/// Whether `pid` has exited: no `/proc` entry, or a zombie awaiting reaping.
pub(crate) fn is_zombie_or_gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => true,
    }
}

/// The last `lines` lines of the file at `path`, for error messages.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            all[all.len().saturating_sub(lines)..].join("\n")
        }
        Err(e) => format!("(cannot read {}: {e})", path.display()),
    }
}

/// Live (not zombie) processes whose process group is `pgid`: what a stop
/// left behind.
pub fn process_group_members(pgid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the name: state, ppid, pgrp, ...
        let pgrp = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(2)?.parse::<u32>().ok());
        if pgrp == Some(pgid) && !is_zombie_or_gone(pid) {
            found.push(pid);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_kills_a_process_that_ignores_the_signal() {
        let mut guard = ChildGuard::spawn(
            Command::new("sh").args(["-c", "trap '' TERM; sleep 60 & wait"]),
            "TERM",
            false,
            Duration::from_millis(200),
        )
        .expect("spawn sh");
        let pid = guard.pid();
        sleep(Duration::from_millis(100));
        assert!(!guard.has_exited());
        let members = process_group_members(pid);
        assert!(members.len() >= 2, "sh and sleep: {members:?}");
        let started = Instant::now();
        guard.stop();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(guard.has_exited());
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert_eq!(process_group_members(pid), Vec::<u32>::new());
    }
}
