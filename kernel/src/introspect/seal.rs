//! The pure seal decision: table facts in, a sealed schema or every problem (each naming
//! the object and the fix) out. No I/O, unit-tested without a server.

use super::{RawColumn, TableFacts};
use crate::schema::{quote_ident, ColumnDef, ColumnKind, SealedSchema};
use std::fmt;

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
