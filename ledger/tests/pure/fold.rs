//! The net-effect fold of replay steps equals applying the steps one by one, on a model of
//! a table keyed by its primary key alone (DESIGN §6, §9). No server needed.
use kernel::value::{Row, SqlValue};
use ledger::apply::{fold_steps, Step};
use proptest::prelude::*;
use std::collections::BTreeMap;

type Table = BTreeMap<i64, Row>;

fn apply_in_order(mut t: Table, steps: &[Step]) -> Table {
    for s in steps {
        match s {
            Step::Upsert(r) => {
                t.insert(r[0].as_key().unwrap(), r.clone());
            }
            Step::Delete(k) => {
                t.remove(&k.as_key().unwrap());
            }
        }
    }
    t
}

fn apply_folded(mut t: Table, steps: Vec<Step>) -> Table {
    let f = fold_steps(0, steps).unwrap();
    for k in &f.deletes {
        t.remove(&k.as_key().unwrap());
    }
    for r in f.upserts {
        t.insert(r[0].as_key().unwrap(), r);
    }
    t
}

fn step() -> impl Strategy<Value = Step> {
    // Few keys so that keys repeat: inserts, updates, key changes and deletes interleave.
    prop_oneof![
        (0i64..6, 0u8..4)
            .prop_map(|(k, v)| Step::Upsert(vec![SqlValue::Int(k), SqlValue::Bytes(vec![v])])),
        (0i64..6).prop_map(|k| Step::Delete(SqlValue::Int(k))),
        (0u64..6).prop_map(|k| Step::Delete(SqlValue::UInt(k))),
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
        let folded = fold_steps(0, steps.clone()).unwrap();
        // Each key at most once, deletes and upserts disjoint, both in key order.
        let dk: Vec<i64> = folded.deletes.iter().map(|k| k.as_key().unwrap()).collect();
        let uk: Vec<i64> = folded.upserts.iter().map(|r| r[0].as_key().unwrap()).collect();
        prop_assert!(dk.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(uk.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(dk.iter().all(|k| !uk.contains(k)));
        prop_assert_eq!(apply_folded(t.clone(), steps.clone()), apply_in_order(t, &steps));
    }
}

#[test]
fn a_key_change_then_reuse_of_the_old_key_keeps_both_rows() {
    let r = |k: i64, v: u8| vec![SqlValue::Int(k), SqlValue::Bytes(vec![v])];
    // 50 -> 150 (delete 50, upsert 150), then a new row 50.
    let steps = vec![
        Step::Delete(SqlValue::Int(50)),
        Step::Upsert(r(150, 1)),
        Step::Upsert(r(50, 2)),
    ];
    let f = fold_steps(0, steps).unwrap();
    assert!(f.deletes.is_empty());
    assert_eq!(f.upserts, vec![r(50, 2), r(150, 1)]);
    // A non-integer key cannot be folded.
    assert_eq!(
        fold_steps(0, vec![Step::Delete(SqlValue::Bytes(b"x".to_vec()))]),
        None
    );
}
