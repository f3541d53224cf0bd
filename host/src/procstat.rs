//! Process-wide memory as the kernel sees it, read from `/proc/self`, and
//! how much memory this process may use at all (its cgroup's limit, else the
//! machine's).

use serde::Serialize;

/// Resident and private-dirty bytes of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProcessMemory {
    pub rss_bytes: u64,
    /// Pages this process wrote and shares with nobody: what replacing
    /// bloated instances should give back.
    pub private_dirty_bytes: u64,
}

impl ProcessMemory {
    /// Read `/proc/self/smaps_rollup`; zeros where it is unavailable.
    pub fn read() -> Self {
        std::fs::read_to_string("/proc/self/smaps_rollup")
            .map(|rollup| Self::parse(&rollup))
            .unwrap_or_default()
    }

    fn parse(rollup: &str) -> Self {
        Self {
            rss_bytes: kib_field(rollup, "Rss"),
            private_dirty_bytes: kib_field(rollup, "Private_Dirty"),
        }
    }
}

/// The `name:   N kB` field of a `/proc` file (`status`, `smaps_rollup`)
/// in bytes; 0 when it is missing.
pub fn kib_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Bytes of memory this process may use: the tightest cgroup limit on the
/// way up from its own cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`),
/// else MemTotal; 1 GiB if neither can be read.
pub fn memory_limit() -> u64 {
    let machine = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|meminfo| {
            meminfo
                .lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kib| kib.trim().parse::<u64>().ok())
        })
        .map_or(1 << 30, |kib| kib * 1024);
    cgroup_limit().map_or(machine, |limit| limit.min(machine))
}

fn cgroup_limit() -> Option<u64> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read = |file: &str| {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|text| text.trim().parse::<u64>().ok())
    };
    let mut limits = Vec::new();
    for line in own.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let (root, file) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
        } else {
            continue;
        };
        // Every ancestor's limit applies too ("max" parses as none).
        let mut dir = std::path::PathBuf::from(format!("{root}{path}"));
        loop {
            limits.extend(read(&dir.join(file).to_string_lossy()));
            if dir.as_os_str().len() <= root.len() || !dir.pop() {
                break;
            }
        }
    }
    limits.into_iter().min()
}

#[cfg(test)]
mod tests {
    use super::ProcessMemory;

    #[test]
    fn the_memory_limit_is_at_most_the_machine() {
        let limit = super::memory_limit();
        assert!(limit > 0);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        assert!(meminfo.is_empty() || limit <= 1 << 50);
    }

    #[test]
    fn parses_smaps_rollup() {
        let rollup = "55d0c0000000-7ffc00000000 ---p 00000000 00:00 0 [rollup]\n\
                      Rss:               12345 kB\nPss:  1 kB\nPrivate_Clean: 7 kB\nPrivate_Dirty:      2048 kB\n";
        let memory = ProcessMemory::parse(rollup);
        assert_eq!(memory.rss_bytes, 12345 * 1024);
        assert_eq!(memory.private_dirty_bytes, 2048 * 1024);
    }

    #[test]
    fn reads_this_process() {
        let memory = ProcessMemory::read();
        assert!(memory.rss_bytes > 0);
        assert!(memory.private_dirty_bytes > 0 && memory.private_dirty_bytes <= memory.rss_bytes);
    }
}
