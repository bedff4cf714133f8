//! What the reader cannot capture exactly pauses THAT table with a definite error naming
//! the position and the difference; other tables keep going; the paused table's rows are
//! kept raw (DESIGN §3.7).
use crate::support::*;
use kernel::capture::{CaptureSet, CaptureTable, Reader};
use kernel::control::IntentKind;
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::log::{self, RecordBody};
use std::time::Duration;

const DDL: &str =
    "(id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL, s VARCHAR(10) NULL) ENGINE=InnoDB";

fn changes_of(recs: &[log::StoredRecord], table: &str) -> usize {
    recs.iter()
        .map(|r| match &r.record.body {
            RecordBody::Chunk(c) => c.changes.iter().filter(|c| c.id.table == table).count(),
            _ => 0,
        })
        .sum()
}

fn raw_of(recs: &[log::StoredRecord], table: &str) -> usize {
    recs.iter()
        .map(|r| match &r.record.body {
            RecordBody::Chunk(c) => c.raw.iter().filter(|c| c.table == table).count(),
            _ => 0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_pauses_only_its_table_and_keeps_rows_raw() {
    let e = env("cap_ddl").await;
    for t in ["t", "u"] {
        e.src.sql_in(&e.db, &format!("CREATE TABLE {t} {DDL}"));
    }
    e.init_stream(1000).await;
    let set = e.set_for(&[(1, "t"), (2, "u")]).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), set);
    e.intent(1, IntentKind::B).await;
    e.intent(2, IntentKind::B).await;
    e.src.sql_in(
        &e.db,
        "INSERT INTO t VALUES (1, 1, 'a'); INSERT INTO u VALUES (1, 1, 'a')",
    );
    // DDL that mentions t and u without changing them pauses neither (DESIGN §3.7: the
    // statement's target object counts, not any mention).
    e.src.sql_in(
        &e.db,
        "CREATE TABLE x LIKE t; CREATE TABLE y AS SELECT * FROM u;
         CREATE VIEW v AS SELECT t.id, u.n FROM t JOIN u USING (id);
         CREATE INDEX t ON x (n); ALTER TABLE x ADD COLUMN u INT NULL;
         CREATE TRIGGER trg BEFORE INSERT ON x FOR EACH ROW SET NEW.u = 1;
         ANALYZE TABLE t; DROP VIEW v; DROP TABLE x, y",
    );
    e.src
        .sql_in(&e.db, "ALTER TABLE t ADD COLUMN extra INT NULL");
    e.src.sql_in(
        &e.db,
        "INSERT INTO t VALUES (2, 2, 'b', 7); INSERT INTO u VALUES (2, 2, 'b')",
    );
    let f = e.intent(2, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();

    let pauses = log::pauses(&e.pool, &e.stream).await.unwrap();
    assert_eq!(pauses.len(), 1, "{pauses:?}");
    let p = &pauses[0];
    assert_eq!((p.job, p.table.as_str()), (JobId(1), "t"));
    assert_eq!(p.error.code, DefiniteCode::SchemaChanged);
    assert!(
        p.error.message.contains("ALTER TABLE t ADD COLUMN extra"),
        "{}",
        p.error.message
    );
    assert!(
        p.error.message.contains(&p.at.to_string()),
        "names the position: {}",
        p.error.message
    );
    let recs = all_records(&e.pool, &e.stream).await;
    assert_eq!(changes_of(&recs, "t"), 1, "t decoded only before its DDL");
    assert_eq!(raw_of(&recs, "t"), 1, "t's later row kept raw");
    assert_eq!(changes_of(&recs, "u"), 2, "u keeps going");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statement_dml_minimal_image_and_table_map_mismatch_pause() {
    let e = env("cap_uncap").await;
    for t in ["v", "w", "x", "y"] {
        e.src.sql_in(&e.db, &format!("CREATE TABLE {t} {DDL}"));
        e.src
            .sql_in(&e.db, &format!("INSERT INTO {t} VALUES (1, 0, 'a')"));
    }
    e.init_stream(1000).await;
    let mut set = CaptureSet::default();
    for (job, t) in [(1, "v"), (2, "w"), (3, "x"), (4, "y")] {
        let mut sealed = e.sealed(t).await;
        if t == "x" {
            sealed.columns[2].name = "renamed".into(); // the sealed schema disagrees
        }
        set.add(CaptureTable {
            job: JobId(job),
            generation: Generation(1),
            sealed,
        });
    }
    let reader = Reader::start(e.pool.clone(), e.cfg(), set.shared());
    for job in 1..=4 {
        e.intent(job, IntentKind::B).await;
    }
    e.src.sql_in(
        &e.db,
        "SET SESSION binlog_format=STATEMENT; UPDATE v SET n = n + 1",
    );
    e.src.sql_in(
        &e.db,
        "SET SESSION binlog_row_image=MINIMAL; UPDATE w SET n = 5 WHERE id = 1",
    );
    e.src.sql_in(&e.db, "UPDATE x SET n = 6 WHERE id = 1");
    e.src.sql_in(&e.db, "UPDATE y SET n = 7 WHERE id = 1");
    let f = e.intent(4, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();

    let pauses = log::pauses(&e.pool, &e.stream).await.unwrap();
    let by = |t: &str| pauses.iter().find(|p| p.table == t).cloned();
    let v = by("v").expect("v paused");
    assert_eq!(v.error.code, DefiniteCode::Uncapturable);
    assert!(
        v.error.message.contains("statement-format"),
        "{}",
        v.error.message
    );
    let w = by("w").expect("w paused");
    assert_eq!(w.error.code, DefiniteCode::Uncapturable);
    assert!(
        w.error.message.contains("binlog_row_image"),
        "{}",
        w.error.message
    );
    let x = by("x").expect("x paused");
    assert_eq!(x.error.code, DefiniteCode::SchemaChanged);
    assert!(x.error.message.contains("renamed"), "{}", x.error.message);
    assert!(by("y").is_none(), "y is fine: {pauses:?}");
    let recs = all_records(&e.pool, &e.stream).await;
    assert_eq!(changes_of(&recs, "y"), 1);
    assert_eq!(changes_of(&recs, "x") + changes_of(&recs, "w"), 0);
    assert_eq!(raw_of(&recs, "x") + raw_of(&recs, "w"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_on_the_control_table_pauses_every_captured_table() {
    let e = env("cap_ctlddl").await;
    e.src.sql_in(&e.db, &format!("CREATE TABLE t {DDL}"));
    e.init_stream(1000).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "t")]).await);
    let b = e.intent(1, IntentKind::B).await;
    e.wait_marker(&b, 30).await;
    // install re-creates the control table IF NOT EXISTS: harmless, no pause.
    for sql in kernel::control::create_statements(&e.ctl) {
        e.src.sql(&sql);
    }
    e.src.sql(&format!(
        "ALTER TABLE `{}`.intents ADD COLUMN note INT NULL",
        e.ctl
    ));
    let (secs, every) = (Duration::from_secs(30), Duration::from_millis(50));
    let pauses = wait_for("no pause", secs, every, || async {
        let p = log::pauses(&e.pool, &e.stream).await.unwrap();
        (!p.is_empty()).then_some(p)
    })
    .await;
    reader.stop().await.unwrap();
    assert_eq!(pauses.len(), 1, "{pauses:?}");
    assert_eq!(pauses[0].error.code, DefiniteCode::SchemaChanged);
    let m = &pauses[0].error.message;
    assert!(m.contains("control table") && m.contains("ALTER"), "{m}");
}
