//! Intents (B, LOW, HIGH, F, K) written to the source's control table and awaited in L:
//! a marker counts only once L durably holds it at its binlog position (DESIGN §2), so a
//! waiter never acts on an intent the reader has not captured.
use crate::table::ctx::JobCtx;
use kernel::control::Intent;
use kernel::failpoint;
use kernel::Result;
use tokio::time::Instant;

/// Writes an intent and waits until L durably holds it.
pub async fn write_and_await(
    ctx: &JobCtx,
    intent: &Intent,
    written_fp: &str,
) -> Result<kernel::log::MarkerSeen> {
    let mut conn = ctx
        .source
        .connect(crate::io::pool::Use::Control, "(job source)")
        .await?;
    let r = kernel::control::write_intent(&mut conn, &ctx.job.control_schema, intent).await;
    conn.close().await;
    r?;
    failpoint::hit(written_fp);
    let deadline = Instant::now() + ctx.cfg.marker_timeout;
    kernel::log::wait_for_marker(&ctx.pool, &ctx.stream, intent.nonce, deadline).await
}
