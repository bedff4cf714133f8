//! Schema changes during the windows (DESIGN §16, issue 16 item 3): each window is read,
//! folded and sealed in the schema version in force at its LOW; a compatible DDL between
//! a window's LOW and HIGH reopens it (a new attempt, read in the new version); before
//! the first page of a newer version reaches the target, the target catches up to that
//! version's DDL and takes it there, in binlog order.
//!
//! # Why it is safe
//!
//! * One version per window. An attempt loads the chain and reads with its last version
//!   `v`. Once LOW is in L it checks that every DDL of the table at or before LOW has a
//!   sealed version and that `v` is the one in force at LOW ([`check_low`]); then every
//!   row the read view returns and every change in (LOW, HIGH] has the shape of `v`
//!   unless a DDL lies in (LOW, HIGH], which [`check_high`] finds in L (HIGH is awaited
//!   there, so L holds every DDL before it): the attempt then seals that DDL's version
//!   (the proof of [`crate::table::schema::seal`]) and fails transiently, and the next
//!   attempt starts from a new LOW. A read the server refused because the table changed
//!   under it is judged the same way once L holds the source's binlog end
//!   ([`read_failed`]). The fold decodes raw rows after a sealed DDL with the version in
//!   force at their record, as replay does ([`crate::table::replay::table_part`]). The
//!   manifest carries `v`'s fingerprint; the audit expects the version in force at LOW.
//! * The target moves in binlog order. The target's version is T's: the one in force at
//!   T's replay cursor, so "T's cursor is past a DDL exactly when the target has its
//!   version" stays true here too. Windows of the target's version are applied as
//!   always. The applier stops at the first window (in plan order) of a newer version,
//!   after every page before it is applied and J records every window before it
//!   ([`crate::table::window::pipeline`]); windows 0..k (J's completed count k) are then
//!   the only ones in the target. [`catch_up`] replays (B, P] (P: the DDL of the version
//!   the window needs) restricted to the keys of windows 0..k, with the replay's own DDL
//!   step at each DDL on the way: those windows' rows get every change up to the DDL in
//!   the old shape (older images over a newer baseline converge, DESIGN §6), then the
//!   target takes the DDL. The keys of windows k.. are not touched: each is read after
//!   P (a window sealed before P that is not in the target yet is read again, see
//!   below), so its read view already holds every change before P, and the replay of
//!   (B, F] after the last window applies every change after P to every key (T's cursor
//!   is at P: nothing before it is replayed twice, nothing after it is skipped).
//! * No window of an older version reaches a newer target. Within one run of the
//!   pipeline the target's version is fixed; a window sealed in a version older than the
//!   target's and not in T yet is read again as a new attempt (its seal is superseded,
//!   like materials that fail verification); one with pages in T cannot exist (the
//!   catch-up refuses to start while any window at or after J holds a page credential,
//!   naming it: a pause, never a guess).
//! * Crashes. Everything the catch-up decides is re-read from T, J and L: the key range
//!   from J's completed count, which does not change while the catch-up runs (J advances
//!   only through the applier, which waits for it), the target's version from T's cursor.
//!   A restart repeats only what T does not hold.
use crate::table::activation::{seal_after_stop, under_write_permits};
use crate::table::ctx::JobCtx;
use crate::table::replay::{self, Replayer, Scope, Until};
use crate::table::schema::{self, Chain};
use kernel::change::Change;
use kernel::control::IntentKind;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::WindowId;
use kernel::key::SortKey;
use kernel::log::{self, LSeq};
use kernel::position::BinlogPos;
use kernel::range::{Bound, KeyRange};
use kernel::{Error, Result};

/// The table's schema chain as the state store holds it now.
pub async fn load(ctx: &JobCtx) -> Result<Chain> {
    schema::load(
        &ctx.pool,
        ctx.id(),
        ctx.generation(),
        &ctx.schema,
        &ctx.stream,
    )
    .await
}

/// The table's schema chain and the target's version: the one in force at T's replay
/// cursor.
pub async fn target_version(ctx: &JobCtx) -> Result<(Chain, u32)> {
    let chain = load(ctx).await?;
    let v = schema::in_force(&ctx.target, &ctx.tctx, &chain).await?.0;
    Ok((chain, v))
}

/// `ctx` with version `v`'s definition: source names in `schema`, target names and the
/// key's columns by that definition in `tctx` (install's context for version 1).
pub fn ctx_of(ctx: &JobCtx, chain: &Chain, v: u32) -> Result<JobCtx> {
    if v == 1 {
        return Ok(ctx.clone());
    }
    let version = chain
        .versions
        .iter()
        .find(|x| x.version == v)
        .ok_or_else(|| {
            Error::definite(
                DefiniteCode::Internal,
                format!("job {}: schema version {v} is not sealed", ctx.id()),
            )
        })?;
    let mut out = ctx.clone();
    out.schema = version.schema.clone();
    out.tctx.schema = schema::on_target(&version.schema, &ctx.tctx.schema);
    out.tctx.keyer = crate::store::jobs::keyer(&out.tctx.schema)?;
    Ok(out)
}

/// The version a window sealed with LOW at `low` was read in.
pub fn version_at(chain: &Chain, low: &BinlogPos) -> u32 {
    chain
        .versions
        .iter()
        .take_while(|v| v.at.try_cmp(low).ok() == Some(std::cmp::Ordering::Less))
        .last()
        .map_or(1, |v| v.version)
}

/// The keys of windows `0..k` of `plan` (J's completed windows, a prefix of the plan):
/// `(-inf, upper of window k-1]`; no key at all when `k` is 0.
pub fn applied_keys(plan: &[KeyRange], k: u32) -> KeyRange {
    let nothing = || {
        let b = Bound {
            values: Vec::new(),
            sort: SortKey(Vec::new()),
        };
        KeyRange {
            lower: Some(b.clone()),
            upper: Some(b),
        }
    };
    let Some(last) = k.checked_sub(1).and_then(|i| plan.get(i as usize)) else {
        return nothing();
    };
    KeyRange {
        lower: plan.first().and_then(|r| r.lower.clone()),
        upper: last.upper.clone(),
    }
}

/// The capture's pauses of this table-generation in L records (after, upto].
async fn pauses_in(ctx: &JobCtx, after: LSeq, upto: LSeq) -> Result<Vec<log::PauseRow>> {
    Ok(log::pauses(&ctx.pool, &ctx.stream)
        .await?
        .into_iter()
        .filter(|p| p.job == ctx.id() && p.generation == ctx.generation())
        .filter(|p| p.seq > after && p.seq <= upto)
        .collect())
}

/// The table's DDLs in L records (after, upto].
async fn ddls_in(ctx: &JobCtx, after: LSeq, upto: LSeq) -> Result<Vec<log::DdlRow>> {
    let (db, t) = (&ctx.job.source.db, &ctx.job.source.table);
    log::ddls(&ctx.pool, &ctx.stream, db, t, after, upto).await
}

/// A pause the capture recorded for anything but a DDL of the table (a DDL's pause is
/// at the same record and position as its `capture_ddl` row): the definite stop of the
/// window, as before schema versions.
fn other_pause(ctx: &JobCtx, ddls: &[log::DdlRow], pauses: &[log::PauseRow]) -> Option<Error> {
    pauses
        .iter()
        .find(|p| !ddls.iter().any(|d| d.seq == p.seq && d.at == p.at))
        .map(|p| {
            Error::definite(
                p.error.code,
                format!(
                    "the capture paused {} at {} (change log record {}): {}",
                    ctx.schema.qualified(),
                    p.at,
                    p.seq,
                    p.error.message
                ),
            )
        })
}

/// L record of the table-generation's B (none yet: zero).
async fn b_seq(ctx: &JobCtx) -> Result<LSeq> {
    Ok(replay::find_marker(
        &ctx.pool,
        &Scope::of(&ctx.job, ctx.stream.clone()),
        IntentKind::B,
        None,
    )
    .await?
    .map_or(LSeq::ZERO, |m| m.seq))
}

/// Seals the table's DDLs that L holds and the chain does not (each by the proof of
/// [`crate::table::schema::seal`]); a DDL that cannot be taken is the definite refusal
/// that pauses the table.
async fn seal_pending(ctx: &JobCtx, chain: &mut Chain, b: LSeq, ddl: &log::DdlRow) -> Result<()> {
    let stop = Definite {
        code: DefiniteCode::SchemaChanged,
        message: format!(
            "the DDL `{}` of {} at {} (change log record {}) was met during the windows",
            ddl.sql.chars().take(200).collect::<String>(),
            ctx.schema.qualified(),
            ddl.at,
            ddl.seq
        ),
    };
    seal_after_stop(ctx, chain, b, stop).await
}

/// After LOW (L record `low`): every DDL of the table at or before it is sealed, and the
/// attempt's version `v` is the one in force at LOW. A DDL not sealed yet is sealed now
/// and the attempt starts again with its version (transient).
pub async fn check_low(ctx: &JobCtx, chain: &mut Chain, v: u32, low: LSeq) -> Result<()> {
    let b = b_seq(ctx).await?;
    let ddls = ddls_in(ctx, b, low).await?;
    let pauses = pauses_in(ctx, LSeq::ZERO, low).await?;
    if let Some(e) = other_pause(ctx, &ddls, &pauses) {
        return Err(e);
    }
    if let Some(d) = ddls.iter().find(|d| chain.sealed_at(d.seq).is_none()) {
        seal_pending(ctx, chain, b, d).await?;
        return Err(Error::transient(format!(
            "{}: the DDL at {} (change log record {}) is sealed as schema version {}; the window \
             starts again with it",
            ctx.schema.qualified(),
            d.at,
            d.seq,
            chain.latest().0
        )));
    }
    let (in_force, _) = chain.in_force_after(low);
    if in_force != v {
        return Err(Error::transient(format!(
            "{}: schema version {in_force} is in force at LOW (change log record {low}), the attempt \
             was to read version {v}; it starts again",
            ctx.schema.qualified()
        )));
    }
    Ok(())
}

/// After HIGH: a DDL of the table in (LOW, HIGH] crossed the window's read view or its
/// fold. Its version is sealed and the window is read again (transient); a DDL that cannot
/// be taken pauses the table.
pub async fn check_high(ctx: &JobCtx, chain: &mut Chain, low: LSeq, high: LSeq) -> Result<()> {
    let ddls = ddls_in(ctx, low, high).await?;
    let pauses = pauses_in(ctx, low, high).await?;
    if let Some(e) = other_pause(ctx, &ddls, &pauses) {
        return Err(e);
    }
    let Some(d) = ddls.first() else {
        return Ok(());
    };
    if chain.sealed_at(d.seq).is_none() {
        seal_pending(ctx, chain, b_seq(ctx).await?, d).await?;
    }
    tracing::info!(job = %ctx.id(), ddl = %d.sql, at = %d.at, "a DDL crossed the window: it is read again in the new schema version");
    Err(Error::transient(format!(
        "{}: the DDL at {} (change log record {}) lies between the window's LOW and HIGH; the window \
         is read again in schema version {}",
        ctx.schema.qualified(),
        d.at,
        d.seq,
        chain.latest().0
    )))
}

/// A read the server refused (the table changed under it: a column gone, another column
/// count): once L holds the source's binlog end, a DDL of the table after LOW makes the
/// refusal a new attempt (as [`check_high`]); without one the refusal stands.
pub async fn read_failed(ctx: &JobCtx, chain: &mut Chain, low: LSeq, e: Error) -> Error {
    // A close not confirmed keeps its permit as a hold: never turned into a retry.
    if matches!(&e, Error::Definite(d) if d.code == DefiniteCode::ReleaseUnconfirmed)
        || e.is_transient()
    {
        return e;
    }
    let upto = match caught_up(ctx).await {
        Ok(s) => s,
        Err(x) => {
            tracing::warn!(job = %ctx.id(), error = %x, "cannot tell whether a DDL caused the read's failure");
            return e;
        }
    };
    match check_high(ctx, chain, low, upto).await {
        Ok(()) => e,
        Err(x) => x,
    }
}

/// Waits until L holds the source's binlog end as it is now; L's tail then.
async fn caught_up(ctx: &JobCtx) -> Result<LSeq> {
    let mut c = ctx
        .source
        .connect(crate::io::pool::Use::Control, "(binlog end)")
        .await?;
    let end = match kernel::lineage::binlog_end(&mut c).await {
        Ok(raw) => log::live_position(&ctx.pool, &ctx.stream, &mut c, raw).await,
        Err(e) => Err(e),
    };
    c.close().await;
    let deadline = tokio::time::Instant::now() + ctx.cfg.marker_timeout;
    let d = log::wait_for_position(&ctx.pool, &ctx.stream, &end?, deadline).await?;
    Ok(d.tail.seq)
}

/// The changes of the table in L records (after, upto], decoded with the version in
/// force at each record (raw rows after a sealed DDL included), in L order.
pub async fn changes_between(
    ctx: &JobCtx,
    chain: &Chain,
    after: LSeq,
    upto: LSeq,
) -> Result<Vec<Change>> {
    const PAGE: u32 = 500;
    let s = Scope::of(&ctx.job, ctx.stream.clone());
    let mut out = Vec::new();
    let mut from = after;
    loop {
        let (db, t) = (&s.source_db, &s.source_table);
        let recs = log::table_records(&ctx.pool, &ctx.stream, db, t, from, upto, PAGE).await?;
        let Some(last) = recs.last() else { break };
        from = last.seq;
        let n = recs.len();
        for r in &recs {
            out.extend(replay::table_part(&s, Some(chain), r).map_err(Error::Definite)?);
        }
        if n < PAGE as usize {
            break;
        }
    }
    Ok(out)
}

/// Brings the target to schema version `want` before the first page of a window of that
/// version is applied (see the module doc): (B, P] of `want`'s DDL replayed into the keys
/// of the windows J records, each DDL on the way applied by replay's own step.
pub async fn catch_up(ctx: &JobCtx, want: u32) -> Result<()> {
    let chain = load(ctx).await?;
    let upto = chain
        .versions
        .iter()
        .find(|v| v.version == want)
        .map(|v| v.l_seq)
        .ok_or_else(|| {
            Error::definite(
                DefiniteCode::Internal,
                format!("job {}: schema version {want} is not sealed", ctx.id()),
            )
        })?;
    let k = ctx.head().await?.record.completed;
    refuse_pages_ahead(ctx, k, want).await?;
    let within = applied_keys(&ctx.plan, k);
    let s = Scope::of(&ctx.job, ctx.stream.clone());
    let b = b_seq(ctx).await?;
    let cfg = replay::ReplayConfig::default();
    loop {
        let (have, mut tctx) = schema::in_force(&ctx.target, &ctx.tctx, &chain).await?;
        if have >= want {
            return Ok(());
        }
        tracing::info!(job = %ctx.id(), from = have, to = want, windows_in_target = k, "catching the target up to a schema change met during the windows");
        tctx.within = Some(within.clone());
        let r = Replayer {
            pool: &ctx.pool,
            scope: &s,
            source: &ctx.source,
            target: &ctx.target,
            ctx: &tctx,
            cfg: &cfg,
            chain: Some(&chain),
        };
        let run = r.run(
            b,
            Until::Fence {
                f_seq: upto,
                failpoint_mid: false,
            },
        );
        let what = "schema catch-up during the windows";
        let out = under_write_permits(ctx, what, 1, &ctx.cancel, Box::pin(run)).await?;
        if out.schema_applied.is_none() {
            return Err(Error::transient(format!(
                "job {}: the catch-up to schema version {want} ended at change log record {} without \
                 applying it; it runs again",
                ctx.id(),
                out.l_seq
            )));
        }
    }
}

/// The catch-up restricts replay to windows `0..k`: a window at or after `k` with a page
/// in the target would miss changes before the DDL. Such a state is not produced by the
/// pipeline; if the evidence shows one, the table pauses naming it.
async fn refuse_pages_ahead(ctx: &JobCtx, k: u32, want: u32) -> Result<()> {
    let mut conn = ctx
        .target
        .connect(crate::io::pool::Use::Control, "(target)")
        .await?;
    let all = ledger::target::page_credentials(&mut conn, &ctx.tctx).await;
    conn.close().await;
    let ahead: Vec<WindowId> = all?
        .into_iter()
        .map(|c| c.window)
        .filter(|w| w.0 >= k)
        .collect();
    match ahead.first() {
        None => Ok(()),
        Some(w) => Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!(
                "job {}: {w} has pages in the target ahead of the journal (at window {k}) while schema \
                 version {want} must reach the target first; the catch-up would miss that \
                 window's changes before the DDL. Re-add the table (runbooks/cancel-and-readd.md)",
                ctx.id()
            ),
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::table::schema::fixtures::{at, schema, version};

    fn int_range(lo: Option<i64>, hi: Option<i64>) -> KeyRange {
        kernel::range::KeyRangeV1 {
            lower: lo,
            upper: hi,
        }
        .into()
    }

    fn key(i: i64) -> SortKey {
        Bound::of_i64(i).sort
    }

    #[test]
    fn the_catch_up_touches_exactly_the_keys_of_the_windows_in_the_target() {
        let plan = vec![
            int_range(None, Some(10)),
            int_range(Some(10), Some(20)),
            int_range(Some(20), None),
        ];
        let none = applied_keys(&plan, 0);
        for i in [i64::MIN, -1, 0, 10, 11, 20, i64::MAX] {
            assert!(!none.contains(&key(i)), "{i} with no window applied");
        }
        let two = applied_keys(&plan, 2);
        for i in [i64::MIN, 0, 10, 11, 20] {
            assert!(two.contains(&key(i)), "{i} is in windows 0..2");
        }
        for i in [21, 1000, i64::MAX] {
            assert!(!two.contains(&key(i)), "{i} is in window 2");
        }
        let all = applied_keys(&plan, 3);
        assert!(all.contains(&key(i64::MAX)) && all.contains(&key(i64::MIN)));
    }

    #[test]
    fn a_window_is_of_the_version_in_force_at_its_low() {
        let c = Chain {
            install: schema(1),
            versions: vec![version(2, 10, 1000, 2), version(3, 20, 2000, 3)],
            lineage: kernel::ids::Digest([0; 32]),
        };
        assert_eq!(version_at(&c, &at(999)), 1);
        assert_eq!(version_at(&c, &at(1000)), 1, "the DDL's own position");
        assert_eq!(version_at(&c, &at(1001)), 2);
        assert_eq!(version_at(&c, &at(5000)), 3);
        let l = crate::table::schema::later(&c.versions);
        assert_eq!(l.len(), 2);
        assert_eq!(l[1], (at(2000), c.versions[1].schema.fingerprint()));
    }
}
