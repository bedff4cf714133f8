//! The reconcile fold of a window (DESIGN §5 step 6): RAW rows read under a read view
//! plus the changes L holds between the window's LOW and HIGH give the window's state at
//! HIGH.
//!
//! Why it is safe (DESIGN §11 I1): let S be the read view's point, LOW <= S <= HIGH. For a
//! key that no change in (LOW, HIGH] touches, its value at S equals its value at HIGH, so
//! the RAW row (or its absence) is right. For a key that some change touches, its state at
//! HIGH is decided by the LAST such change alone: a full after-image (insert, update, or
//! the new key of a key-changing update) or an absence (delete, or the old key of a
//! key-changing update). Folding every change in binlog order over the RAW rows, by key
//! and full image only, ends at exactly that state, whatever S was: changes before S are
//! re-applied harmlessly because later ones override them. Keys outside the range are
//! ignored, so a key-changing update that moves a row into or out of the range adds or
//! removes it here and is handled by the other window's own fold.
//! The property test below checks this for random tables, changes and read points.
use kernel::change::{Change, Op};
use kernel::ids::Digest;
use kernel::range::KeyRange;
use kernel::value::Row;
use std::collections::BTreeMap;

/// The window's state at HIGH, in key order, and what was folded in.
#[derive(Debug, PartialEq)]
pub struct Folded {
    pub rows: BTreeMap<i64, Row>,
    /// Changes whose old or new key lies in the range.
    pub changes_folded: u64,
    /// blake3 over the identities of the folded changes, in order.
    pub changes_digest: Digest,
}

/// A change the fold cannot place: never skipped, always a definite error.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FoldError {
    #[error("RAW row has no integer key in column #{pk}")]
    RawKey { pk: usize },
    #[error("change at {file}:{pos} row {row} ({op:?}) lacks the {image} image or its key")]
    ChangeKey {
        file: String,
        pos: u64,
        row: u32,
        op: Op,
        image: &'static str,
    },
    #[error("RAW row with key {key} lies outside the window {range}")]
    OutOfRange { key: i64, range: KeyRange },
}

/// Folds `changes` (in binlog order) over `raw` for the window `range`; `pk` is the
/// primary-key column's index in every row.
pub fn fold(
    range: KeyRange,
    pk: usize,
    raw: impl IntoIterator<Item = Row>,
    changes: &[Change],
) -> Result<Folded, FoldError> {
    let mut rows = BTreeMap::new();
    for row in raw {
        let key = row_key(&row, pk).ok_or(FoldError::RawKey { pk })?;
        if !range.contains(key) {
            return Err(FoldError::OutOfRange { key, range });
        }
        rows.insert(key, row);
    }
    let mut hasher = blake3::Hasher::new();
    let mut folded = 0;
    for change in changes {
        if apply(&mut rows, range, pk, change)? {
            folded += 1;
            hasher.update(&kernel::codec::to_canonical(&change.id));
        }
    }
    Ok(Folded {
        rows,
        changes_folded: folded,
        changes_digest: Digest(*hasher.finalize().as_bytes()),
    })
}

/// Applies one change by key and full image; returns whether it touched the range.
fn apply(
    rows: &mut BTreeMap<i64, Row>,
    range: KeyRange,
    pk: usize,
    change: &Change,
) -> Result<bool, FoldError> {
    let old = image_key(change, change.before.as_ref(), pk, "before")?;
    let new = image_key(change, change.after.as_ref(), pk, "after")?;
    let mut touched = false;
    if let Some(k) = old.filter(|k| range.contains(*k)) {
        rows.remove(&k);
        touched = true;
    }
    if let (Some(k), Some(after)) = (new.filter(|k| range.contains(*k)), &change.after) {
        rows.insert(k, after.clone());
        touched = true;
    }
    Ok(touched)
}

/// The key of the image the op must carry (None when the op has no such image).
fn image_key(
    change: &Change,
    image: Option<&Row>,
    pk: usize,
    which: &'static str,
) -> Result<Option<i64>, FoldError> {
    let required = match which {
        "before" => change.id.op != Op::Insert,
        _ => change.id.op != Op::Delete,
    };
    if !required {
        return Ok(None);
    }
    image
        .and_then(|r| row_key(r, pk))
        .map(Some)
        .ok_or_else(|| FoldError::ChangeKey {
            file: change.id.file.clone(),
            pos: change.id.event_pos,
            row: change.id.row,
            op: change.id.op,
            image: which,
        })
}

fn row_key(row: &Row, pk: usize) -> Option<i64> {
    row.get(pk)?.as_key()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::change::ChangeId;
    use kernel::value::SqlValue;
    use proptest::prelude::*;

    fn row(k: i64, v: i64) -> Row {
        vec![SqlValue::Int(k), SqlValue::Int(v)]
    }

    fn change(n: u32, op: Op, before: Option<Row>, after: Option<Row>) -> Change {
        Change {
            id: ChangeId {
                lineage: Digest([0; 32]),
                schema: "d".into(),
                table: "t".into(),
                file: "mysql-bin.000001".into(),
                event_pos: 100 + u64::from(n),
                row: 0,
                op,
            },
            before,
            after,
        }
    }

    const R: KeyRange = KeyRange {
        lower: Some(10),
        upper: Some(20),
    };

    #[test]
    fn key_change_moves_rows_in_and_out() {
        let raw = vec![row(11, 1), row(12, 2)];
        let changes = vec![
            // 11 leaves the range (-> 150), 5 enters it (-> 15), 12 is deleted.
            change(1, Op::Update, Some(row(11, 1)), Some(row(150, 1))),
            change(2, Op::Update, Some(row(5, 9)), Some(row(15, 9))),
            change(3, Op::Delete, Some(row(12, 2)), None),
            change(4, Op::Insert, None, Some(row(30, 3))),
        ];
        let f = fold(R, 0, raw, &changes).unwrap();
        assert_eq!(
            f.rows.into_iter().collect::<Vec<_>>(),
            vec![(15, row(15, 9))]
        );
        assert_eq!(f.changes_folded, 3);
    }

    #[test]
    fn later_after_image_wins_and_delete_of_absent_is_fine() {
        let changes = vec![
            change(1, Op::Insert, None, Some(row(13, 1))),
            change(2, Op::Update, Some(row(13, 1)), Some(row(13, 2))),
            change(3, Op::Delete, Some(row(14, 0)), None),
        ];
        let f = fold(R, 0, vec![row(13, 2)], &changes).unwrap();
        assert_eq!(f.rows.get(&13), Some(&row(13, 2)));
        assert_eq!(f.rows.len(), 1);
    }

    #[test]
    fn missing_images_and_stray_raw_rows_are_errors() {
        let bad = change(1, Op::Update, None, Some(row(13, 1)));
        assert!(matches!(
            fold(R, 0, vec![], &[bad]),
            Err(FoldError::ChangeKey {
                image: "before",
                ..
            })
        ));
        assert!(matches!(
            fold(R, 0, vec![row(99, 0)], &[]),
            Err(FoldError::OutOfRange { key: 99, .. })
        ));
        assert!(matches!(
            fold(R, 0, vec![vec![SqlValue::Null]], &[]),
            Err(FoldError::RawKey { pk: 0 })
        ));
    }

    #[test]
    fn digest_depends_on_folded_changes_only() {
        let inside = change(1, Op::Insert, None, Some(row(13, 1)));
        let outside = change(2, Op::Insert, None, Some(row(99, 1)));
        let a = fold(R, 0, vec![], std::slice::from_ref(&inside)).unwrap();
        let b = fold(R, 0, vec![], &[inside, outside]).unwrap();
        assert_eq!(a.changes_digest, b.changes_digest);
        assert_eq!(a.rows, b.rows);
    }

    /// A random change against the current model state.
    fn arb_ops() -> impl Strategy<Value = Vec<(u8, i64, i64, i64)>> {
        proptest::collection::vec((0u8..4, 0i64..40, 0i64..40, any::<i64>()), 0..60)
    }

    /// Applies ops to a model table, producing the binlog-like change list.
    fn simulate(
        init: &BTreeMap<i64, i64>,
        ops: &[(u8, i64, i64, i64)],
    ) -> (Vec<BTreeMap<i64, i64>>, Vec<Change>) {
        let mut state = init.clone();
        let mut states = vec![state.clone()];
        let mut changes = Vec::new();
        for (n, &(kind, a, b, v)) in ops.iter().enumerate() {
            let n = n as u32;
            let c = match kind {
                0 if !state.contains_key(&a) => {
                    state.insert(a, v);
                    Some(change(n, Op::Insert, None, Some(row(a, v))))
                }
                1 if state.contains_key(&a) => {
                    let old = state[&a];
                    state.insert(a, v);
                    Some(change(n, Op::Update, Some(row(a, old)), Some(row(a, v))))
                }
                2 if state.contains_key(&a) && !state.contains_key(&b) => {
                    let old = state.remove(&a).unwrap_or_default();
                    state.insert(b, v);
                    Some(change(n, Op::Update, Some(row(a, old)), Some(row(b, v))))
                }
                3 if state.contains_key(&a) => {
                    let old = state.remove(&a).unwrap_or_default();
                    Some(change(n, Op::Delete, Some(row(a, old)), None))
                }
                _ => None,
            };
            if let Some(c) = c {
                changes.push(c);
                states.push(state.clone());
            }
        }
        (states, changes)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// For any table, change sequence and read point S in [LOW, HIGH], the fold of
        /// RAW-at-S with all changes equals the range's state at HIGH.
        #[test]
        fn fold_equals_state_at_high(
            init in proptest::collection::btree_map(0i64..40, any::<i64>(), 0..30),
            ops in arb_ops(),
            s_pick in any::<prop::sample::Index>(),
            lower in proptest::option::of(0i64..40),
            upper in proptest::option::of(0i64..40),
        ) {
            prop_assume!(matches!((lower, upper), (Some(l), Some(u)) if u > l) || lower.is_none() || upper.is_none());
            let range = KeyRange { lower, upper };
            let (states, changes) = simulate(&init, &ops);
            let s = s_pick.index(states.len());
            let raw: Vec<Row> = states[s]
                .iter()
                .filter(|(k, _)| range.contains(**k))
                .map(|(k, v)| row(*k, *v))
                .collect();
            let expected: BTreeMap<i64, Row> = states[states.len() - 1]
                .iter()
                .filter(|(k, _)| range.contains(**k))
                .map(|(k, v)| (*k, row(*k, *v)))
                .collect();
            let f = fold(range, 0, raw, &changes).unwrap();
            prop_assert_eq!(f.rows, expected);
        }
    }
}
