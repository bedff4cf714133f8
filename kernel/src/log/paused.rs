//! The tables the reader paused, with the definite reason recorded at their position.

use super::{st, LSeq};
use crate::error::{from_sqlx, DefiniteCode, Result};
use crate::ids::{Generation, JobId};
use crate::position::BinlogPos;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// A pause recorded by the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseRow {
    pub job: JobId,
    pub generation: Generation,
    pub schema: String,
    pub table: String,
    pub error: crate::error::Definite,
    pub seq: LSeq,
    pub at: BinlogPos,
}

/// Every table the reader paused in `stream`.
pub async fn pauses(pool: &MySqlPool, stream: &str) -> Result<Vec<PauseRow>> {
    let rows = sqlx::query(
        "SELECT job_id, generation, schema_name, table_name, code, message, seq, at_file, \
         at_pos FROM capture_pause WHERE stream = ? ORDER BY seq",
    )
    .bind(stream)
    .fetch_all(pool)
    .await
    .map_err(st("reading pauses"))?;
    let g = |e| from_sqlx("reading pauses", &e);
    let mut out = Vec::new();
    for r in rows {
        let code: String = r.try_get("code").map_err(g)?;
        out.push(PauseRow {
            job: JobId(r.try_get("job_id").map_err(g)?),
            generation: Generation(r.try_get("generation").map_err(g)?),
            schema: r.try_get("schema_name").map_err(g)?,
            table: r.try_get("table_name").map_err(g)?,
            error: crate::error::Definite {
                code: code_from_str(&code),
                message: r.try_get("message").map_err(g)?,
            },
            seq: r.try_get("seq").map_err(g)?,
            at: BinlogPos::new(
                r.try_get::<String, _>("at_file").map_err(g)?,
                r.try_get::<u64, _>("at_pos").map_err(g)?,
            ),
        });
    }
    Ok(out)
}

fn code_from_str(s: &str) -> DefiniteCode {
    match s {
        "schema_changed" => DefiniteCode::SchemaChanged,
        "binlog_purged" => DefiniteCode::BinlogPurged,
        "lineage_changed" => DefiniteCode::LineageChanged,
        _ => DefiniteCode::Uncapturable,
    }
}
