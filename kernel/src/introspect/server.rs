//! What the server says about itself: the variables the install checks decide on, the
//! binlog status and its filters, and the install lineage (server UUID, binlog series).
//! Read-only; the decisions ([`ServerFacts::from_vars`], [`BinlogStatus::drops_schema`])
//! are pure.

use super::deny_codes;
use super::{denied_or, missing_fact, Denied};
use crate::codec::Versioned;
use crate::error::{from_mysql, mysql_server_code, DefiniteCode, Error, Result};
use crate::position::{BinlogPos, Flavor, Lineage};
use mysql_async::prelude::Queryable;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The global variables [`read_server_facts`] asks for. A variable the server does not
/// have (e.g. `binlog_row_metadata` before MariaDB 10.5) is simply absent.
pub const SERVER_VARIABLES: &[&str] = &[
    "version",
    "server_id",
    "server_uid",
    "server_uuid",
    "log_bin",
    "log_bin_basename",
    "binlog_format",
    "binlog_row_image",
    "binlog_row_metadata",
    "binlog_order_commits",
    "gtid_binlog_pos",
    "gtid_executed",
    "log_bin_compress",
    "binlog_transaction_compression",
];

/// The server's identity and binlog configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerFacts {
    pub flavor: Flavor,
    pub version: String,
    pub server_id: u32,
    /// MariaDB `@@server_uid`, MySQL `@@server_uuid`.
    pub server_uid: Option<String>,
    pub log_bin: bool,
    pub log_bin_basename: Option<String>,
    pub binlog_format: Option<String>,
    pub binlog_row_image: Option<String>,
    /// None when the server has no such variable (MariaDB < 10.5, MySQL < 8.0.14).
    pub binlog_row_metadata: Option<String>,
    /// MySQL only; None on MariaDB, whose binlog is always commit-ordered.
    pub binlog_order_commits: Option<bool>,
    /// MariaDB `@@gtid_binlog_pos`, MySQL `@@gtid_executed`.
    pub gtid_pos: Option<String>,
    /// MariaDB `log_bin_compress`: compressed QUERY and rows events, which the reader
    /// cannot decode (it pauses on them). False when the server has no such variable.
    pub log_bin_compress: bool,
    /// MySQL 8.0.20+ `binlog_transaction_compression` as read; None when the server has
    /// no such variable (MariaDB, older MySQL).
    pub binlog_transaction_compression: Option<String>,
}

impl ServerFacts {
    /// Builds the facts from `SHOW GLOBAL VARIABLES` rows (names lower-cased).
    pub fn from_vars(vars: &BTreeMap<String, String>) -> ServerFacts {
        let get = |k: &str| vars.get(k).cloned().filter(|v| !v.is_empty());
        let version = get("version").unwrap_or_default();
        let flavor = crate::lineage::flavor_of(&version);
        let (uid, gtid) = match flavor {
            Flavor::Mariadb => (get("server_uid"), get("gtid_binlog_pos")),
            Flavor::Mysql => (get("server_uuid"), get("gtid_executed")),
        };
        ServerFacts {
            flavor,
            version,
            server_id: get("server_id").and_then(|v| v.parse().ok()).unwrap_or(0),
            server_uid: uid,
            log_bin: get("log_bin").is_some_and(|v| is_on(&v)),
            log_bin_basename: get("log_bin_basename"),
            binlog_format: get("binlog_format"),
            binlog_row_image: get("binlog_row_image"),
            binlog_row_metadata: get("binlog_row_metadata"),
            binlog_order_commits: match flavor {
                Flavor::Mysql => get("binlog_order_commits").map(|v| is_on(&v)),
                Flavor::Mariadb => None,
            },
            gtid_pos: gtid,
            log_bin_compress: get("log_bin_compress").is_some_and(|v| is_on(&v)),
            binlog_transaction_compression: get("binlog_transaction_compression"),
        }
    }

    /// A stable text naming the server: `mariadb:<server_id>:<server_uid>` or
    /// `mysql:<server_uuid>`. Two connections with the same identity reach the same server.
    pub fn identity(&self) -> String {
        match self.flavor {
            Flavor::Mariadb => format!(
                "mariadb:{}:{}",
                self.server_id,
                self.server_uid.as_deref().unwrap_or("")
            ),
            Flavor::Mysql => format!("mysql:{}", self.server_uid.as_deref().unwrap_or("")),
        }
    }
}

fn is_on(v: &str) -> bool {
    matches!(v.to_ascii_uppercase().as_str(), "ON" | "1" | "TRUE" | "YES")
}

/// The `SHOW GLOBAL VARIABLES` statement that [`read_server_facts`] runs (also usable from
/// an sqlx connection, e.g. the state store's).
pub fn server_facts_sql() -> String {
    let names: Vec<String> = SERVER_VARIABLES.iter().map(|n| format!("'{n}'")).collect();
    format!(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})",
        names.join(", ")
    )
}

/// Reads [`ServerFacts`].
pub async fn read_server_facts(conn: &mut mysql_async::Conn) -> Result<ServerFacts> {
    let rows: Vec<(String, Option<String>)> = conn
        .query(server_facts_sql())
        .await
        .map_err(|e| from_mysql("reading server variables", &e))?;
    let vars = rows
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.unwrap_or_default()))
        .collect();
    Ok(ServerFacts::from_vars(&vars))
}

/// `SHOW MASTER STATUS`: the binlog end and the server's binlog filters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogStatus {
    pub position: BinlogPos,
    pub do_db: Vec<String>,
    pub ignore_db: Vec<String>,
}

impl BinlogStatus {
    /// True when the server's binlog filters would leave changes of `schema` out of the
    /// binlog (with ROW events the filter applies to the changed table's schema).
    pub fn drops_schema(&self, schema: &str) -> bool {
        (!self.do_db.is_empty() && !self.do_db.iter().any(|d| d == schema))
            || self.ignore_db.iter().any(|d| d == schema)
    }
}

/// Reads `SHOW MASTER STATUS` (`SHOW BINARY LOG STATUS` on MySQL 8.4+). `Ok(Ok(None))`
/// means the binlog is off; `Ok(Err(Denied))` means the user lacks BINLOG MONITOR
/// (MariaDB) or REPLICATION CLIENT (MySQL).
pub async fn read_binlog_status(
    conn: &mut mysql_async::Conn,
) -> Result<std::result::Result<Option<BinlogStatus>, Denied>> {
    let mut res = conn
        .query_first::<mysql_async::Row, _>("SHOW MASTER STATUS")
        .await;
    if let Err(e) = &res {
        if mysql_server_code(e) == Some(deny_codes::ER_PARSE_ERROR) {
            res = conn.query_first("SHOW BINARY LOG STATUS").await;
        }
    }
    let row = match res {
        Ok(row) => row,
        Err(e) => return denied_or("SHOW MASTER STATUS", &e).map(Err),
    };
    let Some(row) = row else {
        return Ok(Ok(None));
    };
    let file: Option<String> = row.get(0);
    let pos: Option<u64> = row.get(1);
    let list = |i: usize| -> Vec<String> {
        row.get::<Option<String>, _>(i)
            .flatten()
            .unwrap_or_default()
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    match (file, pos) {
        (Some(file), Some(pos)) => Ok(Ok(Some(BinlogStatus {
            position: BinlogPos::new(file, pos),
            do_db: list(2),
            ignore_db: list(3),
        }))),
        _ => Err(Error::transient("SHOW MASTER STATUS: malformed row")),
    }
}

/// The source lineage as recorded at install: the server and binlog series
/// ([`Lineage`]), plus where the binlog stood and the GTID state at that moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallLineage {
    pub lineage: Lineage,
    /// `SHOW MASTER STATUS` file and position at install.
    pub position: BinlogPos,
    /// MariaDB `@@gtid_binlog_pos`, MySQL `@@gtid_executed`, at install.
    pub gtid_pos: String,
}

impl Versioned for InstallLineage {
    const KIND: [u8; 4] = *b"LING";
    const VERSION: u16 = 1;
}

/// Reads the lineage (through `kernel::lineage::read_lineage`), the binlog end (also on
/// MySQL 8.4+, see [`read_binlog_status`]) and the GTID state. The GTID state is read after
/// the position, so it covers at least every group before the position.
pub async fn read_install_lineage(conn: &mut mysql_async::Conn) -> Result<InstallLineage> {
    let lineage = crate::lineage::read_lineage(conn).await?;
    let position = match read_binlog_status(conn).await? {
        Ok(Some(status)) => status.position,
        Ok(None) => return Err(missing_fact("SHOW MASTER STATUS returned nothing: the source has no binary log; enable log_bin")),
        Err(denied) => {
            return Err(Error::definite(
                DefiniteCode::Precondition,
                format!("SHOW MASTER STATUS was refused ({denied}): GRANT BINLOG MONITOR (MariaDB) or REPLICATION CLIENT (MySQL) to the source user"),
            ))
        }
    };
    let facts = read_server_facts(conn).await?;
    Ok(InstallLineage {
        lineage,
        position,
        gtid_pos: facts.gtid_pos.unwrap_or_default(),
    })
}
