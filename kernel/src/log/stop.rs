//! A stream stopped on a definite finding about the source's history (`capture_stop`,
//! migration 0120): written by the reader, read by the tables that follow the stream.
//!
//! Why it is safe: it only ever turns a stall into a pause. A table reads it only after
//! its wait for L's tail ended without the tail moving, and the reader removes it as soon
//! as a session passes the lineage check at connect, so a table of a healthy stream never
//! sees it; a row left by a reader that then died keeps its tables paused (by name) until
//! a reader passes the check again and the operator resumes them.
use super::st;
use crate::error::{Definite, DefiniteCode, Result};
use sqlx::mysql::MySqlPool;

/// The codes that stop a whole stream: its positions mean nothing on the source now.
pub fn stops_the_stream(code: DefiniteCode) -> bool {
    matches!(
        code,
        DefiniteCode::LineageChanged | DefiniteCode::BinlogPurged
    )
}

/// Records that `stream`'s reader stopped with `why`.
pub async fn record(pool: &MySqlPool, stream: &str, why: &Definite) -> Result<()> {
    sqlx::query("REPLACE INTO capture_stop (stream, code, message) VALUES (?, ?, ?)")
        .bind(stream)
        .bind(why.code.as_str())
        .bind(&why.message)
        .execute(pool)
        .await
        .map_err(st("recording the stream's stop"))?;
    Ok(())
}

/// Removes `stream`'s stop (a session passed the lineage check).
pub async fn clear(pool: &MySqlPool, stream: &str) -> Result<()> {
    sqlx::query("DELETE FROM capture_stop WHERE stream = ?")
        .bind(stream)
        .execute(pool)
        .await
        .map_err(st("clearing the stream's stop"))?;
    Ok(())
}

/// Why `stream`'s reader is stopped, if it is.
pub async fn stopped(pool: &MySqlPool, stream: &str) -> Result<Option<Definite>> {
    let row: Option<(String, String)> =
        sqlx::query_as("SELECT code, message FROM capture_stop WHERE stream = ?")
            .bind(stream)
            .fetch_optional(pool)
            .await
            .map_err(st("reading the stream's stop"))?;
    Ok(row.map(|(code, message)| Definite {
        code: super::paused::code_from_str(&code),
        message: format!("the capture of this table's source stopped: {message}"),
    }))
}
