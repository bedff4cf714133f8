//! Unit tests of replay's pure parts over L records and messages: groups, coverage, the
//! batch plan, lag bytes and the permit-wait reason (the policy's are in `policy.rs`).
use super::batch::no_permit;
use super::group::{plan, Plan};
use super::*;
use kernel::change::{Change, ChangeId, GroupEnd, Op};
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{Digest, Generation, JobId};
use kernel::log::{GroupChunk, LSeq, LogRecord, PauseSeen, RecordBody, StoredRecord};
use kernel::position::BinlogPos;
use kernel::value::SqlValue;
use ledger::apply::ReplayGroup;
use ledger::target::ReplayCursor;
use std::time::Duration;
fn scope() -> Scope {
    Scope {
        job: JobId(1),
        generation: Generation(1),
        stream: "s".into(),
        source_db: "db".into(),
        source_table: "t".into(),
    }
}

fn ch(table: &str, pos: u64, id: i64) -> Change {
    Change {
        id: ChangeId {
            lineage: Digest([1; 32]),
            schema: "db".into(),
            table: table.into(),
            file: "b.000001".into(),
            event_pos: pos,
            row: 0,
            op: Op::Insert,
        },
        before: None,
        after: Some(vec![SqlValue::Int(id)]),
    }
}

fn rec(seq: u64, start: u64, chunk: u32, end: Option<u64>, changes: Vec<Change>) -> StoredRecord {
    StoredRecord {
        seq: LSeq(seq),
        prev_chain: Digest([0; 32]),
        chain: Digest([0; 32]),
        body_digest: Digest([0; 32]),
        record: LogRecord {
            start: BinlogPos::new("b.000001", start),
            chunk,
            gtid: None,
            end: end.map(|p| GroupEnd {
                pos: BinlogPos::new("b.000001", p),
                gtid: None,
            }),
            body: RecordBody::Chunk(GroupChunk {
                changes,
                ..GroupChunk::default()
            }),
        },
    }
}

#[test]
fn a_group_is_built_from_its_chunks_and_filtered_to_the_table() {
    let s = scope();
    let chunks = vec![
        rec(5, 100, 0, None, vec![ch("t", 110, 1), ch("u", 120, 2)]),
        rec(6, 100, 1, None, vec![ch("u", 130, 3)]),
        rec(7, 100, 2, Some(200), vec![ch("t", 140, 4)]),
    ];
    let Built::Complete { group, last_seq } = build_group(&s, None, chunks.clone()).unwrap() else {
        panic!("complete expected")
    };
    assert_eq!(last_seq, LSeq(7));
    assert_eq!(group.changes.len(), 2);
    assert_eq!(group.end.pos.pos, 200);
    assert_eq!(
        build_group(&s, None, chunks[..2].to_vec()).unwrap(),
        Built::Open
    );
    // A gap in seqs or another start is corrupt evidence, never a silently short group.
    let mut bad = chunks.clone();
    bad[1].seq = LSeq(9);
    assert!(build_group(&s, None, bad).is_err());
    let mut bad = chunks;
    bad[2].record.start = BinlogPos::new("b.000001", 101);
    assert!(build_group(&s, None, bad).is_err());
}

#[test]
fn pauses_and_raw_rows_of_the_table_stop_replay() {
    let s = scope();
    let mut r = rec(1, 4, 0, Some(50), vec![]);
    if let RecordBody::Chunk(c) = &mut r.record.body {
        c.pauses.push(PauseSeen {
            job: JobId(1),
            generation: Generation(1),
            schema: "db".into(),
            table: "t".into(),
            at: BinlogPos::new("b.000001", 10),
            error: Definite {
                code: DefiniteCode::SchemaChanged,
                message: "ALTER".into(),
            },
        });
    }
    let e = table_part(&s, None, &r).unwrap_err();
    assert_eq!(e.code, DefiniteCode::SchemaChanged);
    assert!(e.message.contains("b.000001:10"), "{}", e.message);
}

#[test]
fn coverage_follows_t_cursor_only() {
    let end = |p| GroupEnd {
        pos: BinlogPos::new("b.000001", p),
        gtid: None,
    };
    let c = |p, r| ReplayCursor {
        end: end(p),
        rows_done: r,
        group_digest: Digest([0; 32]),
    };
    assert_eq!(coverage(None, &end(5)).unwrap(), Coverage::Apply);
    assert_eq!(coverage(Some(&c(9, 0)), &end(5)).unwrap(), Coverage::Held);
    assert_eq!(coverage(Some(&c(9, 0)), &end(9)).unwrap(), Coverage::Held);
    // Inside a chunked group: the group is applied from the sub-cursor.
    assert_eq!(coverage(Some(&c(9, 3)), &end(9)).unwrap(), Coverage::Apply);
    assert_eq!(coverage(Some(&c(9, 0)), &end(10)).unwrap(), Coverage::Apply);
    let other = GroupEnd {
        pos: BinlogPos::new("x.000001", 5),
        gtid: None,
    };
    assert_eq!(
        coverage(Some(&c(9, 0)), &other).unwrap_err().code,
        DefiniteCode::LineageChanged
    );
}

#[test]
fn a_permit_wait_timeout_says_how_long_it_waited_not_unconfirmed() {
    let e = admission::AdmissionError::Timeout {
        pool: admission::PoolKind::TargetWrite,
        waited: Duration::from_millis(2_400),
        holders: vec![admission::Holder {
            owner: "job 2 g1 streaming replay batch".into(),
            release_unknown: None,
        }],
    };
    let m = no_permit("job 1 g1 streaming replay batch", &e);
    assert!(
        m.starts_with("job 1 g1 streaming replay batch: waited 2 s for a target-write permit"),
        "{m}"
    );
    assert!(m.contains("held by: job 2 g1"), "{m}");
    assert!(!m.contains("unconfirmed"), "{m}");
}

#[test]
fn lag_bytes_only_within_one_file() {
    let e = |f: &str, p| GroupEnd {
        pos: BinlogPos::new(f, p),
        gtid: None,
    };
    assert_eq!(
        behind_bytes(Some(&e("b.1", 10)), Some(&e("b.1", 50))),
        Some(40)
    );
    assert_eq!(behind_bytes(Some(&e("b.1", 10)), Some(&e("b.2", 50))), None);
    assert_eq!(behind_bytes(None, None), Some(0));
}

#[test]
fn a_batch_skips_the_held_groups_in_front_and_applies_the_rest() {
    let end = |p| GroupEnd {
        pos: BinlogPos::new("b.000001", p),
        gtid: None,
    };
    let g = |p| {
        (
            ReplayGroup {
                end: end(p),
                changes: vec![ch("t", p, 1)],
            },
            LSeq(p),
        )
    };
    let cursor = ReplayCursor {
        end: end(9),
        rows_done: 0,
        group_digest: Digest([0; 32]),
    };
    let s = scope();
    assert_eq!(
        plan(
            &s,
            Some(&cursor),
            Some(end(1)),
            vec![g(5), g(9), g(12), g(20)]
        )
        .unwrap(),
        Plan {
            apply: vec![g(12).0, g(20).0],
            prev: Some(end(9)),
            held: 2,
        }
    );
    // Nothing held: `prev` stays the end before the batch.
    assert_eq!(
        plan(&s, None, Some(end(1)), vec![g(5)]).unwrap(),
        Plan {
            apply: vec![g(5).0],
            prev: Some(end(1)),
            held: 0,
        }
    );
    // All held: nothing to apply, `prev` moves past them.
    assert_eq!(
        plan(&s, Some(&cursor), None, vec![g(5), g(9)]).unwrap(),
        Plan {
            apply: vec![],
            prev: Some(end(9)),
            held: 2,
        }
    );
    // A held group after one T does not hold: T's cursor is inside the run.
    let e = plan(&s, Some(&cursor), None, vec![g(12), g(5)]).unwrap_err();
    assert_eq!(e.code, DefiniteCode::EvidenceConflict);
    assert!(
        e.message
            .starts_with("job 1 g1: the target ledger's cursor lies inside"),
        "{}",
        e.message
    );
}
