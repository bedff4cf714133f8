//! Which DDL of a captured table the target can take in binlog order (DESIGN §16, issue
//! 16 item 1). Pure: statement text and sealed definitions in, a decision out.
//!
//! # Why a "compatible" answer is safe to act on
//!
//! A DDL is compatible when the target can run the same change at the same point of
//! binlog order and every later row image still decodes and applies exactly. Two
//! independent halves must both agree before anything is applied:
//!
//! 1. [`classify`] reads the statement itself. It knows a closed list of clauses (ADD
//!    COLUMN with a constant default or none, MODIFY/CHANGE, RENAME COLUMN, DROP COLUMN
//!    of a non-key column, ADD/DROP/RENAME of a non-unique index, ALTER COLUMN SET/DROP
//!    DEFAULT, COMMENT and table options that change no data or definition, DROP FOREIGN
//!    KEY). Anything else, and anything it does not understand, is [`Classified::
//!    Incompatible`] with the clause and the reason: a pause, never a guess. A default
//!    the target cannot reproduce (CURRENT_TIMESTAMP, an expression, AUTO_INCREMENT, a
//!    TIMESTAMP column without an explicit default, which the server may give
//!    CURRENT_TIMESTAMP) fills existing rows with values no row event carries: refused.
//! 2. [`check_after`] compares the definitions before and after the DDL as the server
//!    rendered them (the live definition, checked against the binlog's table maps that
//!    follow the DDL): the columns are exactly the ones the clauses name, every column
//!    the DDL does not name is unchanged, a modified one is only widened (longer
//!    VARCHAR/VARBINARY, a larger integer of the same signedness, a DECIMAL with at least
//!    as many integer and fraction digits, NOT NULL to NULL), the key is the same index
//!    over the same columns with the same types. The text alone could be misread (an
//!    executable comment, a server default); the rendered definitions alone cannot say
//!    whether a default was constant. Together they decide.
//!
//! Layout: `parse` splits the statement into clauses and classifies each, `after` is
//! the definition check, `target` the statement the target runs.
mod after;
mod parse;
mod target;
#[cfg(test)]
mod tests;

pub use after::check_after;
pub use parse::{classify, refresh_refusal};
pub use target::target_statement;

/// One change a compatible DDL makes to the table's definition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alteration {
    /// ADD COLUMN `name` (any position) with a constant default or none.
    AddColumn { name: String },
    /// MODIFY `name` (a new definition, same name): must be a widening or no change.
    ModifyColumn { name: String },
    /// CHANGE `from` `to` (a rename and a new definition).
    ChangeColumn { from: String, to: String },
    /// RENAME COLUMN `from` TO `to`.
    RenameColumn { from: String, to: String },
    /// DROP COLUMN `name` (not a key column).
    DropColumn { name: String },
    /// ALTER COLUMN `name` SET DEFAULT / DROP DEFAULT: later inserts are logged with
    /// every value, so existing and future rows are unaffected in the target.
    AlterDefault { name: String },
    /// ADD INDEX/KEY/FULLTEXT/SPATIAL (not UNIQUE, not PRIMARY).
    AddIndex { name: Option<String> },
    /// DROP INDEX `name` (not the table's key index).
    DropIndex { name: String },
    /// RENAME INDEX `from` TO `to` (not the table's key index).
    RenameIndex { from: String, to: String },
    /// COMMENT, ENGINE, ROW_FORMAT, AUTO_INCREMENT=, FORCE, ALGORITHM/LOCK, ENABLE KEYS,
    /// DROP FOREIGN KEY, a trigger: no row's value and no fingerprinted part of the
    /// definition changes.
    NoDataChange { clause: String },
}

/// Why a DDL is not compatible: the clause (as words of the statement) and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incompatible {
    pub clause: String,
    pub why: String,
}

impl std::fmt::Display for Incompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: {}", self.clause, self.why)
    }
}

/// The decision about one statement for one table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classified {
    /// Every clause is compatible.
    Compatible(Vec<Alteration>),
    /// At least one clause is not (the first one found).
    Incompatible(Incompatible),
}

impl Classified {
    /// A short description for pause messages and status.
    pub fn describe(&self) -> String {
        match self {
            Classified::Compatible(a) => {
                let parts: Vec<String> = a.iter().map(Alteration::describe).collect();
                format!("compatible ({})", parts.join(", "))
            }
            Classified::Incompatible(i) => format!("not compatible: {i}"),
        }
    }
}

impl Alteration {
    /// The clause in a few words.
    pub fn describe(&self) -> String {
        match self {
            Alteration::AddColumn { name } => format!("ADD COLUMN `{name}`"),
            Alteration::ModifyColumn { name } => format!("MODIFY `{name}`"),
            Alteration::ChangeColumn { from, to } => format!("CHANGE `{from}` `{to}`"),
            Alteration::RenameColumn { from, to } => format!("RENAME COLUMN `{from}` TO `{to}`"),
            Alteration::DropColumn { name } => format!("DROP COLUMN `{name}`"),
            Alteration::AlterDefault { name } => format!("ALTER COLUMN `{name}` DEFAULT"),
            Alteration::AddIndex { name } => match name {
                Some(n) => format!("ADD INDEX `{n}`"),
                None => "ADD INDEX".into(),
            },
            Alteration::DropIndex { name } => format!("DROP INDEX `{name}`"),
            Alteration::RenameIndex { from, to } => format!("RENAME INDEX `{from}` TO `{to}`"),
            Alteration::NoDataChange { clause } => clause.clone(),
        }
    }
}
