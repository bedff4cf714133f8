//! Persisted operator commands (DESIGN §13): `backfill start JOB` writes a row and returns;
//! it needs no running server process. `backfill serve` reads the rows and runs the jobs.
//!
//! A command names the job AND its generation, so a command of a cancelled generation can
//! never start a later one. Recording is idempotent (`INSERT IGNORE` on the primary key).
use crate::store::jobs::{self, STATE_CANCELLED};
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::{Generation, JobId};
use kernel::{Error, Result};
use sqlx::MySqlPool;

/// The command that makes `serve` run a job.
pub const START: &str = "start";

/// Records `start` for the live generation of `job`. Returns the generation started.
pub async fn start(pool: &MySqlPool, job: JobId) -> Result<Generation> {
    let rec = jobs::load_job(pool, job).await?;
    if rec.state == STATE_CANCELLED {
        return Err(Error::definite(
            DefiniteCode::Usage,
            format!(
                "job {job} is cancelled; re-install the table (new generation, new empty target)"
            ),
        ));
    }
    sqlx::query("INSERT IGNORE INTO job_commands (job_id, generation, command) VALUES (?, ?, ?)")
        .bind(job.0)
        .bind(rec.generation.0)
        .bind(START)
        .execute(pool)
        .await
        .map_err(|e| from_sqlx("recording the start command", &e))?;
    Ok(rec.generation)
}

/// Records `start` unless the started live jobs already fill `max_sessions` (DESIGN §8):
/// every running table holds one execution session in `serve`, a streaming tail for as long
/// as it runs, so a start beyond the limit is refused now with how to raise it, never left
/// to wait. Starting a job that is already started is not a new session.
pub async fn start_within(pool: &MySqlPool, job: JobId, max_sessions: u32) -> Result<Generation> {
    let rec = jobs::load_job(pool, job).await?;
    if rec.state != STATE_CANCELLED && !is_started(pool, job, rec.generation).await? {
        let others: Vec<JobId> = started(pool)
            .await?
            .into_iter()
            .map(|(j, _)| j)
            .filter(|j| *j != job)
            .collect();
        if others.len() >= max_sessions as usize {
            return Err(session_refusal(job, max_sessions, &others));
        }
    }
    start(pool, job).await
}

/// Refuses starting `jobs` together when the started live jobs and the new ones would be
/// more than `max_sessions` (as [`start_within`] for one job), before any is recorded.
pub async fn check_sessions(pool: &MySqlPool, jobs: &[JobId], max_sessions: u32) -> Result<()> {
    let others: Vec<JobId> = started(pool)
        .await?
        .into_iter()
        .map(|(j, _)| j)
        .filter(|j| !jobs.contains(j))
        .collect();
    if others.len() + jobs.len() <= max_sessions as usize {
        return Ok(());
    }
    let names: Vec<String> = jobs.iter().take(20).map(ToString::to_string).collect();
    let more = if jobs.len() > names.len() {
        ", ..."
    } else {
        ""
    };
    Err(Error::definite(
        DefiniteCode::Precondition,
        format!(
            "starting {} jobs ({}{more}) refused, none recorded: with the {} jobs already \
             started that is {} execution sessions, above the limit of {max_sessions} (each \
             running table holds one; a streaming table keeps it). Raise the limit with \
             --max-sessions N (BACKFILL_MAX_SESSIONS, or max_sessions in --config) on both \
             `backfill start` and `backfill serve`, or start fewer jobs",
            jobs.len(),
            names.join(", "),
            others.len(),
            others.len() + jobs.len()
        ),
    ))
}

/// Live jobs still INSTALLED with no start or cancel command for their generation, oldest
/// first (what `backfill start --all` starts; bounded like [`started`]).
pub async fn unstarted(pool: &MySqlPool) -> Result<Vec<JobId>> {
    let rows: Vec<(u64,)> = sqlx::query_as(
        "SELECT j.job_id FROM jobs j WHERE j.state = ? AND NOT EXISTS (SELECT 1 FROM \
         job_commands c WHERE c.job_id = j.job_id AND c.generation = j.generation \
         AND c.command IN (?, ?)) ORDER BY j.job_id LIMIT 10000",
    )
    .bind(jobs::STATE_INSTALLED)
    .bind(START)
    .bind(CANCEL)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading jobs not yet started", &e))?;
    Ok(rows.into_iter().map(|(j,)| JobId(j)).collect())
}

fn session_refusal(job: JobId, limit: u32, others: &[JobId]) -> Error {
    let shown: Vec<String> = others.iter().take(20).map(ToString::to_string).collect();
    let more = if others.len() > shown.len() {
        ", ..."
    } else {
        ""
    };
    Error::definite(
        DefiniteCode::Precondition,
        format!(
            "job {job} refused: {} started jobs ({}{more}) already use all {limit} execution \
             sessions (each running table holds one; a streaming table keeps it). Raise the \
             limit with --max-sessions N (BACKFILL_MAX_SESSIONS, or max_sessions in --config) \
             on both `backfill start` and `backfill serve`, or cancel a job (`backfill cancel \
             JOB`)",
            others.len(),
            shown.join(", ")
        ),
    )
}

/// The command that cancels a job (DESIGN §8): CANCELING, then CANCELLED(K).
pub const CANCEL: &str = "cancel";

/// Every live job with a `start` or `cancel` command, oldest first (bounded). A job
/// cancelled without ever being started is run too: its task only completes the cancel.
pub async fn started(pool: &MySqlPool) -> Result<Vec<(JobId, Generation)>> {
    let rows: Vec<(u64, u64)> = sqlx::query_as(
        "SELECT DISTINCT c.job_id, c.generation FROM job_commands c \
         JOIN jobs j ON j.job_id = c.job_id AND j.generation = c.generation \
         WHERE c.command IN (?, ?) AND j.state <> ? ORDER BY c.job_id LIMIT 10000",
    )
    .bind(START)
    .bind(CANCEL)
    .bind(STATE_CANCELLED)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading start commands", &e))?;
    Ok(rows
        .into_iter()
        .map(|(j, g)| (JobId(j), Generation(g)))
        .collect())
}

/// True when `job` has a `start` command for `generation`.
pub async fn is_started(pool: &MySqlPool, job: JobId, generation: Generation) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_commands WHERE job_id = ? AND generation = ? AND command = ?",
    )
    .bind(job.0)
    .bind(generation.0)
    .bind(START)
    .fetch_one(pool)
    .await
    .map_err(|e| from_sqlx("reading start commands", &e))?;
    Ok(n > 0)
}

/// Records `cancel` for the live generation of `job` (CANCELING: the job's task completes
/// it). Returns the generation; a job already cancelled is reported as such, not an error.
pub async fn cancel(pool: &MySqlPool, job: JobId) -> Result<(Generation, bool)> {
    let rec = jobs::load_job(pool, job).await?;
    if rec.state == STATE_CANCELLED {
        return Ok((rec.generation, true));
    }
    sqlx::query("INSERT IGNORE INTO job_commands (job_id, generation, command) VALUES (?, ?, ?)")
        .bind(job.0)
        .bind(rec.generation.0)
        .bind(CANCEL)
        .execute(pool)
        .await
        .map_err(|e| from_sqlx("recording the cancel command", &e))?;
    Ok((rec.generation, false))
}

/// True when `job` has `command` for `generation`.
pub async fn has(
    pool: &MySqlPool,
    job: JobId,
    generation: Generation,
    command: &str,
) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM job_commands WHERE job_id = ? AND generation = ? AND command = ?",
    )
    .bind(job.0)
    .bind(generation.0)
    .bind(command)
    .fetch_one(pool)
    .await
    .map_err(|e| from_sqlx("reading job commands", &e))?;
    Ok(n > 0)
}

/// Live jobs (job, generation) with a `cancel` command (bounded).
pub async fn canceling(pool: &MySqlPool) -> Result<Vec<(JobId, Generation)>> {
    let rows: Vec<(u64, u64)> = sqlx::query_as(
        "SELECT c.job_id, c.generation FROM job_commands c \
         JOIN jobs j ON j.job_id = c.job_id AND j.generation = c.generation \
         WHERE c.command = ? AND j.state <> ? ORDER BY c.job_id LIMIT 10000",
    )
    .bind(CANCEL)
    .bind(STATE_CANCELLED)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading cancel commands", &e))?;
    Ok(rows
        .into_iter()
        .map(|(j, g)| (JobId(j), Generation(g)))
        .collect())
}

/// The command that clears a pause.
pub const RESUME: &str = "resume";

/// Records (or renews) `resume` for the live generation of `job`.
pub async fn resume(pool: &MySqlPool, job: JobId) -> Result<Generation> {
    let rec = jobs::load_job(pool, job).await?;
    if rec.state == STATE_CANCELLED {
        return Err(kernel::Error::definite(
            kernel::error::DefiniteCode::Usage,
            format!("job {job} is cancelled; it cannot be resumed"),
        ));
    }
    sqlx::query(
        "INSERT INTO job_commands (job_id, generation, command) VALUES (?, ?, ?) \
         ON DUPLICATE KEY UPDATE issued_at = CURRENT_TIMESTAMP(6)",
    )
    .bind(job.0)
    .bind(rec.generation.0)
    .bind(RESUME)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("recording the resume command", &e))?;
    Ok(rec.generation)
}

/// Live jobs with a pending `resume` (bounded).
pub async fn resumes(pool: &MySqlPool) -> Result<Vec<JobId>> {
    let rows: Vec<(u64,)> = sqlx::query_as(
        "SELECT c.job_id FROM job_commands c \
         JOIN jobs j ON j.job_id = c.job_id AND j.generation = c.generation \
         WHERE c.command = ? AND j.state <> ? ORDER BY c.job_id LIMIT 10000",
    )
    .bind(RESUME)
    .bind(STATE_CANCELLED)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading resume commands", &e))?;
    Ok(rows.into_iter().map(|(j,)| JobId(j)).collect())
}
