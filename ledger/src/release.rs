//! Releasing a table-generation's registered materials from the accounting (retention,
//! DESIGN §17). Runs inside the caller's state-store transaction, which also marks the
//! release done, so "registry rows gone" and "release done" are one fact: after a kill
//! either both happened or neither. The total row (job 0) is locked first, as every
//! registration does (ledger::registry), so accounting never races a registration and
//! never relies on gap locks.
use crate::util::sq;
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::{Error, Result};
use sqlx::MySqlConnection;

/// Removes every registry row of `job` `generation` and subtracts their bytes from the
/// job's and the total usage. Returns (materials, bytes) released. Idempotent: a second
/// call releases nothing.
pub async fn unregister_all(
    c: &mut MySqlConnection,
    job: JobId,
    generation: Generation,
) -> Result<(u64, u64)> {
    let what = format!("releasing the materials of job {job} {generation} from the registry");
    let rows: Vec<u64> = sqlx::query_scalar(
        "SELECT job_id FROM ledger_material_usage WHERE job_id IN (0, ?) ORDER BY job_id FOR UPDATE",
    )
    .bind(job.0)
    .fetch_all(&mut *c)
    .await
    .map_err(sq(&what))?;
    if rows.len() != 2 {
        return Err(Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("{what}: the usage row of job {job} or the total row is missing; restore the state store from a backup"),
        ));
    }
    let (n, bytes): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), CAST(COALESCE(SUM(bytes), 0) AS SIGNED) FROM ledger_material \
         WHERE job_id = ? AND generation = ? FOR UPDATE",
    )
    .bind(job.0)
    .bind(generation.0)
    .fetch_one(&mut *c)
    .await
    .map_err(sq(&what))?;
    if n == 0 {
        return Ok((0, 0));
    }
    sqlx::query("DELETE FROM ledger_material WHERE job_id = ? AND generation = ?")
        .bind(job.0)
        .bind(generation.0)
        .execute(&mut *c)
        .await
        .map_err(sq(&what))?;
    sqlx::query("UPDATE ledger_material_usage SET bytes = bytes - ? WHERE job_id IN (0, ?)")
        .bind(bytes)
        .bind(job.0)
        .execute(&mut *c)
        .await
        .map_err(sq(&what))?;
    Ok((n as u64, bytes as u64))
}

/// The digests of `job` `generation`'s materials that a registry row of another job or
/// generation also names: their bytes are still needed there and must not be removed.
pub async fn shared_digests(
    c: &mut MySqlConnection,
    job: JobId,
    generation: Generation,
) -> Result<Vec<kernel::ids::Digest>> {
    let rows: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT DISTINCT m.digest FROM ledger_material m JOIN ledger_material o \
         ON o.digest = m.digest AND NOT (o.job_id = m.job_id AND o.generation = m.generation) \
         WHERE m.job_id = ? AND m.generation = ?",
    )
    .bind(job.0)
    .bind(generation.0)
    .fetch_all(&mut *c)
    .await
    .map_err(sq("checking which materials another job also needs"))?;
    rows.iter()
        .map(|b| crate::util::digest_col(b, "registry"))
        .collect()
}
