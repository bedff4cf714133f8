//! When serve starts a job again after a transient failure (pure): a backoff that doubles
//! from 1 s up to [`MAX_RETRY_DELAY`], and a budget of failures in a row after which the
//! job pauses with its last error instead (STYLE §6: never retry forever; the pause is
//! visible in `status` and a `resume` starts a new series).
use std::time::Duration;

/// The longest wait before a job that keeps failing transiently is tried again.
pub(super) const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// 1 s, 2 s, 4 s, ... up to [`MAX_RETRY_DELAY`] for the n-th failure in a row (n >= 1).
pub(super) fn retry_delay(n: u32) -> Duration {
    let secs = 1u64 << n.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(MAX_RETRY_DELAY)
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
