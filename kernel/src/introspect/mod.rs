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
//!
//! Layout: `server` the server's own facts (variables, binlog status, install
//! lineage), `table` one table's columns, indexes and foreign keys, `access` telling
//! a missing object from a hidden one, `seal` the pure decision that turns table facts
//! into a sealed schema or the list of problems.
mod access;
mod seal;
mod server;
mod table;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

pub use access::{
    account_of, current_account, denied_or, is_empty, probe_select, Denied, SelectProbe,
};
pub use seal::{column_def, normalize_column_type, seal, supported_list, SealProblem};
pub use server::{
    read_binlog_status, read_install_lineage, read_server_facts, server_facts_sql, BinlogStatus,
    InstallLineage, ServerFacts, SERVER_VARIABLES,
};
pub use table::{
    read_parent_keys, read_table, read_table_with, ForeignKey, IndexDef, ParentKeys, RawColumn,
    TableFacts,
};

use crate::error::{DefiniteCode, Error};

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

/// The definite error for a required fact the server did not give.
pub fn missing_fact(what: &str) -> Error {
    Error::definite(DefiniteCode::Precondition, what.to_string())
}
