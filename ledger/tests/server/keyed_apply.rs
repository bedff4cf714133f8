//! Tables keyed by other than one signed integer (DESIGN §14) against a real MariaDB
//! target: (INT, INT) with the key columns in another order than the table's, BIGINT
//! UNSIGNED with values above 2^63, (INT UNSIGNED, VARBINARY(16)) with keys that are
//! prefixes of each other, BINARY(16) with a 15-byte value, and a table without a
//! PRIMARY KEY keyed by its NOT NULL UNIQUE (VARBINARY, BIGINT) key. A FINAL page, then groups
//! of inserts, updates, key-changing updates (onto absent keys, onto a key deleted just
//! before, there and back), deletes (of absent keys too) and delete + reinsert of one key
//! inside one group, replayed serially (prepared and text statements, tiny transactions)
//! and key-partitioned over 3 connections. The target is compared with a model by the
//! server's HEX() of every column, never by the pipeline's own decoding.
use crate::common::*;
use harness::Server;
use kernel::change::{Change, GroupEnd, Op};
use kernel::codec;
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::apply::{self, Applied, Limits, ReplayGroup};
use ledger::parts;
use ledger::target::TargetCtx;
use mysql_async::prelude::Queryable;
use std::collections::BTreeMap;

/// One key shape: the table, its sealed columns and key, and its distinct keys.
pub(crate) struct Shape {
    pub(crate) name: &'static str,
    pub(crate) ddl: &'static str,
    pub(crate) columns: Vec<ColumnDef>,
    pub(crate) key: Vec<usize>,
    /// The index the key is (`PRIMARY`, or a NOT NULL UNIQUE key of a table without one).
    pub(crate) key_name: &'static str,
    /// Key i's values in key order.
    pub(crate) key_of: fn(usize) -> Vec<SqlValue>,
    /// What the server's HEX() shows of key i's columns, in key order.
    pub(crate) hex_of: fn(usize) -> Vec<String>,
    /// Another form of key 2 that the server stores as the same key (BINARY(16): the
    /// 15-byte value padded with its 0x00), when the type has one.
    pub(crate) alias_2: Option<Vec<SqlValue>>,
    /// `SELECT` of HEX() of every column: the key's columns in key order, then `v`.
    pub(crate) select: &'static str,
}

fn hex_int(v: i64) -> String {
    format!("{:X}", v as u64)
}

pub(crate) fn hex_bytes(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02X}")).collect()
}

fn int_int() -> Shape {
    // Columns (v, b, a), PRIMARY KEY (a, b): key order is not column order.
    fn k(i: usize) -> (i64, i64) {
        (i as i64 / 3 - 1, i as i64 % 3 - 1)
    }
    Shape {
        name: "int_int",
        ddl: "CREATE TABLE t (v VARCHAR(32) NULL, b INT NOT NULL, a INT NOT NULL,
              PRIMARY KEY (a, b)) ENGINE=InnoDB",
        columns: vec![
            col("v", ColumnKind::Varchar),
            key_col("b", ColumnKind::Int, "int(11)", None),
            key_col("a", ColumnKind::Int, "int(11)", None),
        ],
        key: vec![2, 1],
        key_name: "PRIMARY",
        key_of: |i| {
            let (a, b) = k(i);
            vec![SqlValue::Int(a), SqlValue::Int(b)]
        },
        hex_of: |i| {
            let (a, b) = k(i);
            vec![hex_int(a), hex_int(b)]
        },
        alias_2: None,
        select: "SELECT HEX(a), HEX(b), HEX(v) FROM t",
    }
}

fn big_unsigned() -> Shape {
    const KEYS: [u64; 12] = [
        0,
        1,
        (1 << 63) - 1,
        1 << 63,
        (1 << 63) + 1,
        u64::MAX,
        u64::MAX - 1,
        0xDEAD_BEEF_0000_0001,
        1 << 32,
        0x8000_0000_0000_00FF,
        0xFFFF_0000_0000_0000,
        42,
    ];
    Shape {
        name: "big_unsigned",
        ddl: "CREATE TABLE t (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v VARCHAR(32) NULL)
              ENGINE=InnoDB",
        columns: vec![
            key_col("id", ColumnKind::BigInt, "bigint(20) unsigned", None),
            col("v", ColumnKind::Varchar),
        ],
        key: vec![0],
        key_name: "PRIMARY",
        key_of: |i| vec![SqlValue::UInt(KEYS[i])],
        hex_of: |i| vec![format!("{:X}", KEYS[i])],
        alias_2: None,
        select: "SELECT HEX(id), HEX(v) FROM t",
    }
}

fn unsigned_varbinary() -> Shape {
    fn k(i: usize) -> (u64, &'static [u8]) {
        let a = [0u64, 4_294_967_295, 2_147_483_648][i % 3];
        let b: [&[u8]; 4] = [b"", b"\0", b"a", b"a\0"];
        (a, b[i / 3])
    }
    Shape {
        name: "unsigned_varbinary",
        ddl: "CREATE TABLE t (a INT UNSIGNED NOT NULL, b VARBINARY(16) NOT NULL,
              v VARCHAR(32) NULL, PRIMARY KEY (a, b)) ENGINE=InnoDB",
        columns: vec![
            key_col("a", ColumnKind::Int, "int(10) unsigned", None),
            key_col("b", ColumnKind::Varbinary, "varbinary(16)", Some(16)),
            col("v", ColumnKind::Varchar),
        ],
        key: vec![0, 1],
        key_name: "PRIMARY",
        key_of: |i| {
            let (a, b) = k(i);
            vec![SqlValue::UInt(a), SqlValue::Bytes(b.to_vec())]
        },
        hex_of: |i| {
            let (a, b) = k(i);
            vec![format!("{a:X}"), hex_bytes(b)]
        },
        alias_2: None,
        select: "SELECT HEX(a), HEX(b), HEX(v) FROM t",
    }
}

/// Key 2 is the 15-byte value `0123456789abcde` (stored padded with one 0x00).
fn binary16() -> Shape {
    fn k(i: usize) -> Vec<u8> {
        match i {
            2 => b"0123456789abcde".to_vec(),
            0 => vec![0; 16],
            1 => vec![0xFF; 16],
            _ => {
                let mut b = vec![0u8; 16];
                b[0] = i as u8;
                b[15] = 0xA0 + i as u8;
                b
            }
        }
    }
    Shape {
        name: "binary16",
        ddl: "CREATE TABLE t (id BINARY(16) NOT NULL PRIMARY KEY, v VARCHAR(32) NULL)
              ENGINE=InnoDB",
        columns: vec![
            key_col("id", ColumnKind::Binary, "binary(16)", Some(16)),
            col("v", ColumnKind::Varchar),
        ],
        key: vec![0],
        key_name: "PRIMARY",
        key_of: |i| vec![SqlValue::Bytes(k(i))],
        hex_of: |i| {
            let mut b = k(i);
            b.resize(16, 0);
            vec![hex_bytes(&b)]
        },
        alias_2: Some(vec![SqlValue::Bytes(b"0123456789abcde\0".to_vec())]),
        select: "SELECT HEX(id), HEX(v) FROM t",
    }
}

/// No PRIMARY KEY: keyed by its NOT NULL UNIQUE key `uk (b, a)`, b VARBINARY, a signed.
fn unique_varbinary_int() -> Shape {
    fn k(i: usize) -> (Vec<u8>, i64) {
        let b: [&[u8]; 3] = [b"", b"z", b"z\0"];
        (b[i % 3].to_vec(), [i64::MIN, -1, 0, i64::MAX][i / 3])
    }
    Shape {
        name: "unique_varbinary_int",
        ddl: "CREATE TABLE t (a BIGINT NOT NULL, b VARBINARY(8) NOT NULL, v VARCHAR(32) NULL,
              UNIQUE KEY uk (b, a)) ENGINE=InnoDB",
        columns: vec![
            key_col("a", ColumnKind::BigInt, "bigint(20)", None),
            key_col("b", ColumnKind::Varbinary, "varbinary(8)", Some(8)),
            col("v", ColumnKind::Varchar),
        ],
        key: vec![1, 0],
        key_name: "uk",
        key_of: |i| {
            let (b, a) = k(i);
            vec![SqlValue::Bytes(b), SqlValue::Int(a)]
        },
        hex_of: |i| {
            let (b, a) = k(i);
            vec![hex_bytes(&b), hex_int(a)]
        },
        alias_2: None,
        select: "SELECT HEX(b), HEX(a), HEX(v) FROM t",
    }
}

pub(crate) fn shapes() -> Vec<Shape> {
    vec![
        int_int(),
        big_unsigned(),
        unsigned_varbinary(),
        binary16(),
        unique_varbinary_int(),
    ]
}

impl Shape {
    fn schema(&self, db: &str) -> SealedSchema {
        SealedSchema {
            key_name: self.key_name.into(),
            ..keyed(db, self.columns.clone(), self.key.clone())
        }
    }

    /// The row of key values `k` (key order) with `v` in the non-key column.
    pub(crate) fn row(&self, k: &[SqlValue], v: &str) -> Row {
        let mut r = vec![SqlValue::Bytes(v.as_bytes().to_vec()); self.columns.len()];
        for (j, &c) in self.key.iter().enumerate() {
            r[c] = k[j].clone();
        }
        r
    }

    pub(crate) fn ctx(&self, db: &str, job: u64) -> TargetCtx {
        ctx_of(self.schema(db), job, 1)
    }
}

/// A change of the scenario, by key index (`A2` is key 2 in its alias form).
#[derive(Clone, Copy)]
pub(crate) enum K {
    I(usize),
    A2,
}

pub(crate) enum W {
    Ins(K, &'static str),
    Upd(K, K, &'static str),
    Del(K),
}
pub(crate) use K::{A2, I};
pub(crate) use W::{Del, Ins, Upd};

const BASE: usize = 7;

/// The groups by key index; the last four (an update of key 2 into its alias form, a
/// delete by that form, an insert by it and a delete by the first form) only for a shape
/// with an alias.
pub(crate) fn spec(alias: bool) -> Vec<Vec<W>> {
    let mut s = vec![
        vec![
            Upd(I(0), I(0), "u0"),
            Ins(I(7), "i7"),
            Upd(I(1), I(8), "m8"),
            Del(I(2)),
        ],
        vec![Del(I(3)), Ins(I(3), "r3"), Del(I(5)), Upd(I(4), I(5), "m5")],
        vec![
            Upd(I(7), I(9), "m9"),
            Upd(I(9), I(7), "b7"),
            Ins(I(10), "i10"),
            Del(I(10)),
            Ins(I(10), "r10"),
        ],
        vec![
            Del(I(6)),
            Upd(I(8), I(6), "m6"),
            Ins(I(2), "r2"),
            Del(I(11)),
        ],
    ];
    if alias {
        s.push(vec![Upd(I(2), A2, "a2")]);
        s.push(vec![Del(A2), Ins(I(11), "i11")]);
        // Stored from the padded form, deleted by the short one: the last step of key 2.
        s.push(vec![Ins(A2, "a2 again")]);
        s.push(vec![Del(I(2))]);
    }
    s
}

fn idx(k: K) -> usize {
    match k {
        I(i) => i,
        A2 => 2,
    }
}

/// What the table holds after the baseline and the groups: key index -> v.
pub(crate) fn model(spec: &[Vec<W>]) -> BTreeMap<usize, String> {
    let mut t: BTreeMap<usize, String> = (0..BASE).map(|i| (i, "base".to_string())).collect();
    for w in spec.iter().flatten() {
        match w {
            Ins(k, v) => {
                t.insert(idx(*k), v.to_string());
            }
            Upd(a, b, v) => {
                t.remove(&idx(*a));
                t.insert(idx(*b), v.to_string());
            }
            Del(k) => {
                t.remove(&idx(*k));
            }
        }
    }
    t
}

fn end(g: usize) -> GroupEnd {
    group_end(
        "mysql-bin.000011",
        1000 * (g as u64 + 1),
        Some(g as u64 + 1),
    )
}

pub(crate) fn groups(sh: &Shape, spec: &[Vec<W>]) -> Vec<ReplayGroup> {
    let key = |k: K| match k {
        I(i) => (sh.key_of)(i),
        A2 => sh.alias_2.clone().unwrap(),
    };
    spec.iter()
        .enumerate()
        .map(|(g, ws)| ReplayGroup {
            end: end(g),
            changes: ws
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let (op, before, after) = match w {
                        Ins(k, v) => (Op::Insert, None, Some(sh.row(&key(*k), v))),
                        Upd(a, b, v) => (
                            Op::Update,
                            Some(sh.row(&key(*a), "old")),
                            Some(sh.row(&key(*b), v)),
                        ),
                        Del(k) => (Op::Delete, Some(sh.row(&key(*k), "old")), None),
                    };
                    Change {
                        id: change_id(
                            11,
                            "src",
                            "mysql-bin.000011",
                            1000 * g as u64 + 4,
                            i as u32,
                            op,
                        ),
                        before,
                        after,
                    }
                })
                .collect(),
        })
        .collect()
}

/// The expected HEX() lines of a model, sorted.
pub(crate) fn expected(sh: &Shape, t: &BTreeMap<usize, String>) -> Vec<String> {
    let mut out: Vec<String> = t
        .iter()
        .map(|(i, v)| {
            let mut cols = (sh.hex_of)(*i);
            cols.push(hex_bytes(v.as_bytes()));
            cols.join("\t")
        })
        .collect();
    out.sort();
    out
}

/// The target's rows as the server shows them by HEX(), sorted.
pub(crate) fn hex_dump(s: &Server, db: &str, sh: &Shape) -> Vec<String> {
    let mut out: Vec<String> = s.sql_in(db, sh.select).lines().map(String::from).collect();
    out.sort();
    out
}

/// A fresh target of `sh` holding the baseline keys 0..BASE from a FINAL page.
pub(crate) async fn baseline(
    s: &Server,
    sh: &Shape,
    prefix: &str,
    job: u64,
    limits: Limits,
) -> String {
    let db = s.fresh_db(prefix);
    s.sql_in(&db, sh.ddl);
    let ctx = sh.ctx(&db, job);
    let mut c = claimed(s, &db, &ctx).await;
    let rows = (0..BASE).map(|i| sh.row(&(sh.key_of)(i), "base")).collect();
    let p = page(job, 0, 0, rows);
    let r = apply::apply_page(&mut c, &ctx, &codec::encode(&p), limits)
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    let base: BTreeMap<usize, String> = (0..BASE).map(|i| (i, "base".into())).collect();
    assert_eq!(
        hex_dump(s, &db, sh),
        expected(sh, &base),
        "{} page",
        sh.name
    );
    db
}

#[tokio::test]
async fn composite_unsigned_and_binary_keys_replay_serially_to_the_model() {
    let s = shared_target();
    for (n, sh) in shapes().into_iter().enumerate() {
        let spec = spec(sh.alias_2.is_some());
        let g = groups(&sh, &spec);
        let want = expected(&sh, &model(&spec));
        for (text, txn_rows, stmt_rows) in [(false, 20_000, 10_000), (true, 3, 2), (false, 1, 1)] {
            let limits = Limits {
                text_pages: text,
                text_replay: text,
                txn_rows,
                stmt_rows,
                ..Limits::default()
            };
            let job = 300 + n as u64;
            let db = baseline(s, &sh, &format!("ka_{}", sh.name), job, limits).await;
            let ctx = sh.ctx(&db, job);
            let mut c = apply::connect(&opts(s, &db)).await.unwrap();
            let r = apply::apply_groups(&mut c, &ctx, None, &g, limits)
                .await
                .unwrap();
            assert_eq!(r, Applied::Committed);
            let got = hex_dump(s, &db, &sh);
            assert_eq!(got, want, "{} text={text} txn_rows={txn_rows}", sh.name);
            // Re-application, whole or from the middle, runs nothing.
            for lo in [0usize, 2] {
                let prev = lo.checked_sub(1).map(|i| g[i].end.clone());
                let r = apply::apply_groups(&mut c, &ctx, prev.as_ref(), &g[lo..], limits)
                    .await
                    .unwrap();
                assert_eq!(r, Applied::AlreadyCommitted, "{} from {lo}", sh.name);
            }
            assert_eq!(hex_dump(s, &db, &sh), want);
        }
    }
}

#[tokio::test]
async fn composite_unsigned_and_binary_keys_replay_over_three_parts_to_the_model() {
    let s = shared_target();
    for (n, sh) in shapes().into_iter().enumerate() {
        let spec = spec(sh.alias_2.is_some());
        let g = groups(&sh, &spec);
        let want = expected(&sh, &model(&spec));
        for txn_rows in [1000, 3] {
            let limits = Limits {
                txn_rows,
                ..Limits::default()
            };
            let job = 310 + n as u64;
            let db = baseline(s, &sh, &format!("kp_{}", sh.name), job, limits).await;
            let ctx = sh.ctx(&db, job);
            let mut cs = Vec::new();
            for _ in 0..3 {
                cs.push(apply::connect(&opts(s, &db)).await.unwrap());
            }
            let t0 = std::time::Instant::now();
            let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits)
                .await
                .unwrap();
            assert_eq!(r, Applied::Committed);
            // No part waited for a row another part held (such a wait, invisible to
            // InnoDB, ends only at innodb_lock_wait_timeout: 50 s).
            let took = t0.elapsed();
            assert!(took.as_secs() < 25, "{} P = 3 took {took:?}", sh.name);
            assert_eq!(
                hex_dump(s, &db, &sh),
                want,
                "{} P = 3 txn_rows={txn_rows}",
                sh.name
            );
            let part_rows: usize = s
                .sql_in(&db, "SELECT COUNT(*) FROM _backfill_ledger_cursor_parts")
                .parse()
                .unwrap();
            assert!(part_rows > 0, "{}: no part but 0 had keys", sh.name);
            // Again with other P: nothing runs.
            for q in [1, 2, 3] {
                let mut cs = Vec::new();
                for _ in 0..q {
                    cs.push(apply::connect(&opts(s, &db)).await.unwrap());
                }
                let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits)
                    .await
                    .unwrap();
                assert_eq!(r, Applied::AlreadyCommitted);
            }
            assert_eq!(hex_dump(s, &db, &sh), want);
        }
    }
}

/// `WHERE` of key i's row by the server's HEX() of its key columns.
fn where_hex(sh: &Shape, i: usize) -> String {
    let names = sh.key.iter().map(|&c| sh.columns[c].name.as_str());
    let conds: Vec<String> = names
        .zip((sh.hex_of)(i))
        .map(|(n, h)| format!("HEX({n}) = '{h}'"))
        .collect();
    conds.join(" AND ")
}

#[tokio::test]
async fn a_delete_of_one_composite_key_locks_only_its_row() {
    let s = shared_target();
    let shapes = [int_int(), unsigned_varbinary(), unique_varbinary_int()];
    for (n, sh) in shapes.into_iter().enumerate() {
        let job = 320 + n as u64;
        let db = baseline(s, &sh, &format!("kl_{}", sh.name), job, Limits::default()).await;
        let ctx = sh.ctx(&db, job);
        // Another session holds key 5's row (READ COMMITTED: only the row it changed).
        let mut other = apply::connect(&opts(s, &db)).await.unwrap();
        other
            .query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await
            .unwrap();
        other.query_drop("START TRANSACTION").await.unwrap();
        other
            .query_drop(format!(
                "UPDATE t SET v = 'held' WHERE {}",
                where_hex(&sh, 5)
            ))
            .await
            .unwrap();
        assert_eq!(other.affected_rows(), 1);
        // One delete of one key per transaction, prepared then as text: a DELETE that
        // scanned the table would wait for key 5 and fail after 1 s.
        let spec = [vec![Del(I(1))], vec![Del(I(3))]];
        let g = groups(&sh, &spec);
        let mut c = apply::connect(&opts(s, &db)).await.unwrap();
        c.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
            .await
            .unwrap();
        for (i, text) in [(0usize, false), (1, true)] {
            let limits = Limits {
                text_replay: text,
                ..Limits::default()
            };
            let prev = i.checked_sub(1).map(|j| g[j].end.clone());
            let r = apply::apply_groups(&mut c, &ctx, prev.as_ref(), &g[i..=i], limits).await;
            assert!(
                matches!(r, Ok(Applied::Committed)),
                "{} text={text}: {r:?}",
                sh.name
            );
        }
        other.query_drop("ROLLBACK").await.unwrap();
        assert_eq!(hex_dump(s, &db, &sh), expected(&sh, &model(&spec)));
    }
}
