//! DESIGN §11 I2-I4 for the window protocol: the `backfill serve` PROCESS exits hard at
//! every fault point (like kill -9: no destructors, nothing flushed), is also SIGKILLed at
//! random instants, and restarts with other page sizes and read-window concurrency while
//! a writer keeps changing the source. It always converges: no conflict, no stall, every
//! FINAL page applied exactly once (audit trigger), one seal per window and the chain
//! names it, every FINAL equals its range's state at HIGH.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::window::fp;
use backfill_tests::case::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROWS: i64 = 10_000;
/// The keys the hook's statements change (the writer leaves them alone).
const HOOK_KEYS: [i64; 5] = [1700, 101700, 3100, 100050, 3000];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_killed_at_every_fault_point_converges() {
    let t0 = Instant::now();
    let c = Case::new("wk", ROWS, 1_000, 400).await;
    let n_windows = c.plan().await.len();
    let hook = write_hook(&c);
    let stop = Arc::new(AtomicBool::new(false));
    let mut w = None;
    let page_sizes = [400u64, 250, 777];
    // Exits at each fault point, by point: every point must be reached at least once.
    let mut hits: std::collections::BTreeMap<&str, u32> = fp::ALL.iter().map(|p| (*p, 0)).collect();
    let mut runs = 0;
    // Round 1: the first hit of every fault point; round 2: a later hit of each. Between
    // them, SIGKILLs at arbitrary instants that must land while windows are left.
    for (round, at) in [(0, 1), (1, 2)] {
        if round == 1 {
            runs += sigkills(&c, &hook, n_windows).await;
        }
        for (i, point) in fp::ALL.iter().enumerate() {
            if c.head_opt()
                .await
                .is_some_and(|h| h.completed as usize >= n_windows)
            {
                break;
            }
            if round > 0 && point.starts_with("job.") {
                continue; // B is done once
            }
            // The writer starts once B is durable (the checks replay L from B over the
            // filled table).
            let b_durable = c.head_opt().await.is_some_and(|h| h.b.is_some());
            if w.is_none() && b_durable {
                w = Some(tokio::spawn(writer(
                    c.source.url_db(&c.sdb),
                    stop.clone(),
                    ROWS + 500,
                    &HOOK_KEYS,
                )));
            }
            let ps = page_sizes[(i + round) % page_sizes.len()];
            let rw = 1 + (i as u32 % 2);
            let code = wait(serve_cmd(&c, ps, rw, &format!("{point}@{at}"), &hook), None);
            runs += 1;
            if code == Some(kernel::failpoint::EXIT_CODE) {
                *hits.get_mut(point).unwrap() += 1;
            } else {
                assert_eq!(code, Some(0), "serve failed at {point}@{at}");
            }
            let paused = c.head_opt().await.and_then(|h| h.paused);
            assert_eq!(paused, None, "paused after a crash at {point}");
        }
    }
    assert_eq!(wait(serve_cmd(&c, 500, 2, "", &hook), None), Some(0));
    stop.store(true, Ordering::SeqCst);
    let writes = w.expect("the writer ran").await.unwrap();
    eprintln!(
        "{runs} runs, fault-point exits {hits:?}, {writes} writes, {:?}",
        t0.elapsed()
    );
    let missed: Vec<&str> = hits
        .iter()
        .filter(|(_, n)| **n == 0)
        .map(|(p, _)| *p)
        .collect();
    assert!(
        missed.is_empty(),
        "fault points never reached: {missed:?} ({hits:?})"
    );
    assert_the_hook_ran(&c);
    assert_converged(&c, n_windows).await;
    c.oracle().assert_pages_exactly_once();
}

/// SIGKILLs of serve 300, 500 and 700 ms into a run whose reads are throttled (500 rows
/// a second, so windows are left to read): each kill must land while serve still runs,
/// with windows not yet in J. Returns the runs.
async fn sigkills(c: &Case, hook: &str, n_windows: usize) -> u32 {
    for ms in [300u64, 500, 700] {
        let left = c.head_opt().await.map_or(0, |h| h.completed as usize) < n_windows;
        assert!(left, "every window was done before the SIGKILL rounds");
        let child = serve_command(c, 333, 2, "", hook)
            .env("BACKFILL_READ_ROWS_PER_SEC", "500")
            .spawn()
            .unwrap();
        let code = wait(child, Some(Duration::from_millis(ms)));
        assert_eq!(
            code, None,
            "serve ended by itself before the SIGKILL at {ms} ms"
        );
    }
    3
}

/// Writes the `after_low` hook's SQL file; returns the hook argument of serve.
fn write_hook(c: &Case) -> String {
    let hook = c.data.path().join("hook.sql");
    // After every LOW: a key leaves window 1 for the last window or comes back (1700 <->
    // 101700), another leaves window 3 or comes back (3100 <-> 100050), and row 3000 is
    // updated. Exactly one key of each pair exists at any time and the writer never
    // touches these keys, so every statement changes a row each time it runs.
    // The hook runs on a connection without a default database: tables are qualified.
    std::fs::write(
        &hook,
        format!(
            "UPDATE `{0}`.t SET id = IF(id = 1700, 101700, 1700) WHERE id IN (1700, 101700); \
             UPDATE `{0}`.t SET id = IF(id = 3100, 100050, 3100) WHERE id IN (3100, 100050); \
             UPDATE `{0}`.t SET k = k + 7 WHERE id = 3000;",
            c.sdb
        ),
    )
    .unwrap();
    format!("after_low={}", hook.display())
}

/// The hook ran and found its rows: row 3000 moved by 7 per run, nothing else moves it,
/// and one key of each moving pair exists.
fn assert_the_hook_ran(c: &Case) {
    let k: i64 = c
        .source
        .sql_in(&c.sdb, "SELECT k FROM t WHERE id = 3000")
        .parse()
        .unwrap();
    assert!(k > 3000 && (k - 3000) % 7 == 0, "row 3000: k = {k}");
    let pairs = c.source.sql_in(
        &c.sdb,
        "SELECT COUNT(*) FROM t WHERE id IN (1700, 101700) UNION ALL \
         SELECT COUNT(*) FROM t WHERE id IN (3100, 100050)",
    );
    assert_eq!(pairs, "1\n1", "one key of each moving pair");
}

/// Every window in J, no pause, the evidence agrees, every FINAL is its range's state at
/// HIGH and the target holds them, each FINAL row inserted once, one seal per window.
async fn assert_converged(c: &Case, n_windows: usize) {
    let head = c.head().await;
    assert_eq!(head.completed as usize, n_windows);
    assert_eq!(head.paused, None);
    c.assert_evidence_agrees().await;
    assert_final_is_state_at_high(c, &filled_state(ROWS)).await;
    assert_target_is_finals(c).await;
    let finals: usize = c.final_rows().await.iter().map(|f| f.len()).sum();
    assert_eq!(
        c.audit_count(),
        finals as u64,
        "each FINAL row inserted exactly once"
    );
    // One seal per window, and it is the one the chain names (sealed windows never re-read).
    let seals: Vec<(u32, u32, Vec<u8>)> = sqlx::query_as(
        "SELECT window_id, attempt, manifest_hash FROM window_seals WHERE job_id = ? ORDER BY window_id",
    )
    .bind(c.job.0)
    .fetch_all(&c.pool)
    .await
    .unwrap();
    let chain = c.chain().await;
    assert_eq!(seals.len(), chain.len(), "one seal per window: {seals:?}");
    for ((w, a, h), (cw, ca, ch)) in seals.iter().zip(&chain) {
        assert_eq!((w, a, &h[..]), (cw, ca, &ch.0[..]));
    }
}
