//! Key ranges of the fixed range plan: the kernel's [`KeyRange`] `(lower, upper]` over sort
//! keys, `None` meaning unbounded (DESIGN §5, §14), plus a helper for integer bounds.
pub use kernel::range::{Bound, KeyRange, KeyRangeV1};

/// `(lower, upper]` over a single signed integer key.
pub fn range(lower: Option<i64>, upper: Option<i64>) -> KeyRange {
    KeyRangeV1 { lower, upper }.into()
}

/// True when the range holds no key at all (`lower >= upper`).
pub fn is_empty(r: &KeyRange) -> bool {
    r.is_empty()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::key::SortKey;

    #[test]
    fn bounds_are_open_below_closed_above() {
        let r = range(Some(10), Some(20));
        assert!(!r.contains(&SortKey::of_i64(10)));
        assert!(r.contains(&SortKey::of_i64(11)));
        assert!(r.contains(&SortKey::of_i64(20)));
        assert!(!r.contains(&SortKey::of_i64(21)));
        assert!(KeyRange::ALL.contains(&SortKey::of_i64(i64::MIN)));
        assert!(is_empty(&range(Some(5), Some(5))));
    }
}
