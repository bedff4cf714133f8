//! The per-window attempt table (`window_attempts`, DESIGN §5 restart rules).
//!
//! Why it is needed and safe: with read-ahead, windows after the one J is at are read and
//! sealed while J is behind, so J's single `current` field cannot name their attempts. An
//! attempt is recorded here BEFORE its LOW is written (as J's `current` was), so after a
//! crash the last attempt of every window is known exactly: with no seal row for it, the
//! window restarts with the next attempt number (its old materials are garbage); with one,
//! it is verified and never re-read. A record is never deleted or rewritten except for
//! `last_error`, which only explains a failure (status, the attempt cap's pause reason).
use crate::table::ctx::JobCtx;
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::{Attempt, WindowId};
use kernel::{Error, Result};

/// Records that `a` of window `w` starts. The same record again is fine (idempotent after
/// a crash right after it); an attempt number below the window's last one is refused.
pub async fn begin(ctx: &JobCtx, w: WindowId, a: Attempt) -> Result<()> {
    if let Some(last) = last(ctx, w).await? {
        if last.0 > a.0 {
            return Err(Error::definite(
                DefiniteCode::EvidenceConflict,
                format!(
                    "job {} {w}: attempt {a} starts after attempt {last} was recorded \
                     (another process works on this window?)",
                    ctx.id()
                ),
            ));
        }
    }
    sqlx::query(
        "INSERT IGNORE INTO window_attempts (job_id, generation, window_id, attempt) \
         VALUES (?, ?, ?, ?)",
    )
    .bind(ctx.id().0)
    .bind(ctx.generation().0)
    .bind(w.0)
    .bind(a.0)
    .execute(&ctx.pool)
    .await
    .map_err(|e| from_sqlx("recording a window attempt", &e))?;
    Ok(())
}

/// The last attempt recorded for window `w`, if any.
pub async fn last(ctx: &JobCtx, w: WindowId) -> Result<Option<Attempt>> {
    let a: Option<u32> = sqlx::query_scalar(
        "SELECT MAX(attempt) FROM window_attempts WHERE job_id = ? AND generation = ? \
         AND window_id = ?",
    )
    .bind(ctx.id().0)
    .bind(ctx.generation().0)
    .bind(w.0)
    .fetch_one(&ctx.pool)
    .await
    .map_err(|e| from_sqlx("reading a window's last attempt", &e))?;
    Ok(a.map(Attempt))
}

/// Keeps why attempt `a` of window `w` failed (bounded to 1000 characters).
pub async fn note_failure(ctx: &JobCtx, w: WindowId, a: Attempt, error: &str) -> Result<()> {
    let msg: String = error.chars().take(1000).collect();
    sqlx::query(
        "UPDATE window_attempts SET last_error = ? WHERE job_id = ? AND generation = ? \
         AND window_id = ? AND attempt = ?",
    )
    .bind(msg)
    .bind(ctx.id().0)
    .bind(ctx.generation().0)
    .bind(w.0)
    .bind(a.0)
    .execute(&ctx.pool)
    .await
    .map_err(|e| from_sqlx("recording a window attempt's failure", &e))?;
    Ok(())
}

/// What `status` shows of the window J is on: its last attempt number and the most
/// recent failure kept for it (None when no attempt of it failed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tries {
    pub attempts: u32,
    pub last_error: Option<String>,
}

/// The attempts of window `w` of a table-generation (read by `status`, no job context).
pub async fn tries(
    pool: &sqlx::MySqlPool,
    job: kernel::ids::JobId,
    g: kernel::ids::Generation,
    w: WindowId,
) -> Result<Tries> {
    let (attempts, last_error): (Option<u32>, Option<String>) = sqlx::query_as(
        "SELECT MAX(attempt), (SELECT e.last_error FROM window_attempts e WHERE \
         e.job_id = ? AND e.generation = ? AND e.window_id = ? AND e.last_error IS NOT NULL \
         ORDER BY e.attempt DESC LIMIT 1) FROM window_attempts WHERE job_id = ? \
         AND generation = ? AND window_id = ?",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(w.0)
    .bind(job.0)
    .bind(g.0)
    .bind(w.0)
    .fetch_one(pool)
    .await
    .map_err(|e| from_sqlx("reading a window's attempts", &e))?;
    Ok(Tries {
        attempts: attempts.unwrap_or(0),
        last_error,
    })
}
