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
//! The fold is computed as the changes' net effect per key ([`net_effect`]: the last
//! change touching a key decides it) merged into the RAW rows ([`merge`]): a RAW row whose
//! key some change touches takes that key's net effect, the others stay, and keys only the
//! changes hold are added, which is the same state. The RAW rows keep a print of their
//! sort key, not the key ([`Raw`]); the exact key of a row a print picks is compared.
//! The property test below checks this for random tables, changes and read points.
use kernel::change::{Change, Op};
use kernel::ids::Digest;
use kernel::key::{KeyError, Keyer, SortKey};
use kernel::range::KeyRange;
use kernel::value::Row;
use std::collections::{BTreeMap, HashSet};
use std::hash::{Hash, Hasher};

/// The window's state at HIGH and what was folded in. `rows` are the RAW rows in the
/// server's key order, each replaced in place by its key's last change or removed by it;
/// keys the changes add that no RAW row has follow, in key order (the order of a window's
/// rows is not evidence: nothing reads it, DESIGN §5).
#[derive(Debug, PartialEq)]
pub struct Folded {
    pub rows: Vec<Row>,
    /// Changes whose old or new key lies in the range.
    pub changes_folded: u64,
    /// blake3 over the identities of the folded changes, in order.
    pub changes_digest: Digest,
}

/// A change or a RAW row the fold cannot place: never skipped, always a definite error.
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
    #[error(
        "RAW row with key {key:?} does not follow the row before it ({previous:?}): the read \
         is not in the server's key order or holds a key twice"
    )]
    OutOfOrder { key: SortKey, previous: SortKey },
    #[error("a RAW row a change touches has no sort key: {0}")]
    RawKey(KeyError),
}

/// The RAW rows of a window as the read gives them, in the server's key order, each with
/// the print of its sort key: 8 bytes a row instead of the key (a character key's weights
/// are tens of bytes a row, and were the window's largest cost in memory after its rows).
///
/// Why a print is enough: a print only picks the RAW rows a change may touch. Equal sort
/// keys have equal prints, so no touched row is missed; a picked row's exact sort key is
/// computed again ([`merge`]) and compared, so a print shared by two keys changes nothing.
/// The read checks each page's keys against the range and the previous key before their
/// prints are kept ([`Raw::push`]), so the rows are inside the window, each key once.
#[derive(Debug, Default)]
pub struct Raw {
    rows: Vec<Row>,
    prints: Vec<u64>,
    last: Option<SortKey>,
}

impl Raw {
    /// Adds a page's rows with their sort keys (same order): each key inside `range` and
    /// strictly after the key before it.
    pub fn push(
        &mut self,
        range: &KeyRange,
        keys: Vec<SortKey>,
        rows: Vec<Row>,
    ) -> Result<(), FoldError> {
        debug_assert_eq!(keys.len(), rows.len());
        let mut prints = Vec::with_capacity(keys.len());
        let mut last = self.last.clone();
        for key in keys {
            let refused = if !range.contains(&key) {
                Some(FoldError::OutOfRange {
                    key,
                    range: range.clone(),
                })
            } else {
                match last.take() {
                    Some(previous) if previous >= key => {
                        Some(FoldError::OutOfOrder { key, previous })
                    }
                    _ => {
                        prints.push(print(&key));
                        last = Some(key);
                        None
                    }
                }
            };
            if let Some(e) = refused {
                return Err(e); // the attempt ends: nothing of this page is kept
            }
        }
        self.last = last;
        self.prints.extend(prints);
        self.rows.extend(rows);
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The RAW rows whose print is one of the net effect's keys' (a superset of the rows
    /// the changes touch): their keys' weights must be cached before [`merge`].
    pub fn touched<'a>(&'a self, net: &'a Net) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows
            .iter()
            .zip(&self.prints)
            .filter(|(_, p)| net.prints.contains(p))
            .map(|(r, _)| r)
    }
}

/// The print of a sort key: 64 bits of SipHash (std's, fixed keys). Prints live only in
/// memory for one attempt's fold, so the hash need not be stable across builds.
fn print(key: &SortKey) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.0.hash(&mut h);
    h.finish()
}

/// The net effect of a window's changes: per key in the range, its last change's full
/// image or its absence (the state at HIGH of every key some change touches, I1).
#[derive(Debug)]
pub struct Net {
    effect: BTreeMap<SortKey, Option<Row>>,
    prints: HashSet<u64>,
    changes_folded: u64,
    changes_digest: Digest,
}

/// Folds `changes` (in binlog order) into their net effect on `range`; `keyer` gives the
/// sort keys of the changes' images (the weights of character keys asked before).
pub fn net_effect(range: &KeyRange, keyer: &Keyer, changes: &[Change]) -> Result<Net, FoldError> {
    let mut effect = BTreeMap::new();
    let mut hasher = blake3::Hasher::new();
    let mut changes_folded = 0;
    for change in changes {
        if apply(&mut effect, range, keyer, change)? {
            changes_folded += 1;
            hasher.update(&kernel::codec::to_canonical(&change.id));
        }
    }
    Ok(Net {
        prints: effect.keys().map(print).collect(),
        effect,
        changes_folded,
        changes_digest: Digest(*hasher.finalize().as_bytes()),
    })
}

/// The window's state at HIGH: each RAW row a change touches takes its key's net effect in
/// place (its exact sort key compared, the weights of [`Raw::touched`] cached), the
/// others stay as read; the keys the changes add follow.
pub fn merge(keyer: &Keyer, raw: Raw, mut net: Net) -> Result<Folded, FoldError> {
    let mut rows = Vec::with_capacity(raw.rows.len() + net.effect.len());
    for (row, p) in raw.rows.into_iter().zip(raw.prints) {
        if !net.prints.contains(&p) {
            rows.push(row);
            continue;
        }
        let key = keyer.sort_key(&row).map_err(FoldError::RawKey)?;
        match net.effect.remove(&key) {
            None => rows.push(row),
            Some(Some(image)) => rows.push(image),
            Some(None) => {}
        }
    }
    rows.extend(net.effect.into_values().flatten());
    Ok(Folded {
        rows,
        changes_folded: net.changes_folded,
        changes_digest: net.changes_digest,
    })
}

/// [`net_effect`] then [`merge`], for a key whose sort keys need no server weights (or
/// whose weights are cached).
pub fn fold(
    range: &KeyRange,
    keyer: &Keyer,
    raw: Raw,
    changes: &[Change],
) -> Result<Folded, FoldError> {
    let net = net_effect(range, keyer, changes)?;
    merge(keyer, raw, net)
}

/// Applies one change to the net effect by key and full image; returns whether it touched
/// the range. An update whose images have one sort key ('a' -> 'A' under a _ci collation)
/// removes and re-adds that key: the new bytes win.
fn apply(
    effect: &mut BTreeMap<SortKey, Option<Row>>,
    range: &KeyRange,
    keyer: &Keyer,
    change: &Change,
) -> Result<bool, FoldError> {
    let old = image_key(change, change.before.as_ref(), keyer, "before")?;
    let new = image_key(change, change.after.as_ref(), keyer, "after")?;
    let mut touched = false;
    if let Some(k) = old.filter(|k| range.contains(k)) {
        effect.insert(k, None);
        touched = true;
    }
    if let (Some(k), Some(after)) = (new.filter(|k| range.contains(k)), &change.after) {
        effect.insert(k, Some(after.clone()));
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

    /// RAW rows of `range` as the read gives them (one page).
    fn raw_in(range: &KeyRange, rows: Vec<Row>) -> Result<Raw, FoldError> {
        let k = keyer();
        let keys = rows.iter().map(|r| k.sort_key(r).unwrap()).collect();
        let mut raw = Raw::default();
        raw.push(range, keys, rows)?;
        Ok(raw)
    }

    fn keyed(rows: Vec<Row>) -> Raw {
        raw_in(&range(), rows).unwrap()
    }

    /// The folded rows by sort key; no key twice.
    fn by_key(rows: Vec<Row>) -> BTreeMap<SortKey, Row> {
        let n = rows.len();
        let map: BTreeMap<SortKey, Row> = rows
            .into_iter()
            .map(|r| (keyer().sort_key(&r).unwrap(), r))
            .collect();
        assert_eq!(map.len(), n, "a key twice in the folded rows");
        map
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
        assert_eq!(f.rows, vec![row(15, 9)]);
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
        assert_eq!(f.rows, vec![row(13, 2)]);
    }

    #[test]
    fn missing_images_and_stray_raw_rows_are_errors() {
        let bad = change(1, Op::Update, None, Some(row(13, 1)));
        assert!(matches!(
            fold(&range(), &keyer(), Raw::default(), &[bad]),
            Err(FoldError::ChangeKey {
                image: "before",
                ..
            })
        ));
        assert!(matches!(
            raw_in(&range(), vec![row(99, 0)]),
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
        let a = fold(
            &range(),
            &keyer(),
            Raw::default(),
            std::slice::from_ref(&inside),
        )
        .unwrap();
        let b = fold(&range(), &keyer(), Raw::default(), &[inside, outside]).unwrap();
        assert_eq!(a.changes_digest, b.changes_digest);
        assert_eq!(a.rows, b.rows);
    }

    #[test]
    fn raw_keys_must_ascend_strictly_across_pages() {
        let k = keyer();
        let page = |rows: Vec<Row>| {
            let keys = rows.iter().map(|r| k.sort_key(r).unwrap()).collect();
            (keys, rows)
        };
        let mut raw = Raw::default();
        let (keys, rows) = page(vec![row(11, 0), row(12, 0)]);
        raw.push(&range(), keys, rows).unwrap();
        // The next page starts at or before the last key: a key twice, or out of order.
        for bad in [12, 11] {
            let (keys, rows) = page(vec![row(bad, 0)]);
            let e = raw.push(&range(), keys, rows).unwrap_err();
            assert!(
                matches!(e, FoldError::OutOfOrder { ref key, .. } if *key == k.sort_key(&row(bad, 0)).unwrap()),
                "{e}"
            );
        }
        let (keys, rows) = page(vec![row(14, 0), row(13, 0)]);
        assert!(matches!(
            Raw::default().push(&range(), keys, rows),
            Err(FoldError::OutOfOrder { .. })
        ));
    }

    #[test]
    fn touched_rows_keep_their_place_and_added_keys_follow_in_key_order() {
        let raw = keyed(vec![row(11, 1), row(13, 3), row(15, 5)]);
        let changes = vec![
            change(1, Op::Insert, None, Some(row(19, 9))),
            change(2, Op::Insert, None, Some(row(12, 2))),
            change(3, Op::Update, Some(row(13, 3)), Some(row(13, 33))),
            change(4, Op::Delete, Some(row(11, 1)), None),
        ];
        let f = fold(&range(), &keyer(), raw, &changes).unwrap();
        assert_eq!(
            f.rows,
            vec![row(13, 33), row(15, 5), row(12, 2), row(19, 9)]
        );
        assert_eq!(f.changes_folded, 4);
    }

    /// A print shared by keys that differ changes nothing: the picked row's exact key is
    /// compared (here every RAW print is in the net effect's, none of its keys is).
    #[test]
    fn a_print_match_without_a_key_match_keeps_the_row() {
        let rows = vec![row(11, 1), row(13, 3)];
        let raw = keyed(rows.clone());
        let mut net = net_effect(&range(), &keyer(), &[]).unwrap();
        net.prints.extend(raw.prints.iter().copied());
        assert_eq!(raw.touched(&net).count(), 2);
        let f = merge(&keyer(), raw, net).unwrap();
        assert_eq!(f.rows, rows);
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
            let f = fold(&range, &keyer(), raw_in(&range, raw).unwrap(), &changes).unwrap();
            prop_assert_eq!(by_key(f.rows), expected);
        }
    }
}
