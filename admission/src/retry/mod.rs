//! Bounded retries (STYLE §6): [`retry`] (and [`retry_with`]) is the one helper
//! every retry loop uses, with a permanent-error check, an attempt cap, a deadline and a cancel
//! token (neon's `libs/utils/src/backoff.rs` is the model). Backoff is none,
//! linear or exponential, capped and deterministic (no jitter), so paused-time
//! tests see exact instants.
//!
//! The helper never drops an attempt in flight: a dropped future does not stop
//! SQL already sent (DESIGN §8), so each attempt bounds its own I/O. The
//! deadline and the cancel token are checked before every attempt and during
//! every backoff, and no backoff is slept that would end past the deadline.
//!
//! Two entry points share one implementation of the bounds:
//! - [`retry`]`(op, ..)`: `op(attempt)` returns a future; the closure may capture shared
//!   references (a pool, the job's context), which is what sqlx calls on a `&MySqlPool`
//!   need.
//! - [`retry_with`]`(&mut state, op, ..)`: `op(state, attempt)` returns a boxed
//!   future ([`Attempt`]) that may borrow `state` mutably, one attempt at a time: a
//!   connection, or a flag that outlives the attempts. (A generic `AsyncFnMut` would be
//!   neater, but its future is not provably `Send` inside a spawned task.)
//!
//! `is_permanent` classifies the operation's error; with kernel's errors it is
//! `|e: &kernel::Error| !e.is_transient()` (definite errors are never retried).
//!
//! ```
//! # use std::time::Duration;
//! use admission::{retry, retry_with, CancellationToken, RetryPolicy};
//!
//! # #[derive(Debug)] enum DbError { Transient, Definite }
//! # struct Pool;
//! # impl Pool { async fn count(&self) -> Result<u64, DbError> { Ok(7) } }
//! # struct Conn { calls: u32 }
//! # impl Conn { async fn insert(&mut self, row: &str) -> Result<u64, DbError> {
//! #     self.calls += 1; if self.calls < 3 { Err(DbError::Transient) } else { Ok(1) } } }
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let policy = RetryPolicy::exponential(5, Duration::from_millis(100), Duration::from_secs(2))
//!     .with_deadline(Duration::from_secs(30));
//! let cancel = CancellationToken::new();
//! let permanent = |e: &DbError| matches!(e, DbError::Definite);
//!
//! // Shared state: a plain closure returning a future.
//! let pool = Pool;
//! let n = retry(|_attempt| pool.count(), permanent, &policy, &cancel).await;
//! assert_eq!(n.ok(), Some(7));
//!
//! // Mutable state: lent to each attempt in turn.
//! let mut conn = Conn { calls: 0 };
//! let row = String::from("(1, 'a')");
//! let n = retry_with(
//!     &mut conn,
//!     |conn, _attempt| Box::pin(conn.insert(&row)),
//!     permanent,
//!     &policy,
//!     &cancel,
//! )
//! .await;
//! assert_eq!((n.ok(), conn.calls), (Some(1), 3));
//! # }
//! ```

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
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

/// The wait before retry number `n` (1 = after the first failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    /// Retry at once: the failure was a lost race (a re-plan), nothing to wait for.
    None,
    /// `min(step * n, max)`.
    Linear { step: Duration, max: Duration },
    /// `min(base * 2^(n - 1), max)`.
    Exponential { base: Duration, max: Duration },
}

/// Bounds for [`retry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first one included.
    pub max_attempts: NonZeroU32,
    /// The wait between attempts.
    pub backoff: Backoff,
    /// Time from the call after which no attempt starts and no wait ends. None: bounded
    /// by `max_attempts` alone (each attempt bounds its own I/O).
    pub deadline: Option<Duration>,
}

impl RetryPolicy {
    /// `max_attempts` (0 counts as 1) without any wait in between, no deadline.
    pub const fn immediate(max_attempts: u32) -> Self {
        Self {
            max_attempts: at_least_one(max_attempts),
            backoff: Backoff::None,
            deadline: None,
        }
    }

    /// `max_attempts` (0 counts as 1), waiting `step * n` (capped at `max`) before retry
    /// `n`, no deadline.
    pub const fn linear(max_attempts: u32, step: Duration, max: Duration) -> Self {
        Self {
            max_attempts: at_least_one(max_attempts),
            backoff: Backoff::Linear { step, max },
            deadline: None,
        }
    }

    /// `max_attempts` (0 counts as 1), waiting `base * 2^(n - 1)` (capped at `max`)
    /// before retry `n`, no deadline.
    pub const fn exponential(max_attempts: u32, base: Duration, max: Duration) -> Self {
        Self {
            max_attempts: at_least_one(max_attempts),
            backoff: Backoff::Exponential { base, max },
            deadline: None,
        }
    }

    /// The same bounds, and no attempt starts (nor wait ends) `deadline` after the call.
    pub const fn with_deadline(self, deadline: Duration) -> Self {
        Self {
            deadline: Some(deadline),
            ..self
        }
    }

    /// Delay before retry number `retry` (1 = after the first failure).
    pub fn delay_before_retry(&self, retry: u32) -> Duration {
        match self.backoff {
            Backoff::None => Duration::ZERO,
            Backoff::Linear { step, max } => step.saturating_mul(retry).min(max),
            Backoff::Exponential { base, max } => {
                let doublings = retry.saturating_sub(1).min(31);
                base.saturating_mul(1u32 << doublings).min(max)
            }
        }
    }
}

const fn at_least_one(n: u32) -> NonZeroU32 {
    match NonZeroU32::new(n) {
        Some(n) => n,
        None => NonZeroU32::MIN,
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
/// permanently (`is_permanent`), or a bound of `policy` or `cancel` is reached.
/// Never retries forever.
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
    let mut tries = Tries::new(policy, cancel);
    loop {
        let attempt = tries.start()?;
        match op(attempt).await {
            Ok(value) => return Ok(value),
            Err(error) => tries.failed(error, &is_permanent).await?,
        }
    }
}

/// One attempt of [`retry_with`]: a boxed future that may borrow the lent state.
pub type Attempt<'s, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 's>>;

/// [`retry`] for an operation that needs `state` mutably: `op(state, attempt)` gets
/// the lent state (`&mut &mut S`: method calls and `&mut S` arguments deref through it)
/// and returns an [`Attempt`] borrowing it, `Box::pin(f(state, ..))` or
/// `Box::pin(async move { .. })`. Everything the attempts change goes in `state` (a
/// tuple such as `&mut (conns, &mut flag)` works); the closure may capture shared
/// references to anything that outlives the call (bind `let x = &x;` before an
/// `async move` block).
pub async fn retry_with<'a, S, T, E>(
    state: &'a mut S,
    mut op: impl for<'s> FnMut(&'s mut &'a mut S, u32) -> Attempt<'s, T, E>,
    is_permanent: impl Fn(&E) -> bool,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<T, RetryError<E>>
where
    S: ?Sized,
{
    // `&'s mut &'a mut S` rather than `&'s mut S`: it carries `'a: 's`, so an attempt
    // may also borrow what the closure captures (anything that outlives the call).
    let mut state = state;
    let mut tries = Tries::new(policy, cancel);
    loop {
        let attempt = tries.start()?;
        match op(&mut state, attempt).await {
            Ok(value) => return Ok(value),
            Err(error) => tries.failed(error, &is_permanent).await?,
        }
    }
}

/// The bounds of one [`retry`] call: attempts run so far, the last error, the deadline.
struct Tries<'p, E> {
    policy: &'p RetryPolicy,
    cancel: &'p CancellationToken,
    deadline: Option<Instant>,
    done: u32,
    last: Option<E>,
}

impl<'p, E> Tries<'p, E> {
    fn new(policy: &'p RetryPolicy, cancel: &'p CancellationToken) -> Self {
        let deadline = policy
            .deadline
            .map(|d| Instant::now().checked_add(d).unwrap_or_else(far_future));
        Self {
            policy,
            cancel,
            deadline,
            done: 0,
            last: None,
        }
    }

    /// Checks the bounds before an attempt; returns its number (1-based).
    fn start(&mut self) -> Result<u32, RetryError<E>> {
        if self.cancel.is_cancelled() {
            return Err(RetryError::Cancelled {
                attempts: self.done,
                last: self.last.take(),
            });
        }
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(RetryError::DeadlineExceeded {
                attempts: self.done,
                last: self.last.take(),
            });
        }
        self.done += 1;
        Ok(self.done)
    }

    /// After a failed attempt: gives up on a permanent error or at the attempt cap,
    /// else waits the backoff (unless it would end past the deadline or the token fires
    /// first). No wait at all for a zero delay (the next [`Tries::start`] still checks
    /// both).
    async fn failed(
        &mut self,
        error: E,
        is_permanent: &impl Fn(&E) -> bool,
    ) -> Result<(), RetryError<E>> {
        let attempts = self.done;
        if is_permanent(&error) {
            return Err(RetryError::Permanent { attempts, error });
        }
        if attempts >= self.policy.max_attempts.get() {
            return Err(RetryError::Exhausted {
                attempts,
                last: error,
            });
        }
        let delay = self.policy.delay_before_retry(attempts);
        if delay.is_zero() {
            self.last = Some(error);
            return Ok(());
        }
        let wake = Instant::now().checked_add(delay).unwrap_or_else(far_future);
        if self.deadline.is_some_and(|d| wake >= d) {
            return Err(RetryError::DeadlineExceeded {
                attempts,
                last: Some(error),
            });
        }
        self.last = Some(error);
        tracing::debug!(
            attempt = attempts,
            ?delay,
            "retrying after a transient error"
        );
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(RetryError::Cancelled { attempts, last: self.last.take() }),
            () = tokio::time::sleep_until(wake) => Ok(()),
        }
    }
}

fn far_future() -> Instant {
    // About 30 years, as tokio uses for "never".
    Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

#[cfg(test)]
mod tests;
