//! Read-ahead under crashes (DESIGN §5: "reading and sealing of the next windows may run
//! ahead"): the target's table is locked so J cannot advance, the `backfill serve` PROCESS
//! reads and seals windows ahead of J and exits hard at a fault point (or is SIGKILLed),
//! while a writer keeps changing the source. Each restart must find every window ahead of
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

async fn unlock(mut lock: mysql_async::Conn) {
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    lock.disconnect().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killed_while_windows_ahead_are_sealed_and_j_is_behind() {
    let c = Case::new("wah", ROWS, 800, 300).await;
    let n = c.plan().await.len();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writer_task = None;
    // (fault point, hit, read windows); SIGKILL after 8 s when the point is not reached
    // in this run (every window the lookahead can reach was sealed before).
    let rounds = [
        (fp::AFTER_SEALED_AHEAD, 1, 2),
        (fp::AFTER_LOW_IN_L, 2, 2),
        (fp::MID_PAGES, 3, 1),
        (fp::AFTER_HIGH, 2, 2),
        (fp::AFTER_FINAL_SEALED, 2, 2),
        (fp::AFTER_SEALED_AHEAD, 1, 1),
    ];
    let mut exits = 0;
    // Every round ends abruptly (a fault-point exit or a SIGKILL after 8 s).
    let mut abrupt = rounds.len();
    for (i, (point, at, rw)) in rounds.iter().enumerate() {
        let before = c.head_opt().await.map_or(0, |h| h.completed);
        let lock = c.lock_target().await;
        let ps = [300u64, 170, 420][i % 3];
        let code = wait(
            serve_cmd(&c, ps, *rw, &format!("{point}@{at}"), ""),
            Some(Duration::from_secs(8)),
        );
        unlock(lock).await;
        if code == Some(kernel::failpoint::EXIT_CODE) {
            exits += 1;
        } else {
            assert_eq!(code, None, "serve ended otherwise at {point}@{at}");
        }
        if i == 0 {
            assert_eq!(
                code,
                Some(kernel::failpoint::EXIT_CODE),
                "window 1 sealed ahead of J"
            );
        }
        let head = c.head().await;
        assert_eq!(
            head.completed, before,
            "J stayed behind while the target was locked"
        );
        assert_eq!(head.paused, None);
        let ahead = c
            .seals()
            .await
            .iter()
            .filter(|(w, _, _)| *w > head.completed)
            .count();
        let sealed_point = *point == fp::AFTER_SEALED_AHEAD || *point == fp::AFTER_FINAL_SEALED;
        if code == Some(kernel::failpoint::EXIT_CODE) && sealed_point {
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
        // J moves on a little between rounds, leaving windows sealed ahead of it.
        let code = wait(serve_cmd(&c, 250, 2, "window.after_j@2", ""), None);
        assert!(matches!(code, Some(0) | Some(kernel::failpoint::EXIT_CODE)));
        abrupt += usize::from(code == Some(kernel::failpoint::EXIT_CODE));
        if c.head().await.completed as usize >= n - 1 {
            break;
        }
    }
    assert_eq!(wait(serve_cmd(&c, 333, 2, "", ""), None), Some(0));
    stop.store(true, Ordering::SeqCst);
    let writes = writer_task.expect("the writer ran").await.unwrap();
    eprintln!("{exits} fault-point exits, {writes} writes");
    assert_converged(&c, n, abrupt).await;
}

/// After the last run: every window in J, no pause, the evidence agrees, no sealed window
/// re-read, every FINAL is its range's state at HIGH and in the target once, one seal per
/// window, and no material left over but what `abrupt` abrupt ends can explain.
async fn assert_converged(c: &Case, n: usize, abrupt: usize) {
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
    // is neither accounted nor swept yet (known gap, issue 5 note); at most one per task
    // cut by an abrupt end (2 read windows + 2 page writers).
    assert_eq!(c.garbage_bytes().await, 0);
    let reg = ledger::registry::Registry::new(c.pool.clone());
    let entries = reg.entries(c.job, c.generation).await.unwrap();
    let files = c.material_files();
    assert!(
        files >= entries.len(),
        "every registered material has its file"
    );
    assert!(
        files - entries.len() <= 4 * abrupt,
        "{} unregistered material files after {abrupt} abrupt ends",
        files - entries.len()
    );
}
