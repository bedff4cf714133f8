//! The window loop: every run re-reads J and starts the read-ahead pipeline
//! ([`crate::table::window::pipeline`]) from the window J is at. Each window's step is decided
//! from its evidence by the pure [`crate::table::window::restart::decide`], so a fresh window and one
//! recovered after a crash take the same path (see the module docs of
//! [`crate::table::window`] for the safety argument).
use crate::table::ctx::{JobCtx, Reached};
use crate::table::pause;
use crate::table::window::{pipeline, produce, versions};
use admission::{retry_with, RetryError, RetryPolicy};
use kernel::ids::WindowId;
use kernel::{Error, Result};
use ledger::journal::Head;
use std::time::Duration;
use tracing::Instrument;

/// Runs windows until every one is applied and recorded in J, or the table pauses.
/// Transient failures restart the pipeline (the evidence decides each window's step);
/// `max_attempts` failures in a row without J advancing pause the table with a reason
/// naming the window and the last error (never an endless loop, STYLE §6).
///
/// Each run of failures at one position of J is one bounded [`admission::retry_with`]
/// (100 ms times the failures so far between runs, ended by the job's cancel token). A
/// failure after J advanced starts a new streak in which it is the first failure (carried
/// into the streak's first attempt), so the budget counts failures in a row at one window.
pub async fn run_windows(ctx: &JobCtx, _head: Head) -> Result<Reached> {
    let n = u32::try_from(ctx.plan.len()).unwrap_or(u32::MAX);
    let max = ctx.cfg.max_attempts.max(1);
    let step = Duration::from_millis(100);
    let policy = RetryPolicy::linear(max, step, step.saturating_mul(max));
    let mut streak = Streak::default();
    loop {
        let ran = retry_with(
            &mut streak,
            |streak, attempt| Box::pin(run_once(ctx, n, streak, attempt)),
            |_: &Error| false,
            &policy,
            &ctx.cancel,
        )
        .await;
        let (failures, last) = match ran {
            Ok(Outcome::Ended(r)) => return r,
            // A budget of one: the failure after J advanced is the last one.
            Ok(Outcome::Progressed) if max <= 1 => match streak.carried.take() {
                Some(e) => (1, e),
                None => continue,
            },
            Ok(Outcome::Progressed) => continue,
            Err(RetryError::Exhausted { attempts, last }) => (attempts, last),
            Err(RetryError::Cancelled { .. }) => return stopped(ctx, n).await,
            Err(e) => return Err(crate::store::jobs::last_error(e)),
        };
        let now = streak.stuck_at.unwrap_or_default();
        let d = produce::exhausted(ctx, WindowId(now), failures, &last);
        let head = ctx.head().await?;
        return pause::pause_on_definite(ctx, &head, d).await;
    }
}

/// What the attempts of [`run_windows`] carry from one to the next.
#[derive(Default)]
struct Streak {
    /// J's `completed` after the last failure.
    stuck_at: Option<u32>,
    /// A failure after J advanced: the first failure of the next streak.
    carried: Option<Error>,
}

/// How an attempt of [`run_windows`] ended, other than by a failure to retry.
enum Outcome {
    /// What `run_windows` returns: every window in J, a pause, or an error not retried.
    Ended(Result<Reached>),
    /// The pipeline failed after J advanced: a new streak starts.
    Progressed,
}

/// J's pause or end, if it has either.
fn settled(head: &Head, n: u32) -> Option<Reached> {
    if let Some(p) = &head.record.paused {
        return Some(Reached::Paused(p.clone()));
    }
    (head.record.completed >= n).then(|| Reached::WindowsDone(Box::new(head.clone())))
}

/// Cancelled between attempts: J's pause or end, else the stop.
async fn stopped(ctx: &JobCtx, n: u32) -> Result<Reached> {
    let head = ctx.head().await?;
    match settled(&head, n) {
        Some(r) => Ok(r),
        None => Err(Error::transient("the job task was asked to stop")),
    }
}

/// One run of the pipeline from the window J is at: `Err` is a transient failure to retry.
async fn run_once(
    ctx: &JobCtx,
    n: u32,
    streak: &mut Streak,
    attempt: u32,
) -> std::result::Result<Outcome, Error> {
    if let Some(e) = streak.carried.take() {
        return Err(e);
    }
    let ended = |r| Ok(Outcome::Ended(r));
    let e = loop {
        let head = match ctx.head().await {
            Ok(h) => h,
            Err(e) => return ended(Err(e)),
        };
        if let Some(r) = settled(&head, n) {
            return ended(Ok(r));
        }
        if ctx.cancel.is_cancelled() {
            return ended(Err(Error::transient("the job task was asked to stop")));
        }
        let at = head.record.completed;
        let (chain, target_version) = match versions::target_version(ctx).await {
            Ok(v) => v,
            Err(e) if e.is_transient() => break e,
            Err(e) => return ended(Err(e)),
        };
        let shared = produce::Shared {
            legacy: head.record.current,
            target_version,
            ..Default::default()
        };
        let span = tracing::info_span!("windows", job = %ctx.id(), from = at);
        let ran = pipeline::run(ctx, (at, n), shared, &chain)
            .instrument(span)
            .await;
        // A window of a newer schema version: the target takes it, then the pipeline
        // runs again from the evidence (DESIGN §16).
        let ran = match ran {
            Ok(Some(v)) => versions::catch_up(ctx, v).await.map(|()| true),
            Ok(None) => Ok(false),
            Err(e) => Err(e),
        };
        match ran {
            Ok(true) => continue,
            Ok(false) => match ctx.head().await {
                Ok(h) if h.record.completed >= n => continue,
                Ok(_) => {
                    break Error::transient(
                        "the window pipeline ended before every window was in the journal",
                    )
                }
                Err(e) => return ended(Err(e)),
            },
            Err(e) if e.is_transient() && !ctx.cancel.is_cancelled() => break e,
            Err(e) => {
                return match ctx.head().await {
                    Ok(head) => ended(pause::pause_on_definite(ctx, &head, e).await),
                    Err(e) => ended(Err(e)),
                }
            }
        }
    };
    let now = match ctx.head().await {
        Ok(h) => h.record.completed,
        Err(e) => return ended(Err(e)),
    };
    let (failures, progressed) = count_failure(&mut streak.stuck_at, attempt, now);
    tracing::warn!(job = %ctx.id(), window = now, failures, error = %e, "window pipeline failed; it restarts from the evidence");
    if progressed {
        streak.carried = Some(e);
        return Ok(Outcome::Progressed);
    }
    Err(e)
}

/// After a failure of attempt `attempt` of a streak with J at `now`: the failures in a row
/// at `now`, and whether J advanced since the streak's last failure (then this failure is
/// the first of a new streak). `stuck_at` is J after the last failure.
fn count_failure(stuck_at: &mut Option<u32>, attempt: u32, now: u32) -> (u32, bool) {
    let progressed = attempt > 1 && *stuck_at != Some(now);
    *stuck_at = Some(now);
    (if progressed { 1 } else { attempt }, progressed)
}

#[cfg(test)]
mod tests {
    use super::count_failure;

    /// The count as the loop kept it before the helper: +1 at the same position of J,
    /// else 1.
    fn by_hand(positions: &[u32]) -> Vec<u32> {
        let (mut failures, mut stuck_at) = (0, None);
        positions
            .iter()
            .map(|&now| {
                failures = if stuck_at == Some(now) {
                    failures + 1
                } else {
                    1
                };
                stuck_at = Some(now);
                failures
            })
            .collect()
    }

    /// The count through streaks: a new streak starts (its attempt 1 is the carried
    /// failure) whenever J advanced.
    fn by_streaks(positions: &[u32]) -> Vec<u32> {
        let (mut stuck_at, mut attempt) = (None, 0);
        let mut out = Vec::new();
        for &now in positions {
            attempt += 1;
            let (failures, progressed) = count_failure(&mut stuck_at, attempt, now);
            if progressed {
                attempt = 1;
            }
            out.push(failures);
        }
        out
    }

    #[test]
    fn failures_count_in_a_row_at_one_position_of_j() {
        let mut s = None;
        assert_eq!(count_failure(&mut s, 1, 4), (1, false));
        assert_eq!(count_failure(&mut s, 2, 4), (2, false));
        assert_eq!(count_failure(&mut s, 3, 5), (1, true), "J advanced");
        assert_eq!(s, Some(5));
    }

    #[test]
    fn the_streaks_count_as_the_hand_written_loop_did() {
        for positions in [
            vec![0, 0, 0, 0, 0],
            vec![0, 1, 2, 3],
            vec![3, 3, 4, 4, 4, 7, 7],
            vec![2, 2, 2, 5, 5, 5, 5],
        ] {
            assert_eq!(by_streaks(&positions), by_hand(&positions), "{positions:?}");
        }
    }
}
