//! Read-ahead under crashes (DESIGN §5: "reading and sealing of the next windows may run
//! ahead"): the target's table is locked so J cannot advance, the `backfill serve` PROCESS
//! reads and seals windows ahead of J and exits hard at a fault point (each round its own
//! named point, which must be reached), while a writer keeps changing the source. Each restart must find every window ahead of
//! J either unsealed (new attempt) or sealed (never re-read, FINAL bytes applied once),
//! and the job converges with every FINAL page applied exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::window::fp;
use backfill_tests::case::*;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const ROWS: i64 = 6_000;
/// Windows of 500 rows: 13 windows as planned, so that J never runs out of fresh windows ahead of it
/// within the rounds (it is at window 5 after the last).
const WINDOW_ROWS: u64 = 500;
/// Unregistered material files allowed at the end (see [`assert_converged`]).
const LEAKED_FILES: usize = 4;

async fn unlock(mut lock: mysql_async::Conn) {
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    lock.disconnect().await.unwrap();
}

/// Runs `cmd` (its stderr piped) until it exits, SIGKILLing it after `limit`; returns its
/// exit code and whether it exited at `point` (the fault point's exit line on stderr).
fn run_to_point(
    mut cmd: std::process::Command,
    limit: Duration,
    point: &str,
) -> (Option<i32>, bool) {
    let mut child = cmd
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn backfill serve");
    let mut pipe = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut s);
        s
    });
    let code = wait(child, Some(limit));
    let err = reader.join().unwrap();
    eprint!("{err}");
    let line = format!(
        "failpoint {point}: exiting with status {}",
        kernel::failpoint::EXIT_CODE
    );
    (
        code,
        code == Some(kernel::failpoint::EXIT_CODE) && err.contains(&line),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_while_windows_ahead_are_sealed_and_j_is_behind() {
    let c = Case::new("wah", ROWS, WINDOW_ROWS, 300).await;
    let n = c.plan().await.len();
    assert_eq!(
        n, 13,
        "windows planned (the planner's estimate-based ranges)"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut writer_task = None;
    // (fault point, hit, read windows, page rows). With the target locked J cannot move:
    // a run reaches J's window (its pages wait for the lock), one sealed window waiting
    // for the applier and `read windows` being produced. Every round must die at its own
    // point within a minute; a point not reached fails the test.
    let rounds = [
        (fp::AFTER_SEALED_AHEAD, 1, 2, 300),
        (fp::AFTER_LOW_IN_L, 2, 2, 170),
        (fp::MID_PAGES, 3, 1, 420),
        (fp::AFTER_HIGH, 2, 2, 300),
        (fp::AFTER_FINAL_SEALED, 2, 2, 170),
        (fp::AFTER_SEALED_AHEAD, 1, 1, 420),
    ];
    // J moves on between rounds by one window (`window.after_j@1`), every window after J's
    // held right after its LOW by the SQL hook (BACKFILL_WINDOW_HOOK_SQL: a 3 s sleep on
    // the source) so that this run seals no new window: what the round sealed beyond J's
    // window stays sealed ahead of J for the next round's restart, and the windows after
    // it are fresh for the next round's point.
    let hold = c.data.path().join("hold.sql");
    std::fs::write(&hold, "DO SLEEP(3)").unwrap();
    let hold = format!("after_low={}", hold.display());
    let mut hits = std::collections::BTreeMap::<&str, u32>::new();
    let (mut advanced, mut sealed_ahead_seen, mut j_moved) = (0, 0, 0);
    for (point, at, rw, ps) in rounds {
        let before = c.head_opt().await.map_or(0, |h| h.completed);
        let sealed_before: Vec<u32> = c.seals().await.iter().map(|s| s.0).collect();
        let lock = c.lock_target().await;
        let cmd = serve_command(&c, ps, rw, &format!("{point}@{at}"), "");
        let (code, hit) = run_to_point(cmd, Duration::from_secs(60), point);
        unlock(lock).await;
        assert!(
            hit,
            "{point}@{at} (J at {before}) not reached: exit {code:?}"
        );
        *hits.entry(point).or_default() += 1;
        // With the target locked no page is written: J may only record windows sealed
        // before this round whose pages an earlier run applied ahead of J (pipeline.rs),
        // never one this round read.
        let head = c.head().await;
        for w in before..head.completed {
            assert!(
                sealed_before.contains(&w),
                "J recorded window {w}, not sealed before the round, while the target was locked"
            );
        }
        assert_eq!(head.paused, None);
        let ahead = c
            .seals()
            .await
            .iter()
            .filter(|(w, _, _)| *w > head.completed)
            .count();
        sealed_ahead_seen = sealed_ahead_seen.max(ahead);
        if point == fp::AFTER_SEALED_AHEAD || point == fp::AFTER_FINAL_SEALED {
            // The second seal of a run with J held is of a window after J's.
            assert!(
                ahead > 0,
                "a window ahead of J is sealed after {point}@{at}"
            );
        }
        c.assert_sealed_windows_not_reread().await;
        if writer_task.is_none() {
            let url = c.source.url_db(&c.sdb);
            writer_task = Some(tokio::spawn(writer(url, stop.clone(), ROWS + 400, &[])));
        }
        let at = head.completed;
        j_moved += at - before;
        let (code, hit) = run_to_point(
            serve_command(&c, 250, 2, &format!("{}@1", fp::AFTER_J), &hold),
            Duration::from_secs(60),
            fp::AFTER_J,
        );
        assert!(hit, "J advanced by one window: exit {code:?}");
        advanced += 1;
        assert_eq!(c.head().await.completed, at + 1, "J moved one window");
    }
    eprintln!(
        "window_ahead: fault-point hits {hits:?}, {advanced} advances, at most \
         {sealed_ahead_seen} windows sealed ahead of J, {j_moved} windows recorded with the \
         target locked"
    );
    for (point, at, _, _) in rounds {
        let want = rounds.iter().filter(|r| r.0 == point).count() as u32;
        assert_eq!(hits.get(point), Some(&want), "{point}@{at} hits");
    }
    assert_eq!(wait(serve_cmd(&c, 333, 2, "", ""), None), Some(0));
    stop.store(true, Ordering::SeqCst);
    let writes = writer_task.expect("the writer ran").await.unwrap();
    eprintln!(
        "{} fault-point exits, {writes} writes",
        rounds.len() + advanced
    );
    assert_converged(&c, n).await;
}

/// After the last run: every window in J, no pause, the evidence agrees, no sealed window
/// re-read, every FINAL is its range's state at HIGH and in the target once, one seal per
/// window, and at most [`LEAKED_FILES`] material files left over unregistered.
async fn assert_converged(c: &Case, n: usize) {
    let head = c.head().await;
    assert_eq!(head.completed as usize, n);
    assert_eq!(head.paused, None);
    c.assert_evidence_agrees().await;
    c.assert_sealed_windows_not_reread().await;
    assert_final_is_state_at_high(c, &filled_state(ROWS)).await;
    assert_target_is_finals(c).await;
    let finals: usize = c.final_rows().await.iter().map(|f| f.len()).sum();
    assert_eq!(
        c.audit_count(),
        finals as u64,
        "each FINAL row inserted exactly once"
    );
    let seals = c.seals().await;
    let chain = c.chain().await;
    assert_eq!(seals.len(), chain.len(), "one seal per window: {seals:?}");
    for ((w, a, h), (cw, ca, ch)) in seals.iter().zip(&chain) {
        assert_eq!((w, a, &h[..]), (cw, ca, &ch.0[..]));
    }
    // Materials of attempts killed before their seal are released once a later attempt
    // sealed the window: every registered material is a sealed attempt's and has its file.
    // A kill can land in a read-ahead task between a page's fsync and its registration (a
    // fault-point exit stops every task at once): such a file is never registered, so it
    // is neither accounted nor swept yet (known gap, issue 5 note). Measured: 0 or 1 such
    // file in each of 4 runs of this test (12 abrupt ends each); the bound is one abrupt
    // end's worth (2 read windows + 2 page writers cut at once), no longer 4 per abrupt end.
    assert_eq!(c.garbage_bytes().await, 0);
    let reg = ledger::registry::Registry::new(c.pool.clone());
    let entries = reg.entries(c.job, c.generation).await.unwrap();
    let files = c.material_files();
    assert!(
        files >= entries.len(),
        "every registered material has its file"
    );
    let leaked = files - entries.len();
    eprintln!(
        "{files} material files, {} registered, {leaked} unregistered",
        entries.len()
    );
    assert!(
        leaked <= LEAKED_FILES,
        "{leaked} unregistered material files (at most {LEAKED_FILES})"
    );
}
