//! Key-partitioned replay apply: one source transaction's changes applied over P target
//! connections at once, each key partition in its own target transaction with its own
//! cursor in T (issue 6; DESIGN §3.5, §6, §9).
//!
//! Why it is safe:
//! - The target has no unique key beyond the primary key, no trigger and no foreign key
//!   (DESIGN §9: install refuses them), and replay writes by key and full image only (§6).
//!   A key's final state therefore depends only on the ordered changes OF THAT KEY:
//!   changes of different keys commute, and a partition of the keys can be replayed
//!   independently of the others.
//! - Keys are split into P partitions by [`partition_of`], a fixed function whose values
//!   are persisted in meaning (a part row says "partition p of P holds its keys through
//!   here"), so it never changes (golden test in `tests/parts_plan.rs`). A key-changing
//!   update's delete belongs to the partition of the old key, its upsert to the new one.
//! - A replay transaction t (main cursor E -> N) becomes P part transactions. Part 0 is
//!   exactly today's transaction restricted to partition 0: it writes the main cursor
//!   (`_backfill_ledger_cursor`, unchanged format and meaning) with the existing
//!   insert-or-CAS. Part p >= 1 writes its own row of `_backfill_ledger_cursor_parts` with
//!   the same insert-or-CAS rule, first in its transaction after the owner check, then
//!   only the steps of its partition (folded per key, in key order).
//! - Part 0's COMMIT is sent only after every other part of t has COMMITted OK or was
//!   skipped (its row already at or after N, or no change of its partition to apply).
//!   Hence: main cursor >= X implies every partition applied everything through X. Audit,
//!   activation, status lag and the restart point keep reading ONLY the main cursor.
//!   The other parts do not wait for part 0: each runs its transactions in plan order and
//!   may be several transactions ahead of main (exactly the state a crash leaves), but
//!   never into a transaction of another scheme before main has caught up.
//! - A part row AHEAD of main (main's COMMIT failed or the process died after some parts
//!   committed) means partition p already holds its changes through that row: the next
//!   plan for part p starts at max(main, row p). A row at or behind main means nothing.
//!   Cursors name source groups and a sub-cursor counted in changes, never batches, so
//!   any txn_rows on restart works (§3.1). A lost COMMIT of a part that lands later makes
//!   the retry's CAS fail, and the apply re-plans from T, exactly as for the main cursor.
//! - Changing P between runs: ahead rows carry the scheme (`parts`) in force; two ahead
//!   rows of different schemes are an evidence conflict. That scheme is kept until main
//!   has caught up with every ahead row, then the configured P takes over; rows at or
//!   behind main are rewritten by CAS when next used.
//! - One applier per table-generation at a time: the lease's fencing token (checked
//!   under a share lock first in every part transaction) and the caller's KILL-confirm of
//!   a failed call's connections guarantee it. A COMMIT lost on the wire is no second
//!   applier: its CAS already ran, so its row lock makes the re-plan's share-locked read
//!   of every cursor wait for its outcome. Two appliers truly running at once with the
//!   same token are still serialised part by part when they use the same P (each part's
//!   CAS; tested), but NOT across different P: a part of one scheme and the parts of
//!   another cover different key sets and share no row.
//! - A published target may briefly show part of a source transaction (some partitions
//!   committed): DESIGN §6 already says so for chunked large transactions.
//!
//! Locks between parts: parts write interleaved keys of one table at once, and part 0
//! waits (in this process, invisible to InnoDB) for the others before its COMMIT. Under
//! READ COMMITTED a part takes record locks only on its own keys and cursor row (no gap
//! locks: a DELETE of an absent key locks nothing), so no part can wait for part 0 and
//! part 0 runs its DML concurrently. A session whose binlog_format is STATEMENT refuses
//! DML under READ COMMITTED; there the session default isolation is kept and part 0 starts
//! only after the others committed, so no wait can cross the in-process one. Deadlocks
//! (1213) and lock wait timeouts (1205) between parts are transient: nothing of that part
//! committed, and the whole apply re-plans from T a few times before giving up; those
//! later attempts start part 0 only after the others committed, so even a lock the
//! target should not have (a trigger writing one shared row: DESIGN §9 refuses triggers,
//! tests add them) costs one innodb_lock_wait_timeout, never a stall.
use crate::apply::{
    self, commit_between, rollback_quietly, run_steps, write_cursor, Applied, ApplyError,
};
use crate::dml::{Dml, Limits};
use crate::group::ReplayGroup;
pub use crate::partition::{partition_of, partition_of_int, MAX_PARTS};
use crate::parts_plan::{
    change_parts, part_steps, plan_parts, PartStep, PartsInput, PartsPlan, PartsTxn,
};
use crate::plan::{GroupSummary, Step};
use crate::target::{self, check_owner, PartRow, ReplayCursor, TargetCtx, CURSOR_PARTS};
use crate::util::{my, my_is_dup};
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::{failpoint, Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, IsolationLevel, Params, Transaction, TxOpts};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use tokio::sync::watch;

/// How the part sessions run (the defaults are what [`apply_groups_parts`] uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartsOpts {
    /// Part transactions at READ COMMITTED (unless a session's binlog_format is
    /// STATEMENT); false keeps the session default and serialises part 0 after the others.
    pub read_committed: bool,
    /// Whole-apply attempts when a part fails transiently on a live connection.
    pub attempts: u32,
}

impl Default for PartsOpts {
    fn default() -> PartsOpts {
        PartsOpts {
            read_committed: true,
            attempts: 4,
        }
    }
}

/// Replays `groups` like [`apply::apply_groups`], split over `conns.len()` key partitions
/// (the configured P; 1 = exactly `apply_groups` on `conns[0]`). If T holds part rows
/// ahead of the main cursor under another scheme, that scheme is finished first on the
/// given connections (parts may share a connection, one transaction at a time).
///
/// Errors: like `apply_groups`. [`ApplyError::Unknown`] when any part's COMMIT got no
/// answer: the caller re-calls on NEW connections (it re-plans from T). After any error
/// other than a server-answered definite one, a statement may still run on ANY of the
/// connections: the caller KILL-confirms every connection id it passed in.
pub async fn apply_groups_parts(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
) -> Result<Applied, ApplyError> {
    apply_groups_parts_with(conns, ctx, prev, groups, limits, PartsOpts::default()).await
}

/// [`apply_groups_parts`] with explicit session options (benchmarks compare them).
pub async fn apply_groups_parts_with(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
    opts: PartsOpts,
) -> Result<Applied, ApplyError> {
    if conns.is_empty() || conns.len() > MAX_PARTS {
        return Err(Error::definite(
            DefiniteCode::Usage,
            format!(
                "{}: replay over {} target connections: use 1..={MAX_PARTS}",
                ctx.who(),
                conns.len()
            ),
        )
        .into());
    }
    let mut committed = false;
    let attempts = opts.attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let iso = isolation(conns, opts).await?;
        // After a transient failure part 0 no longer overlaps the others: a lock the
        // target holds beyond DESIGN §9 (a trigger's shared counter row, say) could make
        // a part wait for part 0 while part 0 waits for it, which InnoDB cannot see and
        // only innodb_lock_wait_timeout ends.
        let mode = Mode {
            iso,
            overlap: iso.is_some() && attempt == 1,
        };
        match replan_loop(conns, ctx, prev, groups, limits, mode, &mut committed).await {
            Err(ApplyError::Failed(e)) if e.is_transient() && attempt < attempts => {
                if !all_alive(conns).await {
                    return Err(e.into());
                }
                tracing::info!(target: "ledger::parts", attempt, error = %e, "part transaction failed on a live connection: re-planning from T");
                tokio::time::sleep(std::time::Duration::from_millis(20 * u64::from(attempt))).await;
            }
            Ok(a) => {
                return Ok(if committed { Applied::Committed } else { a });
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether every connection still answers (then a transient failure was answered by the
/// server, its transaction rolled back, and nothing of it runs any more).
async fn all_alive(conns: &mut [Conn]) -> bool {
    for c in conns.iter_mut() {
        if c.ping().await.is_err() {
            return false;
        }
    }
    true
}

/// How the part transactions of one attempt run.
#[derive(Clone, Copy, Debug)]
struct Mode {
    iso: Option<IsolationLevel>,
    /// Part 0 runs its DML while the other parts run theirs (else: after they committed).
    overlap: bool,
}

/// The isolation of the part sessions: READ COMMITTED unless asked otherwise or a
/// session logs statements (`binlog_format=STATEMENT` refuses DML under READ COMMITTED).
async fn isolation(conns: &mut [Conn], opts: PartsOpts) -> Result<Option<IsolationLevel>> {
    if !opts.read_committed || conns.len() == 1 {
        return Ok(None);
    }
    for c in conns.iter_mut() {
        let f: Option<String> = c
            .query_first("SELECT @@SESSION.binlog_format")
            .await
            .map_err(my("reading the target session's binlog_format"))?;
        if f.is_some_and(|f| f.eq_ignore_ascii_case("STATEMENT")) {
            return Ok(None);
        }
    }
    Ok(Some(IsolationLevel::ReadCommitted))
}

async fn replan_loop(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
    mode: Mode,
    committed: &mut bool,
) -> Result<Applied, ApplyError> {
    let summaries: Vec<GroupSummary> = groups.iter().map(ReplayGroup::summary).collect();
    let dml = Dml::new(&ctx.schema, limits);
    for _replan in 0..3 {
        let (main, rows) = target::replay_cursors(&mut conns[0], ctx).await?;
        let input = PartsInput {
            main: main.as_ref(),
            rows: &rows,
            configured: conns.len(),
            prev,
            groups: &summaries,
            txn_rows: limits.txn_rows,
        };
        let touches = |g: usize, i: usize, parts: usize| {
            change_parts(&ctx.schema, &groups[g].changes[i], parts)
        };
        let txns = match plan_parts(input, touches).map_err(Error::Definite)? {
            PartsPlan::AlreadyCommitted => return Ok(Applied::AlreadyCommitted),
            PartsPlan::Apply(t) => t,
        };
        if conns.len() == 1 && txns.iter().all(|t| t.parts == 1) {
            return apply::apply_groups(&mut conns[0], ctx, prev, groups, limits).await;
        }
        let mut moved = false;
        // Parts run ahead of part 0 only within one scheme: at a switch every part waits
        // until main has committed the old scheme's last transaction (two schemes ahead
        // of main at once would be ambiguous evidence).
        for seg in txns.chunk_by(|a, b| a.parts == b.parts) {
            let (ended, any) = run_segment(conns, ctx, groups, &dml, seg, mode).await?;
            *committed |= any;
            if ended == Ended::Moved {
                moved = true;
                break;
            }
        }
        if !moved {
            return Ok(Applied::Committed);
        }
    }
    Err(Error::transient(format!(
        "{}: T's cursors kept moving under this apply (another writer?)",
        ctx.who()
    ))
    .into())
}

/// How one part (or the whole transaction) ended without error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Committed,
    /// A cursor CAS matched no row: T moved, re-plan.
    Moved,
}

/// A task's end: how it ended and whether it committed a main transaction.
type TaskOut = Result<(Ended, bool), ApplyError>;
type Task<'a> = Pin<Box<dyn Future<Output = TaskOut> + Send + 'a>>;

/// Polls every task to completion, concurrently on this task (they borrow the caller's
/// connections, so they cannot be spawned).
async fn join_all(mut tasks: Vec<Task<'_>>) -> Vec<TaskOut> {
    let mut out: Vec<Option<TaskOut>> = (0..tasks.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (t, o) in tasks.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match t.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// How far each connection got in a segment: `done[c]` transactions have every part of
/// connection c committed (or skipped); `failed` stops everyone at the next boundary.
#[derive(Debug)]
struct Progress {
    done: Vec<usize>,
    failed: bool,
}

type Board = watch::Sender<Progress>;

/// Consecutive replay transactions of one scheme. Part p >= 1 runs on connection `p % n`,
/// each connection its parts in plan order and free to run ahead; part 0 runs on
/// connection 0 after that connection's other parts of the same transaction, and
/// COMMITs transaction k only when every connection has committed its parts of k.
async fn run_segment(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    groups: &[ReplayGroup],
    dml: &Dml,
    seg: &[PartsTxn],
    mode: Mode,
) -> Result<(Ended, bool), ApplyError> {
    let n = conns.len();
    let (board, _) = watch::channel(Progress {
        done: vec![0; n],
        failed: false,
    });
    let board = &board;
    let mut it = conns.iter_mut();
    let Some(first) = it.next() else {
        return Err(Error::transient("no target connection").into());
    };
    let mut tasks: Vec<Task<'_>> = Vec::with_capacity(n);
    let job = Job {
        ctx,
        groups,
        dml,
        seg,
        mode,
        board,
        n,
    };
    tasks.push(Box::pin(job.main_conn(first)));
    for (i, c) in it.enumerate() {
        tasks.push(Box::pin(job.part_conn(c, i + 1)));
    }
    let (mut unknown, mut definite, mut transient) = (None, None, None);
    let (mut ended, mut any) = (Ended::Committed, false);
    for o in join_all(tasks).await {
        match o {
            Ok((e, a)) => {
                any |= a;
                if e == Ended::Moved {
                    ended = Ended::Moved;
                }
            }
            Err(ApplyError::Unknown(m)) => unknown = unknown.or(Some(m)),
            Err(ApplyError::Failed(e)) if e.is_transient() => transient = transient.or(Some(e)),
            Err(ApplyError::Failed(e)) => definite = definite.or(Some(e)),
        }
    }
    if let Some(m) = unknown {
        return Err(ApplyError::Unknown(m));
    }
    if let Some(e) = definite.or(transient) {
        return Err(e.into());
    }
    Ok((ended, any))
}

/// Waits until every other connection committed its parts of transaction `k`; false
/// when one of them failed (or the board is gone).
async fn others_done(rx: &mut watch::Receiver<Progress>, k: usize) -> bool {
    let ready = |s: &Progress| s.failed || s.done.iter().skip(1).all(|&d| d > k);
    rx.wait_for(ready).await.is_ok_and(|s| !s.failed)
}

/// What every connection task of a segment shares.
#[derive(Clone, Copy)]
struct Job<'j> {
    ctx: &'j TargetCtx,
    groups: &'j [ReplayGroup],
    dml: &'j Dml,
    seg: &'j [PartsTxn],
    mode: Mode,
    board: &'j Board,
    n: usize,
}

impl<'j> Job<'j> {
    fn fail(&self) {
        self.board.send_modify(|s| s.failed = true);
    }

    /// Runs this connection's parts p >= 1 of transaction `t`; stops at the first that
    /// did not commit (T moved or an error), after telling the others.
    async fn my_parts(&self, conn: &mut Conn, c: usize, t: &PartsTxn) -> TaskOut {
        for p in (1..t.parts).filter(|p| p % self.n == c) {
            let r = run_part(conn, self.ctx, self.groups, self.dml, t, p, self.mode.iso).await;
            if !matches!(r, Ok(Ended::Committed)) {
                self.fail();
                return r.map(|e| (e, false));
            }
        }
        Ok((Ended::Committed, false))
    }

    /// Connection c >= 1: its parts of every transaction in order, ahead of part 0.
    async fn part_conn(self, conn: &'j mut Conn, c: usize) -> TaskOut {
        for (k, t) in self.seg.iter().enumerate() {
            if self.board.borrow().failed {
                return Ok((Ended::Moved, false));
            }
            let r = self.my_parts(conn, c, t).await?;
            if r.0 != Ended::Committed {
                return Ok(r);
            }
            self.board.send_modify(|s| s.done[c] = k + 1);
        }
        Ok((Ended::Committed, false))
    }

    /// Connection 0: its other parts, then part 0 of each transaction, COMMITted once
    /// every connection is done with that transaction.
    async fn main_conn(self, conn: &'j mut Conn) -> TaskOut {
        let mut rx = self.board.subscribe();
        let mut any = false;
        for (k, t) in self.seg.iter().enumerate() {
            let r = self.my_parts(conn, 0, t).await?;
            if r.0 != Ended::Committed {
                return Ok((r.0, any));
            }
            let tx = if self.mode.overlap {
                let Some(tx) = self.main_tx(conn, t).await? else {
                    return Ok((Ended::Moved, any));
                };
                if !others_done(&mut rx, k).await {
                    rollback_quietly(tx).await;
                    return Ok((Ended::Moved, any));
                }
                tx
            } else {
                if !others_done(&mut rx, k).await {
                    return Ok((Ended::Moved, any));
                }
                let Some(tx) = self.main_tx(conn, t).await? else {
                    return Ok((Ended::Moved, any));
                };
                tx
            };
            if let Err(e) = commit_main(tx, self.ctx, t).await {
                self.fail();
                return Err(e);
            }
            any = true;
        }
        Ok((Ended::Committed, any))
    }

    /// Part 0 of `t` up to its COMMIT; None when T's main cursor moved. Tells the others
    /// to stop when it cannot go on.
    async fn main_tx<'c>(
        &self,
        conn: &'c mut Conn,
        t: &PartsTxn,
    ) -> Result<Option<Transaction<'c>>, ApplyError> {
        match prepare_main(conn, self.ctx, self.groups, self.dml, t, self.mode.iso).await {
            Ok((Ended::Committed, Some(tx))) => Ok(Some(tx)),
            Ok(_) => {
                self.fail();
                Ok(None)
            }
            Err(e) => {
                self.fail();
                Err(e)
            }
        }
    }
}

async fn commit_main(
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
async fn prepare_main<'a>(
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
    let steps = part_steps(&ctx.schema, groups, &t.main.pieces, t.parts, 0)?;
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
    if let Err(e) = run_steps(&mut tx, dml, &ctx.schema, steps).await {
        rollback_quietly(tx).await;
        return Err(e.into());
    }
    Ok(Some(tx))
}

/// Part p >= 1 of one replay transaction, COMMIT included (nothing when the plan skips it).
async fn run_part(
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
    let steps = part_steps(&ctx.schema, groups, pieces, t.parts, p)?;
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
    let what = format!("advancing T's part {} cursor of {}", next.part, ctx.who());
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
