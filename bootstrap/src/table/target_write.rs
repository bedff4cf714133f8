//! Bounded recovery of uncertain target commits during the bootstrap (DESIGN §8).
//!
//! Why it is safe: a COMMIT whose answer was lost is never taken for a success nor retried
//! blindly. It is resolved by reading T on a new connection (`ledger::apply::resolve_page`:
//! the page credential is in T or it is not; a different credential is an evidence
//! conflict). Each resolution first consumes one unit of a budget persisted in the state
//! store (migration 0060) for the table-generation's execution, so neither a restart nor a
//! new window refunds it: at most [`BOOTSTRAP_BUDGET`] are recovered automatically, the
//! next one pauses the table (`release_unconfirmed`) with the context in J. `resume`
//! starts a new execution ([`reset`]). Streaming has its own in-a-row budget in replay.
use crate::io::pool::Use;
use crate::table::ctx::JobCtx;
use admission::{Permit, RetryBudget};
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::{Error, Result};
use ledger::apply::{self, Applied, ApplyError, Resolution};

/// Automatic recoveries of uncertain commits per execution during the bootstrap.
pub const BOOTSTRAP_BUDGET: u32 = 3;
const SCOPE: &str = "bootstrap";
static CONSUME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Applies one FINAL page through T under `permit`, within the target-write deadline; an
/// unknown outcome (lost COMMIT answer, deadline passed) is resolved from T within the
/// persisted budget, and beyond it the table pauses. The permit is settled here: released
/// once the connection is confirmed closed, or kept as a hold while a timed-out statement
/// may still run on the target (`crate::io::bounded`).
pub async fn apply_page(ctx: &JobCtx, bytes: &[u8], permit: Permit) -> Result<Applied> {
    let m = match apply_bounded(ctx, bytes, permit).await? {
        Ok(Applied::Committed) if crate::seams::lost_commits::injected() => {
            "COMMIT answer lost (injected)".to_string()
        }
        Ok(a) => return Ok(a),
        Err(m) => m,
    };
    let used = consume(ctx).await.map_err(|e| match e {
        Error::Definite(d) if d.code == DefiniteCode::ReleaseUnconfirmed => {
            Error::Definite(kernel::Definite {
                code: d.code,
                message: format!("{m}: {}", d.message),
            })
        }
        other => other,
    })?;
    tracing::warn!(job = %ctx.id(), used, max = BOOTSTRAP_BUDGET, retry = "uncertain_commit", "{m}: resolving from the target ledger");
    let mut c2 = ctx.target.connect(Use::Control, "(resolve page)").await?;
    let res = apply::resolve_page(&mut c2, &ctx.tctx, bytes).await;
    c2.close().await;
    match res? {
        Resolution::Committed => Ok(Applied::Committed),
        Resolution::NotCommitted => Err(Error::transient(format!(
            "{m}; the target ledger shows it was not committed: retry"
        ))),
    }
}

/// One apply attempt on its own connection. The outer error is a failure with nothing
/// committed (or a release that could not be confirmed); the inner one an unknown outcome.
async fn apply_bounded(
    ctx: &JobCtx,
    bytes: &[u8],
    permit: Permit,
) -> Result<std::result::Result<Applied, String>> {
    let opts = writer_opts(ctx);
    let mut conn = match ctx
        .target
        .connect_with(Use::Data, &opts, "(page write)")
        .await
    {
        Ok(c) => c,
        Err(e) => {
            permit.release_confirmed(); // nothing was sent
            return Err(e);
        }
    };
    let id = conn.id();
    let deadline = ctx.deadlines.target_write;
    let limits = ctx.cfg.limits;
    let timed = tokio::time::timeout(
        deadline,
        apply::apply_page(&mut conn, &ctx.tctx, bytes, limits),
    )
    .await;
    let Ok(r) = timed else {
        // The statement may still run on the target: the connection stays open (a closed
        // socket is no proof the server stopped) and the permit stays counted as a hold
        // until the server shows the connection gone after KILL.
        let reason = format!(
            "target write timed out after {deadline:?}; target connection {id} may still \
             run its statement"
        );
        let hold = permit.mark_release_unknown(reason.clone());
        let killed = crate::io::bounded::kill_confirmed(&ctx.target, "target", id).await;
        let (conn, slot) = conn.split();
        drop(conn);
        if killed.is_err() {
            slot.lose();
        }
        killed?;
        ctx.admission
            .confirm_hold(hold)
            .map_err(|e| Error::transient(e.to_string()))?;
        return Ok(Err(format!(
            "{reason} (KILLed and confirmed gone: outcome unknown)"
        )));
    };
    // Every statement was answered unless the apply failed (a failed COMMIT or a lost
    // connection may leave the server thread running).
    let answered = r.is_ok();
    let (conn, slot) = conn.split();
    if let Err(e) =
        crate::io::bounded::close_confirmed(&ctx.target, "target", conn, id, answered).await
    {
        slot.lose();
        let _hold = permit.mark_release_unknown(e.to_string());
        let done = match &r {
            Ok(a) => format!("after the apply answered {a:?}"),
            Err(_) => "after the apply failed".to_string(),
        };
        return Err(Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!("job {} {}: {done}: {e}", ctx.id(), ctx.generation()),
        ));
    }
    permit.release_confirmed();
    match r {
        Ok(a) => Ok(Ok(a)),
        Err(ApplyError::Failed(e)) => Err(e),
        Err(ApplyError::Unknown(m)) => Ok(Err(m)),
    }
}

/// The page writer's connection: the target schema is its default database, so page-write
/// sessions can be told apart in the target's PROCESSLIST (its DB column) from the state
/// store's and replay's (statements name every table fully, so nothing else changes).
fn writer_opts(ctx: &JobCtx) -> mysql_async::Opts {
    mysql_async::OptsBuilder::from_opts(ctx.target.opts().clone())
        .db_name(Some(ctx.tctx.schema.database.clone()))
        .into()
}

/// Persists one more use of the execution's budget, or fails definitely when exhausted.
async fn consume(ctx: &JobCtx) -> Result<u32> {
    let (job, g) = (ctx.id(), ctx.generation());
    let map = |e: sqlx::Error| from_sqlx("updating the uncertain-commit budget", &e);
    // Two pages of one window resolve concurrently: serialise the read-modify-write here
    // (one process owns the job under its lease) so InnoDB's insert locks cannot deadlock.
    // On a Galera state store the row read FOR UPDATE is written in the same transaction,
    // so a concurrent use through another node fails certification (1213, retried).
    let _one = CONSUME.lock().await;
    let mut tx = ctx.pool.begin().await.map_err(map)?;
    sqlx::query(
        "INSERT IGNORE INTO uncertain_budget (job_id, generation, scope, used) VALUES (?, ?, ?, 0)",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(SCOPE)
    .execute(&mut *tx)
    .await
    .map_err(map)?;
    let used: u32 = sqlx::query_scalar(
        "SELECT used FROM uncertain_budget WHERE job_id = ? AND generation = ? AND scope = ? \
         FOR UPDATE",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(SCOPE)
    .fetch_one(&mut *tx)
    .await
    .map_err(map)?;
    let mut budget = RetryBudget::new(BOOTSTRAP_BUDGET, used);
    let n = budget.try_consume().map_err(|e| {
        Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!(
                "job {job} {g}: uncertain target commit not recovered automatically ({e} in this \
                 execution); check the target, then `backfill resume {job}`"
            ),
        )
    })?;
    sqlx::query(
        "UPDATE uncertain_budget SET used = ? WHERE job_id = ? AND generation = ? AND scope = ?",
    )
    .bind(n)
    .bind(job.0)
    .bind(g.0)
    .bind(SCOPE)
    .execute(&mut *tx)
    .await
    .map_err(map)?;
    tx.commit().await.map_err(map)?;
    Ok(n)
}

/// Uses of the execution's budget so far.
pub async fn used(
    pool: &sqlx::MySqlPool,
    job: kernel::ids::JobId,
    g: kernel::ids::Generation,
) -> Result<u32> {
    let n: Option<u32> = sqlx::query_scalar(
        "SELECT used FROM uncertain_budget WHERE job_id = ? AND generation = ? AND scope = ?",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(SCOPE)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("reading the uncertain-commit budget", &e))?;
    Ok(n.unwrap_or(0))
}

/// A new execution (`resume`): the budget starts again.
pub async fn reset(ctx: &JobCtx) -> Result<()> {
    sqlx::query("DELETE FROM uncertain_budget WHERE job_id = ? AND generation = ?")
        .bind(ctx.id().0)
        .bind(ctx.generation().0)
        .execute(&ctx.pool)
        .await
        .map_err(|e| from_sqlx("resetting the uncertain-commit budget", &e))?;
    Ok(())
}
