//! Admission control for backfill (DESIGN §8, §12): permits for read windows,
//! target writes and execution sessions; source rate limits; bounded retries
//! and persisted retry budgets.
//!
//! # Why it is safe
//!
//! The danger this crate guards against is admitting more work than the
//! process promised (too many read views on the source, too many target
//! transactions, too many sessions) because something *looked* finished when
//! the server had not finished it. A future that timed out does not cancel SQL
//! already sent (DESIGN §8); a permit that returned to its pool at that moment
//! would let a new owner run beside a statement that is still running.
//!
//! The invariants, per pool of capacity `N`:
//!
//! 1. **A permit returns to its pool only on confirmed release.** The one way
//!    back is [`Permit::release_confirmed`], called once the server confirmed
//!    the operation ended (read-view connection closed, target operation
//!    finished). A permit that is dropped, or explicitly marked with
//!    [`Permit::mark_release_unknown`], becomes a *hold*.
//! 2. **Holds count against capacity.** A hold keeps its unit of capacity,
//!    with its owner, reason and age, until [`Admission::confirm_hold`] is
//!    called after the server confirmed the statement ended (e.g. the
//!    connection was KILLed and is gone). So `in_use + holds <= N` at all
//!    times, and at most `N` operations can be running at once even when some
//!    outcomes are unknown.
//! 3. **No unbounded wait.** Read and write acquisition take a deadline and a
//!    cancel token; waiters are served FIFO and a timeout names who holds the
//!    pool. Sessions are never waited for: a streaming tail holds its session
//!    indefinitely, so beyond capacity [`Admission::try_acquire_session`]
//!    refuses at once with a message saying how to raise the limit. Rate-limit
//!    waits end on cancel; [`retry`] is bounded by attempts, a deadline and a
//!    cancel token, and never retries a permanent error.
//! 4. **A leak cannot be missed.** [`Admission::snapshot`] lists, per pool,
//!    the capacity, owners in use, holds (owner, reason, age) and queued
//!    owners in FIFO order, marking those a confirmed hold would admit
//!    (`blocked_by_holds`). A dropped permit also logs a warning.
//!
//! Releasing a permit never means anything about progress: not that a window
//! is done, nor that another owner may take over its work. Progress is decided
//! by the ledger (T and J), never by admission.
//!
//! The pool state machine (`pool.rs`) is pure: it takes `now` and returns
//! decisions, and is tested without a runtime; waiting lives in
//! `admission.rs`, and every timing test uses paused tokio time.

mod admission;
mod error;
mod ids;
mod permit;
mod pool;
mod rate;
mod retry;
mod snapshot;

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;

pub use crate::admission::{Admission, Limits};
pub use crate::error::{AdmissionError, Holder};
pub use crate::ids::{HoldId, PermitId, PoolKind};
pub use crate::permit::{Permit, DROPPED_UNCONFIRMED};
pub use crate::rate::{RateLimits, Throttle, ThrottleCancelled, ThrottleStats};
pub use crate::retry::{
    retry, retry_with, Attempt, Backoff, BudgetExhausted, RetryBudget, RetryError, RetryPolicy,
};
pub use crate::snapshot::{
    AdmissionSnapshot, HoldSnapshot, InUseSnapshot, PoolSnapshot, WaiterSnapshot,
};
/// The cancel token [`retry`] and the permit waits take (re-exported so callers need
/// no direct tokio-util dependency).
pub use tokio_util::sync::CancellationToken;
