//! The suites' row digest (`backfill_tests::table_digest`) and the independent comparison
//! (`backfill_tests::compare`) against a real server: rows that differ only in a DECIMAL's
//! last digit of scale, one ULP of a DOUBLE, or one ULP of a FLOAT (values whose FLOAT
//! text is the same) must give other digests and be found differing, and identical rows
//! the same digest. Plain `HEX()` of a DECIMAL or FLOAT is the value rounded to an
//! integer, which saw none of these.
use backfill_tests::compare::compare;
use backfill_tests::table_digest;

const DDL: &str = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, d DECIMAL(12,3) NULL, \
                   x DOUBLE NULL, f FLOAT NULL) ENGINE=InnoDB";
const BASE: &str = "INSERT INTO t VALUES (1, 1.250, 1.0000000000000002, 1.0000001), \
                    (2, NULL, NULL, NULL)";

#[test]
fn the_row_digest_sees_a_decimal_digit_and_one_ulp_of_double_and_float() {
    let s = harness::shared_source();
    let cols = ["id", "d", "x", "f"];
    let db = |tag: &str, change: &str| {
        let db = s.fresh_db(&format!("dig_{tag}"));
        s.sql_in(&db, DDL);
        s.sql_in(&db, BASE);
        if !change.is_empty() {
            s.sql_in(&db, change);
        }
        db
    };
    let base = db("base", "");
    let same = db("same", "");
    let digest = |db: &str| table_digest(s, db, "t", "id", &cols);
    assert_eq!(digest(&base), digest(&same), "identical rows");
    assert!(compare(s, &base, s, &same, "t", &["id"]).is_clean());
    let changes = [
        ("dec", "UPDATE t SET d = 1.251 WHERE id = 1"),
        ("dbl", "UPDATE t SET x = 1.0000000000000004 WHERE id = 1"),
        ("flt", "UPDATE t SET f = 1.0000002 WHERE id = 1"),
        ("null", "UPDATE t SET d = 0 WHERE id = 2"),
    ];
    for (tag, change) in changes {
        let other = db(tag, change);
        assert_ne!(digest(&base), digest(&other), "{change}");
        let d = compare(s, &base, s, &other, "t", &["id"]);
        assert_eq!((d.rows, d.differing), (2, 1), "{change}: {d}");
    }
    // The FLOAT pair is one the server's FLOAT text does not tell apart.
    let alike =
        "SELECT CAST(CAST(1.0000001 AS FLOAT) AS CHAR) = CAST(CAST(1.0000002 AS FLOAT) AS CHAR)";
    assert_eq!(
        s.sql(alike),
        "1",
        "FLOAT 1.0000001 and 1.0000002 print alike"
    );
}
