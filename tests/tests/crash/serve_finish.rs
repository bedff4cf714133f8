//! The whole table lifecycle through `serve` against real MariaDB (issue 6 acceptance):
//! install, start, windows under a concurrent writer, F, replay of (B, F], activation
//! audit, STREAMING and continuous replay; the writer stops, a restarted serve with
//! another replay batch size catches up, `verify` reports 0/0/0, CHECKSUM TABLE agrees and
//! the exactly-once oracle over both binlogs passes. Then the `audit` and `verify`
//! commands: exit 0 on the clean table, exit 4 naming a tampered T credential and a row
//! changed directly in the target.
//!
//! Size: SERVE_FINISH_ROWS (default 20 000; the full size is 200 000).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use ledger::record::Phase;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn rows() -> i64 {
    std::env::var("SERVE_FINISH_ROWS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000)
}

/// One writer statement per step: inserts, updates, deletes, key changes, and now and
/// then a 3 000-row UPDATE (one source transaction of several L chunks). Every key a step
/// creates is `n + 1 + i` of its own step `i`, so no step repeats a key: each statement
/// must succeed ([`writer`]).
fn step(n: i64, i: i64) -> String {
    let k = |m: i64| (i * m) % n + 1;
    let new = n + 1 + i;
    match i % 6 {
        0 => format!("INSERT INTO t VALUES ({new}, {i}, 'ins')"),
        1 => format!("UPDATE t SET k = k + 1, v = 'upd' WHERE id = {}", k(7)),
        2 => format!("DELETE FROM t WHERE id = {}", k(13)),
        3 => format!("UPDATE t SET id = {new} WHERE id = {}", k(17)),
        4 if i % 120 == 4 => {
            let a = k(31);
            format!("UPDATE t SET k = k + 1 WHERE id BETWEEN {a} AND {}", a + 3000)
        }
        _ => format!(
            "BEGIN; UPDATE t SET v = 'txn' WHERE id = {}; INSERT INTO t VALUES ({new}, 0, 'txn'); COMMIT",
            k(19)
        ),
    }
}

/// Writes [`step`]s to the source's `db` until `stop`; every statement must succeed (an
/// error fails the test through the thread's panic). Returns the transactions committed.
fn writer(src: &'static harness::Server, db: String, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let (n, mut i) = (rows(), 0);
        while !stop.load(Ordering::Relaxed) {
            src.sql_in(&db, &step(n, i));
            i += 1;
        }
        i as u64
    })
}

async fn serve_once(c: &Case, replay: ReplayConfig) -> String {
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(replay);
    let out = serve::serve_until_idle(cfg, Duration::from_secs(900)).await;
    out.get(&c.job).cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_copies_replays_activates_and_streams_under_a_concurrent_writer() {
    let _serial = in_process().await;
    let n = rows();
    let started = Instant::now();
    let c = Case::new("sfin", n, (n / 8).max(1) as u64, 1000).await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = writer(c.source, c.sdb.clone(), stop.clone());
    // First process: windows under the writer, F, replay, activation, caught up once.
    let out = serve_once(
        &c,
        ReplayConfig {
            batch_rows: 1000,
            batch_groups: 100,
            ..ReplayConfig::default()
        },
    )
    .await;
    assert_eq!(out, "beyond windows: Streaming");
    assert_eq!(c.head().await.phase, Phase::Streaming);
    let first = started.elapsed();
    // Keep writing a little while the table is STREAMING, then stop.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let commits = writer.join().expect("every writer statement succeeds");
    // Second process with another replay batch size: re-audits and catches up (I3).
    let out = serve_once(
        &c,
        ReplayConfig {
            batch_rows: 3,
            batch_groups: 2,
            ..ReplayConfig::default()
        },
    )
    .await;
    assert_eq!(out, "beyond windows: Streaming");
    let state = c.state_url();
    let job = c.job.0.to_string();
    let data = c.data.path().to_str().unwrap().to_string();
    let (code, stdout, stderr) =
        backfill(&["verify", "--state", &state, &job, "--format", "json"]).parts();
    assert_eq!(code, 0, "verify: {stdout} {stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["cursor"]["tally"]["missing"]["count"], 0);
    assert_eq!(v["cursor"]["tally"]["extra"]["count"], 0);
    assert_eq!(v["cursor"]["tally"]["differing_fields"]["count"], 0);
    assert_eq!(
        checksum(c.source, &c.sdb, "t"),
        checksum(c.target, &c.tdb, "t")
    );
    let (code, stdout, stderr) = backfill(&[
        "audit",
        "--state",
        &state,
        "--data-dir",
        &data,
        &job,
        "--format",
        "json",
    ])
    .parts();
    assert_eq!(code, 0, "audit: {stdout} {stderr}");
    let a: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(a["passed"], true);
    // Before the tampering below: every change applied exactly once, every page once.
    c.assert_exactly_once();
    eprintln!(
        "serve end to end: {n} rows, writer committed {commits} transactions, first serve (windows..STREAMING) {first:?}, total {:?}",
        started.elapsed()
    );
    // A tampered T credential: audit exits 4 and names it.
    let d = c.target.sql_in(
        &c.tdb,
        "SELECT HEX(digest) FROM _backfill_ledger_pages WHERE window_id = 1 AND page_no = 0",
    );
    c.target.sql_in(
        &c.tdb,
        "UPDATE _backfill_ledger_pages SET digest = UNHEX(SHA2('x', 256)) WHERE window_id = 1 AND page_no = 0",
    );
    let (code, stdout, _) =
        backfill(&["audit", "--state", &state, "--data-dir", &data, &job]).parts();
    assert_eq!(code, 4, "{stdout}");
    assert!(
        stdout.contains("FAIL") && stdout.contains("w1p0"),
        "{stdout}"
    );
    c.target.sql_in(
        &c.tdb,
        &format!("UPDATE _backfill_ledger_pages SET digest = UNHEX('{d}') WHERE window_id = 1 AND page_no = 0"),
    );
    // A field changed directly in the target: verify exits 4 and names it.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'edited' ORDER BY id LIMIT 1");
    let (code, stdout, _) = backfill(&["verify", "--state", &state, &job]).parts();
    assert_eq!(code, 4, "{stdout}");
    assert!(stdout.contains('v'), "{stdout}");
}

/// The `backfill serve` process exits hard at each fault point of F, replay, activation
/// and streaming in turn (like a kill -9); each restart continues from J, T and L, and the
/// last one reaches STREAMING with the target equal to the source and the audit clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_killed_at_each_finish_fault_point_converges() {
    let n = 3_000;
    let c = Case::new("sfkill", n, 1_000, 500).await;
    // Changes after install: the windows and the replay of (B, F] both have work.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id % 3 = 0");
    let state = c.state_url();
    let data = c.data.path().to_str().unwrap().to_string();
    let serve_args = |batch: &str| {
        vec![
            "serve".to_string(),
            "--state".into(),
            state.clone(),
            "--data-dir".into(),
            data.clone(),
            "--exit-when-idle".into(),
            "--owner".into(),
            "kill-test".into(),
            "--replay-batch-rows".into(),
            batch.into(),
            "--replay-batch-groups".into(),
            "1".into(),
        ]
    };
    let writes = [
        "UPDATE t SET v = 'w1' WHERE id BETWEEN 10 AND 40",
        "DELETE FROM t WHERE id BETWEEN 50 AND 60",
        "UPDATE t SET id = id + 100000 WHERE id BETWEEN 70 AND 75",
        "INSERT INTO t VALUES (900001, 1, 'x'), (900002, 2, 'y')",
    ];
    for (i, fp) in [
        "fence.after_f_written",
        "replay.after_batch_t",
        "replay.mid",
        "activate.after_credential_before_j",
        "stream.after_batch",
    ]
    .iter()
    .enumerate()
    {
        // After the first run's orphan F: changes that the next F puts in (B, F], one
        // source transaction each, so each replay fault point finds a batch to stop at.
        if i == 1 {
            for sql in writes {
                c.source.sql_in(&c.sdb, sql);
            }
        }
        // Before the streaming fault point: a change after F for the stream to apply.
        if i == 4 {
            c.source.sql_in(
                &c.sdb,
                "UPDATE t SET v = 'streamed' WHERE id BETWEEN 100 AND 120",
            );
        }
        let out = backfill_tests::command()
            .args(serve_args(if i % 2 == 0 { "7" } else { "1" }))
            .env(kernel::failpoint::ENV, fp)
            .output()
            .unwrap();
        let code = out.status.code().unwrap_or(-1);
        assert_eq!(
            code,
            kernel::failpoint::EXIT_CODE,
            "{fp} did not fire: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("serve with {fp}: exit {code}");
    }
    let out = backfill_tests::command()
        .args(serve_args("5000"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Streaming"));
    assert_eq!(c.head().await.phase, Phase::Streaming);
    let job = c.job.0.to_string();
    let (code, stdout, _) = backfill(&["verify", "--state", &state, &job]).parts();
    assert_eq!(code, 0, "{stdout}");
    let (code, stdout, _) =
        backfill(&["audit", "--state", &state, "--data-dir", &data, &job]).parts();
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(
        checksum(c.source, &c.sdb, "t"),
        checksum(c.target, &c.tdb, "t")
    );
    c.assert_exactly_once();
}
