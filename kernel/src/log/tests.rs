use super::body::{load_body, store_body, CODEC_RAW, CODEC_ZSTD};
use super::*;
use crate::change::{Change, GroupEnd};
use crate::change::{ChangeId, Op};
use crate::codec;
use crate::control::{Intent, IntentKind};
use crate::ids::{Attempt, Nonce, WindowId};
use crate::ids::{Digest, Generation, JobId};
use crate::position::{BinlogPos, Gtid};
use crate::value::SqlValue;

fn sample() -> LogRecord {
    let at = BinlogPos::new("mysql-bin.000002", 1234);
    LogRecord {
        start: BinlogPos::new("mysql-bin.000002", 900),
        chunk: 1,
        gtid: Gtid::parse("0-1-42"),
        end: Some(GroupEnd {
            pos: BinlogPos::new("mysql-bin.000002", 2000),
            gtid: Gtid::parse("0-1-42"),
        }),
        body: RecordBody::Chunk(GroupChunk {
            changes: vec![Change {
                id: ChangeId {
                    lineage: Digest([7; 32]),
                    schema: "db".into(),
                    table: "t".into(),
                    file: "mysql-bin.000002".into(),
                    event_pos: 1234,
                    row: 3,
                    op: Op::Update,
                },
                before: Some(vec![SqlValue::Int(50), SqlValue::Null]),
                after: Some(vec![
                    SqlValue::Int(150),
                    SqlValue::Date(2024, 2, 29, 23, 59, 59, 123_456),
                ]),
            }],
            intents: vec![crate::control::IntentSeen {
                intent: Intent {
                    job: JobId(3),
                    generation: Generation(1),
                    kind: IntentKind::Low,
                    window: Some(WindowId(4)),
                    attempt: Some(Attempt(2)),
                    nonce: Nonce(0x0102_0304_0506_0708),
                },
                at: at.clone(),
                obsolete: false,
            }],
            pauses: vec![PauseSeen {
                job: JobId(3),
                generation: Generation(1),
                schema: "db".into(),
                table: "t".into(),
                at: at.clone(),
                error: crate::error::Definite {
                    code: DefiniteCode::SchemaChanged,
                    message: "m".into(),
                },
            }],
            statements: vec![StatementSeen {
                at: at.clone(),
                default_schema: "db".into(),
                sql: "ALTER TABLE t".into(),
            }],
            raw: vec![RawRows {
                schema: "db".into(),
                table: "t".into(),
                event_pos: 1234,
                event_type: 31,
                table_map: vec![1, 2],
                data: vec![3],
            }],
        }),
    }
}

/// Golden bytes of LREC v1: a change of this format must keep decoding (STYLE §5).
const LREC_V1: &str = "4c5245430100106d7973716c2d62696e2e303030303032840701010000012a01106d7973716c2d62696e2e303030303032d00f010000012a000107070707070707070707070707070707070707070707070707070707070707070264620174106d7973716c2d62696e2e303030303032d2090103010102026400010202ac0206e80f021d173b3bc0c4070103010101040102888e98a8c0e0808101106d7973716c2d62696e2e303030303032d209000103010264620174106d7973716c2d62696e2e303030303032d20902016d01106d7973716c2d62696e2e303030303032d2090264620d414c544552205441424c452074010264620174d2091f0201020103";

#[test]
fn record_format_is_pinned() {
    let bytes = sample().encode();
    assert_eq!(hex::encode(&bytes), LREC_V1, "LREC v1 bytes changed");
    let back = LogRecord::decode(&hex::decode(LREC_V1).expect("hex")).expect("decodes");
    assert_eq!(back, sample());
    let progress = LogRecord {
        start: BinlogPos::new("b.000001", 4),
        chunk: 0,
        gtid: None,
        end: Some(GroupEnd {
            pos: BinlogPos::new("b.000001", 300),
            gtid: None,
        }),
        body: RecordBody::Progress,
    };
    assert_eq!(
        hex::encode(progress.encode()),
        "4c524543010008622e3030303030310400000108622e303030303031ac020001"
    );
}

/// Golden bytes of the XA bodies (appended variants of LREC v1: older records keep
/// their variant numbers and bytes).
#[test]
fn xa_bodies_are_pinned() {
    let RecordBody::Chunk(chunk) = sample().body else {
        unreachable!()
    };
    let held = LogRecord {
        body: RecordBody::Held(XaHeld {
            xid: "X'7831',X'',1".into(),
            chunk: GroupChunk {
                changes: chunk.changes,
                ..GroupChunk::default()
            },
        }),
        end: None,
        ..sample()
    };
    let dropped = LogRecord {
        body: RecordBody::Dropped {
            xid: "X'7831',X'',1".into(),
        },
        ..sample()
    };
    for (rec, golden) in [(&held, LREC_V1_HELD), (&dropped, LREC_V1_DROPPED)] {
        let bytes = rec.encode();
        assert_eq!(hex::encode(&bytes), golden, "LREC v1 XA bytes changed");
        let back = LogRecord::decode(&bytes).expect("decodes");
        assert_eq!(&back, rec);
    }
    assert_eq!(held.size(), 1);
    assert!(
        held.tables().is_empty(),
        "held chunks are no table's changes"
    );
}

const LREC_V1_HELD: &str =
    "4c5245430100106d7973716c2d62696e2e303030303032840701010000012a00020d582737383331272c5827272c310107070707070707070707070707070707070707070707070707070707070707070264620174106d7973716c2d62696e2e303030303032d2090103010102026400010202ac0206e80f021d173b3bc0c40700000000";
const LREC_V1_DROPPED: &str =
    "4c5245430100106d7973716c2d62696e2e303030303032840701010000012a01106d7973716c2d62696e2e303030303032d00f010000012a030d582737383331272c5827272c31";

/// A stored zstd body (codec 1) of the LREC v1 sample: decoding must keep working
/// whatever zstd version writes new frames.
const LREC_V1_ZSTD: &str = "28b52ffd6000006d040062871c26902b1db3af6d6cf572cfa6e750c61dc001e8d64c12781c3f808f14965ef0c371dd7df3774a32ccf70d6e5ed1838ba98aa857c14910e52ddfccea2665e2d9643017cb0db0cddc381b4922140e7d02d7fc56f9dbcc6e5e8ef2cd0a757cb0aadd2a8adddd4d3c1a11e1804424d640cd78140c080089302cabf4d8022cf2c32b42981fae1dcfaba1e74906";

#[test]
fn bodies_are_stored_compressed_and_decode_to_the_same_bytes() {
    let canonical = sample().encode();
    let golden = hex::decode(LREC_V1_ZSTD).expect("hex");
    assert_eq!(load_body(CODEC_ZSTD, golden).expect("decodes"), canonical);
    let (c, stored) = store_body(canonical.clone());
    assert_eq!(c, CODEC_ZSTD, "the sample is worth compressing");
    assert!(stored.len() < canonical.len());
    assert_eq!(load_body(c, stored).expect("decodes"), canonical);
    let small = vec![1u8; 10];
    assert_eq!(store_body(small.clone()), (CODEC_RAW, small.clone()));
    assert_eq!(load_body(CODEC_RAW, small.clone()), Ok(small));
    assert!(load_body(9, Vec::new()).is_err());
    assert!(load_body(CODEC_ZSTD, vec![1, 2, 3]).is_err());
}

#[test]
fn chain_is_pinned_and_order_sensitive() {
    let a = chain_next(&GENESIS, LSeq(1), &Digest::of(b"a"));
    let b = chain_next(&a, LSeq(2), &Digest::of(b"b"));
    assert_ne!(chain_next(&GENESIS, LSeq(1), &Digest::of(b"b")), a);
    assert_ne!(chain_next(&a, LSeq(3), &Digest::of(b"b")), b);
    assert_eq!(
        b.to_hex(),
        "57762deba1a7d328885abd006c486f3501a6105ef4287810f5c28bc4fb1a293f"
    );
}

#[test]
fn rows_of_one_event_share_a_header_and_round_trip() {
    let base = match sample().body {
        RecordBody::Chunk(c) => c.changes[0].clone(),
        _ => unreachable!(),
    };
    let mut changes = Vec::new();
    for (row, pos) in [(0, 10), (1, 10), (2, 10), (0, 20), (5, 20)] {
        let mut c = base.clone();
        c.id.row = row;
        c.id.event_pos = pos;
        changes.push(c);
    }
    let chunk = GroupChunk {
        changes,
        ..GroupChunk::default()
    };
    let bytes = codec::to_canonical(&chunk);
    let one = codec::to_canonical(&GroupChunk {
        changes: vec![base],
        ..GroupChunk::default()
    });
    // 3 event headers for 5 rows, not 5 change identities.
    assert!(
        bytes.len() < 5 * one.len() - 80,
        "{} vs {}",
        bytes.len(),
        one.len()
    );
    let back: GroupChunk = postcard::from_bytes(&bytes).expect("decodes");
    assert_eq!(back, chunk);
}

#[test]
fn tables_counts_changes_raw_and_pauses() {
    assert_eq!(sample().tables(), vec![("db".into(), "t".into(), 3)]);
    assert!(sample().is_group_end());
}

fn switch_sample() -> LogRecord {
    use crate::position::{Flavor, Lineage};
    let lin = |id: u32, uid: &str| Lineage {
        flavor: Flavor::Mariadb,
        server_id: id,
        server_uid: uid.into(),
        binlog_base: "mysql-bin".into(),
    };
    let gtid = Gtid::parse("0-1-42").expect("gtid");
    let from_pos = BinlogPos::new("mysql-bin.000002", 900);
    let to_pos = BinlogPos::new("mysql-bin.000001", 1234).in_epoch(1);
    LogRecord {
        start: from_pos.clone(),
        chunk: 0,
        gtid: Some(gtid.clone()),
        end: Some(GroupEnd {
            pos: to_pos.clone(),
            gtid: Some(gtid.clone()),
        }),
        body: RecordBody::Switch(Box::new(crate::log::LineageSwitch {
            from: lin(1, "old"),
            to: lin(2, "new"),
            gtid,
            from_pos,
            to_pos,
        })),
    }
}

/// Golden bytes of LREC v2 (the lineage switch, the only body v2 adds).
const LREC_V2_SWITCH: &str = "4c5245430200106d7973716c2d62696e2e303030303032840700010000012a0112312f6d7973716c2d62696e2e303030303031d209010000012a040001036f6c64096d7973716c2d62696e0002036e6577096d7973716c2d62696e0000012a106d7973716c2d62696e2e303030303032840712312f6d7973716c2d62696e2e303030303031d209";

#[test]
fn switch_record_is_v2_and_pinned() {
    let rec = switch_sample();
    let bytes = rec.encode();
    assert_eq!(&bytes[..6], b"LREC\x02\x00", "a switch is written as v2");
    assert_eq!(hex::encode(&bytes), LREC_V2_SWITCH, "LREC v2 bytes changed");
    assert_eq!(LogRecord::decode(&bytes).expect("decodes"), rec);
    assert_eq!(rec.size(), 0);
    assert!(rec.tables().is_empty());
    // The same body under a v1 header is refused, not misread.
    let mut v1 = bytes.clone();
    v1[4] = 1;
    assert!(LogRecord::decode(&v1).is_err());
    // Every other body keeps being written as v1.
    assert_eq!(&sample().encode()[..6], b"LREC\x01\x00");
}
