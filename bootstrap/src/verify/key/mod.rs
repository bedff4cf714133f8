//! The key verify merges by (DESIGN §14): every key column in index order, each read by
//! both servers in the same SELECT as the row hash, and a sort key per row whose memcmp
//! order and equality are the server's.
//!
//! * CHAR/VARCHAR: the server's own `WEIGHT_STRING(col AS CHAR(n))` (n the declared
//!   length, so PAD SPACE holds: notes/mariadb.md), computed by each side for its own rows.
//!   `'ab'` and `'AB'` under a `_ci` collation have one weight: one key, and the key
//!   column's field hash then names the case difference.
//! * Integers: the server's decimal text, encoded by [`kernel::key::encode`] (sign bit
//!   flipped, big-endian; BIGINT UNSIGNED up to 2^64-1).
//! * BINARY/VARBINARY: the bytes the server reads (BINARY(n) padded), ordered as bytes.
//! * DATE, DATETIME(n), TIMESTAMP(n) (session zone UTC) and YEAR: the server's text, of a
//!   fixed width per column, so its byte order is the time order.
//! * DECIMAL(p, s) and TIME(n): a fixed-width text of digits the server computes in exact
//!   decimal arithmetic (negative values shifted by 10^(p-s), after a leading `0`; TIME as
//!   its number `HHMMSS.f`), checked for its width when read.
//!
//! Each column but the last is framed by [`kernel::key::frame`] (the last needs no end),
//! so tuple order is lexicographic. No
//! collation or type order is re-implemented here, and a sort key that disagreed with the
//! server's `ORDER BY` would be caught: the merge refuses a chunk whose sort keys are not
//! strictly increasing.
//! * ENUM and SET: the server's `HEX(col + 0)` (index, bit value: how `ORDER BY` sorts
//!   them), 16 digits; seeks compare with that number, never with the text.
use super::column::Column;
use kernel::error::{DefiniteCode, Error, Result};
use kernel::key::{encode, join, show_values, SortKey};
use kernel::schema::quote_ident;
use kernel::value::SqlValue;
use kind::{kind_of, literal, number};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One row's key as its side read it: the values in key order and their sort key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Key {
    pub values: Vec<SqlValue>,
    pub sort: SortKey,
}

// Key values are never floats (a FLOAT key is refused), so equality is an equivalence.
impl Eq for Key {}

impl Key {
    /// The key of a single signed integer column (every key a `VCUR` v1 cursor held).
    pub fn of_i64(v: i64) -> Key {
        Key {
            values: vec![SqlValue::Int(v)],
            sort: SortKey::of_i64(v),
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&show_values(&self.values))
    }
}

/// How one key column is read, ordered and written back into a predicate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Signed,
    Unsigned,
    /// CHAR/VARCHAR of `len` characters under `collation` (of `charset`).
    Chars {
        len: u64,
        charset: String,
        collation: String,
    },
    Binary,
    /// DATE, DATETIME(n), TIMESTAMP(n), YEAR: fixed-width text; `cast` is the type a
    /// literal is cast to.
    Text {
        cast: String,
    },
    /// DECIMAL(p, s), and TIME(n) as its number `HHMMSS.f` (`time`): ordered by the
    /// server's own fixed-width text of the value, shifted by 10^`int_digits` when
    /// negative so that every text is of non-negative digits (`shifted_expr`).
    Shifted {
        int_digits: u32,
        scale: u32,
        time: bool,
        cast: String,
    },
    /// ENUM (by index) and SET (by bit value): `ORDER BY` sorts them by that number and a
    /// comparison with a number compares it, while a comparison with text compares text.
    /// Ordered by the server's `HEX(col + 0)`, 16 digits; seeks write the number, from
    /// the value's member names and the column's `members` (definition order).
    Members {
        members: Vec<Vec<u8>>,
        set: bool,
    },
}

impl KeyKind {
    /// The SELECT expression of the column's server-side sort text, if it has one.
    fn sort_expr(&self, q: &str) -> Option<String> {
        match self {
            KeyKind::Members { .. } => Some(format!("LPAD(HEX({q} + 0), 16, '0')")),
            KeyKind::Chars { len, .. } => Some(format!("WEIGHT_STRING({q} AS CHAR({len}))")),
            KeyKind::Shifted {
                int_digits,
                scale,
                time,
                ..
            } => Some(shifted_expr(q, *int_digits, *scale, *time)),
            _ => None,
        }
    }
}

/// Width of the unsigned text of a number of `int_digits` integer and `scale` fraction
/// digits (at least one integer digit: `0.5`).
fn shifted_width(int_digits: u32, scale: u32) -> u32 {
    int_digits.max(1) + if scale > 0 { scale + 1 } else { 0 }
}

/// `'1'` + the value's text, or `'0'` + the text of value + 10^int_digits when negative,
/// left-padded with zeros to one width: memcmp order is numeric order, computed by the
/// server in exact decimal arithmetic. The reader checks the width it gets.
fn shifted_expr(q: &str, int_digits: u32, scale: u32, time: bool) -> String {
    let v = if time {
        format!("({q} + 0)")
    } else {
        q.to_string()
    };
    let w = shifted_width(int_digits, scale);
    let shift = format!("1{}", "0".repeat(int_digits as usize));
    format!(
        "IF({v} < 0, CONCAT('0', LPAD(CAST({v} + {shift} AS CHAR), {w}, '0')), \
         CONCAT('1', LPAD(CAST({v} AS CHAR), {w}, '0')))"
    )
}

/// One key column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyCol {
    pub name: String,
    pub kind: KeyKind,
}

/// The key columns of one side, in index order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyCols(pub Vec<KeyCol>);

impl KeyCols {
    /// The key `names` (index order) of a table with `columns`, or why verify cannot
    /// merge by it.
    pub fn of(table: &str, columns: &[Column], names: &[&str]) -> Result<KeyCols> {
        let usage = |why: String| Error::definite(DefiniteCode::Usage, format!("{table}: {why}"));
        if columns.is_empty() {
            return Err(Error::definite(
                DefiniteCode::Usage,
                format!("{table} does not exist or its columns are not visible to this user"),
            ));
        }
        if names.is_empty() {
            return Err(usage("no key columns given".into()));
        }
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let Some(c) = columns.iter().find(|c| c.name.eq_ignore_ascii_case(n)) else {
                return Err(usage(format!("no column `{n}` to use as a key column")));
            };
            let kind = kind_of(c).map_err(|why| {
                usage(format!(
                    "key column `{}` ({}): {why}",
                    c.name, c.column_type
                ))
            })?;
            out.push(KeyCol {
                name: c.name.clone(),
                kind,
            });
        }
        Ok(KeyCols(out))
    }

    /// The column names, quoted, in key order.
    pub fn quoted(&self) -> Vec<String> {
        self.0.iter().map(|c| quote_ident(&c.name)).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|c| c.name.clone()).collect()
    }

    /// The SELECT expressions of the key: per column its bytes, and for a character,
    /// decimal or time column then its server-side sort text. [`KeyCols::read`] parses them in this order.
    pub fn select_exprs(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.0 {
            let q = quote_ident(&c.name);
            out.push(format!("CAST({q} AS BINARY)"));
            out.extend(c.kind.sort_expr(&q));
        }
        out
    }

    /// How many values [`KeyCols::select_exprs`] yields.
    pub fn width(&self) -> usize {
        self.0
            .iter()
            .map(|c| 1 + usize::from(c.kind.sort_expr("").is_some()))
            .sum()
    }

    /// Reads the key from the first [`KeyCols::width`] values of a text row.
    pub fn read(&self, row: &[Option<Vec<u8>>]) -> std::result::Result<Key, String> {
        if row.len() < self.width() {
            return Err(format!(
                "{} values for a key of {}",
                row.len(),
                self.width()
            ));
        }
        let mut values = Vec::with_capacity(self.0.len());
        let mut sort = Vec::with_capacity(16 * self.0.len());
        let mut cells = row.iter();
        let mut col = Vec::with_capacity(16);
        let last = self.0.len().saturating_sub(1);
        for (ci, c) in self.0.iter().enumerate() {
            let mut next = || {
                cells
                    .next()
                    .and_then(Option::as_ref)
                    .ok_or_else(|| format!("key column `{}` is NULL", c.name))
            };
            let bytes = next()?;
            col.clear();
            let value = match &c.kind {
                KeyKind::Signed => {
                    let v: i64 = number(bytes)?;
                    encode::signed(v, &mut col);
                    SqlValue::Int(v)
                }
                KeyKind::Unsigned => {
                    let v: u64 = number(bytes)?;
                    encode::unsigned(v, &mut col);
                    SqlValue::UInt(v)
                }
                KeyKind::Chars { .. } => {
                    col.extend_from_slice(next()?);
                    SqlValue::Bytes(bytes.clone())
                }
                KeyKind::Text { cast } if cast == "year" => {
                    // Ordered by its 4-digit text, shown and written back as a number.
                    col.extend_from_slice(bytes);
                    SqlValue::UInt(number(bytes)?)
                }
                KeyKind::Shifted {
                    int_digits, scale, ..
                } => {
                    let text = next()?;
                    let w = shifted_width(*int_digits, *scale) as usize + 1;
                    if text.len() != w || !text.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
                        return Err(format!(
                            "key column `{}`: sort text {:?} is not {w} digits",
                            c.name,
                            String::from_utf8_lossy(text)
                        ));
                    }
                    col.extend_from_slice(text);
                    SqlValue::Bytes(bytes.clone())
                }
                KeyKind::Members { .. } => {
                    let text = next()?;
                    if text.len() != 16 || !text.iter().all(u8::is_ascii_hexdigit) {
                        return Err(format!(
                            "key column `{}`: sort text {:?} is not 16 hex digits",
                            c.name,
                            String::from_utf8_lossy(text)
                        ));
                    }
                    col.extend_from_slice(text);
                    SqlValue::Bytes(bytes.clone())
                }
                KeyKind::Binary | KeyKind::Text { .. } => {
                    col.extend_from_slice(bytes);
                    SqlValue::Bytes(bytes.clone())
                }
            };
            // Every column but the last is framed (fixed-width ones too: this walk's keys
            // order only among themselves).
            join(&col, ci < last, &mut sort);
            values.push(value);
        }
        Ok(Key {
            values,
            sort: SortKey(sort),
        })
    }

    /// The sort key of stored values when every column is encoded here (no weights): a
    /// cursor decoded from v1 or written for another integer signedness is re-keyed so
    /// that it orders with this walk's rows. `None`: keep the stored sort key.
    pub fn resort(&self, values: &[SqlValue]) -> Option<SortKey> {
        if values.len() != self.0.len() {
            return None;
        }
        let mut sort = Vec::new();
        let mut col = Vec::new();
        let last = self.0.len().saturating_sub(1);
        for (ci, (c, v)) in self.0.iter().zip(values).enumerate() {
            col.clear();
            let enc = match c.kind {
                KeyKind::Signed => kernel::key::Encoding::Signed,
                KeyKind::Unsigned => kernel::key::Encoding::Unsigned,
                _ => return None,
            };
            encode::encode(&enc, v, &mut col).ok()?;
            join(&col, ci < last, &mut sort);
        }
        Some(SortKey(sort))
    }

    /// A typed SQL literal of each key value, for a text-protocol predicate.
    pub fn literals(&self, key: &Key) -> std::result::Result<Vec<String>, String> {
        if key.values.len() != self.0.len() {
            return Err(format!(
                "a key of {} values for {} key columns",
                key.values.len(),
                self.0.len()
            ));
        }
        self.0
            .iter()
            .zip(&key.values)
            .map(|(c, v)| literal(c, v))
            .collect()
    }

    /// `WHERE key > last` (range seek), or nothing before the first chunk.
    pub fn after(&self, last: Option<&Key>) -> std::result::Result<String, String> {
        let Some(last) = last else {
            return Ok(String::new());
        };
        let lits = self.literals(last)?;
        Ok(format!(
            " WHERE {}",
            kernel::key::sql::after_inline(&self.quoted(), &lits)
        ))
    }

    /// `WHERE last < key <= bound` (each end a range seek; an absent end is open).
    pub fn between(
        &self,
        last: Option<&Key>,
        bound: Option<&Key>,
    ) -> std::result::Result<String, String> {
        let cols = self.quoted();
        let mut preds = Vec::new();
        if let Some(last) = last {
            preds.push(kernel::key::sql::after_inline(&cols, &self.literals(last)?));
        }
        if let Some(bound) = bound {
            preds.push(kernel::key::sql::upto_inline(&cols, &self.literals(bound)?));
        }
        Ok(match preds.is_empty() {
            true => String::new(),
            false => format!(" WHERE ({})", preds.join(") AND (")),
        })
    }

    /// `WHERE key IN (...)` for the given keys.
    pub fn any_of(&self, keys: &[Key]) -> std::result::Result<String, String> {
        let mut tuples = Vec::with_capacity(keys.len());
        for k in keys {
            let lits = self.literals(k)?;
            tuples.push(match lits.len() {
                1 => lits.join(""),
                _ => format!("({})", lits.join(", ")),
            });
        }
        let cols = self.quoted();
        let lhs = match cols.len() {
            1 => cols.join(""),
            _ => format!("({})", cols.join(", ")),
        };
        Ok(format!(" WHERE {lhs} IN ({})", tuples.join(", ")))
    }
}

mod kind;
#[cfg(test)]
mod tests;
