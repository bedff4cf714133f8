//! Bounded retries (STYLE §6): a permanent-error check, an attempt cap, a
//! deadline and a cancel token. Backoff is exponential, capped and
//! deterministic (no jitter), so paused-time tests see exact instants.
//!
//! The helper never drops an attempt in flight: a dropped future does not stop
//! SQL already sent (DESIGN §8), so each attempt bounds its own I/O. The
//! deadline and the cancel token are checked before every attempt and during
//! every backoff, and no backoff is slept that would end past the deadline.

use std::future::Future;
use std::num::NonZeroU32;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A count of automatic recovery attempts that callers persist (`used` is
/// loaded from storage). DESIGN §8: during the bootstrap at most 3 per
/// execution, never reset per window; while STREAMING at most 3 in a row,
/// [`RetryBudget::reset`] by each confirmed commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBudget {
    max: u32,
    used: u32,
}

/// The budget allows no further attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("retry budget exhausted: {used} of {max} automatic attempts used")]
pub struct BudgetExhausted {
    pub max: u32,
    pub used: u32,
}

impl RetryBudget {
    pub fn new(max: u32, used: u32) -> Self {
        Self { max, used }
    }

    /// Consumes one attempt and returns its number (1-based). Persist
    /// [`RetryBudget::used`] before acting on it, so a crash cannot refund it.
    pub fn try_consume(&mut self) -> Result<u32, BudgetExhausted> {
        if self.used >= self.max {
            return Err(BudgetExhausted {
                max: self.max,
                used: self.used,
            });
        }
        self.used += 1;
        Ok(self.used)
    }

    /// Streaming only: a confirmed commit restores the whole budget.
    pub fn reset(&mut self) {
        self.used = 0;
    }

    pub fn used(&self) -> u32 {
        self.used
    }

    pub fn max(&self) -> u32 {
        self.max
    }

    pub fn remaining(&self) -> u32 {
        self.max.saturating_sub(self.used)
    }
}

/// Bounds for [`retry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first one included.
    pub max_attempts: NonZeroU32,
    /// Delay before the first retry; doubled before each further one.
    pub base_delay: Duration,
    /// Cap on any single delay.
    pub max_delay: Duration,
    /// Time from the call after which no attempt starts and no delay ends.
    pub deadline: Duration,
}

impl RetryPolicy {
    /// Delay before retry number `retry` (1 = after the first failure):
    /// `min(base_delay * 2^(retry - 1), max_delay)`.
    pub fn delay_before_retry(&self, retry: u32) -> Duration {
        let doublings = retry.saturating_sub(1).min(31);
        let delay = self.base_delay.saturating_mul(1u32 << doublings);
        delay.min(self.max_delay)
    }
}

/// Why [`retry`] gave up. `attempts` counts attempts actually run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RetryError<E> {
    #[error("permanent error after {attempts} attempt(s): {error}")]
    Permanent { attempts: u32, error: E },
    #[error("gave up after {attempts} attempt(s): {last}")]
    Exhausted { attempts: u32, last: E },
    #[error("deadline reached after {attempts} attempt(s)")]
    DeadlineExceeded { attempts: u32, last: Option<E> },
    #[error("cancelled after {attempts} attempt(s)")]
    Cancelled { attempts: u32, last: Option<E> },
}

impl<E> RetryError<E> {
    pub fn attempts(&self) -> u32 {
        match self {
            Self::Permanent { attempts, .. }
            | Self::Exhausted { attempts, .. }
            | Self::DeadlineExceeded { attempts, .. }
            | Self::Cancelled { attempts, .. } => *attempts,
        }
    }

    /// The last error the operation returned, if it ran at all.
    pub fn into_last(self) -> Option<E> {
        match self {
            Self::Permanent { error, .. } => Some(error),
            Self::Exhausted { last, .. } => Some(last),
            Self::DeadlineExceeded { last, .. } | Self::Cancelled { last, .. } => last,
        }
    }
}

/// Runs `op(attempt)` (attempt is 1-based) until it succeeds, fails
/// permanently, or a bound is reached. Never retries forever.
pub async fn retry<T, E, F, Fut>(
    mut op: F,
    is_permanent: impl Fn(&E) -> bool,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<T, RetryError<E>>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now()
        .checked_add(policy.deadline)
        .unwrap_or_else(far_future);
    let max_attempts = policy.max_attempts.get();
    let mut last = None;
    let mut attempt = 0;
    loop {
        may_start(attempt, deadline, cancel, &mut last)?;
        attempt += 1;
        let error = match op(attempt).await {
            Ok(value) => return Ok(value),
            Err(error) if is_permanent(&error) => {
                return Err(RetryError::Permanent {
                    attempts: attempt,
                    error,
                })
            }
            Err(error) => error,
        };
        if attempt >= max_attempts {
            return Err(RetryError::Exhausted {
                attempts: attempt,
                last: error,
            });
        }
        last = Some(error);
        let delay = policy.delay_before_retry(attempt);
        back_off(attempt, delay, deadline, cancel, &mut last).await?;
    }
}

/// Checks the bounds before an attempt; `done` attempts have run so far.
fn may_start<E>(
    done: u32,
    deadline: Instant,
    cancel: &CancellationToken,
    last: &mut Option<E>,
) -> Result<(), RetryError<E>> {
    if cancel.is_cancelled() {
        return Err(RetryError::Cancelled {
            attempts: done,
            last: last.take(),
        });
    }
    if Instant::now() >= deadline {
        return Err(RetryError::DeadlineExceeded {
            attempts: done,
            last: last.take(),
        });
    }
    Ok(())
}

async fn back_off<E>(
    done: u32,
    delay: Duration,
    deadline: Instant,
    cancel: &CancellationToken,
    last: &mut Option<E>,
) -> Result<(), RetryError<E>> {
    let wake = Instant::now().checked_add(delay).unwrap_or_else(far_future);
    if wake >= deadline {
        return Err(RetryError::DeadlineExceeded {
            attempts: done,
            last: last.take(),
        });
    }
    tracing::debug!(attempt = done, ?delay, "retrying after a transient error");
    tokio::select! {
        biased;
        () = cancel.cancelled() => Err(RetryError::Cancelled { attempts: done, last: last.take() }),
        () = tokio::time::sleep_until(wake) => Ok(()),
    }
}

fn far_future() -> Instant {
    // About 30 years, as tokio uses for "never".
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Failure {
        Transient,
        Permanent,
    }

    fn policy(max_attempts: u32, deadline_secs: u64) -> RetryPolicy {
        RetryPolicy {
            max_attempts: NonZeroU32::new(max_attempts).expect("non-zero"),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(4),
            deadline: Duration::from_secs(deadline_secs),
        }
    }

    fn is_permanent(e: &Failure) -> bool {
        *e == Failure::Permanent
    }

    async fn always(calls: &AtomicU32, failure: Failure) -> Result<(), Failure> {
        calls.fetch_add(1, Ordering::SeqCst);
        Err(failure)
    }

    #[test]
    fn budget_counts_and_resets() {
        let mut budget = RetryBudget::new(3, 1);
        assert_eq!(budget.try_consume(), Ok(2));
        assert_eq!(budget.try_consume(), Ok(3));
        assert_eq!(
            budget.try_consume(),
            Err(BudgetExhausted { max: 3, used: 3 })
        );
        assert_eq!(budget.used(), 3);
        budget.reset();
        assert_eq!((budget.used(), budget.remaining()), (0, 3));
        assert!(RetryBudget::new(3, 7).try_consume().is_err());
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let delays: Vec<u64> = (1..=5)
            .map(|n| policy(9, 99).delay_before_retry(n).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 4, 4]);
        assert_eq!(
            policy(9, 99).delay_before_retry(u32::MAX),
            Duration::from_secs(4)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn succeeds_after_transient_failures() {
        let calls = AtomicU32::new(0);
        let op = |attempt: u32| {
            calls.fetch_add(1, Ordering::SeqCst);
            async move {
                if attempt < 3 {
                    Err(Failure::Transient)
                } else {
                    Ok(attempt)
                }
            }
        };
        let start = Instant::now();
        let got = retry(op, is_permanent, &policy(5, 60), &CancellationToken::new()).await;
        assert_eq!(got, Ok(3));
        assert_eq!(start.elapsed(), Duration::from_secs(1 + 2));
    }

    #[tokio::test(start_paused = true)]
    async fn stops_at_max_attempts() {
        let calls = AtomicU32::new(0);
        let op = |_| always(&calls, Failure::Transient);
        let got = retry(op, is_permanent, &policy(3, 60), &CancellationToken::new()).await;
        assert_eq!(
            got,
            Err(RetryError::Exhausted {
                attempts: 3,
                last: Failure::Transient
            })
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn never_retries_a_permanent_error() {
        let calls = AtomicU32::new(0);
        let op = |_| always(&calls, Failure::Permanent);
        let got = retry(op, is_permanent, &policy(5, 60), &CancellationToken::new()).await;
        assert_eq!(
            got,
            Err(RetryError::Permanent {
                attempts: 1,
                error: Failure::Permanent
            })
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn never_sleeps_past_the_deadline() {
        let calls = AtomicU32::new(0);
        let op = |_| always(&calls, Failure::Transient);
        let start = Instant::now();
        // Attempts at 0 s, 1 s, 3 s; the next delay (4 s) would end at 7 s > 5 s.
        let got = retry(op, is_permanent, &policy(10, 5), &CancellationToken::new()).await;
        let expected = RetryError::DeadlineExceeded {
            attempts: 3,
            last: Some(Failure::Transient),
        };
        assert_eq!(got, Err(expected));
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_stops_during_backoff() {
        let calls = AtomicU32::new(0);
        let cancel = CancellationToken::new();
        let canceller = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            canceller.cancel();
        });
        let op = |_| always(&calls, Failure::Transient);
        let start = Instant::now();
        let got = retry(op, is_permanent, &policy(10, 60), &cancel).await;
        let expected = RetryError::Cancelled {
            attempts: 2,
            last: Some(Failure::Transient),
        };
        assert_eq!(got, Err(expected));
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_token_runs_nothing() {
        let calls = AtomicU32::new(0);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let op = |_| always(&calls, Failure::Transient);
        let got = retry(op, is_permanent, &policy(3, 60), &cancel).await;
        assert_eq!(
            got,
            Err(RetryError::Cancelled {
                attempts: 0,
                last: None
            })
        );
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }
}
