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
use kernel::ids::{Digest, WindowId};
use kernel::range::KeyRange;
use kernel::schema::{quote_ident, SealedSchema};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;

/// At most this many windows: a bigger table needs a bigger `--window-rows`.
pub const MAX_WINDOWS: usize = 200_000;

/// The ordered, contiguous windows of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangePlan {
    pub ranges: Vec<KeyRange>,
}

impl RangePlan {
    /// A plan from strictly increasing upper bounds (pure). Refuses unordered bounds.
    pub fn from_bounds(bounds: &[i64]) -> std::result::Result<RangePlan, String> {
        if let Some(w) = bounds.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "plan boundaries are not strictly increasing: {} then {}",
                w[0], w[1]
            ));
        }
        let plan = RangePlan {
            ranges: KeyRange::plan_from_bounds(bounds),
        };
        plan.check()?;
        Ok(plan)
    }

    /// Checks that the plan covers (-inf, +inf) contiguously (pure).
    pub fn check(&self) -> std::result::Result<(), String> {
        KeyRange::check_contiguous(&self.ranges)
    }

    /// Number of windows.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Never true for a checked plan; here for completeness.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The window holding `key`.
    pub fn window_of(&self, key: i64) -> Option<WindowId> {
        // Ranges are ordered by upper bound: the first whose upper >= key holds it.
        let i = self
            .ranges
            .partition_point(|r| r.upper.is_some_and(|u| u < key));
        let r = self.ranges.get(i)?;
        r.contains(key).then_some(WindowId(i as u32))
    }

    /// blake3 over the ordered ranges (version-tagged). Pinned by a golden test: the
    /// digest is stored and compared by the audit (§7).
    pub fn digest(&self) -> Digest {
        let mut bytes = b"backfill-range-plan-v1".to_vec();
        bytes.extend(kernel::codec::to_canonical(&self.ranges));
        Digest::of(&bytes)
    }
}

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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_table_gets_one_window() {
        let p = RangePlan::from_bounds(&[]).unwrap();
        assert_eq!(p.ranges, vec![KeyRange::ALL]);
        assert_eq!(p.window_of(i64::MIN), Some(WindowId(0)));
    }

    #[test]
    fn unordered_bounds_are_refused() {
        assert!(RangePlan::from_bounds(&[5, 5]).is_err());
        assert!(RangePlan::from_bounds(&[6, 5])
            .unwrap_err()
            .contains("6 then 5"));
    }

    #[test]
    fn digest_is_pinned() {
        let p = RangePlan::from_bounds(&[10, 20]).unwrap();
        assert_eq!(
            p.digest().to_hex(),
            "c41afc83eddbc59e196ab3987b3ab184fbca0273db3ad96d7435e98b4fd98c07"
        );
        assert_ne!(
            p.digest(),
            RangePlan::from_bounds(&[10, 21]).unwrap().digest()
        );
    }

    proptest! {
        #[test]
        fn plans_are_contiguous_and_find_every_key(
            bounds in proptest::collection::btree_set(any::<i64>(), 0..50),
            key in any::<i64>(),
        ) {
            let bounds: Vec<i64> = bounds.into_iter().collect();
            let p = RangePlan::from_bounds(&bounds).unwrap();
            prop_assert_eq!(p.len(), bounds.len() + 1);
            prop_assert!(p.check().is_ok());
            let w = p.window_of(key).unwrap();
            prop_assert!(p.ranges[w.0 as usize].contains(key));
            prop_assert_eq!(p.ranges.iter().filter(|r| r.contains(key)).count(), 1);
        }
    }
}
