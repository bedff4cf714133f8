//! Server weights of character key values (DESIGN §14): `WEIGHT_STRING(v AS CHAR(n))`
//! under the column's collation, n the declared length, asked of the source in batches.
//! Plain `WEIGHT_STRING(v)` ignores PAD SPACE (notes/mariadb.md); padding to the declared
//! length makes 'a' and 'a ' one key where the collation says so.
//!
//! Why it is safe: the weight is the server's own, computed from the value's exact bytes
//! (sent as a hex parameter and relabelled as the column's charset with
//! `CONVERT(UNHEX(?) USING cs)`: a string parameter would be read, and checked, as the
//! connection's charset first, so a latin1 'á' sent raw is refused as invalid utf8mb4),
//! never re-encoded through the connection charset, and every way it could be wrong is
//! refused instead of used (measured on MariaDB 10.11, kernel/tests/keys):
//! - a value that is not valid in the charset makes the server warn and weigh '?' in its
//!   place: a batch with any warning is an error;
//! - `AS CHAR(n)` keeps at most n weights, and one character can expand to several
//!   ('ß' is 'ss' under utf8mb4_unicode_ci): when the weight of the value without its
//!   trailing spaces is longer than the padded weight, two different values could share
//!   it, so the value is refused (it names the column and collation);
//! - a NO PAD collation (`'a' = 'a '` is 0, asked of the server once per collation) pads
//!   `AS CHAR(n)` with zero weights, which makes 'a' and 'a\0' one weight although they are
//!   two keys: under NO PAD the plain `WEIGHT_STRING(v)` is the sort key (no padding is
//!   what NO PAD means, and a weight that is a prefix of another sorts first, as the
//!   server's index does), except that a CHAR(n) column stores its value padded with
//!   spaces to n characters and its index orders the padded value ('\0\t' before '\0'):
//!   there the weight is of `RPAD(v, n, ' ')`, and a value longer than n is refused;
//! - a NULL weight (larger than max_allowed_packet) is an error.
//!
//! The value's bytes must be the column's own: the binlog gives them so, and a SELECT
//! does under `SET NAMES binary` ([`crate::names`], every data-plane session; with the
//! default utf8mb4 results a latin1 'á' arrives as UTF-8 and would be weighed as two
//! latin1 characters). The pad probes and pad characters name their charset
//! (`_utf8mb4' '`): under a binary session a bare `' '` is one byte, which ucs2 would read
//! as `0020` only by its padding rule and `'a '` as the one character U+6120. Under a
//! NO PAD collation a CHAR column's index order (the key order used here) is not what `<`
//! says of its values: `'' < '\0'`, yet the index, which holds them padded, puts '\0'
//! first.
use super::{Encoding, Keyer};
use crate::error::{from_mysql, DefiniteCode, Error};
use crate::value::Row;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value};

/// Values per statement: one round trip each.
pub const BATCH: usize = 500;

/// What weighing cost so far (kept in the keyer's cache, for callers to report).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WeighStats {
    /// Statements sent (batches of weights, and one pad check per collation).
    pub round_trips: u64,
    /// Values weighed.
    pub values: u64,
}

/// Asks the server the weights of the character key values of `rows` not cached yet and
/// caches them. Returns how many values were asked.
pub async fn weigh<'r>(
    conn: &mut Conn,
    keyer: &Keyer,
    rows: impl IntoIterator<Item = &'r Row>,
) -> crate::Result<usize> {
    let values = keyer.unweighed(rows);
    weigh_values(conn, keyer, &values).await
}

/// Asks the server the weights of `values` (key column index in the key, value bytes) not
/// cached yet and caches them (for bounds and cursors). Returns how many were asked.
pub async fn weigh_values(
    conn: &mut Conn,
    keyer: &Keyer,
    values: &[(usize, Vec<u8>)],
) -> crate::Result<usize> {
    let mut asked = 0;
    for ci in 0..keyer.def.columns.len() {
        let mut seen = std::collections::HashSet::new();
        let mut todo: Vec<&[u8]> = Vec::new();
        for (c, v) in values {
            if *c == ci && keyer.weight(ci, v).is_none() && seen.insert(v.as_slice()) {
                todo.push(v);
            }
        }
        if todo.is_empty() {
            continue;
        }
        let col = Column::of(keyer, ci)?;
        let pad = pad_space(conn, keyer, &col).await?;
        for batch in todo.chunks(BATCH) {
            let weights = ask(conn, &col, pad, batch).await?;
            keyer.count_weighing(1, batch.len() as u64);
            for (v, w) in batch.iter().zip(weights) {
                keyer.insert_weight(ci, v.to_vec(), w);
            }
            asked += batch.len();
        }
    }
    Ok(asked)
}

/// The facts of one character key column a statement needs (identifiers checked).
struct Column {
    name: String,
    charset: String,
    collation: String,
    len: u64,
    fixed: bool,
}

impl Column {
    fn of(keyer: &Keyer, ci: usize) -> crate::Result<Column> {
        let c = &keyer.def.columns[ci];
        let Encoding::Chars {
            charset,
            collation,
            len,
            fixed,
        } = &c.encoding
        else {
            return Err(Error::definite(
                DefiniteCode::Internal,
                format!("key column `{}` is not a character column", c.name),
            ));
        };
        for id in [charset, collation] {
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(Error::definite(
                    DefiniteCode::Internal,
                    format!(
                        "key column `{}`: not a charset or collation name: {id:?}",
                        c.name
                    ),
                ));
            }
        }
        Ok(Column {
            name: c.name.clone(),
            charset: charset.clone(),
            collation: collation.clone(),
            len: *len,
            fixed: *fixed,
        })
    }
}

/// True for a PAD SPACE collation, asked of the server once per collation and cached.
async fn pad_space(conn: &mut Conn, keyer: &Keyer, col: &Column) -> crate::Result<bool> {
    if let Some(p) = keyer.pad_of(&col.collation) {
        return Ok(p);
    }
    let (cs, co) = (&col.charset, &col.collation);
    let sql = format!(
        "SELECT CONVERT(_utf8mb4'a' USING {cs}) COLLATE {co} = \
         CONVERT(_utf8mb4'a ' USING {cs}) COLLATE {co}"
    );
    let r: Option<i64> = conn
        .query_first(sql)
        .await
        .map_err(|e| from_mysql(&format!("asking whether {co} pads with spaces"), &e))?;
    keyer.count_weighing(1, 0);
    let pad = r == Some(1);
    keyer.set_pad(&col.collation, pad);
    Ok(pad)
}

/// The two select-list expressions for the value `c` (an SQL expression of the column's
/// charset and collation): its weight, and 1 when that weight is whole (`AS CHAR(len)` did
/// not cut it short). Shared by [`statement`] and by reads that weigh their rows in the
/// same SELECT ([`inline`]), so both give the same bytes.
fn exprs(c: &str, len: u64, fixed: bool, pad: bool) -> String {
    if pad {
        format!(
            "WEIGHT_STRING({c} AS CHAR({len})), \
             LENGTH(WEIGHT_STRING(TRIM(TRAILING _utf8mb4' ' FROM {c}))) <= LENGTH(WEIGHT_STRING({c} AS CHAR({len})))"
        )
    } else if fixed {
        format!("WEIGHT_STRING(RPAD({c}, {len}, _utf8mb4' ')), CHAR_LENGTH({c}) <= {len}")
    } else {
        format!("WEIGHT_STRING({c}), 1")
    }
}

/// The statement weighing `n` values of `col`: one row per value, `(i, weight, whole)`,
/// `whole` 0 when `AS CHAR(len)` cut the weight short.
fn statement(col: &Column, pad: bool, n: usize) -> String {
    let (cs, co) = (&col.charset, &col.collation);
    let values: Vec<String> = (0..n)
        .map(|i| format!("SELECT {i} AS i, CONVERT(UNHEX(?) USING {cs}) COLLATE {co} AS c"))
        .collect();
    format!(
        "SELECT i, {} FROM ({}) AS v ORDER BY i",
        exprs("c", col.len, col.fixed, pad),
        values.join(" UNION ALL ")
    )
}

/// Weights read in the same SELECT as the rows: for each character key column, its key
/// ordinal and two select-list expressions (weight, whole) over the column itself, whose
/// values [`accept_inline`] checks and caches. The column's own collation applies.
pub async fn inline(conn: &mut Conn, keyer: &Keyer) -> crate::Result<Vec<(usize, String)>> {
    let mut out = Vec::new();
    for (ci, c) in keyer.def.columns.iter().enumerate() {
        if !matches!(c.encoding, Encoding::Chars { .. }) {
            continue;
        }
        let col = Column::of(keyer, ci)?;
        let pad = pad_space(conn, keyer, &col).await?;
        let quoted = crate::schema::quote_ident(&col.name);
        out.push((ci, exprs(&quoted, col.len, col.fixed, pad)));
    }
    Ok(out)
}

/// Caches one inline weight of key column `ci` for `value` (`whole` as read): a weight
/// that was cut short, or none, refuses the value by name (never a guess).
pub fn accept_inline(
    keyer: &Keyer,
    ci: usize,
    value: &[u8],
    weight: Option<Vec<u8>>,
    whole: Option<i64>,
) -> crate::Result<()> {
    let w = check_inline(keyer, ci, value, weight, whole)?;
    keyer.insert_weight(ci, value.to_vec(), w);
    Ok(())
}

/// One inline weight of key column `ci` for `value` (`whole` as read), checked as
/// [`accept_inline`] checks it, for a caller that uses it at once
/// ([`Keyer::sort_key_inline`]) instead of caching it.
pub fn check_inline(
    keyer: &Keyer,
    ci: usize,
    value: &[u8],
    weight: Option<Vec<u8>>,
    whole: Option<i64>,
) -> crate::Result<Vec<u8>> {
    let c = &keyer.def.columns[ci];
    // Shown only in a refusal: formatting it for every accepted row cost four allocations
    // a row (and the memory they churned) in a window read.
    let v = || super::show_values(&[crate::value::SqlValue::Bytes(value.to_vec())]);
    match (weight, whole) {
        (Some(w), Some(1)) => Ok(w),
        (Some(_), _) => Err(Error::definite(
            DefiniteCode::Uncapturable,
            format!(
                "key column `{}`: the weight of {} is cut short by WEIGHT_STRING(.. AS CHAR(n)) \
                 (a character expands under its collation) and could equal another value's",
                c.name,
                v()
            ),
        )),
        _ => Err(Error::definite(
            DefiniteCode::Uncapturable,
            format!(
                "key column `{}`: the server gave no weight for {}",
                c.name,
                v()
            ),
        )),
    }
}

async fn ask(
    conn: &mut Conn,
    col: &Column,
    pad: bool,
    batch: &[&[u8]],
) -> crate::Result<Vec<Vec<u8>>> {
    let what = format!(
        "weighing {} values of key column `{}`",
        batch.len(),
        col.name
    );
    let params: Vec<Value> = batch
        .iter()
        .map(|v| Value::Bytes(hex::encode(v).into_bytes()))
        .collect();
    let rows: Vec<(u64, Option<Vec<u8>>, Option<i64>)> = conn
        .exec(statement(col, pad, batch.len()), Params::Positional(params))
        .await
        .map_err(|e| from_mysql(&what, &e))?;
    let refuse = |why: String| {
        Error::definite(
            DefiniteCode::Uncapturable,
            format!("key column `{}` ({}): {why}", col.name, col.collation),
        )
    };
    if conn.get_warnings() > 0 {
        let n = conn.get_warnings();
        let first: Option<(String, u32, String)> = conn
            .query_first("SHOW WARNINGS LIMIT 1")
            .await
            .map_err(|e| from_mysql(&what, &e))?;
        let first = first.map(|(_, code, text)| format!("{code} {text}"));
        return Err(refuse(format!(
            "{what}: the server warned {n} times (first: {}): a value is not valid {} text",
            first.unwrap_or_default(),
            col.charset
        )));
    }
    if rows.len() != batch.len() {
        return Err(refuse(format!("{what}: {} weights came back", rows.len())));
    }
    let mut out = Vec::with_capacity(rows.len());
    for (k, (i, w, whole)) in rows.into_iter().enumerate() {
        let v = super::show_values(&[crate::value::SqlValue::Bytes(batch[k].to_vec())]);
        match (i == k as u64, w, whole) {
            (true, Some(w), Some(1)) => out.push(w),
            (true, Some(_), _) => {
                return Err(refuse(format!(
                    "the weight of {v} is longer than {} weights (the value is longer than \
                     {} characters, or a character expands), so WEIGHT_STRING(v AS CHAR({})) \
                     would cut it and could equal another value's",
                    col.len, col.len, col.len
                )))
            }
            _ => return Err(refuse(format!("the server gave no weight for {v}"))),
        }
    }
    Ok(out)
}
