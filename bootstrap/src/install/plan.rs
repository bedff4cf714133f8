//! The fixed range plan (DESIGN §5): planned once at install from the real key
//! distribution, persisted, never re-cut.
//!
//! Why boundaries come from the server: min..max arithmetic on a sparse key space (keys
//! 1..1000 and 10^12..10^12+1000) gives millions of empty windows or one giant one. Instead
//! the server walks its own primary-key index, `ORDER BY pk LIMIT 1 OFFSET window_rows-1`
//! from the previous boundary, so every window but the last holds exactly `window_rows`
//! keys at install time, and the keys are ordered by the server, never re-implemented in
//! Rust (STYLE §9). The boundaries are only a partition of the key space: the first window
//! is open below and the last open above, so keys inserted later anywhere still belong to
//! exactly one window, and a table that looked empty gets one window (-inf, +inf).
use kernel::error::from_mysql;
use kernel::schema::{quote_ident, SealedSchema};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;

/// At most this many windows: a bigger table needs a bigger `--window-rows`.
pub const MAX_WINDOWS: usize = 200_000;

pub use crate::store::plan::RangePlan;

/// Upper bounds chosen by the server: the key at offset `window_rows - 1` after each
/// previous bound, until fewer than `window_rows` keys remain.
pub async fn sample_bounds(
    conn: &mut mysql_async::Conn,
    schema: &SealedSchema,
    window_rows: u64,
) -> Result<Vec<i64>> {
    let pk = quote_ident(&schema.pk_column().name);
    let table = schema.qualified();
    let first = format!("SELECT {pk} FROM {table} ORDER BY {pk} LIMIT 1 OFFSET ?");
    let next = format!("SELECT {pk} FROM {table} WHERE {pk} > ? ORDER BY {pk} LIMIT 1 OFFSET ?");
    let offset = window_rows - 1;
    let what = format!("planning windows over {table}");
    let mut bounds: Vec<i64> = Vec::new();
    loop {
        let found: Option<i64> = match bounds.last() {
            None => conn.exec_first(first.as_str(), (offset,)).await,
            Some(&b) => conn.exec_first(next.as_str(), (b, offset)).await,
        }
        .map_err(|e| from_mysql(&what, &e))?;
        let Some(b) = found else {
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
        bounds.push(b);
    }
}

/// Plans `schema`'s table: boundaries from the server, then the pure plan.
pub async fn plan(
    conn: &mut mysql_async::Conn,
    schema: &SealedSchema,
    window_rows: u64,
) -> Result<RangePlan> {
    let bounds = sample_bounds(conn, schema, window_rows).await?;
    RangePlan::from_bounds(&bounds).map_err(|why| {
        Error::definite(
            kernel::error::DefiniteCode::Preparation,
            format!("planning {}: {why}", schema.qualified()),
        )
    })
}
