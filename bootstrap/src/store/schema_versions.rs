//! The schema chain of a table in the state store (`schema_versions`, migration 0085):
//! the versions sealed after version 1 (install's), each at the DDL that starts it.
//!
//! Written once per DDL and never changed. [`seal`] is idempotent: sealing the same DDL
//! again (a retried or restarted step) finds the row and accepts it only when it is the
//! same version with the same definition; anything else is `evidence_conflict`, since two
//! definitions for one position would let two runs decode the same rows differently.
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::{Digest, Generation, JobId};
use kernel::log::LSeq;
use kernel::position::BinlogPos;
use kernel::schema::SealedSchema;
use kernel::{Error, Result};
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// How a version was sealed: by the service for a compatible DDL, or by `refresh-schema`.
pub const AUTOMATIC: &str = "automatic";
pub const REFRESH: &str = "refresh";
/// Sealed by the service from the DDL run on a scratch copy of the version before it (a
/// later DDL of the table had already run on the source, `crate::table::schema::scratch`).
pub const DERIVED: &str = "derived";

/// One sealed version after the install's.
#[derive(Clone, Debug, PartialEq)]
pub struct SchemaVersion {
    /// 2, 3, ... (1 is the install seal).
    pub version: u32,
    /// The L record holding the DDL (its pause of the table).
    pub l_seq: LSeq,
    /// The DDL's QUERY event in the source binlog.
    pub at: BinlogPos,
    pub ddl: String,
    /// The definition after the DDL, with the source's database and table names.
    pub schema: SealedSchema,
    pub how: String,
}

fn corrupt(what: String) -> Error {
    Error::definite(DefiniteCode::EvidenceCorrupt, what)
}

/// Every version of the job-generation after the install's, in version order.
pub async fn versions(pool: &MySqlPool, job: JobId, g: Generation) -> Result<Vec<SchemaVersion>> {
    let rows = sqlx::query(
        "SELECT version, l_seq, at_file, at_pos, ddl, schema_bytes, fingerprint, how \
         FROM schema_versions WHERE job_id = ? AND generation = ? ORDER BY version",
    )
    .bind(job.0)
    .bind(g.0)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading the schema chain (schema_versions)", &e))?;
    let g = |e| from_sqlx("reading the schema chain (schema_versions)", &e);
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let version: u32 = r.try_get("version").map_err(g)?;
        let bytes: Vec<u8> = r.try_get("schema_bytes").map_err(g)?;
        let schema = SealedSchema::decode(&bytes)
            .map_err(|e| corrupt(format!("schema version {version} of job {job}: {e}")))?;
        let fp: Vec<u8> = r.try_get("fingerprint").map_err(g)?;
        if fp.as_slice() != schema.fingerprint().0.as_slice() {
            return Err(corrupt(format!(
                "schema version {version} of job {job}: its fingerprint does not match its \
                 definition"
            )));
        }
        out.push(SchemaVersion {
            version,
            l_seq: r.try_get("l_seq").map_err(g)?,
            at: BinlogPos::new(
                r.try_get::<String, _>("at_file").map_err(g)?,
                r.try_get::<u64, _>("at_pos").map_err(g)?,
            ),
            ddl: r.try_get("ddl").map_err(g)?,
            schema,
            how: r.try_get("how").map_err(g)?,
        });
    }
    Ok(out)
}

/// Seals `v` (idempotent, see the module doc); returns the stored version.
pub async fn seal(pool: &MySqlPool, job: JobId, g: Generation, v: &SchemaVersion) -> Result<()> {
    let fp: Digest = v.schema.fingerprint();
    sqlx::query(
        "INSERT IGNORE INTO schema_versions (job_id, generation, version, l_seq, at_file, \
         at_pos, ddl, schema_bytes, fingerprint, how) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(v.version)
    .bind(v.l_seq)
    .bind(&v.at.file)
    .bind(v.at.pos)
    .bind(&v.ddl)
    .bind(kernel::codec::encode(&v.schema))
    .bind(&fp.0[..])
    .bind(&v.how)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("sealing a schema version (schema_versions)", &e))?;
    let stored = versions(pool, job, g).await?;
    let same = stored
        .iter()
        .find(|s| s.version == v.version || s.l_seq == v.l_seq);
    match same {
        Some(s) if s.version == v.version && s.l_seq == v.l_seq && s.schema == v.schema => Ok(()),
        Some(s) => Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!(
                "job {job} {g}: schema version {} is already sealed at change log record {} ({}); a \
                 second seal of version {} at change log record {} differs",
                s.version, s.l_seq, s.at, v.version, v.l_seq
            ),
        )),
        None => Err(Error::transient(format!(
            "job {job} {g}: schema version {} vanished after it was sealed",
            v.version
        ))),
    }
}
