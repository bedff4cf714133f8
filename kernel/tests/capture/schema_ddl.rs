//! DESIGN §16 item 1 against the server's own rendering: for each DDL, the definition
//! before and after it is read from a real MariaDB (`information_schema`, sealed as
//! install seals it), and the decision of [`kernel::schema_change`] (the statement
//! classified, then the definition after checked against its clauses) is the expected
//! one. A narrowing, a charset change or a signedness change passes the text and is
//! caught by the definitions; a second DDL already applied to the live table is caught
//! too (the live definition is not what the first DDL describes). A table of the
//! definition before, given the target statement, ends with the source's fingerprint.
use crate::support::*;
use kernel::schema_change::{check_after, classify, target_statement, Classified};

const BASE: &str = "(id INT NOT NULL PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb4 \
     COLLATE utf8mb4_general_ci NULL, qty INT NOT NULL, price DECIMAL(10,2) NOT NULL, \
     KEY i_qty (qty)) ENGINE=InnoDB";

/// (DDL with `T` for the table, compatible?) in the order of issue 16's acceptance.
const CASES: &[(&str, bool)] = &[
    ("ALTER TABLE T ADD COLUMN w INT NULL", true),
    ("ALTER TABLE T ADD COLUMN w INT NOT NULL DEFAULT 5 AFTER id", true),
    ("ALTER TABLE T ADD COLUMN w VARCHAR(8) NOT NULL DEFAULT 'a,b' FIRST", true),
    ("ALTER TABLE T MODIFY name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL", true),
    ("ALTER TABLE T MODIFY qty BIGINT NOT NULL", true),
    ("ALTER TABLE T MODIFY price DECIMAL(14,4) NOT NULL", true),
    ("ALTER TABLE T ADD INDEX i_name (name)", true),
    ("ALTER TABLE T DROP INDEX i_qty", true),
    ("ALTER TABLE T RENAME COLUMN qty TO amount", true),
    ("ALTER TABLE T CHANGE qty amount BIGINT NOT NULL", true),
    ("ALTER TABLE T DROP COLUMN price", true),
    ("ALTER TABLE T COMMENT 'orders'", true),
    ("CREATE INDEX i2 ON T (price)", true),
    ("ALTER TABLE T MODIFY name VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL", false),
    ("ALTER TABLE T MODIFY name VARCHAR(20) CHARACTER SET latin1 NULL", false),
    ("ALTER TABLE T MODIFY qty INT UNSIGNED NOT NULL", false),
    ("ALTER TABLE T MODIFY qty INT NULL, MODIFY price DECIMAL(8,2) NOT NULL", false),
    ("ALTER TABLE T MODIFY id BIGINT NOT NULL", false),
    ("ALTER TABLE T ADD UNIQUE KEY u (name)", false),
    ("ALTER TABLE T ADD COLUMN ts DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP", false),
    ("TRUNCATE TABLE T", false),
];

fn decide(
    sql: &str,
    before: &kernel::schema::SealedSchema,
    after: &kernel::schema::SealedSchema,
) -> Result<(), String> {
    match classify(sql, before) {
        Classified::Incompatible(i) => Err(i.to_string()),
        Classified::Compatible(a) => check_after(before, &a, after).map_err(|i| i.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ddl_is_decided_from_its_text_and_the_servers_definitions() {
    let e = env("ddl_class").await;
    let tdb = e.src.fresh_db("ddl_class_target");
    for (n, (ddl, want)) in CASES.iter().enumerate() {
        let t = format!("t{n}");
        e.src.sql_in(&e.db, &format!("CREATE TABLE {t} {BASE}"));
        let before = e.sealed(&t).await;
        let sql = ddl
            .replace(" T ", &format!(" {t} "))
            .replace(" T (", &format!(" {t} ("));
        let sql = if sql.ends_with(" T") {
            format!("{}{t}", &sql[..sql.len() - 1])
        } else {
            sql
        };
        e.src.sql_in(&e.db, &sql);
        let after = e.sealed(&t).await;
        let got = decide(&sql, &before, &after);
        assert_eq!(got.is_ok(), *want, "{sql}: {got:?}");
        if *want {
            same_on_a_target(&e, &tdb, &t, &sql, &before, &after).await;
        }
    }
}

/// A target table of the definition before takes the target statement and then has the
/// source's definition after (the fingerprint install and the audit compare).
async fn same_on_a_target(
    e: &Env,
    tdb: &str,
    t: &str,
    sql: &str,
    before: &kernel::schema::SealedSchema,
    after: &kernel::schema::SealedSchema,
) {
    e.src.sql_in(tdb, &format!("CREATE TABLE {t} {BASE}"));
    let quoted = format!("`{tdb}`.`{t}`");
    if let Some(stmt) = target_statement(sql, before, &quoted).unwrap() {
        e.src.sql_in(tdb, &stmt);
    }
    let mut c = e.conn().await;
    let facts = kernel::introspect::read_table(&mut c, tdb, t)
        .await
        .unwrap()
        .unwrap();
    let on_target = kernel::introspect::seal(&facts).unwrap();
    assert_eq!(
        on_target.fingerprint(),
        after.fingerprint(),
        "{sql}: target {:?}",
        after.differences(&on_target)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ddl_already_in_the_live_definition_is_not_taken_for_the_first() {
    let e = env("ddl_twice").await;
    e.src.sql_in(&e.db, &format!("CREATE TABLE t {BASE}"));
    let before = e.sealed("t").await;
    let first = "ALTER TABLE t ADD COLUMN w INT NULL";
    e.src.sql_in(&e.db, first);
    e.src.sql_in(&e.db, "ALTER TABLE t MODIFY name VARCHAR(30) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NULL");
    let live = e.sealed("t").await;
    let got = decide(first, &before, &live).unwrap_err();
    assert!(
        got.contains("`name`") && got.contains("does not modify it"),
        "{got}"
    );
}

/// Rows of a table paused at a DDL are kept raw in L; decoded later against the
/// definition after the DDL ([`kernel::capture::raw::decode_raw`]) they are exactly the
/// rows written, of every op, and against the definition before it they are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_rows_after_a_ddl_decode_against_the_definition_after_it() {
    use kernel::capture::raw::decode_raw;
    use kernel::capture::Reader;
    use kernel::change::Op;
    use kernel::control::IntentKind;
    use kernel::log::RecordBody;
    use kernel::value::SqlValue;
    let e = env("ddl_raw").await;
    e.src.sql_in(&e.db, &format!("CREATE TABLE t {BASE}"));
    e.init_stream(1000).await;
    let set = e.set_for(&[(1, "t")]).await;
    let before = e.sealed("t").await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), set);
    e.intent(1, IntentKind::B).await;
    e.src.sql_in(
        &e.db,
        "INSERT INTO t (id, name, qty, price) VALUES (1, 'a', 1, 1.50)",
    );
    e.src.sql_in(
        &e.db,
        "ALTER TABLE t ADD COLUMN w VARCHAR(8) NOT NULL DEFAULT 'd' AFTER id",
    );
    e.src.sql_in(
        &e.db,
        "INSERT INTO t VALUES (2, 'x,y', 'é', 2, 2.25); UPDATE t SET w = 'z', qty = 9 WHERE id = 1; \
         DELETE FROM t WHERE id = 2",
    );
    let after = e.sealed("t").await;
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();
    let mut decoded = Vec::new();
    for r in all_records(&e.pool, &e.stream).await {
        let RecordBody::Chunk(c) = &r.record.body else {
            continue;
        };
        for raw in c.raw.iter().filter(|x| x.table == "t") {
            let err = decode_raw(raw, &before).unwrap_err();
            assert!(err.contains("column count"), "{err}");
            decoded.push(decode_raw(raw, &after).unwrap());
        }
    }
    let s = |v: &str| SqlValue::Bytes(v.as_bytes().to_vec());
    let ops: Vec<Op> = decoded.iter().map(|(op, _)| *op).collect();
    assert_eq!(ops, vec![Op::Insert, Op::Update, Op::Delete]);
    let (_, ins) = &decoded[0];
    let row = ins[0].1.as_ref().unwrap();
    assert_eq!(
        (&row[0], &row[1], &row[2]),
        (&SqlValue::Int(2), &s("x,y"), &s("é"))
    );
    let (_, upd) = &decoded[1];
    let (b, a) = (upd[0].0.as_ref().unwrap(), upd[0].1.as_ref().unwrap());
    assert_eq!(
        (&b[1], &a[1], &a[3]),
        (&s("d"), &s("z"), &SqlValue::Int(9)),
        "the default of the existing row, then the update"
    );
}
