//! The net-effect fold of replay steps equals applying the steps one by one, on a model of
//! a table keyed by its key alone (DESIGN §6, §9, §14): for the single signed integer key
//! and for a composite (INT UNSIGNED, VARBINARY) key, where steps are made from changes
//! (inserts, updates, key-changing updates, deletes, delete + reinsert of one key) and the
//! model is keyed by the typed key tuple, independently of the sort-key encoding. No
//! server needed.
use crate::common::{change_id, col, group_end, key_col, keyed};
use kernel::change::{Change, Op};
use kernel::key::{Keyer, SortKey};
use kernel::schema::{ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::apply::{fold_steps, Folded, ReplayGroup, Step};
use ledger::parts_plan::part_steps;
use ledger::plan::Piece;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn int_schema() -> SealedSchema {
    keyed(
        "d",
        vec![
            col("id", ColumnKind::BigInt),
            col("v", ColumnKind::Varbinary),
        ],
        vec![0],
    )
}

fn int_keyer() -> Keyer {
    Keyer::of(&int_schema()).unwrap()
}

type Table = BTreeMap<i64, Row>;

fn apply_in_order(mut t: Table, steps: &[Step]) -> Table {
    for s in steps {
        match s {
            Step::Upsert { row, .. } => {
                t.insert(row[0].as_key().unwrap(), row.clone());
            }
            Step::Delete { values, .. } => {
                t.remove(&values[0].as_key().unwrap());
            }
        }
    }
    t
}

fn apply_folded(mut t: Table, steps: Vec<Step>) -> Table {
    let f = fold_steps(steps);
    for k in &f.deletes {
        t.remove(&k[0].as_key().unwrap());
    }
    for r in f.upserts {
        t.insert(r[0].as_key().unwrap(), r);
    }
    t
}

fn upsert(k: &Keyer, row: Row) -> Step {
    Step::Upsert {
        key: k.sort_key(&row).unwrap(),
        row,
    }
}

fn delete(k: &Keyer, values: Vec<SqlValue>) -> Step {
    Step::Delete {
        key: k.sort_key_of_values(&values).unwrap(),
        values,
    }
}

fn step() -> impl Strategy<Value = Step> {
    // Few keys so that keys repeat: inserts, updates, key changes and deletes interleave.
    let k = int_keyer();
    let (k1, k2) = (k.clone(), k.clone());
    prop_oneof![
        (0i64..6, 0u8..4)
            .prop_map(move |(i, v)| upsert(&k, vec![SqlValue::Int(i), SqlValue::Bytes(vec![v])])),
        (0i64..6).prop_map(move |i| delete(&k1, vec![SqlValue::Int(i)])),
        // The same key as another value type: one sort key.
        (0u64..6).prop_map(move |i| delete(&k2, vec![SqlValue::UInt(i)])),
    ]
}

proptest! {
    #[test]
    fn folding_equals_applying_the_steps_in_order(
        initial in proptest::collection::btree_map(0i64..6, 0u8..4, 0..6),
        steps in proptest::collection::vec(step(), 0..40),
    ) {
        let t: Table = initial
            .into_iter()
            .map(|(k, v)| (k, vec![SqlValue::Int(k), SqlValue::Bytes(vec![100 + v])]))
            .collect();
        let folded = fold_steps(steps.clone());
        // Each key at most once, deletes and upserts disjoint, both in key order.
        let dk: Vec<i64> = folded.deletes.iter().map(|k| k[0].as_key().unwrap()).collect();
        let uk: Vec<i64> = folded.upserts.iter().map(|r| r[0].as_key().unwrap()).collect();
        prop_assert!(dk.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(uk.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(dk.iter().all(|k| !uk.contains(k)));
        prop_assert_eq!(apply_folded(t.clone(), steps.clone()), apply_in_order(t, &steps));
    }
}

#[test]
fn a_key_change_then_reuse_of_the_old_key_keeps_both_rows() {
    let k = int_keyer();
    let r = |i: i64, v: u8| vec![SqlValue::Int(i), SqlValue::Bytes(vec![v])];
    // 50 -> 150 (delete 50, upsert 150), then a new row 50.
    let steps = vec![
        delete(&k, vec![SqlValue::Int(50)]),
        upsert(&k, r(150, 1)),
        upsert(&k, r(50, 2)),
    ];
    let f = fold_steps(steps);
    assert!(f.deletes.is_empty());
    assert_eq!(f.upserts, vec![r(50, 2), r(150, 1)]);
    // A value that is no integer has no sort key in an integer key: no step is made of
    // it (replay reports the change as corrupt evidence instead of folding it).
    assert!(k
        .sort_key_of_values(&[SqlValue::Bytes(b"x".to_vec())])
        .is_err());
    assert!(k.sort_key_of_values(&[SqlValue::UInt(u64::MAX)]).is_err());
    assert!(k.sort_key_of_values(&[SqlValue::Null]).is_err());
}

/// `t (a INT UNSIGNED, b VARBINARY(16), v VARBINARY(16), PRIMARY KEY (a, b))`.
pub fn composite_schema() -> SealedSchema {
    keyed(
        "d",
        vec![
            key_col("a", ColumnKind::Int, "int(10) unsigned", None),
            key_col("b", ColumnKind::Varbinary, "varbinary(16)", Some(16)),
            col("v", ColumnKind::Varbinary),
        ],
        vec![0, 1],
    )
}

/// The typed key of the model: independent of the sort-key encoding.
type Tuple = (u64, Vec<u8>);
type CTable = BTreeMap<Tuple, Row>;

fn tuple(r: &Row) -> Tuple {
    let SqlValue::UInt(a) = r[0] else {
        panic!("{r:?}")
    };
    let SqlValue::Bytes(b) = &r[1] else {
        panic!("{r:?}")
    };
    (a, b.clone())
}

fn crow(k: &Tuple, v: u8) -> Row {
    vec![
        SqlValue::UInt(k.0),
        SqlValue::Bytes(k.1.clone()),
        SqlValue::Bytes(vec![v]),
    ]
}

#[derive(Clone, Debug)]
enum C {
    Ins(Tuple, u8),
    /// An update from one key to another (the same key: an ordinary update).
    Upd(Tuple, Tuple, u8),
    Del(Tuple),
    /// A delete and a reinsert of one key, one after the other.
    DelIns(Tuple, u8),
}

fn tup() -> impl Strategy<Value = Tuple> {
    // Few keys that share prefixes: (1, ""), (1, "\0"), (1, "\0\0"), (2, "a"), ... and a
    // value above 2^31 in the unsigned column (2^32 - 1).
    let a = prop_oneof![Just(0u64), Just(1), Just(2), Just(u64::from(u32::MAX))];
    let b = prop_oneof![
        Just(vec![]),
        Just(vec![0]),
        Just(vec![0, 0]),
        Just(b"a".to_vec()),
        Just(b"a\0".to_vec()),
        Just(vec![0xFF]),
    ];
    (a, b)
}

fn c() -> impl Strategy<Value = C> {
    prop_oneof![
        (tup(), any::<u8>()).prop_map(|(k, v)| C::Ins(k, v)),
        (tup(), tup(), any::<u8>()).prop_map(|(a, b, v)| C::Upd(a, b, v)),
        (tup(), any::<u8>()).prop_map(|(k, v)| C::Upd(k.clone(), k, v)),
        tup().prop_map(C::Del),
        (tup(), any::<u8>()).prop_map(|(k, v)| C::DelIns(k, v)),
    ]
}

fn changes_of(cs: &[C]) -> Vec<Change> {
    let mut out = Vec::new();
    let mut push = |op, before, after| {
        let n = out.len() as u32;
        out.push(Change {
            id: change_id(1, "s", "mysql-bin.000001", 4, n, op),
            before,
            after,
        })
    };
    for c in cs {
        match c {
            C::Ins(k, v) => push(Op::Insert, None, Some(crow(k, *v))),
            C::Upd(a, b, v) => push(Op::Update, Some(crow(a, 0)), Some(crow(b, *v))),
            C::Del(k) => push(Op::Delete, Some(crow(k, 0)), None),
            C::DelIns(k, v) => {
                push(Op::Delete, Some(crow(k, 0)), None);
                push(Op::Insert, None, Some(crow(k, *v)));
            }
        }
    }
    out
}

/// What the server does with the changes one by one (an insert of a live key or an
/// update onto one replaces it: replay writes full images by key).
fn serial(mut t: CTable, changes: &[Change]) -> CTable {
    for ch in changes {
        if let (Op::Update | Op::Delete, Some(b)) = (ch.id.op, &ch.before) {
            t.remove(&tuple(b));
        }
        if let Some(a) = &ch.after {
            t.insert(tuple(a), a.clone());
        }
    }
    t
}

/// The folded replay steps of `changes` as one group, by `part_steps` (one partition).
fn folded(s: &SealedSchema, changes: Vec<Change>) -> Folded {
    let n = changes.len();
    let g = [ReplayGroup {
        end: group_end("mysql-bin.000001", 100, None),
        changes,
    }];
    let one = [Piece {
        group: 0,
        from: 0,
        to: n,
    }];
    fold_steps(part_steps(s, &Keyer::of(s).unwrap(), &g, &one, 1, 0).unwrap())
}

/// The table after the folded steps: deletes, then upserts.
fn replayed(mut t: CTable, f: Folded) -> CTable {
    for d in &f.deletes {
        t.remove(&tuple(d));
    }
    for r in f.upserts {
        t.insert(tuple(&r), r);
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Composite keys: the folded steps of any changes (key-changing updates onto live and
    /// absent keys, delete + reinsert of one key, keys that are prefixes of each other)
    /// leave the table the changes leave, and name each key once, in sort-key order.
    #[test]
    fn composite_key_fold_equals_the_changes_applied_in_order(
        initial in proptest::collection::btree_map(tup(), any::<u8>(), 0..8),
        cs in proptest::collection::vec(c(), 0..30),
    ) {
        let s = composite_schema();
        let t: CTable = initial.iter().map(|(k, v)| (k.clone(), crow(k, *v))).collect();
        let changes = changes_of(&cs);
        let f = folded(&s, changes.clone());
        // Deletes in key order, then upserts in key order, no key twice.
        let k = Keyer::of(&s).unwrap();
        let d: Vec<SortKey> = f.deletes.iter().map(|v| k.sort_key_of_values(v).unwrap()).collect();
        let u: Vec<SortKey> = f.upserts.iter().map(|r| k.sort_key(r).unwrap()).collect();
        prop_assert!(d.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(u.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(d.iter().all(|k| !u.contains(k)));
        prop_assert_eq!(replayed(t.clone(), f), serial(t, &changes));
    }

    /// The sort key of a composite key orders and equates as the key tuples do (the
    /// server's order for (INT UNSIGNED, VARBINARY)).
    #[test]
    fn composite_sort_keys_order_as_their_tuples(a in tup(), b in tup()) {
        let k = Keyer::of(&composite_schema()).unwrap();
        let (sa, sb) = (k.sort_key(&crow(&a, 0)).unwrap(), k.sort_key(&crow(&b, 1)).unwrap());
        prop_assert_eq!(sa.cmp(&sb), a.cmp(&b));
    }
}

#[test]
fn composite_key_change_and_delete_reinsert_in_one_group() {
    let s = composite_schema();
    let one = |a: u64, b: &[u8]| (a, b.to_vec());
    let t: CTable = [one(1, b"x"), one(2, b"y")]
        .iter()
        .map(|k| (k.clone(), crow(k, 9)))
        .collect();
    let cs = [
        // (1,'x') -> (1,'x\0'): a key that differs only by a trailing 0x00.
        C::Upd(one(1, b"x"), one(1, b"x\0"), 1),
        // (2,'y') deleted and inserted again with new content.
        C::DelIns(one(2, b"y"), 2),
        // A new key, then moved onto the old key (1,'x').
        C::Ins(one(3, b""), 3),
        C::Upd(one(3, b""), one(1, b"x"), 4),
    ];
    let changes = changes_of(&cs);
    let got = replayed(t.clone(), folded(&s, changes.clone()));
    assert_eq!(got, serial(t, &changes));
    let keys: Vec<&Tuple> = got.keys().collect();
    assert_eq!(
        keys,
        [&one(1, b"x"), &one(1, b"x\0"), &one(2, b"y")],
        "{got:?}"
    );
    assert_eq!(got[&one(1, b"x")], crow(&one(1, b"x"), 4));
    assert_eq!(got[&one(2, b"y")], crow(&one(2, b"y"), 2));
}

#[test]
fn a_short_binary_key_is_deleted_by_its_padded_value() {
    // BINARY(16): a value without its trailing 0x00 is the padded key (one sort key), and
    // its delete names the padded bytes (the server compares `IN (..)` byte for byte).
    let s = keyed(
        "d",
        vec![
            key_col("id", ColumnKind::Binary, "binary(16)", Some(16)),
            col("v", ColumnKind::Varbinary),
        ],
        vec![0],
    );
    let short = vec![SqlValue::Bytes(b"0123456789abcde".to_vec()), SqlValue::Null];
    let mut padded = short.clone();
    padded[0] = SqlValue::Bytes(b"0123456789abcde\0".to_vec());
    let changes = vec![
        Change {
            id: change_id(1, "s", "mysql-bin.000001", 4, 0, Op::Insert),
            before: None,
            after: Some(padded.clone()),
        },
        Change {
            id: change_id(1, "s", "mysql-bin.000001", 4, 1, Op::Delete),
            before: Some(short),
            after: None,
        },
    ];
    let f = folded(&s, changes);
    assert!(f.upserts.is_empty());
    assert_eq!(f.deletes, vec![vec![padded[0].clone()]]);
}
