//! Pure decisions of the apply path: replay planning, credential conflicts, TIMESTAMP
//! normalisation. No server needed.
use crate::common::{col, group_end};
use kernel::change::GroupEnd;
use kernel::ids::{Attempt, Digest, PageNo, WindowId};
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::SqlValue;
use ledger::apply::{decide_credential, normalize_row, plan_replay, GroupSummary, Plan};
use ledger::target::{PageCredential, ReplayCursor};
use proptest::prelude::*;

fn end(pos: u64) -> GroupEnd {
    group_end("mysql-bin.000001", pos, None)
}

fn groups(lens: &[usize]) -> Vec<GroupSummary> {
    lens.iter()
        .enumerate()
        .map(|(i, n)| GroupSummary {
            end: end(100 * (i as u64 + 1)),
            len: *n,
            digest: Digest::of(&[i as u8]),
        })
        .collect()
}

fn at(g: &GroupSummary, rows_done: u32) -> ReplayCursor {
    ReplayCursor {
        end: g.end.clone(),
        rows_done,
        group_digest: g.digest,
    }
}

/// Applies a plan to a model: the list of (group, change) pairs executed, and the final
/// cursor. Checks each transaction expects what the previous one wrote.
fn run(
    current: Option<ReplayCursor>,
    plan: Plan,
    gs: &[GroupSummary],
) -> (Vec<(usize, usize)>, Option<ReplayCursor>) {
    let mut done = Vec::new();
    let mut cur = current;
    if let Plan::Apply(txns) = plan {
        for t in txns {
            assert_eq!(t.expect, cur);
            for p in &t.pieces {
                for r in p.from..p.to {
                    done.push((p.group, r));
                }
            }
            cur = Some(t.next);
        }
    }
    let _ = gs;
    (done, cur)
}

#[test]
fn fresh_batch_applies_everything_once() {
    let gs = groups(&[2, 3, 1]);
    let plan = plan_replay(None, None, &gs, 100).unwrap();
    let (done, cur) = run(None, plan, &gs);
    assert_eq!(done.len(), 6);
    assert_eq!(cur, Some(at(&gs[2], 0)));
}

#[test]
fn cursor_at_or_after_the_batch_is_already_committed() {
    let gs = groups(&[2, 3]);
    assert_eq!(
        plan_replay(Some(&at(&gs[1], 0)), None, &gs, 10).unwrap(),
        Plan::AlreadyCommitted
    );
    let later = ReplayCursor {
        end: end(10_000),
        rows_done: 0,
        group_digest: Digest([0; 32]),
    };
    assert_eq!(
        plan_replay(Some(&later), None, &gs, 10).unwrap(),
        Plan::AlreadyCommitted
    );
    assert_eq!(
        plan_replay(None, None, &[], 10).unwrap(),
        Plan::AlreadyCommitted
    );
}

#[test]
fn regrouped_batch_resumes_inside_it() {
    // Committed [g0, g1]; the restart hands over [g0, g1, g2, g3].
    let gs = groups(&[2, 3, 4, 1]);
    let plan = plan_replay(Some(&at(&gs[1], 0)), None, &gs, 100).unwrap();
    let (done, _) = run(Some(at(&gs[1], 0)), plan, &gs);
    assert_eq!(done, vec![(2, 0), (2, 1), (2, 2), (2, 3), (3, 0)]);
}

#[test]
fn same_key_different_bytes_and_gaps_are_conflicts() {
    let gs = groups(&[2, 3]);
    let mut c = at(&gs[0], 0);
    c.group_digest = Digest([7; 32]);
    let e = plan_replay(Some(&c), None, &gs, 10).unwrap_err();
    assert_eq!(e.code, kernel::error::DefiniteCode::EvidenceConflict);
    // T has nothing but the batch starts after an earlier group.
    assert!(plan_replay(None, Some(&end(50)), &gs, 10).is_err());
    // T is before the batch at a group that is not `prev`.
    let before = ReplayCursor {
        end: end(20),
        rows_done: 0,
        group_digest: Digest([0; 32]),
    };
    assert!(plan_replay(Some(&before), Some(&end(50)), &gs, 10).is_err());
    // ... and exactly at prev is fine.
    let at_prev = ReplayCursor {
        end: end(50),
        ..before
    };
    assert!(matches!(
        plan_replay(Some(&at_prev), Some(&end(50)), &gs, 10).unwrap(),
        Plan::Apply(_)
    ));
    // A partial cursor beyond the group's length.
    assert!(plan_replay(Some(&at(&gs[0], 5)), None, &gs, 10).is_err());
}

#[test]
fn big_group_is_chunked_with_a_row_sub_cursor() {
    let gs = groups(&[1, 25, 1]);
    let Plan::Apply(txns) = plan_replay(None, None, &gs, 10).unwrap() else {
        panic!()
    };
    let cursors: Vec<(u64, u32)> = txns
        .iter()
        .map(|t| (t.next.end.pos.pos, t.next.rows_done))
        .collect();
    assert_eq!(
        cursors,
        vec![(100, 0), (200, 10), (200, 20), (200, 0), (300, 0)]
    );
    // Resume from the middle of the big group with another chunk size.
    let Plan::Apply(txns) = plan_replay(Some(&at(&gs[1], 10)), None, &gs, 7).unwrap() else {
        panic!()
    };
    assert_eq!(txns[0].pieces[0].from, 10);
    assert_eq!(txns[0].next.rows_done, 17);
}

proptest! {
    /// I3: whatever prefix T already holds and whatever transaction size is used now, the
    /// plan applies every remaining change exactly once, in order, and ends at the last group.
    #[test]
    fn any_split_point_and_size_covers_the_rest_exactly_once(
        lens in proptest::collection::vec(0usize..30, 1..8),
        size in 1usize..40,
        cut in 0usize..200,
    ) {
        let gs = groups(&lens);
        let all: Vec<(usize, usize)> = lens.iter().enumerate().flat_map(|(g, n)| (0..*n).map(move |r| (g, r))).collect();
        // T holds a prefix ending at a group boundary or inside a group.
        let k = cut % (all.len() + 1);
        let current = if k == 0 {
            None
        } else {
            let (g, r) = all[k - 1];
            Some(if r + 1 == lens[g] { at(&gs[g], 0) } else { at(&gs[g], (r + 1) as u32) })
        };
        let plan = plan_replay(current.as_ref(), None, &gs, size).unwrap();
        let (done, cur) = run(current.clone(), plan, &gs);
        prop_assert_eq!(&done[..], &all[k..]);
        // Whatever T held, the cursor ends at the batch's last group (groups without
        // changes of this table move it too).
        prop_assert_eq!(cur, Some(at(gs.last().unwrap(), 0)));
    }
}

#[test]
fn credential_decision() {
    let c = PageCredential {
        window: WindowId(1),
        page: PageNo(2),
        attempt: Attempt(1),
        digest: Digest([1; 32]),
        rows: 10,
    };
    assert!(decide_credential(&c, &c, "t").is_ok());
    let mut d = c;
    d.digest = Digest([2; 32]);
    let e = decide_credential(&c, &d, "t").unwrap_err();
    assert_eq!(e.code, kernel::error::DefiniteCode::EvidenceConflict);
    assert!(e.message.contains("nothing was overwritten"));
    let mut a = c;
    a.attempt = Attempt(2);
    assert!(decide_credential(&c, &a, "t").is_err());
}

/// A nullable column (the key too: normalisation does not look at it).
fn nullable(name: &str, kind: ColumnKind) -> ColumnDef {
    ColumnDef {
        nullable: true,
        ..col(name, kind)
    }
}

#[test]
fn binlog_timestamps_become_utc_calendar_values() {
    let s = SealedSchema {
        database: "d".into(),
        table: "t".into(),
        columns: vec![
            nullable("id", ColumnKind::BigInt),
            nullable("ts", ColumnKind::Timestamp),
            nullable("dt", ColumnKind::Datetime),
        ],
        key: vec![0],
        key_name: "PRIMARY".into(),
    };
    let b = |x: &str| SqlValue::Bytes(x.as_bytes().to_vec());
    let r = normalize_row(
        &s,
        vec![
            SqlValue::Int(1),
            b("1709210096.789012"),
            b("1709210096.789012"),
        ],
    );
    assert_eq!(r[1], SqlValue::Date(2024, 2, 29, 12, 34, 56, 789_012));
    // DATETIME is never touched.
    assert_eq!(r[2], b("1709210096.789012"));
    let r = normalize_row(&s, vec![SqlValue::Int(1), b("86399.5"), SqlValue::Null]);
    assert_eq!(r[1], SqlValue::Date(1970, 1, 1, 23, 59, 59, 500_000));
    let r = normalize_row(&s, vec![SqlValue::Int(1), b("0"), SqlValue::Null]);
    assert_eq!(r[1], SqlValue::Date(0, 0, 0, 0, 0, 0, 0));
    // Text the snapshot already gave as a calendar value passes unchanged.
    let r = normalize_row(
        &s,
        vec![SqlValue::Int(1), b("2024-02-29 12:34:56"), SqlValue::Null],
    );
    assert_eq!(r[1], b("2024-02-29 12:34:56"));
    let r = normalize_row(&s, vec![SqlValue::Int(1), b("2147483647"), SqlValue::Null]);
    assert_eq!(r[1], SqlValue::Date(2038, 1, 19, 3, 14, 7, 0));
}
