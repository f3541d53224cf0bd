//! Password attempts, counted per client address: past a limit in a
//! window, that address may not try a password again (429) until the
//! window ends, so a password cannot be guessed at the speed the server can
//! hash. An attempt counts when it begins (so a thousand at once count as a
//! thousand) and is given back when it succeeds. Tokens and session cookies
//! are 256 random bits: guessing them is hopeless, so they are not
//! counted, and a throttled address can still use them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed (or unfinished) attempts one address may have within [`WINDOW`].
pub const MAX_FAILURES: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at most. When that many are in their window, new
/// addresses are refused until windows end, rather than the map growing.
const MAX_TRACKED: usize = 100_000;

#[derive(Debug, Default)]
pub struct Throttle {
    attempts: Mutex<HashMap<IpAddr, Window>>,
}

#[derive(Debug, Clone, Copy)]
struct Window {
    started: Instant,
    attempts: u32,
}

/// An attempt under way; [`Throttle::succeeded`] gives it back.
#[derive(Debug)]
#[must_use]
pub struct Attempt {
    key: IpAddr,
}

impl Throttle {
    /// Count an attempt from `address`, or `Err(wait)` while it has used
    /// up its attempts.
    pub fn begin(&self, address: IpAddr) -> Result<Attempt, Duration> {
        let key = key(address);
        let now = Instant::now();
        let mut attempts = self.lock();
        if !attempts.contains_key(&key) && attempts.len() >= MAX_TRACKED {
            attempts.retain(|_, window| now.duration_since(window.started) < WINDOW);
            if attempts.len() >= MAX_TRACKED {
                return Err(Duration::from_secs(1));
            }
        }
        let window = attempts.entry(key).or_insert(Window {
            started: now,
            attempts: 0,
        });
        if now.duration_since(window.started) >= WINDOW {
            *window = Window {
                started: now,
                attempts: 0,
            };
        }
        if window.attempts >= MAX_FAILURES {
            return Err((window.started + WINDOW).saturating_duration_since(now));
        }
        window.attempts += 1;
        Ok(Attempt { key })
    }

    /// The attempt worked: it does not count against its address.
    pub fn succeeded(&self, attempt: Attempt) {
        if let Some(window) = self.lock().get_mut(&attempt.key) {
            window.attempts = window.attempts.saturating_sub(1);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Window>> {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What attempts are counted by: the address, or for IPv6 its /64 (one
/// host is commonly given a whole /64).
fn key(address: IpAddr) -> IpAddr {
    match address.to_canonical() {
        v4 @ IpAddr::V4(_) => v4,
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::from(octets)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_after_its_failures() {
        let throttle = Throttle::default();
        let (one, two) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        // Successes are given back.
        for _ in 0..3 * MAX_FAILURES {
            let attempt = throttle.begin(one).unwrap_or_else(|_| panic!("refused"));
            throttle.succeeded(attempt);
        }
        // Attempts count as they begin: all at once, or one after another.
        let pending: Vec<_> = (0..MAX_FAILURES).map(|_| throttle.begin(one)).collect();
        assert!(pending.iter().all(Result::is_ok));
        let wait = throttle.begin(one).err();
        assert!(wait.is_some_and(|wait| wait <= WINDOW));
        assert!(throttle.begin(two).is_ok(), "others are not affected");
    }

    #[test]
    fn ipv6_addresses_count_by_their_64() {
        let throttle = Throttle::default();
        for n in 0..MAX_FAILURES {
            let address =
                IpAddr::from([0x2001, 0xdb8, 0, 1, 0, 0, 0, u16::try_from(n).unwrap_or(0)]);
            let _ = throttle.begin(address);
        }
        assert!(
            throttle
                .begin(IpAddr::from([0x2001, 0xdb8, 0, 1, 9, 9, 9, 9]))
                .is_err()
        );
        assert!(
            throttle
                .begin(IpAddr::from([0x2001, 0xdb8, 0, 2, 0, 0, 0, 1]))
                .is_ok()
        );
    }
}
