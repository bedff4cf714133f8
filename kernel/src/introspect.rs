//! What a server says about itself and about one table, read once and turned into plain
//! values that the install checks (DESIGN §9) and the start-time re-check (§4) decide on.
//!
//! Everything here only reads: `information_schema`, `SHOW GLOBAL VARIABLES`,
//! `SHOW MASTER STATUS`. The decisions live in pure functions ([`seal`],
//! [`ServerFacts::from_vars`], [`BinlogStatus::drops_schema`]) so they are unit-tested
//! without a server. Two caveats an operator must know, both inherited from the server:
//! `information_schema` only shows objects the connected user holds some privilege on (a
//! table without any privilege looks missing; the caller probes with a `SELECT` to tell
//! the two apart), and `information_schema.TRIGGERS` only lists triggers on tables where the
//! user holds the TRIGGER privilege.
use crate::codec::Versioned;
use crate::error::{from_mysql, mysql_server_code, DefiniteCode, Error, Result};
use crate::position::{BinlogPos, Flavor, Lineage};
use crate::schema::{quote_ident, ColumnDef, ColumnKind, SealedSchema};
use mysql_async::prelude::Queryable;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Server error numbers that mean "you may not", beyond those in `error::codes`.
pub mod deny_codes {
    /// ER_DBACCESS_DENIED_ERROR: no privilege on the database.
    pub const ER_DBACCESS_DENIED: u16 = 1044;
    /// ER_ACCESS_DENIED_ERROR.
    pub const ER_ACCESS_DENIED: u16 = 1045;
    /// ER_TABLEACCESS_DENIED_ERROR: no privilege on the table.
    pub const ER_TABLEACCESS_DENIED: u16 = 1142;
    /// ER_COLUMNACCESS_DENIED_ERROR.
    pub const ER_COLUMNACCESS_DENIED: u16 = 1143;
    /// ER_SPECIFIC_ACCESS_DENIED_ERROR: a global privilege (BINLOG MONITOR, ...) is missing.
    pub const ER_SPECIFIC_ACCESS_DENIED: u16 = 1227;
    /// ER_PARSE_ERROR: e.g. `SHOW MASTER STATUS` on MySQL 8.4.
    pub const ER_PARSE_ERROR: u16 = 1064;

    /// True when `code` means a missing privilege.
    pub fn is_denied(code: u16) -> bool {
        matches!(
            code,
            ER_DBACCESS_DENIED
                | ER_ACCESS_DENIED
                | ER_TABLEACCESS_DENIED
                | ER_COLUMNACCESS_DENIED
                | ER_SPECIFIC_ACCESS_DENIED
        )
    }
}

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

/// One column as `information_schema.COLUMNS` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawColumn {
    pub name: String,
    pub data_type: String,
    pub column_type: String,
    pub nullable: bool,
    pub char_len: Option<u64>,
    pub numeric_precision: Option<u64>,
    pub numeric_scale: Option<u64>,
    pub datetime_precision: Option<u64>,
    pub charset: Option<String>,
    pub collation: Option<String>,
    /// EXTRA, e.g. `auto_increment`, `VIRTUAL GENERATED`.
    pub extra: String,
}

impl RawColumn {
    /// True for a VIRTUAL or STORED generated column.
    pub fn is_generated(&self) -> bool {
        self.extra.to_ascii_uppercase().contains("GENERATED")
    }
}

/// One index (from `information_schema.STATISTICS`), columns in index order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexDef {
    pub name: String,
    pub unique: bool,
    /// Column names; an expression part (MySQL functional index) shows as `(expression)`.
    pub columns: Vec<String>,
}

impl IndexDef {
    /// True for the primary key.
    pub fn is_primary(&self) -> bool {
        self.name == "PRIMARY"
    }
}

/// A foreign key that involves the table, as child or as parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignKey {
    pub name: String,
    pub child_db: String,
    pub child_table: String,
    pub parent_db: String,
    pub parent_table: String,
    pub update_rule: String,
    pub delete_rule: String,
}

impl ForeignKey {
    /// True when the key makes InnoDB change the child by itself (CASCADE, SET NULL,
    /// SET DEFAULT): such changes are not written to the binlog as row events.
    pub fn acts_on_child(&self) -> bool {
        let acts = |r: &str| !matches!(r, "RESTRICT" | "NO ACTION");
        acts(&self.update_rule.to_ascii_uppercase()) || acts(&self.delete_rule.to_ascii_uppercase())
    }

    /// `db`.`table`.`name` of the constraint (it lives on the child).
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}.{}",
            quote_ident(&self.child_db),
            quote_ident(&self.child_table),
            quote_ident(&self.name)
        )
    }
}

/// Everything install needs to know about one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableFacts {
    pub database: String,
    pub table: String,
    /// `BASE TABLE`, `VIEW`, `SYSTEM VERSIONED`, `SEQUENCE`, ...
    pub table_type: String,
    pub engine: Option<String>,
    /// The server's estimate (`TABLE_ROWS`), for display only.
    pub estimated_rows: u64,
    pub columns: Vec<RawColumn>,
    pub indexes: Vec<IndexDef>,
    pub triggers: Vec<String>,
    pub foreign_keys: Vec<ForeignKey>,
}

impl TableFacts {
    /// `db`.`table`, quoted.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.database),
            quote_ident(&self.table)
        )
    }

    /// The primary key, if any.
    pub fn primary_key(&self) -> Option<&IndexDef> {
        self.indexes.iter().find(|i| i.is_primary())
    }

    /// Unique indexes other than the primary key.
    pub fn extra_unique_keys(&self) -> Vec<&IndexDef> {
        self.indexes
            .iter()
            .filter(|i| i.unique && !i.is_primary())
            .collect()
    }

    /// Foreign keys declared on this table (it is the child).
    pub fn child_foreign_keys(&self) -> Vec<&ForeignKey> {
        self.foreign_keys
            .iter()
            .filter(|f| f.child_db == self.database && f.child_table == self.table)
            .collect()
    }
}

/// Reads a table's facts; `None` when `information_schema` does not show it (missing, or
/// the user holds no privilege on it).
pub async fn read_table(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> Result<Option<TableFacts>> {
    let what = format!(
        "reading the definition of {}.{}",
        quote_ident(db),
        quote_ident(table)
    );
    let head: Option<(String, Option<String>, Option<u64>)> = conn
        .exec_first(
            "SELECT TABLE_TYPE, ENGINE, TABLE_ROWS FROM information_schema.TABLES \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (db, table),
        )
        .await
        .map_err(|e| from_mysql(&what, &e))?;
    let Some((table_type, engine, rows)) = head else {
        return Ok(None);
    };
    let columns = read_columns(conn, db, table)
        .await
        .map_err(|e| from_mysql(&what, &e))?;
    let indexes = read_indexes(conn, db, table)
        .await
        .map_err(|e| from_mysql(&what, &e))?;
    let triggers: Vec<String> = conn
        .exec(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS \
             WHERE EVENT_OBJECT_SCHEMA = ? AND EVENT_OBJECT_TABLE = ? ORDER BY TRIGGER_NAME",
            (db, table),
        )
        .await
        .map_err(|e| from_mysql(&what, &e))?;
    let foreign_keys = read_foreign_keys(conn, db, table)
        .await
        .map_err(|e| from_mysql(&what, &e))?;
    Ok(Some(TableFacts {
        database: db.to_string(),
        table: table.to_string(),
        table_type,
        engine,
        estimated_rows: rows.unwrap_or(0),
        columns,
        indexes,
        triggers,
        foreign_keys,
    }))
}

type ColumnRow = (
    String,
    String,
    String,
    String,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<u64>,
    Option<String>,
    Option<String>,
    Option<String>,
);

async fn read_columns(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> std::result::Result<Vec<RawColumn>, mysql_async::Error> {
    let rows: Vec<ColumnRow> = conn
        .exec(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_MAXIMUM_LENGTH, \
             NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, CHARACTER_SET_NAME, \
             COLLATION_NAME, EXTRA FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (db, table),
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| RawColumn {
            name: r.0,
            data_type: r.1.to_ascii_lowercase(),
            column_type: r.2,
            nullable: r.3.eq_ignore_ascii_case("YES"),
            char_len: r.4,
            numeric_precision: r.5,
            numeric_scale: r.6,
            datetime_precision: r.7,
            charset: r.8,
            collation: r.9,
            extra: r.10.unwrap_or_default(),
        })
        .collect())
}

async fn read_indexes(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> std::result::Result<Vec<IndexDef>, mysql_async::Error> {
    let rows: Vec<(String, i64, Option<String>)> = conn
        .exec(
            "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            (db, table),
        )
        .await?;
    let mut out: Vec<IndexDef> = Vec::new();
    for (name, non_unique, column) in rows {
        let column = column.unwrap_or_else(|| "(expression)".to_string());
        match out.last_mut() {
            Some(last) if last.name == name => last.columns.push(column),
            _ => out.push(IndexDef {
                name,
                unique: non_unique == 0,
                columns: vec![column],
            }),
        }
    }
    Ok(out)
}

async fn read_foreign_keys(
    conn: &mut mysql_async::Conn,
    db: &str,
    table: &str,
) -> std::result::Result<Vec<ForeignKey>, mysql_async::Error> {
    type FkRow = (String, String, String, String, String, String, String);
    let rows: Vec<FkRow> = conn
        .exec(
            "SELECT CONSTRAINT_NAME, CONSTRAINT_SCHEMA, TABLE_NAME, UNIQUE_CONSTRAINT_SCHEMA, \
             REFERENCED_TABLE_NAME, UPDATE_RULE, DELETE_RULE \
             FROM information_schema.REFERENTIAL_CONSTRAINTS \
             WHERE (CONSTRAINT_SCHEMA = ? AND TABLE_NAME = ?) \
                OR (UNIQUE_CONSTRAINT_SCHEMA = ? AND REFERENCED_TABLE_NAME = ?) \
             ORDER BY CONSTRAINT_SCHEMA, TABLE_NAME, CONSTRAINT_NAME",
            (db, table, db, table),
        )
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| ForeignKey {
            name: r.0,
            child_db: r.1,
            child_table: r.2,
            parent_db: r.3,
            parent_table: r.4,
            update_rule: r.5,
            delete_rule: r.6,
        })
        .collect())
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

/// Why a table cannot be sealed. Each names the object and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealProblem {
    NoPrimaryKey,
    CompositePrimaryKey(Vec<String>),
    /// The primary-key column has no integer type.
    PrimaryKeyNotInteger {
        column: String,
        column_type: String,
    },
    PrimaryKeyUnsigned {
        column: String,
        column_type: String,
    },
    /// The primary key is over an expression (MySQL functional key part).
    PrimaryKeyUnknownColumn(String),
    UnsupportedType {
        column: String,
        column_type: String,
    },
    Generated {
        column: String,
        extra: String,
    },
}

impl fmt::Display for SealProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealProblem::NoPrimaryKey => write!(
                f,
                "has no primary key; fix: add a single signed integer primary key column \
                 (e.g. `id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY`)"
            ),
            SealProblem::CompositePrimaryKey(cols) => write!(
                f,
                "has a composite primary key ({}); fix: only a single signed integer \
                 primary-key column is supported",
                cols.iter()
                    .map(|c| quote_ident(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            SealProblem::PrimaryKeyNotInteger {
                column,
                column_type,
            } => write!(
                f,
                "primary key column {} is {column_type}, not an integer; fix: the primary \
                 key must be one signed TINYINT/SMALLINT/MEDIUMINT/INT/BIGINT column",
                quote_ident(column)
            ),
            SealProblem::PrimaryKeyUnsigned {
                column,
                column_type,
            } => write!(
                f,
                "primary key column {} is {column_type} (UNSIGNED); fix: the primary key \
                 must be SIGNED (e.g. ALTER TABLE ... MODIFY {} BIGINT NOT NULL, if every \
                 key fits)",
                quote_ident(column),
                quote_ident(column)
            ),
            SealProblem::PrimaryKeyUnknownColumn(c) => write!(
                f,
                "primary key part {c} is not a column; fix: use a single signed integer \
                 primary-key column"
            ),
            SealProblem::UnsupportedType {
                column,
                column_type,
            } => write!(
                f,
                "column {} has unsupported type {column_type}; fix: change or drop the \
                 column; supported types: {}",
                quote_ident(column),
                supported_list()
            ),
            SealProblem::Generated { column, extra } => write!(
                f,
                "column {} is a generated column ({extra}); fix: generated columns are not \
                 supported, drop the column or make it a plain column",
                quote_ident(column)
            ),
        }
    }
}

/// The supported DATA_TYPE names, comma-separated.
pub fn supported_list() -> String {
    crate::schema::SUPPORTED_TYPES
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Removes an integer display width (`int(11) unsigned` -> `int unsigned`): MariaDB and
/// MySQL < 8.0.19 print one, MySQL 8.0.19+ does not, and it changes nothing physical.
pub fn normalize_column_type(kind: ColumnKind, column_type: &str) -> String {
    let t = column_type.to_ascii_lowercase();
    if !kind.is_integer() {
        return t;
    }
    match (t.find('('), t.find(')')) {
        (Some(open), Some(close)) if open < close => {
            format!("{}{}", &t[..open], &t[close + 1..])
        }
        _ => t,
    }
}

/// Converts one raw column; `None` when its type is unsupported.
pub fn column_def(c: &RawColumn) -> Option<ColumnDef> {
    let kind = ColumnKind::classify(&c.data_type)?;
    let column_type = normalize_column_type(kind, &c.column_type);
    Some(ColumnDef {
        name: c.name.clone(),
        kind,
        unsigned: column_type.contains("unsigned"),
        column_type,
        nullable: c.nullable,
        char_len: c.char_len,
        numeric_precision: c.numeric_precision,
        numeric_scale: c.numeric_scale,
        datetime_precision: c.datetime_precision,
        charset: c.charset.clone(),
        collation: c.collation.clone(),
    })
}

/// Seals a table definition, or lists every reason it cannot be sealed (pure).
pub fn seal(t: &TableFacts) -> std::result::Result<SealedSchema, Vec<SealProblem>> {
    let mut problems = Vec::new();
    let mut columns = Vec::with_capacity(t.columns.len());
    for c in &t.columns {
        if c.is_generated() {
            problems.push(SealProblem::Generated {
                column: c.name.clone(),
                extra: c.extra.clone(),
            });
        }
        match column_def(c) {
            Some(d) => columns.push(d),
            None => problems.push(SealProblem::UnsupportedType {
                column: c.name.clone(),
                column_type: c.column_type.clone(),
            }),
        }
    }
    let pk = match t.primary_key() {
        None => {
            problems.push(SealProblem::NoPrimaryKey);
            None
        }
        Some(ix) if ix.columns.len() != 1 => {
            problems.push(SealProblem::CompositePrimaryKey(ix.columns.clone()));
            None
        }
        Some(ix) => pk_index(t, &ix.columns[0], &mut problems),
    };
    match pk {
        Some(pk) if problems.is_empty() => Ok(SealedSchema {
            database: t.database.clone(),
            table: t.table.clone(),
            columns,
            pk,
        }),
        _ => Err(problems),
    }
}

fn pk_index(t: &TableFacts, name: &str, problems: &mut Vec<SealProblem>) -> Option<usize> {
    let Some(i) = t.columns.iter().position(|c| c.name == name) else {
        problems.push(SealProblem::PrimaryKeyUnknownColumn(name.to_string()));
        return None;
    };
    let c = &t.columns[i];
    match ColumnKind::classify(&c.data_type) {
        Some(k) if k.is_integer() => {
            if c.column_type.to_ascii_lowercase().contains("unsigned") {
                problems.push(SealProblem::PrimaryKeyUnsigned {
                    column: c.name.clone(),
                    column_type: c.column_type.clone(),
                });
                return None;
            }
            Some(i)
        }
        _ => {
            problems.push(SealProblem::PrimaryKeyNotInteger {
                column: c.name.clone(),
                column_type: c.column_type.clone(),
            });
            None
        }
    }
}

/// The definite error for a required fact the server did not give.
pub fn missing_fact(what: &str) -> Error {
    Error::definite(DefiniteCode::Precondition, what.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn raw(name: &str, data_type: &str, column_type: &str) -> RawColumn {
        RawColumn {
            name: name.into(),
            data_type: data_type.into(),
            column_type: column_type.into(),
            nullable: false,
            char_len: None,
            numeric_precision: None,
            numeric_scale: None,
            datetime_precision: None,
            charset: None,
            collation: None,
            extra: String::new(),
        }
    }

    fn table(columns: Vec<RawColumn>, pk: &[&str]) -> TableFacts {
        let mut indexes = Vec::new();
        if !pk.is_empty() {
            indexes.push(IndexDef {
                name: "PRIMARY".into(),
                unique: true,
                columns: pk.iter().map(|s| s.to_string()).collect(),
            });
        }
        TableFacts {
            database: "d".into(),
            table: "t".into(),
            table_type: "BASE TABLE".into(),
            engine: Some("InnoDB".into()),
            estimated_rows: 0,
            columns,
            indexes,
            triggers: vec![],
            foreign_keys: vec![],
        }
    }

    #[test]
    fn seals_a_good_table_and_normalizes_display_width() {
        let t = table(
            vec![
                raw("id", "bigint", "bigint(20)"),
                raw("n", "int", "int(10) unsigned"),
                raw("at", "datetime", "datetime(6)"),
            ],
            &["id"],
        );
        let s = seal(&t).unwrap();
        assert_eq!(s.pk, 0);
        assert_eq!(s.columns[0].column_type, "bigint");
        assert_eq!(s.columns[1].column_type, "int unsigned");
        assert!(s.columns[1].unsigned);
        assert_eq!(s.columns[2].column_type, "datetime(6)");
        // The same table printed by MySQL 8.0.19+ (no display width) seals identically.
        let t8 = table(
            vec![
                raw("id", "bigint", "bigint"),
                raw("n", "int", "int unsigned"),
                raw("at", "datetime", "datetime(6)"),
            ],
            &["id"],
        );
        assert_eq!(seal(&t8).unwrap().fingerprint(), s.fingerprint());
    }

    #[test]
    fn names_every_problem() {
        let t = table(vec![raw("id", "bigint", "bigint(20)")], &[]);
        assert_eq!(seal(&t), Err(vec![SealProblem::NoPrimaryKey]));
        let t = table(
            vec![raw("a", "int", "int(11)"), raw("b", "int", "int(11)")],
            &["a", "b"],
        );
        assert!(
            matches!(&seal(&t).unwrap_err()[0], SealProblem::CompositePrimaryKey(c) if c.len() == 2)
        );
        let t = table(vec![raw("id", "varchar", "varchar(10)")], &["id"]);
        let e = seal(&t).unwrap_err();
        assert!(e[0].to_string().contains("`id`"), "{}", e[0]);
        let t = table(vec![raw("id", "bigint", "bigint(20) unsigned")], &["id"]);
        assert!(seal(&t).unwrap_err()[0].to_string().contains("UNSIGNED"));
        let t = table(
            vec![
                raw("id", "int", "int(11)"),
                raw("g", "geometry", "geometry"),
            ],
            &["id"],
        );
        let msg = seal(&t).unwrap_err()[0].to_string();
        assert!(msg.contains("`g`") && msg.contains("geometry") && msg.contains("datetime"));
        let mut g = raw("v", "int", "int(11)");
        g.extra = "VIRTUAL GENERATED".into();
        let t = table(vec![raw("id", "int", "int(11)"), g], &["id"]);
        assert!(matches!(
            &seal(&t).unwrap_err()[0],
            SealProblem::Generated { .. }
        ));
    }

    #[test]
    fn server_facts_from_variables() {
        let vars: BTreeMap<String, String> = [
            ("version", "10.11.6-MariaDB-0+deb12u1-log"),
            ("server_id", "7"),
            ("server_uid", "abc="),
            ("log_bin", "ON"),
            ("binlog_format", "ROW"),
            ("binlog_order_commits", "OFF"),
            ("gtid_binlog_pos", "0-7-9"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let f = ServerFacts::from_vars(&vars);
        assert_eq!(f.flavor, Flavor::Mariadb);
        assert_eq!(f.identity(), "mariadb:7:abc=");
        assert!(f.log_bin);
        assert_eq!(f.binlog_row_metadata, None);
        assert_eq!(f.binlog_order_commits, None, "MariaDB has no such switch");
        assert_eq!(f.gtid_pos.as_deref(), Some("0-7-9"));
        let mut m = vars.clone();
        m.insert("version".into(), "8.0.36".into());
        m.insert("server_uuid".into(), "u-u".into());
        let f = ServerFacts::from_vars(&m);
        assert_eq!(f.flavor, Flavor::Mysql);
        assert_eq!(f.binlog_order_commits, Some(false));
        assert_eq!(f.identity(), "mysql:u-u");
    }

    #[test]
    fn binlog_filters() {
        let s = |d: &[&str], i: &[&str]| BinlogStatus {
            position: BinlogPos::new("b.000001", 4),
            do_db: d.iter().map(|x| x.to_string()).collect(),
            ignore_db: i.iter().map(|x| x.to_string()).collect(),
        };
        assert!(!s(&[], &[]).drops_schema("a"));
        assert!(s(&["b"], &[]).drops_schema("a"));
        assert!(!s(&["a", "b"], &[]).drops_schema("a"));
        assert!(s(&[], &["a"]).drops_schema("a"));
    }

    #[test]
    fn accounts_and_fk_rules() {
        assert_eq!(account_of("cap@%"), "'cap'@'%'");
        assert_eq!(account_of("o'k@localhost"), "'o''k'@'localhost'");
        let fk = |d: &str| ForeignKey {
            name: "f".into(),
            child_db: "d".into(),
            child_table: "t".into(),
            parent_db: "d".into(),
            parent_table: "p".into(),
            update_rule: "RESTRICT".into(),
            delete_rule: d.into(),
        };
        assert!(fk("CASCADE").acts_on_child());
        assert!(fk("SET NULL").acts_on_child());
        assert!(!fk("NO ACTION").acts_on_child());
    }

    #[test]
    fn install_lineage_golden_bytes() {
        let l = InstallLineage {
            lineage: Lineage {
                flavor: Flavor::Mariadb,
                server_id: 1,
                server_uid: "u".into(),
                binlog_base: "mysql-bin".into(),
            },
            position: BinlogPos::new("mysql-bin.000001", 330),
            gtid_pos: "0-1-5".into(),
        };
        let bytes = crate::codec::encode(&l);
        assert_eq!(&bytes[..6], b"LING\x01\x00");
        assert_eq!(
            hex::encode(&bytes[6..]),
            "0001017509".to_string()
                + &hex::encode(b"mysql-bin")
                + "10"
                + &hex::encode(b"mysql-bin.000001")
                + "ca0205"
                + &hex::encode(b"0-1-5")
        );
        assert_eq!(crate::codec::decode::<InstallLineage>(&bytes), Ok(l));
    }
}
