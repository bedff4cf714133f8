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

pub(super) fn code_from_str(s: &str) -> DefiniteCode {
    match s {
        "schema_changed" => DefiniteCode::SchemaChanged,
        "binlog_purged" => DefiniteCode::BinlogPurged,
        "lineage_changed" => DefiniteCode::LineageChanged,
        _ => DefiniteCode::Uncapturable,
    }
}

/// A DDL of a captured table the reader paused it at (`capture_ddl`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DdlRow {
    /// The L record holding the pause.
    pub seq: LSeq,
    pub at: BinlogPos,
    pub default_schema: String,
    pub sql: String,
}

/// The DDLs of `schema`.`table` in L records after `after` up to `upto`, in L order.
pub async fn ddls(
    pool: &MySqlPool,
    stream: &str,
    schema: &str,
    table: &str,
    after: LSeq,
    upto: LSeq,
) -> Result<Vec<DdlRow>> {
    let rows = sqlx::query(
        "SELECT seq, at_file, at_pos, default_schema, statement FROM capture_ddl \
         WHERE stream = ? AND schema_name = ? AND table_name = ? AND seq > ? AND seq <= ? \
         ORDER BY seq LIMIT 1000",
    )
    .bind(stream)
    .bind(schema)
    .bind(table)
    .bind(after)
    .bind(upto)
    .fetch_all(pool)
    .await
    .map_err(st("reading the DDL index (capture_ddl)"))?;
    let g = |e| from_sqlx("reading the DDL index (capture_ddl)", &e);
    rows.into_iter()
        .map(|r| {
            Ok(DdlRow {
                seq: r.try_get("seq").map_err(g)?,
                at: BinlogPos::new(
                    r.try_get::<String, _>("at_file").map_err(g)?,
                    r.try_get::<u64, _>("at_pos").map_err(g)?,
                ),
                default_schema: r.try_get("default_schema").map_err(g)?,
                sql: r.try_get("statement").map_err(g)?,
            })
        })
        .collect()
}
