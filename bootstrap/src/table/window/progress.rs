//! Window progress counters for `status` (DESIGN §13, STYLE §10): rows read under the
//! read view, rows sealed FINAL, rows applied. Counters only: the protocol never reads
//! them back, so a lost update can only make status lag, never change a decision.
use kernel::error::from_sqlx;
use kernel::ids::{Attempt, Generation, JobId, WindowId};
use kernel::Result;
use serde::Serialize;
use sqlx::MySqlPool;

/// Where a window is, as shown by status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Reading,
    Sealed,
    Applying,
    Done,
}

impl Step {
    pub fn as_str(self) -> &'static str {
        match self {
            Step::Reading => "reading",
            Step::Sealed => "sealed",
            Step::Applying => "applying",
            Step::Done => "done",
        }
    }
}

/// One window's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowProgress {
    pub window: u32,
    pub attempt: u32,
    pub step: String,
    pub rows_read: u64,
    pub rows_final: u64,
    pub rows_applied: u64,
}

/// Records the counters of a window: a new attempt (step `reading`) resets them, later
/// steps only raise them (a restarted apply reports 0 read rows without erasing them).
#[allow(clippy::too_many_arguments)]
pub async fn record(
    pool: &MySqlPool,
    job: JobId,
    generation: Generation,
    window: WindowId,
    attempt: Attempt,
    step: Step,
    rows: (u64, u64, u64),
) -> Result<()> {
    sqlx::query(
        "INSERT INTO window_progress (job_id, generation, window_id, attempt, step, rows_read, \
         rows_final, rows_applied) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON DUPLICATE KEY UPDATE \
         rows_read = IF(VALUES(step) = 'reading', VALUES(rows_read), GREATEST(rows_read, VALUES(rows_read))), \
         rows_final = IF(VALUES(step) = 'reading', VALUES(rows_final), GREATEST(rows_final, VALUES(rows_final))), \
         rows_applied = IF(VALUES(step) = 'reading', VALUES(rows_applied), GREATEST(rows_applied, VALUES(rows_applied))), \
         attempt = VALUES(attempt), step = VALUES(step)",
    )
    .bind(job.0)
    .bind(generation.0)
    .bind(window.0)
    .bind(attempt.0)
    .bind(step.as_str())
    .bind(rows.0)
    .bind(rows.1)
    .bind(rows.2)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("recording window progress", &e))?;
    Ok(())
}

/// Every window's counters of a job-generation, in window order (bounded).
pub async fn read(
    pool: &MySqlPool,
    job: JobId,
    generation: Generation,
) -> Result<Vec<WindowProgress>> {
    let rows: Vec<(u32, u32, String, u64, u64, u64)> = sqlx::query_as(
        "SELECT window_id, attempt, step, rows_read, rows_final, rows_applied \
         FROM window_progress WHERE job_id = ? AND generation = ? ORDER BY window_id \
         LIMIT 200000",
    )
    .bind(job.0)
    .bind(generation.0)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading window progress", &e))?;
    Ok(rows
        .into_iter()
        .map(|(w, a, s, r, f, p)| WindowProgress {
            window: w,
            attempt: a,
            step: s,
            rows_read: r,
            rows_final: f,
            rows_applied: p,
        })
        .collect())
}
