//! L's GC horizon of a stream (pure): the smallest L seq that some consumer may still
//! read; every record below it may be deleted.
//!
//! Who reads L, and from where:
//! * a job not yet activated (windows, fence, replay of (B, F], activation audit), a
//!   CANCELING job, and a STREAMING job whose materials are not released yet (its audit on
//!   restart re-reads L from B to F): from its B marker on;
//! * a STREAMING job whose release is done: its replay restarts after the replay hint's
//!   record (`replay_progress.l_seq`, confirmed by reading that record, never ahead of T's
//!   cursor); without a hint it reads from B;
//! * a table paused by the reader: its pause comes after its B, and its replay stops at
//!   the pause until the pause is resolved (a sealed schema version, refresh-schema), so
//!   the job's own need (B, or a hint never ahead of T's cursor) already keeps the pause's
//!   record and its raw rows; the pause counts only for a job with no other need (a
//!   pause never pins L for good: `capture_pause` rows are kept forever);
//! * the reader itself: from D's record on (enforced again by `kernel::log::prune_batch`,
//!   with the XA holds, in its own transaction).
//!
//! A CANCELLED job reads nothing. A job with no B marker yet reads nothing below L's tail
//! (its B will be appended there).
use kernel::ids::JobId;
use kernel::log::LSeq;

/// How far a job has got, as far as L is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Not activated, CANCELING, or STREAMING with its materials not released.
    NeedsFromB,
    /// STREAMING, release done: reads after its replay hint.
    Released,
    /// CANCELLED: reads nothing.
    Cancelled,
}

/// One job's claim on L.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobNeed {
    pub job: JobId,
    pub stage: Stage,
    /// Its B marker's record (None: no B in L yet).
    pub b: Option<LSeq>,
    /// `replay_progress.l_seq`.
    pub hint: Option<LSeq>,
    /// The record where the reader paused the table, if paused.
    pub paused_at: Option<LSeq>,
}

/// The first seq a job may still read (None: it needs nothing below L's tail).
pub fn need_of(j: &JobNeed) -> Option<LSeq> {
    let from = match j.stage {
        Stage::Cancelled => return None,
        Stage::NeedsFromB => j.b,
        Stage::Released => match (j.hint, j.b) {
            (Some(h), Some(b)) if h > b => Some(h),
            (_, b) => b,
        },
    };
    from.or(j.paused_at)
}

/// The horizon: records with seq below it may be deleted. `d` is D's record (the reader
/// restarts after it); the horizon never passes it. Also returns the job that holds it
/// back (None: D does).
pub fn horizon(d: LSeq, jobs: &[JobNeed]) -> (LSeq, Option<JobId>) {
    let mut out = (d, None);
    for j in jobs {
        if let Some(n) = need_of(j) {
            if n < out.0 {
                out = (n, Some(j.job));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(n: u64, stage: Stage, b: u64, hint: Option<u64>) -> JobNeed {
        JobNeed {
            job: JobId(n),
            stage,
            b: Some(LSeq(b)),
            hint: hint.map(LSeq),
            paused_at: None,
        }
    }

    #[test]
    fn released_jobs_free_l_up_to_their_hint() {
        let jobs = [job(1, Stage::Released, 10, Some(500))];
        assert_eq!(horizon(LSeq(900), &jobs), (LSeq(500), Some(JobId(1))));
        // No hint (no change replayed yet): from B.
        let jobs = [job(1, Stage::Released, 10, None)];
        assert_eq!(horizon(LSeq(900), &jobs), (LSeq(10), Some(JobId(1))));
        // A hint before B is no hint.
        let jobs = [job(1, Stage::Released, 10, Some(5))];
        assert_eq!(horizon(LSeq(900), &jobs).0, LSeq(10));
    }

    #[test]
    fn a_job_not_activated_or_not_released_holds_l_from_its_b() {
        let jobs = [
            job(1, Stage::Released, 10, Some(500)),
            job(2, Stage::NeedsFromB, 200, Some(800)),
        ];
        assert_eq!(horizon(LSeq(900), &jobs), (LSeq(200), Some(JobId(2))));
    }

    #[test]
    fn cancelled_jobs_need_nothing_and_d_bounds_everything() {
        let jobs = [
            job(1, Stage::Cancelled, 10, None),
            job(2, Stage::Released, 50, Some(990)),
        ];
        assert_eq!(horizon(LSeq(900), &jobs), (LSeq(900), None));
        assert_eq!(horizon(LSeq(900), &[]), (LSeq(900), None));
    }

    #[test]
    fn a_resolved_pause_does_not_pin_l_and_a_job_without_b_needs_nothing() {
        // Replay got past the pause (its hint is after it): the pause holds nothing more.
        let mut j = job(1, Stage::Released, 10, Some(500));
        j.paused_at = Some(LSeq(300));
        assert_eq!(need_of(&j), Some(LSeq(500)));
        // An unresolved pause: replay (and so the hint) stopped before it.
        let mut stuck = job(3, Stage::Released, 10, Some(200));
        stuck.paused_at = Some(LSeq(300));
        assert_eq!(need_of(&stuck), Some(LSeq(200)));
        let none = JobNeed {
            job: JobId(2),
            stage: Stage::NeedsFromB,
            b: None,
            hint: None,
            paused_at: None,
        };
        assert_eq!(need_of(&none), None);
    }
}
