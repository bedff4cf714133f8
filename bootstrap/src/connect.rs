//! Data-plane connections (mysql_async) with a bounded connect time. URLs are only ever
//! shown redacted.
use kernel::error::{from_mysql, DefiniteCode};
use kernel::redact::redact_url;
use kernel::{Error, Result};
use std::time::Duration;

/// How long a connect may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Parses a `mysql://` URL given by `flag`.
pub fn opts(url: &str, flag: &str) -> Result<mysql_async::Opts> {
    mysql_async::Opts::from_url(url).map_err(|e| {
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
        Ok(Err(e)) => Err(from_mysql(&doing, &e)),
        Err(_) => Err(Error::transient(format!(
            "{doing}: no answer within {CONNECT_TIMEOUT:?}"
        ))),
    }
}

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
