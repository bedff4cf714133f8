//! Intents (B, LOW, HIGH, F, K) written to the source's control table and awaited in L:
//! a marker counts only once L durably holds it at its binlog position (DESIGN §2), so a
//! waiter never acts on an intent the reader has not captured.
use crate::table::ctx::JobCtx;
use kernel::control::Intent;
use kernel::failpoint;
use kernel::Result;
use tokio::time::Instant;

/// Writes an intent and waits until L durably holds it, both within `marker_timeout`: a
/// source that stops answering (frozen, a dead network path) ends the wait with a
/// transient error, and the connection of an unanswered write is never reused
/// ([`crate::io::pool::Pooled::abandon`]). An intent written but never awaited is
/// harmless: its nonce belongs to an attempt that no longer waits for it.
pub async fn write_and_await(
    ctx: &JobCtx,
    intent: &Intent,
    written_fp: &str,
) -> Result<kernel::log::MarkerSeen> {
    let limit = ctx.cfg.marker_timeout;
    let deadline = Instant::now() + limit;
    let mut conn = ctx
        .source
        .connect(crate::io::pool::Use::Control, "(job source)")
        .await?;
    let write = kernel::control::write_intent(&mut conn, &ctx.job.control_schema, intent);
    match tokio::time::timeout_at(deadline, write).await {
        Ok(r) => {
            conn.close().await;
            r?;
        }
        Err(_) => {
            crate::io::bounded::abandon(conn, "source").await;
            return Err(kernel::Error::transient(format!(
                "writing the {:?} intent on the source: no answer within {limit:?} \
                 (marker_timeout)",
                intent.kind
            )));
        }
    }
    failpoint::hit(written_fp);
    kernel::log::wait_for_marker(&ctx.pool, &ctx.stream, intent.nonce, deadline).await
}
