//! The fixed range plan (DESIGN §5): planned once at install from the real key
//! distribution, persisted, never re-cut.
//!
//! Why boundaries come from the server: min..max arithmetic on a sparse key space (keys
//! 1..1000 and 10^12..10^12+1000) gives millions of empty windows or one giant one. Instead
//! the server walks the key's index, `ORDER BY k1, k2.. LIMIT 1 OFFSET window_rows-1`
//! from the previous boundary, so every window but the last holds exactly `window_rows`
//! keys at install time, and the keys are ordered by the server, never re-implemented in
//! Rust (STYLE §9). The boundaries are only a partition of the key space: the first window
//! is open below and the last open above, so keys inserted later anywhere still belong to
//! exactly one window, and a table that looked empty gets one window (-inf, +inf).
use kernel::error::from_mysql;
use kernel::key::{sql as key_sql, weigh, Keyer};
use kernel::range::Bound;
use kernel::schema::SealedSchema;
use kernel::value::SqlValue;
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Params, Value};

/// At most this many windows: a bigger table needs a bigger `--window-rows`.
pub const MAX_WINDOWS: usize = 200_000;

pub use crate::store::plan::RangePlan;

/// Upper bounds chosen by the server: the key at offset `window_rows - 1` after each
/// previous bound, until fewer than `window_rows` keys remain. Each bound is the full key
/// in index order, with its sort key (weights of character columns asked of the server).
pub async fn sample_bounds(
    conn: &mut mysql_async::Conn,
    schema: &SealedSchema,
    window_rows: u64,
) -> Result<Vec<Bound>> {
    let keyer = Keyer::of(schema).map_err(|why| planning_error(schema, why))?;
    let cols = schema.key_names_quoted();
    // Bounds are typed values the window reads bind again under a +00:00 session: a
    // TIMESTAMP bound must be read in the same zone (its sort key is the UTC instant).
    conn.query_drop("SET SESSION time_zone = '+00:00'")
        .await
        .map_err(|e| from_mysql("setting the planning session time zone", &e))?;
    let weighed = weigh::inline(conn, &keyer).await?;
    // INET4/INET6 keys are read as their binary form, as every other read of them.
    let mut list: Vec<String> = schema.key_columns().map(|c| c.select_expr()).collect();
    list.extend(weighed.iter().map(|(_, e)| e.clone()));
    let (list, table) = (list.join(", "), schema.qualified());
    let order = key_sql::order_by(&cols);
    let what = format!("planning windows over {table}");
    let offset = window_rows - 1;
    let mut bounds: Vec<Bound> = Vec::new();
    loop {
        let (filter, mut params) = match bounds.last() {
            None => (String::new(), Vec::new()),
            Some(b) => {
                let p = key_sql::after(&cols, &keyer.predicate_values(&b.values));
                (format!(" WHERE {}", p.sql), p.params)
            }
        };
        params.push(SqlValue::UInt(offset));
        let sql = format!("SELECT {list} FROM {table}{filter} ORDER BY {order} LIMIT 1 OFFSET ?");
        let params: Vec<Value> = params.into_iter().map(Value::from).collect();
        let found: Option<mysql_async::Row> = conn
            .exec_first(sql, Params::Positional(params))
            .await
            .map_err(|e| from_mysql(&what, &e))?;
        let Some(row) = found else {
            return Ok(bounds);
        };
        if bounds.len() + 1 >= MAX_WINDOWS {
            return Err(Error::definite(
                kernel::error::DefiniteCode::Usage,
                format!(
                    "{table} needs more than {MAX_WINDOWS} windows of {window_rows} rows; \
                     raise --window-rows"
                ),
            ));
        }
        let mut values: Vec<SqlValue> = row.unwrap().into_iter().map(SqlValue::from).collect();
        let weights = values.split_off(cols.len());
        for ((ci, _), pair) in weighed.iter().zip(weights.chunks(2)) {
            if let (SqlValue::Bytes(v), SqlValue::Bytes(w)) = (&values[*ci], &pair[0]) {
                let whole = match &pair[1] {
                    SqlValue::Int(i) => Some(*i),
                    SqlValue::UInt(u) => i64::try_from(*u).ok(),
                    SqlValue::Bytes(b) => std::str::from_utf8(b).ok().and_then(|t| t.parse().ok()),
                    _ => None,
                };
                weigh::accept_inline(&keyer, *ci, v, Some(w.clone()), whole)?;
            }
        }
        let sort = keyer
            .sort_key_of_values(&values)
            .map_err(|e| planning_error(schema, e.to_string()))?;
        bounds.push(Bound { values, sort });
    }
}

fn planning_error(schema: &SealedSchema, why: impl std::fmt::Display) -> Error {
    Error::definite(
        kernel::error::DefiniteCode::Preparation,
        format!("planning {}: {why}", schema.qualified()),
    )
}

/// Plans `schema`'s table: boundaries from the server, then the pure plan.
pub async fn plan(
    conn: &mut mysql_async::Conn,
    schema: &SealedSchema,
    window_rows: u64,
) -> Result<RangePlan> {
    let bounds = sample_bounds(conn, schema, window_rows).await?;
    RangePlan::from_bounds(&bounds).map_err(|why| planning_error(schema, why))
}
