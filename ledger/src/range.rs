//! Key ranges of the fixed range plan: the kernel's [`KeyRange`] `(lower, upper]` on the
//! signed integer primary key, `None` meaning unbounded (DESIGN §5), plus two helpers.
pub use kernel::range::KeyRange;

/// `(lower, upper]`.
pub fn range(lower: Option<i64>, upper: Option<i64>) -> KeyRange {
    KeyRange { lower, upper }
}

/// True when the range holds no key at all (`lower >= upper`).
pub fn is_empty(r: &KeyRange) -> bool {
    matches!((r.lower, r.upper), (Some(l), Some(u)) if l >= u)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_open_below_closed_above() {
        let r = range(Some(10), Some(20));
        assert!(!r.contains(10));
        assert!(r.contains(11));
        assert!(r.contains(20));
        assert!(!r.contains(21));
        assert!(KeyRange::ALL.contains(i64::MIN));
        assert!(is_empty(&range(Some(5), Some(5))));
    }
}
