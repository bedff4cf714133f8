//! Fixed key ranges of the window plan (DESIGN §5, §14): `(lower, upper]`, where the
//! first range is open below and the last open above, so a plan always covers the whole key
//! space (-inf, +inf) without gap or overlap.
//!
//! Why this is safe for every key type: a bound holds the typed key values the server chose
//! (for statements) together with their sort key, and membership, order and equality use
//! only the sort key, whose memcmp order is the server's (crate::key). A range whose bounds
//! are single signed integers is written in the version-1 form (`Option<i64>` bounds), the
//! bytes every job installed before composite keys has; [`KeyRange::as_v1`] decides, and
//! decoding v1 gives back the same bounds, so an old job's records, digests and chain
//! roots stay byte-identical.
use crate::key::SortKey;
use crate::value::SqlValue;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One bound of a range: the key values (in key order) and their sort key.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Bound {
    pub values: Vec<SqlValue>,
    pub sort: SortKey,
}

impl crate::codec::Versioned for Bound {
    const KIND: [u8; 4] = *b"KBND";
    const VERSION: u16 = 1;
}

impl PartialEq for Bound {
    fn eq(&self, other: &Bound) -> bool {
        self.sort == other.sort
    }
}
impl Eq for Bound {}
impl std::hash::Hash for Bound {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.sort.hash(h)
    }
}
impl PartialOrd for Bound {
    fn partial_cmp(&self, other: &Bound) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bound {
    fn cmp(&self, other: &Bound) -> std::cmp::Ordering {
        self.sort.cmp(&other.sort)
    }
}

impl Bound {
    /// The bound of a single signed integer key (the only key before DESIGN §14).
    pub fn of_i64(v: i64) -> Bound {
        Bound {
            values: vec![SqlValue::Int(v)],
            sort: SortKey::of_i64(v),
        }
    }

    /// The i64 this bound was in version 1, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self.values.as_slice() {
            [SqlValue::Int(v)] if self.sort == SortKey::of_i64(*v) => Some(*v),
            _ => None,
        }
    }
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::key::show_values(&self.values))
    }
}

/// A half-open key range `(lower, upper]`; `None` means unbounded on that side.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyRange {
    pub lower: Option<Bound>,
    pub upper: Option<Bound>,
}

/// A range in its version-1 form: bounds of the single signed integer primary key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyRangeV1 {
    pub lower: Option<i64>,
    pub upper: Option<i64>,
}

impl From<KeyRangeV1> for KeyRange {
    fn from(r: KeyRangeV1) -> KeyRange {
        KeyRange {
            lower: r.lower.map(Bound::of_i64),
            upper: r.upper.map(Bound::of_i64),
        }
    }
}

impl KeyRange {
    /// The whole key space.
    pub const ALL: KeyRange = KeyRange {
        lower: None,
        upper: None,
    };

    /// True when `key` lies in `(lower, upper]`.
    pub fn contains(&self, key: &SortKey) -> bool {
        self.lower.as_ref().is_none_or(|l| *key > l.sort)
            && self.upper.as_ref().is_none_or(|u| *key <= u.sort)
    }

    /// True when the range holds no key at all (`lower >= upper`).
    pub fn is_empty(&self) -> bool {
        matches!((&self.lower, &self.upper), (Some(l), Some(u)) if l >= u)
    }

    /// The version-1 form, when both bounds are single signed integers (or open).
    pub fn as_v1(&self) -> Option<KeyRangeV1> {
        let side = |b: &Option<Bound>| match b {
            None => Some(None),
            Some(b) => b.as_i64().map(Some),
        };
        Some(KeyRangeV1 {
            lower: side(&self.lower)?,
            upper: side(&self.upper)?,
        })
    }

    /// Contiguous ranges from sorted, strictly increasing upper bounds: n bounds give
    /// n + 1 ranges, the first open below and the last open above.
    pub fn plan_from_bounds(bounds: &[Bound]) -> Vec<KeyRange> {
        let mut out = Vec::with_capacity(bounds.len() + 1);
        let mut lower = None;
        for b in bounds {
            out.push(KeyRange {
                lower,
                upper: Some(b.clone()),
            });
            lower = Some(b.clone());
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
            let (a, b) = (&pair[0], &pair[1]);
            match (&a.upper, &b.lower) {
                (Some(u), Some(l)) if u == l && b.upper.as_ref().is_none_or(|bu| bu > l) => {}
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
        match &self.lower {
            Some(l) => write!(f, "({l}, ")?,
            None => write!(f, "(-inf, ")?,
        }
        match &self.upper {
            Some(u) => write!(f, "{u}]"),
            None => write!(f, "+inf)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(lower: Option<i64>, upper: Option<i64>) -> KeyRange {
        KeyRangeV1 { lower, upper }.into()
    }

    #[test]
    fn contains_is_half_open() {
        let k = SortKey::of_i64;
        let x = r(Some(10), Some(20));
        assert!(!x.contains(&k(10)));
        assert!(x.contains(&k(11)));
        assert!(x.contains(&k(20)));
        assert!(!x.contains(&k(21)));
        assert!(KeyRange::ALL.contains(&k(i64::MIN)));
        assert_eq!(x.to_string(), "(10, 20]");
        assert_eq!(KeyRange::ALL.to_string(), "(-inf, +inf)");
        assert!(r(Some(5), Some(5)).is_empty());
    }

    #[test]
    fn integer_ranges_keep_their_v1_form_and_others_do_not() {
        let x = r(Some(-3), None);
        assert_eq!(
            x.as_v1(),
            Some(KeyRangeV1 {
                lower: Some(-3),
                upper: None
            })
        );
        assert_eq!(KeyRange::from(x.as_v1().unwrap()), x);
        let mut u = x.clone();
        u.lower = Some(Bound {
            values: vec![SqlValue::UInt(3)],
            sort: SortKey(vec![0, 0xFF, 3, 0, 1]),
        });
        assert_eq!(u.as_v1(), None);
    }

    #[test]
    fn broken_plans_are_named() {
        assert!(KeyRange::check_contiguous(&[]).is_err());
        let gap = [r(None, Some(5)), r(Some(6), None)];
        assert!(KeyRange::check_contiguous(&gap)
            .unwrap_err()
            .contains("not contiguous"));
        assert!(KeyRange::check_contiguous(&[r(None, Some(5))]).is_err());
    }

    proptest! {
        #[test]
        fn every_key_is_in_exactly_one_window(
            bounds in proptest::collection::btree_set(any::<i64>(), 0..20),
            key in any::<i64>(),
        ) {
            let bounds: Vec<Bound> = bounds.into_iter().map(Bound::of_i64).collect();
            let plan = KeyRange::plan_from_bounds(&bounds);
            prop_assert!(KeyRange::check_contiguous(&plan).is_ok());
            let key = SortKey::of_i64(key);
            prop_assert_eq!(plan.iter().filter(|r| r.contains(&key)).count(), 1);
        }
    }
}
