//! Fence, replay of (B, F], activation audit, STREAMING and continuous replay against real
//! MariaDB servers (issue 6). The precondition state (B, every window applied through T and
//! recorded in J) is built through the ledger directly (`backfill_tests::world`), so these tests
//! do not depend on the window runner.
//!
//! Crash tests run a child copy of this binary with `BACKFILL_FAILPOINTS` set: it exits
//! with status 86 at the named step, like a kill -9 between two statements; the parent
//! then runs the same steps again (a new process: new lease token) and checks convergence
//! and the audit-trigger count against an uninterrupted reference run.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::activation::Finish;
use backfill_tests::bf::table::audit::{self, Require, Sources};
use backfill_tests::bf::table::replay;
use backfill_tests::bf::verify::{self, Endpoint, VerifyCursor, VerifyOptions};
use backfill_tests::world::*;
use backfill_tests::*;
use harness::{shared_source, shared_target, Server};
use kernel::range::KeyRange;
use ledger::journal::Journal;
use ledger::record::Phase;
use std::process::Command;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn rows() -> u64 {
    std::env::var("FINISH_ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5_000)
}

/// Changes before the windows (between B and the first LOW): replayed over a baseline that
/// already holds them (rows regress, then converge).
fn churn_before(src: &Server, db: &str, n: u64) {
    src.sql_in(db, "UPDATE t SET n = n + 1, v = 'pre' WHERE id % 97 = 0");
    // A key change whose new key the window will hold and whose old key it will not.
    src.sql_in(
        db,
        &format!("UPDATE t SET id = {} WHERE id = 50", n + 1_000_050),
    );
    src.sql_in(db, "DELETE FROM t WHERE id IN (60, 61)");
    src.sql_in(
        db,
        &format!(
            "INSERT INTO t VALUES ({}, 'pre-insert', 7, 1.5, NULL)",
            n + 10
        ),
    );
}

/// Changes after the windows, before F: a multi-chunk group (one UPDATE of more rows than
/// L's chunk bound), key changes in both directions, deletes, inserts, a multi-statement
/// transaction.
fn churn_after(src: &Server, db: &str, n: u64) {
    let big = n.min(3_000);
    src.sql_in(
        db,
        &format!("UPDATE t SET n = n + 10, at = '2030-01-01 00:00:00.000001' WHERE id <= {big}"),
    );
    src.sql_in(
        db,
        &format!("UPDATE t SET id = 50 WHERE id = {}", n + 1_000_050),
    );
    src.sql_in(db, "UPDATE t SET id = -5 WHERE id = 70");
    src.sql_in(db, "DELETE FROM t WHERE id BETWEEN 80 AND 89");
    src.sql_in(
        db,
        &format!(
            "BEGIN; INSERT INTO t VALUES ({0}, 'txn', 1, 2.25, NULL); UPDATE t SET v = 'txn2' WHERE id = {0}; \
             DELETE FROM t WHERE id = 2; COMMIT",
            n + 20
        ),
    );
    src.sql_in(db, "UPDATE t SET v = NULL, amount = -0.125 WHERE id = 3");
}

/// Changes while streaming.
fn churn_stream(src: &Server, db: &str, n: u64, round: u64) {
    for i in 0..20 {
        src.sql_in(
            db,
            &format!(
                "INSERT INTO t VALUES ({}, 'stream', {round}, 0.5, NOW(6))",
                n + 100_000 + round * 100 + i
            ),
        );
    }
    src.sql_in(
        db,
        &format!("UPDATE t SET n = n + {round} WHERE id BETWEEN 100 AND 400"),
    );
    src.sql_in(db, &format!("DELETE FROM t WHERE id = {}", 500 + round));
    src.sql_in(
        db,
        &format!(
            "UPDATE t SET id = {} WHERE id = {}",
            n + 200_000 + round,
            600 + round
        ),
    );
}

/// B, changes, every window applied, more changes: the state F starts from.
async fn prepared(prefix: &str, job: u64, n: u64, windows: u32, changes: bool) -> World {
    prepared_marked(prefix, job, n, windows, changes).await.0
}

/// Both binlogs' ends before a world's databases exist (for the oracle).
type Marks = (backfill_tests::oracle::Mark, backfill_tests::oracle::Mark);

/// [`prepared`], with the binlog marks taken before it.
async fn prepared_marked(
    prefix: &str,
    job: u64,
    n: u64,
    windows: u32,
    changes: bool,
) -> (World, Marks) {
    use backfill_tests::oracle::Mark;
    let (src, tgt) = (shared_source(), shared_target());
    let marks = (Mark::now(src), Mark::now(tgt));
    let w = world(src, tgt, prefix, job, n).await;
    let pool = w.pool().await;
    let reader = w.start_reader(&pool).await;
    let lease = w.lease(&pool).await;
    let ctx = w.ctx(lease.token).await;
    w.claim(&ctx).await;
    start(&w, &pool, &lease).await;
    if changes {
        churn_before(src, &w.db, n);
    }
    let plan = backfill_tests::world::plan_of(&w, n, windows);
    for (i, r) in plan.iter().enumerate() {
        window(&w, &pool, &lease, &ctx, i as u32, r.clone(), 1000).await;
    }
    if changes {
        churn_after(src, &w.db, n);
    }
    catch_up(&w, &pool).await;
    reader.stop().await.unwrap();
    pool.close().await;
    (w, marks)
}

fn run_child(
    w: &World,
    failpoint: &str,
    n: u64,
    windows: u32,
    batch: usize,
    stream_secs: u64,
) -> i32 {
    // The child is a binary of this package (tests/src/bin/finish_child.rs), not a test.
    let out = Command::new(backfill_tests::bin::sibling("finish-child"))
        .arg(w.encode())
        .args([n.to_string(), windows.to_string(), batch.to_string()])
        .arg(stream_secs.to_string())
        .env(kernel::failpoint::ENV, failpoint)
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    if code != kernel::failpoint::EXIT_CODE {
        eprintln!("child stdout:\n{}", String::from_utf8_lossy(&out.stdout));
        eprintln!("child stderr:\n{}", String::from_utf8_lossy(&out.stderr));
    }
    code
}

async fn verify_clean(w: &World) -> verify::Report {
    let src = Endpoint::from_url(&w.src_url(), &w.db, "t").unwrap();
    let tgt = Endpoint::from_url(&w.tgt_url_db(&w.tdb), &w.tdb, "t").unwrap();
    let mut cur = VerifyCursor::start();
    verify::verify(&src, &tgt, &["id"], &VerifyOptions::default(), &mut cur)
        .await
        .unwrap()
}

async fn phase(w: &World) -> Phase {
    let pool = w.pool().await;
    let h = Journal::new(pool.clone())
        .head(w.scope().job, w.scope().generation)
        .await
        .unwrap()
        .unwrap();
    pool.close().await;
    h.record.phase
}

/// Waits until the target's checksum equals the source's (bounded).
async fn converged(w: &World) -> bool {
    let (src, tgt) = (shared_source(), shared_target());
    for _ in 0..300 {
        if checksum(src, &w.db, "t") == checksum(tgt, &w.tdb, "t") {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A writer on the source in a blocking task until `stop`: `sql(i)` for i = 0, 1, ...;
/// returns how many it ran.
fn spawn_writer(
    db: &str,
    stop: &CancellationToken,
    sql: impl Fn(u64) -> String + Send + 'static,
) -> tokio::task::JoinHandle<u64> {
    let (stop, db, src) = (stop.clone(), db.to_string(), shared_source());
    tokio::task::spawn_blocking(move || {
        let mut i = 0u64;
        while !stop.is_cancelled() {
            src.sql_in(&db, &sql(i));
            i += 1;
        }
        i
    })
}

/// Pinned verify while a writer runs again: the replay is paused (no follow), the source
/// is read at its snapshot position P and the target is driven to exactly P.
async fn pinned_verify_under_a_writer(w: &World, f: &Finish<'_>, b: kernel::log::LSeq, n: u64) {
    let stop = CancellationToken::new();
    let writer = spawn_writer(&w.db, &stop, move |i| {
        format!(
            "INSERT INTO t VALUES ({}, 'p', 1, 1.0, NULL); UPDATE t SET n = n + 1 WHERE id = {}",
            n + 700_000 + i,
            2000 + i % 300
        )
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sep = Endpoint::from_url(&w.src_url(), &w.db, "t").unwrap();
    let tep = Endpoint::from_url(&w.tgt_url_db(&w.tdb), &w.tdb, "t").unwrap();
    let opts = VerifyOptions::default();
    let pinned =
        backfill_tests::bf::verify::pinned::verify_finish(f, b, &sep, &tep, &["id"], &opts)
            .await
            .unwrap();
    stop.cancel();
    writer.await.unwrap();
    let t = &pinned.cursor.tally;
    assert!(pinned.source_snapshot.is_some());
    assert_eq!(
        (t.missing.count, t.extra.count, t.differing_fields.count),
        (0, 0, 0),
        "pinned: {pinned:?}"
    );
}

/// Re-running every step after activation runs no business DML (I2) and re-audits.
async fn a_rerun_after_activation_writes_nothing(w: &World, fin: &Finishing, f: &Finish<'_>) {
    let tgt = shared_target();
    let before = dml_count(tgt, w);
    let again = f.activate().await.unwrap();
    assert!(!again.activated.written);
    assert_eq!(again.replayed.groups_applied, 0);
    let mut tc = ledger::apply::connect(fin.target.opts()).await.unwrap();
    let ev = audit::gather(&mut Sources {
        pool: &fin.pool,
        scope: &w.scope(),
        store: &fin.store,
        target: &mut tc,
        ctx: &fin.ctx,
        plan: &fin.plan,
        schema_fingerprint: w.sealed().await.fingerprint(),
        chain: None,
    })
    .await
    .unwrap();
    let rep = audit::audit(&ev, Require::Activated);
    assert!(rep.passed(), "{}", rep.text());
    assert_eq!(dml_count(tgt, w), before);
    let progress = replay::replay_progress(&fin.pool, w.scope().job, w.scope().generation)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(progress.phase, "STREAMING");
    tc.disconnect().await.unwrap();
}

/// verify finds edits made directly in the target: a delete, an extra row, a changed field.
async fn verify_finds_edits_in_the_target(w: &World) {
    let tgt = shared_target();
    let some: Vec<String> = tgt
        .sql_in(&w.tdb, "SELECT id FROM t ORDER BY id LIMIT 3 OFFSET 10")
        .lines()
        .map(str::to_string)
        .collect();
    tgt.sql_in(&w.tdb, &format!("DELETE FROM t WHERE id = {}", some[0]));
    tgt.sql_in(
        &w.tdb,
        "INSERT INTO t VALUES (-999999, 'extra', 0, 0, NULL)",
    );
    tgt.sql_in(
        &w.tdb,
        &format!("UPDATE t SET v = 'changed' WHERE id = {}", some[1]),
    );
    let report = verify_clean(w).await;
    let t = &report.cursor.tally;
    assert_eq!(
        (t.missing.count, t.extra.count, t.differing_fields.count),
        (1, 1, 1),
        "{report:?}"
    );
    let key = backfill_tests::bf::verify::Key::of_i64;
    assert_eq!(
        t.missing.examples,
        vec![key(some[0].parse::<i64>().unwrap())]
    );
    assert_eq!(t.extra.examples, vec![key(-999_999)]);
    assert_eq!(t.differing_fields.examples[0].column, "v");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn end_to_end_fence_replay_audit_streaming_with_a_concurrent_writer() {
    let started = std::time::Instant::now();
    let n = rows();
    let (src, tgt) = (shared_source(), shared_target());
    let w = prepared("fin_e2e", 9101, n, 4, true).await;
    let fin = Finishing::open(&w, plan_of(&w, n, 4)).await;
    let f = fin.finish(&w, cfg(700, 50));
    // A writer keeps going through F, replay and activation.
    let stop = CancellationToken::new();
    let writer = spawn_writer(&w.db, &stop, move |i| {
        let id = n + 500_000 + i;
        format!(
            "INSERT INTO t VALUES ({id}, 'w', 1, 1.0, NULL); UPDATE t SET n = n + 1 WHERE id = {}",
            1000 + i % 500
        )
    });
    let a = f.activate().await.unwrap();
    assert!(a.activated.written);
    assert!(a.replayed.groups_applied > 0, "{:?}", a.replayed);
    assert_eq!(phase(&w).await, Phase::Streaming);
    // Continuous replay while the writer and more churn go on.
    let cancel = CancellationToken::new();
    let follow = f.stream(a.b.seq, cancel.clone());
    let work = async {
        for round in 1..=3 {
            churn_stream(src, &w.db, n, round);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        stop.cancel();
        let written = writer.await.unwrap();
        catch_up(&w, &fin.pool).await;
        let ok = converged(&w).await;
        cancel.cancel();
        (written, ok)
    };
    let (streamed, (written, ok)) = tokio::join!(follow, work);
    pinned_verify_under_a_writer(&w, &f, a.b.seq, n).await;
    // The writer's last changes after P: caught up by a later replay.
    catch_up(&w, &fin.pool).await;
    f.catch_up(a.b.seq).await.unwrap();
    let streamed = streamed.unwrap();
    assert!(ok, "the stream did not catch up");
    assert!(
        written > 0 && streamed.groups_applied > 0,
        "{written} {streamed:?}"
    );
    let report = verify_clean(&w).await;
    let t = &report.cursor.tally;
    assert_eq!(
        (t.missing.count, t.extra.count, t.differing_fields.count),
        (0, 0, 0),
        "{report:?}"
    );
    assert!(report.is_clean());
    assert_eq!(checksum(src, &w.db, "t"), checksum(tgt, &w.tdb, "t"));
    a_rerun_after_activation_writes_nothing(&w, &fin, &f).await;
    verify_finds_edits_in_the_target(&w).await;
    fin.reader.stop().await.unwrap();
    eprintln!(
        "end to end: {n} rows, {} groups replayed to F, {} streamed, writer {written} txns, {:?}",
        a.replayed.groups_applied,
        streamed.groups_applied,
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_with_no_change_in_b_f_needs_no_cursor() {
    let w = prepared("fin_quiet", 9102, 300, 1, false).await;
    finish_steps(&w, 300, 1, cfg(100, 10), Duration::from_millis(300)).await;
    assert_eq!(phase(&w).await, Phase::Streaming);
    let tgt = shared_target();
    assert_eq!(
        tgt.sql_in(&w.tdb, "SELECT COUNT(*) FROM _backfill_ledger_cursor"),
        "0",
        "no cursor may be invented"
    );
    assert!(verify_clean(&w).await.is_clean());
}

/// Seed 002: a 64-row UPDATE is one source transaction; replay with 16 changes per target
/// transaction dies right after the first 16 are committed; the restart replays with ONE
/// change per transaction and one group per batch: no conflict, no stall, each change
/// applied once (trigger count equal to an uninterrupted run), and the tail changes made
/// meanwhile converge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_002_split_replay_restart_with_another_batch_size() {
    let (src, tgt) = (shared_source(), shared_target());
    let mut counts = Vec::new();
    for (k, crash) in [false, true].into_iter().enumerate() {
        let w = world(src, tgt, "fin_s002", 9110 + k as u64, 64).await;
        let pool = w.pool().await;
        let reader = w.start_reader(&pool).await;
        let lease = w.lease(&pool).await;
        let ctx = w.ctx(lease.token).await;
        w.claim(&ctx).await;
        start(&w, &pool, &lease).await;
        window(&w, &pool, &lease, &ctx, 0, KeyRange::ALL, 1000).await;
        src.sql_in(&w.db, "UPDATE t SET n = n + 1, v = concat(v, '-u')");
        src.sql_in(&w.db, "UPDATE t SET v = 'tail' WHERE id = 1; DELETE FROM t WHERE id = 64; INSERT INTO t VALUES (65, 'new', 0, 0, NULL)");
        catch_up(&w, &pool).await;
        reader.stop().await.unwrap();
        pool.close().await;
        if crash {
            let code = run_child(&w, "ledger.groups.after_commit@1", 64, 1, 16, 0);
            assert_eq!(code, kernel::failpoint::EXIT_CODE);
            assert_eq!(
                tgt.sql_in(&w.tdb, "SELECT rows_done FROM _backfill_ledger_cursor"),
                "16",
                "the crash left T inside the 64-row group"
            );
            finish_steps(&w, 64, 1, cfg(1, 1), Duration::from_millis(300)).await;
        } else {
            finish_steps(&w, 64, 1, cfg(16, 4), Duration::from_millis(300)).await;
        }
        assert_eq!(phase(&w).await, Phase::Streaming);
        let r = verify_clean(&w).await;
        assert!(r.is_clean(), "{r:?}");
        assert_eq!(checksum(src, &w.db, "t"), checksum(tgt, &w.tdb, "t"));
        counts.push(dml_count(tgt, &w));
    }
    assert_eq!(
        counts[0], counts[1],
        "the crashed run applied a change twice"
    );
}

/// Kill -9 (fault-point exit) at each step of F, replay, activation and streaming; the
/// restart converges and runs exactly the business DML of an uninterrupted run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_every_fault_point_converges_without_duplicate_dml() {
    let (src, tgt) = (shared_source(), shared_target());
    let n = 2_000;
    let reference = prepared("fin_ref", 9120, n, 2, true).await;
    finish_steps(&reference, n, 2, cfg(300, 3), Duration::from_millis(300)).await;
    assert!(verify_clean(&reference).await.is_clean());
    let want = dml_count(tgt, &reference);
    let points = [
        "fence.after_f_written",
        "replay.after_batch_t@2",
        "replay.mid@3",
        "ledger.groups.before_commit@2",
        "activate.after_credential_before_j",
        "stream.after_batch",
    ];
    for (i, fp) in points.iter().enumerate() {
        let (w, marks) = prepared_marked("fin_kill", 9130 + i as u64, n, 2, true).await;
        if fp.starts_with("stream") {
            // Streaming needs something to stream: changes after F land while the child
            // follows; the reference then differs, so compare with the source only.
            let db = w.db.clone();
            let feeder = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(3));
                churn_stream(src, &db, n, 1);
            });
            let code = run_child(&w, fp, n, 2, 300, 20);
            feeder.join().unwrap();
            assert_eq!(code, kernel::failpoint::EXIT_CODE, "{fp}");
            finish_steps(&w, n, 2, cfg(7, 2), Duration::from_secs(3)).await;
        } else {
            let code = run_child(&w, fp, n, 2, 300, 0);
            assert_eq!(code, kernel::failpoint::EXIT_CODE, "{fp} did not fire");
            finish_steps(&w, n, 2, cfg(7, 2), Duration::from_millis(300)).await;
            assert_eq!(dml_count(tgt, &w), want, "{fp}: business DML ran twice");
        }
        assert_eq!(phase(&w).await, Phase::Streaming, "{fp}");
        assert!(converged(&w).await, "{fp}");
        let r = verify_clean(&w).await;
        assert!(r.is_clean(), "{fp}: {r:?}");
        // Per change, not one counter: also for the STREAMING point, whose reference
        // differs (changes after F).
        backfill_tests::world::oracle(&w, &marks).assert_exactly_once();
    }
}

type Case<'a> = (&'static str, String, Box<dyn Fn() + 'a>, Box<dyn Fn() + 'a>);

/// Tampering with a material, a manifest, a T credential or a J record makes the audit
/// fail naming it, and the table does not enter STREAMING; once restored it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampering_is_named_by_the_audit_and_blocks_streaming() {
    let (_src, tgt) = (shared_source(), shared_target());
    let n = 1_500;
    let w = prepared("fin_tamper", 9140, n, 2, true).await;
    let fin = Finishing::open(&w, plan_of(&w, n, 2)).await;
    let (journal, store) = (&fin.journal, &fin.store);
    let f = fin.finish(&w, cfg(500, 10));
    let chain = journal
        .chain(w.scope().job, w.scope().generation)
        .await
        .unwrap();
    let (m1, _) = ledger::seal::load_final_pages(store, &chain[1].0.manifest_hash)
        .await
        .unwrap();
    let page = m1.final_pages[0].digest;
    let manifest = chain[0].0.manifest_hash;
    let flip = |d: &kernel::ids::Digest| {
        let p = store.path_of(d);
        let mut b = std::fs::read(&p).unwrap();
        let i = b.len() / 2;
        b[i] ^= 0x20;
        std::fs::write(&p, &b).unwrap();
    };
    let tdb = w.tdb.clone();
    let sdb = w.state_db.clone();
    let cases: Vec<Case> = vec![
        (
            "material",
            page.to_hex(),
            Box::new(move || flip(&page)),
            Box::new(move || flip(&page)),
        ),
        (
            "manifest",
            "w0".into(),
            Box::new(move || flip(&manifest)),
            Box::new(move || flip(&manifest)),
        ),
        (
            "credential",
            "w1p0".into(),
            {
                let tdb = tdb.clone();
                Box::new(move || {
                    tgt.sql_in(&tdb, "UPDATE _backfill_ledger_pages SET digest = UNHEX(SHA2('x', 256)) WHERE window_id = 1 AND page_no = 0");
                })
            },
            Box::new(|| {}),
        ),
        (
            "journal",
            "journal record 2".into(),
            {
                let sdb = sdb.clone();
                Box::new(move || {
                    tgt.sql_in(&sdb, "CREATE TABLE j_saved AS SELECT * FROM ledger_journal WHERE seq = 2; UPDATE ledger_journal SET record = CONCAT(record, 'x') WHERE seq = 2");
                })
            },
            Box::new(move || {
                tgt.sql_in(&sdb, "UPDATE ledger_journal j JOIN j_saved s ON s.job_id = j.job_id AND s.seq = j.seq SET j.record = s.record");
            }),
        ),
        (
            // A record of L between B and F that no replay reads again (the cursor is at
            // F after the first case): its chain digest no longer follows from its fields.
            "L",
            "chain digest does not verify".into(),
            {
                let (sdb, stream) = (w.state_db.clone(), w.scope().stream.clone());
                Box::new(move || {
                    tgt.sql_in(&sdb, &format!("CREATE TABLE l_saved AS SELECT l.stream, l.seq, l.chain FROM capture_log l \
                        WHERE l.stream = '{stream}' AND l.seq = 1 + (SELECT MIN(seq) FROM capture_marker WHERE stream = '{stream}' AND kind = 'B'); \
                        UPDATE capture_log l JOIN l_saved s ON s.stream = l.stream AND s.seq = l.seq SET l.chain = UNHEX(SHA2('x', 256))"));
                })
            },
            Box::new({
                let sdb = w.state_db.clone();
                move || {
                    tgt.sql_in(&sdb, "UPDATE capture_log l JOIN l_saved s ON s.stream = l.stream AND s.seq = l.seq SET l.chain = s.chain");
                }
            }),
        ),
    ];
    // The credential is restored by value below: keep the true digest first.
    let true_digest = tgt.sql_in(
        &w.tdb,
        "SELECT HEX(digest) FROM _backfill_ledger_pages WHERE window_id = 1 AND page_no = 0",
    );
    for (what, name, tamper, restore) in &cases {
        tamper();
        let err = f.activate().await.expect_err(what);
        let msg = err.to_string();
        assert!(
            msg.contains(name.as_str()),
            "{what}: the audit did not name {name}: {msg}"
        );
        assert_ne!(phase(&w).await, Phase::Streaming, "{what}");
        assert_eq!(
            tgt.sql_in(&w.tdb, "SELECT COUNT(*) FROM _backfill_ledger_activation"),
            "0"
        );
        restore();
        if *what == "credential" {
            tgt.sql_in(&w.tdb, &format!("UPDATE _backfill_ledger_pages SET digest = UNHEX('{true_digest}') WHERE window_id = 1 AND page_no = 0"));
        }
    }
    let a = f.activate().await.unwrap();
    assert!(a.activated.written);
    assert_eq!(phase(&w).await, Phase::Streaming);
    assert!(verify_clean(&w).await.is_clean());
    fin.reader.stop().await.unwrap();
}
