//! Kill the capturing process (SIGKILL, or a fault point that exits hard) again and again
//! under a running workload: L must have no gap and no duplicate, D must equal L's tail
//! after every death (so "L written, D not" cannot exist: they are one transaction), and
//! the result must be byte-identical to an uninterrupted capture of the same binlog.
use crate::support::probe::{end, end_at, Probe};
use crate::support::*;
use kernel::control::IntentKind;
use kernel::log;
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const POINTS: [&str; 3] = [
    "capture.after_read_before_store",
    "capture.before_commit",
    "capture.after_store",
];

const PROBE: Probe = Probe {
    max_batch: 20,
    tables: &[("t", 1), ("x", 2)],
    pipe_stderr: true,
};

/// Every 7th round prepares an XA transaction on `x` (150 rows: a held group of two
/// chunks); the 4th round after it commits it, or rolls it back every other time, so
/// kills land between prepares and their outcome too (DESIGN §3.8).
fn xa_round(src: &harness::Server, db: &str, round: u64, pending: &mut Option<u64>) {
    if let Some(r) = pending.take() {
        let verb = if r.is_multiple_of(2) {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        src.sql_in(db, &format!("XA {verb} 'c{r}'"));
    }
    if round.is_multiple_of(7) {
        let base = round * 1000;
        src.sql_in(
            db,
            &format!(
                "XA START 'c{round}'; INSERT INTO x SELECT seq + {base}, 'xa', 0 FROM seq_1_to_150;
                 UPDATE x SET n = n + 1 WHERE id BETWEEN {base} AND {base} + 10;
                 XA END 'c{round}'; XA PREPARE 'c{round}'"
            ),
        );
        *pending = Some(round);
    }
}

fn run_workload(src: &'static harness::Server, db: String, stop: Arc<AtomicBool>) {
    let mut next = 10_000;
    let mut round = 0u64;
    let mut pending: Option<u64> = None;
    while !stop.load(Ordering::Relaxed) {
        round += 1;
        if round.is_multiple_of(7) || (round % 7 == 4 && pending.is_some()) {
            xa_round(src, &db, round, &mut pending);
            continue;
        }
        let sql = match round % 6 {
            0 => format!("INSERT INTO t SELECT seq + {next}, 'bulk', 0 FROM seq_1_to_250"),
            1 => format!("INSERT INTO t VALUES ({next}, 'one', 1)"),
            2 => format!(
                "UPDATE t SET n = n + 1 WHERE id > {} AND id % 7 = 0",
                next - 3000
            ),
            3 => format!(
                "BEGIN; UPDATE t SET id = id + 1000000 WHERE id = {}; DELETE FROM t WHERE id = {}; \
                 INSERT INTO other VALUES ({next}); COMMIT",
                next - 1,
                next - 3
            ),
            4 => format!(
                "BEGIN; INSERT INTO t VALUES ({}, 'rb', 0); ROLLBACK",
                next + 500_000
            ),
            _ => format!(
                "UPDATE t SET s = concat(s, 'x') WHERE id > {} AND id % 11 = 0 AND length(s) < 60",
                next - 3000
            ),
        };
        next += 300;
        src.sql_in(&db, &sql);
    }
    // No prepared transaction outlives the workload (XA RECOVER is server-wide).
    xa_round(src, &db, 1, &mut pending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_every_fault_point_under_load_converges_identically() {
    let e = env("cap_crash").await;
    e.src.sql_in(
        &e.db,
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(64) NULL, n INT NOT NULL)",
    );
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    e.src.sql_in(
        &e.db,
        "CREATE TABLE x (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(64) NULL, n INT NOT NULL)",
    );
    e.init_stream_named(&e.pool, "crash", 100).await;
    e.init_stream_named(&e.pool, "clean", 100).await;
    e.intent(1, IntentKind::B).await;
    e.intent(2, IntentKind::B).await;

    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (src, db, stop) = (e.src, e.db.clone(), stop.clone());
        std::thread::spawn(move || run_workload(src, db, stop))
    };
    // Each point is armed on its own (`name@n`, n random in 1..=15) and must be the one the
    // run dies at (its exit line on the probe's stderr) within a minute: a point never
    // reached fails, it is never taken for a kill. Every 4th run is a SIGKILL at a random
    // instant of an unarmed probe, which must still be running then.
    let mut hits: BTreeMap<&str, u32> = POINTS.iter().map(|p| (*p, 0)).collect();
    let (mut armed, mut kills) = (0, 0);
    for i in 0..24 {
        if i % 4 == 3 {
            let child = PROBE.spawn(&e, "crash", None);
            let within = Duration::from_millis(300 + rand::random::<u64>() % 1500);
            assert_eq!(
                end(child, within),
                None,
                "the unarmed probe ended by itself"
            );
            kills += 1;
        } else {
            let point = POINTS[armed % POINTS.len()];
            armed += 1;
            let fp = format!("{point}@{}", 1 + rand::random::<u32>() % 15);
            let child = PROBE.spawn(&e, "crash", Some(fp.clone()));
            let (code, hit, err) = end_at(child, Duration::from_secs(60), point);
            assert!(hit, "{fp} not reached within 60 s (exit {code:?}): {err}");
            *hits.get_mut(point).unwrap() += 1;
        }
        // After any death: the chain verifies and D names L's tail (I7).
        log::verify_chain(&e.pool, "crash").await.unwrap();
    }
    eprintln!("fault-point hits per point: {hits:?}; {kills} SIGKILLs");
    for (point, n) in &hits {
        assert_eq!(*n, 6, "{point}: hit and killed {n} times, 6 armed");
    }
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    let t0 = Instant::now();
    let f = e.intent(1, IntentKind::F).await;
    PROBE.catch_up(&e, "crash", f.nonce).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    eprintln!("catch-up {:?}", t0.elapsed());
    let t1 = Instant::now();

    // An uninterrupted capture of the same binlog, in process.
    let tables = [(1, "t"), (2, "x")];
    clean_capture(&e, &e.pool, "clean", &tables, f.nonce, deadline).await;
    eprintln!("clean capture {:?}", t1.elapsed());

    let crash = all_records(&e.pool, "crash").await;
    let clean = all_records(&e.pool, "clean").await;
    log::verify_chain(&e.pool, "crash").await.unwrap();
    eprintln!(
        "{} records, {} changes",
        crash.len(),
        crash
            .iter()
            .map(|r| match &r.record.body {
                log::RecordBody::Chunk(c) => c.changes.len(),
                _ => 0,
            })
            .sum::<usize>()
    );
    assert_eq!(chunk_identities(&crash), chunk_identities(&clean));
    let mut ids = HashSet::new();
    for r in &crash {
        if let log::RecordBody::Chunk(c) = &r.record.body {
            for ch in &c.changes {
                assert!(ids.insert(ch.id.clone()), "duplicate change {:?}", ch.id);
            }
        }
    }
    let folded = fold(&crash, "t", 0, BTreeMap::new());
    assert_eq!(
        as_text(&folded),
        cli_rows(e.src, &e.db, "SELECT id, s, n FROM t")
    );
    let held = crash
        .iter()
        .filter(|r| matches!(r.record.body, log::RecordBody::Held(_)))
        .count();
    eprintln!("{held} held XA chunks");
    assert!(held > 0, "the workload prepared XA groups");
    assert!(log::holds(&e.pool, "crash").await.unwrap().is_empty());
    let folded = fold(&crash, "x", 0, BTreeMap::new());
    assert_eq!(
        as_text(&folded),
        cli_rows(e.src, &e.db, "SELECT id, s, n FROM x")
    );
}
