//! Telling "missing" from "hidden": `information_schema` hides objects the user holds no
//! privilege on, so a denial is classified by server error number ([`super::deny_codes`])
//! and a table is probed with a `SELECT` before it is called missing.

use super::deny_codes;
use crate::error::{from_mysql, mysql_server_code, Result};
use crate::schema::quote_ident;
use mysql_async::prelude::Queryable;
use std::fmt;

/// A refused statement: the server said the user may not run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub code: u16,
    pub message: String,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "server error {}: {}", self.code, self.message)
    }
}

/// Turns a mysql_async error into `Err(Denied)` when it is a missing privilege, or a
/// kernel error otherwise.
pub fn denied_or(what: &str, e: &mysql_async::Error) -> Result<Denied> {
    match (mysql_server_code(e), e) {
        (Some(code), mysql_async::Error::Server(s)) if deny_codes::is_denied(code) => Ok(Denied {
            code,
            message: s.message.clone(),
        }),
        _ => Err(from_mysql(what, e)),
    }
}

/// Outcome of `SELECT 1 FROM db.t LIMIT 0`: tells a missing table from a hidden one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectProbe {
    Allowed,
    Missing,
    Denied(Denied),
}

/// Probes whether the user may SELECT from the table.
pub async fn probe_select(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> Result<SelectProbe> {
    let sql = format!(
        "SELECT 1 FROM {}.{} LIMIT 0",
        quote_ident(db),
        quote_ident(table)
    );
    match conn.query_drop(sql).await {
        Ok(()) => Ok(SelectProbe::Allowed),
        Err(e) => match mysql_server_code(&e) {
            Some(crate::error::codes::ER_NO_SUCH_TABLE | crate::error::codes::ER_BAD_DB) => {
                Ok(SelectProbe::Missing)
            }
            _ => denied_or("probing SELECT", &e).map(SelectProbe::Denied),
        },
    }
}

/// True when the table holds no row (the server reads at most one).
pub async fn is_empty(conn: &mut mysql_async::Conn, db: &str, table: &str) -> Result<bool> {
    let sql = format!(
        "SELECT 1 FROM {}.{} LIMIT 1",
        quote_ident(db),
        quote_ident(table)
    );
    let row: Option<i64> = conn.query_first(sql).await.map_err(|e| {
        from_mysql(
            &format!("reading {}.{}", quote_ident(db), quote_ident(table)),
            &e,
        )
    })?;
    Ok(row.is_none())
}

/// `CURRENT_USER()` as a quoted account for GRANT statements: `'user'@'host'`.
pub async fn current_account(conn: &mut mysql_async::Conn) -> Result<String> {
    let who: Option<String> = conn
        .query_first("SELECT CURRENT_USER()")
        .await
        .map_err(|e| from_mysql("reading CURRENT_USER()", &e))?;
    Ok(account_of(&who.unwrap_or_default()))
}

/// `user@host` -> `'user'@'host'`.
pub fn account_of(current_user: &str) -> String {
    let (user, host) = current_user.rsplit_once('@').unwrap_or((current_user, "%"));
    format!(
        "'{}'@'{}'",
        user.replace('\'', "''"),
        host.replace('\'', "''")
    )
}
