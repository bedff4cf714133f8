//! Server weights of character key values (DESIGN §14): `WEIGHT_STRING(v AS CHAR(n))`
//! under the column's collation, n the declared length, asked of the source in batches.
//! Plain `WEIGHT_STRING(v)` ignores PAD SPACE (notes/mariadb.md); padding to the declared
//! length makes 'a' and 'a ' one key where the collation says so.
use super::{Encoding, Keyer};
use crate::error::from_mysql;
use crate::value::{Row, SqlValue};
use crate::Result;
use mysql_async::prelude::Queryable;

/// Values weighed per statement at most (one round trip each).
pub const BATCH: usize = 500;

/// Asks the server for the weights `keyer` lacks for the character key columns of `rows`.
/// Returns the round trips made.
pub async fn weigh_rows<'r, C: Queryable>(
    conn: &mut C,
    keyer: &Keyer,
    rows: impl IntoIterator<Item = &'r Row>,
) -> Result<usize> {
    let missing = keyer.unweighed(rows);
    weigh_pairs(conn, keyer, missing).await
}

/// The same for key tuples (values in key order: bounds, cursors).
pub async fn weigh_values<'v, C: Queryable>(
    conn: &mut C,
    keyer: &Keyer,
    keys: impl IntoIterator<Item = &'v [SqlValue]>,
) -> Result<usize> {
    let missing = keyer.unweighed_values(keys);
    weigh_pairs(conn, keyer, missing).await
}

/// Weighs (key column, value) pairs in batches of [`BATCH`]. The cache only grows here: a
/// caller that reuses one keyer across batches calls [`Keyer::make_room`] between them.
pub async fn weigh_pairs<C: Queryable>(
    conn: &mut C,
    keyer: &Keyer,
    missing: Vec<(usize, Vec<u8>)>,
) -> Result<usize> {
    if missing.is_empty() {
        return Ok(0);
    }
    let mut trips = 0;
    for batch in missing.chunks(BATCH) {
        let exprs: Vec<String> = batch
            .iter()
            .map(|(ci, _)| weight_expr(&keyer.def.columns[*ci].encoding))
            .collect::<Result<_>>()?;
        let sql = format!("SELECT {}", exprs.join(", "));
        let params: Vec<mysql_async::Value> = batch
            .iter()
            .map(|(_, b)| mysql_async::Value::Bytes(b.clone()))
            .collect();
        let row: Option<mysql_async::Row> = conn
            .exec_first(sql, params)
            .await
            .map_err(|e| from_mysql("asking the source for key weights", &e))?;
        trips += 1;
        let row = row.ok_or_else(|| crate::Error::transient("no row of key weights"))?;
        for (i, (ci, value)) in batch.iter().enumerate() {
            let w: Option<Vec<u8>> = row.get(i).flatten();
            let w = w.ok_or_else(|| {
                crate::Error::definite(
                    crate::error::DefiniteCode::Preparation,
                    format!(
                        "the source gave no weight for a value of key column `{}`",
                        keyer.def.columns[*ci].name
                    ),
                )
            })?;
            keyer.insert_weight(*ci, value.clone(), w);
        }
    }
    Ok(trips)
}

/// `WEIGHT_STRING(CONVERT(? USING cs) COLLATE coll AS CHAR(n))` for a character column.
fn weight_expr(enc: &Encoding) -> Result<String> {
    let Encoding::Chars {
        charset,
        collation,
        len,
    } = enc
    else {
        return Err(crate::Error::definite(
            crate::error::DefiniteCode::Internal,
            "a weight asked for a key column that is not a character column",
        ));
    };
    let ident = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ident(charset) || !ident(collation) {
        return Err(crate::Error::definite(
            crate::error::DefiniteCode::Preparation,
            format!("unexpected charset {charset:?} or collation {collation:?}"),
        ));
    }
    Ok(format!(
        "WEIGHT_STRING(CONVERT(CAST(? AS BINARY) USING {charset}) COLLATE {collation} AS CHAR({len}))"
    ))
}
