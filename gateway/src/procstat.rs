//! Process-wide memory as the kernel sees it, read from `/proc/self`.

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
        let field = |name: &str| {
            rollup
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|rest| rest.trim().strip_suffix("kB"))
                .and_then(|kib| kib.trim().parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        Self {
            rss_bytes: field("Rss"),
            private_dirty_bytes: field("Private_Dirty"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProcessMemory;

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
