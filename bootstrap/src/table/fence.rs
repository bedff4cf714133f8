//! The final fence F (DESIGN §6): written only after every window is applied in T and
//! recorded in J; once L holds F, the changes to replay are exactly the table's groups in
//! (B, F].
//!
//! # Why it is safe
//!
//! * F is not trusted to J's word (DESIGN §4: J, T, L are separate evidence). Before
//!   writing F, [`ready`] checks that J counts every planned window, that the range chain
//!   recomputes to J's root with one entry per window, and that T holds exactly one
//!   credential per FINAL page of every sealed manifest with the sealed hash
//!   ([`ledger::check::t_credentials`]). A window that J recorded but whose pages T lacks
//!   (or holds with other bytes) keeps F from being written: replaying (B, F] over a
//!   baseline with a hole would converge to the wrong table (I1).
//! * F is an intent with a fresh random nonce, waited for by that nonce in L
//!   ([`kernel::log::wait_for_marker`]), so a late F of another attempt or generation never
//!   satisfies the wait. Only once L holds F does J record it (phase `Fenced`, `f` = the
//!   end of F's group); J records F once and never changes it (`check_transition`).
//! * A crash after F reached the binlog but before J recorded it (fault point
//!   `fence.after_f_written`) leaves an orphan F marker. The restart writes a new F: every
//!   window is still applied, so the new F is as valid as the old, and an orphan F is no
//!   barrier for anything (nothing waits on its nonce). The replay range is always read
//!   from J's F, never from "the latest F in L".
//! * No fence waits on D (DESIGN §4): the wait is on L holding the marker, bounded by a
//!   deadline whose expiry is a transient error for the caller's retry budget.
use crate::table::replay::{self, MarkerAt, Scope};
use kernel::control::{self, Intent, IntentKind};
use kernel::error::{Definite, DefiniteCode};
use kernel::{failpoint, Error, Result};
use ledger::chain::{self, ChainEntry};
use ledger::journal::{Head, Journal};
use ledger::lease::Lease;
use ledger::manifest::WindowManifest;
use ledger::material::MaterialStore;
use ledger::record::{JournalRecord, Phase};
use ledger::target::PageCredential;
use sqlx::mysql::MySqlPool;
use std::time::Duration;

/// Decides whether F may be written (pure): J counts every planned window and is not
/// paused, the range chain matches J, and T holds exactly the sealed FINAL credentials.
pub fn ready(
    planned: usize,
    head: &JournalRecord,
    chain_entries: &[ChainEntry],
    manifests: &[WindowManifest],
    credentials: &[PageCredential],
) -> Result<(), Definite> {
    let who = format!("job {} {}", head.job, head.generation);
    if let Some(p) = &head.paused {
        return Err(Definite {
            code: DefiniteCode::Preparation,
            message: format!(
                "{who} is paused ({p}); the final fence (F) is not written while paused"
            ),
        });
    }
    if head.phase != Phase::Windows || head.completed as usize != planned {
        return Err(Definite {
            code: DefiniteCode::Preparation,
            message: format!(
                "{who}: the final fence (F) waits for every window: the journal is in {:?} with \
                 {} of {planned} windows complete",
                head.phase, head.completed
            ),
        });
    }
    let mut findings = Vec::new();
    if chain_entries.len() != planned {
        findings.push(format!(
            "the range chain holds {} of {planned} windows",
            chain_entries.len()
        ));
    }
    let root = chain::root(head.job, head.generation, chain_entries);
    if root != head.chain_root {
        findings.push(format!(
            "the range chain recomputes to {root} but the journal records {}",
            head.chain_root
        ));
    }
    if manifests.len() != chain_entries.len() {
        findings.push(format!(
            "{} of {} sealed manifests could be read",
            manifests.len(),
            chain_entries.len()
        ));
    }
    findings.extend(ledger::check::t_credentials(credentials, manifests));
    if findings.is_empty() {
        return Ok(());
    }
    Err(Definite {
        code: DefiniteCode::EvidenceCorrupt,
        message: format!(
            "{who}: the final fence (F) is not written because the target ledger and the \
             journal disagree: {}",
            findings.join("; ")
        ),
    })
}

/// What fence needs.
pub struct FenceEnv<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    pub journal: &'a Journal,
    pub lease: &'a Lease,
    pub store: &'a dyn MaterialStore,
    /// Number of planned windows.
    pub planned: usize,
    /// The target's connections (one control connection reads T's page credentials,
    /// given back before the fence waits for L: a connection slot is not held idle
    /// through the wait).
    pub target: &'a crate::io::pool::ConnPool,
    pub ctx: &'a ledger::target::TargetCtx,
    /// Source connection options (writes the F intent into the control table).
    pub source: &'a crate::io::pool::ConnPool,
    pub control_schema: &'a str,
    /// Bound on waiting for L to hold F.
    pub wait: Duration,
}

/// F as J recorded it and L holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fenced {
    pub f: MarkerAt,
    pub head: Head,
}

fn corrupt(msg: String) -> Error {
    Error::definite(DefiniteCode::EvidenceCorrupt, msg)
}

/// The manifests of a range chain, read and verified from the material store.
pub async fn manifests_of(
    store: &dyn MaterialStore,
    entries: &[ChainEntry],
) -> Result<Vec<WindowManifest>> {
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let b = store.get(&e.manifest_hash).await?.ok_or_else(|| {
            corrupt(format!(
                "manifest of {} ({}) is missing from the material store",
                e.window, e.manifest_hash
            ))
        })?;
        out.push(
            WindowManifest::decode(&b)
                .map_err(|x| corrupt(format!("manifest of {}: {x}", e.window)))?,
        );
    }
    Ok(out)
}

/// Finds F as J recorded it in L (definite error if L does not hold it).
pub async fn recorded_f(
    pool: &MySqlPool,
    scope: &Scope,
    head: &JournalRecord,
) -> Result<Option<MarkerAt>> {
    let Some(f) = &head.f else { return Ok(None) };
    match replay::find_marker(pool, scope, IntentKind::F, Some(f)).await? {
        Some(m) => Ok(Some(m)),
        None => Err(corrupt(format!(
            "job {} {}: the journal records the final fence (F) at {f} but the change log \
             holds no final fence marker (F) of this generation there",
            scope.job, scope.generation
        ))),
    }
}

/// Writes F once every window is applied in T and recorded in J, waits until L holds it
/// and records it in J (phase `Fenced`). Idempotent: with F already in J it only finds
/// F's marker in L.
pub async fn fence(env: FenceEnv<'_>) -> Result<Fenced> {
    let (job, g) = (env.scope.job, env.scope.generation);
    let head = env.journal.head(job, g).await?.ok_or_else(|| {
        Error::definite(
            DefiniteCode::JournalMissing,
            format!("job {job} {g} has no journal record; it was never started"),
        )
    })?;
    if let Some(f) = recorded_f(env.pool, env.scope, &head.record).await? {
        return Ok(Fenced { f, head });
    }
    let stored = env.journal.chain(job, g).await?;
    let entries: Vec<ChainEntry> = stored.iter().map(|(e, _)| e.clone()).collect();
    let manifests = manifests_of(env.store, &entries).await?;
    let creds = {
        let mut tc = env
            .target
            .connect(crate::io::pool::Use::Control, "(target)")
            .await?;
        let read = ledger::target::page_credentials(&mut tc, env.ctx).await;
        tc.close().await;
        read?
    };
    ready(env.planned, &head.record, &entries, &manifests, &creds).map_err(Error::Definite)?;
    let intent = Intent::new(job, g, IntentKind::F, None, None);
    let mut src = env
        .source
        .connect(crate::io::pool::Use::Control, "(job source)")
        .await?;
    let written = control::write_intent(&mut src, env.control_schema, &intent).await;
    src.close().await;
    written?;
    failpoint::hit(crate::table::faults::FENCE_AFTER_F_WRITTEN);
    let deadline = tokio::time::Instant::now() + env.wait;
    let m =
        kernel::log::wait_for_marker(env.pool, &env.scope.stream, intent.nonce, deadline).await?;
    if m.obsolete {
        return Err(Error::definite(
            DefiniteCode::Preparation,
            format!(
                "job {job} {g}: the final fence (F) arrived after the generation's cancel point \
                 (K); the table is cancelled"
            ),
        ));
    }
    failpoint::hit(crate::table::faults::FENCE_AFTER_F_IN_L);
    let mut next = head.record.clone();
    next.phase = Phase::Fenced;
    next.f = Some(m.end.pos.clone());
    let head = env.journal.append(env.lease, &head, next).await?;
    failpoint::hit(crate::table::faults::FENCE_AFTER_J_FENCED);
    Ok(Fenced {
        f: MarkerAt {
            seq: m.seq,
            end: m.end,
        },
        head,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
    use kernel::position::BinlogPos;
    use kernel::range::KeyRange;
    use ledger::page::PageRef;

    fn manifest(w: u32) -> WindowManifest {
        WindowManifest {
            job: JobId(1),
            generation: Generation(1),
            window: WindowId(w),
            range: KeyRange::ALL,
            attempt: Attempt(1),
            low: BinlogPos::new("b.000001", 10),
            high: BinlogPos::new("b.000001", 20),
            snapshot: None,
            schema_fingerprint: Digest([0; 32]),
            raw_pages: vec![],
            folded_digest: Digest([0; 32]),
            folded_changes: 0,
            final_pages: vec![PageRef {
                page: PageNo(0),
                digest: Digest([w as u8 + 1; 32]),
                rows: 3,
                bytes: 10,
            }],
        }
    }

    fn setup() -> (
        JournalRecord,
        Vec<ChainEntry>,
        Vec<WindowManifest>,
        Vec<PageCredential>,
    ) {
        let ms = vec![manifest(0)];
        let e = ChainEntry {
            window: WindowId(0),
            range: KeyRange::ALL,
            attempt: Attempt(1),
            manifest_hash: Digest([9; 32]),
        };
        let mut head = JournalRecord::installed(JobId(1), Generation(1));
        head.phase = Phase::Windows;
        head.completed = 1;
        head.chain_root = chain::root(JobId(1), Generation(1), std::slice::from_ref(&e));
        let creds = vec![PageCredential {
            window: WindowId(0),
            page: PageNo(0),
            attempt: Attempt(1),
            digest: Digest([1; 32]),
            rows: 3,
        }];
        (head, vec![e], ms, creds)
    }

    #[test]
    fn f_needs_every_window_in_j_and_t() {
        let (head, e, m, c) = setup();
        assert_eq!(ready(1, &head, &e, &m, &c), Ok(()));
        // J short of a window: F waits.
        assert_eq!(
            ready(2, &head, &e, &m, &c).unwrap_err().code,
            DefiniteCode::Preparation
        );
        // J says complete but T lacks the page: T is checked, not just J.
        let err = ready(1, &head, &e, &m, &[]).unwrap_err();
        assert_eq!(err.code, DefiniteCode::EvidenceCorrupt);
        assert!(
            err.message.contains("no credential for FINAL page w0p0"),
            "{}",
            err.message
        );
        // T holds other bytes for the page.
        let mut other = c.clone();
        other[0].digest = Digest([7; 32]);
        assert!(ready(1, &head, &e, &m, &other).is_err());
        // The range chain does not recompute to J's root.
        let mut h2 = head.clone();
        h2.chain_root = Digest([3; 32]);
        assert!(ready(1, &h2, &e, &m, &c).is_err());
        // Paused or already past Windows.
        let mut p = head.clone();
        p.phase = Phase::Fenced;
        assert!(ready(1, &p, &e, &m, &c).is_err());
    }
}
