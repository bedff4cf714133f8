//! The jobs store: jobs, generations, sealed schemas, lineage and range plans in the state
//! store (migrations 0002-0005).
//!
//! One install is recorded in ONE state-store transaction that first locks the source
//! table's row (`source_tables`, `FOR UPDATE`), so two installs of one table serialise:
//! the second sees the first's live generation and is refused. A target table is claimed
//! forever by the job that installed it (`target_claims`), so two jobs can never write one
//! target and re-adding a table after cancellation needs a new, empty target (DESIGN §2).
//! Everything read back is verified: schema bytes against their fingerprint, the plan
//! against its digest and contiguity, so a damaged row is an error, never a silent default.
//!
//! Galera (DESIGN §18): the `FOR UPDATE` on `source_tables` holds on one node only, but the
//! same transaction writes that row (`last_generation`), so two installs of one table
//! through two nodes conflict at certification (ERROR 1213, transient) and only one
//! commits; the other, retried, sees its live generation and is refused.
use crate::store::plan::{BoundColumns, RangePlan};
use crate::store::refusal::Refusal;
use admission::{retry, CancellationToken, RetryPolicy};
use kernel::codec;
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::{Digest, Generation, JobId};
use kernel::introspect::InstallLineage;
use kernel::range::KeyRange;
use kernel::schema::{quote_ident, SealedSchema};
use kernel::{Error, Result};
use sqlx::{MySqlPool, Row};

/// `state` of a live generation.
pub const STATE_INSTALLED: &str = "INSTALLED";
/// `state` once cancellation has written K.
pub const STATE_CANCELLED: &str = "CANCELLED";
/// Plan rows per INSERT statement.
const PLAN_CHUNK: usize = 1000;
/// Attempts at recording one install when the state store fails transiently.
const RECORD_ATTEMPTS: u32 = 3;
/// Pause between those attempts.
const RECORD_BACKOFF: std::time::Duration = std::time::Duration::from_millis(200);

/// A table on a server: `identity` is `ServerFacts::identity()` of the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRef {
    pub identity: String,
    pub db: String,
    pub table: String,
}

impl TableRef {
    /// blake3 naming this table on this server.
    pub fn key(&self) -> Digest {
        Digest::of(&codec::to_canonical(&(
            "backfill-table-v1",
            &self.identity,
            &self.db,
            &self.table,
        )))
    }

    /// `db`.`table`, quoted.
    pub fn qualified(&self) -> String {
        format!("{}.{}", quote_ident(&self.db), quote_ident(&self.table))
    }
}

/// Everything one install records.
#[derive(Clone, Debug)]
pub struct NewJob {
    pub source: TableRef,
    pub target: TableRef,
    /// Redacted URLs (no password).
    pub source_url: String,
    pub target_url: String,
    pub control_schema: String,
    pub window_rows: u64,
    pub page_rows: u64,
    pub estimated_rows: u64,
    pub schema: SealedSchema,
    pub lineage: InstallLineage,
    pub plan: RangePlan,
}

/// One job as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRecord {
    pub job_id: JobId,
    pub generation: Generation,
    pub state: String,
    pub source: TableRef,
    pub target: TableRef,
    pub source_url: String,
    pub target_url: String,
    pub control_schema: String,
    pub window_rows: u64,
    pub page_rows: u64,
    pub windows: u32,
    /// The server's row estimate at install (rows known before the copy reads them).
    pub estimated_rows: u64,
    pub fingerprint: Digest,
    pub plan_digest: Digest,
}

fn refused(r: Refusal) -> Error {
    Error::definite(
        DefiniteCode::Precondition,
        format!("install refused:\n  - {r}"),
    )
}

/// The live (not cancelled) job of a source table, if any.
pub async fn live_job(pool: &MySqlPool, source: &TableRef) -> Result<Option<(JobId, Generation)>> {
    let row: Option<(u64, u64)> = sqlx::query_as(
        "SELECT job_id, generation FROM jobs WHERE table_key = ? AND state <> ? \
         ORDER BY generation DESC LIMIT 1",
    )
    .bind(&source.key().0[..])
    .bind(STATE_CANCELLED)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("reading live generations", &e))?;
    Ok(row.map(|(j, g)| (JobId(j), Generation(g))))
}

/// The distinct lineages recorded by the live jobs of a source server (by identity), each
/// with the first job that recorded it.
///
/// One row per distinct lineage digest, not per job: an install compares its lineage with
/// every lineage a live job recorded, and a thousand jobs of one source usually recorded
/// one. (Reading every job's lineage made each install cost a query per live job, so
/// installing n tables cost n²/2 queries; and a cap on the rows read would leave jobs
/// past it unchecked.) Each returned lineage is loaded and verified against its digest.
pub async fn live_lineages(
    pool: &MySqlPool,
    source_identity: &str,
) -> Result<Vec<(JobId, InstallLineage)>> {
    let rows: Vec<(u64,)> = sqlx::query_as(
        "SELECT MIN(j.job_id) FROM jobs j JOIN install_lineage l ON l.job_id = j.job_id \
         WHERE j.source_identity = ? AND j.state <> ? GROUP BY l.lineage_digest ORDER BY 1",
    )
    .bind(source_identity)
    .bind(STATE_CANCELLED)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading the lineages of live jobs", &e))?;
    let mut out = Vec::with_capacity(rows.len());
    for (job,) in rows {
        out.push((JobId(job), load_lineage(pool, JobId(job)).await?));
    }
    Ok(out)
}

/// The job that claimed a target table, if any.
pub async fn target_claim(pool: &MySqlPool, target: &TableRef) -> Result<Option<JobId>> {
    let row: Option<u64> =
        sqlx::query_scalar("SELECT job_id FROM target_claims WHERE target_key = ?")
            .bind(&target.key().0[..])
            .fetch_optional(pool)
            .await
            .map_err(|e| from_sqlx("reading target claims", &e))?;
    Ok(row.map(JobId))
}

/// The refusal for a table that already has a live generation.
pub fn live_refusal(source: &TableRef, job: JobId, generation: Generation) -> Refusal {
    Refusal::new(
        format!("source table {} on {}", source.qualified(), source.identity),
        format!("already has live generation {generation} (job {job})"),
        format!("cancel job {job} first (backfill cancel {job}); re-adding then needs a new, empty target"),
    )
}

/// The refusal for a target already used by a job.
pub fn claim_refusal(target: &TableRef, job: JobId) -> Refusal {
    Refusal::new(
        format!("target table {} on {}", target.qualified(), target.identity),
        format!("already belongs to job {job}"),
        "give a new, empty target table (a target is exclusive to one job and generation)",
    )
}

/// Records an install in one transaction; returns the new job id and generation.
///
/// A transient failure (deadlock with a concurrent install, lost connection, a COMMIT
/// whose outcome is unknown) is resolved by reading the evidence first: if a live job of
/// this source table holds this target's claim with the same schema fingerprint and plan
/// digest, that commit landed and its job is the result. Otherwise the transaction is
/// retried, at most [`RECORD_ATTEMPTS`] times in all.
pub async fn record_install(pool: &MySqlPool, job: &NewJob) -> Result<(JobId, Generation)> {
    let policy = RetryPolicy::linear(RECORD_ATTEMPTS, RECORD_BACKOFF, RECORD_BACKOFF);
    let once = |attempt: u32| async move {
        if attempt > 1 {
            if let Some(done) = find_recorded(pool, job).await? {
                return Ok(done);
            }
        }
        let r = record_install_once(pool, job).await;
        if let Err(e) = &r {
            tracing::warn!(error = %e, attempt, "recording the install failed");
        }
        r
    };
    let never = CancellationToken::new();
    retry(once, |e: &Error| !e.is_transient(), &policy, &never)
        .await
        .map_err(last_error)
}

/// The error a bounded retry ended with (the last one the operation returned).
pub fn last_error(e: admission::RetryError<Error>) -> Error {
    let attempts = e.attempts();
    e.into_last()
        .unwrap_or_else(|| Error::transient(format!("stopped after {attempts} attempt(s)")))
}

/// The live job recorded for exactly this install (same source table, target claim,
/// schema fingerprint and plan digest), if its transaction committed.
pub async fn find_recorded(pool: &MySqlPool, job: &NewJob) -> Result<Option<(JobId, Generation)>> {
    let row: Option<(u64, u64)> = sqlx::query_as(
        "SELECT j.job_id, j.generation FROM target_claims c \
         JOIN jobs j ON j.job_id = c.job_id \
         JOIN sealed_schemas s ON s.job_id = j.job_id \
         JOIN range_plans p ON p.job_id = j.job_id \
         WHERE c.target_key = ? AND j.table_key = ? AND j.state <> ? \
           AND s.fingerprint = ? AND p.plan_digest = ?",
    )
    .bind(&job.target.key().0[..])
    .bind(&job.source.key().0[..])
    .bind(STATE_CANCELLED)
    .bind(&job.schema.fingerprint().0[..])
    .bind(&job.plan.digest().0[..])
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("looking for a recorded install", &e))?;
    Ok(row.map(|(j, g)| (JobId(j), Generation(g))))
}

async fn record_install_once(pool: &MySqlPool, job: &NewJob) -> Result<(JobId, Generation)> {
    let map = |what: &'static str| move |e: sqlx::Error| from_sqlx(what, &e);
    let mut tx = pool
        .begin()
        .await
        .map_err(map("opening an install transaction"))?;
    let key = job.source.key();
    sqlx::query(
        "INSERT INTO source_tables (table_key, source_identity, source_db, source_table, \
         last_generation) VALUES (?, ?, ?, ?, 0) \
         ON DUPLICATE KEY UPDATE last_generation = last_generation",
    )
    .bind(&key.0[..])
    .bind(&job.source.identity)
    .bind(&job.source.db)
    .bind(&job.source.table)
    .execute(&mut *tx)
    .await
    .map_err(map("registering the source table"))?;
    let last: u64 = sqlx::query_scalar(
        "SELECT last_generation FROM source_tables WHERE table_key = ? FOR UPDATE",
    )
    .bind(&key.0[..])
    .fetch_one(&mut *tx)
    .await
    .map_err(map("locking the source table's generations"))?;
    let live: Option<(u64, u64)> = sqlx::query_as(
        "SELECT job_id, generation FROM jobs WHERE table_key = ? AND state <> ? LIMIT 1",
    )
    .bind(&key.0[..])
    .bind(STATE_CANCELLED)
    .fetch_optional(&mut *tx)
    .await
    .map_err(map("reading live generations"))?;
    if let Some((j, g)) = live {
        return Err(refused(live_refusal(&job.source, JobId(j), Generation(g))));
    }
    let generation = Generation(last + 1);
    let job_id = insert_job(&mut tx, job, &key, generation).await?;
    claim_target(&mut tx, job, job_id).await?;
    sqlx::query("UPDATE source_tables SET last_generation = ? WHERE table_key = ?")
        .bind(generation.0)
        .bind(&key.0[..])
        .execute(&mut *tx)
        .await
        .map_err(map("advancing the generation"))?;
    insert_schema(&mut tx, job_id, &job.schema).await?;
    insert_lineage(&mut tx, job_id, &job.lineage).await?;
    insert_plan(&mut tx, job_id, generation, job).await?;
    tx.commit().await.map_err(map("committing the install"))?;
    Ok((job_id, generation))
}

type Tx<'a> = sqlx::Transaction<'a, sqlx::MySql>;

async fn insert_job(tx: &mut Tx<'_>, job: &NewJob, key: &Digest, g: Generation) -> Result<JobId> {
    let done = sqlx::query(
        "INSERT INTO jobs (table_key, generation, state, source_identity, source_url, \
         source_db, source_table, target_identity, target_url, target_db, target_table, \
         control_schema, window_rows, page_rows) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&key.0[..])
    .bind(g.0)
    .bind(STATE_INSTALLED)
    .bind(&job.source.identity)
    .bind(&job.source_url)
    .bind(&job.source.db)
    .bind(&job.source.table)
    .bind(&job.target.identity)
    .bind(&job.target_url)
    .bind(&job.target.db)
    .bind(&job.target.table)
    .bind(&job.control_schema)
    .bind(job.window_rows)
    .bind(job.page_rows)
    .execute(&mut **tx)
    .await
    .map_err(|e| from_sqlx("recording the job", &e))?;
    Ok(JobId(done.last_insert_id()))
}

async fn claim_target(tx: &mut Tx<'_>, job: &NewJob, job_id: JobId) -> Result<()> {
    let res = sqlx::query(
        "INSERT INTO target_claims (target_key, job_id, target_identity, target_db, \
         target_table) VALUES (?, ?, ?, ?, ?)",
    )
    .bind(&job.target.key().0[..])
    .bind(job_id.0)
    .bind(&job.target.identity)
    .bind(&job.target.db)
    .bind(&job.target.table)
    .execute(&mut **tx)
    .await;
    match res {
        Ok(_) => Ok(()),
        Err(e)
            if kernel::error::sqlx_server_code(&e) == Some(kernel::error::codes::ER_DUP_ENTRY) =>
        {
            let owner: u64 =
                sqlx::query_scalar("SELECT job_id FROM target_claims WHERE target_key = ?")
                    .bind(&job.target.key().0[..])
                    .fetch_one(&mut **tx)
                    .await
                    .map_err(|e| from_sqlx("reading the target claim", &e))?;
            Err(refused(claim_refusal(&job.target, JobId(owner))))
        }
        Err(e) => Err(from_sqlx("claiming the target table", &e)),
    }
}

async fn insert_schema(tx: &mut Tx<'_>, job_id: JobId, schema: &SealedSchema) -> Result<()> {
    sqlx::query("INSERT INTO sealed_schemas (job_id, fingerprint, schema_bytes) VALUES (?, ?, ?)")
        .bind(job_id.0)
        .bind(&schema.fingerprint().0[..])
        .bind(codec::encode(schema))
        .execute(&mut **tx)
        .await
        .map_err(|e| from_sqlx("recording the sealed schema", &e))?;
    Ok(())
}

async fn insert_lineage(tx: &mut Tx<'_>, job_id: JobId, l: &InstallLineage) -> Result<()> {
    sqlx::query(
        "INSERT INTO install_lineage (job_id, lineage_digest, flavor, server_id, server_uid, \
         binlog_base, binlog_file, binlog_pos, gtid_pos, lineage_bytes) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(job_id.0)
    .bind(&l.lineage.digest().0[..])
    .bind(format!("{:?}", l.lineage.flavor))
    .bind(l.lineage.server_id)
    .bind(&l.lineage.server_uid)
    .bind(&l.lineage.binlog_base)
    .bind(&l.position.file)
    .bind(l.position.pos)
    .bind(&l.gtid_pos)
    .bind(codec::encode(l))
    .execute(&mut **tx)
    .await
    .map_err(|e| from_sqlx("recording the source lineage", &e))?;
    Ok(())
}

async fn insert_plan(tx: &mut Tx<'_>, job_id: JobId, g: Generation, job: &NewJob) -> Result<()> {
    let windows = u32::try_from(job.plan.len())
        .map_err(|_| Error::definite(DefiniteCode::Usage, "too many windows"))?;
    sqlx::query(
        "INSERT INTO range_plans (job_id, generation, windows, plan_digest, window_rows, \
         estimated_rows) VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(job_id.0)
    .bind(g.0)
    .bind(windows)
    .bind(&job.plan.digest().0[..])
    .bind(job.window_rows)
    .bind(job.estimated_rows)
    .execute(&mut **tx)
    .await
    .map_err(|e| from_sqlx("recording the range plan", &e))?;
    for (chunk_no, chunk) in job.plan.ranges.chunks(PLAN_CHUNK).enumerate() {
        let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(
            "INSERT INTO plan_windows (job_id, generation, window_id, lower_key, upper_key, \
             lower_bound, upper_bound) ",
        );
        qb.push_values(chunk.iter().enumerate(), |mut b, (i, r)| {
            let (lower, upper) = (BoundColumns::of(&r.lower), BoundColumns::of(&r.upper));
            b.push_bind(job_id.0)
                .push_bind(g.0)
                .push_bind((chunk_no * PLAN_CHUNK + i) as u32)
                .push_bind(lower.int)
                .push_bind(upper.int)
                .push_bind(lower.bytes)
                .push_bind(upper.bytes);
        });
        qb.build()
            .execute(&mut **tx)
            .await
            .map_err(|e| from_sqlx("recording the plan windows", &e))?;
    }
    Ok(())
}

fn corrupt(job: JobId, what: impl std::fmt::Display) -> Error {
    Error::definite(DefiniteCode::EvidenceCorrupt, format!("job {job}: {what}"))
}

fn unknown_job(job: JobId) -> Error {
    Error::definite(
        DefiniteCode::Usage,
        format!("no job {job} in this state store; `backfill status` lists the jobs"),
    )
}

const JOB_COLUMNS: &str = "j.job_id, j.generation, j.state, j.source_identity, j.source_db, \
    j.source_table, j.target_identity, j.target_db, j.target_table, j.source_url, j.target_url, \
    j.control_schema, j.window_rows, j.page_rows, p.windows, s.fingerprint, p.plan_digest, \
    p.estimated_rows \
    FROM jobs j JOIN range_plans p ON p.job_id = j.job_id \
    JOIN sealed_schemas s ON s.job_id = j.job_id";

fn job_from_row(row: &sqlx::mysql::MySqlRow) -> Result<JobRecord> {
    let get = |e: sqlx::Error| from_sqlx("decoding a job row", &e);
    let job_id = JobId(row.try_get::<u64, _>(0).map_err(get)?);
    let digest = |i: usize| -> Result<Digest> {
        let b: Vec<u8> = row.try_get(i).map_err(get)?;
        Digest::from_slice(&b).ok_or_else(|| corrupt(job_id, "a digest is not 32 bytes"))
    };
    Ok(JobRecord {
        job_id,
        generation: Generation(row.try_get(1).map_err(get)?),
        state: row.try_get(2).map_err(get)?,
        source: TableRef {
            identity: row.try_get(3).map_err(get)?,
            db: row.try_get(4).map_err(get)?,
            table: row.try_get(5).map_err(get)?,
        },
        target: TableRef {
            identity: row.try_get(6).map_err(get)?,
            db: row.try_get(7).map_err(get)?,
            table: row.try_get(8).map_err(get)?,
        },
        source_url: row.try_get(9).map_err(get)?,
        target_url: row.try_get(10).map_err(get)?,
        control_schema: row.try_get(11).map_err(get)?,
        window_rows: row.try_get(12).map_err(get)?,
        page_rows: row.try_get(13).map_err(get)?,
        windows: row.try_get(14).map_err(get)?,
        fingerprint: digest(15)?,
        plan_digest: digest(16)?,
        estimated_rows: row.try_get(17).map_err(get)?,
    })
}

/// One job.
pub async fn load_job(pool: &MySqlPool, job: JobId) -> Result<JobRecord> {
    let sql = format!("SELECT {JOB_COLUMNS} WHERE j.job_id = ?");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(job.0)
        .fetch_optional(pool)
        .await
        .map_err(|e| from_sqlx("reading a job", &e))?;
    job_from_row(&row.ok_or_else(|| unknown_job(job))?)
}

/// Every job, oldest first (bounded: status shows at most `limit`).
pub async fn list_jobs(pool: &MySqlPool, limit: u32) -> Result<Vec<JobRecord>> {
    let sql = format!("SELECT {JOB_COLUMNS} ORDER BY j.job_id LIMIT ?");
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(limit)
        .fetch_all(pool)
        .await
        .map_err(|e| from_sqlx("listing jobs", &e))?;
    rows.iter().map(job_from_row).collect()
}

/// The sealed schema of a job, verified against its stored fingerprint.
pub async fn load_schema(pool: &MySqlPool, job: JobId) -> Result<SealedSchema> {
    let row: Option<(Vec<u8>, Vec<u8>)> =
        sqlx::query_as("SELECT fingerprint, schema_bytes FROM sealed_schemas WHERE job_id = ?")
            .bind(job.0)
            .fetch_optional(pool)
            .await
            .map_err(|e| from_sqlx("reading a sealed schema", &e))?;
    let (fp, bytes) = row.ok_or_else(|| unknown_job(job))?;
    let schema = SealedSchema::decode(&bytes).map_err(|e| corrupt(job, e))?;
    if schema.fingerprint().0[..] != fp[..] {
        return Err(corrupt(
            job,
            "sealed schema bytes do not match their fingerprint",
        ));
    }
    Ok(schema)
}

/// The lineage recorded at install.
pub async fn load_lineage(pool: &MySqlPool, job: JobId) -> Result<InstallLineage> {
    let row: Option<(Vec<u8>, Vec<u8>)> = sqlx::query_as(
        "SELECT lineage_digest, lineage_bytes FROM install_lineage WHERE job_id = ?",
    )
    .bind(job.0)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("reading the install lineage", &e))?;
    let (digest, bytes) = row.ok_or_else(|| unknown_job(job))?;
    let l: InstallLineage = codec::decode(&bytes).map_err(|e| corrupt(job, e))?;
    if l.lineage.digest().0[..] != digest[..] {
        return Err(corrupt(job, "lineage bytes do not match their digest"));
    }
    Ok(l)
}

/// The range plan of a job, verified: contiguous, window ids dense, digest equal.
pub async fn load_plan(pool: &MySqlPool, job: JobId) -> Result<RangePlan> {
    let head: Option<(u32, Vec<u8>)> =
        sqlx::query_as("SELECT windows, plan_digest FROM range_plans WHERE job_id = ?")
            .bind(job.0)
            .fetch_optional(pool)
            .await
            .map_err(|e| from_sqlx("reading a range plan", &e))?;
    let (windows, digest) = head.ok_or_else(|| unknown_job(job))?;
    type WindowRow = (
        u32,
        Option<i64>,
        Option<i64>,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
    );
    let rows: Vec<WindowRow> = sqlx::query_as(
        "SELECT window_id, lower_key, upper_key, lower_bound, upper_bound FROM plan_windows \
         WHERE job_id = ? ORDER BY window_id",
    )
    .bind(job.0)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading plan windows", &e))?;
    if rows.len() != windows as usize || rows.iter().enumerate().any(|(i, r)| r.0 as usize != i) {
        return Err(corrupt(
            job,
            format!(
                "plan has {} window rows, expected {windows} numbered from 0",
                rows.len()
            ),
        ));
    }
    let ranges = rows
        .into_iter()
        .map(|(_, lk, uk, lb, ub)| {
            Ok(KeyRange {
                lower: BoundColumns::bound(lk, lb)?,
                upper: BoundColumns::bound(uk, ub)?,
            })
        })
        .collect::<std::result::Result<Vec<_>, String>>()
        .map_err(|why| corrupt(job, why))?;
    let plan = RangePlan { ranges };
    plan.check().map_err(|why| corrupt(job, why))?;
    if plan.digest().0[..] != digest[..] {
        return Err(corrupt(job, "plan windows do not match the plan digest"));
    }
    Ok(plan)
}

/// Marks a job's generation CANCELLED. Called by cancellation once K is durable (DESIGN §8);
/// from then on the table may be installed again, with a new generation and a new target.
pub async fn mark_cancelled(pool: &MySqlPool, job: JobId) -> Result<()> {
    let done = sqlx::query(
        "UPDATE jobs SET state = ?, cancelled_at = CURRENT_TIMESTAMP(6) WHERE job_id = ?",
    )
    .bind(STATE_CANCELLED)
    .bind(job.0)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("cancelling a job", &e))?;
    if done.rows_affected() == 0 {
        // Either unknown, or already cancelled (idempotent).
        load_job(pool, job).await?;
    }
    Ok(())
}

/// The keyer of a sealed schema (install sealed only keys it can order).
pub fn keyer(schema: &SealedSchema) -> Result<kernel::key::Keyer> {
    kernel::key::Keyer::of(schema).map_err(|why| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "the sealed key of {} cannot be ordered: {why}",
                schema.qualified()
            ),
        )
    })
}

/// The names of the sealed key's columns, in index order (verify merges by them).
pub fn key_columns(schema: &SealedSchema) -> Vec<String> {
    schema
        .key
        .iter()
        .map(|&k| schema.columns[k].name.clone())
        .collect()
}

/// The L stream of a source server: stable per server identity, at most 64 characters.
pub fn stream_name(source_identity: &str) -> String {
    let d = kernel::ids::Digest::of(source_identity.as_bytes());
    format!("src-{}", &d.to_hex()[..24])
}

/// `jobs.page_text` of a job whose pages hold each column's stored bytes (migration 0073).
pub const PAGE_TEXT_STORED: &str = "stored";

/// How the job's sealed pages hold text: [`PAGE_TEXT_STORED`], or `utf8mb4` for a job
/// installed by a build that read strings re-encoded as utf8mb4.
pub async fn page_text(pool: &MySqlPool, job: JobId) -> Result<String> {
    let v: Option<(String,)> = sqlx::query_as("SELECT page_text FROM jobs WHERE job_id = ?")
        .bind(job.0)
        .fetch_optional(pool)
        .await
        .map_err(|e| from_sqlx("reading how a job's pages hold text", &e))?;
    v.map(|(t,)| t).ok_or_else(|| unknown_job(job))
}

/// Records that every page the job will seal holds stored bytes (it has sealed none yet).
pub async fn mark_page_text_stored(pool: &MySqlPool, job: JobId) -> Result<()> {
    sqlx::query("UPDATE jobs SET page_text = ? WHERE job_id = ?")
        .bind(PAGE_TEXT_STORED)
        .bind(job.0)
        .execute(pool)
        .await
        .map_err(|e| from_sqlx("recording how a job's pages hold text", &e))?;
    Ok(())
}
