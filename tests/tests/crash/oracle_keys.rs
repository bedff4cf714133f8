//! The exactly-once oracle's key equality is the target server's: a target row stored as
//! 'ÅSA É' is the row a delete of 'åsa é' removes under `latin1_swedish_ci`, and so for
//! UTF-16 code units, Cyrillic letters and PAD SPACE, while binary keys stay bytes. Before
//! this the oracle folded ASCII only, so a replay's delete that the target matched by a
//! non-ASCII letter's case was reported as a key written outside its range (the charsets
//! crash tests failed in CI, 2026-12-07). Values come from the server's own binlog text.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::oracle::{self, Collation, Mark};

#[test]
fn the_oracle_folds_keys_as_the_target_servers_collations_match_them() {
    let t = harness::shared_target();
    let db = t.fresh_db("okeys");
    t.sql_in(
        &db,
        "CREATE TABLE t (a VARCHAR(12) CHARACTER SET latin1 NOT NULL, \
         b VARCHAR(12) CHARACTER SET utf16 NOT NULL, \
         c VARCHAR(12) CHARACTER SET cp1251 NOT NULL, d VARBINARY(12) NOT NULL, \
         e VARCHAR(12) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci NOT NULL, \
         n INT NOT NULL, PRIMARY KEY (a, b, c, d, e))",
    );
    let mark = Mark::now(t);
    t.sql_in(
        &db,
        "SET NAMES utf8mb4; \
         INSERT INTO t VALUES ('åsa é', 'Ärger ǆ', 'Жё тйов', 'bytes', 'e', 1), \
           ('Bo', 'x', 'твой', 'bytes', 'e', 2); \
         UPDATE t SET a = UPPER(a), b = CONCAT(LOWER(b), '  '), c = LOWER(c) WHERE n = 1; \
         UPDATE t SET d = 'BYTES' WHERE n = 2; \
         UPDATE t SET e = 'E ' WHERE n = 2;",
    );
    let table = format!("`{db}`.`t`");
    let groups = oracle::read(t, &mark, &|n| n == table);
    let updates: Vec<_> = groups
        .iter()
        .flat_map(|g| &g.rows)
        .filter(|r| r.before.is_some() && r.after.is_some())
        .collect();
    assert_eq!(updates.len(), 3, "three updates in the binlog");
    let key = oracle::primary_key(t, &db, "t");
    assert_eq!(key, vec![0, 1, 2, 3, 4]);
    let k = |i: &Vec<Vec<u8>>| key.iter().map(|c| i[*c].clone()).collect::<Vec<_>>();
    let (b1, a1) = (
        k(updates[0].before.as_ref().unwrap()),
        k(updates[0].after.as_ref().unwrap()),
    );
    let (b2, a2) = (
        k(updates[1].before.as_ref().unwrap()),
        k(updates[1].after.as_ref().unwrap()),
    );
    let (b3, a3) = (
        k(updates[2].before.as_ref().unwrap()),
        k(updates[2].after.as_ref().unwrap()),
    );
    // Other bytes in every string column of the first row...
    for c in 0..3 {
        assert_ne!(b1[c], a1[c], "column {c} changed its bytes");
    }
    let mut keys = Collation::of(t, &db, "t", &key);
    let f = keys.fold(&[&b1, &a1, &b2, &a2, &b3, &a3]);
    // ...the same key under the columns' collations; a binary key's case is another key,
    // so is a trailing space under a NO PAD collation, and two rows never fold alike.
    assert_eq!(
        f[0], f[1],
        "'åsa é' = 'ÅSA É', 'Ärger ǆ' = 'ärger ǆ  ', 'Жё' = 'жё'"
    );
    assert_ne!(f[2], f[3], "VARBINARY 'bytes' <> 'BYTES'");
    assert_ne!(f[4], f[5], "NO PAD 'e' <> 'E '");
    assert_ne!(f[0], f[2], "two rows");
    // The server agrees: one row of each key.
    let n = t.sql_in(
        &db,
        "SET NAMES utf8mb4; SELECT COUNT(*) FROM t WHERE a = 'åsa é' AND c = 'ЖЁ ТЙОВ'",
    );
    assert_eq!(n.trim(), "1");
}
