//! Periodic verification of STREAMING tables (`serve --verify-every DURATION`, DESIGN §17,
//! issue 17 item 6): each STREAMING table of the process in turn is compared with its
//! source at a pinned binlog point by `verify`'s independent comparator (the activation
//! audit's [`crate::table::audit::FieldComparer`], every row); a difference pauses the
//! table with `verify_failed` naming the first differing keys.
//!
//! # Why the comparison is exact while the table streams
//!
//! The table's own task runs it, between two replay batches: its continuous replay is
//! stopped at a batch boundary first (the follow's cancel is checked only between
//! batches, and every batch is whole groups with T's cursor in the same transaction), so
//! nothing else writes the table's target rows meanwhile. The comparer then pins the source
//! in a consistent snapshot at P, waits until L holds P, replays the table up to exactly P
//! with the job's own replayer under the job's lease (T's cursor and fencing hold), and
//! compares the two snapshots (`crate::table::audit::fields`, `crate::verify::pinned`):
//! both show the table at P, so a difference is a real one, never a write in flight.
//! Continuous replay then resumes from T's cursor, exactly as after a restart.
//!
//! # Admission and rate
//!
//! The replay to P writes the target: it runs under the table's target-write permits
//! (`--apply-streams` of them, all or none) like activation, and the source snapshot is a
//! read view under one read-window permit, taken in the same order as activation's field
//! check (write permits, then the read permit; a read-permit holder never waits for a
//! write permit, so no cycle forms). [`crate::table::turns::Turns`] gives one turn at a time across the
//! process, in the order tables asked (tokio's mutex is fair, FIFO), and starts a turn no
//! sooner than DURATION after the previous one ended: at most one verify runs at a time,
//! and the verify load is at most walk / (walk + DURATION) of one read permit. A table
//! re-queues after its turn, so N STREAMING tables are each verified about every
//! N x (DURATION + walk).
//!
//! # What is recorded, and what resume does
//!
//! Every verify that ends with a result is counted in `periodic_verifies` (time, rows,
//! differing rows, P; the last clean one kept apart), which `status` shows, and reported to
//! [`crate::table::ctx::Events::verified`] (metrics). A difference is also recorded in
//! `field_checks` (origin `verify`, the first keys and values as hex) before the table
//! pauses. `backfill resume` after the operator's fix re-enters the table from the top:
//! the re-audit on restart runs its own field check, and then, because the last periodic
//! verify of the table found a difference, the table re-verifies at once (before its
//! first streaming batch, without waiting for DURATION): a clean result clears the
//! finding and the table streams on; a difference pauses it again with the keys.
use crate::table::audit::{FieldConfig, FieldRequest, FieldSample};
use crate::table::ctx::JobCtx;
use crate::table::replay::{Outcome, Replayer};
use kernel::error::DefiniteCode;
use kernel::log::LSeq;
use kernel::{Error, Result};
use std::future::Future;
use tokio_util::sync::CancellationToken;

/// Continuous replay of a STREAMING table, interrupted by its periodic verifies when
/// `serve --verify-every` is set. `follow(stop)` is the table's continuous replay until
/// `stop` (it returns at a batch boundary); `verify()` is one [`compare`] under the
/// table's target-write permits. Returns when the job is asked to stop; a verify that
/// found a difference returns `verify_failed` (the caller pauses the table with it).
pub async fn stream<F, FF, V, VF>(ctx: &JobCtx, follow: F, verify: V) -> Result<Outcome>
where
    F: Fn(CancellationToken) -> FF,
    FF: Future<Output = Result<Outcome>>,
    V: Fn() -> VF,
    VF: Future<Output = Result<Option<FieldSample>>>,
{
    let Some(turns) = ctx.cfg.verify.clone() else {
        return follow(ctx.cancel.clone()).await;
    };
    let (job, g) = (ctx.id(), ctx.generation());
    // Re-verify first after a resume: the last periodic verify found a difference.
    let mut now = crate::store::verifies::read(&ctx.pool, job, g)
        .await?
        .is_some_and(|v| v.last_differing > 0);
    let mut total = Outcome::default();
    loop {
        let stop = ctx.cancel.child_token();
        let run = follow(stop.clone());
        tokio::pin!(run);
        let turn = tokio::select! {
            r = &mut run => return r.map(|o| add(total, o)),
            t = turns.turn(now) => t,
        };
        stop.cancel();
        let o = run.await?;
        // A run that applied a schema version ended there: the caller goes on with that
        // version's target context, and verifies with it (DESIGN §16).
        let applied = o.schema_applied.is_some();
        total = add(total, o);
        if ctx.cancel.is_cancelled() || applied {
            return Ok(total);
        }
        if let Some(sample) = verify().await? {
            judge(ctx, &sample).await?;
        }
        drop(turn);
        now = false;
    }
}

/// The counts of two runs of the follow, and the later one's cursor.
fn add(a: Outcome, b: Outcome) -> Outcome {
    Outcome {
        groups_applied: a.groups_applied + b.groups_applied,
        groups_held: a.groups_held + b.groups_held,
        batches: a.batches + b.batches,
        cursor: b.cursor.or(a.cursor),
        l_seq: b.l_seq.max(a.l_seq),
        ..b
    }
}

/// Records a verify's result (`periodic_verifies`; a difference also in `field_checks`,
/// origin `verify`; a clean one clears it), reports it, and turns a difference into
/// `verify_failed`.
async fn judge(ctx: &JobCtx, sample: &FieldSample) -> Result<()> {
    let (job, g) = (ctx.id(), ctx.generation());
    let differing = sample.differences();
    let mut record = sample.record();
    record.origin = crate::store::field_checks::VERIFY.to_string();
    record.mode = format!("periodic ({})", sample.mode);
    if differing > 0 {
        crate::store::field_checks::record(&ctx.pool, job, g, &record).await?;
    } else {
        let verify = crate::store::field_checks::VERIFY;
        crate::store::field_checks::clear(&ctx.pool, job, g, verify).await?;
    }
    let outcome = crate::store::verifies::Outcome {
        rows: sample.rows_checked,
        differing,
        ms: sample.elapsed_ms,
        position: sample.position.clone(),
    };
    crate::store::verifies::record(&ctx.pool, job, g, &outcome).await?;
    ctx.events.verified(job, differing);
    tracing::info!(%job, rows = sample.rows_checked, differing, ms = sample.elapsed_ms, position = ?sample.position, "periodic verify");
    match differing {
        0 => Ok(()),
        _ => Err(failed(ctx, sample)),
    }
}

/// One pinned comparison of the table (every row) with `replayer`, under one read-window
/// permit; None when the walk did not end (the job was asked to stop): no result.
pub async fn compare(
    ctx: &JobCtx,
    replayer: Replayer<'_>,
    b_seq: LSeq,
) -> Result<Option<FieldSample>> {
    let (job, g) = (ctx.id(), ctx.generation());
    let owner = format!("job {job} {g} periodic verify");
    let permit = ctx
        .admission
        .acquire_read(&owner, ctx.cfg.permit_timeout, &ctx.cancel)
        .await
        .map_err(|e| Error::transient(format!("{owner}: {e}")))?;
    let compared = ctx
        .fields
        .compare(FieldRequest {
            replayer: &replayer,
            b_seq,
            key: crate::store::jobs::key_columns(&ctx.schema),
            config: FieldConfig {
                sample_every: 1,
                chunk_rows: ctx.cfg.fields.chunk_rows,
            },
            seed: 0,
        })
        .await;
    crate::io::bounded::settle(permit, &compared);
    let sample = compared?;
    if !sample.complete {
        tracing::warn!(%job, rows = sample.rows_checked, "periodic verify did not reach the end of the key space (stopping?): no result recorded");
        return Ok(None);
    }
    Ok(Some(sample))
}

/// The pause reason of a verify that found a difference.
fn failed(ctx: &JobCtx, s: &FieldSample) -> Error {
    let j = &ctx.job;
    Error::definite(
        DefiniteCode::VerifyFailed,
        format!(
            "periodic verify at binlog {} found {} differing row(s) of {}.{} (target {}.{}): \
             {}. Fix the target rows (runbooks/pauses.md, verify_failed), then `backfill \
             resume {}`: serve re-verifies the table before it streams on",
            s.position.as_deref().unwrap_or("?"),
            s.differences(),
            j.source.db,
            j.source.table,
            j.target.db,
            j.target.table,
            s.summary(),
            j.job_id,
        ),
    )
}
