//! Fixed primary-key ranges of the window plan (DESIGN §5): `(lower, upper]`, where the
//! first range is open below and the last open above, so a plan always covers the whole key
//! space (-inf, +inf) without gap or overlap.
use serde::{Deserialize, Serialize};
use std::fmt;

/// A half-open key range `(lower, upper]`; `None` means unbounded on that side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyRange {
    pub lower: Option<i64>,
    pub upper: Option<i64>,
}

impl KeyRange {
    /// The whole key space.
    pub const ALL: KeyRange = KeyRange {
        lower: None,
        upper: None,
    };

    /// True when `key` lies in `(lower, upper]`.
    pub fn contains(&self, key: i64) -> bool {
        self.lower.is_none_or(|l| key > l) && self.upper.is_none_or(|u| key <= u)
    }

    /// Contiguous ranges from sorted, strictly increasing upper bounds: n bounds give
    /// n + 1 ranges, the first open below and the last open above.
    pub fn plan_from_bounds(bounds: &[i64]) -> Vec<KeyRange> {
        let mut out = Vec::with_capacity(bounds.len() + 1);
        let mut lower = None;
        for &b in bounds {
            out.push(KeyRange {
                lower,
                upper: Some(b),
            });
            lower = Some(b);
        }
        out.push(KeyRange { lower, upper: None });
        out
    }

    /// Checks that `plan` covers (-inf, +inf) exactly, in order, without gap or overlap.
    pub fn check_contiguous(plan: &[KeyRange]) -> Result<(), String> {
        let (Some(first), Some(last)) = (plan.first(), plan.last()) else {
            return Err("the plan has no window".into());
        };
        if first.lower.is_some() {
            return Err(format!("first window {first} is not open below"));
        }
        if last.upper.is_some() {
            return Err(format!("last window {last} is not open above"));
        }
        for (i, pair) in plan.windows(2).enumerate() {
            let (a, b) = (pair[0], pair[1]);
            match (a.upper, b.lower) {
                (Some(u), Some(l)) if u == l && b.upper.is_none_or(|bu| bu > l) => {}
                _ => {
                    return Err(format!(
                        "windows {i} {a} and {} {b} are not contiguous",
                        i + 1
                    ))
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for KeyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.lower {
            Some(l) => write!(f, "({l}, ")?,
            None => write!(f, "(-inf, ")?,
        }
        match self.upper {
            Some(u) => write!(f, "{u}]"),
            None => write!(f, "+inf)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn contains_is_half_open() {
        let r = KeyRange {
            lower: Some(10),
            upper: Some(20),
        };
        assert!(!r.contains(10));
        assert!(r.contains(11));
        assert!(r.contains(20));
        assert!(!r.contains(21));
        assert!(KeyRange::ALL.contains(i64::MIN));
        assert_eq!(r.to_string(), "(10, 20]");
        assert_eq!(KeyRange::ALL.to_string(), "(-inf, +inf)");
    }

    #[test]
    fn broken_plans_are_named() {
        assert!(KeyRange::check_contiguous(&[]).is_err());
        let gap = [
            KeyRange {
                lower: None,
                upper: Some(5),
            },
            KeyRange {
                lower: Some(6),
                upper: None,
            },
        ];
        assert!(KeyRange::check_contiguous(&gap)
            .unwrap_err()
            .contains("not contiguous"));
        let closed = [KeyRange {
            lower: None,
            upper: Some(5),
        }];
        assert!(KeyRange::check_contiguous(&closed).is_err());
    }

    proptest! {
        #[test]
        fn every_key_is_in_exactly_one_window(
            mut bounds in proptest::collection::btree_set(any::<i64>(), 0..20),
            key in any::<i64>(),
        ) {
            let bounds: Vec<i64> = std::mem::take(&mut bounds).into_iter().collect();
            let plan = KeyRange::plan_from_bounds(&bounds);
            prop_assert!(KeyRange::check_contiguous(&plan).is_ok());
            prop_assert_eq!(plan.iter().filter(|r| r.contains(key)).count(), 1);
        }
    }
}
