//! Key-partitioned replay apply: one source transaction's changes applied over P target
//! connections at once, each key partition in its own target transaction with its own
//! cursor in T (issue 6; DESIGN §3.5, §6, §9).
//!
//! Why it is safe:
//! - The target has no unique key beyond the table's key, no trigger and no foreign key
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
//! part 0 runs its DML concurrently. That needs every statement to read only its keys'
//! rows: a DELETE of one composite key is written column by column, because the server
//! scans the whole table for a lone row constructor (see `Dml::delete_sql`). A session whose binlog_format is STATEMENT refuses
//! DML under READ COMMITTED; there the session default isolation is kept and part 0 starts
//! only after the others committed, so no wait can cross the in-process one. Deadlocks
//! (1213) and lock wait timeouts (1205) between parts are transient: nothing of that part
//! committed, and the whole apply re-plans from T a few times before giving up; those
//! later attempts start part 0 only after the others committed, so even a lock the
//! target should not have (a trigger writing one shared row: DESIGN §9 refuses triggers,
//! tests add them) costs one innodb_lock_wait_timeout, never a stall.
mod segment;
mod txn;

use crate::apply::{self, replanned, Applied, ApplyError, Replan, REPLANS};
use crate::dml::{Dml, Limits};
use crate::group::ReplayGroup;
pub use crate::partition::{partition_of, partition_of_int, MAX_PARTS};
use crate::parts_plan::{change_parts, plan_parts, PartsInput, PartsPlan};
use crate::plan::GroupSummary;
use crate::target::{self, TargetCtx};
use crate::util::my;
use admission::{retry_with, CancellationToken, RetryError, RetryPolicy};
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, IsolationLevel};
use segment::{run_segment, Mode};
use std::time::Duration;
use txn::Ended;

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
    let policy = RetryPolicy::linear(attempts, Duration::from_millis(20), Duration::MAX);
    let run = Run {
        ctx,
        prev,
        groups,
        limits,
        opts,
        attempts,
    };
    let tries = retry_with(
        &mut (conns, &mut committed),
        |(conns, committed), attempt| Box::pin(run.attempt(conns, committed, attempt)),
        |e: &Try| matches!(e, Try::Stop(_)),
        &policy,
        &CancellationToken::new(),
    )
    .await;
    match tries.map_err(RetryError::into_last) {
        Ok(a) => Ok(if committed { Applied::Committed } else { a }),
        Err(Some(Try::Stop(e))) => Err(e),
        Err(Some(Try::Again(e))) => Err(e.into()),
        // No deadline and no cancel token: the helper ran an attempt.
        Err(None) => Err(Error::transient(format!("{}: no replay attempt ran", ctx.who())).into()),
    }
}

/// How an attempt of [`apply_groups_parts_with`] failed.
#[derive(Debug)]
enum Try {
    /// A part failed transiently and every connection still answers: the server rolled
    /// it back and nothing of it runs any more, so the whole apply re-plans from T.
    Again(Error),
    /// Anything else ends the apply.
    Stop(ApplyError),
}

/// One call of [`apply_groups_parts_with`]; its attempts differ only in their number.
struct Run<'r> {
    ctx: &'r TargetCtx,
    prev: Option<&'r GroupEnd>,
    groups: &'r [ReplayGroup],
    limits: Limits,
    opts: PartsOpts,
    attempts: u32,
}

impl Run<'_> {
    async fn attempt(
        &self,
        conns: &mut [Conn],
        committed: &mut bool,
        attempt: u32,
    ) -> Result<Applied, Try> {
        let iso = isolation(conns, self.opts)
            .await
            .map_err(|e| Try::Stop(e.into()))?;
        // After a transient failure part 0 no longer overlaps the others: a lock the
        // target holds beyond DESIGN §9 (a trigger's shared counter row, say) could make
        // a part wait for part 0 while part 0 waits for it, which InnoDB cannot see and
        // only innodb_lock_wait_timeout ends.
        let mode = Mode {
            iso,
            overlap: iso.is_some() && attempt == 1,
        };
        let (ctx, prev, groups, limits) = (self.ctx, self.prev, self.groups, self.limits);
        match replan_loop(conns, ctx, prev, groups, limits, mode, committed).await {
            Ok(a) => Ok(a),
            Err(ApplyError::Failed(e)) if e.is_transient() && attempt < self.attempts => {
                if !all_alive(conns).await {
                    return Err(Try::Stop(e.into()));
                }
                tracing::info!(target: "ledger::parts", attempt, error = %e, "part transaction failed on a live connection: re-planning from the target ledger");
                Err(Try::Again(e))
            }
            Err(e) => Err(Try::Stop(e)),
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

/// Re-plans from T up to [`REPLANS`] times while T moves under a pass.
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
    let batch = Batch {
        ctx,
        prev,
        groups,
        summaries: &summaries,
        dml: &dml,
        limits,
        mode,
    };
    let passes = retry_with(
        &mut (conns, committed),
        |(conns, committed), _| Box::pin(batch.pass(conns, committed)),
        Replan::is_final,
        &REPLANS,
        &CancellationToken::new(),
    )
    .await;
    replanned(passes, || {
        format!(
            "{}: the target ledger's cursors kept moving under this apply (another writer?)",
            ctx.who()
        )
    })
}

/// A batch of groups one attempt replays over the part connections.
struct Batch<'b> {
    ctx: &'b TargetCtx,
    prev: Option<&'b GroupEnd>,
    groups: &'b [ReplayGroup],
    summaries: &'b [GroupSummary],
    dml: &'b Dml,
    limits: Limits,
    mode: Mode,
}

impl Batch<'_> {
    /// One pass: reads T's cursors, plans the parts, and runs the plan segment by
    /// segment; `committed` records that a main transaction committed.
    async fn pass(&self, conns: &mut [Conn], committed: &mut bool) -> Result<Applied, Replan> {
        let ctx = self.ctx;
        let (main, rows) = target::replay_cursors(&mut conns[0], ctx).await?;
        let input = PartsInput {
            main: main.as_ref(),
            rows: &rows,
            configured: conns.len(),
            prev: self.prev,
            groups: self.summaries,
            txn_rows: self.limits.txn_rows,
        };
        let touches = |g: usize, i: usize, parts: usize| {
            change_parts(&ctx.keyer, &self.groups[g].changes[i], parts)
        };
        let txns = match plan_parts(input, touches).map_err(Error::Definite)? {
            PartsPlan::AlreadyCommitted => return Ok(Applied::AlreadyCommitted),
            PartsPlan::Apply(t) => t,
        };
        if conns.len() == 1 && txns.iter().all(|t| t.parts == 1) {
            let (prev, groups, limits) = (self.prev, self.groups, self.limits);
            return Ok(apply::apply_groups(&mut conns[0], ctx, prev, groups, limits).await?);
        }
        // Parts run ahead of part 0 only within one scheme: at a switch every part waits
        // until main has committed the old scheme's last transaction (two schemes ahead
        // of main at once would be ambiguous evidence).
        for seg in txns.chunk_by(|a, b| a.parts == b.parts) {
            let (ended, any) =
                run_segment(conns, ctx, self.groups, self.dml, seg, self.mode).await?;
            *committed |= any;
            if ended == Ended::Moved {
                return Err(Replan::Moved);
            }
        }
        Ok(Applied::Committed)
    }
}
