//! The fixed range plan of one job (DESIGN §5) as persisted: ordered, contiguous windows
//! covering (-inf, +inf). Chosen at install (`crate::install::plan`), never re-cut.
use kernel::ids::{Digest, WindowId};
use kernel::range::KeyRange;

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
