//! The independent comparator against real MariaDB servers: the shared source and target of
//! this test binary, each test in its own databases, rows loaded with plain SQL.
use backfill_tests::bf;
use backfill_tests::bf::verify::{self, Endpoint, Key, Report, VerifyCursor, VerifyOptions};
use harness::{shared_source, shared_target};

/// A source table and a target table of the same definition, in fresh databases.
struct Pair {
    src_db: String,
    tgt_db: String,
    source: Endpoint,
    target: Endpoint,
    key: Vec<&'static str>,
}

impl Pair {
    fn new(prefix: &str, ddl: &str) -> Pair {
        Pair::keyed(prefix, ddl, &["id"])
    }

    /// A pair of tables keyed by `key` (index order).
    fn keyed(prefix: &str, ddl: &str, key: &[&'static str]) -> Pair {
        let (s, t) = (shared_source(), shared_target());
        let src_db = s.fresh_db(prefix);
        let tgt_db = t.fresh_db(prefix);
        s.sql_in(&src_db, ddl);
        t.sql_in(&tgt_db, ddl);
        let source = Endpoint::from_url(&s.url(), &src_db, "t").expect("source url");
        let target = Endpoint::from_url(&t.url(), &tgt_db, "t").expect("target url");
        Pair {
            src_db,
            tgt_db,
            source,
            target,
            key: key.to_vec(),
        }
    }

    /// Runs SQL on both sides.
    fn both(&self, sql: &str) {
        self.src(sql);
        self.tgt(sql);
    }

    fn src(&self, sql: &str) {
        shared_source().sql_in(&self.src_db, sql);
    }

    fn tgt(&self, sql: &str) {
        shared_target().sql_in(&self.tgt_db, sql);
    }

    async fn run_from(&self, options: &VerifyOptions, cursor: &mut VerifyCursor) -> Report {
        verify::verify(&self.source, &self.target, &self.key, options, cursor)
            .await
            .expect("verify runs")
    }

    async fn run(&self, options: &VerifyOptions) -> Report {
        self.run_from(options, &mut VerifyCursor::start()).await
    }

    async fn close(self) {
        self.source.pool.disconnect().await.expect("source pool");
        self.target.pool.disconnect().await.expect("target pool");
    }
}

fn chunked(n: usize) -> VerifyOptions {
    VerifyOptions {
        chunk_size: n,
        ..VerifyOptions::default()
    }
}

/// (key as shown, column) of every differing field, in report order.
fn fields(r: &Report) -> Vec<(String, String)> {
    r.cursor
        .tally
        .differing_fields
        .examples
        .iter()
        .map(|d| (d.key.to_string(), d.column.clone()))
        .collect()
}

/// Integer keys as the report holds them.
fn ints(keys: &[i64]) -> Vec<Key> {
    keys.iter().copied().map(Key::of_i64).collect()
}

/// Keys as the report shows them.
fn shown(keys: &[Key]) -> Vec<String> {
    keys.iter().map(Key::to_string).collect()
}

/// (key, column) pairs as [`fields`] gives them.
fn want(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, c)| (k.to_string(), c.to_string()))
        .collect()
}

const ALL_TYPES: &str = "CREATE TABLE t (
    id BIGINT NOT NULL PRIMARY KEY,
    d DECIMAL(12,3), f FLOAT, g DOUBLE,
    dt DATETIME(6), ts TIMESTAMP(6) NULL, dd DATE, tm TIME(3), y YEAR,
    b BINARY(4), vb VARBINARY(8), bt BIT(5),
    e ENUM('a','b'), st SET('x','y'), j JSON,
    s VARCHAR(20), c CHAR(5), tx TEXT, bl BLOB, n INT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const ALL_ROWS: &str = "SET NAMES utf8mb4; SET time_zone = '+00:00';
    INSERT INTO t VALUES
    (1, -1.500, 0.1, 0.30000000000000004, '2024-02-29 23:59:59.999999', '2024-03-01 12:00:00.5',
     '2024-02-29', '-838:59:59.999', 2155, X'61000000', X'6100', b'10101', 'b', 'x,y',
     '{\"a\": [1, 2.5, \"é\"]}', 'Grüße 👋 ', 'ab', 'long text ', X'00FF00', -2147483648),
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL),
    (3, 0, -0, 1e-300, '1000-01-01 00:00:00', '1970-01-01 00:00:01', '1000-01-01', '00:00:00',
     1901, X'', X'', b'0', 'a', '', '[]', '', '', '', X'', 0)";

#[tokio::test]
async fn identical_tables_have_no_difference() {
    let pair = Pair::new("verify_same", ALL_TYPES);
    pair.both(ALL_ROWS);
    let r = pair.run(&VerifyOptions::default()).await;
    assert!(r.is_clean(), "{r}");
    let t = &r.cursor.tally;
    assert_eq!((t.source_rows, t.target_rows, t.rows_compared), (3, 3, 3));
    assert_eq!(r.columns.len(), 20);
    assert!(r.schema_differences.is_empty());
    let pos = r
        .source_snapshot
        .as_ref()
        .expect("MariaDB reports the snapshot position");
    assert!(pos.file.starts_with("mysql-bin."), "{pos}");
    assert!(r.to_string().contains("EQUAL"), "{r}");
    pair.close().await;
}

/// The smallest change of each column of [`ALL_TYPES`], applied to one copy of row 1 each.
const MINIMAL_CHANGES: &[(&str, &str)] = &[
    ("d", "-1.501"),
    ("f", "0.1000001"), // prints as 0.1 like the original FLOAT
    ("g", "0.3"),
    ("dt", "'2024-02-29 23:59:59.999998'"),
    ("ts", "'2024-03-01 12:00:00.500001'"),
    ("dd", "'2024-02-28'"),
    ("tm", "'-838:59:59.998'"),
    ("y", "2154"),
    ("b", "X'61000001'"),
    ("vb", "X'61'"),
    ("bt", "b'10100'"),
    ("e", "'a'"),
    ("st", "'y'"),
    ("j", "'{\"a\":[1, 2.5, \"é\"]}'"),
    ("s", "'Grüße 👋'"),
    ("c", "'aB'"),
    ("tx", "'long text'"),
    ("bl", "X'00FF'"),
    ("n", "-2147483647"),
];

#[tokio::test]
async fn every_type_detects_its_smallest_change() {
    let pair = Pair::new("verify_types", ALL_TYPES);
    pair.both(ALL_ROWS);
    let cols = MINIMAL_CHANGES
        .iter()
        .map(|c| c.0)
        .collect::<Vec<_>>()
        .join(", ");
    pair.both(&format!(
        "INSERT INTO t (id, {cols}) SELECT 100 + seq, {cols} FROM t, seq_1_to_19 WHERE id = 1"
    ));
    let updates: Vec<String> = MINIMAL_CHANGES
        .iter()
        .enumerate()
        .map(|(i, (c, v))| format!("UPDATE t SET {c} = {v} WHERE id = {}", 101 + i))
        .collect();
    pair.tgt(&format!(
        "SET NAMES utf8mb4; SET time_zone = '+00:00'; {}",
        updates.join("; ")
    ));
    let r = pair.run(&VerifyOptions::default()).await;
    let want: Vec<(String, String)> = MINIMAL_CHANGES
        .iter()
        .enumerate()
        .map(|(i, (c, _))| ((101 + i).to_string(), c.to_string()))
        .collect();
    assert_eq!(fields(&r), want, "{r}");
    assert_eq!(r.cursor.tally.differing_rows, 19);
    pair.close().await;
}

#[tokio::test]
async fn deleted_added_and_changed_rows_are_named() {
    let pair = Pair::new(
        "verify_dac",
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), qty INT)",
    );
    pair.both("INSERT INTO t SELECT seq, CONCAT('n', seq), seq * 10 FROM seq_1_to_10");
    pair.tgt("DELETE FROM t WHERE id = 3; INSERT INTO t VALUES (11, 'new', 0); UPDATE t SET name = 'changed' WHERE id = 5");
    let r = pair.run(&VerifyOptions::default()).await;
    let t = &r.cursor.tally;
    assert_eq!(
        (t.missing.count, t.missing.examples.clone()),
        (1, ints(&[3]))
    );
    assert_eq!((t.extra.count, t.extra.examples.clone()), (1, ints(&[11])));
    assert_eq!((t.differing_rows, t.differing_fields.count), (1, 1));
    assert_eq!(fields(&r), want(&[("5", "name")]));
    let d = &t.differing_fields.examples[0];
    assert_eq!(d.source.to_string(), "\"n5\" (2 bytes)");
    assert_eq!(d.target.to_string(), "\"changed\" (7 bytes)");
    assert_eq!(t.fields_by_column.get("name"), Some(&1));
    assert_eq!((t.source_rows, t.target_rows, t.rows_compared), (10, 10, 9));
    assert!(!r.is_clean());
    let text = r.to_string();
    assert!(
        text.contains("missing keys (in source, not in target): 1 (first: 3)"),
        "{text}"
    );
    assert!(
        text.contains("extra keys (in target, not in source): 1 (first: 11)"),
        "{text}"
    );
    let json = serde_json::to_value(&r).expect("json");
    assert_eq!(json["cursor"]["tally"]["differing_fields"]["count"], 1);
    pair.close().await;
}

#[tokio::test]
async fn null_empty_spaces_zero_bytes_and_numbers_are_exact() {
    let pair = Pair::new(
        "verify_exact",
        "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5) NULL, s VARCHAR(5), vb VARBINARY(8),
         b BINARY(4), d DECIMAL(6,2), f FLOAT, g DOUBLE, u VARCHAR(5) COLLATE utf8mb4_general_ci)",
    );
    pair.src(
        "INSERT INTO t VALUES
         (1, NULL, 'x',  X'61',   X'6162',     1.5, 1.0000001, 0.3, 'a'),
         (2, '',   'x ', X'6100', X'61000000', 1.5, 1,         0.3, 'a'),
         (3, 'k',  'x',  X'61',   X'61000000', 1.5, 1,         0.3, 'a')",
    );
    pair.tgt(
        "INSERT INTO t VALUES
         (1, '',   'x',  X'61',   X'61620000', 1.50, 1.0000002, 0.3, 'A'),
         (2, NULL, 'x',  X'61',   X'61000001', 2.5,  1,         0.30000000000000004, 'a'),
         (3, 'k',  'x',  X'61',   X'61',       1.5,  1,         0.3, 'a')",
    );
    let r = pair.run(&VerifyOptions::default()).await;
    let expected = [
        (1, "a"),  // NULL vs ''
        (1, "f"),  // FLOAT 1.0000001 vs 1.0000002 (both print as 1)
        (1, "u"),  // case, equal under the _ci collation
        (2, "a"),  // '' vs NULL
        (2, "s"),  // trailing space
        (2, "vb"), // trailing 0x00 in VARBINARY
        (2, "b"),  // last byte of BINARY(4)
        (2, "d"),  // 1.5 vs 2.5 (HEX(decimal) would round both to 2)
        (2, "g"),  // 0.3 vs 0.30000000000000004
    ];
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(k, c)| (k.to_string(), c.to_string()))
        .collect();
    let mut got = fields(&r);
    let order = |c: &str| {
        ["a", "s", "vb", "b", "d", "f", "g", "u"]
            .iter()
            .position(|x| *x == c)
    };
    got.sort_by_key(|(k, c)| (k.clone(), order(c)));
    let mut want_sorted = want.clone();
    want_sorted.sort_by_key(|(k, c)| (k.clone(), order(c)));
    assert_eq!(got, want_sorted, "{r}");
    let t = &r.cursor.tally;
    // Row 3: BINARY(4) X'61' is stored padded, so it equals X'61000000'.
    assert_eq!((t.differing_rows, t.differing_fields.count), (2, 9));
    assert_eq!((t.missing.count, t.extra.count), (0, 0));
    let null_vs_empty = &t.differing_fields.examples[0];
    assert_eq!(
        (
            null_vs_empty.source.to_string(),
            null_vs_empty.target.to_string()
        ),
        ("NULL".to_string(), "\"\" (0 bytes)".to_string())
    );
    let vb = t
        .differing_fields
        .examples
        .iter()
        .find(|d| d.column == "vb")
        .expect("vb differs");
    assert_eq!(vb.source.to_string(), "0x6100 (2 bytes)");
    pair.close().await;
}

#[tokio::test]
async fn timestamps_written_under_other_zones_are_not_a_difference() {
    let pair = Pair::new(
        "verify_tz",
        "CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP(6) NULL, dt DATETIME(6))",
    );
    pair.src(
        "SET time_zone = '+00:00';
         INSERT INTO t VALUES (1, '2024-03-01 12:00:00.123456', '2024-03-01 12:00:00.123456'),
                              (2, '2024-03-01 12:00:00', '2024-03-01 12:00:00')",
    );
    // The same instants written by a session in +05:30; the DATETIME is never shifted.
    // Row 2's TIMESTAMP is the same wall-clock text, hence another instant: a difference.
    pair.tgt(
        "SET time_zone = '+05:30';
         INSERT INTO t VALUES (1, '2024-03-01 17:30:00.123456', '2024-03-01 12:00:00.123456'),
                              (2, '2024-03-01 12:00:00', '2024-03-01 12:00:00')",
    );
    let r = pair.run(&VerifyOptions::default()).await;
    assert_eq!(fields(&r), want(&[("2", "ts")]), "{r}");
    let d = &r.cursor.tally.differing_fields.examples[0];
    assert_eq!(
        d.source.to_string(),
        "\"2024-03-01 12:00:00.000000\" (26 bytes)"
    );
    assert_eq!(
        d.target.to_string(),
        "\"2024-03-01 06:30:00.000000\" (26 bytes)"
    );
    pair.close().await;
}

/// Keys 1..=1000 and 10^12..=10^12+1000 on the source; the target misses three, has three
/// extra and two changed rows, placed around chunk boundaries and the gap.
fn sparse(prefix: &str) -> Pair {
    let pair = Pair::new(
        prefix,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR(20))",
    );
    pair.both(
        "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_1000;
         INSERT INTO t SELECT 1000000000000 + seq, CONCAT('w', seq) FROM seq_0_to_1000",
    );
    pair.tgt(
        "DELETE FROM t WHERE id IN (7, 1000, 1000000000000);
         INSERT INTO t VALUES (-5, 'x'), (1001, 'x'), (1000000001001, 'x');
         UPDATE t SET v = 'changed' WHERE id IN (8, 1000000000500)",
    );
    pair
}

#[tokio::test]
async fn sparse_keys_across_chunk_boundaries() {
    let pair = sparse("verify_sparse");
    let small = pair.run(&chunked(7)).await;
    let t = &small.cursor.tally;
    assert_eq!(
        t.missing.examples,
        ints(&[7, 1000, 1_000_000_000_000]),
        "{small}"
    );
    assert_eq!(t.extra.examples, ints(&[-5, 1001, 1_000_000_001_001]));
    assert_eq!(fields(&small), want(&[("8", "v"), ("1000000000500", "v")]));
    assert_eq!(
        (t.source_rows, t.target_rows, t.rows_compared),
        (2001, 2001, 1998)
    );
    assert!(t.chunks >= 2001 / 7, "{} chunks", t.chunks);
    assert!(small.complete);
    let whole = pair.run(&VerifyOptions::default()).await;
    assert_eq!(whole.cursor.tally.chunks, 1);
    let strip = |r: &Report| bf::verify::Tally {
        chunks: 0,
        ..r.cursor.tally.without_timing()
    };
    assert_eq!(strip(&small), strip(&whole));
    pair.close().await;
}

#[tokio::test]
async fn a_resumed_walk_has_the_same_totals() {
    let pair = sparse("verify_resume");
    let once = pair.run(&chunked(7)).await;
    let mut cursor = VerifyCursor::start();
    let mut runs = 0;
    loop {
        let options = VerifyOptions {
            max_chunks: Some(40),
            ..chunked(7)
        };
        let r = pair.run_from(&options, &mut cursor).await;
        runs += 1;
        assert_eq!(r.cursor, cursor);
        if r.complete {
            break;
        }
        assert!(!r.is_clean());
        assert!(r.to_string().contains("resume from the cursor"), "{r}");
        // Persist and restore, as the state store will.
        let json = serde_json::to_string(&cursor).expect("cursor json");
        cursor = serde_json::from_str(&json).expect("cursor back");
        assert!(runs < 100, "the walk does not end");
    }
    assert!(runs > 5, "{runs} runs");
    assert_eq!(
        cursor.tally.without_timing(),
        once.cursor.tally.without_timing()
    );
    // A finished cursor walks nothing more.
    let again = pair.run_from(&chunked(7), &mut cursor).await;
    assert!(again.complete);
    assert_eq!(
        again.cursor.tally.without_timing(),
        once.cursor.tally.without_timing()
    );
    pair.close().await;
}

#[tokio::test]
async fn a_pinned_source_does_not_see_later_writes() {
    let pair = Pair::new("verify_pin", "CREATE TABLE t (id INT PRIMARY KEY, v INT)");
    pair.both("INSERT INTO t SELECT seq, seq FROM seq_1_to_20");
    let master = shared_source().sql("SHOW MASTER STATUS");
    let pinned = verify::pin_source(&pair.source, &["id"], &VerifyOptions::default())
        .await
        .expect("pin");
    let pos = pinned.snapshot_position().expect("position").clone();
    let mut cols = master.split('\t');
    assert_eq!(cols.next(), Some(pos.file.as_str()));
    // Other tests write to the shared source concurrently: the read view is at or after
    // the position read just before it opened.
    let before: u64 = cols.next().and_then(|p| p.parse().ok()).expect("position");
    assert!(pos.pos >= before, "{pos} < {before}");
    pair.src("INSERT INTO t VALUES (21, 21); UPDATE t SET v = 0 WHERE id = 1");
    let r = pinned
        .compare(&pair.target, &mut VerifyCursor::start())
        .await
        .expect("compare");
    assert!(r.is_clean(), "{r}");
    assert_eq!(r.source_snapshot, Some(pos));
    // Unpinned, the writes are differences.
    let r = pair.run(&VerifyOptions::default()).await;
    assert_eq!(r.cursor.tally.extra.count + r.cursor.tally.missing.count, 1);
    assert_eq!(fields(&r), want(&[("1", "v")]));
    pair.close().await;
}

#[tokio::test]
async fn definition_differences_are_reported() {
    let pair = Pair::new(
        "verify_schema",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT, w INT)",
    );
    pair.tgt("ALTER TABLE t MODIFY v BIGINT, DROP COLUMN w");
    pair.both("INSERT INTO t (id, v) VALUES (1, 1)");
    let r = pair.run(&VerifyOptions::default()).await;
    assert_eq!(
        r.schema_differences,
        vec![
            "column `v`: source int NULL, target bigint NULL".to_string(),
            "column `w` is missing in the target".to_string(),
        ]
    );
    assert_eq!(r.columns, vec!["id".to_string(), "v".to_string()]);
    assert!(
        r.cursor.tally.is_clean(),
        "rows still compare on the common columns: {r}"
    );
    assert!(!r.is_clean());
    assert!(
        r.to_string().contains("definition differs: column `w`"),
        "{r}"
    );
    pair.close().await;
}

#[tokio::test]
async fn a_missing_table_or_key_is_a_definite_usage_error() {
    let pair = Pair::new(
        "verify_missing",
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
    );
    let opts = VerifyOptions::default();
    let e = verify::verify(
        &pair.source,
        &pair.target,
        &["nope"],
        &opts,
        &mut VerifyCursor::start(),
    )
    .await
    .expect_err("no such key column");
    assert_eq!(
        e.as_definite().map(|d| d.code.as_str()),
        Some("usage"),
        "{e}"
    );
    let gone = Endpoint::new(pair.target.pool.clone(), pair.tgt_db.clone(), "absent");
    let e = verify::verify(
        &pair.source,
        &gone,
        &["id"],
        &opts,
        &mut VerifyCursor::start(),
    )
    .await
    .expect_err("no such table");
    assert!(e.to_string().contains("does not exist"), "{e}");
    pair.close().await;
}

/// Walks `pair` once whole, then in runs of `max_chunks` chunks of `chunk` keys with the
/// cursor persisted as `VCUR` bytes between runs, and checks both give the same totals.
async fn resumed_equals_whole(pair: &Pair, chunk: usize, max_chunks: u64) -> Report {
    let once = pair.run(&chunked(chunk)).await;
    let mut cursor = VerifyCursor::start();
    let mut runs = 0;
    loop {
        let options = VerifyOptions {
            max_chunks: Some(max_chunks),
            ..chunked(chunk)
        };
        let r = pair.run_from(&options, &mut cursor).await;
        runs += 1;
        if r.complete {
            break;
        }
        cursor = VerifyCursor::decode(&cursor.encode()).expect("VCUR round trip");
        assert!(runs < 1000, "the walk does not end");
    }
    assert!(runs > 2, "{runs} runs");
    assert_eq!(
        cursor.tally.without_timing(),
        once.cursor.tally.without_timing()
    );
    once
}

/// Keyed by (INT, VARCHAR(20) utf8mb4_general_ci): a row missing, one extra, a differing
/// non-key field, a case-only and a trailing-space-only difference of the key column
/// (the same key under the collation's `=` and PAD SPACE) are each exactly what they are.
#[tokio::test]
async fn composite_int_varchar_ci_keys() {
    let pair = Pair::keyed(
        "verify_k_ci",
        "CREATE TABLE t (a INT NOT NULL, s VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL,
         v INT, PRIMARY KEY (a, s)) DEFAULT CHARSET=utf8mb4",
        &["a", "s"],
    );
    pair.both(
        "SET NAMES utf8mb4;
         INSERT INTO t SELECT seq DIV 7, CONCAT('k', seq MOD 7), seq FROM seq_0_to_139;
         INSERT INTO t VALUES (1, 'a', 1), (1, 'ab', 2), (1, 'abc', 3), (1, 'b', 4),
                              (1, '', 5), (1, 'é', 6), (-1, 'x', 7)",
    );
    let clean = pair.run(&chunked(5)).await;
    assert!(clean.is_clean(), "{clean}");
    assert_eq!(clean.cursor.tally.rows_compared, 147);
    pair.tgt(
        "SET NAMES utf8mb4;
         DELETE FROM t WHERE a = 1 AND s = 'a';
         INSERT INTO t VALUES (1, 'zz', 0);
         UPDATE t SET v = -1 WHERE a = 2 AND s = 'k3';
         UPDATE t SET s = 'AB' WHERE a = 1 AND s = 'ab';
         UPDATE t SET s = 'k1 ' WHERE a = 3 AND s = 'k1'",
    );
    let r = resumed_equals_whole(&pair, 4, 3).await;
    let t = &r.cursor.tally;
    assert_eq!(shown(&t.missing.examples), ["(1, 'a')"], "{r}");
    assert_eq!(shown(&t.extra.examples), ["(1, 'zz')"], "{r}");
    assert_eq!(
        fields(&r),
        want(&[("(1, 'ab')", "s"), ("(2, 'k3')", "v"), ("(3, 'k1')", "s")]),
        "{r}"
    );
    assert_eq!(
        (t.missing.count, t.extra.count, t.differing_rows),
        (1, 1, 3)
    );
    let case = &t.differing_fields.examples[0];
    assert_eq!(
        (case.source.to_string(), case.target.to_string()),
        (
            "\"ab\" (2 bytes)".to_string(),
            "\"AB\" (2 bytes)".to_string()
        )
    );
    assert_eq!(
        (t.source_rows, t.target_rows, t.rows_compared),
        (147, 147, 146)
    );
    assert!(
        r.to_string()
            .contains("missing keys (in source, not in target): 1 (first: (1, 'a'))"),
        "{r}"
    );
    pair.close().await;
}

/// Keyed by BIGINT UNSIGNED with keys on both sides of 2^63 and up to 2^64-1.
#[tokio::test]
async fn bigint_unsigned_keys_above_2_63() {
    let pair = Pair::keyed(
        "verify_k_u64",
        "CREATE TABLE t (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v VARCHAR(10))",
        &["id"],
    );
    pair.both(
        "INSERT INTO t SELECT seq, 'low' FROM seq_0_to_20;
         INSERT INTO t SELECT 9223372036854775800 + seq, 'mid' FROM seq_0_to_20;
         INSERT INTO t SELECT 18446744073709551600 + seq, 'top' FROM seq_0_to_15",
    );
    let clean = pair.run(&chunked(4)).await;
    assert!(clean.is_clean(), "{clean}");
    assert_eq!(clean.cursor.tally.rows_compared, 58);
    pair.tgt(
        "DELETE FROM t WHERE id = 9223372036854775808;
         INSERT INTO t VALUES (18446744073709551599, 'new');
         UPDATE t SET v = 'changed' WHERE id = 18446744073709551615",
    );
    let r = resumed_equals_whole(&pair, 4, 2).await;
    let t = &r.cursor.tally;
    assert_eq!(shown(&t.missing.examples), ["9223372036854775808"], "{r}");
    assert_eq!(shown(&t.extra.examples), ["18446744073709551599"], "{r}");
    assert_eq!(fields(&r), want(&[("18446744073709551615", "v")]), "{r}");
    assert_eq!(
        (t.source_rows, t.target_rows, t.rows_compared),
        (58, 58, 57)
    );
    pair.close().await;
}

/// Keyed by (CHAR(3), CHAR(30)) under utf8mb4_general_ci.
#[tokio::test]
async fn char3_char30_keys() {
    let pair = Pair::keyed(
        "verify_k_chars",
        "CREATE TABLE t (c CHAR(3) NOT NULL, d CHAR(30) NOT NULL, v INT,
         PRIMARY KEY (c, d)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
        &["c", "d"],
    );
    pair.both(
        "SET NAMES utf8mb4;
         INSERT INTO t SELECT CONCAT('c', seq MOD 10), CONCAT('row ', seq), seq FROM seq_1_to_100;
         INSERT INTO t VALUES ('ab', 'x', 1), ('ab', 'xy', 2), ('a', 'x', 3), ('abc', '', 4),
                              ('b', 'Straße', 5)",
    );
    let clean = pair.run(&chunked(6)).await;
    assert!(clean.is_clean(), "{clean}");
    assert_eq!(clean.cursor.tally.rows_compared, 105);
    pair.tgt(
        "SET NAMES utf8mb4;
         DELETE FROM t WHERE c = 'c3' AND d = 'row 13';
         INSERT INTO t VALUES ('c3', 'row 13 extra', 0);
         UPDATE t SET v = 0 WHERE c = 'a' AND d = 'x';
         UPDATE t SET c = 'AB' WHERE c = 'ab' AND d = 'xy'",
    );
    let r = resumed_equals_whole(&pair, 5, 4).await;
    let t = &r.cursor.tally;
    assert_eq!(shown(&t.missing.examples), ["('c3', 'row 13')"], "{r}");
    assert_eq!(shown(&t.extra.examples), ["('c3', 'row 13 extra')"], "{r}");
    assert_eq!(
        fields(&r),
        want(&[("('a', 'x')", "v"), ("('ab', 'xy')", "c")]),
        "{r}"
    );
    assert_eq!(
        (t.source_rows, t.target_rows, t.rows_compared),
        (105, 105, 104)
    );
    pair.close().await;
}

/// Keyed by (DATE, DATETIME(6), TIMESTAMP(3), YEAR, VARBINARY(4), BINARY(2)): the seek
/// literals of each type, and a resumed walk through them.
#[tokio::test]
async fn temporal_and_binary_keys() {
    let pair = Pair::keyed(
        "verify_k_time",
        "CREATE TABLE t (d DATE NOT NULL, dt DATETIME(6) NOT NULL, ts TIMESTAMP(3) NOT NULL,
         y YEAR NOT NULL, vb VARBINARY(4) NOT NULL, b BINARY(2) NOT NULL, v INT,
         PRIMARY KEY (d, dt, ts, y, vb, b))",
        &["d", "dt", "ts", "y", "vb", "b"],
    );
    pair.both(
        "SET time_zone = '+00:00';
         INSERT INTO t SELECT '2024-01-02' + INTERVAL (seq DIV 20) DAY,
             '2024-01-02 00:00:00' + INTERVAL (seq MOD 4) SECOND + INTERVAL seq MICROSECOND,
             '1999-12-31 23:59:59.999', 2024, X'00', X'61', seq FROM seq_0_to_59;
         INSERT INTO t VALUES
             ('2024-01-02', '2024-01-02 00:00:00', '2000-01-01 00:00:00', 1901, X'', X'', 1001),
             ('2024-01-02', '2024-01-02 00:00:00', '2000-01-01 00:00:00', 2155, X'', X'', 1002),
             ('2024-01-02', '2024-01-02 00:00:00', '2000-01-01 00:00:00', 2155, X'00', X'', 1003),
             ('2024-01-02', '2024-01-02 00:00:00', '2000-01-01 00:00:00', 2155, X'0000', X'', 1004),
             ('2024-01-02', '2024-01-02 00:00:00', '2000-01-01 00:00:00', 2155, X'01', X'ff', 1005)",
    );
    let clean = pair.run(&chunked(3)).await;
    assert!(clean.is_clean(), "{clean}");
    assert_eq!(clean.cursor.tally.rows_compared, 65);
    pair.tgt(
        "DELETE FROM t WHERE v = 1003;
         UPDATE t SET v = -1 WHERE v = 1004;
         UPDATE t SET vb = X'02' WHERE v = 1005",
    );
    let r = resumed_equals_whole(&pair, 3, 2).await;
    let t = &r.cursor.tally;
    let k = "('2024-01-02', '2024-01-02 00:00:00.000000', '2000-01-01 00:00:00.000', 2155";
    assert_eq!(
        shown(&t.missing.examples),
        [format!("{k}, 0x00, 0x0000)"), format!("{k}, 0x01, 0xff00)")],
        "{r}"
    );
    assert_eq!(
        shown(&t.extra.examples),
        [format!("{k}, 0x02, 0xff00)")],
        "{r}"
    );
    assert_eq!(
        fields(&r),
        want(&[(&format!("{k}, 0x0000, 0x0000)"), "v")]),
        "{r}"
    );
    pair.close().await;
}

/// `backfill verify JOB` (quiescent) of a job keyed by (INT, VARCHAR _ci): the command
/// merges by the sealed key's columns (no single-integer-key refusal any more), names a
/// case-only difference of a key column as a differing field and exits 4, and exits 0
/// once the target equals the source.
#[tokio::test]
async fn the_command_verifies_a_job_with_a_composite_key() {
    use backfill_tests::install::{installs, Tables};
    let ddl = "CREATE TABLE t (a INT NOT NULL, s VARCHAR(20) COLLATE utf8mb4_general_ci NOT NULL,
               v INT, PRIMARY KEY (a, s)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";
    let case = Tables::new("vjob_ck", ddl, ddl);
    let rows = "INSERT INTO t SELECT seq DIV 3, CONCAT('k', seq MOD 3), seq FROM seq_0_to_29;
                INSERT INTO t VALUES (1, 'ab', 100)";
    case.source.sql_in(&case.sdb, rows);
    let done = installs(&case.req()).await;
    // The target is filled by hand (no serve): a quiescent verify only compares.
    case.target.sql_in(&case.tdb, rows);
    case.target
        .sql_in(&case.tdb, "UPDATE t SET s = 'AB' WHERE a = 1 AND s = 'ab'");
    let verify = |extra: &[&str]| {
        let o = backfill_tests::command()
            .args(["verify", &done.job_id.0.to_string()])
            .args(["--state", &case.state_url()])
            .args([
                "--source",
                &case.source.url(),
                "--target",
                &case.target.url(),
            ])
            .args(["--format", "json", "--chunk-size", "4"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .output()
            .expect("run backfill");
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let msg = format!("{out}{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
        (o.status.code(), v, msg)
    };
    let (code, v, msg) = verify(&[]);
    assert_eq!(code, Some(4), "{msg}");
    let t = &v["cursor"]["tally"];
    assert_eq!(
        (t["missing"]["count"].as_u64(), t["extra"]["count"].as_u64()),
        (Some(0), Some(0)),
        "{msg}"
    );
    assert_eq!(t["differing_fields"]["count"], 1, "{msg}");
    let f = &t["differing_fields"]["examples"][0];
    assert_eq!(f["column"], "s", "{msg}");
    assert_eq!(f["key"]["values"][0]["Int"], 1, "{msg}");
    assert_eq!(v["key"], serde_json::json!(["a", "s"]), "{msg}");
    case.target
        .sql_in(&case.tdb, "UPDATE t SET s = 'ab' WHERE a = 1 AND s = 'AB'");
    let (code, v, msg) = verify(&[]);
    assert_eq!(code, Some(0), "{msg}");
    assert_eq!(v["cursor"]["tally"]["rows_compared"], 31, "{msg}");
    // Split: the stored VCUR v2 cursor (a key with server weights) is continued.
    let (code, v, msg) = verify(&["--max-chunks", "2"]);
    assert_eq!(
        (code, &v["complete"]),
        (Some(0), &serde_json::json!(false)),
        "{msg}"
    );
    assert_eq!(v["cursor"]["tally"]["rows_compared"], 8, "{msg}");
    let (code, v, msg) = verify(&["--resume"]);
    assert_eq!(
        (code, &v["complete"]),
        (Some(0), &serde_json::json!(true)),
        "{msg}"
    );
    assert_eq!(v["cursor"]["tally"]["rows_compared"], 31, "{msg}");
    assert_eq!(v["cursor"]["tally"]["chunks"], 8, "{msg}");
}

/// Keyed by (DECIMAL(6,2), TIME(3)) with negative, zero and boundary values: the server's
/// shifted texts order like its ORDER BY (the walk refuses any chunk they would not).
#[tokio::test]
async fn decimal_and_time_keys() {
    let pair = Pair::keyed(
        "verify_k_dec",
        "CREATE TABLE t (d DECIMAL(6,2) NOT NULL, tm TIME(3) NOT NULL, v INT,
         PRIMARY KEY (d, tm))",
        &["d", "tm"],
    );
    pair.both(
        "CREATE TEMPORARY TABLE ds (d DECIMAL(6,2));
         INSERT INTO ds VALUES (-9999.99), (-10), (-1.5), (-0.01), (0), (0.01), (1.5), (10), (9999.99);
         CREATE TEMPORARY TABLE ts (tm TIME(3));
         INSERT INTO ts VALUES ('-838:59:59.999'), ('-100:00:00'), ('-00:00:00.001'), ('00:00:00'),
             ('00:00:00.001'), ('12:00:00.5'), ('100:00:00'), ('838:59:59.999');
         INSERT INTO t SELECT d, tm, 1 FROM ds, ts",
    );
    let clean = pair.run(&chunked(5)).await;
    assert!(clean.is_clean(), "{clean}");
    assert_eq!(clean.cursor.tally.rows_compared, 72);
    pair.tgt(
        "DELETE FROM t WHERE d = -0.01 AND tm = '-00:00:00.001';
         INSERT INTO t VALUES (-0.02, '00:00:00', 1);
         UPDATE t SET v = 2 WHERE d = 10 AND tm = '-100:00:00'",
    );
    let r = resumed_equals_whole(&pair, 5, 3).await;
    let t = &r.cursor.tally;
    assert_eq!(
        shown(&t.missing.examples),
        ["('-0.01', '-00:00:00.001')"],
        "{r}"
    );
    assert_eq!(
        shown(&t.extra.examples),
        ["('-0.02', '00:00:00.000')"],
        "{r}"
    );
    assert_eq!(
        fields(&r),
        want(&[("('10.00', '-100:00:00.000')", "v")]),
        "{r}"
    );
    assert_eq!(
        (t.source_rows, t.target_rows, t.rows_compared),
        (72, 72, 71)
    );
    pair.close().await;
}

/// Keyed by (ENUM, SET) whose index and bit orders differ from their text order: the walk
/// seeks by the numbers ORDER BY sorts by.
#[tokio::test]
async fn enum_and_set_keys() {
    let pair = Pair::keyed(
        "verify_k_enum",
        "CREATE TABLE t (e ENUM('zeta','alpha','mid') NOT NULL, st SET('b','a','c') NOT NULL,
         v INT, PRIMARY KEY (e, st))",
        &["e", "st"],
    );
    pair.both("INSERT INTO t SELECT seq DIV 8 + 1, seq MOD 8, seq FROM seq_0_to_22");
    let clean = pair.run(&chunked(3)).await;
    assert!(clean.is_clean(), "{clean}");
    assert_eq!(clean.cursor.tally.rows_compared, 23);
    pair.tgt(
        "DELETE FROM t WHERE e = 'alpha' AND st = 'b,a';
         UPDATE t SET v = -1 WHERE e = 'zeta' AND st = 'c';
         INSERT INTO t VALUES ('mid', 'b,a,c', 0)",
    );
    let r = resumed_equals_whole(&pair, 3, 2).await;
    let t = &r.cursor.tally;
    assert_eq!(shown(&t.missing.examples), ["('alpha', 'b,a')"], "{r}");
    assert_eq!(shown(&t.extra.examples), ["('mid', 'b,a,c')"], "{r}");
    assert_eq!(fields(&r), want(&[("('zeta', 'c')", "v")]), "{r}");
    pair.close().await;
}

/// A sampled walk (the activation audit's `--audit-sample-every`) compares exactly the
/// chunks its seed chooses (`verify::sample`), walks over the others by their keys, and
/// finds the differences of the compared chunks only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampled_walk_compares_the_chunks_its_seed_chooses() {
    let pair = Pair::new(
        "v_sample",
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8))",
    );
    pair.both("INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_100");
    pair.tgt("UPDATE t SET v = 'x'");
    let sample = verify::sample::Sample { seed: 11, every: 3 };
    let chosen: Vec<u64> = (0..10).filter(|i| sample.compares(*i)).collect();
    assert!(!chosen.is_empty() && chosen.len() < 10, "{chosen:?}");
    let r = pair
        .run(&VerifyOptions {
            sample: Some(sample),
            ..chunked(10)
        })
        .await;
    let t = &r.cursor.tally;
    assert!(r.complete);
    // Ten full chunks of 10 keys, then the empty one that ends the walk.
    assert_eq!(t.chunks + r.skipped_chunks, 11, "{r}");
    assert_eq!(t.differing_rows, 10 * chosen.len() as u64, "{r}");
    let firsts: Vec<u64> = t
        .differing_fields
        .examples
        .iter()
        .map(|d| (d.key.to_string().parse::<u64>().unwrap() - 1) / 10)
        .collect();
    assert!(
        firsts.iter().all(|c| chosen.contains(c)),
        "{firsts:?} {chosen:?}"
    );
    assert_eq!((t.missing.count, t.extra.count), (0, 0));
    // The same seed again: the same chunks, the same counts.
    let again = pair
        .run(&VerifyOptions {
            sample: Some(sample),
            ..chunked(10)
        })
        .await;
    assert_eq!(again.cursor.tally.differing_rows, t.differing_rows);
    pair.close().await;
}
