//! Cancellation through CANCELING (DESIGN §8): `backfill cancel JOB` records a persisted
//! command; the job's task (in a running `serve`, or the next one started) completes it here.
//!
//! Why it is safe:
//! * The command only asks. The job task stops at its next boundary (the window loop checks
//!   its token before taking a window; continuous replay checks it between batches), so an
//!   operation already taken finishes and its permit is released on its own confirmed
//!   release (read view closed, target write committed or resolved) before this runs.
//! * K fences every effect of this process: while an operation of the job has an unknown
//!   release (a hold: a timed-out write whose KILL was not confirmed), K is not written,
//!   since that statement could still commit after it; a restarted serve completes it.
//! * J records CANCELING first, so a crash anywhere below re-enters here (J is the authority
//!   on the phase, and a CANCELING table never takes a window again: `crate::table::next` routes it
//!   here). The K intent is written once: a K marker already in L is reused, so a restart
//!   never writes a second barrier at another position.
//! * K is awaited in L before J records CANCELLED(K): from K on the capture set treats the
//!   table's intents as obsolete (kernel `capture`), so a LOW/HIGH/F that reaches the
//!   binlog after K is no barrier and revives nothing (DESIGN §11, cancellation).
//! * A table whose activation credential is in T (T decides, not J) replays every group of
//!   L up to K before CANCELLED(K): its published target stays exactly as the source was at
//!   K. A table without the credential keeps its partial target as it is, unpublished; the
//!   target is never deleted.
//! * A table without the credential is never given one once a cancel is recorded: the
//!   finish checks for a recorded cancel as the last step before T records the credential
//!   (`crate::table::activation`), so a cancel recorded while (B, F] replays ends without a drain.
//! * Only then is the job marked cancelled in the jobs store, which frees the source table
//!   for a new generation with a new, empty target (the old target stays claimed).
use crate::table::ctx::JobCtx;
use crate::table::markers;
use crate::table::replay::{self, ReplayConfig, Replayer, Scope};
use crate::table::schema;
use kernel::control::{Intent, IntentKind};
use kernel::error::DefiniteCode;
use kernel::position::BinlogPos;
use kernel::{Error, Result};
use ledger::record::Phase;
use tokio_util::sync::CancellationToken;

/// How a cancellation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cancelled {
    /// Where K landed in the source binlog.
    pub k: BinlogPos,
    /// True when the table was activated and its capture was drained up to K.
    pub drained: bool,
}

/// Completes the cancellation of the job: CANCELING in J, K written and durable in L, the
/// capture drained up to K when T holds the activation credential, CANCELLED(K) in J and
/// the job marked cancelled. Idempotent: re-entered from the top after any crash.
pub async fn complete(ctx: &JobCtx, replay_cfg: &ReplayConfig) -> Result<Cancelled> {
    let mut head = crate::table::ensure_journal(ctx).await?;
    if head.record.phase == Phase::Cancelled {
        let k = head.record.k.clone().ok_or_else(|| {
            Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!(
                    "job {}: the journal is CANCELLED without a cancel point (K)",
                    ctx.id()
                ),
            )
        })?;
        crate::store::jobs::mark_cancelled(&ctx.pool, ctx.id()).await?;
        return Ok(Cancelled { k, drained: false });
    }
    if head.record.phase != Phase::Canceling {
        let mut next = head.record.clone();
        next.phase = Phase::Canceling;
        next.paused = None;
        head = ctx.journal.append(&ctx.lease, &head, next).await?;
        tracing::info!(job = %ctx.id(), "CANCELING recorded in the journal");
    }
    kernel::failpoint::hit(crate::table::faults::CANCEL_AFTER_CANCELING);
    refuse_while_held(ctx)?;
    let scope = Scope::of(&ctx.job, ctx.stream.clone());
    let (k_seq, k_pos) = match replay::find_marker(&ctx.pool, &scope, IntentKind::K, None).await? {
        Some(m) => (m.seq, m.end.pos),
        None => {
            let k = Intent::new(ctx.id(), ctx.generation(), IntentKind::K, None, None);
            let seen =
                markers::write_and_await(ctx, &k, crate::table::faults::CANCEL_AFTER_K_WRITTEN)
                    .await?;
            (seen.seq, seen.end.pos)
        }
    };
    tracing::info!(job = %ctx.id(), k = %k_pos, "the cancel point (K) is durable in the change log");
    let drained = activated(ctx).await?;
    if drained {
        let b = head.record.b.as_ref().ok_or_else(|| {
            Error::definite(
                DefiniteCode::EvidenceConflict,
                format!(
                    "job {}: the target ledger holds an activation credential but the journal \
                     records no start position (B)",
                    ctx.id()
                ),
            )
        })?;
        let b = replay::find_marker(&ctx.pool, &scope, IntentKind::B, Some(b))
            .await?
            .ok_or_else(|| {
                Error::definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!(
                        "job {}: the change log holds no start marker (B) at {b}",
                        ctx.id()
                    ),
                )
            })?;
        drain(ctx, &scope, replay_cfg, b.seq, k_seq).await?;
    }
    let mut next = head.record.clone();
    next.phase = Phase::Cancelled;
    next.k = Some(k_pos.clone());
    ctx.journal.append(&ctx.lease, &head, next).await?;
    kernel::failpoint::hit(crate::table::faults::CANCEL_AFTER_CANCELLED);
    crate::store::jobs::mark_cancelled(&ctx.pool, ctx.id()).await?;
    kernel::failpoint::hit(crate::table::faults::CANCEL_AFTER_JOBS_ROW);
    tracing::info!(job = %ctx.id(), k = %k_pos, drained, "CANCELLED(K)");
    Ok(Cancelled { k: k_pos, drained })
}

/// Replays the table up to K (its last changes before the cancel), schema version after
/// version (DESIGN §16): a run ends after a DDL's step and the next one writes with that
/// version's target context; a DDL without a sealed version is sealed when the proof
/// holds, else the drain stops with the refusal.
async fn drain(
    ctx: &JobCtx,
    scope: &Scope,
    replay_cfg: &ReplayConfig,
    b_seq: kernel::log::LSeq,
    k_seq: kernel::log::LSeq,
) -> Result<()> {
    let mut chain = schema::load(
        &ctx.pool,
        ctx.id(),
        ctx.generation(),
        &ctx.schema,
        &ctx.stream,
    )
    .await?;
    loop {
        let tctx = crate::table::activation::ctx_at(ctx, &chain).await?;
        let r = Replayer {
            pool: &ctx.pool,
            scope,
            source: &ctx.source,
            target: &ctx.target,
            ctx: &tctx,
            cfg: replay_cfg,
            chain: Some(&chain),
        };
        // The job's token has fired (that is how the cancel reached the task): the permit
        // wait is bounded by its deadline only.
        let run = r.run(b_seq, replay::Until::CatchUp { upto: k_seq });
        let what = "drain of the capture up to the cancel point (K)";
        let n = replay_cfg.apply_streams;
        let out = crate::table::activation::under_write_permits(
            ctx,
            what,
            n,
            &CancellationToken::new(),
            run,
        )
        .await;
        match out {
            Ok(o) if o.schema_applied.is_some() => {}
            Ok(o) => {
                tracing::info!(job = %ctx.id(), groups = o.groups_applied, "capture drained up to the cancel point (K)");
                return Ok(());
            }
            Err(Error::Definite(d)) if d.code == DefiniteCode::SchemaChanged => {
                crate::table::activation::seal_after_stop(ctx, &mut chain, b_seq, d).await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// K must fence every effect of the job: an operation of this process whose release is
/// unknown (a hold, e.g. a timed-out target write whose KILL was not confirmed) could still
/// commit after K. So K is not written while the job has holds; the operator confirms on
/// the server that the statement ended and restarts serve (a new process has no holds).
fn refuse_while_held(ctx: &JobCtx) -> Result<()> {
    let mine = format!("job {} ", ctx.id());
    let snap = ctx.admission.snapshot();
    let held: Vec<String> = snap
        .holds()
        .filter(|h| h.owner.starts_with(&mine))
        .map(|h| format!("{} ({})", h.owner, h.reason))
        .collect();
    if held.is_empty() {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::ReleaseUnconfirmed,
        format!(
            "job {}: the cancel point (K) is not written while {} operation(s) of the job may still run: {}; \
             check the servers (SHOW PROCESSLIST) and KILL them, then restart serve: the \
             cancel completes then",
            ctx.id(),
            held.len(),
            held.join("; ")
        ),
    ))
}

/// True when T holds the table-generation's activation credential (T decides, not J).
async fn activated(ctx: &JobCtx) -> Result<bool> {
    let mut conn = ctx
        .target
        .connect(crate::io::pool::Use::Control, "(target)")
        .await?;
    let r = async {
        ledger::target::ensure_ledger_tables(&mut conn, &ctx.tctx.schema.database).await?;
        ledger::target::read_activation(&mut conn, &ctx.tctx).await
    }
    .await;
    conn.close().await;
    Ok(r?.is_some())
}
