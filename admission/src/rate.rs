//! Source read rate limits (rows and bytes per second) with governor.
//!
//! The limiter reads tokio's clock, so it follows paused time in tests and
//! sleeps with tokio timers; every wait ends on the cancel token.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Rates for reading the source; `None` is unlimited. The burst is one
/// second's worth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimits {
    pub rows_per_sec: Option<NonZeroU32>,
    pub bytes_per_sec: Option<NonZeroU32>,
}

/// The wait was cancelled; what was already granted stays consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("rate-limit wait cancelled")]
pub struct ThrottleCancelled;

/// A governor clock that reads tokio's (pausable) clock.
#[derive(Debug, Clone, Copy)]
struct TokioClock {
    origin: Instant,
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

#[derive(Debug)]
struct Bucket {
    limiter: Limiter,
    burst: NonZeroU32,
}

impl Bucket {
    fn new(per_sec: NonZeroU32, clock: TokioClock) -> Self {
        let quota = Quota::per_second(per_sec);
        Self {
            limiter: RateLimiter::direct_with_clock(quota, clock),
            burst: quota.burst_size(),
        }
    }

    /// Takes `n` cells, in chunks no larger than the burst (a larger request
    /// could never conform at once).
    /// Returns how many times it had to sleep.
    async fn take(
        &self,
        clock: &TokioClock,
        n: u32,
        cancel: &CancellationToken,
    ) -> Result<u64, ThrottleCancelled> {
        let mut left = n;
        let mut waits = 0;
        while let Some(chunk) = NonZeroU32::new(left.min(self.burst.get())) {
            waits += self.take_chunk(clock, chunk, cancel).await?;
            left -= chunk.get();
        }
        Ok(waits)
    }

    async fn take_chunk(
        &self,
        clock: &TokioClock,
        chunk: NonZeroU32,
        cancel: &CancellationToken,
    ) -> Result<u64, ThrottleCancelled> {
        let mut waits = 0;
        loop {
            let not_until = match self.limiter.check_n(chunk) {
                Ok(Ok(())) => return Ok(waits),
                Ok(Err(not_until)) => not_until,
                // chunk <= burst, so this cannot happen; never block on it.
                Err(_insufficient) => return Ok(waits),
            };
            waits += 1;
            let wait = not_until.wait_time_from(clock.now());
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ThrottleCancelled),
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// Paces source reads to [`RateLimits`]; share one per source (or per process).
#[derive(Debug)]
pub struct Throttle {
    clock: TokioClock,
    rows: Option<Bucket>,
    bytes: Option<Bucket>,
    stats: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    calls: AtomicU64,
    waits: AtomicU64,
    rows: AtomicU64,
    bytes: AtomicU64,
}

/// What a [`Throttle`] granted so far (for status, metrics and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThrottleStats {
    /// Calls to [`Throttle::throttle`] that were granted.
    pub calls: u64,
    /// Times a call had to sleep because a rate was exceeded.
    pub waits: u64,
    pub rows: u64,
    pub bytes: u64,
}

impl Throttle {
    pub fn new(limits: RateLimits) -> Self {
        let clock = TokioClock {
            origin: Instant::now(),
        };
        Self {
            clock,
            rows: limits.rows_per_sec.map(|r| Bucket::new(r, clock)),
            bytes: limits.bytes_per_sec.map(|r| Bucket::new(r, clock)),
            stats: Counters::default(),
        }
    }

    /// Totals granted so far.
    pub fn stats(&self) -> ThrottleStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ThrottleStats {
            calls: get(&self.stats.calls),
            waits: get(&self.stats.waits),
            rows: get(&self.stats.rows),
            bytes: get(&self.stats.bytes),
        }
    }

    /// Waits until `rows` rows and `bytes` bytes may be read. Returns at once
    /// when unlimited; a cancelled token ends the wait (and refuses to start).
    pub async fn throttle(
        &self,
        rows: u32,
        bytes: u32,
        cancel: &CancellationToken,
    ) -> Result<(), ThrottleCancelled> {
        if cancel.is_cancelled() {
            return Err(ThrottleCancelled);
        }
        let mut waits = 0;
        if let Some(bucket) = &self.rows {
            waits += bucket.take(&self.clock, rows, cancel).await?;
        }
        if let Some(bucket) = &self.bytes {
            waits += bucket.take(&self.clock, bytes, cancel).await?;
        }
        let s = &self.stats;
        s.calls.fetch_add(1, Ordering::Relaxed);
        s.waits.fetch_add(waits, Ordering::Relaxed);
        s.rows.fetch_add(u64::from(rows), Ordering::Relaxed);
        s.bytes.fetch_add(u64::from(bytes), Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn per_sec(n: u32) -> Option<NonZeroU32> {
        NonZeroU32::new(n)
    }

    #[tokio::test(start_paused = true)]
    async fn spreads_1000_rows_at_100_per_second_over_about_10s() {
        let throttle = Throttle::new(RateLimits {
            rows_per_sec: per_sec(100),
            bytes_per_sec: None,
        });
        let cancel = CancellationToken::new();
        let start = Instant::now();
        for _ in 0..100 {
            throttle
                .throttle(10, 0, &cancel)
                .await
                .expect("not cancelled");
        }
        let took = start.elapsed();
        let stats = throttle.stats();
        assert_eq!((stats.calls, stats.rows), (100, 1000));
        // 10 calls fit the burst; every later one had to wait.
        assert!(stats.waits >= 89 && stats.waits <= 90, "{stats:?}");
        // The first second's worth is the burst; the other 900 rows take 9 s.
        assert!(took >= Duration::from_secs(9), "{took:?}");
        assert!(took <= Duration::from_secs(10), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn splits_a_request_bigger_than_the_burst() {
        let throttle = Throttle::new(RateLimits {
            rows_per_sec: None,
            bytes_per_sec: per_sec(1000),
        });
        let cancel = CancellationToken::new();
        let start = Instant::now();
        throttle
            .throttle(0, 5000, &cancel)
            .await
            .expect("not cancelled");
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(4), "{took:?}");
        assert!(took <= Duration::from_secs(5), "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn unlimited_never_waits() {
        let throttle = Throttle::new(RateLimits::default());
        let start = Instant::now();
        let cancel = CancellationToken::new();
        throttle
            .throttle(u32::MAX, u32::MAX, &cancel)
            .await
            .expect("ok");
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(throttle.stats().waits, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_ends_a_wait() {
        let throttle = Throttle::new(RateLimits {
            rows_per_sec: per_sec(10),
            bytes_per_sec: None,
        });
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            canceller.cancel();
        });
        let start = Instant::now();
        let outcome = throttle.throttle(1000, 0, &cancel).await;
        assert_eq!(outcome, Err(ThrottleCancelled));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
    }
}
