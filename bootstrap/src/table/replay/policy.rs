//! Pure: what the replay loop does after each outcome of a read or a batch (retry, re-read
//! T, pause the table, fail, or go on), and the counters of consecutive failures it keeps.
//! Values in, a [`Decision`] out, no I/O: the driver only carries decisions out.
//!
//! # Why it is safe
//!
//! * Bounded (DESIGN §8). Only a following run ([`Budget::following`]) retries at all: a
//!   run to F or to a seq returns every error to its caller, who owns the retry. While
//!   following, at most [`Budget::max_retries`] transient failures in a row are retried
//!   (reads and applies share one count, permit waits have their own), and each committed
//!   batch resets both; no outcome is retried forever.
//! * A retried apply re-reads T's cursor first ([`Decision::Reread`]): a batch that failed
//!   may still have committed, and only T says whether it did (I2). A read failure or a
//!   permit wait sent nothing, so L is read again from the same seq ([`Decision::Retry`]).
//! * Past the budget a failing apply pauses the table ([`Decision::Pause`]): a restarted
//!   task would otherwise retry forever. A read failure or a permit wait past it is a
//!   plain error ([`Decision::Fail`]): nothing was sent, and serve restarts the task later.
//!
//! Why not [`admission::retry`]: that helper retries ONE operation until it succeeds. A
//! following run is a stream of batches whose failure count spans reads and applies and
//! resets at each commit, and whose retried apply must first re-read T; the same bounds
//! (attempt cap, the task's cancel token, no retry of a definite error) are this pure
//! function, with a unit test per branch below.

/// How a run treats failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The run follows L until cancelled (STREAMING); only such a run retries.
    pub following: bool,
    /// Transient failures tolerated in a row ([`super::ReplayConfig::max_retries`]).
    pub max_retries: u32,
}

/// Failures in a row so far; both reset by each committed batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tries {
    /// Reads and applies that failed transiently.
    pub retries: u32,
    /// Permit waits that timed out (nothing was sent).
    pub waits: u32,
}

/// What a read or a batch ended with, as the policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Reading L failed (`transient`: worth retrying).
    ReadFailed { transient: bool },
    /// The batch committed.
    Committed,
    /// Cancelled while waiting for write permits: nothing was sent.
    Stopped,
    /// The permit wait timed out: nothing was sent.
    NoPermit,
    /// The COMMIT's outcome is still unknown (the batch step already re-planned once).
    Unknown,
    /// The apply failed (`transient`: worth retrying).
    ApplyFailed { transient: bool },
}

/// What the loop does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Go on with the batch read ahead.
    Proceed,
    /// End the run as it stands (not an error).
    Stop,
    /// Wait `idle_wait`, then read L again from the same seq.
    Retry,
    /// Wait `idle_wait`, re-read T's cursor, then read L again from the same seq.
    Reread,
    /// Pause the table: `failures` batches in a row failed or ended uncertain.
    Pause { failures: u32 },
    /// Return the failure to the caller as it is.
    Fail,
}

/// The decision after `event`, and the counters to carry into the next one.
pub fn decide(budget: Budget, tries: Tries, event: Event) -> (Decision, Tries) {
    let retry = budget.following && tries.retries < budget.max_retries;
    let retried = Tries {
        retries: tries.retries + 1,
        ..tries
    };
    match event {
        Event::Committed => (Decision::Proceed, Tries::default()),
        Event::Stopped => (Decision::Stop, tries),
        Event::ReadFailed { transient: true } if retry => (Decision::Retry, retried),
        Event::ApplyFailed { transient: true } if retry => (Decision::Reread, retried),
        Event::ApplyFailed { transient: true } if budget.following => (
            Decision::Pause {
                failures: tries.retries + 1,
            },
            tries,
        ),
        Event::NoPermit => {
            let waited = Tries {
                waits: tries.waits + 1,
                ..tries
            };
            if budget.following && waited.waits <= budget.max_retries {
                (Decision::Retry, waited)
            } else {
                (Decision::Fail, waited)
            }
        }
        Event::ReadFailed { .. } | Event::ApplyFailed { .. } | Event::Unknown => {
            (Decision::Fail, tries)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOLLOW: Budget = Budget {
        following: true,
        max_retries: 3,
    };
    const TO_F: Budget = Budget {
        following: false,
        max_retries: 3,
    };

    fn tries(retries: u32, waits: u32) -> Tries {
        Tries { retries, waits }
    }

    #[test]
    fn a_commit_proceeds_and_resets_both_counts() {
        for b in [FOLLOW, TO_F] {
            assert_eq!(
                decide(b, tries(2, 3), Event::Committed),
                (Decision::Proceed, tries(0, 0))
            );
        }
    }

    #[test]
    fn a_cancelled_permit_wait_stops_and_keeps_the_counts() {
        assert_eq!(
            decide(FOLLOW, tries(1, 2), Event::Stopped),
            (Decision::Stop, tries(1, 2))
        );
    }

    #[test]
    fn a_transient_read_failure_is_retried_within_the_budget_then_fails() {
        let e = Event::ReadFailed { transient: true };
        assert_eq!(
            decide(FOLLOW, tries(0, 1), e),
            (Decision::Retry, tries(1, 1))
        );
        assert_eq!(
            decide(FOLLOW, tries(2, 0), e),
            (Decision::Retry, tries(3, 0))
        );
        // The fourth in a row: a plain error (nothing was sent), never a pause.
        assert_eq!(
            decide(FOLLOW, tries(3, 0), e),
            (Decision::Fail, tries(3, 0))
        );
    }

    #[test]
    fn a_definite_failure_or_a_run_to_f_never_retries() {
        for e in [
            Event::ReadFailed { transient: false },
            Event::ApplyFailed { transient: false },
        ] {
            assert_eq!(
                decide(FOLLOW, tries(0, 0), e),
                (Decision::Fail, tries(0, 0))
            );
        }
        for e in [
            Event::ReadFailed { transient: true },
            Event::ApplyFailed { transient: true },
        ] {
            assert_eq!(decide(TO_F, tries(0, 0), e), (Decision::Fail, tries(0, 0)));
        }
    }

    #[test]
    fn a_transient_apply_failure_rereads_t_then_pauses_past_the_budget() {
        let e = Event::ApplyFailed { transient: true };
        assert_eq!(
            decide(FOLLOW, tries(0, 2), e),
            (Decision::Reread, tries(1, 2))
        );
        assert_eq!(
            decide(FOLLOW, tries(2, 0), e),
            (Decision::Reread, tries(3, 0))
        );
        assert_eq!(
            decide(FOLLOW, tries(3, 0), e),
            (Decision::Pause { failures: 4 }, tries(3, 0))
        );
        // No retries allowed: the first failure pauses.
        let none = Budget {
            following: true,
            max_retries: 0,
        };
        assert_eq!(
            decide(none, tries(0, 0), e),
            (Decision::Pause { failures: 1 }, tries(0, 0))
        );
    }

    #[test]
    fn permit_waits_have_their_own_count_and_end_in_a_plain_failure() {
        let e = Event::NoPermit;
        // Apply and read failures so far do not count against the waits.
        assert_eq!(
            decide(FOLLOW, tries(3, 0), e),
            (Decision::Retry, tries(3, 1))
        );
        assert_eq!(
            decide(FOLLOW, tries(0, 2), e),
            (Decision::Retry, tries(0, 3))
        );
        assert_eq!(
            decide(FOLLOW, tries(0, 3), e),
            (Decision::Fail, tries(0, 4))
        );
        // Not following: the caller waits, not this loop.
        assert_eq!(decide(TO_F, tries(0, 0), e), (Decision::Fail, tries(0, 1)));
    }

    #[test]
    fn a_second_unknown_commit_fails() {
        for b in [FOLLOW, TO_F] {
            assert_eq!(
                decide(b, tries(0, 0), Event::Unknown),
                (Decision::Fail, tries(0, 0))
            );
        }
    }
}
