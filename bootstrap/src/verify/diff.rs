//! The pure core of the comparator: no I/O, values in, decisions out.
//!
//! * [`plan_step`] takes one key-ordered chunk from each side (both fetched as "the next
//!   `limit` keys after `last`") and decides how far this step may compare: up to the
//!   smaller last key of the sides that returned a full chunk. Beyond it one side may hold
//!   keys the other side has not fetched yet, so those rows are left for the next step
//!   (they are fetched again; nothing is carried over, so at most two chunks are held).
//! * [`merge_join`] walks two strictly increasing `(key, row hash)` lists once and names
//!   every key that is missing in the target, extra in the target, or present on both
//!   sides with different hashes.
//! * [`field_diffs`] names the columns that differ between two detail rows.
//!
//! Keys are ordered by the server (`ORDER BY pk`); Rust only checks that what it got is
//! strictly increasing and refuses otherwise, it never re-sorts (STYLE §9). For a signed
//! integer key the server's order is the order of `i64`.
use std::cmp::Ordering;

/// One row of a chunk: the primary key and the digest of every compared column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    pub key: i64,
    pub hash: [u8; 32],
}

/// How one key differs between source and target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum KeyDiff {
    /// In the source, not in the target.
    Missing(i64),
    /// In the target, not in the source.
    Extra(i64),
    /// On both sides, with different row hashes.
    Differs(i64),
}

/// What [`merge_join`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Merge {
    /// Every differing key, in key order.
    pub diffs: Vec<KeyDiff>,
    /// Keys present on both sides (equal or not).
    pub matched: u64,
}

/// Merge-joins two strictly increasing key lists.
pub fn merge_join(source: &[KeyHash], target: &[KeyHash]) -> Merge {
    let mut out = Merge::default();
    let (mut i, mut j) = (0, 0);
    while i < source.len() && j < target.len() {
        let (s, t) = (source[i], target[j]);
        match s.key.cmp(&t.key) {
            Ordering::Less => {
                out.diffs.push(KeyDiff::Missing(s.key));
                i += 1;
            }
            Ordering::Greater => {
                out.diffs.push(KeyDiff::Extra(t.key));
                j += 1;
            }
            Ordering::Equal => {
                out.matched += 1;
                if s.hash != t.hash {
                    out.diffs.push(KeyDiff::Differs(s.key));
                }
                i += 1;
                j += 1;
            }
        }
    }
    out.diffs
        .extend(source[i..].iter().map(|s| KeyDiff::Missing(s.key)));
    out.diffs
        .extend(target[j..].iter().map(|t| KeyDiff::Extra(t.key)));
    out
}

/// One step of the walk: how far it compares and what it found there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Every key up to and including this one was compared; `None`: the key space is done.
    pub bound: Option<i64>,
    /// Source rows compared in this step.
    pub source_rows: u64,
    /// Target rows compared in this step.
    pub target_rows: u64,
    pub merge: Merge,
}

/// A chunk that the server returned out of order or outside the requested range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the {side} returned key {key} after key {after}: keys must be strictly increasing")]
pub struct OrderError {
    pub side: &'static str,
    pub key: i64,
    pub after: String,
}

/// Plans one step from the chunks `source` and `target`, each the result of "keys after
/// `last`, in key order, at most `limit` rows".
///
/// A side that returned fewer than `limit` rows is exhausted: it has no key after its last
/// one. A full side may have more keys after its last, so the step may only compare up to
/// the smallest last key among the full sides. Progress: a full side has at least one key
/// after `last` (limit >= 1), so the bound is after `last`; with no full side the step
/// compares everything and the walk ends.
pub fn plan_step(
    last: Option<i64>,
    source: &[KeyHash],
    target: &[KeyHash],
    limit: usize,
) -> Result<Step, OrderError> {
    check_order("source", last, source)?;
    check_order("target", last, target)?;
    let full_last = |rows: &[KeyHash]| {
        (limit > 0 && rows.len() >= limit)
            .then(|| rows.last().map(|r| r.key))
            .flatten()
    };
    let bound = match (full_last(source), full_last(target)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let cut = |rows: &[KeyHash]| match bound {
        Some(b) => rows.partition_point(|r| r.key <= b),
        None => rows.len(),
    };
    let (s, t) = (&source[..cut(source)], &target[..cut(target)]);
    Ok(Step {
        bound,
        source_rows: s.len() as u64,
        target_rows: t.len() as u64,
        merge: merge_join(s, t),
    })
}

fn check_order(side: &'static str, last: Option<i64>, rows: &[KeyHash]) -> Result<(), OrderError> {
    let mut prev = last;
    for r in rows {
        if prev.is_some_and(|p| r.key <= p) {
            return Err(OrderError {
                side,
                key: r.key,
                after: prev.map_or_else(String::new, |p| p.to_string()),
            });
        }
        prev = Some(r.key);
    }
    Ok(())
}

/// One column of a detail row, as the server described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldDetail {
    Null,
    Value {
        /// SHA-256 (hex) of the column's exact bytes.
        digest: String,
        /// Length of the exact bytes.
        len: u64,
        /// The first bytes (at most the preview length).
        head: Vec<u8>,
    },
}

impl FieldDetail {
    fn same_as(&self, other: &FieldDetail) -> bool {
        match (self, other) {
            (FieldDetail::Null, FieldDetail::Null) => true,
            (
                FieldDetail::Value {
                    digest: a, len: la, ..
                },
                FieldDetail::Value {
                    digest: b, len: lb, ..
                },
            ) => a == b && la == lb,
            _ => false,
        }
    }
}

/// Indexes of the columns whose values differ between two detail rows of the same key.
/// A column missing from one row (it cannot be, both come from the same column list)
/// counts as different.
pub fn field_diffs(source: &[FieldDetail], target: &[FieldDetail]) -> Vec<usize> {
    (0..source.len().max(target.len()))
        .filter(|&i| match (source.get(i), target.get(i)) {
            (Some(a), Some(b)) => !a.same_as(b),
            _ => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn rows(map: &BTreeMap<i64, u8>) -> Vec<KeyHash> {
        map.iter()
            .map(|(&key, &h)| KeyHash { key, hash: [h; 32] })
            .collect()
    }

    /// The obvious comparison the merge-join must agree with.
    fn naive(source: &BTreeMap<i64, u8>, target: &BTreeMap<i64, u8>) -> Merge {
        let mut diffs = Vec::new();
        let mut matched = 0;
        for (k, h) in source {
            match target.get(k) {
                None => diffs.push(KeyDiff::Missing(*k)),
                Some(t) => {
                    matched += 1;
                    if t != h {
                        diffs.push(KeyDiff::Differs(*k));
                    }
                }
            }
        }
        for k in target.keys() {
            if !source.contains_key(k) {
                diffs.push(KeyDiff::Extra(*k));
            }
        }
        diffs.sort_by_key(|d| match d {
            KeyDiff::Missing(k) | KeyDiff::Extra(k) | KeyDiff::Differs(k) => *k,
        });
        Merge { diffs, matched }
    }

    /// Runs the whole chunked walk over two in-memory tables, as the server would answer.
    fn walk(
        source: &BTreeMap<i64, u8>,
        target: &BTreeMap<i64, u8>,
        limit: usize,
    ) -> (Merge, u64, u64, u64) {
        let fetch = |m: &BTreeMap<i64, u8>, last: Option<i64>| {
            let range = match last {
                Some(l) => m.range(l.saturating_add(1)..),
                None => m.range(..),
            };
            let part: BTreeMap<i64, u8> = if last == Some(i64::MAX) {
                BTreeMap::new()
            } else {
                range.take(limit).map(|(k, v)| (*k, *v)).collect()
            };
            rows(&part)
        };
        let (mut last, mut all, mut steps, mut s_rows, mut t_rows) =
            (None, Merge::default(), 0, 0, 0);
        loop {
            let step = plan_step(last, &fetch(source, last), &fetch(target, last), limit)
                .expect("in order");
            steps += 1;
            s_rows += step.source_rows;
            t_rows += step.target_rows;
            all.diffs.extend(step.merge.diffs);
            all.matched += step.merge.matched;
            if let (Some(b), Some(l)) = (step.bound, last) {
                assert!(b > l, "no progress");
            }
            match step.bound {
                None => break,
                Some(b) => last = Some(b),
            }
            assert!(steps < 100_000, "walk does not end");
        }
        (all, steps, s_rows, t_rows)
    }

    fn table() -> impl Strategy<Value = BTreeMap<i64, u8>> {
        let key = prop_oneof![
            -20i64..20,
            Just(i64::MIN),
            Just(i64::MAX),
            1_000_000_000_000i64..1_000_000_000_010,
        ];
        proptest::collection::btree_map(key, 0u8..3, 0..40)
    }

    proptest! {
        #[test]
        fn merge_join_equals_naive(source in table(), target in table()) {
            prop_assert_eq!(merge_join(&rows(&source), &rows(&target)), naive(&source, &target));
        }

        #[test]
        fn chunked_walk_equals_naive(source in table(), target in table(), limit in 1usize..9) {
            let (merge, _, s_rows, t_rows) = walk(&source, &target, limit);
            prop_assert_eq!(merge, naive(&source, &target));
            prop_assert_eq!(s_rows, source.len() as u64);
            prop_assert_eq!(t_rows, target.len() as u64);
        }
    }

    #[test]
    fn bound_is_the_smaller_full_last() {
        let s = rows(&[(1, 0), (2, 0), (3, 0)].into_iter().collect());
        let t = rows(&[(1, 0), (5, 0), (9, 0)].into_iter().collect());
        let step = plan_step(None, &s, &t, 3).expect("ordered");
        assert_eq!(step.bound, Some(3));
        assert_eq!(
            step.merge.diffs,
            vec![KeyDiff::Missing(2), KeyDiff::Missing(3)]
        );
        assert_eq!((step.source_rows, step.target_rows), (3, 1));
        // Both short: everything is compared and the walk ends.
        let step = plan_step(Some(3), &[], &t[1..], 3).expect("ordered");
        assert_eq!(step.bound, None);
        assert_eq!(step.merge.diffs, vec![KeyDiff::Extra(5), KeyDiff::Extra(9)]);
    }

    #[test]
    fn out_of_order_chunks_are_refused() {
        let s = vec![
            KeyHash {
                key: 2,
                hash: [0; 32],
            },
            KeyHash {
                key: 2,
                hash: [0; 32],
            },
        ];
        let e = plan_step(None, &s, &[], 10).expect_err("duplicate key");
        assert_eq!(e.side, "source");
        let t = vec![KeyHash {
            key: 5,
            hash: [0; 32],
        }];
        assert!(plan_step(Some(5), &[], &t, 10).is_err());
    }

    #[test]
    fn fields_differ_by_digest_length_and_null() {
        let v = |d: &str, len| FieldDetail::Value {
            digest: d.into(),
            len,
            head: Vec::new(),
        };
        let a = [v("x", 1), FieldDetail::Null, v("y", 0), v("z", 2)];
        let b = [v("x", 1), v("e", 0), FieldDetail::Null, v("w", 2)];
        assert_eq!(field_diffs(&a, &b), vec![1, 2, 3]);
        assert!(field_diffs(&a, &a).is_empty());
    }
}
