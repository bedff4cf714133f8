//! The per-table protocol (DESIGN §4-§8): one job's task from INSTALLED to STREAMING,
//! PAUSED or CANCELLED. This layer (L1) imports only `io`, `store`, `install`, `seams` and
//! the other crates; it never names clap, output formats, `present` or `supervisor`:
//! counters go up through [`ctx::Events`].
//!
//! The lifecycle is a pure decision, [`next`], from J's head and the recorded commands to
//! the step to take; [`run_task`] only carries the steps out, re-reading J after each.
//! J is the single authority on where the job is, so a restart at any instant re-enters
//! the lifecycle at the step J names, and every step is itself restartable from its
//! evidence (window: attempts, seals and T; replay: T's cursor; cancel: K in L).
pub mod activation;
pub mod audit;
pub mod cancel;
pub mod capture;
pub mod ctx;
pub mod faults;
pub mod fence;
pub mod hooks;
pub mod legacy;
pub mod markers;
pub mod pause;
pub mod periodic;
pub mod replay;
pub mod retention;
pub mod schema;
pub mod target_write;
pub mod turns;
pub mod window;

use crate::store::commands;
use ctx::{JobCtx, Reached};
use kernel::error::Definite;
use kernel::Result;
use ledger::journal::Head;
use ledger::record::{JournalRecord, Phase};

/// What the job task does next, decided from J alone (plus whether a cancel is recorded).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A cancel is recorded: stop at this boundary and complete it (DESIGN §8).
    Cancel,
    /// J records a pause: wait for an operator's `resume`.
    Paused(Definite),
    /// INSTALLED: write B, await it, re-check the schema and XA, record CAPTURING(B).
    Capture,
    /// CAPTURING: record WINDOWS.
    EnterWindows,
    /// WINDOWS: run (or continue) the window loop.
    Windows,
    /// Past the windows (FENCED, REPLAYING, AUDITED, STREAMING, CANCELING...): the
    /// activation and streaming steps or the cancel decide from here.
    Beyond(Phase),
}

/// The lifecycle of DESIGN §4 as a pure function (unit-tested for every phase).
pub fn next(record: &JournalRecord, cancel_recorded: bool) -> Step {
    if cancel_recorded {
        return Step::Cancel;
    }
    if let Some(p) = &record.paused {
        return Step::Paused(p.clone());
    }
    match record.phase {
        Phase::Installed => Step::Capture,
        Phase::Capturing => Step::EnterWindows,
        Phase::Windows => Step::Windows,
        other => Step::Beyond(other),
    }
}

/// Runs the job from wherever J says it is up to "every window applied" (or a pause, or
/// a phase beyond the windows).
pub async fn run(ctx: &JobCtx) -> Result<Reached> {
    let mut head = ensure_journal(ctx).await?;
    if head.record.paused.is_none() {
        if let Some(d) = legacy::check(ctx, head.record.phase).await? {
            return Ok(Reached::Paused(pause::pause(ctx, &head, d).await?));
        }
    }
    loop {
        head = match next(&head.record, false) {
            Step::Paused(d) => return Ok(Reached::Paused(d)),
            Step::Capture => match capture::capture(ctx, head).await? {
                Ok(h) => h,
                Err(d) => return Ok(Reached::Paused(d)),
            },
            Step::EnterWindows => append_phase(ctx, &head, Phase::Windows).await?,
            Step::Windows => {
                crate::seams::task_panic::hit(ctx.id());
                return window::runner::run_windows(ctx, head).await;
            }
            // `next(_, false)` never answers Cancel; the cancel is the caller's.
            Step::Beyond(_) | Step::Cancel => return Ok(Reached::Beyond(head.record.phase)),
        };
    }
}

/// One job task, as the supervisor spawns it: the target's T tables and this process's
/// claim, a recorded cancel checked first, a pending resume applied, the lifecycle up to
/// the windows, then (with `finish`) F, replay, audit, STREAMING; and whatever it reached,
/// a cancel recorded meanwhile is completed at this boundary (every operation taken before
/// has finished and been released).
pub async fn run_task(
    ctx: &JobCtx,
    finish: Option<&replay::ReplayConfig>,
    exit_when_idle: bool,
) -> Result<Reached> {
    let r = run_until_cancel(ctx, finish, exit_when_idle).await;
    if cancel_recorded(ctx).await? {
        let cfg = finish.cloned().unwrap_or_default();
        cancel::complete(ctx, &cfg).await?;
        return Ok(Reached::Beyond(Phase::Cancelled));
    }
    r
}

async fn run_until_cancel(
    ctx: &JobCtx,
    finish: Option<&replay::ReplayConfig>,
    exit_when_idle: bool,
) -> Result<Reached> {
    prepare_target(ctx).await?;
    if cancel_recorded(ctx).await? {
        return Ok(Reached::Beyond(Phase::Canceling));
    }
    pause::apply_resume(ctx).await?;
    let reached = run(ctx).await?;
    match finish {
        Some(f) => activation::after_windows(ctx, reached, f, exit_when_idle).await,
        None => Ok(reached),
    }
}

async fn cancel_recorded(ctx: &JobCtx) -> Result<bool> {
    commands::has(&ctx.pool, ctx.id(), ctx.generation(), commands::CANCEL).await
}

/// T tables in the target schema and this process's claim on them (fencing token).
async fn prepare_target(ctx: &JobCtx) -> Result<()> {
    let mut conn = ctx
        .target
        .connect(crate::io::pool::Use::Control, "(target)")
        .await?;
    let r = async {
        ledger::target::ensure_ledger_tables(&mut conn, &ctx.tctx.schema.database).await?;
        ledger::target::claim(&mut conn, &ctx.tctx).await
    }
    .await;
    conn.close().await;
    if r.is_ok() {
        kernel::failpoint::hit(faults::TARGET_AFTER_CLAIM);
    }
    r
}

/// The J head, created (INSTALLED) on the first run; the material registry row too.
pub async fn ensure_journal(ctx: &JobCtx) -> Result<Head> {
    ctx.registry.open_table(ctx.id(), None).await?;
    kernel::failpoint::hit(faults::REGISTRY_AFTER_OPENED);
    if let Some(h) = ctx.journal.head(ctx.id(), ctx.generation()).await? {
        return Ok(h);
    }
    ctx.journal
        .create(
            &ctx.lease,
            JournalRecord::installed(ctx.id(), ctx.generation()),
        )
        .await
}

async fn append_phase(ctx: &JobCtx, head: &Head, phase: Phase) -> Result<Head> {
    let mut next = head.record.clone();
    next.phase = phase;
    ctx.journal.append(&ctx.lease, head, next).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::error::DefiniteCode;
    use kernel::ids::{Generation, JobId};

    fn at(phase: Phase) -> JournalRecord {
        let mut r = JournalRecord::installed(JobId(1), Generation(1));
        r.phase = phase;
        r
    }

    #[test]
    fn each_phase_names_its_step() {
        assert_eq!(next(&at(Phase::Installed), false), Step::Capture);
        assert_eq!(next(&at(Phase::Capturing), false), Step::EnterWindows);
        assert_eq!(next(&at(Phase::Windows), false), Step::Windows);
        for p in [
            Phase::Fenced,
            Phase::Replaying,
            Phase::Audited,
            Phase::Streaming,
            Phase::Canceling,
            Phase::Cancelled,
        ] {
            assert_eq!(next(&at(p), false), Step::Beyond(p));
        }
    }

    #[test]
    fn a_pause_stops_every_phase_and_a_cancel_wins_over_a_pause() {
        let d = Definite {
            code: DefiniteCode::SchemaChanged,
            message: "x".into(),
        };
        for p in [Phase::Installed, Phase::Windows, Phase::Streaming] {
            let mut r = at(p);
            r.paused = Some(d.clone());
            assert_eq!(next(&r, false), Step::Paused(d.clone()));
            assert_eq!(next(&r, true), Step::Cancel);
        }
        assert_eq!(next(&at(Phase::Windows), true), Step::Cancel);
    }
}
