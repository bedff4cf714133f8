//! PAUSED(reason, context) and `backfill resume` (DESIGN §8).
//!
//! Why it is safe: a pause only records the reason in J; the phase and every piece of
//! context (current window and attempt, completed windows, chain root, B/F, T's cursor, L)
//! stay as they were, and every protocol step is re-entered from that evidence anyway
//! (the window loop decides from J, seal, materials and T; replay from T's cursor). So
//! resuming is only clearing the reason: the job continues exactly where the evidence
//! says, and if the cause was not fixed the same definite error pauses it again.
//!
//! `resume` is a persisted command (it needs no running `serve`). It is consumed by the
//! job task that acts on it: the task clears the pause in J under its lease, then deletes
//! the command row, so a later pause needs a later resume. A crash between the two leaves a
//! resume that clears nothing (J is not paused) and is deleted on the next run.
use crate::table::ctx::{JobCtx, Reached};
use kernel::error::from_sqlx;
use kernel::error::{Definite, DefiniteCode};
use kernel::{Error, Result};
use ledger::journal::Head;

/// At the start of a job task: if a resume is pending, clears J's pause (keeping every
/// other field) and consumes the command. Returns true when a pause was cleared.
pub async fn apply_resume(ctx: &JobCtx) -> Result<bool> {
    let (job, g) = (ctx.id(), ctx.generation());
    if !crate::store::commands::has(&ctx.pool, job, g, crate::store::commands::RESUME).await? {
        return Ok(false);
    }
    let mut cleared = false;
    if let Some(head) = ctx.journal.head(job, g).await? {
        if let Some(reason) = &head.record.paused {
            tracing::info!(%job, %reason, "resume: clearing the pause, continuing from the journal");
            let mut next = head.record.clone();
            next.paused = None;
            ctx.journal.append(&ctx.lease, &head, next).await?;
            crate::table::target_write::reset(ctx).await?;
            kernel::failpoint::hit(crate::table::faults::RESUME_AFTER_J_CLEARED);
            cleared = true;
        }
    }
    sqlx::query("DELETE FROM job_commands WHERE job_id = ? AND generation = ? AND command = ?")
        .bind(job.0)
        .bind(g.0)
        .bind(crate::store::commands::RESUME)
        .execute(&ctx.pool)
        .await
        .map_err(|e| from_sqlx("consuming the resume command", &e))?;
    Ok(cleared)
}

/// Records a pause in J (the phase stays). Returns the reason.
pub async fn pause(ctx: &JobCtx, head: &Head, reason: Definite) -> Result<Definite> {
    tracing::error!(job = %ctx.id(), reason = %reason, "pausing the table");
    let mut next = head.record.clone();
    next.paused = Some(reason.clone());
    ctx.journal.append(&ctx.lease, head, next).await?;
    kernel::failpoint::hit(crate::table::faults::PAUSE_AFTER_J_PAUSED);
    ctx.events.paused(ctx.id(), reason.code);
    Ok(reason)
}

/// Maps an error of a job step: a definite error pauses the table in J, a transient one
/// is returned for the caller's retry.
pub async fn pause_on_definite(ctx: &JobCtx, head: &Head, e: Error) -> Result<Reached> {
    match e {
        Error::Definite(d) if d.code == DefiniteCode::Fenced => Err(Error::Definite(d)),
        Error::Definite(d) => Ok(Reached::Paused(pause(ctx, head, d).await?)),
        t => Err(t),
    }
}
