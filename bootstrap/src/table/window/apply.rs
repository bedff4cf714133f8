//! Steps 8-9 of a window (DESIGN §5): the saved FINAL bytes applied through T, then J and
//! the range chain advanced in one state-store transaction.
//!
//! Why it is safe (I2): every page goes through `ledger::apply`, whose first write is the
//! page credential; a page T already holds is AlreadyCommitted without business DML, and
//! an unknown COMMIT outcome is resolved from T on a new connection. Each page runs under
//! its own write permit, returned only once its outcome is known (the pipeline,
//! `crate::table::window::pipeline`, runs as many as there are permits and the table's first
//! page alone). A deadlock or lost connection is a transient failure: the next run
//! re-reads T and applies only the missing pages. J
//! advances only after every page's credential is confirmed, and
//! `Journal::complete_window` refuses any window but the next one in plan order.
use crate::table::ctx::JobCtx;
use crate::table::window::fp;
use kernel::error::DefiniteCode;
use kernel::failpoint;
use kernel::ids::{Attempt, Digest, PageNo, WindowId};
use kernel::{Error, Result};
use ledger::apply::Applied;
use ledger::chain::{self, ChainEntry};
use ledger::journal::Head;
use ledger::target::{self, PageCredential};
use tracing::Instrument;

/// T's credentials of window `w`, in page order.
pub async fn credentials(ctx: &JobCtx, w: WindowId) -> Result<Vec<PageCredential>> {
    let mut conn = ctx
        .target
        .connect(crate::io::pool::Use::Control, "(target)")
        .await?;
    let all = target::page_credentials(&mut conn, &ctx.tctx).await;
    conn.close().await;
    Ok(all?.into_iter().filter(|c| c.window == w).collect())
}

/// One saved FINAL page under a write permit (the table's first page is applied alone by
/// the caller); returns the rows this call committed (0 when T already held the page).
pub async fn apply_one(
    ctx: &JobCtx,
    w: WindowId,
    a: Attempt,
    no: PageNo,
    bytes: &[u8],
) -> Result<u64> {
    let owner = format!("job {} {w} {a} {no}", ctx.id());
    let permit = ctx
        .admission
        .acquire_write(&owner, ctx.cfg.permit_timeout, &ctx.cancel)
        .await
        .map_err(|e| Error::transient(format!("{owner}: {e}")))?;
    // The permit is settled by apply_page: released once the outcome is known and the
    // connection confirmed closed, or kept as a hold while a statement may still run.
    let apply = crate::table::target_write::apply_page(ctx, bytes, permit);
    let span = crate::profile_span!("window.apply_page", ctx.id(), w);
    let n = match apply.instrument(span).await? {
        Applied::Committed => page_rows(bytes),
        Applied::AlreadyCommitted => {
            tracing::info!(%w, page = %no, "page already in the target ledger: no DML ran");
            0
        }
    };
    failpoint::hit(fp::AFTER_PAGE_APPLIED);
    Ok(n)
}

fn page_rows(bytes: &[u8]) -> u64 {
    ledger::page::FinalPage::decode(bytes)
        .map(|p| p.rows.len() as u64)
        .unwrap_or(0)
}

/// Step 9: J (completed + 1, new root, no current window) and the range chain, in one
/// state-store transaction.
pub async fn complete(
    ctx: &JobCtx,
    head: &Head,
    w: WindowId,
    a: Attempt,
    manifest_hash: Digest,
) -> Result<Head> {
    let range = ctx.plan.get(w.0 as usize).cloned().ok_or_else(|| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("{w} is not in the plan of job {}", ctx.id()),
        )
    })?;
    let entry = ChainEntry {
        window: w,
        range,
        attempt: a,
        manifest_hash,
    };
    let mut next = head.record.clone();
    next.completed += 1;
    next.chain_root = chain::extend(head.record.chain_root, &entry);
    next.current = None;
    let h = ctx
        .journal
        .complete_window(&ctx.lease, head, entry, next)
        .instrument(crate::profile_span!("window.j", ctx.id(), w))
        .await?;
    failpoint::hit(fp::AFTER_J);
    Ok(h)
}
