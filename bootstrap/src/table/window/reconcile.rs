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
use kernel::key::{Keyer, SortKey};
use kernel::range::KeyRange;
use kernel::value::Row;
use std::collections::BTreeMap;

/// The window's state at HIGH, in key order (by sort key: the server's order), and what
/// was folded in.
#[derive(Debug, PartialEq)]
pub struct Folded {
    pub rows: BTreeMap<SortKey, Row>,
    /// Changes whose old or new key lies in the range.
    pub changes_folded: u64,
    /// blake3 over the identities of the folded changes, in order.
    pub changes_digest: Digest,
}

/// A change the fold cannot place: never skipped, always a definite error.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum FoldError {
    #[error("change at {file}:{pos} row {row} ({op:?}) lacks the {image} image or its key{why}")]
    ChangeKey {
        file: String,
        pos: u64,
        row: u32,
        op: Op,
        image: &'static str,
        why: String,
    },
    #[error("RAW row with key {key:?} lies outside the window {range}")]
    OutOfRange { key: SortKey, range: KeyRange },
}

/// Folds `changes` (in binlog order) over `raw` (RAW rows with their sort keys) for the
/// window `range`; `keyer` gives the sort keys of the changes' images (the weights of
/// character keys asked before).
pub fn fold(
    range: &KeyRange,
    keyer: &Keyer,
    raw: impl IntoIterator<Item = (SortKey, Row)>,
    changes: &[Change],
) -> Result<Folded, FoldError> {
    let mut rows = BTreeMap::new();
    for (key, row) in raw {
        if !range.contains(&key) {
            return Err(FoldError::OutOfRange {
                key,
                range: range.clone(),
            });
        }
        rows.insert(key, row);
    }
    let mut hasher = blake3::Hasher::new();
    let mut folded = 0;
    for change in changes {
        if apply(&mut rows, range, keyer, change)? {
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

/// Applies one change by key and full image; returns whether it touched the range. An
/// update whose images have one sort key ('a' -> 'A' under a _ci collation) removes and
/// re-inserts that key: the new bytes win.
fn apply(
    rows: &mut BTreeMap<SortKey, Row>,
    range: &KeyRange,
    keyer: &Keyer,
    change: &Change,
) -> Result<bool, FoldError> {
    let old = image_key(change, change.before.as_ref(), keyer, "before")?;
    let new = image_key(change, change.after.as_ref(), keyer, "after")?;
    let mut touched = false;
    if let Some(k) = old.filter(|k| range.contains(k)) {
        rows.remove(&k);
        touched = true;
    }
    if let (Some(k), Some(after)) = (new.filter(|k| range.contains(k)), &change.after) {
        rows.insert(k, after.clone());
        touched = true;
    }
    Ok(touched)
}

/// The sort key of the image the op must carry (None when the op has no such image).
fn image_key(
    change: &Change,
    image: Option<&Row>,
    keyer: &Keyer,
    which: &'static str,
) -> Result<Option<SortKey>, FoldError> {
    let required = match which {
        "before" => change.id.op != Op::Insert,
        _ => change.id.op != Op::Delete,
    };
    if !required {
        return Ok(None);
    }
    let err = |why: String| FoldError::ChangeKey {
        file: change.id.file.clone(),
        pos: change.id.event_pos,
        row: change.id.row,
        op: change.id.op,
        image: which,
        why,
    };
    let row = image.ok_or_else(|| err(String::new()))?;
    keyer
        .sort_key(row)
        .map(Some)
        .map_err(|e| err(format!(": {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::change::ChangeId;
    use kernel::range::KeyRangeV1;
    use kernel::schema::{ColumnDef, ColumnKind, SealedSchema, PRIMARY};
    use kernel::value::SqlValue;
    use proptest::prelude::*;

    fn keyer() -> Keyer {
        let col = |name: &str| ColumnDef::plain(name, ColumnKind::BigInt, "bigint");
        Keyer::of(&SealedSchema {
            database: "d".into(),
            table: "t".into(),
            columns: vec![col("k"), col("v")],
            key: vec![0],
            key_name: PRIMARY.into(),
        })
        .unwrap()
    }

    fn k(v: i64) -> SortKey {
        SortKey::of_i64(v)
    }

    fn r(lower: Option<i64>, upper: Option<i64>) -> KeyRange {
        KeyRangeV1 { lower, upper }.into()
    }

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

    /// RAW rows with their sort keys, as the read gives them.
    fn keyed(rows: Vec<Row>) -> Vec<(SortKey, Row)> {
        let k = keyer();
        rows.into_iter()
            .map(|r| (k.sort_key(&r).unwrap(), r))
            .collect()
    }

    fn range() -> KeyRange {
        r(Some(10), Some(20))
    }

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
        let f = fold(&range(), &keyer(), keyed(raw), &changes).unwrap();
        assert_eq!(
            f.rows.into_iter().collect::<Vec<_>>(),
            vec![(k(15), row(15, 9))]
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
        let f = fold(&range(), &keyer(), keyed(vec![row(13, 2)]), &changes).unwrap();
        assert_eq!(f.rows.get(&k(13)), Some(&row(13, 2)));
        assert_eq!(f.rows.len(), 1);
    }

    #[test]
    fn missing_images_and_stray_raw_rows_are_errors() {
        let bad = change(1, Op::Update, None, Some(row(13, 1)));
        assert!(matches!(
            fold(&range(), &keyer(), vec![], &[bad]),
            Err(FoldError::ChangeKey {
                image: "before",
                ..
            })
        ));
        assert!(matches!(
            fold(&range(), &keyer(), keyed(vec![row(99, 0)]), &[]),
            Err(FoldError::OutOfRange { key, .. }) if key == k(99)
        ));
        // A RAW row without a key never reaches the fold: the read refuses it.
        assert!(matches!(
            keyer().sort_key(&vec![SqlValue::Null]),
            Err(kernel::key::KeyError::Null { .. })
        ));
    }

    #[test]
    fn digest_depends_on_folded_changes_only() {
        let inside = change(1, Op::Insert, None, Some(row(13, 1)));
        let outside = change(2, Op::Insert, None, Some(row(99, 1)));
        let a = fold(&range(), &keyer(), vec![], std::slice::from_ref(&inside)).unwrap();
        let b = fold(&range(), &keyer(), vec![], &[inside, outside]).unwrap();
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
            let range = r(lower, upper);
            let (states, changes) = simulate(&init, &ops);
            let s = s_pick.index(states.len());
            let raw: Vec<Row> = states[s]
                .iter()
                .filter(|(key, _)| range.contains(&k(**key)))
                .map(|(key, v)| row(*key, *v))
                .collect();
            let expected: BTreeMap<SortKey, Row> = states[states.len() - 1]
                .iter()
                .filter(|(key, _)| range.contains(&k(**key)))
                .map(|(key, v)| (k(*key), row(*key, *v)))
                .collect();
            let f = fold(&range, &keyer(), keyed(raw), &changes).unwrap();
            prop_assert_eq!(f.rows, expected);
        }
    }
}
