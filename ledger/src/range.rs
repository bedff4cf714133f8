//! Key ranges of the fixed range plan: `(lower, upper]` on the signed integer primary key,
//! `None` meaning unbounded (DESIGN §5). Keys are compared as i64, the sealed key type.
use serde::{Deserialize, Serialize};
use std::fmt;

/// `(lower, upper]`; `lower = None` is open below, `upper = None` open above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KeyRange {
    pub lower: Option<i64>,
    pub upper: Option<i64>,
}

impl KeyRange {
    /// The whole key space `(-inf, +inf)`.
    pub const ALL: KeyRange = KeyRange {
        lower: None,
        upper: None,
    };

    /// `(lower, upper]`.
    pub fn new(lower: Option<i64>, upper: Option<i64>) -> KeyRange {
        KeyRange { lower, upper }
    }

    /// True when `key` lies in the range.
    pub fn contains(&self, key: i64) -> bool {
        self.lower.is_none_or(|l| key > l) && self.upper.is_none_or(|u| key <= u)
    }

    /// True when the range holds no key at all (`lower >= upper`).
    pub fn is_empty(&self) -> bool {
        matches!((self.lower, self.upper), (Some(l), Some(u)) if l >= u)
    }
}

impl fmt::Display for KeyRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.lower.map_or("-inf".to_string(), |v| v.to_string());
        let u = self.upper.map_or("+inf".to_string(), |v| v.to_string());
        write!(f, "({l}, {u}]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_open_below_closed_above() {
        let r = KeyRange::new(Some(10), Some(20));
        assert!(!r.contains(10));
        assert!(r.contains(11));
        assert!(r.contains(20));
        assert!(!r.contains(21));
        assert!(KeyRange::ALL.contains(i64::MIN));
        assert!(KeyRange::new(Some(5), Some(5)).is_empty());
        assert_eq!(KeyRange::new(None, Some(3)).to_string(), "(-inf, 3]");
    }
}
