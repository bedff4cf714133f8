//! DESIGN §11 I2-I4 for the window protocol: the `backfill serve` PROCESS exits hard at
//! every fault point (like kill -9: no destructors, nothing flushed), is also SIGKILLed at
//! random instants, and restarts with other page sizes and read-window concurrency while
//! a writer keeps changing the source. It always converges: no conflict, no stall, every
//! FINAL page applied exactly once (audit trigger), one seal per window and the chain
//! names it, every FINAL equals its range's state at HIGH.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod window_support;
use bootstrap::window::fp;
use mysql_async::prelude::Queryable;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use window_support::*;

const ROWS: i64 = 10_000;

fn serve_cmd(c: &Case, page_rows: u64, read_windows: u32, failpoints: &str, hook: &str) -> Child {
    Command::new(env!("CARGO_BIN_EXE_backfill"))
        .args([
            "serve",
            "--exit-when-idle",
            "--windows-only",
            "--owner",
            "crash-test",
        ])
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .arg("--page-rows")
        .arg(page_rows.to_string())
        .arg("--read-windows")
        .arg(read_windows.to_string())
        .env(kernel::failpoint::ENV, failpoints)
        .env(bootstrap::window::hooks::SQL_ENV, hook)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve")
}

/// Waits for the child; kills it (SIGKILL) after `kill_after` if given. Returns the code.
fn wait(mut child: Child, kill_after: Option<Duration>) -> Option<i32> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if kill_after.is_some_and(|d| t0.elapsed() >= d) {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return None;
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "serve stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn writer(url: String, stop: Arc<AtomicBool>) -> u64 {
    use rand::Rng;
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let (op, a, b): (u8, i64, i64) = {
            let mut r = rand::rng();
            (
                r.random_range(0..4),
                r.random_range(1..=ROWS + 500),
                r.random_range(1..=ROWS + 500),
            )
        };
        let sql = match op {
            0 => format!("INSERT IGNORE INTO t VALUES ({a}, 0, 'new')"),
            1 => format!("UPDATE t SET k = k + 1 WHERE id = {a}"),
            2 => format!("DELETE FROM t WHERE id = {a}"),
            _ => format!("UPDATE IGNORE t SET id = {b} WHERE id = {a}"),
        };
        c.query_drop(sql).await.unwrap();
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_killed_at_every_fault_point_converges() {
    let t0 = Instant::now();
    let c = Case::new("wk", ROWS, 1_000, 400).await;
    let n_windows = c.plan().await.len();
    let hook = c.data.path().join("hook.sql");
    std::fs::write(
        &hook,
        "UPDATE IGNORE t SET id = id + 100000 WHERE id = 1700; \
         UPDATE IGNORE t SET id = 3100 WHERE id = 100050; UPDATE t SET k = k + 7 WHERE id = 3000;",
    )
    .unwrap();
    let hook = format!("after_low={}", hook.display());
    let stop = Arc::new(AtomicBool::new(false));
    let mut w = None;
    let page_sizes = [400u64, 250, 777];
    let mut crashes = 0;
    let mut runs = 0;
    // Round 1: the first hit of every fault point; round 2: a later hit of each.
    for (round, at) in [(0, 1), (1, 2)] {
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
                w = Some(tokio::spawn(writer(c.source.url_db(&c.sdb), stop.clone())));
            }
            let ps = page_sizes[(i + round) % page_sizes.len()];
            let rw = 1 + (i as u32 % 2);
            let code = wait(serve_cmd(&c, ps, rw, &format!("{point}@{at}"), &hook), None);
            runs += 1;
            if code == Some(kernel::failpoint::EXIT_CODE) {
                crashes += 1;
            } else {
                assert_eq!(code, Some(0), "serve failed at {point}@{at}");
            }
            let paused = c.head_opt().await.and_then(|h| h.paused);
            assert_eq!(paused, None, "paused after a crash at {point}");
        }
    }
    // SIGKILL at arbitrary instants, then run to the end.
    for ms in [300u64, 700, 1100] {
        let _ = wait(
            serve_cmd(&c, 333, 2, "", &hook),
            Some(Duration::from_millis(ms)),
        );
        runs += 1;
    }
    assert_eq!(wait(serve_cmd(&c, 500, 2, "", &hook), None), Some(0));
    stop.store(true, Ordering::SeqCst);
    let writes = w.expect("the writer ran").await.unwrap();
    eprintln!(
        "{runs} runs, {crashes} fault-point exits, {writes} writes, {:?}",
        t0.elapsed()
    );
    assert!(
        crashes >= fp::ALL.len(),
        "every fault point was hit at least once ({crashes})"
    );
    let head = c.head().await;
    assert_eq!(head.completed as usize, n_windows);
    assert_eq!(head.paused, None);
    c.assert_evidence_agrees().await;
    assert_final_is_state_at_high(&c, &filled_state(ROWS)).await;
    assert_target_is_finals(&c).await;
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
