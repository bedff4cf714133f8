//! Keys of a table as sort keys (DESIGN §14).
//!
//! Why this is safe: every decision that uses a key (a change's window, per-key net effect,
//! apply partitions, verify's merge) compares [`SortKey`]s, byte strings whose memcmp order
//! is the server's index order and whose equality is the server's key equality. Nothing
//! here re-implements a collation: for character strings the bytes are the source server's
//! own `WEIGHT_STRING(v AS CHAR(n))` ([`weigh`]), asked before use and cached in a
//! [`Keyer`]; a value whose weight was not asked is an error, never a guess. The other types
//! are encoded here ([`encode`]) with encodings pinned by golden bytes and checked against
//! a real server's `ORDER BY` and `=`.
//!
//! A composite key concatenates its columns' encodings ([`join`]). A column whose encoding
//! has one width for every value (integers, temporal types, YEAR, ENUM, SET, BINARY(n)),
//! and the last column, are appended as they are; any other column is framed by [`frame`]:
//! every 0x00 becomes 0x00 0xFF and the column ends with 0x00 0x01, which is
//! self-delimiting and order-preserving (a shorter value that is a prefix of a longer one
//! ends with 0x00 0x01 < 0x00 0xFF or any byte following a non-zero byte). Tuple order is
//! then lexicographic: at the first column whose bytes differ, a fixed-width column
//! decides within its width, a framed one within its frame, and the last column's bytes
//! are all that is left; equal tuples have equal bytes. Unframed columns keep a window's
//! sort keys about half the size (an integer's eight bytes are mostly 0x00, which framing
//! doubles).
use crate::schema::{ColumnDef, ColumnKind, SealedSchema};
use crate::value::{Row, SqlValue};
use serde::{Deserialize, Serialize};
use std::fmt;

mod cache;
pub mod encode;
pub mod sql;
pub mod weigh;

pub use cache::WeightCache;

/// A key value as a byte string whose memcmp order and equality are the server's.
///
/// Serialised through `serde_bytes`: a byte string in postcard is the same varint length
/// and raw bytes as a `Vec<u8>` (the golden fixtures of plans and manifests pin it), read
/// in one copy instead of byte by byte.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct SortKey(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl fmt::Debug for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SortKey({})", hex_of(&self.0))
    }
}

impl SortKey {
    /// The sort key of a single signed integer key column (an old `i64` bound, persisted
    /// before composite keys, decodes to this).
    pub fn of_i64(v: i64) -> SortKey {
        let mut out = Vec::with_capacity(8);
        encode::signed(v, &mut out);
        SortKey(out)
    }
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Appends one key column's encoding to a sort key: as it is when `framed` is false (a
/// fixed-width encoding, or the key's last column), else framed (see the module note).
pub fn join(col: &[u8], framed: bool, out: &mut Vec<u8>) {
    if framed {
        frame(col, out);
    } else {
        out.extend_from_slice(col);
    }
}

/// Appends one column's encoding, framed (see the module note).
pub fn frame(col: &[u8], out: &mut Vec<u8>) {
    for &b in col {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0x00, 0x01]);
}

/// How one key column's values become sort-key bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Encoding {
    /// TINYINT..BIGINT signed: 8 bytes big-endian, sign bit flipped.
    Signed,
    /// TINYINT..BIGINT UNSIGNED: 8 bytes big-endian.
    Unsigned,
    /// DECIMAL(p, s): sign, magnitude by digit count, digits, `scale` fraction digits.
    Decimal {
        scale: u32,
    },
    Date,
    Datetime,
    Timestamp,
    Time,
    Year,
    /// ENUM by index (ORDER BY sorts an ENUM by index); members in definition order.
    Enum(Vec<Vec<u8>>),
    /// SET by its bit value; members in definition order.
    Set(Vec<Vec<u8>>),
    /// BINARY(n) padded with 0x00 to `pad`, VARBINARY as stored (`pad` None).
    Binary {
        pad: Option<usize>,
    },
    /// CHAR/VARCHAR: the server's `WEIGHT_STRING(v AS CHAR(len))` under `collation`
    /// (see [`weigh`] for NO PAD collations and CHAR, `fixed`, which stores its values
    /// padded with spaces to `len`).
    Chars {
        charset: String,
        collation: String,
        len: u64,
        fixed: bool,
    },
    /// INET4 and INET6: their binary form of exactly this many bytes, ordered as the server
    /// orders them (memcmp); any other length (their text form, say) is refused, never
    /// padded.
    Form(usize),
}

/// One column of a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyColumn {
    /// Index into the sealed schema's columns.
    pub index: usize,
    pub name: String,
    pub encoding: Encoding,
}

/// Why a key value has no sort key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("key column `{column}` is NULL")]
    Null { column: String },
    #[error("key column `{column}`: {why}")]
    Value { column: String, why: String },
    #[error(
        "key column `{column}`: the server's weight of a value was not asked before use (a bug)"
    )]
    NoWeight { column: String },
    #[error("row has {found} columns, the key needs column #{needed}")]
    Short { found: usize, needed: usize },
}

/// The key of a sealed table: its columns in index order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDef {
    pub columns: Vec<KeyColumn>,
}

impl Encoding {
    /// True when every value's encoding has the same length (so a composite key needs no
    /// frame around it): BINARY(n) is padded to n (a longer value is refused by
    /// [`encode::encode`]), the others are numbers of one width.
    pub fn fixed_width(&self) -> bool {
        match self {
            Encoding::Signed
            | Encoding::Unsigned
            | Encoding::Date
            | Encoding::Datetime
            | Encoding::Timestamp
            | Encoding::Time
            | Encoding::Year
            | Encoding::Enum(_)
            | Encoding::Set(_) => true,
            Encoding::Binary { pad } => pad.is_some(),
            Encoding::Form(_) => true,
            Encoding::Decimal { .. } | Encoding::Chars { .. } => false,
        }
    }
}

impl KeyDef {
    /// True when column `ci`'s bytes are framed in a sort key: neither fixed-width nor
    /// the last column (see the module note).
    pub fn framed(&self, ci: usize) -> bool {
        ci + 1 < self.columns.len() && !self.columns[ci].encoding.fixed_width()
    }

    /// The key of `schema` (its sealed key columns), or why a column cannot be a key.
    pub fn of(schema: &SealedSchema) -> Result<KeyDef, String> {
        let columns = schema
            .key
            .iter()
            .map(|&i| {
                let c = &schema.columns[i];
                Ok(KeyColumn {
                    index: i,
                    name: c.name.clone(),
                    encoding: encoding_of(c)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(KeyDef { columns })
    }

    /// True when some column's sort key must be asked of the server.
    pub fn needs_weights(&self) -> bool {
        self.columns
            .iter()
            .any(|c| matches!(c.encoding, Encoding::Chars { .. }))
    }
}

/// The encoding of a column type as a key, or why it cannot be one.
pub fn encoding_of(c: &ColumnDef) -> Result<Encoding, String> {
    use ColumnKind as K;
    Ok(match c.kind {
        K::TinyInt | K::SmallInt | K::MediumInt | K::Int | K::BigInt if c.unsigned => {
            Encoding::Unsigned
        }
        K::TinyInt | K::SmallInt | K::MediumInt | K::Int | K::BigInt => Encoding::Signed,
        K::Decimal => Encoding::Decimal {
            scale: c.numeric_scale.unwrap_or(0) as u32,
        },
        K::Date => Encoding::Date,
        K::Datetime => Encoding::Datetime,
        K::Timestamp => Encoding::Timestamp,
        K::Time => Encoding::Time,
        K::Year => Encoding::Year,
        K::Enum => {
            let m = encode::members(&c.column_type, "enum")?;
            if m.iter().any(Vec::is_empty) {
                return Err(format!(
                    "{} has a member named '', which the server cannot tell from the invalid \
                     value ''; fix: rename that member",
                    c.column_type
                ));
            }
            Encoding::Enum(m)
        }
        K::Set => Encoding::Set(encode::members(&c.column_type, "set")?),
        K::Binary => Encoding::Binary {
            pad: c.fixed_binary_len(),
        },
        K::Varbinary => Encoding::Binary { pad: None },
        K::Char | K::Varchar => chars(c)?,
        K::Uuid => {
            return Err(format!(
                "a UUID key column ({}) is not supported: MariaDB orders UUIDs by swapped \
                 segments for some versions and variants and not for others (measured on \
                 10.11: ORDER BY puts ffffffff-0000-1000-8000-000000000000 before \
                 01000000-0000-0000-0000-000000000000), an order backfill does not \
                 re-implement; fix: key the table by a column of another type (e.g. a \
                 BIGINT id) and keep the UUID as a plain column",
                c.column_type
            ))
        }
        // The server orders INET4 and INET6 by their binary form, memcmp (measured on
        // 10.11: `::` < `::1` < `::ffff:1.2.3.4` < `1::` < `8000::` < `fe80::1`; `1.2.3.4`
        // < `10.0.0.1` < `128.0.0.0`), and compares a binary string of that form as the
        // value (`k > X'..'` is an index range).
        K::Inet4 | K::Inet6 => Encoding::Form(
            c.kind
                .binary_form_len()
                .ok_or("an INET column without its binary length")?,
        ),
        other => {
            return Err(format!(
                "a {other:?} column ({}) cannot be part of a key backfill orders; \
                 key the table by columns of integer, decimal, temporal, enum, set, \
                 binary or character types",
                c.column_type
            ))
        }
    })
}

/// The encoding of a CHAR/VARCHAR key column, or why it cannot be one yet. Any charset:
/// every data-plane session reads and writes a string as its column's own bytes
/// ([`crate::names`]), the bytes the binlog carries, so one key has one byte form (before
/// issue 15 a snapshot read returned utf8mb4 text and only utf8mb4/utf8mb3/ascii keys were
/// accepted).
fn chars(c: &ColumnDef) -> Result<Encoding, String> {
    c.charset
        .as_ref()
        .ok_or("a character column without a charset")?;
    let collation = c
        .collation
        .clone()
        .ok_or("a character column without a collation")?;
    let no_pad = collation.contains("_nopad_") || collation.contains("_0900_");
    if c.kind == ColumnKind::Char && no_pad {
        return Err(format!(
            "a CHAR key column under the NO PAD collation {collation} is not supported (its \
             index orders values padded to their length, which `<` does not); fix: use \
             VARCHAR, or a PAD SPACE collation"
        ));
    }
    chars_encoding(c)
}

/// The weighing encoding of any CHAR/VARCHAR column, without the checks of
/// [`encoding_of`]: what `weigh` needs to weigh values of the column's own bytes (the
/// binlog's), e.g. in the property tests of every charset.
pub fn chars_encoding(c: &ColumnDef) -> Result<Encoding, String> {
    Ok(Encoding::Chars {
        charset: c
            .charset
            .clone()
            .ok_or("a character column without a charset")?,
        collation: c
            .collation
            .clone()
            .ok_or("a character column without a collation")?,
        len: c.char_len.ok_or("a character column without a length")?,
        fixed: c.kind == ColumnKind::Char,
    })
}

/// A table's key with the server weights asked so far: turns rows into sort keys.
/// Clones share one weight cache (one job's replayer and its apply run on one keyer);
/// [`Keyer::new`] starts an independent one.
#[derive(Clone, Debug)]
pub struct Keyer {
    pub def: KeyDef,
    weights: std::sync::Arc<std::sync::RwLock<WeightCache>>,
}

/// Weights kept at most (about 64 MiB for 255-character keys); beyond it the cache is
/// emptied before the next batch is asked, never while a batch is in use.
pub const MAX_CACHED_WEIGHTS: usize = 100_000;

impl Keyer {
    pub fn new(def: KeyDef) -> Keyer {
        Keyer {
            def,
            weights: Default::default(),
        }
    }

    /// The cached weight of `value` in key column `col`.
    pub fn weight(&self, col: usize, value: &[u8]) -> Option<Vec<u8>> {
        self.read_weights().get(col, value).map(<[u8]>::to_vec)
    }

    /// Caches the server's weight of `value` in key column `col`.
    pub fn insert_weight(&self, col: usize, value: Vec<u8>, weight: Vec<u8>) {
        self.write_weights().insert(col, value, weight);
    }

    /// Empties the cache when it holds more than `MAX_CACHED_WEIGHTS`, before a new batch
    /// of `incoming` weights is asked.
    pub fn make_room(&self, incoming: usize) {
        let mut w = self.write_weights();
        if w.len() + incoming > MAX_CACHED_WEIGHTS {
            w.clear();
        }
    }

    /// Whether `collation` pads with spaces, once asked.
    pub fn pad_of(&self, collation: &str) -> Option<bool> {
        self.read_weights().pad.get(collation).copied()
    }

    /// Records whether `collation` pads with spaces.
    pub fn set_pad(&self, collation: &str, pad: bool) {
        self.write_weights().pad.insert(collation.to_string(), pad);
    }

    /// Counts weighing statements and values (for callers to report the cost).
    pub fn count_weighing(&self, round_trips: u64, values: u64) {
        let mut w = self.write_weights();
        w.stats.round_trips += round_trips;
        w.stats.values += values;
    }

    /// What weighing has cost this keyer so far.
    pub fn weigh_stats(&self) -> weigh::WeighStats {
        self.read_weights().stats()
    }

    fn read_weights(&self) -> std::sync::RwLockReadGuard<'_, WeightCache> {
        // A poisoned lock only means a panic elsewhere while inserting a complete entry.
        self.weights.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_weights(&self) -> std::sync::RwLockWriteGuard<'_, WeightCache> {
        self.weights.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The keyer of a sealed schema (its key columns must be encodable: install checked).
    pub fn of(schema: &SealedSchema) -> Result<Keyer, String> {
        Ok(Keyer::new(KeyDef::of(schema)?))
    }

    /// The sort key of a full row image.
    pub fn sort_key(&self, row: &Row) -> Result<SortKey, KeyError> {
        self.sort_key_inline(row, &[])
    }

    /// The sort key of a full row image whose character key columns' weights are given
    /// (`(key column, weight)`, as the server returned them with the row) instead of
    /// cached; a character column not in `inline` is looked up in the cache.
    pub fn sort_key_inline(
        &self,
        row: &Row,
        inline: &[(usize, Vec<u8>)],
    ) -> Result<SortKey, KeyError> {
        self.build(inline, |c| {
            row.get(c.index).ok_or(KeyError::Short {
                found: row.len(),
                needed: c.index,
            })
        })
    }

    /// Joins the key columns' encodings (`value` of each column, the weights in `inline`
    /// or the cache), built in this thread's scratch buffers and copied once into a key of
    /// their exact size: one allocation a key (a window computes one a row).
    fn build<'v>(
        &self,
        inline: &[(usize, Vec<u8>)],
        mut value: impl FnMut(&KeyColumn) -> Result<&'v SqlValue, KeyError>,
    ) -> Result<SortKey, KeyError> {
        thread_local! {
            static SCRATCH: std::cell::RefCell<(Vec<u8>, Vec<u8>)> = Default::default();
        }
        SCRATCH.with(|s| {
            let (out, col) = &mut *s.borrow_mut();
            out.clear();
            for (ci, c) in self.def.columns.iter().enumerate() {
                let v = value(c)?;
                let given = inline.iter().find(|(i, _)| *i == ci).map(|(_, w)| &w[..]);
                if self.def.framed(ci) {
                    col.clear();
                    self.column_bytes(ci, c, v, given, col)?;
                    frame(col, out);
                } else {
                    self.column_bytes(ci, c, v, given, out)?;
                }
            }
            Ok(SortKey(out.as_slice().to_vec()))
        })
    }

    /// The key column values of a row, in key order (for statements and display).
    pub fn values(&self, row: &Row) -> Result<Vec<SqlValue>, KeyError> {
        self.def
            .columns
            .iter()
            .map(|c| {
                row.get(c.index).cloned().ok_or(KeyError::Short {
                    found: row.len(),
                    needed: c.index,
                })
            })
            .collect()
    }

    /// The sort key of key values given in key order (a bound, a cursor).
    pub fn sort_key_of_values(&self, values: &[SqlValue]) -> Result<SortKey, KeyError> {
        let short = || KeyError::Short {
            found: values.len(),
            needed: self.def.columns.len(),
        };
        let mut it = values.iter();
        let key = self.build(&[], |_| it.next().ok_or_else(short));
        if values.len() != self.def.columns.len() {
            return Err(short());
        }
        key
    }

    fn column_bytes(
        &self,
        ci: usize,
        c: &KeyColumn,
        v: &SqlValue,
        given: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) -> Result<(), KeyError> {
        if v.is_null() {
            return Err(KeyError::Null {
                column: c.name.clone(),
            });
        }
        if let Encoding::Chars { .. } = c.encoding {
            let SqlValue::Bytes(b) = v else {
                return Err(KeyError::Value {
                    column: c.name.clone(),
                    why: format!("a character key value arrived as {v:?}"),
                });
            };
            if let Some(w) = given {
                out.extend_from_slice(w);
                return Ok(());
            }
            let weights = self.read_weights();
            let w = weights.get(ci, b).ok_or_else(|| KeyError::NoWeight {
                column: c.name.clone(),
            })?;
            out.extend_from_slice(w);
            return Ok(());
        }
        encode::encode(&c.encoding, v, out).map_err(|why| KeyError::Value {
            column: c.name.clone(),
            why,
        })
    }

    /// Character values of `rows`' key columns whose weight is not cached yet, deduplicated.
    pub fn unweighed<'r>(&self, rows: impl IntoIterator<Item = &'r Row>) -> Vec<(usize, Vec<u8>)> {
        let chars: Vec<(usize, usize)> = self
            .def
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.encoding, Encoding::Chars { .. }))
            .map(|(ci, c)| (ci, c.index))
            .collect();
        if chars.is_empty() {
            return Vec::new();
        }
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let weights = self.read_weights();
        for row in rows {
            for &(ci, idx) in &chars {
                if let Some(SqlValue::Bytes(b)) = row.get(idx) {
                    if weights.get(ci, b).is_none() && seen.insert((ci, b.clone())) {
                        out.push((ci, b.clone()));
                    }
                }
            }
        }
        out
    }

    /// Character values of key tuples (values in key order) whose weight is not cached.
    pub fn unweighed_values<'v>(
        &self,
        keys: impl IntoIterator<Item = &'v [SqlValue]>,
    ) -> Vec<(usize, Vec<u8>)> {
        let weights = self.read_weights();
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for k in keys {
            for (ci, (c, v)) in self.def.columns.iter().zip(k).enumerate() {
                if let (Encoding::Chars { .. }, SqlValue::Bytes(b)) = (&c.encoding, v) {
                    if weights.get(ci, b).is_none() && seen.insert((ci, b.clone())) {
                        out.push((ci, b.clone()));
                    }
                }
            }
        }
        out
    }

    /// Key values as statement parameters: an ENUM as its index and a SET as its bits,
    /// because `e > 'name'` compares text while the index (and ORDER BY) orders by number
    /// (a member name bound as a string would skip or repeat rows). Other values as they
    /// are; a value that cannot be mapped stays as it is and the statement's own
    /// comparison applies.
    pub fn predicate_values(&self, values: &[SqlValue]) -> Vec<SqlValue> {
        self.def
            .columns
            .iter()
            .zip(values)
            .map(|(c, v)| match &c.encoding {
                Encoding::Enum(m) => encode::enum_index(v, m)
                    .map(|i| SqlValue::UInt(u64::from(i)))
                    .unwrap_or_else(|_| v.clone()),
                Encoding::Set(m) => encode::set_bits(v, m)
                    .map(SqlValue::UInt)
                    .unwrap_or_else(|_| v.clone()),
                _ => v.clone(),
            })
            .collect()
    }

    /// Shows key values readably: `(1, 'abc', 2024-01-02)`.
    pub fn show(&self, values: &[SqlValue]) -> String {
        show_values(values)
    }
}

/// Key values for people: integers as digits, text as quoted text, bytes as hex.
pub fn show_values(values: &[SqlValue]) -> String {
    let parts: Vec<String> = values.iter().map(show_value).collect();
    if parts.len() == 1 {
        parts.into_iter().next().unwrap_or_default()
    } else {
        format!("({})", parts.join(", "))
    }
}

fn show_value(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".into(),
        SqlValue::Int(i) => i.to_string(),
        SqlValue::UInt(u) => u.to_string(),
        SqlValue::Float(x) => x.to_string(),
        SqlValue::Double(x) => x.to_string(),
        SqlValue::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) if !s.chars().any(char::is_control) => format!("'{}'", s.replace('\'', "''")),
            _ => format!("0x{}", hex_of(b)),
        },
        SqlValue::Date(y, m, d, h, mi, s, us) => {
            format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}")
        }
        SqlValue::Time(neg, d, h, m, s, us) => {
            let sign = if *neg { "-" } else { "" };
            format!(
                "{sign}{}:{m:02}:{s:02}.{us:06}",
                u64::from(*d) * 24 + u64::from(*h)
            )
        }
    }
}

#[cfg(test)]
mod tests;
