//! Strings keep their column's charset in every write path (issue 15, DESIGN §15): values
//! given as the column's own bytes (as a snapshot read under `SET NAMES binary` and the
//! binlog both give them) land as exactly those bytes, in pages and replay, text literals
//! and prepared statements, one apply stream or key partitions. The key is a cp1251
//! column under cp1251_general_ci: 'тйов' (F2E9EEE2) and 'твой' (F2E2EEE9), the pair
//! issue 15 found swapped while STREAMING; a case-only update ('тйов' -> 'ТЙОВ', the same
//! key under `_ci`) writes the new bytes and a delete by key finds its row, so the
//! comparisons in WHERE still use the column's collation.
use crate::common::*;
use harness::Server;
use kernel::change::{Change, Op};
use kernel::codec;
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::apply::{self, Applied, Limits, ReplayGroup};
use ledger::parts;
use ledger::target::TargetCtx;

const DDL: &str = "CREATE TABLE t (
    k VARCHAR(8) CHARACTER SET cp1251 COLLATE cp1251_general_ci NOT NULL PRIMARY KEY,
    l VARCHAR(16) CHARACTER SET latin1 NULL,
    u VARCHAR(16) CHARACTER SET ucs2 NULL,
    g TEXT CHARACTER SET gbk NULL,
    c CHAR(4) CHARACTER SET utf32 NULL
) ENGINE=InnoDB";

/// cp1251 'тйов', 'твой', 'ТЙОВ'.
const TIOV: &[u8] = &[0xf2, 0xe9, 0xee, 0xe2];
const TVOI: &[u8] = &[0xf2, 0xe2, 0xee, 0xe9];
const TIOV_UP: &[u8] = &[0xd2, 0xc9, 0xce, 0xc2];

fn text_col(name: &str, kind: ColumnKind, cs: &str, co: &str, len: u64) -> ColumnDef {
    ColumnDef {
        charset: Some(cs.into()),
        collation: Some(co.into()),
        char_len: Some(len),
        ..col(name, kind)
    }
}

fn schema(db: &str) -> SealedSchema {
    let mut k = text_col("k", ColumnKind::Varchar, "cp1251", "cp1251_general_ci", 8);
    k.nullable = false;
    k.column_type = "varchar(8)".into();
    SealedSchema {
        database: db.into(),
        table: "t".into(),
        columns: vec![
            k,
            text_col("l", ColumnKind::Varchar, "latin1", "latin1_swedish_ci", 16),
            text_col("u", ColumnKind::Varchar, "ucs2", "ucs2_general_ci", 16),
            text_col("g", ColumnKind::Text, "gbk", "gbk_chinese_ci", 65535),
            text_col("c", ColumnKind::Char, "utf32", "utf32_general_ci", 4),
        ],
        key: vec![0],
        key_name: "PRIMARY".into(),
    }
}

/// A row of key `k`; version 0 or 1 of the other columns (latin1 'é'/'Å', ucs2 'é'/'中',
/// gbk '中'/'汉', utf32 'ж'/'😀').
fn row(k: &[u8], v: usize) -> Row {
    let b = |x: &[u8]| SqlValue::Bytes(x.to_vec());
    let pick = |a: &'static [u8], z: &'static [u8]| if v == 0 { a } else { z };
    vec![
        b(k),
        b(pick(&[0xe9], &[0xc5])),
        b(pick(&[0x00, 0xe9], &[0x4e, 0x2d])),
        b(pick(&[0xd6, 0xd0], &[0xba, 0xba])),
        b(pick(&[0, 0, 0x04, 0x36], &[0, 0x01, 0xf6, 0])),
    ]
}

/// The server's hex of every column of every row, by key bytes.
fn hex_dump(s: &Server, db: &str) -> String {
    s.sql_in(
        db,
        "SELECT HEX(k), HEX(l), HEX(u), HEX(g), HEX(c) FROM t ORDER BY HEX(k)",
    )
}

/// The server's weight of cp1251 `v` under the key's collation.
fn weight(s: &Server, v: &[u8]) -> Vec<u8> {
    let h = s.sql(&format!(
        "SELECT HEX(WEIGHT_STRING(CONVERT(X'{}' USING cp1251) COLLATE cp1251_general_ci AS CHAR(8)))",
        hex(v)
    ));
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02X}")).collect()
}

fn change(at: u64, i: u32, op: Op, before: Option<Row>, after: Option<Row>) -> Change {
    Change {
        id: change_id(1, "s", "mysql-bin.000001", at, i, op),
        before,
        after,
    }
}

/// A case-only key update of 'тйов' with new values, a delete of 'твой', then 'твой'
/// inserted again with new values.
fn replay() -> Vec<ReplayGroup> {
    let g = |at: u64, changes| ReplayGroup {
        end: group_end("mysql-bin.000001", at, None),
        changes,
    };
    vec![
        g(
            100,
            vec![change(
                90,
                0,
                Op::Update,
                Some(row(TIOV, 0)),
                Some(row(TIOV_UP, 1)),
            )],
        ),
        g(
            200,
            vec![change(190, 0, Op::Delete, Some(row(TVOI, 0)), None)],
        ),
        g(
            300,
            vec![change(290, 0, Op::Insert, None, Some(row(TVOI, 1)))],
        ),
    ]
}

async fn target_of(s: &Server, job: u64, limits: Limits) -> (String, TargetCtx) {
    let db = s.fresh_db("lcs");
    s.sql_in(&db, DDL);
    let ctx = ctx_of(schema(&db), job, 1);
    for v in [TIOV, TVOI, TIOV_UP] {
        ctx.keyer.insert_weight(0, v.to_vec(), weight(s, v));
    }
    let mut c = claimed(s, &db, &ctx).await;
    let p = page(job, 0, 0, vec![row(TIOV, 0), row(TVOI, 0)]);
    let r = apply::apply_page(&mut c, &ctx, &codec::encode(&p), limits)
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    (db, ctx)
}

#[tokio::test]
async fn every_write_path_keeps_each_columns_own_bytes() {
    let s = shared_target();
    let page_rows = "F2E2EEE9\tE9\t00E9\tD6D0\t00000436\nF2E9EEE2\tE9\t00E9\tD6D0\t00000436";
    let replayed = "D2C9CEC2\tC5\t4E2D\tBABA\t0001F600\nF2E2EEE9\tC5\t4E2D\tBABA\t0001F600";
    for (n, (text, p)) in [(false, 0), (true, 0), (false, 2), (true, 2)]
        .into_iter()
        .enumerate()
    {
        let job = 1500 + n as u64;
        let limits = Limits {
            text_pages: text,
            text_replay: text,
            txn_rows: 1,
            ..Limits::default()
        };
        let (db, ctx) = target_of(s, job, limits).await;
        assert_eq!(hex_dump(s, &db), page_rows, "text={text}");
        let g = replay();
        if p == 0 {
            let mut c = apply::connect(&opts(s, &db)).await.unwrap();
            apply::apply_groups(&mut c, &ctx, None, &g, limits)
                .await
                .unwrap();
        } else {
            let mut cs = Vec::new();
            for _ in 0..p {
                cs.push(apply::connect(&opts(s, &db)).await.unwrap());
            }
            parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits)
                .await
                .unwrap();
        }
        assert_eq!(hex_dump(s, &db), replayed, "text={text} P={p}");
    }
}
