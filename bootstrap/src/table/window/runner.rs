//! The window loop: every run re-reads J and starts the read-ahead pipeline
//! ([`crate::table::window::pipeline`]) from the window J is at. Each window's step is decided
//! from its evidence by the pure [`crate::table::window::restart::decide`], so a fresh window and one
//! recovered after a crash take the same path (see the module docs of
//! [`crate::table::window`] for the safety argument).
use crate::table::ctx::{JobCtx, Reached};
use crate::table::pause;
use crate::table::window::{pipeline, produce};
use kernel::ids::WindowId;
use kernel::{Error, Result};
use ledger::journal::Head;
use std::time::Duration;
use tracing::Instrument;

/// Runs windows until every one is applied and recorded in J, or the table pauses.
/// Transient failures restart the pipeline (the evidence decides each window's step);
/// `max_attempts` failures in a row without J advancing pause the table with a reason
/// naming the window and the last error (never an endless loop, STYLE §6).
pub async fn run_windows(ctx: &JobCtx, _head: Head) -> Result<Reached> {
    let n = u32::try_from(ctx.plan.len()).unwrap_or(u32::MAX);
    let mut failures = 0u32;
    let mut stuck_at = None;
    loop {
        let head = ctx.head().await?;
        if let Some(p) = &head.record.paused {
            return Ok(Reached::Paused(p.clone()));
        }
        let at = head.record.completed;
        if at >= n {
            return Ok(Reached::WindowsDone(Box::new(head)));
        }
        if ctx.cancel.is_cancelled() {
            return Err(Error::transient("the job task was asked to stop"));
        }
        let shared = produce::Shared {
            legacy: head.record.current,
            ..Default::default()
        };
        let span = tracing::info_span!("windows", job = %ctx.id(), from = at);
        let e = match pipeline::run(ctx, at, n, shared).instrument(span).await {
            Ok(()) if ctx.head().await?.record.completed >= n => continue,
            Ok(()) => Error::transient("the window pipeline ended before every window was in J"),
            Err(e) if e.is_transient() && !ctx.cancel.is_cancelled() => e,
            Err(e) => {
                let head = ctx.head().await?;
                return pause::pause_on_definite(ctx, &head, e).await;
            }
        };
        let now = ctx.head().await?.record.completed;
        failures = if stuck_at == Some(now) {
            failures + 1
        } else {
            1
        };
        stuck_at = Some(now);
        tracing::warn!(job = %ctx.id(), window = now, failures, error = %e, "window pipeline failed; it restarts from the evidence");
        if failures >= ctx.cfg.max_attempts.max(1) {
            let d = produce::exhausted(ctx, WindowId(now), failures, &e);
            let head = ctx.head().await?;
            return pause::pause_on_definite(ctx, &head, d).await;
        }
        tokio::time::sleep(Duration::from_millis(100 * u64::from(failures))).await;
    }
}
