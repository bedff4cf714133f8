//! Apply of FINAL pages and of replayed change groups into the target, each in one target
//! transaction together with its T evidence (DESIGN §3.5, §5 step 8, §6).
//!
//! Why re-application can never run business DML twice (I2):
//! 1. The first write of every apply transaction (after the fencing check) is the ledger
//!    write: a page credential as a UNIQUE insert, or the replay cursor as an insert (first
//!    group) or a conditional update `WHERE cursor = expected`.
//! 2. If an earlier attempt committed (even one whose COMMIT was lost on the wire and
//!    landed later), that ledger write fails: the insert hits the primary key, the
//!    conditional update matches no row. The transaction is rolled back before any business
//!    statement ran, and the existing evidence decides: the same credential is
//!    AlreadyCommitted, a different one is an evidence conflict ([`decide_credential`]).
//! 3. An attempt still in flight holds the row lock of its ledger key, so the retry's
//!    ledger write waits for it and then sees its outcome.
//!
//! An outcome is unknown only when COMMIT itself fails ([`ApplyError::Unknown`]); it is
//! resolved by reading T on a NEW connection with a locking read ([`resolve_page`],
//! [`apply_groups`] re-reads the cursor), never by guessing.
//!
//! Replay writes by primary key and full image only (DESIGN §6): a key-changing update
//! deletes the old key then upserts the after-image; insert and update upsert the full
//! after-image with `INSERT .. ON DUPLICATE KEY UPDATE` of every column; delete deletes by
//! key and accepts 0 rows. Within one target transaction the steps are folded to their net
//! effect per key ([`fold_steps`]: the last step of a key wins), then run as one DELETE
//! list and one upsert list; that equals running them in order because the target has no
//! unique key but the primary key, no trigger and no foreign key (DESIGN §9), and T's
//! cursor still moves only by whole transactions. ODKU rather than REPLACE: REPLACE is a DELETE plus an INSERT per
//! existing row (two row operations, both index trees touched twice, delete triggers and
//! FK actions fired), ODKU updates the row in place; both converge to the full image.
use crate::dml::Dml;
pub use crate::dml::Limits;
use crate::group::ctx_steps;
pub use crate::group::ReplayGroup;
use crate::page::FinalPage;
use crate::plan::check_row;
pub use crate::plan::{
    decide_credential, fold_steps, normalize_row, plan_replay, Folded, GroupSummary, Piece, Plan,
    Step, TxnPlan,
};
use crate::target::{self, check_owner, PageCredential, ReplayCursor, TargetCtx, CURSOR, PAGES};
use crate::util::{my, my_is_dup};
use admission::{retry_with, CancellationToken, RetryError, RetryPolicy};
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::value::Row;
use kernel::{failpoint, Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, Params, Transaction, TxOpts};

/// A successful apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// This call committed the effect.
    Committed,
    /// T already held the effect; no business DML ran.
    AlreadyCommitted,
}

/// A failed apply.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Nothing was committed (definite or transient).
    #[error(transparent)]
    Failed(#[from] Error),
    /// COMMIT was sent and no answer came back: resolve by reading T on a new connection.
    #[error("outcome unknown ({0}); resolve it by reading the target ledger on a new connection")]
    Unknown(String),
}

/// What T says about an effect whose outcome was unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    Committed,
    NotCommitted,
}

// ---------------------------------------------------------------------------------------
// Pages
// ---------------------------------------------------------------------------------------

pub(crate) async fn rollback_quietly(tx: Transaction<'_>) {
    let _ = tx.rollback().await;
}

/// Commits an apply transaction between its two fault points. A failed COMMIT leaves the
/// outcome unknown: only reading T can tell (DESIGN §3.5).
pub(crate) async fn commit_between(
    tx: Transaction<'_>,
    what: &str,
    [before, after]: [&'static str; 2],
) -> Result<(), ApplyError> {
    failpoint::hit(before);
    tx.commit()
        .await
        .map_err(|e| ApplyError::Unknown(format!("COMMIT of {what}: {e}")))?;
    failpoint::hit(after);
    Ok(())
}

/// Applies one FINAL page (its persisted bytes) with its T credential in one transaction.
///
/// Into a still-empty InnoDB table, parallel first inserts can deadlock (1213, transient,
/// nothing committed): callers commit the table's first page alone before applying others
/// in parallel (notes/mariadb.md).
pub async fn apply_page(
    conn: &mut Conn,
    ctx: &TargetCtx,
    bytes: &[u8],
    limits: Limits,
) -> Result<Applied, ApplyError> {
    let digest = Digest::of(bytes);
    let page = FinalPage::decode(bytes).map_err(|e| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("{}: FINAL page {digest}: {e}", ctx.who()),
        )
    })?;
    if (page.key.job, page.key.generation) != (ctx.job, ctx.generation) {
        return Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!(
                "{}: FINAL page {digest} belongs to job {} {}",
                ctx.who(),
                page.key.job,
                page.key.generation
            ),
        )
        .into());
    }
    let what = format!("{} {}{}", ctx.who(), page.key.window, page.key.page);
    for r in &page.rows {
        check_row(&ctx.schema, r, &what)?;
    }
    let mine = PageCredential {
        window: page.key.window,
        page: page.key.page,
        attempt: page.key.attempt,
        digest,
        rows: u32::try_from(page.rows.len()).unwrap_or(u32::MAX),
    };
    let mut tx = conn
        .start_transaction(TxOpts::default())
        .await
        .map_err(my(&what))?;
    if let Err(e) = check_owner(&mut tx, ctx).await {
        rollback_quietly(tx).await;
        return Err(e.into());
    }
    let r = tx
        .exec_drop(
            format!(
                "INSERT INTO {} (job_id, generation, window_id, page_no, attempt, digest, row_count, token) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                ctx.t(PAGES)
            ),
            (ctx.job.0, ctx.generation.0, mine.window.0, mine.page.0, mine.attempt.0, &digest.0[..], mine.rows, ctx.token),
        )
        .await;
    match r {
        Ok(()) => {}
        Err(e) if my_is_dup(&e) => {
            rollback_quietly(tx).await;
            let existing = target::page_credential_locked(conn, ctx, mine.window, mine.page)
                .await?
                .ok_or_else(|| {
                    Error::transient(format!("{what}: credential vanished after a duplicate key"))
                })?;
            decide_credential(&existing, &mine, &what).map_err(Error::Definite)?;
            return Ok(Applied::AlreadyCommitted);
        }
        Err(e) => {
            rollback_quietly(tx).await;
            return Err(my(&format!("writing the credential of {what}"))(e).into());
        }
    }
    let rows: Vec<Row> = page
        .rows
        .into_iter()
        .map(|r| normalize_row(&ctx.schema, r))
        .collect();
    if let Err(e) = Dml::new(&ctx.schema, limits)
        .rows(&mut tx, rows, false)
        .await
    {
        rollback_quietly(tx).await;
        return Err(e.into());
    }
    commit_between(
        tx,
        &what,
        ["ledger.page.before_commit", "ledger.page.after_commit"],
    )
    .await?;
    Ok(Applied::Committed)
}

/// Resolves an unknown page outcome from T on a (new) connection: the locking read waits
/// for a transaction still in flight. A different credential is an evidence conflict.
pub async fn resolve_page(conn: &mut Conn, ctx: &TargetCtx, bytes: &[u8]) -> Result<Resolution> {
    let digest = Digest::of(bytes);
    let page = FinalPage::decode(bytes).map_err(|e| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("{}: FINAL page {digest}: {e}", ctx.who()),
        )
    })?;
    let mine = PageCredential {
        window: page.key.window,
        page: page.key.page,
        attempt: page.key.attempt,
        digest,
        rows: u32::try_from(page.rows.len()).unwrap_or(u32::MAX),
    };
    match target::page_credential_locked(conn, ctx, mine.window, mine.page).await? {
        None => Ok(Resolution::NotCommitted),
        Some(c) => {
            decide_credential(&c, &mine, &ctx.who()).map_err(Error::Definite)?;
            Ok(Resolution::Committed)
        }
    }
}

/// Applies a page on a fresh connection and resolves an unknown outcome on another new
/// connection. NotCommitted comes back as a transient error (retry within budget).
pub async fn apply_page_resolved(
    opts: &Opts,
    ctx: &TargetCtx,
    bytes: &[u8],
    limits: Limits,
) -> Result<Applied> {
    let mut conn = connect(opts).await?;
    let r = apply_page(&mut conn, ctx, bytes, limits).await;
    let _ = conn.disconnect().await;
    match r {
        Ok(a) => Ok(a),
        Err(ApplyError::Failed(e)) => Err(e),
        Err(ApplyError::Unknown(m)) => {
            let mut c2 = connect(opts).await?;
            let res = resolve_page(&mut c2, ctx, bytes).await;
            let _ = c2.disconnect().await;
            match res? {
                Resolution::Committed => Ok(Applied::Committed),
                Resolution::NotCommitted => Err(Error::transient(format!(
                    "{m}; the target ledger shows it was not committed: retry"
                ))),
            }
        }
    }
}

/// How long opening a target connection may take.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Opens a target connection with the ledger's session settings, within
/// [`CONNECT_TIMEOUT`] (a timeout is transient).
pub async fn connect(opts: &Opts) -> Result<Conn> {
    let o = mysql_async::OptsBuilder::from_opts(kernel::names::binary_names(opts.clone()))
        .init(target::session_init());
    tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(o))
        .await
        .map_err(|_| Error::transient("connecting to the target: timed out"))?
        .map_err(my("connecting to the target"))
}

// ---------------------------------------------------------------------------------------
// Groups
// ---------------------------------------------------------------------------------------

/// Runs one transaction's steps as their net effect per key ([`fold_steps`]): one
/// DELETE list, then one upsert list, whatever the order of the changes.
pub(crate) async fn run_steps(tx: &mut Transaction<'_>, dml: &Dml, steps: Vec<Step>) -> Result<()> {
    let folded = fold_steps(steps);
    dml.deletes(tx, folded.deletes).await?;
    dml.rows(tx, folded.upserts, true).await
}

/// Writes the cursor as the first ledger write: an insert when T has none, otherwise a
/// conditional update from the expected cursor. Returns false when T's cursor moved.
pub(crate) async fn write_cursor(
    tx: &mut Transaction<'_>,
    ctx: &TargetCtx,
    expect: Option<&ReplayCursor>,
    next: &ReplayCursor,
) -> Result<bool> {
    let gtid = next.end.gtid.as_ref().map(|g| g.to_string());
    let what = format!("advancing the target ledger's cursor of {}", ctx.who());
    match expect {
        None => {
            let r = tx
                .exec_drop(
                    format!(
                        "INSERT INTO {} (job_id, generation, file, pos, gtid, rows_done, group_digest, token) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        ctx.t(CURSOR)
                    ),
                    (ctx.job.0, ctx.generation.0, &next.end.pos.file, next.end.pos.pos, gtid, next.rows_done, &next.group_digest.0[..], ctx.token),
                )
                .await;
            match r {
                Ok(()) => Ok(true),
                Err(e) if my_is_dup(&e) => Ok(false),
                Err(e) => Err(my(&what)(e)),
            }
        }
        Some(x) => {
            let mut params: Vec<mysql_async::Value> = target::cursor_values(next).into();
            params.push(ctx.token.into());
            params.extend([ctx.job.0.into(), ctx.generation.0.into()]);
            params.extend(target::cursor_values(x));
            tx.exec_drop(
                format!(
                    "UPDATE {} SET file = ?, pos = ?, gtid = ?, rows_done = ?, group_digest = ?, token = ?
                     WHERE job_id = ? AND generation = ? AND file = ? AND pos = ? AND gtid <=> ? AND rows_done = ? AND group_digest = ?",
                    ctx.t(CURSOR)
                ),
                Params::Positional(params),
            )
            .await
            .map_err(my(&what))?;
            Ok(tx.affected_rows() == 1)
        }
    }
}

/// Passes over a batch at most: a pass ends early when a cursor CAS finds that T moved
/// (another applier, or a lost COMMIT that landed), and the next one re-plans from T.
pub(crate) const REPLANS: RetryPolicy = RetryPolicy::immediate(3);

/// Why a planning pass over a batch did not finish.
#[derive(Debug)]
pub(crate) enum Replan {
    /// A cursor CAS matched no row: T moved under the pass (rolled back, nothing of that
    /// transaction ran). Re-plan from T.
    Moved,
    /// Anything else ends the apply.
    Failed(ApplyError),
}

impl Replan {
    pub(crate) fn is_final(&self) -> bool {
        matches!(self, Replan::Failed(_))
    }
}

impl From<ApplyError> for Replan {
    fn from(e: ApplyError) -> Replan {
        Replan::Failed(e)
    }
}

impl From<Error> for Replan {
    fn from(e: Error) -> Replan {
        Replan::Failed(e.into())
    }
}

/// The end of a re-plan loop ([`REPLANS`]): the pass's result, its error, or (T moved
/// under every pass) the transient error `moving` describes.
pub(crate) fn replanned(
    passes: Result<Applied, RetryError<Replan>>,
    moving: impl FnOnce() -> String,
) -> Result<Applied, ApplyError> {
    match passes.map_err(RetryError::into_last) {
        Ok(a) => Ok(a),
        Err(Some(Replan::Failed(e))) => Err(e),
        // Moved every time (no deadline and no cancel token end this loop).
        Err(_) => Err(Error::transient(moving()).into()),
    }
}

/// Replays a batch of consecutive complete groups of this table (`prev`: the end of the
/// group before them in L, None if they start right after B). Reads T's cursor, applies
/// only what T does not hold yet, each transaction guarded by the cursor CAS. Returns
/// AlreadyCommitted when no business DML ran.
pub async fn apply_groups(
    conn: &mut Conn,
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
) -> Result<Applied, ApplyError> {
    let summaries: Vec<GroupSummary> = groups.iter().map(ReplayGroup::summary).collect();
    let dml = Dml::new(&ctx.schema, limits);
    let batch = Batch {
        ctx,
        prev,
        groups,
        summaries: &summaries,
        dml: &dml,
        txn_rows: limits.txn_rows,
    };
    let mut committed = false;
    let passes = retry_with(
        &mut (conn, &mut committed),
        |(conn, committed), _| Box::pin(batch.pass(conn, committed)),
        Replan::is_final,
        &REPLANS,
        &CancellationToken::new(),
    )
    .await;
    replanned(passes, || {
        format!(
            "{}: the target ledger's cursor kept moving under this apply (another writer?)",
            ctx.who()
        )
    })
}

/// A batch of groups [`apply_groups`] replays.
struct Batch<'b> {
    ctx: &'b TargetCtx,
    prev: Option<&'b GroupEnd>,
    groups: &'b [ReplayGroup],
    summaries: &'b [GroupSummary],
    dml: &'b Dml,
    txn_rows: usize,
}

impl Batch<'_> {
    /// One pass: reads T's cursor, plans, and applies every transaction T lacks;
    /// `committed` records that one committed (it outlives the pass).
    async fn pass(&self, conn: &mut Conn, committed: &mut bool) -> Result<Applied, Replan> {
        let current = target::replay_cursor(conn, self.ctx, true).await?;
        let plan = plan_replay(current.as_ref(), self.prev, self.summaries, self.txn_rows)
            .map_err(Error::Definite)?;
        if let Plan::Apply(txns) = plan {
            for t in &txns {
                if !self.txn(conn, t).await? {
                    return Err(Replan::Moved);
                }
                *committed = true;
            }
        }
        Ok(if *committed {
            Applied::Committed
        } else {
            Applied::AlreadyCommitted
        })
    }

    /// One replay transaction: owner check, cursor CAS, the folded steps, COMMIT between
    /// the fault points. False when the CAS found T moved (rolled back, nothing ran).
    async fn txn(&self, conn: &mut Conn, t: &TxnPlan) -> Result<bool, ApplyError> {
        let ctx = self.ctx;
        let what = format!(
            "{} replay to {} (+{})",
            ctx.who(),
            t.next.end.pos,
            t.next.rows_done
        );
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(my(&what))?;
        if let Err(e) = check_owner(&mut tx, ctx).await {
            rollback_quietly(tx).await;
            return Err(e.into());
        }
        match write_cursor(&mut tx, ctx, t.expect.as_ref(), &t.next).await {
            Ok(true) => {}
            Ok(false) => {
                rollback_quietly(tx).await;
                return Ok(false);
            }
            Err(e) => {
                rollback_quietly(tx).await;
                return Err(e.into());
            }
        }
        let mut all = Vec::new();
        for p in &t.pieces {
            for ch in &self.groups[p.group].changes[p.from..p.to] {
                if let Err(e) = ctx_steps(ctx, ch, &mut all) {
                    rollback_quietly(tx).await;
                    return Err(e.into());
                }
            }
        }
        if let Err(e) = run_steps(&mut tx, self.dml, all).await {
            rollback_quietly(tx).await;
            return Err(e.into());
        }
        let points = ["ledger.groups.before_commit", "ledger.groups.after_commit"];
        commit_between(tx, &what, points).await?;
        Ok(true)
    }
}

/// Replays on a fresh connection; an unknown outcome is resolved by re-reading T's cursor
/// on a new connection and applying only what T does not hold.
pub async fn apply_groups_resolved(
    opts: &Opts,
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
) -> Result<Applied> {
    let mut conn = connect(opts).await?;
    let r = apply_groups(&mut conn, ctx, prev, groups, limits).await;
    let _ = conn.disconnect().await;
    match r {
        Ok(a) => Ok(a),
        Err(ApplyError::Failed(e)) => Err(e),
        Err(ApplyError::Unknown(_)) => {
            let mut c2 = connect(opts).await?;
            let r = apply_groups(&mut c2, ctx, prev, groups, limits).await;
            let _ = c2.disconnect().await;
            match r {
                // Whatever the lost COMMIT did is now in T; the effect exists once.
                Ok(_) => Ok(Applied::Committed),
                Err(ApplyError::Failed(e)) => Err(e),
                Err(ApplyError::Unknown(m)) => Err(Error::transient(m)),
            }
        }
    }
}

/// Whether T's cursor covers every group of the batch (for an unknown outcome).
pub async fn resolve_groups(
    conn: &mut Conn,
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
) -> Result<Resolution> {
    let summaries: Vec<GroupSummary> = groups.iter().map(ReplayGroup::summary).collect();
    let current = target::replay_cursor(conn, ctx, true).await?;
    match plan_replay(current.as_ref(), prev, &summaries, usize::MAX).map_err(Error::Definite)? {
        Plan::AlreadyCommitted => Ok(Resolution::Committed),
        Plan::Apply(_) => Ok(Resolution::NotCommitted),
    }
}
