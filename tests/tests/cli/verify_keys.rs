//! The independent comparator over composite and non-integer keys against real MariaDB
//! servers: (INT, VARCHAR _ci), BIGINT UNSIGNED above 2^63, CHAR, temporal and binary,
//! DECIMAL and TIME, ENUM and SET keys, and `backfill verify JOB` of a composite-keyed job.
//! The pair of tables and the report helpers are in `verify.rs`.
use crate::verify::{chunked, fields, resumed_equals_whole, shown, want, Pair};
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
