//! The independent comparator against real MariaDB servers: the shared source and target of
//! this test binary, each test in its own databases, rows loaded with plain SQL.
use backfill_tests::bf;
use backfill_tests::bf::verify::{self, Endpoint, Key, Report, VerifyCursor, VerifyOptions};
use harness::{shared_source, shared_target};

/// A source table and a target table of the same definition, in fresh databases.
pub(crate) struct Pair {
    pub(crate) src_db: String,
    pub(crate) tgt_db: String,
    pub(crate) source: Endpoint,
    pub(crate) target: Endpoint,
    pub(crate) key: Vec<&'static str>,
}

impl Pair {
    pub(crate) fn new(prefix: &str, ddl: &str) -> Pair {
        Pair::keyed(prefix, ddl, &["id"])
    }

    /// A pair of tables keyed by `key` (index order).
    pub(crate) fn keyed(prefix: &str, ddl: &str, key: &[&'static str]) -> Pair {
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
    pub(crate) fn both(&self, sql: &str) {
        self.src(sql);
        self.tgt(sql);
    }

    pub(crate) fn src(&self, sql: &str) {
        shared_source().sql_in(&self.src_db, sql);
    }

    pub(crate) fn tgt(&self, sql: &str) {
        shared_target().sql_in(&self.tgt_db, sql);
    }

    pub(crate) async fn run_from(
        &self,
        options: &VerifyOptions,
        cursor: &mut VerifyCursor,
    ) -> Report {
        verify::verify(&self.source, &self.target, &self.key, options, cursor)
            .await
            .expect("verify runs")
    }

    pub(crate) async fn run(&self, options: &VerifyOptions) -> Report {
        self.run_from(options, &mut VerifyCursor::start()).await
    }

    pub(crate) async fn close(self) {
        self.source.pool.disconnect().await.expect("source pool");
        self.target.pool.disconnect().await.expect("target pool");
    }
}

pub(crate) fn chunked(n: usize) -> VerifyOptions {
    VerifyOptions {
        chunk_size: n,
        ..VerifyOptions::default()
    }
}

/// (key as shown, column) of every differing field, in report order.
pub(crate) fn fields(r: &Report) -> Vec<(String, String)> {
    r.cursor
        .tally
        .differing_fields
        .examples
        .iter()
        .map(|d| (d.key.to_string(), d.column.clone()))
        .collect()
}

/// Integer keys as the report holds them.
pub(crate) fn ints(keys: &[i64]) -> Vec<Key> {
    keys.iter().copied().map(Key::of_i64).collect()
}

/// Keys as the report shows them.
pub(crate) fn shown(keys: &[Key]) -> Vec<String> {
    keys.iter().map(Key::to_string).collect()
}

/// (key, column) pairs as [`fields`] gives them.
pub(crate) fn want(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
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
pub(crate) async fn resumed_equals_whole(pair: &Pair, chunk: usize, max_chunks: u64) -> Report {
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

/// Equal chunks are proven by their count and hash sum on each server; a chunk whose sums
/// differ (a changed field, a key only the target has past the source's last key) is
/// read row by row, which names the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equal_chunks_are_compared_by_sums_and_the_others_row_by_row() {
    let pair = Pair::keyed(
        "v_sums",
        "CREATE TABLE t (a INT, b VARCHAR(8) COLLATE utf8mb4_general_ci, v VARCHAR(8), \
         PRIMARY KEY (a, b))",
        &["a", "b"],
    );
    pair.both(
        "INSERT INTO t SELECT seq DIV 3, CONCAT('k', seq), CONCAT('v', seq) FROM seq_1_to_100",
    );
    let equal = pair.run(&chunked(10)).await;
    assert!(equal.is_clean(), "{equal}");
    let t = &equal.cursor.tally;
    assert_eq!(
        (t.source_rows, t.target_rows, t.rows_compared),
        (100, 100, 100)
    );
    assert_eq!(equal.summed_chunks, t.chunks, "{equal}");
    // One changed field, one case-only change of a key byte, one extra key at the end.
    pair.tgt("UPDATE t SET v = 'x' WHERE b = 'k50'");
    pair.tgt("UPDATE t SET b = 'K71' WHERE b = 'k71'");
    pair.tgt("INSERT INTO t VALUES (1000, 'z', 'extra')");
    let r = pair.run(&chunked(10)).await;
    let t = &r.cursor.tally;
    assert!(r.complete && !r.is_clean(), "{r}");
    assert_eq!(
        fields(&r),
        want(&[("(16, 'k50')", "v"), ("(23, 'k71')", "b")]),
        "{r}"
    );
    assert_eq!(t.extra.count, 1, "{r}");
    assert_eq!(t.missing.count, 0, "{r}");
    assert_eq!(
        r.summed_chunks + 3,
        t.chunks,
        "three chunks read row by row: {r}"
    );
    pair.close().await;
}

/// A chunk whose rows are too long for one digest (over `DIGEST_MAX_BYTES`, 8 MiB: the
/// server cuts the chunk string and warns) is compared by sums instead, and so is the rest
/// of the walk; a difference past the cut is still found (a cut digest compared as it is
/// would call these chunks equal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_too_long_for_one_digest_are_compared_by_sums() {
    let pair = Pair::new("v_long", "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)");
    // Three rows of 6 MB of HEX each: 18 MB in one chunk of 10.
    pair.both("INSERT INTO t SELECT seq, REPEAT('a', 3000000) FROM seq_1_to_3");
    let equal = pair.run(&chunked(10)).await;
    assert!(equal.is_clean(), "{equal}");
    assert_eq!(equal.summed_chunks, equal.cursor.tally.chunks, "{equal}");
    assert_eq!(equal.cursor.tally.rows_compared, 3, "{equal}");
    pair.tgt("UPDATE t SET b = CONCAT(REPEAT('a', 2999999), 'b') WHERE id = 3");
    let r = pair.run(&chunked(10)).await;
    assert!(r.complete && !r.is_clean(), "{r}");
    assert_eq!(fields(&r), want(&[("3", "b")]), "{r}");
    pair.close().await;
}

/// A value whose HEX is over `max_allowed_packet` (16 MiB here) would be left out of its
/// row's hash (NULL with a warning, skipped by CONCAT_WS) and of the chunk's sum: the
/// walk refuses to call such rows equal, naming the warning and the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_too_large_to_hash_fails_the_walk_with_the_fix() {
    let pair = Pair::new("v_huge", "CREATE TABLE t (id INT PRIMARY KEY, b LONGBLOB)");
    pair.both("INSERT INTO t VALUES (1, 'x'), (2, REPEAT('a', 9000000)), (3, 'y')");
    pair.tgt("UPDATE t SET b = REPEAT('b', 9000000) WHERE id = 2");
    let e = verify::verify(
        &pair.source,
        &pair.target,
        &pair.key,
        &chunked(10),
        &mut VerifyCursor::start(),
    )
    .await
    .expect_err("rows that differ only in a value too large to hash are never equal");
    let text = e.to_string();
    assert!(text.contains("max_allowed_packet"), "{text}");
    assert!(text.contains("warned"), "{text}");
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
