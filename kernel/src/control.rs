//! The source control table (DESIGN §2): the service writes intents (B, LOW, HIGH, F, K)
//! into it so that each appears in the binlog at an exact position. The reader recognises
//! these rows in the stream; every intent carries job, generation, kind, window, attempt and
//! a random nonce so a late intent of another attempt or generation never satisfies a
//! waiter.
//!
//! The table lives in its own schema on the source, created by `install`.
use crate::schema::quote_ident;

/// Default schema of the control table on the source.
pub const DEFAULT_SCHEMA: &str = "backfill_control";
/// Name of the control table.
pub const TABLE: &str = "intents";

/// The DDL creating the control schema and table (idempotent).
pub fn create_statements(schema: &str) -> [String; 2] {
    let s = quote_ident(schema);
    [
        format!("CREATE DATABASE IF NOT EXISTS {s}"),
        format!(
            "CREATE TABLE IF NOT EXISTS {s}.{t} (
                id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
                job_id BIGINT UNSIGNED NOT NULL,
                generation BIGINT UNSIGNED NOT NULL,
                kind VARCHAR(8) NOT NULL,
                window_id INT UNSIGNED NULL,
                attempt INT UNSIGNED NULL,
                nonce BIGINT UNSIGNED NOT NULL,
                written_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
            ) ENGINE=InnoDB",
            t = quote_ident(TABLE)
        ),
    ]
}

/// Creates the control schema and table on the source if missing.
pub async fn ensure_control_table(conn: &mut mysql_async::Conn, schema: &str) -> crate::Result<()> {
    use mysql_async::prelude::Queryable;
    for sql in create_statements(schema) {
        conn.query_drop(sql).await.map_err(|e| {
            crate::error::from_mysql(&format!("creating control table in `{schema}`"), &e)
        })?;
    }
    Ok(())
}
