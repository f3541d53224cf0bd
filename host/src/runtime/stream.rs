//! Answers streamed to a client a chunk at a time: a small bounded channel
//! between whoever produces the bytes (an instance's `send-body`, a WebDAV
//! multistatus written as the listing is read) and the socket, so a slow
//! client slows the producer, never the host's memory; a client slower than
//! the [`Pace`] is cut, and the body then ends in an error rather than
//! looking complete.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use tokio::sync::mpsc;

/// How slow a client may be with a body, either way: silent for at most
/// `stall`, and, past [`Pace::GRACE`], never slower on average than
/// `min_rate` bytes per second (0: no minimum). A slow client holds an
/// instance, so this bounds what a trickle can cost.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub stall: Duration,
    pub min_rate: u64,
}

impl Pace {
    /// Time any body gets before the minimum rate applies.
    pub const GRACE: Duration = Duration::from_secs(10);

    /// By when the next bytes must have moved, for a transfer that started
    /// at `started` and has moved `moved` bytes; and why.
    pub fn deadline(&self, started: Instant, moved: u64) -> (Instant, Slowness) {
        let stall = Instant::now() + self.stall;
        if self.min_rate == 0 {
            return (stall, Slowness::Silent(self.stall));
        }
        let earned = Duration::try_from_secs_f64(moved as f64 / self.min_rate as f64)
            .unwrap_or(Duration::MAX);
        let rate = started
            .checked_add(Self::GRACE.saturating_add(earned))
            .unwrap_or(stall);
        if rate < stall {
            (rate, Slowness::BelowRate(self.min_rate))
        } else {
            (stall, Slowness::Silent(self.stall))
        }
    }
}

/// Why a body's deadline passed.
#[derive(Debug, Clone, Copy)]
pub enum Slowness {
    Silent(Duration),
    BelowRate(u64),
}

impl Slowness {
    pub fn describe(self, direction: &str) -> String {
        match self {
            Self::Silent(stall) => format!("the client {direction} nothing for {stall:?}"),
            Self::BelowRate(rate) => {
                format!("the client {direction} the body slower than {rate} bytes per second")
            }
        }
    }
}

/// Chunks in flight between the producer and the socket.
const CHANNEL_CHUNKS: usize = 2;

/// Why a chunk did not reach the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Cut {
    /// The client read slower than the pace allows; the body was cut.
    #[error("{0}")]
    TooSlow(String),
    /// The client went away.
    #[error("the client went away")]
    Gone,
}

/// The producing end of a streamed answer.
#[derive(Debug)]
pub struct PacedSender {
    sender: mpsc::Sender<Result<Bytes, std::io::Error>>,
    pace: Pace,
    /// When the first chunk was offered: the pace counts from there, not
    /// from when the answer was set up (a download's verification may
    /// take long before its first byte).
    started: Option<Instant>,
    sent: u64,
    /// Set when the body was cut, so the client's end fails rather than
    /// ending cleanly.
    cut: Arc<AtomicBool>,
}

/// A streamed answer: where the producer writes, and the body to answer with.
pub fn paced_body(pace: Pace) -> (PacedSender, Body) {
    let (sender, received) = mpsc::channel(CHANNEL_CHUNKS);
    let cut = Arc::new(AtomicBool::new(false));
    let ended = cut.clone();
    let body = Body::from_stream(futures_util::stream::unfold(
        Some((received, ended)),
        |state| async move {
            let (mut received, ended) = state?;
            match received.recv().await {
                Some(chunk) => Some((chunk, Some((received, ended)))),
                None if ended.load(Ordering::Acquire) => {
                    Some((Err(std::io::Error::other("the answer was cut short")), None))
                }
                None => None,
            }
        },
    ));
    let sender = PacedSender {
        sender,
        pace,
        started: None,
        sent: 0,
        cut,
    };
    (sender, body)
}

impl PacedSender {
    /// Send `chunk` to the client, waiting for it to read no longer than
    /// the pace allows. After an error the body is over: drop the sender.
    pub async fn send(&mut self, chunk: Bytes) -> Result<(), Cut> {
        let len = chunk.len() as u64;
        let started = *self.started.get_or_insert_with(Instant::now);
        let (deadline, slowness) = self.pace.deadline(started, self.sent);
        match tokio::time::timeout_at(deadline.into(), self.sender.send(Ok(chunk))).await {
            Err(_) => {
                self.cut.store(true, Ordering::Release);
                Err(Cut::TooSlow(slowness.describe("read")))
            }
            Ok(Err(_)) => Err(Cut::Gone),
            Ok(Ok(())) => {
                self.sent += len;
                Ok(())
            }
        }
    }

    /// End the body in an error: what was sent so far is not the answer.
    pub fn abort(self) {
        self.cut.store(true, Ordering::Release);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    #[tokio::test]
    async fn a_reader_that_stalls_is_cut_and_its_body_fails() {
        let pace = Pace {
            stall: Duration::from_millis(50),
            min_rate: 0,
        };
        let (mut sender, body) = paced_body(pace);
        // Nobody reads: two chunks fit the channel, the third waits and is cut.
        sender.send(Bytes::from_static(b"one")).await.unwrap();
        sender.send(Bytes::from_static(b"two")).await.unwrap();
        let third = sender.send(Bytes::from_static(b"three")).await;
        assert!(matches!(third, Err(Cut::TooSlow(_))), "{third:?}");
        drop(sender);
        assert!(body.collect().await.is_err());
    }

    #[tokio::test]
    async fn a_finished_body_ends_cleanly_and_an_aborted_one_fails() {
        let pace = Pace {
            stall: Duration::from_secs(5),
            min_rate: 0,
        };
        let (mut sender, body) = paced_body(pace);
        let reader = tokio::spawn(async move { body.collect().await.map(|all| all.to_bytes()) });
        sender.send(Bytes::from_static(b"whole")).await.unwrap();
        drop(sender);
        assert_eq!(reader.await.unwrap().unwrap(), Bytes::from_static(b"whole"));

        let (mut sender, body) = paced_body(pace);
        let reader = tokio::spawn(async move { body.collect().await.map(|all| all.to_bytes()) });
        sender.send(Bytes::from_static(b"part")).await.unwrap();
        sender.abort();
        assert!(reader.await.unwrap().is_err());
    }

    #[test]
    fn a_body_must_keep_up_the_minimum_rate_after_the_grace() {
        let pace = Pace {
            stall: Duration::from_secs(60),
            min_rate: 1000,
        };
        let started = Instant::now();
        // Nothing moved yet: the grace, then the rate applies.
        let (deadline, why) = pace.deadline(started, 0);
        assert!(matches!(why, Slowness::BelowRate(1000)));
        assert_eq!(deadline, started + Pace::GRACE);
        // 5000 bytes earn five more seconds.
        let (deadline, _) = pace.deadline(started, 5000);
        assert_eq!(deadline, started + Pace::GRACE + Duration::from_secs(5));
        // Far ahead of the rate, the stall timeout is what binds.
        let (_, why) = pace.deadline(started, 10_000_000);
        assert!(matches!(why, Slowness::Silent(_)));
        // No minimum: only the stall timeout.
        let open = Pace {
            min_rate: 0,
            ..pace
        };
        assert!(matches!(open.deadline(started, 0).1, Slowness::Silent(_)));
    }
}
