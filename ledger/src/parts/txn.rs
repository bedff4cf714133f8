//! One part transaction of a key-partitioned replay ([`crate::parts`]): the owner check,
//! the ledger write first (the main cursor's CAS for part 0, the part row's for the
//! others), the steps of its partition, and its COMMIT between its fault points.
use crate::apply::{commit_between, rollback_quietly, run_steps, write_cursor, ApplyError};
use crate::dml::Dml;
use crate::group::ReplayGroup;
use crate::parts_plan::{part_steps_within, PartStep, PartsTxn};
use crate::plan::Step;
use crate::target::{self, check_owner, PartRow, ReplayCursor, TargetCtx, CURSOR_PARTS};
use crate::util::{my, my_is_dup};
use kernel::{failpoint, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, IsolationLevel, Params, Transaction, TxOpts};

/// How one part (or the whole transaction) ended without error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ended {
    Committed,
    /// A cursor CAS matched no row: T moved, re-plan.
    Moved,
}

/// COMMITs part 0 of `t` between the main cursor's fault points; a COMMIT without an
/// answer is [`ApplyError::Unknown`].
pub(super) async fn commit_main(
    tx: Transaction<'_>,
    ctx: &TargetCtx,
    t: &PartsTxn,
) -> Result<Ended, ApplyError> {
    failpoint::hit("ledger.parts.before_main_commit");
    let what = format!(
        "{} replay part 0/{} to {} (+{})",
        ctx.who(),
        t.parts,
        t.main.next.end.pos,
        t.main.next.rows_done
    );
    let points = ["ledger.groups.before_commit", "ledger.groups.after_commit"];
    commit_between(tx, &what, points).await?;
    Ok(Ended::Committed)
}

fn tx_opts(iso: Option<IsolationLevel>) -> TxOpts {
    let mut o = TxOpts::default();
    o.with_isolation_level(iso);
    o
}

/// Part 0 up to (not including) its COMMIT: owner check, main cursor CAS, the steps of
/// partition 0. Returns the open transaction (None when T's cursor moved).
pub(super) async fn prepare_main<'a>(
    conn: &'a mut Conn,
    ctx: &TargetCtx,
    groups: &[ReplayGroup],
    dml: &Dml,
    t: &PartsTxn,
    iso: Option<IsolationLevel>,
) -> Result<(Ended, Option<Transaction<'a>>), ApplyError> {
    let what = format!(
        "{} replay part 0/{} to {} (+{})",
        ctx.who(),
        t.parts,
        t.main.next.end.pos,
        t.main.next.rows_done
    );
    let within = ctx.within.as_ref();
    let steps = part_steps_within(
        &ctx.schema,
        &ctx.keyer,
        groups,
        &t.main.pieces,
        (t.parts, 0),
        within,
    )?;
    let tx = conn
        .start_transaction(tx_opts(iso))
        .await
        .map_err(my(&what))?;
    let first = LedgerWrite::Main(t.main.expect.as_ref(), &t.main.next);
    Ok(match guarded(tx, ctx, dml, first, steps).await? {
        Some(tx) => (Ended::Committed, Some(tx)),
        None => (Ended::Moved, None),
    })
}

/// The ledger write that opens a part transaction (DESIGN §3.5: first, after the owner
/// check): the main cursor's CAS for part 0, the part row's for the others.
enum LedgerWrite<'a> {
    Main(Option<&'a ReplayCursor>, &'a ReplayCursor),
    Part(Option<&'a PartRow>, &'a PartRow),
}

/// Owner check, the ledger write, then the steps; any failure rolls back. Returns the open
/// transaction, or None when T moved under the ledger write (rolled back, nothing ran).
async fn guarded<'c>(
    mut tx: Transaction<'c>,
    ctx: &TargetCtx,
    dml: &Dml,
    first: LedgerWrite<'_>,
    steps: Vec<Step>,
) -> Result<Option<Transaction<'c>>, ApplyError> {
    if let Err(e) = check_owner(&mut tx, ctx).await {
        rollback_quietly(tx).await;
        return Err(e.into());
    }
    let wrote = match first {
        LedgerWrite::Main(expect, next) => write_cursor(&mut tx, ctx, expect, next).await,
        LedgerWrite::Part(expect, next) => write_part_row(&mut tx, ctx, expect, next).await,
    };
    match wrote {
        Ok(true) => {}
        Ok(false) => {
            rollback_quietly(tx).await;
            return Ok(None);
        }
        Err(e) => {
            rollback_quietly(tx).await;
            return Err(e.into());
        }
    }
    if let Err(e) = run_steps(&mut tx, dml, steps).await {
        rollback_quietly(tx).await;
        return Err(e.into());
    }
    Ok(Some(tx))
}

/// Part p >= 1 of one replay transaction, COMMIT included (nothing when the plan skips it).
pub(super) async fn run_part(
    conn: &mut Conn,
    ctx: &TargetCtx,
    groups: &[ReplayGroup],
    dml: &Dml,
    t: &PartsTxn,
    p: usize,
    iso: Option<IsolationLevel>,
) -> Result<Ended, ApplyError> {
    let Some(PartStep::Apply {
        expect,
        next,
        pieces,
    }) = t.others.get(p - 1)
    else {
        return Ok(Ended::Committed);
    };
    let what = format!(
        "{} replay part {p}/{} to {} (+{})",
        ctx.who(),
        t.parts,
        next.cursor.end.pos,
        next.cursor.rows_done
    );
    let within = ctx.within.as_ref();
    let steps = part_steps_within(
        &ctx.schema,
        &ctx.keyer,
        groups,
        pieces,
        (t.parts, p),
        within,
    )?;
    let tx = conn
        .start_transaction(tx_opts(iso))
        .await
        .map_err(my(&what))?;
    let first = LedgerWrite::Part(expect.as_ref(), next);
    let Some(tx) = guarded(tx, ctx, dml, first, steps).await? else {
        return Ok(Ended::Moved);
    };
    tx.commit()
        .await
        .map_err(|e| ApplyError::Unknown(format!("COMMIT of {what}: {e}")))?;
    failpoint::hit("ledger.parts.after_part_commit");
    Ok(Ended::Committed)
}

/// Writes a part row as the first ledger write of its transaction: an insert when T has
/// none, otherwise a conditional update from the whole expected row. False when T moved.
async fn write_part_row(
    tx: &mut Transaction<'_>,
    ctx: &TargetCtx,
    expect: Option<&PartRow>,
    next: &PartRow,
) -> Result<bool> {
    let what = format!(
        "advancing the target ledger's part {} cursor of {}",
        next.part,
        ctx.who()
    );
    let mut values = vec![next.parts.into()];
    values.extend(target::cursor_values(&next.cursor));
    values.push(ctx.token.into());
    let Some(x) = expect else {
        let mut params = vec![ctx.job.0.into(), ctx.generation.0.into(), next.part.into()];
        params.extend(values);
        let r = tx
            .exec_drop(
                format!(
                    "INSERT INTO {} (job_id, generation, part, parts, file, pos, gtid, rows_done, group_digest, token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    ctx.t(CURSOR_PARTS)
                ),
                Params::Positional(params),
            )
            .await;
        return match r {
            Ok(()) => Ok(true),
            Err(e) if my_is_dup(&e) => Ok(false),
            Err(e) => Err(my(&what)(e)),
        };
    };
    let mut params = values;
    params.extend([
        ctx.job.0.into(),
        ctx.generation.0.into(),
        x.part.into(),
        x.parts.into(),
    ]);
    params.extend(target::cursor_values(&x.cursor));
    tx.exec_drop(
        format!(
            "UPDATE {} SET parts = ?, file = ?, pos = ?, gtid = ?, rows_done = ?, group_digest = ?, token = ?
             WHERE job_id = ? AND generation = ? AND part = ? AND parts = ? AND file = ? AND pos = ? AND gtid <=> ? AND rows_done = ? AND group_digest = ?",
            ctx.t(CURSOR_PARTS)
        ),
        Params::Positional(params),
    )
    .await
    .map_err(my(&what))?;
    Ok(tx.affected_rows() == 1)
}
