//! J records (DESIGN §4): the state machine of one table-generation, its current window,
//! completed window count and range-chain root. Pure: [`check_transition`] decides whether
//! one record may follow another; [`crate::journal`] persists them.
//!
//! ```text
//! Installed -> Capturing -> Windows -> Fenced -> Replaying -> Audited -> Streaming
//! any phase before Cancelled -> Canceling -> Cancelled
//! any phase -> paused(reason) -> (operator resume) -> the same phase
//! ```
use kernel::codec::{self, DecodeError, Versioned};
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use kernel::position::BinlogPos;
use serde::{Deserialize, Serialize};

/// The phase of a table (DESIGN §4). Paused is not a phase: see [`JournalRecord::paused`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    Installed,
    Capturing,
    Windows,
    Fenced,
    Replaying,
    Audited,
    Streaming,
    Canceling,
    Cancelled,
}

impl Phase {
    fn rank(self) -> u8 {
        self as u8
    }
}

/// The window J is working on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CurrentWindow {
    pub window: WindowId,
    pub attempt: Attempt,
}

/// One J record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord {
    pub job: JobId,
    pub generation: Generation,
    pub phase: Phase,
    /// Set while paused; the phase stays the one the table paused in.
    pub paused: Option<Definite>,
    pub current: Option<CurrentWindow>,
    /// Windows applied in T and recorded in the range chain.
    pub completed: u32,
    /// Root of the range chain after `completed` windows.
    pub chain_root: Digest,
    /// Where B and F landed, once known.
    pub b: Option<BinlogPos>,
    pub f: Option<BinlogPos>,
    /// Where K landed, once known.
    pub k: Option<BinlogPos>,
}

impl Versioned for JournalRecord {
    const KIND: [u8; 4] = *b"JREC";
    const VERSION: u16 = 1;
}

impl JournalRecord {
    /// The first record of an installed table-generation.
    pub fn installed(job: JobId, generation: Generation) -> JournalRecord {
        JournalRecord {
            job,
            generation,
            phase: Phase::Installed,
            paused: None,
            current: None,
            completed: 0,
            chain_root: crate::chain::genesis(job, generation),
            b: None,
            f: None,
            k: None,
        }
    }

    /// Decodes a record (every version this build has written).
    pub fn decode(bytes: &[u8]) -> Result<JournalRecord, DecodeError> {
        codec::decode(bytes)
    }
}

fn refuse(msg: String) -> Definite {
    Definite {
        code: DefiniteCode::Preparation,
        message: msg,
    }
}

/// Decides whether `next` may follow `prev` in J. Window completion (`completed` +1) must
/// come with a new chain root; only [`crate::journal::Journal::complete_window`] writes it.
pub fn check_transition(prev: &JournalRecord, next: &JournalRecord) -> Result<(), Definite> {
    use Phase::*;
    let who = format!("job {} {}", prev.job, prev.generation);
    if (prev.job, prev.generation) != (next.job, next.generation) {
        return Err(refuse(format!(
            "{who}: a journal record cannot change job or generation"
        )));
    }
    if prev.paused.is_some() && next.paused.is_some() && prev.phase != next.phase {
        return Err(refuse(format!(
            "{who}: paused in {:?}; resume before moving on",
            prev.phase
        )));
    }
    let ok = match (prev.phase, next.phase) {
        (a, b) if a == b => true,
        (Cancelled, _) => false,
        (_, Canceling) => prev.phase != Cancelled,
        (Canceling, Cancelled) => true,
        (_, Cancelled) => false,
        (a, b) => b.rank() == a.rank() + 1,
    };
    if !ok {
        return Err(refuse(format!(
            "{who}: the journal cannot move from {:?} to {:?}",
            prev.phase, next.phase
        )));
    }
    if prev.paused.is_some() && next.paused.is_some() && next.completed != prev.completed {
        return Err(refuse(format!(
            "{who}: a paused table does not complete windows"
        )));
    }
    match next.completed.checked_sub(prev.completed) {
        Some(0) if next.chain_root == prev.chain_root => {}
        Some(0) => {
            return Err(refuse(format!(
                "{who}: chain root changed without a window"
            )))
        }
        Some(1) if next.chain_root != prev.chain_root => {}
        _ => {
            return Err(refuse(format!(
                "{who}: completed count {} -> {} (windows complete one at a time with a new root)",
                prev.completed, next.completed
            )))
        }
    }
    for (name, a, b) in [
        ("the start position (B)", &prev.b, &next.b),
        ("the final fence (F)", &prev.f, &next.f),
        ("the cancel point (K)", &prev.k, &next.k),
    ] {
        if a.is_some() && a != b {
            return Err(refuse(format!(
                "{who}: {name} is recorded once and never changes"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rec(phase: Phase) -> JournalRecord {
        JournalRecord {
            phase,
            ..JournalRecord::installed(JobId(1), Generation(1))
        }
    }

    #[test]
    fn forward_edges_only() {
        use Phase::*;
        let all = [
            Installed, Capturing, Windows, Fenced, Replaying, Audited, Streaming, Canceling,
            Cancelled,
        ];
        for a in all {
            for b in all {
                let r = check_transition(&rec(a), &rec(b)).is_ok();
                let expect = a == b
                    || (a != Cancelled && b == Canceling)
                    || (a == Canceling && b == Cancelled)
                    || (b != Canceling
                        && b != Cancelled
                        && a != Cancelled
                        && b as u8 == a as u8 + 1);
                assert_eq!(r, expect, "{a:?} -> {b:?}");
            }
        }
    }

    #[test]
    fn windows_complete_one_at_a_time_with_a_new_root() {
        let a = rec(Phase::Windows);
        let mut b = a.clone();
        b.completed = 1;
        assert!(check_transition(&a, &b).is_err());
        b.chain_root = Digest([1; 32]);
        assert!(check_transition(&a, &b).is_ok());
        b.completed = 2;
        assert!(check_transition(&a, &b).is_err());
        let mut c = a.clone();
        c.chain_root = Digest([1; 32]);
        assert!(check_transition(&a, &c).is_err());
        let mut d = b.clone();
        d.completed = 0;
        assert!(check_transition(&b, &d).is_err());
    }

    #[test]
    fn fences_are_written_once_and_pause_keeps_the_phase() {
        let mut a = rec(Phase::Capturing);
        a.b = Some(BinlogPos::new("b.000001", 4));
        let mut b = a.clone();
        b.b = Some(BinlogPos::new("b.000001", 5));
        assert!(check_transition(&a, &b).is_err());
        let mut p = a.clone();
        p.paused = Some(Definite {
            code: DefiniteCode::SchemaChanged,
            message: "x".into(),
        });
        assert!(check_transition(&a, &p).is_ok());
        let mut q = p.clone();
        q.phase = Phase::Windows;
        assert!(check_transition(&p, &q).is_err());
        let mut r = p.clone();
        r.paused = None;
        assert!(check_transition(&p, &r).is_ok());
    }
}
