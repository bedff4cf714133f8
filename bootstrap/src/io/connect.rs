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

/// mysql_async's process-wide read buffers: it keeps up to 128 buffers given back by
/// connections, each up to 4 MiB, for reuse (up to 512 MiB resident: after a bootstrap's
/// page reads serve held ~80 MiB of them for good). Capped here, before any connection,
/// at [`CLIENT_BUFFERS`] buffers of at most [`CLIENT_BUFFER_BYTES`]; larger buffers are
/// freed when their packet is read. An operator's own values of the variables win.
pub fn bound_client_buffers() {
    for (var, value) in [
        ("MYSQL_ASYNC_BUFFER_POOL_CAP", CLIENT_BUFFERS),
        ("MYSQL_ASYNC_BUFFER_SIZE_CAP", CLIENT_BUFFER_BYTES),
    ] {
        if std::env::var_os(var).is_none() {
            std::env::set_var(var, value.to_string());
        }
    }
}

/// Buffers mysql_async keeps for reuse ([`bound_client_buffers`]).
pub const CLIENT_BUFFERS: usize = 16;
/// The largest buffer mysql_async keeps for reuse ([`bound_client_buffers`]).
pub const CLIENT_BUFFER_BYTES: usize = 64 << 10;

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

/// The schema named by a state-store URL's path (one host or several), if any.
pub fn database_of(url: &str) -> Option<String> {
    kernel::state::database_of(url)
}

/// The server and account a URL connects as (host, port, user, TLS parameters): what a
/// job's recorded URL and `serve --source/--target` URLs are matched by. The database path
/// is no part of it: every statement names its table as `db.table`, so one URL per server
/// serves every job on that server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Account {
    pub host: String,
    pub port: u16,
    pub user: String,
    tls: String,
}

impl Account {
    /// The account of `url` (a password, redacted or not, is ignored).
    pub fn of(url: &str) -> std::result::Result<Account, String> {
        let (base, mode, ca) = kernel::tls::split(url)?;
        let o = mysql_async::Opts::from_url(&base)
            .map_err(|e| kernel::redact::redact_text(&e.to_string()))?;
        let ca = ca
            .map(|p| format!(" ssl-ca={}", p.display()))
            .unwrap_or_default();
        Ok(Account {
            host: o.ip_or_hostname().to_ascii_lowercase(),
            port: o.tcp_port(),
            user: o.user().unwrap_or("").to_string(),
            tls: format!("{mode:?}{ca}"),
        })
    }

    /// `user@host:port`, for messages and metrics (never a password).
    pub fn label(&self) -> String {
        format!("{}@{}:{}", self.user, self.host, self.port)
    }
}

/// Whether a recorded (redacted) URL carried a password at install.
fn has_password(url: &str) -> bool {
    kernel::tls::split(url)
        .ok()
        .and_then(|(base, _, _)| mysql_async::Opts::from_url(&base).ok())
        .is_some_and(|o| o.pass().is_some_and(|p| !p.is_empty()))
}

/// The URL to connect with for a job's `recorded` (redacted) URL: the candidate of `flag`
/// (`--source`, `--target`) for the same server and account ([`Account`]), whatever its
/// database path; else, when the job's account had no password at install, the recorded
/// URL itself. A job whose account has a password and no candidate is refused with the
/// server, the user and the flag to pass (connecting without the password would only be
/// refused with ERROR 1045, which reads as a missing grant). `whose` names the job's side
/// in the message ("job 3's source").
///
/// Refused rather than paused: the missing URL is a fact of this serve's configuration,
/// not of the table. Nothing is recorded in J (no pause to `resume`, no retry budget
/// spent); the other jobs run, and a serve restarted with the flag runs the job from
/// where it was.
pub fn resolve_url(
    recorded: &str,
    candidates: &[String],
    flag: &str,
    whose: &str,
) -> Result<String> {
    let usage = |m: String| Error::definite(DefiniteCode::Usage, m);
    let want = Account::of(recorded).map_err(|e| {
        usage(format!(
            "{whose} URL {} is not valid: {e}",
            redact_url(recorded)
        ))
    })?;
    let mut found: Option<&String> = None;
    for c in candidates {
        if Account::of(c).ok().as_ref() != Some(&want) {
            continue;
        }
        match found {
            Some(f) if f != c => {
                return Err(usage(format!(
                    "{flag} names the server {}:{} for user `{}` twice with different URLs \
                     ({} and {}); pass one URL per server and account",
                    want.host,
                    want.port,
                    want.user,
                    redact_url(f),
                    redact_url(c)
                )))
            }
            _ => found = Some(c),
        }
    }
    if let Some(c) = found {
        return Ok(c.clone());
    }
    if !has_password(recorded) {
        return Ok(recorded.to_string());
    }
    let given: Vec<String> = candidates
        .iter()
        .filter_map(|c| Account::of(c).ok())
        .map(|a| a.label())
        .collect();
    let given = if given.is_empty() {
        format!("no {flag} URL was given")
    } else {
        format!("{flag} names only {}", given.join(", "))
    };
    let query = recorded
        .split_once('?')
        .map(|(_, q)| format!("?{q}"))
        .unwrap_or_default();
    Err(usage(format!(
        "{whose} is on the server {}:{} as user `{}` (installed with a password), and {given}; \
         pass `{flag} 'mysql://{}:PASSWORD@{}:{}/{query}'` (one URL per server and account \
         serves every job on it, whatever their databases)",
        want.host, want.port, want.user, want.user, want.host, want.port
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(recorded: &str, given: &[&str]) -> Result<String> {
        let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        resolve_url(recorded, &given, "--source", "job 7's source")
    }

    #[test]
    fn one_url_per_server_serves_every_database() {
        let url = "mysql://bf:pw@h:3306/";
        for recorded in [
            "mysql://bf:***@h:3306/shop",
            "mysql://bf:***@H:3306/crm",
            "mysql://bf:***@h:3306",
        ] {
            assert_eq!(
                resolve(recorded, &["mysql://bf:pw@h:3307/", url])
                    .ok()
                    .as_deref(),
                Some(url)
            );
        }
        // The redacted form of the same URL still matches (the former rule).
        assert_eq!(
            resolve("mysql://u:***@h:1/db", &["mysql://u:secret@h:1/db"])
                .ok()
                .as_deref(),
            Some("mysql://u:secret@h:1/db")
        );
        // The default port is the port.
        assert!(resolve("mysql://bf:***@h/shop", &["mysql://bf:pw@h:3306/"]).is_ok());
    }

    #[test]
    fn user_port_and_tls_are_part_of_the_match() {
        let recorded = "mysql://bf:***@h:3306/shop?ssl-mode=REQUIRED";
        for other in [
            "mysql://bf:pw@h:3306/shop",
            "mysql://other:pw@h:3306/shop?ssl-mode=REQUIRED",
            "mysql://bf:pw@h:3307/shop?ssl-mode=REQUIRED",
            "mysql://bf:pw@g:3306/shop?ssl-mode=REQUIRED",
            "mysql://bf:pw@h:3306/shop?ssl-mode=VERIFY_IDENTITY",
        ] {
            assert!(resolve(recorded, &[other]).is_err(), "{other} matched");
        }
        assert!(resolve(recorded, &["mysql://bf:pw@h:3306/?ssl-mode=required"]).is_ok());
    }

    #[test]
    fn no_match_names_the_server_and_the_flag_never_the_password() {
        let e = resolve(
            "mysql://bf:***@h:3306/shop?ssl-mode=REQUIRED",
            &["mysql://bf:secret@g:1/"],
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("job 7's source"), "{e}");
        assert!(e.contains("h:3306") && e.contains("`bf`"), "{e}");
        assert!(
            e.contains("--source 'mysql://bf:PASSWORD@h:3306/?ssl-mode=REQUIRED'"),
            "{e}"
        );
        assert!(e.contains("bf@g:1"), "{e}");
        assert!(!e.contains("secret") && !e.contains("grant"), "{e}");
        let none = resolve("mysql://bf:***@h:3306/shop", &[])
            .err()
            .map(|e| e.to_string());
        assert!(none.is_some_and(|e| e.contains("no --source URL was given")));
    }

    #[test]
    fn an_account_without_password_connects_with_its_recorded_url() {
        assert_eq!(
            resolve("mysql://root@h:3306/shop", &[]).ok().as_deref(),
            Some("mysql://root@h:3306/shop")
        );
        assert_eq!(
            resolve("mysql://root@h:3306/shop", &["mysql://root@h:3306/"])
                .ok()
                .as_deref(),
            Some("mysql://root@h:3306/")
        );
    }

    #[test]
    fn two_urls_for_one_account_are_refused() {
        let e = resolve(
            "mysql://bf:***@h:1/a",
            &["mysql://bf:x@h:1/", "mysql://bf:y@h:1/b"],
        );
        let e = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            e.contains("twice") && !e.contains(":x@") && !e.contains(":y@"),
            "{e}"
        );
    }
}
