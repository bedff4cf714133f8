//! `backfill status` (DESIGN §13), minimal for now: what install recorded. The execution
//! state (windows read and applied, replay cursor, pause reason) joins once J exists; until
//! then a live job is shown as INSTALLED.
use crate::jobs::{self, JobRecord};
use kernel::ids::JobId;
use kernel::Result;
use serde_json::{json, Value};
use sqlx::MySqlPool;

/// At most this many jobs are listed.
pub const MAX_LISTED: u32 = 10_000;

/// The jobs to show: one, or all.
pub async fn read(pool: &MySqlPool, job: Option<JobId>) -> Result<Vec<JobRecord>> {
    match job {
        Some(j) => Ok(vec![jobs::load_job(pool, j).await?]),
        None => jobs::list_jobs(pool, MAX_LISTED).await,
    }
}

/// One job as JSON.
pub fn job_json(j: &JobRecord) -> Value {
    json!({
        "job_id": j.job_id.0,
        "state": j.state,
        "generation": j.generation.0,
        "source": { "server": j.source.identity, "url": j.source_url, "db": j.source.db, "table": j.source.table },
        "target": { "server": j.target.identity, "url": j.target_url, "db": j.target.db, "table": j.target.table },
        "control_schema": j.control_schema,
        "windows": j.windows,
        "estimated_rows": j.estimated_rows,
        "window_rows": j.window_rows,
        "page_rows": j.page_rows,
        "fingerprint": j.fingerprint.to_hex(),
        "plan_digest": j.plan_digest.to_hex(),
    })
}

/// One job as a text line.
pub fn job_text(j: &JobRecord) -> String {
    format!(
        "job {}  {}  generation {}  source {} on {}  target {} on {}  windows {} planned \
         ({} rows each, pages of {}; about {} rows at install)",
        j.job_id,
        j.state,
        j.generation,
        j.source.qualified(),
        j.source_url,
        j.target.qualified(),
        j.target_url,
        j.windows,
        j.window_rows,
        j.page_rows,
        j.estimated_rows
    )
}
