//! The pure planner of key-partitioned replay against a model table, with crashes after
//! any subset of part commits, other P and txn_rows on every restart (issue 6). No server.
use crate::common::{change_id, col, group_end};
use crate::parts_partition::{other_keys, schema};
use kernel::change::{Change, GroupEnd, Op};
use kernel::ids::Digest;
use kernel::key::Keyer;
use kernel::schema::{ColumnKind, SealedSchema};
use kernel::value::SqlValue;
use ledger::apply::{fold_steps, ReplayGroup, Step};
use ledger::parts::{partition_of, MAX_PARTS};
use ledger::parts_plan::{change_parts, part_steps, plan_parts, PartStep, PartsInput, PartsPlan};
use ledger::plan::{GroupSummary, Piece};
use ledger::target::{PartRow, ReplayCursor};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};

#[derive(Clone, Debug)]
enum M {
    Ins(i64, i64),
    Upd(i64, i64, i64),
    Del(i64),
}

fn m() -> impl Strategy<Value = M> {
    // Few keys: several changes of one key in one group, key changes onto live keys.
    prop_oneof![
        (0i64..8, 0i64..100).prop_map(|(k, v)| M::Ins(k, v)),
        (0i64..8, 0i64..8, 0i64..100).prop_map(|(a, b, v)| M::Upd(a, b, v)),
        (0i64..8, 0i64..100).prop_map(|(k, v)| M::Upd(k, k, v)),
        (0i64..8).prop_map(M::Del),
    ]
}

/// The key of the crash model's table: `id BIGINT` or the composite `(a INT UNSIGNED, b
/// VARBINARY(16))` (model key k is `(k / 3 * 2e9, k % 3 zero bytes)`: keys above 2^31
/// and keys that are prefixes of each other).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    Int,
    Composite,
}

impl Shape {
    fn schema(self) -> SealedSchema {
        match self {
            Shape::Int => schema(),
            Shape::Composite => composite(),
        }
    }

    fn keyer(self) -> Keyer {
        Keyer::of(&self.schema()).unwrap()
    }

    fn row(self, k: i64, v: i64) -> kernel::value::Row {
        match self {
            Shape::Int => vec![SqlValue::Int(k), SqlValue::Int(v)],
            Shape::Composite => vec![
                SqlValue::UInt((k / 3) as u64 * 2_000_000_000),
                SqlValue::Bytes(vec![0; (k % 3) as usize]),
                SqlValue::Int(v),
            ],
        }
    }

    /// The model key of key values (in key order) or of a row (whose key columns lead).
    fn id(self, key: &[SqlValue]) -> i64 {
        match (self, key) {
            (Shape::Int, [k, ..]) => k.as_key().unwrap(),
            (Shape::Composite, [SqlValue::UInt(a), SqlValue::Bytes(b), ..]) => {
                (a / 2_000_000_000) as i64 * 3 + b.len() as i64
            }
            _ => panic!("{key:?}"),
        }
    }
}

fn change(g: usize, i: usize, m: &M, shape: Shape) -> Change {
    let r = |k: i64, v: i64| Some(shape.row(k, v));
    let (op, before, after) = match *m {
        M::Ins(k, v) => (Op::Insert, None, r(k, v)),
        M::Upd(a, b, v) => (Op::Update, r(a, -1), r(b, v)),
        M::Del(k) => (Op::Delete, r(k, -1), None),
    };
    Change {
        id: change_id(1, "s", "mysql-bin.000001", 100 * g as u64 + 4, i as u32, op),
        before,
        after,
    }
}

fn end(g: usize) -> GroupEnd {
    group_end("mysql-bin.000001", 100 * (g as u64 + 1), None)
}

type Table = BTreeMap<i64, i64>;

fn apply(t: &mut Table, steps: Vec<Step>, shape: Shape) {
    let f = fold_steps(steps);
    for k in f.deletes {
        t.remove(&shape.id(&k));
    }
    for r in f.upserts {
        t.insert(shape.id(&r), r.last().unwrap().as_key().unwrap());
    }
}

/// The changes applied one by one to the model, without steps or folding.
fn serial_model(gs: &[Vec<M>]) -> Table {
    let mut t = Table::new();
    for m in gs.iter().flatten() {
        match *m {
            M::Ins(k, v) => {
                t.insert(k, v);
            }
            M::Upd(a, b, v) => {
                t.remove(&a);
                t.insert(b, v);
            }
            M::Del(k) => {
                t.remove(&k);
            }
        }
    }
    t
}

/// A crash when main committed `c` transactions and each part p some more (`seed`).
#[derive(Clone, Debug)]
struct Attempt {
    parts: usize,
    txn_rows: usize,
    start: usize,
    crash: Option<(usize, u32)>,
}

fn attempt() -> impl Strategy<Value = Attempt> {
    (
        1usize..=5,
        1usize..12,
        0usize..100,
        proptest::option::of((0usize..6, any::<u32>())),
    )
        .prop_map(|(parts, txn_rows, start, crash)| Attempt {
            parts,
            txn_rows,
            start,
            crash,
        })
}

/// T and the target of the model.
struct World {
    groups: Vec<ReplayGroup>,
    main: Option<ReplayCursor>,
    rows: BTreeMap<u32, PartRow>,
    table: Table,
    /// (group, change, is the delete of a key change) -> times committed.
    done: HashMap<(usize, usize, bool), u32>,
    shape: Shape,
}

impl World {
    /// The global point of a cursor: (group, changes applied), complete = (g, len).
    fn point(&self, c: &ReplayCursor) -> (usize, usize) {
        let g = self.groups.iter().position(|x| x.end == c.end).unwrap();
        let len = self.groups[g].changes.len();
        (
            g,
            if c.rows_done == 0 {
                len
            } else {
                c.rows_done as usize
            },
        )
    }

    fn record(&mut self, batch0: usize, pieces: &[Piece], parts: usize, part: usize) {
        let s = self.shape.schema();
        for p in pieces {
            for i in p.from..p.to {
                let one = [Piece {
                    group: p.group,
                    from: i,
                    to: i + 1,
                }];
                let batch = &self.groups[batch0..];
                for st in part_steps(&s, &self.shape.keyer(), batch, &one, parts, part).unwrap() {
                    let del = matches!(st, Step::Delete { .. })
                        && matches!(batch[p.group].changes[i].id.op, Op::Update);
                    let n = self.done.entry((batch0 + p.group, i, del)).or_default();
                    *n += 1;
                    assert_eq!(
                        *n,
                        1,
                        "step of change {i} of group {} ran twice",
                        batch0 + p.group
                    );
                }
            }
        }
    }

    fn commit(&mut self, batch0: usize, pieces: &[Piece], parts: usize, part: usize) {
        self.record(batch0, pieces, parts, part);
        let steps = part_steps(
            &self.shape.schema(),
            &self.shape.keyer(),
            &self.groups[batch0..],
            pieces,
            parts,
            part,
        )
        .unwrap();
        apply(&mut self.table, steps, self.shape);
    }

    /// Main >= X implies every step of every change through X committed.
    fn check_main_covers(&self) {
        let Some(c) = &self.main else { return };
        let (g, r) = self.point(c);
        let s = self.shape.schema();
        for (gi, grp) in self.groups.iter().enumerate().take(g + 1) {
            let upto = if gi == g { r } else { grp.changes.len() };
            for i in 0..upto {
                let one = [Piece {
                    group: gi,
                    from: i,
                    to: i + 1,
                }];
                for st in part_steps(&s, &self.shape.keyer(), &self.groups, &one, 1, 0).unwrap() {
                    let del =
                        matches!(st, Step::Delete { .. }) && grp.changes[i].id.op == Op::Update;
                    assert_eq!(
                        self.done.get(&(gi, i, del)),
                        Some(&1),
                        "main is at {:?} but change {i} of group {gi} is not applied",
                        (g, r)
                    );
                }
            }
        }
    }

    fn run(&mut self, a: &Attempt) {
        // The batch starts at a group at or before main (any regrouping by the reader).
        let max_start = match &self.main {
            None => 0,
            Some(c) => {
                let (g, r) = self.point(c);
                if r == self.groups[g].changes.len() {
                    g + 1
                } else {
                    g
                }
            }
        };
        let b0 = a.start % (max_start + 1);
        let prev = b0.checked_sub(1).map(end);
        let batch: Vec<ReplayGroup> = self.groups[b0..].to_vec();
        let summaries: Vec<GroupSummary> = batch.iter().map(ReplayGroup::summary).collect();
        let rows: Vec<PartRow> = self.rows.values().cloned().collect();
        let k = self.shape.keyer();
        let plan = plan_parts(
            PartsInput {
                main: self.main.as_ref(),
                rows: &rows,
                configured: a.parts,
                prev: prev.as_ref(),
                groups: &summaries,
                txn_rows: a.txn_rows,
            },
            |g, i, p| change_parts(&k, &batch[g].changes[i], p),
        )
        .unwrap();
        let PartsPlan::Apply(txns) = plan else {
            assert_eq!(
                self.main.as_ref().map(|c| self.point(c)),
                Some((
                    self.groups.len() - 1,
                    self.groups.last().unwrap().changes.len()
                ))
            );
            return;
        };
        // A crash leaves main after `c` transactions and each part p up to 3 transactions
        // further (parts run ahead of part 0, which commits a transaction only after
        // every part did): limit per part, in plan order.
        // Parts never run ahead into transactions of another scheme than main's next one
        // (two schemes ahead at once would be ambiguous evidence).
        let same_scheme_until = |c: usize| {
            let s = txns.get(c).map(|t| t.parts);
            (c..txns.len())
                .find(|&j| Some(txns[j].parts) != s)
                .unwrap_or(txns.len())
        };
        let limit = |p: usize| match a.crash {
            None => usize::MAX,
            Some((c, _)) if p == 0 => c,
            Some((c, seed)) => {
                (c + ((seed >> (2 * (p % 16))) & 3) as usize).min(same_scheme_until(c).max(c))
            }
        };
        for (ti, t) in txns.iter().enumerate() {
            assert!(t.parts >= 1 && t.parts <= MAX_PARTS);
            assert_eq!(t.others.len(), t.parts - 1);
            for (k, step) in t.others.iter().enumerate() {
                let p = k + 1;
                let PartStep::Apply {
                    expect,
                    next,
                    pieces,
                } = step
                else {
                    continue;
                };
                if ti >= limit(p) {
                    continue; // this part stopped before the crash
                }
                assert_eq!(expect.as_ref(), self.rows.get(&(p as u32)), "part {p} CAS");
                assert_eq!(next.cursor, t.main.next);
                self.commit(b0, pieces, t.parts, p);
                self.rows.insert(p as u32, next.clone());
            }
            if ti >= limit(0) {
                continue;
            }
            assert_eq!(t.main.expect, self.main, "main CAS");
            self.commit(b0, &t.main.pieces, t.parts, 0);
            let before = self.main.as_ref().map(|c| self.point(c));
            let after = self.point(&t.main.next);
            assert!(
                before.is_none_or(|b| b < after),
                "main moved back: {before:?} -> {after:?}"
            );
            self.main = Some(t.main.next.clone());
            self.check_main_covers();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Whatever P, txn_rows and batch start each run uses, and whichever parts committed
    /// before a crash: no step runs twice, main never moves back and covers every
    /// partition, and the final table equals the serial replay (the changes applied one
    /// by one), for an integer and a composite key.
    #[test]
    fn crashes_and_scheme_changes_converge_to_the_serial_replay(
        gs in proptest::collection::vec(proptest::collection::vec(m(), 0..8), 1..7),
        attempts in proptest::collection::vec(attempt(), 0..6),
        last in attempt(),
    ) {
        // The same changes with either key: the plan and the partitions differ, the
        // table they leave does not.
        let serial = serial_model(&gs);
        for shape in [Shape::Int, Shape::Composite] {
            let groups: Vec<ReplayGroup> = gs
                .iter()
                .enumerate()
                .map(|(g, ms)| ReplayGroup {
                    end: end(g),
                    changes: ms.iter().enumerate().map(|(i, m)| change(g, i, m, shape)).collect(),
                })
                .collect();
            // One transaction over one partition is the serial replay as well.
            let mut one_txn = Table::new();
            for g in &groups {
                let one = [Piece { group: 0, from: 0, to: g.changes.len() }];
                let steps = part_steps(&shape.schema(), &shape.keyer(), std::slice::from_ref(g), &one, 1, 0).unwrap();
                apply(&mut one_txn, steps, shape);
            }
            prop_assert_eq!(&one_txn, &serial, "{:?}", shape);
            let mut w = World { groups, main: None, rows: BTreeMap::new(), table: Table::new(), done: HashMap::new(), shape };
            for a in &attempts {
                w.run(a);
            }
            w.run(&Attempt { crash: None, ..last });
            prop_assert_eq!(&w.table, &serial, "{:?}", shape);
            let (g, r) = w.point(w.main.as_ref().unwrap());
            prop_assert_eq!((g, r), (w.groups.len() - 1, w.groups.last().unwrap().changes.len()));
        }
    }
}

fn gsum(lens: &[usize]) -> Vec<GroupSummary> {
    lens.iter()
        .enumerate()
        .map(|(i, n)| GroupSummary {
            end: end(i),
            len: *n,
            digest: Digest::of(&[i as u8]),
        })
        .collect()
}

fn cur(g: &GroupSummary, rows_done: u32) -> ReplayCursor {
    ReplayCursor {
        end: g.end.clone(),
        rows_done,
        group_digest: g.digest,
    }
}

#[test]
fn an_ahead_scheme_is_finished_before_the_configured_one() {
    let gs = gsum(&[2, 2, 2, 2]);
    let row = |part: u32, parts: u32, c: ReplayCursor| PartRow {
        part,
        parts,
        cursor: c,
    };
    // Scheme 3 got part 1 to group 1 and part 2 to group 0; main is before the batch.
    let rows = [row(1, 3, cur(&gs[1], 0)), row(2, 3, cur(&gs[0], 0))];
    let input = PartsInput {
        main: None,
        rows: &rows,
        configured: 2,
        prev: None,
        groups: &gs,
        txn_rows: 2,
    };
    let PartsPlan::Apply(t) = plan_parts(input, |_, _, _| u32::MAX).unwrap() else {
        panic!()
    };
    let schemes: Vec<usize> = t.iter().map(|t| t.parts).collect();
    assert_eq!(schemes, [3, 3, 2, 2]);
    assert_eq!(t[0].others[0], PartStep::Ahead);
    assert_eq!(t[0].others[1], PartStep::Ahead);
    assert_eq!(t[1].others[0], PartStep::Ahead);
    assert!(matches!(&t[1].others[1], PartStep::Apply { expect: Some(e), .. } if e == &rows[1]));
    // Once main caught up, part 1 of the new scheme CASes over the old row.
    assert!(
        matches!(&t[2].others[0], PartStep::Apply { expect: Some(e), next, .. }
        if e == &rows[0] && next.parts == 2)
    );
    // Two ahead rows of different schemes: which partition holds which keys is ambiguous.
    let bad = [row(1, 3, cur(&gs[1], 0)), row(2, 4, cur(&gs[0], 0))];
    let e = plan_parts(
        PartsInput {
            rows: &bad,
            ..input
        },
        |_, _, _| u32::MAX,
    )
    .unwrap_err();
    assert_eq!(e.code, kernel::error::DefiniteCode::EvidenceConflict);
    // Rows at or behind main mean nothing, whatever their scheme.
    let m = cur(&gs[1], 0);
    let PartsPlan::Apply(t) = plan_parts(
        PartsInput {
            main: Some(&m),
            rows: &bad,
            ..input
        },
        |_, _, _| u32::MAX,
    )
    .unwrap() else {
        panic!()
    };
    assert!(t.iter().all(|t| t.parts == 2));
    // An impossible row is corrupt evidence.
    let odd = [row(3, 3, cur(&gs[1], 0))];
    let e = plan_parts(
        PartsInput {
            rows: &odd,
            ..input
        },
        |_, _, _| 0,
    )
    .unwrap_err();
    assert_eq!(e.code, kernel::error::DefiniteCode::EvidenceCorrupt);
    // A part with nothing of its partition is skipped; part rows name no foreign digest.
    let PartsPlan::Apply(t) = plan_parts(PartsInput { rows: &[], ..input }, |_, _, _| 1).unwrap()
    else {
        panic!()
    };
    assert!(t.iter().all(|t| t.others == [PartStep::Empty]));
    let mut forged = rows[0].clone();
    forged.cursor.group_digest = Digest([9; 32]);
    let e = plan_parts(
        PartsInput {
            rows: &[forged],
            ..input
        },
        |_, _, _| 1,
    )
    .unwrap_err();
    assert_eq!(e.code, kernel::error::DefiniteCode::EvidenceConflict);
}

/// `t (a INT UNSIGNED, b VARBINARY(16), v BIGINT, PRIMARY KEY (a, b))`.
fn composite() -> SealedSchema {
    let (mut s, _) = other_keys().swap_remove(0);
    s.columns.push(col("v", ColumnKind::BigInt));
    s
}

fn crow(a: u64, b: &[u8], v: i64) -> Option<kernel::value::Row> {
    Some(vec![
        SqlValue::UInt(a),
        SqlValue::Bytes(b.to_vec()),
        SqlValue::Int(v),
    ])
}

proptest! {
    /// A key-changing update touches the partitions of both its keys (and only those),
    /// and each partition's steps hold exactly its part: the delete of the old key in the
    /// old key's partition, the upsert of the new key in the new key's.
    #[test]
    fn a_composite_key_change_touches_both_partitions(
        a in (0u64..50, proptest::collection::vec(0u8..3, 0..3)),
        b in (0u64..50, proptest::collection::vec(0u8..3, 0..3)),
        parts in 1usize..=MAX_PARTS,
    ) {
        let s = composite();
        let k = Keyer::of(&s).unwrap();
        let part_of = |x: &(u64, Vec<u8>)| {
            let v = [SqlValue::UInt(x.0), SqlValue::Bytes(x.1.clone())];
            partition_of(&k, &k.sort_key_of_values(&v).unwrap(), &v, parts)
        };
        let (pa, pb) = (part_of(&a), part_of(&b));
        let ch = Change {
            id: change_id(1, "s", "mysql-bin.000001", 4, 0, Op::Update),
            before: crow(a.0, &a.1, 1),
            after: crow(b.0, &b.1, 2),
        };
        prop_assert_eq!(change_parts(&k, &ch, parts), (1u32 << pa) | (1u32 << pb));
        let g = [ReplayGroup { end: end(0), changes: vec![ch] }];
        let one = [Piece { group: 0, from: 0, to: 1 }];
        let mut deletes = Vec::new();
        let mut upserts = Vec::new();
        for p in 0..parts {
            for st in part_steps(&s, &k, &g, &one, parts, p).unwrap() {
                match st {
                    Step::Delete { values, .. } => deletes.push((p, values)),
                    Step::Upsert { row, .. } => upserts.push((p, row)),
                }
            }
        }
        prop_assert_eq!(upserts, vec![(pb, crow(b.0, &b.1, 2).unwrap())]);
        if a == b {
            prop_assert!(deletes.is_empty());
        } else {
            prop_assert_eq!(
                deletes,
                vec![(pa, vec![SqlValue::UInt(a.0), SqlValue::Bytes(a.1.clone())])]
            );
        }
    }
}
