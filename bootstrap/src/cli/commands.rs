//! `backfill cancel` and `backfill resume`: each records a persisted command and returns;
//! a running `serve` (or the next one) carries it out (`crate::table::cancel`,
//! `crate::table::pause`).
use crate::cli::{Format, StateArgs};
use kernel::ids::JobId;
use kernel::Result;
use serde_json::json;

/// `backfill cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The job to cancel (as printed by install).
    pub job: u64,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Records the cancel command; needs no running `serve` (the next one completes it).
pub async fn cancel(a: CancelArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = crate::store::commands::cancel(&pool, JobId(a.job)).await;
    pool.close().await;
    let (g, already) = r?;
    let what = if already {
        "already cancelled"
    } else {
        "CANCELING recorded; `backfill serve` completes it: it writes the cancel point (K), then \
         records CANCELLED(K)"
    };
    Ok(match a.format {
        Format::Text => format!("job {} {g}: {what}\n", a.job),
        Format::Json => format!(
            "{}\n",
            json!({ "job_id": a.job, "generation": g.0, "command": "cancel", "already_cancelled": already })
        ),
    })
}

/// `backfill resume`.
#[derive(Debug, clap::Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The paused job to resume (fix the cause first: `backfill status JOB` names it).
    pub job: u64,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Records the resume command; `serve` (running or the next one) continues the job.
pub async fn resume(a: ResumeArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = crate::store::commands::resume(&pool, JobId(a.job)).await;
    pool.close().await;
    let g = r?;
    Ok(match a.format {
        Format::Text => format!(
            "job {} {g}: resume recorded; `backfill serve` continues it from where it paused\n",
            a.job
        ),
        Format::Json => format!(
            "{}\n",
            json!({ "job_id": a.job, "generation": g.0, "command": "resume" })
        ),
    })
}
