//! Data-plane connections (mysql_async) with a bounded connect time. URLs are only ever
//! shown redacted.
use kernel::error::{from_mysql, DefiniteCode};
use kernel::redact::redact_url;
use kernel::{Error, Result};
use std::time::Duration;

/// How long a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one statement of install may run on the server before the server stops it.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(120);

/// Parses a `mysql://` URL given by `flag`; its sessions run `SET NAMES binary`
/// ([`kernel::names`]): read views, bound sampling, weighing and install's introspection
/// see each string as its column's own bytes, the bytes the binlog carries.
pub fn opts(url: &str, flag: &str) -> Result<mysql_async::Opts> {
    kernel::tls::mysql_opts(url)
        .map(kernel::names::binary_names)
        .map_err(|e| {
            Error::definite(
                DefiniteCode::Usage,
                format!(
                    "{flag} {} is not a valid mysql:// URL: {}",
                    redact_url(url),
                    kernel::redact::redact_text(&e.to_string())
                ),
            )
        })
}

/// Connects to `url` (for messages: `what` is "source" or "target").
pub async fn connect(opts: mysql_async::Opts, what: &str, url: &str) -> Result<mysql_async::Conn> {
    let doing = format!("connecting to the {what} {}", redact_url(url));
    match tokio::time::timeout(CONNECT_TIMEOUT, mysql_async::Conn::new(opts)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(kernel::tls::with_plain_hint(
            url,
            kernel::error::mysql_server_code(&e),
            true,
            from_mysql(&doing, &e),
        )),
        Err(_) => Err(Error::transient(format!(
            "{doing}: no answer within {CONNECT_TIMEOUT:?}"
        ))),
    }
}

/// Bounds every later statement of this session on the server side: MariaDB
/// `max_statement_time` (seconds), else MySQL `max_execution_time` (milliseconds, SELECTs).
/// A timed-out client future would not stop a statement already sent; the server does.
pub async fn bound_statements(conn: &mut mysql_async::Conn) -> Result<()> {
    use mysql_async::prelude::Queryable;
    let secs = STATEMENT_TIMEOUT.as_secs();
    let mariadb = format!("SET SESSION max_statement_time = {secs}");
    match conn.query_drop(mariadb).await {
        Ok(()) => Ok(()),
        Err(e) if kernel::error::mysql_server_code(&e) == Some(ER_UNKNOWN_SYSTEM_VARIABLE) => {
            let mysql = format!("SET SESSION max_execution_time = {}", secs * 1000);
            conn.query_drop(mysql)
                .await
                .map_err(|e| from_mysql("bounding statement time", &e))
        }
        Err(e) => Err(from_mysql("bounding statement time", &e)),
    }
}

/// ER_UNKNOWN_SYSTEM_VARIABLE.
const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// Closes a connection; a close error is logged, the caller's result stands.
pub async fn close(conn: mysql_async::Conn) {
    if let Err(e) = conn.disconnect().await {
        tracing::warn!(error = %kernel::redact::redact_text(&e.to_string()), "closing a connection");
    }
}

/// `host:port` of a connection, for messages.
pub fn server_label(opts: &mysql_async::Opts) -> String {
    format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port())
}

/// The schema named by a state-store URL's path (parsed as sqlx parses it), if any.
pub fn database_of(url: &str) -> Option<String> {
    use std::str::FromStr;
    sqlx::mysql::MySqlConnectOptions::from_str(url)
        .ok()?
        .get_database()
        .map(str::to_string)
}

/// The URL to connect with: a candidate whose redacted form equals the recorded
/// (redacted) one, else the recorded one itself (a URL without password).
pub fn resolve_url(recorded: &str, candidates: &[String]) -> String {
    candidates
        .iter()
        .find(|c| kernel::redact::redact_url(c) == recorded)
        .cloned()
        .unwrap_or_else(|| recorded.to_string())
}
