//! The pure seal decision: table facts in, a sealed schema or every problem (each naming
//! the object and the fix) out. No I/O, unit-tested without a server.

use super::{RawColumn, TableFacts};
use crate::schema::{quote_ident, ColumnDef, ColumnKind, Generated, SealedSchema};
use std::fmt;

/// Why a table cannot be sealed. Each names the object and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SealProblem {
    /// Neither a PRIMARY KEY nor a UNIQUE key over NOT NULL columns.
    NoKey,
    /// A key part is a prefix of its column (`c(10)`).
    KeyPrefix {
        index: String,
        column: String,
        length: u64,
    },
    /// A key part is not a column (MySQL functional key part).
    KeyUnknownColumn {
        index: String,
        part: String,
    },
    /// A key column's type cannot be ordered as a key.
    KeyColumnType {
        index: String,
        column: String,
        why: String,
    },
    UnsupportedType {
        column: String,
        column_type: String,
    },
    /// A generated column whose expression `information_schema` does not show.
    GeneratedWithoutExpression {
        column: String,
        extra: String,
    },
}

impl fmt::Display for SealProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealProblem::NoKey => write!(
                f,
                "has no primary key and no UNIQUE key over NOT NULL columns, so its rows \
                 cannot be told apart; fix: add a primary key (e.g. `ALTER TABLE ... ADD \
                 COLUMN id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY`)"
            ),
            SealProblem::KeyPrefix {
                index,
                column,
                length,
            } => write!(
                f,
                "key {} covers only the first {length} characters of {} (a prefix part), so \
                 two rows may share a key value; fix: key the table by whole columns (a \
                 primary key without prefix parts)",
                quote_ident(index),
                quote_ident(column)
            ),
            SealProblem::KeyUnknownColumn { index, part } => write!(
                f,
                "key {} has the part {part}, which is not a column; fix: key the table by \
                 plain columns",
                quote_ident(index)
            ),
            SealProblem::KeyColumnType { index, column, why } => write!(
                f,
                "key {} column {}: {why}",
                quote_ident(index),
                quote_ident(column)
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
            SealProblem::GeneratedWithoutExpression { column, extra } => write!(
                f,
                "column {} is a generated column ({extra}) whose GENERATION_EXPRESSION \
                 information_schema does not show, so the target's cannot be checked to \
                 compute the same; fix: grant SELECT on the table to the install account",
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
/// Lower-cases the type's words but not its quoted text: ENUM and SET members are data
/// (`enum('small','MEDIUM')`: a key's ENUM index is found by the member's exact name).
pub fn normalize_column_type(kind: ColumnKind, column_type: &str) -> String {
    let mut quoted = false;
    let t: String = column_type
        .chars()
        .map(|c| {
            if c == '\'' {
                quoted = !quoted;
            }
            if quoted {
                c
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
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
        generated: generated(c),
    })
}

/// The generated part of a column (its expression as the server prints it).
fn generated(c: &RawColumn) -> Option<Generated> {
    c.is_generated().then(|| Generated {
        stored: c.is_stored(),
        expression: c.generation.clone().unwrap_or_default(),
    })
}

/// Seals a table definition, or lists every reason it cannot be sealed (pure).
pub fn seal(t: &TableFacts) -> std::result::Result<SealedSchema, Vec<SealProblem>> {
    let mut problems = Vec::new();
    let mut columns = Vec::with_capacity(t.columns.len());
    for c in &t.columns {
        if c.is_generated() && c.generation.as_deref().unwrap_or("").is_empty() {
            problems.push(SealProblem::GeneratedWithoutExpression {
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
    let key = choose_key(t, &columns, &mut problems);
    match key {
        Some((key, key_name)) if problems.is_empty() => Ok(SealedSchema {
            database: t.database.clone(),
            table: t.table.clone(),
            columns,
            key,
            key_name,
        }),
        _ => Err(problems),
    }
}

/// The key (DESIGN §14): the PRIMARY KEY, else the first UNIQUE key whose columns are all
/// NOT NULL, in definition order. A prefix part, an expression part or a column type that
/// cannot be ordered refuses the table (never a fall-back to another index).
fn choose_key(
    t: &TableFacts,
    columns: &[ColumnDef],
    problems: &mut Vec<SealProblem>,
) -> Option<(Vec<usize>, String)> {
    let Some(ix) = t.key_index() else {
        problems.push(SealProblem::NoKey);
        return None;
    };
    let mut key = Vec::with_capacity(ix.columns.len());
    for (n, name) in ix.columns.iter().enumerate() {
        if let Some(Some(length)) = ix.sub_parts.get(n) {
            problems.push(SealProblem::KeyPrefix {
                index: ix.name.clone(),
                column: name.clone(),
                length: *length,
            });
            continue;
        }
        let Some(i) = t.columns.iter().position(|c| &c.name == name) else {
            problems.push(SealProblem::KeyUnknownColumn {
                index: ix.name.clone(),
                part: name.clone(),
            });
            continue;
        };
        // An unsupported column type is already a problem of its own.
        if let Some(Err(why)) = columns
            .iter()
            .find(|c| &c.name == name)
            .map(crate::key::encoding_of)
        {
            problems.push(SealProblem::KeyColumnType {
                index: ix.name.clone(),
                column: name.clone(),
                why,
            });
            continue;
        }
        key.push(i);
    }
    (key.len() == ix.columns.len()).then(|| (key, ix.name.clone()))
}
