//! Retention rows (`retention_releases`, migration 0110) and what GC reads to compute L's
//! horizon: the SQL of `crate::table::retention`. The release record's bytes are kept
//! opaque here (decoded by the table layer).
use kernel::error::from_sqlx;
use kernel::ids::{Generation, JobId};
use kernel::log::LSeq;
use kernel::Result;
use sqlx::{MySqlPool, Row as _};

/// `retention_releases.state`.
pub const RETAINED: u8 = 0;
pub const INTENT: u8 = 1;
pub const DONE: u8 = 2;

/// One table-generation's retention row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleaseRow {
    pub state: u8,
    /// When GC first saw the table STREAMING, and now (state store clock, epoch seconds).
    pub streaming_since: i64,
    pub now: i64,
    pub record: Option<Vec<u8>>,
    pub materials: u64,
    pub bytes: u64,
    /// When the intent and the release were recorded (UTC text).
    pub intent_at: Option<String>,
    pub done_at: Option<String>,
}

fn sq(what: &str) -> impl Fn(sqlx::Error) -> kernel::Error + '_ {
    move |e| from_sqlx(what, &e)
}

/// The row of `job` `g`, if any.
pub async fn read(pool: &MySqlPool, job: JobId, g: Generation) -> Result<Option<ReleaseRow>> {
    let what = format!("reading the retention row of job {job} {g}");
    let r = sqlx::query(
        "SELECT state, CAST(UNIX_TIMESTAMP(streaming_since) AS SIGNED) AS since, \
         CAST(UNIX_TIMESTAMP(NOW(6)) AS SIGNED) AS now, record, materials, bytes, \
         DATE_FORMAT(intent_at, '%Y-%m-%d %H:%i:%s UTC') AS intent_at, \
         DATE_FORMAT(done_at, '%Y-%m-%d %H:%i:%s UTC') AS done_at \
         FROM retention_releases WHERE job_id = ? AND generation = ?",
    )
    .bind(job.0)
    .bind(g.0)
    .fetch_optional(pool)
    .await
    .map_err(sq(&what))?;
    let Some(r) = r else { return Ok(None) };
    let g = sq(&what);
    Ok(Some(ReleaseRow {
        state: r.try_get("state").map_err(&g)?,
        streaming_since: r.try_get("since").map_err(&g)?,
        now: r.try_get("now").map_err(&g)?,
        record: r.try_get("record").map_err(&g)?,
        materials: r.try_get("materials").map_err(&g)?,
        bytes: r.try_get("bytes").map_err(&g)?,
        intent_at: r.try_get("intent_at").map_err(&g)?,
        done_at: r.try_get("done_at").map_err(&g)?,
    }))
}

/// The row of a STREAMING table, created (retained, since now) on first sight.
pub async fn ensure(pool: &MySqlPool, job: JobId, g: Generation) -> Result<ReleaseRow> {
    if let Some(r) = read(pool, job, g).await? {
        return Ok(r);
    }
    sqlx::query("INSERT IGNORE INTO retention_releases (job_id, generation) VALUES (?, ?)")
        .bind(job.0)
        .bind(g.0)
        .execute(pool)
        .await
        .map_err(sq("creating a retention row"))?;
    read(pool, job, g).await?.ok_or_else(|| {
        kernel::Error::transient(format!("the retention row of job {job} {g} vanished"))
    })
}

/// Records the release intent (state retained -> intent) with its record; false when
/// another process already did.
pub async fn record_intent(
    pool: &MySqlPool,
    job: JobId,
    g: Generation,
    record: &[u8],
    materials: u64,
    bytes: u64,
) -> Result<bool> {
    let done = sqlx::query(
        "UPDATE retention_releases SET state = ?, record = ?, materials = ?, bytes = ?, \
         intent_at = NOW(6) WHERE job_id = ? AND generation = ? AND state = ?",
    )
    .bind(INTENT)
    .bind(record)
    .bind(materials)
    .bind(bytes)
    .bind(job.0)
    .bind(g.0)
    .bind(RETAINED)
    .execute(pool)
    .await
    .map_err(sq("recording a release intent"))?;
    Ok(done.rows_affected() == 1)
}

/// In one transaction: the registry rows of `job` `g` are removed and their bytes
/// subtracted from the usage (`ledger::release`), and the release is marked done.
pub async fn mark_done(pool: &MySqlPool, job: JobId, g: Generation) -> Result<(u64, u64)> {
    let what = format!("marking the release of job {job} {g} done");
    let mut tx = pool.begin().await.map_err(sq(&what))?;
    let state: Option<u8> = sqlx::query_scalar(
        "SELECT state FROM retention_releases WHERE job_id = ? AND generation = ? FOR UPDATE",
    )
    .bind(job.0)
    .bind(g.0)
    .fetch_optional(&mut *tx)
    .await
    .map_err(sq(&what))?;
    if state != Some(INTENT) {
        return Ok((0, 0));
    }
    let released = ledger::release::unregister_all(&mut tx, job, g).await?;
    sqlx::query(
        "UPDATE retention_releases SET state = ?, done_at = NOW(6) WHERE job_id = ? AND generation = ?",
    )
    .bind(DONE)
    .bind(job.0)
    .bind(g.0)
    .execute(&mut *tx)
    .await
    .map_err(sq(&what))?;
    tx.commit().await.map_err(sq(&what))?;
    Ok(released)
}

/// What one job with a B marker in `stream` holds of L (see
/// `crate::table::retention::horizon`): (job, cancelled, release state, B's seq, replay
/// hint, pause record).
pub type NeedRow = (JobId, bool, Option<u8>, LSeq, Option<LSeq>, Option<LSeq>);

/// Every job with a B marker in `stream`, with what decides its claim on L.
pub async fn needs(pool: &MySqlPool, stream: &str) -> Result<Vec<NeedRow>> {
    let rows = sqlx::query(
        "SELECT m.job_id, MAX(j.state) AS job_state, MAX(r.state) AS rel, MIN(m.seq) AS b_seq, \
         MAX(p.l_seq) AS hint, MIN(c.seq) AS paused \
         FROM capture_marker m JOIN jobs j ON j.job_id = m.job_id AND j.generation = m.generation \
         LEFT JOIN retention_releases r ON r.job_id = m.job_id AND r.generation = m.generation \
         LEFT JOIN replay_progress p ON p.job_id = m.job_id AND p.generation = m.generation \
         LEFT JOIN capture_pause c ON c.stream = m.stream AND c.job_id = m.job_id \
         AND c.generation = m.generation \
         WHERE m.stream = ? AND m.kind = 'B' AND m.obsolete = 0 GROUP BY m.job_id",
    )
    .bind(stream)
    .fetch_all(pool)
    .await
    .map_err(sq("reading who still needs the change log"))?;
    let g = sq("reading who still needs the change log");
    rows.iter()
        .map(|r| {
            let state: String = r.try_get("job_state").map_err(&g)?;
            Ok((
                JobId(r.try_get("job_id").map_err(&g)?),
                state == crate::store::jobs::STATE_CANCELLED,
                r.try_get("rel").map_err(&g)?,
                r.try_get("b_seq").map_err(&g)?,
                r.try_get("hint").map_err(&g)?,
                r.try_get("paused").map_err(&g)?,
            ))
        })
        .collect()
}

/// D's record of `stream` (the reader restarts after it).
pub async fn restart_seq(pool: &MySqlPool, stream: &str) -> Result<Option<LSeq>> {
    sqlx::query_scalar("SELECT restart_seq FROM capture_position WHERE stream = ?")
        .bind(stream)
        .fetch_optional(pool)
        .await
        .map_err(sq("reading the capture position"))
}

/// Unfinished `backfill verify` walks of `job` `g` (`verify_cursors`).
pub async fn verify_walks(pool: &MySqlPool, job: JobId, g: Generation) -> Result<i64> {
    sqlx::query_scalar("SELECT COUNT(*) FROM verify_cursors WHERE job_id = ? AND generation = ?")
        .bind(job.0)
        .bind(g.0)
        .fetch_one(pool)
        .await
        .map_err(sq("reading verify walks"))
}

/// The last clean periodic verify of `job` `g` (epoch seconds, state store clock).
pub async fn last_clean_verify(pool: &MySqlPool, job: JobId, g: Generation) -> Result<Option<i64>> {
    let v: Option<Option<i64>> = sqlx::query_scalar(
        "SELECT CAST(UNIX_TIMESTAMP(last_clean_at) AS SIGNED) FROM periodic_verifies \
         WHERE job_id = ? AND generation = ?",
    )
    .bind(job.0)
    .bind(g.0)
    .fetch_optional(pool)
    .await
    .map_err(sq("reading the last clean verify"))?;
    Ok(v.flatten())
}

/// The differing rows the last periodic verify of the table-generation found (0: none, or
/// no verify yet).
pub async fn last_verify_differing(pool: &MySqlPool, job: JobId, g: Generation) -> Result<u64> {
    let v: Option<u64> = sqlx::query_scalar(
        "SELECT last_differing FROM periodic_verifies WHERE job_id = ? AND generation = ?",
    )
    .bind(job.0)
    .bind(g.0)
    .fetch_optional(pool)
    .await
    .map_err(sq("reading the last periodic verify"))?;
    Ok(v.unwrap_or(0))
}
