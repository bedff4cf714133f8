//! The jobs' side of a source repoint (`backfill repoint`, DESIGN §18): every live job of
//! one source identity reads the stream that identity names, so they move together.
use crate::store::jobs::STATE_CANCELLED;
use kernel::error::from_sqlx;
use kernel::ids::JobId;
use kernel::Result;
use sqlx::MySqlPool;

/// The live (not cancelled) jobs of a source identity, in job order.
pub async fn live_jobs(pool: &MySqlPool, source_identity: &str) -> Result<Vec<JobId>> {
    let rows: Vec<(u64,)> = sqlx::query_as(
        "SELECT job_id FROM jobs WHERE source_identity = ? AND state <> ? ORDER BY job_id",
    )
    .bind(source_identity)
    .bind(STATE_CANCELLED)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading the jobs of a source", &e))?;
    Ok(rows.into_iter().map(|(j,)| JobId(j)).collect())
}

/// Records `url` (redacted: no password) as the source URL of every live job of
/// `source_identity`; returns how many rows changed. The identity (and so the stream
/// name) stays: it names the logical source whose history the stream holds.
pub async fn set_source_url(pool: &MySqlPool, source_identity: &str, url: &str) -> Result<u64> {
    let done =
        sqlx::query("UPDATE jobs SET source_url = ? WHERE source_identity = ? AND state <> ?")
            .bind(url)
            .bind(source_identity)
            .bind(STATE_CANCELLED)
            .execute(pool)
            .await
            .map_err(|e| from_sqlx("recording the jobs' new source URL", &e))?;
    Ok(done.rows_affected())
}
