//! The fixed range plan of one job (DESIGN §5) as persisted: ordered, contiguous windows
//! covering (-inf, +inf). Chosen at install (`crate::install::plan`), never re-cut.
use kernel::ids::{Digest, WindowId};
use kernel::key::SortKey;
use kernel::range::{Bound, KeyRange, KeyRangeV1};

/// The ordered, contiguous windows of one job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangePlan {
    pub ranges: Vec<KeyRange>,
}

impl RangePlan {
    /// A plan from strictly increasing upper bounds (pure). Refuses unordered bounds.
    pub fn from_bounds(bounds: &[Bound]) -> std::result::Result<RangePlan, String> {
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

    /// A plan over a single signed integer key from its upper bounds (tests, old plans).
    pub fn from_i64_bounds(bounds: &[i64]) -> std::result::Result<RangePlan, String> {
        let b: Vec<Bound> = bounds.iter().map(|&v| Bound::of_i64(v)).collect();
        RangePlan::from_bounds(&b)
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

    /// The window holding the key with sort key `key`.
    pub fn window_of(&self, key: &SortKey) -> Option<WindowId> {
        // Ranges are ordered by upper bound: the first whose upper >= key holds it.
        let i = self
            .ranges
            .partition_point(|r| r.upper.as_ref().is_some_and(|u| u.sort < *key));
        let r = self.ranges.get(i)?;
        r.contains(key).then_some(WindowId(i as u32))
    }

    /// blake3 over the ordered ranges (version-tagged). Pinned by a golden test: the
    /// digest is stored and compared by the audit (§7). A plan over a single signed
    /// integer key keeps the v1 formula (its digest is already stored).
    pub fn digest(&self) -> Digest {
        let v1: Option<Vec<KeyRangeV1>> = self.ranges.iter().map(KeyRange::as_v1).collect();
        let mut bytes;
        match v1 {
            Some(v1) => {
                bytes = b"backfill-range-plan-v1".to_vec();
                bytes.extend(kernel::codec::to_canonical(&v1));
            }
            None => {
                bytes = b"backfill-range-plan-v2".to_vec();
                bytes.extend(kernel::codec::to_canonical(&self.ranges));
            }
        }
        Digest::of(&bytes)
    }
}

/// How one window bound is stored (migration 0072): a single signed integer in the BIGINT
/// column, as every plan before composite keys; any other bound as its `KBND` bytes.
pub(crate) struct BoundColumns {
    pub(crate) int: Option<i64>,
    pub(crate) bytes: Option<Vec<u8>>,
}

impl BoundColumns {
    pub(crate) fn of(b: &Option<Bound>) -> BoundColumns {
        match b {
            None => BoundColumns {
                int: None,
                bytes: None,
            },
            Some(b) => match b.as_i64() {
                Some(v) => BoundColumns {
                    int: Some(v),
                    bytes: None,
                },
                None => BoundColumns {
                    int: None,
                    bytes: Some(kernel::codec::encode(b)),
                },
            },
        }
    }

    pub(crate) fn bound(
        int: Option<i64>,
        bytes: Option<Vec<u8>>,
    ) -> std::result::Result<Option<Bound>, String> {
        match (int, bytes) {
            (None, None) => Ok(None),
            (Some(v), None) => Ok(Some(Bound::of_i64(v))),
            (None, Some(b)) => kernel::codec::decode::<Bound>(&b)
                .map(Some)
                .map_err(|e| e.to_string()),
            (Some(_), Some(_)) => Err("a window bound is stored twice".into()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::value::SqlValue;
    use proptest::prelude::*;

    #[test]
    fn empty_table_gets_one_window() {
        let p = RangePlan::from_bounds(&[]).unwrap();
        assert_eq!(p.ranges, vec![KeyRange::ALL]);
        assert_eq!(p.window_of(&SortKey::of_i64(i64::MIN)), Some(WindowId(0)));
    }

    #[test]
    fn unordered_bounds_are_refused() {
        assert!(RangePlan::from_i64_bounds(&[5, 5]).is_err());
        assert!(RangePlan::from_i64_bounds(&[6, 5])
            .unwrap_err()
            .contains("6 then 5"));
    }

    #[test]
    fn digest_is_pinned() {
        // The v1 digest of an integer plan, as stored by every job installed before
        // composite keys: it must never change.
        let p = RangePlan::from_i64_bounds(&[10, 20]).unwrap();
        assert_eq!(
            p.digest().to_hex(),
            "c41afc83eddbc59e196ab3987b3ab184fbca0273db3ad96d7435e98b4fd98c07"
        );
        assert_ne!(
            p.digest(),
            RangePlan::from_i64_bounds(&[10, 21]).unwrap().digest()
        );
        let composite = Bound {
            values: vec![SqlValue::UInt(7), SqlValue::Bytes(b"ab".to_vec())],
            sort: SortKey(vec![7, 0, 1, b'a', b'b', 0, 1]),
        };
        let q = RangePlan::from_bounds(&[composite]).unwrap();
        assert_eq!(
            q.digest().to_hex(),
            "c2592d9520548506a00de1ec3d34fd8b28bba60788ab26f4c372b4c72530574c"
        );
    }

    proptest! {
        #[test]
        fn plans_are_contiguous_and_find_every_key(
            bounds in proptest::collection::btree_set(any::<i64>(), 0..50),
            key in any::<i64>(),
        ) {
            let bounds: Vec<i64> = bounds.into_iter().collect();
            let p = RangePlan::from_i64_bounds(&bounds).unwrap();
            prop_assert_eq!(p.len(), bounds.len() + 1);
            prop_assert!(p.check().is_ok());
            let key = SortKey::of_i64(key);
            let w = p.window_of(&key).unwrap();
            prop_assert!(p.ranges[w.0 as usize].contains(&key));
            prop_assert_eq!(p.ranges.iter().filter(|r| r.contains(&key)).count(), 1);
        }
    }
}
