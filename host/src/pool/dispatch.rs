//! Which idle instance a request gets: a pure policy over the idle list,
//! testable without a runtime.

use serde::Serialize;

/// Which idle instance a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Dispatch {
    /// The most recently used: traffic stays on few instances, so few grow.
    Mru,
    /// The least recently used: traffic spreads evenly over the pool.
    Lru,
    /// By the request's size: the smallest idle instance whose memory
    /// already holds it, else the largest (which grows least). Large
    /// requests keep to few instances; small ones stay on small instances.
    MemoryAware,
}

impl Dispatch {
    /// The position in `idle` (least recently used first, each given by its
    /// linear memory in bytes) of the instance for a request that needs
    /// `need` bytes of linear memory. `None` only when `idle` is empty.
    pub(crate) fn choose(self, idle: &[u64], need: u64) -> Option<usize> {
        if idle.is_empty() {
            return None;
        }
        match self {
            Self::Mru => Some(idle.len() - 1),
            Self::Lru => Some(0),
            Self::MemoryAware => {
                let fitting = (0..idle.len())
                    .filter(|&at| idle[at] >= need)
                    .min_by_key(|&at| idle[at]);
                fitting.or_else(|| (0..idle.len()).max_by_key(|&at| idle[at]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mru_and_lru_take_the_ends() {
        let idle = [5, 1, 9];
        assert_eq!(Dispatch::Mru.choose(&idle, 0), Some(2));
        assert_eq!(Dispatch::Lru.choose(&idle, 0), Some(0));
        assert_eq!(Dispatch::Mru.choose(&[], 0), None);
    }

    #[test]
    fn memory_aware_takes_the_smallest_that_fits_else_the_largest() {
        let idle = [5, 1, 9, 7];
        assert_eq!(Dispatch::MemoryAware.choose(&idle, 6), Some(3));
        assert_eq!(Dispatch::MemoryAware.choose(&idle, 1), Some(1));
        assert_eq!(Dispatch::MemoryAware.choose(&idle, 100), Some(2));
    }
}
