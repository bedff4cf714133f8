//! Recording the activation (DESIGN §7): audit, then the deterministic credential in T,
//! then J to STREAMING, each step safe to repeat after a crash (see the module doc of
//! [`super`]); and [`advance_j`], the J steps from FENCED to STREAMING.
use super::checks::{audit, Require};
use super::fields::FieldSample;
use super::gather::{gather_with, Prefetched, Sources};
use super::report::AuditReport;
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::{failpoint, Error, Result};
use ledger::journal::Journal;
use ledger::record::Phase;
use ledger::target::{self, Activation};

/// The result of [`activate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activated {
    pub credential: Activation,
    /// False when T already held the credential (a re-run after a crash).
    pub written: bool,
    pub report: AuditReport,
}

fn rank(p: Phase) -> u8 {
    p as u8
}

/// Moves J forward through `phases` up to `to` (each step one J record).
pub async fn advance_j(
    journal: &Journal,
    lease: &ledger::lease::Lease,
    job: JobId,
    g: Generation,
    to: Phase,
) -> Result<ledger::journal::Head> {
    let mut head = journal.head(job, g).await?.ok_or_else(|| {
        Error::definite(
            DefiniteCode::JournalMissing,
            format!("job {job} {g} has no journal record"),
        )
    })?;
    for phase in [
        Phase::Fenced,
        Phase::Replaying,
        Phase::Audited,
        Phase::Streaming,
    ] {
        if rank(head.record.phase) < rank(phase) && rank(phase) <= rank(to) {
            let mut next = head.record.clone();
            next.phase = phase;
            head = journal.append(lease, &head, next).await?;
        }
    }
    Ok(head)
}

/// Audits and, only if every check passes, writes the activation credential in T and
/// then moves J to STREAMING. Re-running after a crash at any step converges (module
/// doc); on a table already STREAMING it re-checks the credential and the accepted cursor.
/// A failed audit is a definite `evidence_corrupt` error naming every finding; neither T
/// nor J is written. `fields` is the field comparison run just before (see
/// [`super::fields`]); a difference in it fails the audit like any finding. `prefetched`
/// holds the materials and L read ahead by [`super::gather::prefetch`] (empty: all are read
/// here); it must be empty when J is STREAMING already.
pub async fn activate(
    s: &mut Sources<'_>,
    journal: &Journal,
    lease: &ledger::lease::Lease,
    fields: Option<FieldSample>,
    prefetched: Prefetched,
) -> Result<Activated> {
    let (job, g) = (s.scope.job, s.scope.generation);
    let head = journal.head(job, g).await?.ok_or_else(|| {
        Error::definite(
            DefiniteCode::JournalMissing,
            format!("job {job} {g} has no journal record"),
        )
    })?;
    if head.record.paused.is_some()
        || !matches!(
            head.record.phase,
            Phase::Fenced | Phase::Replaying | Phase::Audited | Phase::Streaming
        )
    {
        return Err(Error::definite(
            DefiniteCode::Preparation,
            format!(
                "job {job} {g}: activation needs the final fence (F) and replay first and no pause; the journal is in {:?}{}",
                head.record.phase,
                if head.record.paused.is_some() {
                    " (paused)"
                } else {
                    ""
                }
            ),
        ));
    }
    let require = if head.record.phase == Phase::Streaming {
        Require::Activated
    } else {
        Require::Gate
    };
    let prefetched = if head.record.phase == Phase::Streaming {
        Prefetched::default()
    } else {
        prefetched
    };
    let mut evidence = gather_with(s, prefetched).await?;
    evidence.fields = fields;
    let report = audit(&evidence, require).into_result()?;
    let credential = report.expected.clone().ok_or_else(|| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            "the audit recomputed no activation credential",
        )
    })?;
    if head.record.phase == Phase::Streaming {
        return Ok(Activated {
            credential,
            written: false,
            report,
        });
    }
    advance_j(journal, lease, job, g, Phase::Audited).await?;
    failpoint::hit(crate::table::faults::ACTIVATE_AFTER_J_AUDITED);
    let written = target::write_activation(s.target, s.ctx, &credential).await?;
    failpoint::hit(crate::table::faults::ACTIVATE_AFTER_CREDENTIAL_BEFORE_J);
    advance_j(journal, lease, job, g, Phase::Streaming).await?;
    Ok(Activated {
        credential,
        written,
        report,
    })
}
