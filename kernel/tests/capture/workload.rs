//! The capture against a real MariaDB: workload exactness, regrouping, markers.
use crate::support::*;
use kernel::capture::Reader;
use kernel::change::Op;
use kernel::control::IntentKind;
use kernel::log::{self, RecordBody};
use std::collections::{BTreeMap, HashSet};

const TABLE_DDL: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64) NULL, n INT NOT NULL) ENGINE=InnoDB";

/// The acceptance workload of issue 3; returns the number of row changes it makes on `t`.
fn workload(e: &Env, big: u64) -> u64 {
    let s = e.src;
    let db = &e.db;
    let mut n = 0;
    s.sql_in(
        db,
        &format!("INSERT INTO t SELECT seq, concat('v', seq), 0 FROM seq_1_to_{big}"),
    );
    n += big;
    for i in 0..3 {
        s.sql_in(
            db,
            &format!("INSERT INTO t VALUES ({}, 'single', {i})", 500_000 + i),
        );
    }
    n += 3;
    s.sql_in(db, "UPDATE t SET n = n + 1 WHERE id BETWEEN 100 AND 131");
    n += 32;
    s.sql_in(db, "UPDATE t SET n = n + 1");
    n += big + 3;
    s.sql_in(db, "UPDATE t SET id = 150000, v = 'moved' WHERE id = 50");
    n += 1;
    s.sql_in(db, "DELETE FROM t WHERE id = 60");
    n += 1;
    s.sql_in(
        db,
        "BEGIN; INSERT INTO t VALUES (200001, 'multi', 1); UPDATE t SET n = 2 WHERE id = 200001; \
         DELETE FROM t WHERE id = 2; INSERT INTO other VALUES (1); COMMIT",
    );
    n += 3;
    s.sql_in(
        db,
        "BEGIN; INSERT INTO t VALUES (300000, 'rolled back', 1); ROLLBACK",
    );
    s.sql_in(
        db,
        "SET NAMES utf8mb4; INSERT INTO t VALUES (400001, NULL, 0), (400002, '', 0), (400003, 'trailing  ', 0), \
         (400004, 'ünï©ødé 😀', 0)",
    );
    n += 4;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_is_captured_exactly_once_in_order() {
    let e = env("cap_work").await;
    e.src.sql_in(&e.db, TABLE_DDL);
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    e.init_stream(1000).await;
    let set = e.set_for(&[(1, "t")]).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), set);
    let b = e.intent(1, IntentKind::B).await;
    e.wait_marker(&b, 30).await;
    let expected = workload(&e, 30_000);
    let f = e.intent(1, IntentKind::F).await;
    let fm = e.wait_marker(&f, 120).await;
    assert!(!fm.obsolete);
    reader.stop().await.unwrap();

    let recs = all_records(&e.pool, &e.stream).await;
    assert_eq!(
        log::verify_chain(&e.pool, &e.stream).await.unwrap(),
        recs.len() as u64
    );
    let mut changes = Vec::new();
    for r in &recs {
        if let RecordBody::Chunk(c) = &r.record.body {
            assert!(c.pauses.is_empty(), "unexpected pause: {:?}", c.pauses);
            assert!(c.changes.len() <= 1000);
            changes.extend(c.changes.iter().filter(|c| c.id.table == "t").cloned());
        }
    }
    assert_eq!(changes.len() as u64, expected);
    let ids: HashSet<_> = changes.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), changes.len(), "a change is stored twice");
    let order: Vec<_> = changes
        .iter()
        .map(|c| (c.id.file.clone(), c.id.event_pos, c.id.row))
        .collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "changes are not in binlog order");
    let moved: Vec<_> = changes
        .iter()
        .filter(|c| {
            c.after
                .as_ref()
                .is_some_and(|a| a[0].as_key() == Some(150_000))
        })
        .collect();
    assert_eq!(moved.len(), 1, "a PK change is ONE change");
    assert_eq!(moved[0].id.op, Op::Update);
    assert_eq!(moved[0].before.as_ref().unwrap()[0].as_key(), Some(50));

    let folded = fold(&recs, "t", 0, BTreeMap::new());
    let source = cli_rows(e.src, &e.db, "SELECT id, v, n FROM t");
    assert_eq!(as_text(&folded), source);

    // Independent decoding: mariadb-binlog --verbose counts the same row images.
    let mut verbose = String::new();
    for f in e.src.binlog_files() {
        verbose.push_str(&e.src.mariadb_binlog_verbose(&f));
    }
    let tq = format!("`{}`.`t`", e.db);
    let count = |p: &str| {
        verbose
            .lines()
            .filter(|l| l.starts_with(&format!("### {p} {tq}")))
            .count() as u64
    };
    let by_op = |op: Op| changes.iter().filter(|c| c.id.op == op).count() as u64;
    assert_eq!(count("INSERT INTO"), by_op(Op::Insert));
    assert_eq!(count("UPDATE"), by_op(Op::Update));
    assert_eq!(count("DELETE FROM"), by_op(Op::Delete));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_sizes_and_restarts_give_identical_l() {
    let e = env("cap_regroup").await;
    e.src.sql_in(&e.db, TABLE_DDL);
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    let streams = ["b1", "b7", "b1000", "b1_restarts", "b7_restarts"];
    for s in streams {
        e.init_stream_named(&e.pool, s, 100).await;
    }
    let set = e.set_for(&[(1, "t")]).await;
    e.intent(1, IntentKind::B).await;
    workload(&e, 3000);
    let f = e.intent(1, IntentKind::F).await;
    let mut reference: Option<Vec<String>> = None;
    for s in streams {
        let batch = s
            .trim_start_matches('b')
            .split('_')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let sessions = run_until(&e, s, &set, batch, s.ends_with("restarts"), f.nonce).await;
        let recs = all_records(&e.pool, s).await;
        log::verify_chain(&e.pool, s).await.unwrap();
        let ids = chunk_identities(&recs);
        eprintln!("{s}: {sessions} sessions, {} records", recs.len());
        assert!(ids.len() > 40, "{s}: {} chunk records", ids.len());
        match &reference {
            None => reference = Some(ids),
            Some(r) => assert_eq!(&ids, r, "stream {s} ({sessions} sessions) differs"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_runs_from_b_to_k_and_late_intents_are_obsolete() {
    let e = env("cap_bk").await;
    e.src.sql_in(&e.db, TABLE_DDL);
    e.init_stream(1000).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "t")]).await);
    e.src
        .sql_in(&e.db, "INSERT INTO t VALUES (1, 'before B', 0)");
    let b = e.intent(1, IntentKind::B).await;
    e.src
        .sql_in(&e.db, "INSERT INTO t VALUES (2, 'captured', 0)");
    let k = e.intent(1, IntentKind::K).await;
    e.src
        .sql_in(&e.db, "INSERT INTO t VALUES (3, 'after K', 0)");
    let late_b = e.intent(1, IntentKind::B).await;
    e.src
        .sql_in(&e.db, "INSERT INTO t VALUES (4, 'after late B', 0)");
    let late_high = e.intent(1, IntentKind::High).await;
    let m = e.wait_marker(&late_high, 30).await;
    assert!(m.obsolete, "an intent after K is obsolete");
    assert!(
        e.wait_marker(&late_b, 1).await.obsolete,
        "a late B revives nothing"
    );
    let (mb, mk) = (e.wait_marker(&b, 1).await, e.wait_marker(&k, 1).await);
    assert!(!mb.obsolete && !mk.obsolete);
    assert!(mb.seq < mk.seq && mk.seq < m.seq);
    // wait_for_position: D reaches the end of the late marker's group.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let d = log::wait_for_position(&e.pool, &e.stream, &m.end.pos, deadline)
        .await
        .unwrap();
    assert!(d.restart_seq >= m.seq);
    // Positions map to L seqs: the B marker's group end maps to the B record itself.
    assert_eq!(
        log::seq_at_or_before(&e.pool, &e.stream, &mb.end.pos)
            .await
            .unwrap(),
        mb.seq
    );
    let before_k = kernel::position::BinlogPos::new(mk.end.pos.file.clone(), mk.end.pos.pos - 1);
    let s = log::seq_at_or_before(&e.pool, &e.stream, &before_k)
        .await
        .unwrap();
    assert!(s >= mb.seq && s < mk.seq);
    reader.stop().await.unwrap();
    let recs = all_records(&e.pool, &e.stream).await;
    let keys: Vec<i64> = recs
        .iter()
        .flat_map(|r| match &r.record.body {
            RecordBody::Chunk(c) => c.changes.clone(),
            _ => Vec::new(),
        })
        .map(|c| c.after.unwrap()[0].as_key().unwrap())
        .collect();
    assert_eq!(keys, [2], "captured exactly from B to K");
    // An unknown marker times out with a transient error, never hangs.
    let unknown = kernel::ids::Nonce(42);
    let soon = tokio::time::Instant::now() + std::time::Duration::from_millis(100);
    assert!(log::wait_for_marker(&e.pool, &e.stream, unknown, soon)
        .await
        .unwrap_err()
        .is_transient());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn l_and_d_that_disagree_are_refused() {
    let e = env("cap_tamper").await;
    e.src.sql_in(&e.db, TABLE_DDL);
    e.init_stream(1000).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "t")]).await);
    e.intent(1, IntentKind::B).await;
    e.src
        .sql_in(&e.db, "INSERT INTO t VALUES (1, 'a', 0), (2, 'b', 0)");
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();
    sqlx::query("DELETE FROM capture_log WHERE stream = ? ORDER BY seq DESC LIMIT 1")
        .bind(&e.stream)
        .execute(&e.pool)
        .await
        .unwrap();
    let err = log::verify_chain(&e.pool, &e.stream).await.unwrap_err();
    assert_eq!(
        err.as_definite().unwrap().code,
        kernel::error::DefiniteCode::EvidenceCorrupt
    );
    let mut cfg = e.cfg();
    cfg.max_failures = 2;
    let reader = Reader::start(e.pool.clone(), cfg, e.set_for(&[(1, "t")]).await);
    let err = tokio::time::timeout(std::time::Duration::from_secs(30), reader.join())
        .await
        .unwrap()
        .unwrap_err();
    let d = err.as_definite().expect("definite").clone();
    assert_eq!(d.code, kernel::error::DefiniteCode::EvidenceCorrupt, "{d}");
}
