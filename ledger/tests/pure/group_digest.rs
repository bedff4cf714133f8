//! [`ReplayGroup::digest`] hashes the group as it is encoded (issue 17: a group of a
//! large transaction is never encoded whole). T's cursors store that digest, so it must
//! stay the blake3 of the prefix and the group's full canonical encoding, for any group.
use kernel::change::{Change, ChangeId, GroupEnd, Op};
use kernel::ids::Digest;
use kernel::position::{BinlogPos, Gtid};
use kernel::value::SqlValue;
use ledger::apply::ReplayGroup;
use proptest::prelude::*;

/// The digest as it was computed before it streamed: the whole encoding in one buffer.
fn full_encode_digest(g: &ReplayGroup) -> Digest {
    let mut b = b"backfill-group-v1".to_vec();
    b.extend(kernel::codec::to_canonical(&(&g.end, &g.changes)));
    Digest::of(&b)
}

fn value() -> impl Strategy<Value = SqlValue> {
    prop_oneof![
        Just(SqlValue::Null),
        // Up to several KiB: values that cross the hasher's buffer on their own.
        proptest::collection::vec(any::<u8>(), 0..3000).prop_map(SqlValue::Bytes),
        any::<i64>().prop_map(SqlValue::Int),
        any::<u64>().prop_map(SqlValue::UInt),
        any::<f32>().prop_map(SqlValue::Float),
        any::<f64>().prop_map(SqlValue::Double),
        (any::<u16>(), any::<u8>(), any::<u32>())
            .prop_map(|(y, m, us)| SqlValue::Date(y, m, m, m, m, m, us)),
        (any::<bool>(), any::<u32>(), any::<u8>(), any::<u32>())
            .prop_map(|(n, d, h, us)| SqlValue::Time(n, d, h, h, h, us)),
    ]
}

fn row() -> impl Strategy<Value = Option<Vec<SqlValue>>> {
    proptest::option::of(proptest::collection::vec(value(), 0..6))
}

fn change() -> impl Strategy<Value = Change> {
    let op = prop_oneof![Just(Op::Insert), Just(Op::Update), Just(Op::Delete)];
    (
        any::<[u8; 32]>(),
        "[a-z]{0,8}",
        any::<u64>(),
        any::<u32>(),
        op,
        row(),
        row(),
    )
        .prop_map(|(lineage, name, event_pos, r, op, before, after)| Change {
            id: ChangeId {
                lineage: Digest(lineage),
                schema: name.clone(),
                table: format!("{name}_t"),
                file: "mysql-bin.000001".into(),
                event_pos,
                row: r,
                op,
            },
            before,
            after,
        })
}

fn end() -> impl Strategy<Value = GroupEnd> {
    let gtid = proptest::option::of(prop_oneof![
        (any::<u32>(), any::<u32>(), any::<u64>()).prop_map(|(domain, server, seq)| {
            Gtid::Mariadb {
                domain,
                server,
                seq,
            }
        }),
        ("[0-9a-f]{8}", any::<u64>()).prop_map(|(uuid, seq)| Gtid::Mysql { uuid, seq }),
    ]);
    ("mysql-bin\\.[0-9]{6}", any::<u64>(), gtid).prop_map(|(file, pos, gtid)| GroupEnd {
        pos: BinlogPos::new(file, pos),
        gtid,
    })
}

proptest! {
    #[test]
    fn streaming_digest_equals_the_full_encoding(
        end in end(),
        changes in proptest::collection::vec(change(), 0..60),
    ) {
        let g = ReplayGroup { end, changes };
        prop_assert_eq!(g.digest(), full_encode_digest(&g));
    }
}

/// A group whose encoding is many times the hasher's buffer (the 1 KiB rows).
#[test]
fn streaming_digest_of_a_large_group() {
    let image = |n: i64, c: u8| Some(vec![SqlValue::Int(n), SqlValue::Bytes(vec![c; 1000])]);
    let changes = (0..2000)
        .map(|i| Change {
            id: ChangeId {
                lineage: Digest([7; 32]),
                schema: "bench".into(),
                table: "t".into(),
                file: "mysql-bin.000001".into(),
                event_pos: 4 + (i / 8) as u64 * 8200,
                row: (i % 8) as u32,
                op: Op::Update,
            },
            before: image(i, b'A'),
            after: image(i, b'z'),
        })
        .collect();
    let g = ReplayGroup {
        end: GroupEnd {
            pos: BinlogPos::new("mysql-bin.000001", 99_999),
            gtid: Some(Gtid::Mariadb {
                domain: 0,
                server: 1,
                seq: 42,
            }),
        },
        changes,
    };
    assert_eq!(g.digest(), full_encode_digest(&g));
}
