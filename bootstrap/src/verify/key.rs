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

fn number<T: std::str::FromStr>(b: &[u8]) -> std::result::Result<T, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an integer: {}", String::from_utf8_lossy(b)))
}

/// The kind of a key column, or why verify cannot merge by it yet.
fn kind_of(c: &Column) -> std::result::Result<KeyKind, String> {
    let unsigned = c.column_type.contains("unsigned");
    Ok(match c.data_type.as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" if unsigned => KeyKind::Unsigned,
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" => KeyKind::Signed,
        "char" | "varchar" => {
            let collation = c
                .collation
                .clone()
                .ok_or("a character column without a collation")?;
            let charset = collation
                .split('_')
                .next()
                .filter(|s| !s.is_empty())
                .ok_or("a collation without a charset")?
                .to_string();
            let ident = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident(&collation) {
                return Err(format!("unexpected collation {collation:?}"));
            }
            KeyKind::Chars {
                len: declared_len(&c.column_type).ok_or("a character column without a length")?,
                charset,
                collation,
            }
        }
        "binary" | "varbinary" => KeyKind::Binary,
        "enum" | "set" => KeyKind::Members {
            members: encode::members(&c.column_type, &c.data_type)?,
            set: c.data_type == "set",
        },
        "date" | "year" => KeyKind::Text {
            cast: c.data_type.clone(),
        },
        "decimal" => {
            let (p, s) = decimal_digits(&c.column_type).ok_or("a DECIMAL without (p,s)")?;
            KeyKind::Shifted {
                int_digits: p - s,
                scale: s,
                time: false,
                cast: format!("decimal({p},{s})"),
            }
        }
        "time" => {
            let n = declared_len(&c.column_type).unwrap_or(0) as u32;
            KeyKind::Shifted {
                int_digits: 7,
                scale: n,
                time: true,
                cast: format!("time({n})"),
            }
        }
        "datetime" | "timestamp" => KeyKind::Text {
            cast: format!("datetime({})", declared_len(&c.column_type).unwrap_or(0)),
        },
        other => {
            return Err(format!(
                "verify cannot merge by a {other} key column yet (it merges by integer, \
                 decimal, character, binary, temporal, ENUM and SET key columns)"
            ))
        }
    })
}

/// The index of an ENUM value or the bit value of a SET value, from its member names.
fn member_number(
    column: &str,
    members: &[Vec<u8>],
    set: bool,
    value: &[u8],
) -> std::result::Result<String, String> {
    let index = |name: &[u8]| {
        members
            .iter()
            .position(|m| m.as_slice() == name)
            .ok_or_else(|| {
                format!(
                    "key column `{column}`: {:?} is not one of its members",
                    String::from_utf8_lossy(name)
                )
            })
    };
    if !set {
        return Ok((index(value)? + 1).to_string());
    }
    let mut bits = 0u64;
    for name in value.split(|b| *b == b',').filter(|n| !n.is_empty()) {
        bits |= 1u64 << index(name)?;
    }
    Ok(bits.to_string())
}

/// (p, s) of `decimal(p,s)`.
fn decimal_digits(column_type: &str) -> Option<(u32, u32)> {
    let open = column_type.find('(')?;
    let close = column_type[open..].find(')')? + open;
    let (p, s) = column_type[open + 1..close].split_once(',')?;
    let (p, s): (u32, u32) = (p.trim().parse().ok()?, s.trim().parse().ok()?);
    (s <= p).then_some((p, s))
}

/// `n` of `varchar(n)`, `char(n)`, `datetime(n)`.
fn declared_len(column_type: &str) -> Option<u64> {
    let open = column_type.find('(')?;
    let close = column_type[open..].find(')')? + open;
    column_type[open + 1..close].trim().parse().ok()
}

fn literal(c: &KeyCol, v: &SqlValue) -> std::result::Result<String, String> {
    let bytes = |v: &SqlValue| match v {
        SqlValue::Bytes(b) => Ok(b.clone()),
        SqlValue::Int(i) => Ok(i.to_string().into_bytes()),
        SqlValue::UInt(u) => Ok(u.to_string().into_bytes()),
        other => Err(format!(
            "key column `{}`: unexpected value {other:?}",
            c.name
        )),
    };
    Ok(match &c.kind {
        KeyKind::Signed | KeyKind::Unsigned => match v {
            SqlValue::Int(i) => i.to_string(),
            SqlValue::UInt(u) => u.to_string(),
            other => {
                let b = bytes(other)?;
                let s = std::str::from_utf8(&b).unwrap_or_default();
                s.parse::<i128>()
                    .map_err(|_| format!("key column `{}`: not an integer: {s:?}", c.name))?
                    .to_string()
            }
        },
        KeyKind::Chars {
            charset, collation, ..
        } => format!(
            "CONVERT(X'{}' USING {charset}) COLLATE {collation}",
            hex::encode(bytes(v)?)
        ),
        KeyKind::Binary => format!("X'{}'", hex::encode(bytes(v)?)),
        KeyKind::Text { cast } if cast == "year" => {
            let b = bytes(v)?;
            if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
                return Err(format!("key column `{}`: not a year: {b:?}", c.name));
            }
            String::from_utf8_lossy(&b).into_owned()
        }
        KeyKind::Text { cast } => format!("CAST(X'{}' AS {cast})", hex::encode(bytes(v)?)),
        KeyKind::Members { members, set } => member_number(&c.name, members, *set, &bytes(v)?)?,
        KeyKind::Shifted { cast, .. } => {
            // Quoted text, not X'..': a hex literal is a number in a numeric CAST.
            let b = bytes(v)?;
            let number = |b: &u8| b.is_ascii_digit() || matches!(b, b'-' | b'.' | b':');
            if b.is_empty() || !b.iter().all(number) {
                return Err(format!(
                    "key column `{}`: not a number or time: {b:?}",
                    c.name
                ));
            }
            format!("CAST('{}' AS {cast})", String::from_utf8_lossy(&b))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, data_type: &str, column_type: &str, coll: Option<&str>) -> Column {
        Column::new(
            name.into(),
            data_type,
            column_type,
            false,
            coll.map(str::to_string),
        )
    }

    fn b(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    fn lower_ab() -> Vec<SqlValue> {
        vec![SqlValue::Int(5), SqlValue::Bytes(b"ab".to_vec())]
    }

    fn table() -> Vec<Column> {
        vec![
            col("a", "int", "int(11)", None),
            col("s", "varchar", "varchar(20)", Some("utf8mb4_general_ci")),
            col("u", "bigint", "bigint(20) unsigned", None),
            col("t", "datetime", "datetime(6)", None),
            col("d", "decimal", "decimal(5,2)", None),
            col("e", "enum", "enum('a','b')", Some("utf8mb4_general_ci")),
            col("f", "float", "float", None),
            col("st", "set", "set('x','y','z')", Some("utf8mb4_general_ci")),
        ]
    }

    #[test]
    fn key_columns_are_found_and_typed_or_refused_by_name() {
        let k = KeyCols::of("t", &table(), &["A", "s", "u", "t"]).expect("supported");
        assert_eq!(k.names(), ["a", "s", "u", "t"]);
        assert_eq!(
            k.0[1].kind,
            KeyKind::Chars {
                len: 20,
                charset: "utf8mb4".into(),
                collation: "utf8mb4_general_ci".into()
            }
        );
        assert_eq!(k.width(), 5);
        assert_eq!(
            k.select_exprs()[..3],
            [
                "CAST(`a` AS BINARY)",
                "CAST(`s` AS BINARY)",
                "WEIGHT_STRING(`s` AS CHAR(20))"
            ]
        );
        for bad in [&["f"][..], &["nope"], &[]] {
            let e = KeyCols::of("t", &table(), bad).expect_err("refused");
            assert_eq!(e.as_definite().map(|d| d.code), Some(DefiniteCode::Usage));
        }
        assert!(KeyCols::of("t", &[], &["a"]).is_err());
    }

    #[test]
    fn keys_equal_by_weight_are_one_key_whatever_their_bytes() {
        let k = KeyCols::of("t", &table(), &["a", "s"]).expect("supported");
        let w = "\u{0}A\u{0}B";
        let lower = k.read(&[b("5"), b("ab"), b(w)]).expect("key");
        let upper = k.read(&[b("5"), b("AB"), b(w)]).expect("key");
        assert_eq!(lower.sort, upper.sort);
        assert_ne!(lower.values, upper.values);
        assert_eq!(lower.to_string(), "(5, 'ab')");
        let next = k.read(&[b("5"), b("ab"), b("\u{0}A\u{0}C")]).expect("key");
        assert!(lower.sort < next.sort);
        let six = k.read(&[b("6"), b(""), b("")]).expect("key");
        assert!(next.sort < six.sort, "tuple order is lexicographic");
        assert!(k.read(&[b("5"), None, b(w)]).is_err());
        assert!(k.read(&[b("x"), b("a"), b(w)]).is_err());
    }

    #[test]
    fn unsigned_keys_above_2_63_order_as_unsigned() {
        let k = KeyCols::of("t", &table(), &["u"]).expect("supported");
        let big = k.read(&[b("18446744073709551615")]).expect("key");
        let small = k.read(&[b("1")]).expect("key");
        assert!(small.sort < big.sort);
        assert_eq!(big.values, [SqlValue::UInt(u64::MAX)]);
        assert_eq!(k.resort(&big.values), Some(big.sort.clone()));
        // A v1 cursor's key (a signed sort key) is re-keyed to order with unsigned rows.
        let v1 = Key::of_i64(1);
        assert_ne!(v1.sort, small.sort);
        assert_eq!(k.resort(&v1.values), Some(small.sort.clone()));
        let chars = KeyCols::of("t", &table(), &["a", "s"]).expect("supported");
        assert_eq!(
            chars.resort(&lower_ab()),
            None,
            "weights are the server's: kept"
        );
        assert_eq!(
            k.after(Some(&big)).expect("sql"),
            " WHERE `u` > 18446744073709551615"
        );
    }

    #[test]
    fn predicates_are_typed_literals() {
        let k = KeyCols::of("t", &table(), &["a", "s", "t"]).expect("supported");
        let key = Key {
            values: vec![
                SqlValue::Int(-5),
                SqlValue::Bytes(b"a'b".to_vec()),
                SqlValue::Bytes(b"2024-01-02 00:00:00.000000".to_vec()),
            ],
            sort: SortKey::default(),
        };
        let lits = k.literals(&key).expect("literals");
        assert_eq!(lits[0], "-5");
        assert_eq!(
            lits[1],
            "CONVERT(X'612762' USING utf8mb4) COLLATE utf8mb4_general_ci"
        );
        assert!(lits[2].starts_with("CAST(X'323032342d") && lits[2].ends_with("AS datetime(6))"));
        let sql = k.after(Some(&key)).expect("sql");
        assert!(
            sql.starts_with(" WHERE `a` >= -5 AND (`a` > -5 OR (`s` >= CONVERT("),
            "{sql}"
        );
        assert_eq!(k.after(None).expect("sql"), "");
        let one = KeyCols::of("t", &table(), &["a"]).expect("supported");
        let keys = [Key::of_i64(1), Key::of_i64(2)];
        assert_eq!(one.any_of(&keys).expect("sql"), " WHERE `a` IN (1, 2)");
        assert!(k.any_of(&keys).is_err(), "a key of the wrong width");
    }

    #[test]
    fn decimals_and_times_order_by_their_shifted_server_text() {
        let cols = [
            col("d", "decimal", "decimal(5,2)", None),
            col("t", "time", "time(3)", None),
        ];
        let k = KeyCols::of("t", &cols, &["d", "t"]).expect("supported");
        assert_eq!(k.width(), 4);
        assert_eq!(
            k.select_exprs()[1],
            "IF(`d` < 0, CONCAT('0', LPAD(CAST(`d` + 1000 AS CHAR), 6, '0')), \
             CONCAT('1', LPAD(CAST(`d` AS CHAR), 6, '0')))"
        );
        assert!(k.select_exprs()[3].contains("CAST((`t` + 0) + 10000000 AS CHAR), 11"));
        // -1.50 + 1000 = 998.50; 2.25; the server computes these, the reader checks widths.
        let neg = k
            .read(&[
                b("-1.50"),
                b("0998.50"),
                b("-01:00:00.000"),
                b("09900000.000"),
            ])
            .expect("key");
        let pos = k
            .read(&[
                b("2.25"),
                b("1002.25"),
                b("00:00:00.000"),
                b("10000000.000"),
            ])
            .expect("key");
        assert!(neg.sort < pos.sort);
        assert!(k
            .read(&[b("2.25"), b("12.25"), b("0"), b("10000000.000")])
            .is_err());
        let sql = k.after(Some(&neg)).expect("sql");
        assert!(
            sql.starts_with(" WHERE `d` >= CAST('-1.50' AS decimal(5,2)) AND"),
            "{sql}"
        );
        assert!(
            sql.ends_with("`t` > CAST('-01:00:00.000' AS time(3))))"),
            "{sql}"
        );
    }

    #[test]
    fn enums_and_sets_seek_by_their_numbers() {
        let k = KeyCols::of("t", &table(), &["e", "st"]).expect("supported");
        assert_eq!(k.select_exprs()[1], "LPAD(HEX(`e` + 0), 16, '0')");
        let key = k
            .read(&[
                b("b"),
                b("0000000000000002"),
                b("x,z"),
                b("0000000000000005"),
            ])
            .expect("key");
        assert_eq!(key.to_string(), "('b', 'x,z')");
        assert_eq!(
            k.after(Some(&key)).expect("sql"),
            " WHERE `e` >= 2 AND (`e` > 2 OR (`st` > 5))"
        );
        let empty = k
            .read(&[b("a"), b("0000000000000001"), b(""), b("0000000000000000")])
            .expect("key");
        assert!(empty.sort < key.sort);
        assert_eq!(k.literals(&empty).expect("literals"), ["1", "0"]);
        let odd = Key {
            values: vec![SqlValue::Bytes(b"c".to_vec()), SqlValue::Bytes(Vec::new())],
            sort: SortKey::default(),
        };
        assert!(k.literals(&odd).is_err(), "not a member");
        assert!(k.read(&[b("b"), b("2"), b(""), b("0")]).is_err());
    }

    #[test]
    fn years_order_as_text_and_are_written_back_as_numbers() {
        let cols = [col("y", "year", "year(4)", None)];
        let k = KeyCols::of("t", &cols, &["y"]).expect("supported");
        let y = k.read(&[b("2155")]).expect("key");
        assert_eq!(y.values, [SqlValue::UInt(2155)]);
        assert!(k.read(&[b("1901")]).expect("key").sort < y.sort);
        assert_eq!(k.after(Some(&y)).expect("sql"), " WHERE `y` > 2155");
        assert_eq!(y.to_string(), "2155");
    }

    #[test]
    fn a_v1_key_is_one_signed_integer() {
        let k = KeyCols::of("t", &table(), &["a"]).expect("supported");
        let v1 = Key::of_i64(-3);
        assert_eq!(k.read(&[b("-3")]).expect("key"), v1);
        assert_eq!(v1.to_string(), "-3");
    }
}
