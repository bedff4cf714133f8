//! PAUSED(reason, context) and `backfill resume` (DESIGN §8).
//!
//! Why it is safe: a pause only records the reason in J; the phase and every piece of
//! context (current window and attempt, completed windows, chain root, B/F, T's cursor, L)
//! stay as they were, and every protocol step is re-entered from that evidence anyway
//! (the window loop decides from J, seal, materials and T; replay from T's cursor). So
//! resuming is only clearing the reason: the job continues exactly where the evidence
//! says, and if the cause was not fixed the same definite error pauses it again.
//!
//! `resume` is a persisted command (it needs no running `serve`). It is consumed by the
//! job task that acts on it: the task clears the pause in J under its lease, then deletes
//! the command row, so a later pause needs a later resume. A crash between the two leaves a
//! resume that clears nothing (J is not paused) and is deleted on the next run.
use crate::job::JobCtx;
use kernel::error::from_sqlx;
use kernel::ids::{Generation, JobId};
use kernel::Result;
use serde_json::json;
use sqlx::MySqlPool;

/// The command that clears a pause.
pub const RESUME: &str = "resume";

/// Records (or renews) `resume` for the live generation of `job`.
pub async fn request(pool: &MySqlPool, job: JobId) -> Result<Generation> {
    let rec = crate::jobs::load_job(pool, job).await?;
    if rec.state == crate::jobs::STATE_CANCELLED {
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
pub async fn requested(pool: &MySqlPool) -> Result<Vec<JobId>> {
    let rows: Vec<(u64,)> = sqlx::query_as(
        "SELECT c.job_id FROM job_commands c \
         JOIN jobs j ON j.job_id = c.job_id AND j.generation = c.generation \
         WHERE c.command = ? AND j.state <> ? ORDER BY c.job_id LIMIT 10000",
    )
    .bind(RESUME)
    .bind(crate::jobs::STATE_CANCELLED)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading resume commands", &e))?;
    Ok(rows.into_iter().map(|(j,)| JobId(j)).collect())
}

/// At the start of a job task: if a resume is pending, clears J's pause (keeping every
/// other field) and consumes the command. Returns true when a pause was cleared.
pub async fn apply_resume(ctx: &JobCtx) -> Result<bool> {
    let (job, g) = (ctx.id(), ctx.generation());
    if !crate::commands::has(&ctx.pool, job, g, RESUME).await? {
        return Ok(false);
    }
    let mut cleared = false;
    if let Some(head) = ctx.journal.head(job, g).await? {
        if let Some(reason) = &head.record.paused {
            tracing::info!(%job, %reason, "resume: clearing the pause, continuing from J");
            let mut next = head.record.clone();
            next.paused = None;
            ctx.journal.append(&ctx.lease, &head, next).await?;
            crate::uncertain::reset(ctx).await?;
            cleared = true;
        }
    }
    sqlx::query("DELETE FROM job_commands WHERE job_id = ? AND generation = ? AND command = ?")
        .bind(job.0)
        .bind(g.0)
        .bind(RESUME)
        .execute(&ctx.pool)
        .await
        .map_err(|e| from_sqlx("consuming the resume command", &e))?;
    Ok(cleared)
}

/// `backfill resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub state: crate::cli::StateArgs,
    /// The paused job to resume (fix the cause first: `backfill status JOB` names it).
    pub job: u64,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = crate::cli::Format::Text)]
    pub format: crate::cli::Format,
}

/// Records the resume command; `serve` (running or the next one) continues the job.
pub async fn command(a: ResumeArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = request(&pool, JobId(a.job)).await;
    pool.close().await;
    let g = r?;
    Ok(match a.format {
        crate::cli::Format::Text => format!(
            "job {} {g}: resume recorded; `backfill serve` continues it from where it paused\n",
            a.job
        ),
        crate::cli::Format::Json => format!(
            "{}\n",
            json!({ "job_id": a.job, "generation": g.0, "command": "resume" })
        ),
    })
}
