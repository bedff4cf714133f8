//! Does the source user hold what capture needs? Probed, not parsed: `SHOW GRANTS` text
//! differs between servers and versions and misses privileges held through roles, so each
//! privilege is tested by the smallest statement that needs it:
//!
//! | privilege | probe |
//! |---|---|
//! | BINLOG MONITOR (MariaDB) / REPLICATION CLIENT (MySQL) | `SHOW MASTER STATUS` |
//! | REPLICATION SLAVE | register as a replica and request a NON_BLOCK binlog dump from the current end (nothing is streamed; the connection is closed) |
//! | SELECT on the table | `SELECT 1 FROM db.t LIMIT 0` |
//! | INSERT on the control table | an `INSERT ... SELECT` of no row, inside a transaction that is rolled back (nothing reaches the binlog) |
//! | CREATE on the control schema | only when the control table does not exist yet: creating it |
use super::checks::Refusal;
use kernel::error::{from_mysql, mysql_server_code};
use kernel::introspect::{deny_codes, Denied};
use kernel::position::{BinlogPos, Flavor};
use kernel::schema::quote_ident;
use kernel::Result;
use mysql_async::prelude::Queryable;
use std::time::Duration;

/// How long the replication probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many events are read from the probe's stream before it is closed.
const PROBE_EVENTS: usize = 8;

/// The refusal for a missing global binlog privilege (`SHOW MASTER STATUS` denied).
pub fn binlog_monitor_refusal(flavor: Flavor, account: &str, d: &Denied) -> Refusal {
    let privilege = match flavor {
        Flavor::Mariadb => "BINLOG MONITOR",
        Flavor::Mysql => "REPLICATION CLIENT",
    };
    Refusal::new(
        format!("source user {account}: privilege {privilege}"),
        format!("is missing (SHOW MASTER STATUS failed: {d})"),
        format!("GRANT {privilege} ON *.* TO {account}"),
    )
}

/// Probes REPLICATION SLAVE with a NON_BLOCK dump from `end`, on its own connection.
/// Returns a refusal when the server denies it.
pub async fn probe_replication(
    opts: mysql_async::Opts,
    end: &BinlogPos,
    account: &str,
) -> Result<Option<Refusal>> {
    let run = async {
        let conn = mysql_async::Conn::new(opts).await?;
        // A random replica id in the upper half of u32, so the probe never kicks a real
        // replica or one of our readers (same id => the older stream is dropped, 4052).
        let server_id = 0x8000_0000u32 | (rand::random::<u32>() >> 1);
        let req = mysql_async::BinlogStreamRequest::new(server_id)
            .with_filename(end.file.as_bytes())
            .with_pos(end.pos)
            .with_non_blocking();
        let mut stream = conn.get_binlog_stream(req).await?;
        for _ in 0..PROBE_EVENTS {
            match next_event(&mut stream).await {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        stream.close().await
    };
    let outcome = tokio::time::timeout(PROBE_TIMEOUT, run)
        .await
        .map_err(|_| kernel::Error::transient("replication privilege probe timed out"))?;
    match outcome {
        Ok(()) => Ok(None),
        Err(e) => match mysql_server_code(&e) {
            Some(code) if deny_codes::is_denied(code) => Ok(Some(Refusal::new(
                format!("source user {account}: privilege REPLICATION SLAVE"),
                format!("is missing (binlog dump refused with server error {code})"),
                format!("GRANT REPLICATION SLAVE ON *.* TO {account}"),
            ))),
            _ => Err(from_mysql("probing the REPLICATION SLAVE privilege", &e)),
        },
    }
}

async fn next_event(
    stream: &mut mysql_async::BinlogStream,
) -> Option<std::result::Result<mysql_async::binlog::events::Event, mysql_async::Error>> {
    use futures_core::Stream;
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

/// The refusal for a table the user may not SELECT from.
pub fn select_refusal(db: &str, table: &str, account: &str, d: &Denied) -> Refusal {
    let t = format!("{}.{}", quote_ident(db), quote_ident(table));
    Refusal::new(
        format!("source user {account}: privilege SELECT on {t}"),
        format!("is missing ({d})"),
        format!("GRANT SELECT ON {t} TO {account}"),
    )
}

/// Makes sure the control table exists and the user may INSERT into it.
pub async fn ensure_control(
    conn: &mut mysql_async::Conn,
    schema: &str,
    account: &str,
) -> Result<Option<Refusal>> {
    let table = kernel::control::TABLE;
    let qualified = format!("{}.{}", quote_ident(schema), quote_ident(table));
    let exists: Option<i64> = conn
        .exec_first(
            "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (schema, table),
        )
        .await
        .map_err(|e| from_mysql("looking for the control table", &e))?;
    if exists.is_none() {
        for sql in kernel::control::create_statements(schema) {
            if let Err(e) = conn.query_drop(&sql).await {
                return match mysql_server_code(&e) {
                    Some(code) if deny_codes::is_denied(code) => Ok(Some(Refusal::new(
                        format!(
                            "source user {account}: privilege CREATE on {}",
                            quote_ident(schema)
                        ),
                        format!(
                            "is missing, and control table {qualified} does not exist \
                             (server error {code})"
                        ),
                        format!(
                            "GRANT CREATE, INSERT ON {}.* TO {account}, or let an administrator \
                             create it: {}",
                            quote_ident(schema),
                            kernel::control::create_statements(schema).join("; ")
                        ),
                    ))),
                    _ => Err(from_mysql(
                        &format!("creating control table {qualified}"),
                        &e,
                    )),
                };
            }
        }
    }
    probe_insert(conn, &qualified, account).await
}

async fn probe_insert(
    conn: &mut mysql_async::Conn,
    qualified: &str,
    account: &str,
) -> Result<Option<Refusal>> {
    // Inserts no row (WHERE 1 = 0) yet needs the INSERT privilege, which the server checks
    // before it runs anything; the rolled-back transaction around it is belt and braces.
    let sql = format!(
        "INSERT INTO {qualified} (job_id, generation, kind, nonce) \
         SELECT 0, 0, 'PROBE', 0 FROM DUAL WHERE 1 = 0"
    );
    let mut tx = conn
        .start_transaction(mysql_async::TxOpts::default())
        .await
        .map_err(|e| from_mysql("probing INSERT on the control table", &e))?;
    let res = tx.query_drop(sql).await;
    tx.rollback()
        .await
        .map_err(|e| from_mysql("rolling back the control-table probe", &e))?;
    match res {
        Ok(()) => Ok(None),
        Err(e) => match mysql_server_code(&e) {
            Some(code) if deny_codes::is_denied(code) => Ok(Some(Refusal::new(
                format!("source user {account}: privilege INSERT on control table {qualified}"),
                format!("is missing (server error {code})"),
                format!("GRANT INSERT ON {qualified} TO {account}"),
            ))),
            _ => Err(from_mysql("probing INSERT on the control table", &e)),
        },
    }
}
