//! When serve starts a job again after a transient failure (pure): a backoff that doubles
//! from 1 s up to [`MAX_RETRY_DELAY`], and a budget of failures in a row after which the
//! job pauses with its last error instead (STYLE §6: never retry forever; the pause is
//! visible in `status` and a `resume` starts a new series).
use admission::RetryPolicy;
use std::time::Duration;

/// The longest wait before a job that keeps failing transiently is tried again.
pub(super) const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// The backoff of job starts (the attempt cap is the budget of [`after_failure`]): the
/// one retry policy type of the workspace, whose delays the scheduler waits out between
/// its polls instead of awaiting them.
const JOB_BACKOFF: RetryPolicy =
    RetryPolicy::exponential(u32::MAX, Duration::from_secs(1), MAX_RETRY_DELAY);

/// The backoff of a capture reader that ended: 2 s, 4 s, ... up to [`MAX_RETRY_DELAY`].
const READER_BACKOFF: RetryPolicy =
    RetryPolicy::exponential(u32::MAX, Duration::from_secs(2), MAX_RETRY_DELAY);

/// 1 s, 2 s, 4 s, ... up to [`MAX_RETRY_DELAY`] for the n-th failure in a row (n >= 1).
pub(super) fn retry_delay(n: u32) -> Duration {
    JOB_BACKOFF.delay_before_retry(n)
}

/// The wait before restarting a capture reader that ended for the n-th time in a row.
/// A reader that ran [`MAX_RETRY_DELAY`] or longer starts a new series (n = 1). A reader
/// has no pause of its own to end in: the tables it feeds pause through their own budgets
/// (a marker that never arrives fails the job's task, and [`after_failure`] ends the
/// series of a job in a pause), and L keeps its position, so restarting it later loses
/// nothing.
pub(super) fn reader_delay(n: u32) -> Duration {
    READER_BACKOFF.delay_before_retry(n)
}

/// Failures in a row before a job pauses, by default (with the backoff, about 4 minutes of
/// trying).
pub const DEFAULT_TASK_RETRIES: u32 = 10;

/// What to do after the n-th transient failure in a row (n >= 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Restart {
    /// Start the job again after this delay.
    After(Duration),
    /// The budget is used up: pause the table with the last error.
    Pause,
}

/// The decision after the `n`-th transient failure in a row with a budget of `budget`
/// failures (0 counts as 1: the first failure pauses).
pub(super) fn after_failure(n: u32, budget: u32) -> Restart {
    if n >= budget.max(1) {
        Restart::Pause
    } else {
        Restart::After(retry_delay(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_a_minute() {
        let d: Vec<u64> = (1..=9).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
        let r: Vec<u64> = (1..=7).map(|n| reader_delay(n).as_secs()).collect();
        assert_eq!(r, [2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn the_budget_ends_in_a_pause_never_in_an_endless_restart() {
        assert_eq!(after_failure(1, 3), Restart::After(Duration::from_secs(1)));
        assert_eq!(after_failure(2, 3), Restart::After(Duration::from_secs(2)));
        assert_eq!(after_failure(3, 3), Restart::Pause);
        assert_eq!(after_failure(u32::MAX, 3), Restart::Pause);
        assert_eq!(after_failure(1, 0), Restart::Pause);
        assert_eq!(after_failure(1, 1), Restart::Pause);
        let budget = DEFAULT_TASK_RETRIES;
        let total: u64 = (1..budget)
            .map(|n| match after_failure(n, budget) {
                Restart::After(d) => d.as_secs(),
                Restart::Pause => panic!("paused before the budget"),
            })
            .sum();
        assert_eq!(total, 1 + 2 + 4 + 8 + 16 + 32 + 60 + 60 + 60);
    }
}
