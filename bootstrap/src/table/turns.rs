//! The turns of periodic verifies (`serve --verify-every`, `crate::table::periodic`): one
//! table at a time across the process, in the order the tables asked (tokio's mutex is
//! fair, FIFO), each turn starting no sooner than the spacing after the previous one ended.
//! That is the rate limit: at most one verify runs at a time, and verifies take at most
//! walk / (walk + spacing) of one read permit. Shared by every job through
//! `RunConfig::verify`.
use std::time::Duration;
use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

/// The process-wide order of periodic verifies: one at a time, FIFO, spaced by `every`.
pub struct Turns {
    every: Duration,
    /// The earliest start of the next turn.
    next: Mutex<Instant>,
}

impl std::fmt::Debug for Turns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Turns(every {:?})", self.every)
    }
}

/// A turn: held while one table verifies; the next starts `every` after it is dropped.
pub struct Turn<'a> {
    every: Duration,
    next: MutexGuard<'a, Instant>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.next = Instant::now() + self.every;
    }
}

impl Turns {
    /// Turns spaced by `every` (at least 1 ms).
    pub fn new(every: Duration) -> Turns {
        Turns {
            every: every.max(Duration::from_millis(1)),
            next: Mutex::new(Instant::now()),
        }
    }

    /// The spacing.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// Waits for the caller's turn (FIFO), then, unless `now`, until the spacing after
    /// the previous turn has passed.
    pub async fn turn(&self, now: bool) -> Turn<'_> {
        let next = self.next.lock().await;
        if !now {
            tokio::time::sleep_until(*next).await;
        }
        Turn {
            every: self.every,
            next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    /// Polls `f` once: whether it is ready now.
    fn ready_now<F: Future>(f: F) -> bool {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(f.as_mut().poll(&mut cx), Poll::Ready(_))
    }

    #[tokio::test]
    async fn turns_are_one_at_a_time_and_spaced_after_the_previous_end() {
        let every = Duration::from_millis(150);
        let t = Turns::new(every);
        let start = Instant::now();
        let first = t.turn(false).await;
        assert!(start.elapsed() < every, "the first turn starts at once");
        // While a turn is held nobody else gets one, not even `now`.
        assert!(!ready_now(t.turn(true)), "a second turn while one is held");
        let ended = Instant::now();
        drop(first);
        let second = t.turn(false).await;
        assert!(ended.elapsed() >= every, "spaced after the previous end");
        drop(second);
        let at = Instant::now();
        let third = t.turn(true).await;
        assert!(
            at.elapsed() < every,
            "`now` skips the spacing, not the queue"
        );
        drop(third);
        assert_eq!(t.every(), every);
        assert_eq!(Turns::new(Duration::ZERO).every(), Duration::from_millis(1));
    }
}
