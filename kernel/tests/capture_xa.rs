//! XA transactions on captured tables (DESIGN §3.8), against real MariaDB 10.11, which
//! logs a prepared transaction as its own group (`XA START xid`, rows, `XA END xid`,
//! XA_PREPARE event) and its outcome later as a group holding only `XA COMMIT xid` or
//! `XA ROLLBACK xid`; `XA COMMIT xid ONE PHASE` is logged as an ordinary transaction.
//! A prepared group is held in L, takes effect at its XA COMMIT's position with the
//! changes' original identities, is dropped at its XA ROLLBACK, and survives kill -9
//! between the prepare and the commit; batch sizes and restarts do not change L.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod capture_common;
mod probe_support;

use capture_common::*;
use kernel::capture::Reader;
use kernel::change::Change;
use kernel::control::IntentKind;
use kernel::log::{self, RecordBody, StoredRecord};
use kernel::position::BinlogPos;
use probe_support::{end, Probe};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const T: &str =
    "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(32) NULL, n INT NOT NULL)";

/// The xid as the server logs it.
fn logged(xid: &str) -> String {
    let hex: String = xid.bytes().map(|b| format!("{b:02x}")).collect();
    format!("X'{hex}',X'',1")
}

/// Changes of `t` in Chunk records, with the L record holding each.
fn changes(recs: &[StoredRecord]) -> Vec<(&StoredRecord, &Change)> {
    let mut out = Vec::new();
    for r in recs {
        if let RecordBody::Chunk(c) = &r.record.body {
            out.extend(
                c.changes
                    .iter()
                    .filter(|c| c.id.table == "t")
                    .map(|c| (r, c)),
            );
        }
    }
    out
}

fn s_of(c: &Change) -> String {
    let img = c.after.as_ref().or(c.before.as_ref()).unwrap();
    text(&img[1])
}

fn pos(file: &str, p: u64) -> BinlogPos {
    BinlogPos::new(file, p)
}

/// The XA workload, part 1: a prepared group of 251 changes (3 chunks of 100).
fn prepare_big(e: &Env, p: &str) {
    e.src.sql_in(
        &e.db,
        &format!(
            "INSERT INTO t SELECT seq, 'base', 0 FROM seq_1_to_10;
             XA START '{p}big'; INSERT INTO t SELECT seq, 'xa', 1 FROM seq_1001_to_1250;
             UPDATE t SET n = n + 5, s = 'xa' WHERE id = 3; XA END '{p}big';
             XA PREPARE '{p}big';"
        ),
    );
}

/// Part 2: other groups, a prepared group rolled back, a prepared group of another
/// table, the commit of the big group, a one-phase XA.
fn finish_workload(e: &Env, p: &str) {
    // One prepared XA per session: each statement list runs on its own connection.
    for sql in [
        "INSERT INTO t VALUES (20, 'mid', 0); INSERT INTO other VALUES (1)".to_string(),
        format!(
            "XA START '{p}rb'; INSERT INTO t VALUES (2000, 'rb', 0); DELETE FROM t WHERE id = 4;
             XA END '{p}rb'; XA PREPARE '{p}rb'"
        ),
        format!(
            "XA START '{p}oth'; INSERT INTO other VALUES (2); XA END '{p}oth'; XA PREPARE '{p}oth'"
        ),
        "UPDATE t SET s = 'after' WHERE id = 5".to_string(),
        format!("XA COMMIT '{p}big'"),
        format!("XA ROLLBACK '{p}rb'"),
        format!("XA COMMIT '{p}oth'"),
        format!(
            "XA START '{p}one'; INSERT INTO t VALUES (3000, 'one', 0); XA END '{p}one';
             XA COMMIT '{p}one' ONE PHASE"
        ),
    ] {
        e.src.sql_in(&e.db, &sql);
    }
}

fn assert_xa_semantics(e: &Env, recs: &[StoredRecord], p: &str) {
    let (big_xid, rb_xid) = (logged(&format!("{p}big")), logged(&format!("{p}rb")));
    let ch = changes(recs);
    // The rolled-back group never takes effect.
    assert!(
        ch.iter().all(|(_, c)| s_of(c) != "rb"),
        "rolled back rows in L"
    );
    let dropped: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.record.body, RecordBody::Dropped { xid } if *xid == rb_xid))
        .collect();
    assert_eq!(dropped.len(), 1, "one Dropped record for XA 'rb'");
    // The held group: 251 changes in 3 held chunks, then the same 3 chunks again at the
    // XA COMMIT's position.
    let held: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.record.body, RecordBody::Held(h) if h.xid == big_xid))
        .collect();
    assert_eq!(held.len(), 3, "251 changes held in chunks of 100");
    let big: Vec<_> = ch.iter().filter(|(_, c)| s_of(c) == "xa").collect();
    assert_eq!(big.len(), 251);
    let group: Vec<u64> = {
        let mut v: Vec<u64> = big.iter().map(|(r, _)| r.seq).collect();
        v.dedup();
        v
    };
    assert_eq!(group.len(), 3, "released as 3 chunks");
    let last = recs.iter().find(|r| r.seq == group[2]).unwrap();
    let end = last
        .record
        .end
        .clone()
        .expect("the last chunk ends the group");
    // Identities keep the prepared group's event positions; the group ends at the commit,
    // after the groups logged between the prepare and the commit.
    let mid = ch.iter().find(|(_, c)| s_of(c) == "mid").unwrap();
    let after = ch.iter().find(|(_, c)| s_of(c) == "after").unwrap();
    let first_big = big[0].1;
    let at = |c: &Change| pos(&c.id.file, c.id.event_pos);
    assert!(at(first_big).try_cmp(&at(mid.1)).unwrap().is_lt());
    assert!(
        mid.0.seq < group[0] && after.0.seq < group[0],
        "released after them"
    );
    let after_end = after.0.record.end.clone().unwrap();
    assert!(after_end.pos.try_cmp(&end.pos).unwrap().is_lt());
    for (i, seq) in group.iter().enumerate() {
        let r = recs.iter().find(|r| r.seq == *seq).unwrap();
        assert_eq!(r.record.chunk, i as u32);
        assert_eq!(r.record.start, last.record.start);
        assert_eq!(r.record.gtid, end.gtid);
    }
    // The one-phase XA is an ordinary transaction.
    assert_eq!(ch.iter().filter(|(_, c)| s_of(c) == "one").count(), 1);
    let folded = fold(recs, "t", 0, BTreeMap::new());
    assert_eq!(
        as_text(&folded),
        cli_rows(e.src, &e.db, "SELECT id, s, n FROM t")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_groups_take_effect_at_commit_and_are_dropped_at_rollback() {
    let e = env("cap_xa").await;
    e.src.sql_in(&e.db, T);
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    let streams = ["b1", "b7", "b1000", "b1_restarts", "b7_restarts"];
    for s in streams {
        e.init_stream_named(&e.pool, s, 100).await;
    }
    let set = e.set_for(&[(1, "t")]).await;
    e.intent(1, IntentKind::B).await;
    prepare_big(&e, "w_");
    finish_workload(&e, "w_");
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
        eprintln!("{s}: {sessions} sessions, {} records", recs.len());
        assert_xa_semantics(&e, &recs, "w_");
        assert!(log::holds(&e.pool, s).await.unwrap().is_empty());
        assert!(log::pauses(&e.pool, s).await.unwrap().is_empty());
        let ids = chunk_identities(&recs);
        match &reference {
            None => reference = Some(ids),
            Some(r) => assert_eq!(&ids, r, "stream {s} ({sessions} sessions) differs"),
        }
    }
}

const PROBE: Probe = Probe {
    max_batch: 5,
    tables: &[("t", 1)],
    pipe_stderr: false,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_prepare_and_commit_resumes_with_the_hold() {
    let e = env("cap_xa_kill").await;
    e.src.sql_in(&e.db, T);
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    e.init_stream_named(&e.pool, "crash", 100).await;
    e.init_stream_named(&e.pool, "clean", 100).await;
    e.intent(1, IntentKind::B).await;
    prepare_big(&e, "k_");
    // The hold becomes durable with D past the XA PREPARE; then the process is killed.
    let child = PROBE.spawn(&e, "crash", None);
    let t = Instant::now();
    while log::holds(&e.pool, "crash").await.unwrap().is_empty() {
        assert!(t.elapsed() < Duration::from_secs(60), "no hold registered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(end(child, Duration::ZERO), None, "SIGKILLed");
    let hold = log::holds(&e.pool, "crash").await.unwrap();
    assert_eq!(hold.len(), 1);
    assert_eq!(hold[0].xid, logged("k_big"));
    assert_eq!(hold[0].last_seq - hold[0].first_seq, 2, "3 held chunks");
    let d = log::load_position(&e.pool, "crash").await.unwrap().unwrap();
    assert!(
        d.restart_seq >= hold[0].last_seq,
        "D is past the XA PREPARE"
    );
    finish_workload(&e, "k_");
    let f = e.intent(1, IntentKind::F).await;
    // Restarts that die at the fault points on the way through the release, until the
    // release is stored: the first dies before the release reads the hold, the next ones
    // while its chunks are stored.
    let points = [
        "capture.before_release@1",
        "capture.before_commit@1",
        "capture.after_read_before_store@2",
        "capture.after_store@1",
        "capture.before_commit@2",
    ];
    let mut exits = 0;
    for fp in points {
        if log::holds(&e.pool, "crash").await.unwrap().is_empty() {
            break;
        }
        if let Some(code) = end(
            PROBE.spawn(&e, "crash", Some(fp.into())),
            Duration::from_secs(30),
        ) {
            assert_eq!(code, kernel::failpoint::EXIT_CODE, "probe failed");
            exits += 1;
        }
        log::verify_chain(&e.pool, "crash").await.unwrap();
    }
    PROBE.catch_up(&e, "crash", f.nonce).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    if cfg!(feature = "failpoints") {
        assert!(exits > 0, "no fault point fired");
    }
    let mut cfg = e.cfg();
    cfg.stream = "clean".into();
    let reader = Reader::start(e.pool.clone(), cfg, e.set_for(&[(1, "t")]).await);
    log::wait_for_marker(&e.pool, "clean", f.nonce, deadline)
        .await
        .unwrap();
    reader.stop().await.unwrap();
    let crash = all_records(&e.pool, "crash").await;
    let clean = all_records(&e.pool, "clean").await;
    log::verify_chain(&e.pool, "crash").await.unwrap();
    assert_eq!(chunk_identities(&crash), chunk_identities(&clean));
    assert_xa_semantics(&e, &crash, "k_");
    assert!(log::holds(&e.pool, "crash").await.unwrap().is_empty());
}
