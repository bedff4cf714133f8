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
//! Keys are ordered by the server (`ORDER BY` the key columns) and compared by their
//! [`SortKey`]s, whose memcmp order and equality are the server's ([`super::key`]): two
//! keys the server calls equal ('ab' and 'AB' under a `_ci` collation) are one key here
//! even though their values differ, so such a pair is a differing row (the key column's
//! field hash differs), never a missing and an extra key. Rust only checks that what it
//! got is strictly increasing and refuses otherwise, it never re-sorts (STYLE §9).
use super::key::Key;
use kernel::key::SortKey;
use std::cmp::Ordering;

/// One row of a chunk: its key and the digest of every compared column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyHash {
    pub key: Key,
    pub hash: [u8; 32],
}

/// How one key differs between source and target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyDiff {
    /// In the source, not in the target.
    Missing(Key),
    /// In the target, not in the source.
    Extra(Key),
    /// On both sides (equal sort keys), with different row hashes; each side's own key
    /// values (they differ when the server's key equality ignores a difference).
    Differs { source: Key, target: Key },
}

impl KeyDiff {
    /// The sort key of the differing key.
    pub fn sort(&self) -> &SortKey {
        match self {
            KeyDiff::Missing(k) | KeyDiff::Extra(k) => &k.sort,
            KeyDiff::Differs { source, .. } => &source.sort,
        }
    }
}

/// What [`merge_join`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Merge {
    /// Every differing key, in key order.
    pub diffs: Vec<KeyDiff>,
    /// Keys present on both sides (equal or not).
    pub matched: u64,
}

/// Merge-joins two key lists strictly increasing by sort key.
pub fn merge_join(source: &[KeyHash], target: &[KeyHash]) -> Merge {
    let mut out = Merge::default();
    let (mut i, mut j) = (0, 0);
    while i < source.len() && j < target.len() {
        let (s, t) = (&source[i], &target[j]);
        match s.key.sort.cmp(&t.key.sort) {
            Ordering::Less => {
                out.diffs.push(KeyDiff::Missing(s.key.clone()));
                i += 1;
            }
            Ordering::Greater => {
                out.diffs.push(KeyDiff::Extra(t.key.clone()));
                j += 1;
            }
            Ordering::Equal => {
                out.matched += 1;
                if s.hash != t.hash {
                    out.diffs.push(KeyDiff::Differs {
                        source: s.key.clone(),
                        target: t.key.clone(),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    out.diffs
        .extend(source[i..].iter().map(|s| KeyDiff::Missing(s.key.clone())));
    out.diffs
        .extend(target[j..].iter().map(|t| KeyDiff::Extra(t.key.clone())));
    out
}

/// One step of the walk: how far it compares and what it found there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// Every key up to and including this one was compared; `None`: the key space is done.
    pub bound: Option<Key>,
    /// Source rows compared in this step.
    pub source_rows: u64,
    /// Target rows compared in this step.
    pub target_rows: u64,
    pub merge: Merge,
}

/// A chunk that the server returned out of order or outside the requested range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {side} returned key {key} after key {after}: sort keys must be strictly increasing \
     (the server's ORDER BY and its key weights disagree, or the chunk is not after the cursor)"
)]
pub struct OrderError {
    pub side: &'static str,
    pub key: String,
    pub after: String,
}

/// Plans one step from the chunks `source` and `target`, each the result of "keys after
/// `last`, in key order, at most `limit` rows".
///
/// A side that returned fewer than `limit` rows is exhausted: it has no key after its last
/// one. A full side may have more keys after its last, so the step may only compare up to
/// the smallest last key among the full sides. Progress: a full side has at least one key
/// after `last` (limit >= 1), so the bound is after `last`; with no full side the step
/// compares everything and the walk ends. The bound is the source's key when both sides
/// end on the same sort key (the cursor then holds source values).
pub fn plan_step(
    last: Option<&Key>,
    source: &[KeyHash],
    target: &[KeyHash],
    limit: usize,
) -> Result<Step, OrderError> {
    check_order("source", last, source)?;
    check_order("target", last, target)?;
    fn full_last(rows: &[KeyHash], limit: usize) -> Option<&Key> {
        (limit > 0 && rows.len() >= limit)
            .then(|| rows.last().map(|r| &r.key))
            .flatten()
    }
    let bound = match (full_last(source, limit), full_last(target, limit)) {
        (Some(a), Some(b)) => Some(if b.sort < a.sort { b } else { a }),
        (a, b) => a.or(b),
    };
    let cut = |rows: &[KeyHash]| match bound {
        Some(b) => rows.partition_point(|r| r.key.sort <= b.sort),
        None => rows.len(),
    };
    let (s, t) = (&source[..cut(source)], &target[..cut(target)]);
    Ok(Step {
        bound: bound.cloned(),
        source_rows: s.len() as u64,
        target_rows: t.len() as u64,
        merge: merge_join(s, t),
    })
}

fn check_order(side: &'static str, last: Option<&Key>, rows: &[KeyHash]) -> Result<(), OrderError> {
    let mut prev = last;
    for r in rows {
        if prev.is_some_and(|p| r.key.sort <= p.sort) {
            return Err(OrderError {
                side,
                key: r.key.to_string(),
                after: prev.map_or_else(String::new, Key::to_string),
            });
        }
        prev = Some(&r.key);
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
    use kernel::key::{encode, frame};
    use kernel::value::SqlValue;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A model of a table keyed by (BIGINT, VARCHAR _ci): the server's sort key is the
    /// integer and the case-folded text; the row keeps its own case. The map is keyed by
    /// the server's key, so a table never holds two keys the server calls equal.
    type Table = BTreeMap<(i64, String), (String, u8)>;

    fn key(i: i64, text: &str) -> Key {
        let mut col = Vec::new();
        let mut sort = Vec::new();
        encode::signed(i, &mut col);
        frame(&col, &mut sort);
        frame(text.to_lowercase().as_bytes(), &mut sort);
        Key {
            values: vec![SqlValue::Int(i), SqlValue::Bytes(text.as_bytes().to_vec())],
            sort: SortKey(sort),
        }
    }

    fn rows(t: &Table) -> Vec<KeyHash> {
        t.iter()
            .map(|((i, _), (text, h))| KeyHash {
                key: key(*i, text),
                // The row hash covers the key columns: a case difference changes it.
                hash: blake3::hash(format!("{text}\n{h}").as_bytes()).into(),
            })
            .collect()
    }

    /// The obvious comparison the merge-join must agree with.
    fn naive(source: &Table, target: &Table) -> Merge {
        let mut diffs = Vec::new();
        let mut matched = 0;
        for (k, s) in source {
            match target.get(k) {
                None => diffs.push(KeyDiff::Missing(key(k.0, &s.0))),
                Some(t) => {
                    matched += 1;
                    if t != s {
                        diffs.push(KeyDiff::Differs {
                            source: key(k.0, &s.0),
                            target: key(k.0, &t.0),
                        });
                    }
                }
            }
        }
        for (k, t) in target {
            if !source.contains_key(k) {
                diffs.push(KeyDiff::Extra(key(k.0, &t.0)));
            }
        }
        diffs.sort_by(|a, b| a.sort().cmp(b.sort()));
        Merge { diffs, matched }
    }

    /// Runs the whole chunked walk over two in-memory tables, as the server would answer.
    fn walk(source: &Table, target: &Table, limit: usize) -> (Merge, u64, u64, u64) {
        let fetch = |t: &Table, last: Option<&Key>| {
            let all = rows(t);
            all.into_iter()
                .filter(|r| last.is_none_or(|l| r.key.sort > l.sort))
                .take(limit)
                .collect::<Vec<_>>()
        };
        let (mut last, mut all, mut steps, mut s_rows, mut t_rows) =
            (None::<Key>, Merge::default(), 0, 0, 0);
        loop {
            let (s, t) = (fetch(source, last.as_ref()), fetch(target, last.as_ref()));
            let step = plan_step(last.as_ref(), &s, &t, limit).expect("in order");
            steps += 1;
            s_rows += step.source_rows;
            t_rows += step.target_rows;
            all.diffs.extend(step.merge.diffs);
            all.matched += step.merge.matched;
            if let (Some(b), Some(l)) = (&step.bound, &last) {
                assert!(b.sort > l.sort, "no progress");
            }
            match step.bound {
                None => break,
                Some(b) => last = Some(b),
            }
            assert!(steps < 100_000, "walk does not end");
        }
        (all, steps, s_rows, t_rows)
    }

    fn table() -> impl Strategy<Value = Table> {
        let int = prop_oneof![-3i64..3, Just(i64::MIN), Just(i64::MAX)];
        // Texts that differ by case only, by a zero byte, or are prefixes of each other.
        let text = prop_oneof![
            Just("a"),
            Just("A"),
            Just("ab"),
            Just("AB"),
            Just("aB"),
            Just(""),
            Just("a\u{0}"),
            Just("b")
        ];
        proptest::collection::vec((int, text, 0u8..3), 0..40).prop_map(|rows| {
            rows.into_iter()
                .map(|(i, t, h)| ((i, t.to_lowercase()), (t.to_string(), h)))
                .collect()
        })
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

    fn one(t: &[(i64, &str)]) -> Table {
        t.iter()
            .map(|(i, s)| ((*i, s.to_lowercase()), (s.to_string(), 0)))
            .collect()
    }

    #[test]
    fn a_case_only_key_difference_is_one_differing_row() {
        let s = one(&[(1, "ab"), (2, "x")]);
        let t = one(&[(1, "AB"), (2, "x")]);
        let m = merge_join(&rows(&s), &rows(&t));
        assert_eq!(m.matched, 2);
        assert_eq!(
            m.diffs,
            vec![KeyDiff::Differs {
                source: key(1, "ab"),
                target: key(1, "AB")
            }]
        );
        // Equal weights and equal row hashes (the same bytes): no difference.
        assert!(merge_join(&rows(&s), &rows(&s)).diffs.is_empty());
    }

    #[test]
    fn composite_keys_merge_in_tuple_order() {
        let s = one(&[(1, "b"), (2, "")]);
        let t = one(&[(1, "a"), (1, "b"), (2, "a")]);
        let m = merge_join(&rows(&s), &rows(&t));
        assert_eq!(
            m.diffs,
            vec![
                KeyDiff::Extra(key(1, "a")),
                KeyDiff::Missing(key(2, "")),
                KeyDiff::Extra(key(2, "a"))
            ]
        );
        assert_eq!(m.matched, 1);
    }

    #[test]
    fn bound_is_the_smaller_full_last() {
        let s = rows(&one(&[(1, "a"), (2, "a"), (3, "a")]));
        let t = rows(&one(&[(1, "a"), (5, "a"), (9, "a")]));
        let step = plan_step(None, &s, &t, 3).expect("ordered");
        assert_eq!(step.bound, Some(key(3, "a")));
        assert_eq!(
            step.merge.diffs,
            vec![KeyDiff::Missing(key(2, "a")), KeyDiff::Missing(key(3, "a"))]
        );
        assert_eq!((step.source_rows, step.target_rows), (3, 1));
        // Both short: everything is compared and the walk ends.
        let step = plan_step(Some(&key(3, "a")), &[], &t[1..], 3).expect("ordered");
        assert_eq!(step.bound, None);
        assert_eq!(
            step.merge.diffs,
            vec![KeyDiff::Extra(key(5, "a")), KeyDiff::Extra(key(9, "a"))]
        );
    }

    #[test]
    fn out_of_order_chunks_are_refused() {
        let dup = vec![
            KeyHash {
                key: key(2, "ab"),
                hash: [0; 32],
            },
            KeyHash {
                key: key(2, "AB"),
                hash: [0; 32],
            },
        ];
        let e = plan_step(None, &dup, &[], 10).expect_err("keys equal by weight");
        assert_eq!(e.side, "source");
        assert_eq!(e.key, "(2, 'AB')");
        let t = rows(&one(&[(5, "a")]));
        assert!(plan_step(Some(&key(5, "A")), &[], &t, 10).is_err());
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
