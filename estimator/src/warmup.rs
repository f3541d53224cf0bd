//! Which of an instance's samples are warm-up, and the median of the rest.
//!
//! Right after start an instance's memory is still growing to its working
//! size; samples from then would drag its median down (the paper drops the
//! first ~20 s). Warm-up is defined by the samples themselves, not by a
//! clock, so it means the same at any sampling interval.

use std::fmt;
use std::str::FromStr;

/// How to tell an instance's warm-up samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmup {
    /// Keep every sample.
    None,
    /// Drop the first N samples of every instance.
    First(usize),
    /// Warm-up ends at the first run of K consecutive equal samples (memory
    /// that stopped growing); everything from that run on is kept. An
    /// instance that never holds still for K samples has no steady samples.
    Stable(usize),
}

impl Default for Warmup {
    /// `stable:2`: memory unchanged across one sampling interval.
    fn default() -> Self {
        Self::Stable(2)
    }
}

impl Warmup {
    /// The samples of one instance (in time order) that follow its warm-up.
    pub fn steady<'a>(&self, bytes: &'a [u64]) -> &'a [u64] {
        match *self {
            Self::None => bytes,
            Self::First(n) => &bytes[n.min(bytes.len())..],
            Self::Stable(k) => {
                let k = k.max(1);
                let start = (0..bytes.len()).find(|&i| {
                    i + k <= bytes.len() && bytes[i..i + k].iter().all(|&b| b == bytes[i])
                });
                start.map_or(&[], |i| &bytes[i..])
            }
        }
    }
}

impl FromStr for Warmup {
    type Err = String;

    /// `none`, `first:N` or `stable:K`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || format!("{text:?}: expected `none`, `first:N` or `stable:K`");
        match text.split_once(':') {
            None if text == "none" => Ok(Self::None),
            Some(("first", n)) => n.parse().map(Self::First).map_err(|_| usage()),
            Some(("stable", k)) => match k.parse() {
                Ok(0) | Err(_) => Err(usage()),
                Ok(k) => Ok(Self::Stable(k)),
            },
            _ => Err(usage()),
        }
    }
}

impl fmt::Display for Warmup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => f.write_str("none"),
            Self::First(n) => write!(f, "first:{n}"),
            Self::Stable(k) => write!(f, "stable:{k}"),
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count),
/// or `None` for no values.
pub fn median(values: &[u64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let middle = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[middle] as f64
    } else {
        (sorted[middle - 1] as f64 + sorted[middle] as f64) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_warmup_waits_for_growth_to_stop() {
        let growing_then_flat = [100, 200, 300, 300, 300, 500, 500];
        assert_eq!(
            Warmup::Stable(2).steady(&growing_then_flat),
            &[300, 300, 300, 500, 500]
        );
        assert_eq!(
            Warmup::Stable(3).steady(&growing_then_flat),
            &[300, 300, 300, 500, 500]
        );
        assert_eq!(Warmup::Stable(4).steady(&growing_then_flat), &[] as &[u64]);
        assert_eq!(
            Warmup::Stable(1).steady(&growing_then_flat),
            &growing_then_flat
        );
        assert_eq!(Warmup::Stable(2).steady(&[1, 2, 3]), &[] as &[u64]);
    }

    #[test]
    fn other_warmups() {
        assert_eq!(Warmup::None.steady(&[1, 2]), &[1, 2]);
        assert_eq!(Warmup::First(1).steady(&[1, 2]), &[2]);
        assert_eq!(Warmup::First(5).steady(&[1, 2]), &[] as &[u64]);
    }

    #[test]
    fn parses_and_prints() {
        for text in ["none", "first:3", "stable:2"] {
            assert_eq!(
                text.parse::<Warmup>().map(|w| w.to_string()),
                Ok(text.to_owned())
            );
        }
        assert!("stable:0".parse::<Warmup>().is_err());
        assert!("sometimes".parse::<Warmup>().is_err());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5]), Some(5.0));
        assert_eq!(median(&[9, 1, 5]), Some(5.0));
        assert_eq!(median(&[4, 1, 3, 2]), Some(2.5));
    }
}
