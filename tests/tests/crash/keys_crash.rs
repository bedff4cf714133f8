//! Keyed tables (issue 14) under kill -9 of the real `backfill serve` process: it exits
//! hard at named fault points during the windows (mid pages, after HIGH, after sealing,
//! after a page in T, before J) and during F, the replay of (B, F], activation and
//! STREAMING, and is SIGKILLed at an arbitrary instant, each time restarted with other
//! page sizes, read-window concurrency and replay batch sizes (the window plan is fixed
//! at install), while a writer keeps changing the source. It reaches STREAMING, the audit
//! passes and the independent comparison finds 0 missing, 0 extra, 0 differing
//! (DESIGN §11 I1, I3, I4).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults::{self, window};
use backfill_tests::case::Case;
use backfill_tests::keyed::{self, shapes, Shape, Writing};
use std::time::{Duration, Instant};

/// (fault point @ hit, serve flags of that run), in protocol order.
fn runs() -> Vec<(String, Vec<&'static str>)> {
    let at = |p: &str, n: u32| format!("{p}@{n}");
    vec![
        (at(window::MID_PAGES, 3), vec!["--page-rows", "7"]),
        (
            at(window::AFTER_HIGH, 2),
            vec!["--page-rows", "13", "--read-windows", "1"],
        ),
        (at(window::AFTER_FINAL_SEALED, 2), vec!["--page-rows", "25"]),
        (at(window::AFTER_PAGE_APPLIED, 3), vec!["--page-rows", "4"]),
        (
            at(window::AFTER_T_BEFORE_J, 2),
            vec!["--page-rows", "50", "--read-windows", "1"],
        ),
        (
            at(faults::FENCE_AFTER_F_WRITTEN, 1),
            vec!["--page-rows", "9"],
        ),
        (
            at(faults::REPLAY_AFTER_BATCH_T, 1),
            vec!["--replay-batch-rows", "5", "--replay-batch-groups", "2"],
        ),
        (at(faults::REPLAY_MID, 2), vec!["--replay-batch-rows", "17"]),
        (
            at(faults::REPLAY_AFTER_BATCH_T, 2),
            vec!["--replay-batch-rows", "3", "--apply-streams", "2"],
        ),
        (at(faults::ACTIVATE_AFTER_CREDENTIAL_BEFORE_J, 1), vec![]),
        (
            at(faults::STREAM_AFTER_BATCH, 2),
            vec!["--replay-batch-rows", "2"],
        ),
    ]
}

async fn killed_everywhere_converges(prefix: &str, shape: Shape) {
    let t0 = Instant::now();
    let c = Case::of_table(prefix, &shape.ddl(), &shape.fill(), 50, 10).await;
    let w = Writing::start(&c, shape);
    for (fp, args) in runs() {
        let code = keyed::run_to_end(&c, &args, &fp, None);
        assert_eq!(
            code,
            Some(kernel::failpoint::EXIT_CODE),
            "{}: serve did not stop at {fp}",
            shape.name
        );
        let head = c.head_opt().await;
        assert_eq!(head.and_then(|h| h.paused), None, "paused after {fp}");
    }
    // A SIGKILL at an arbitrary instant (STREAMING by now: a kill in the first windows
    // raced the window fault points above on a fast machine, which need windows left).
    keyed::sigkill_after(
        &c,
        &["--replay-batch-rows", "3"],
        Duration::from_millis(700),
    );
    let writes = w.stop().await;
    // Catches up with the writer's last changes; STREAMING.
    let code = keyed::run_to_end(
        &c,
        &["--page-rows", "11", "--replay-batch-rows", "1000"],
        "",
        None,
    );
    assert_eq!(code, Some(0), "{}: the last serve", shape.name);
    assert_eq!(c.head().await.phase, ledger::record::Phase::Streaming);
    let d = keyed::diff(&c, shape.key);
    assert!(d.is_clean(), "{}: {d}", shape.name);
    c.assert_exactly_once();
    keyed::assert_audit_passes(&c);
    eprintln!(
        "{}: {} windows, {writes} writes, {} rows, 0/0/0, {:?}",
        shape.name,
        c.plan().await.len(),
        d.rows,
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_bigint_unsigned_serve_killed_in_windows_and_replay_converges() {
    killed_everywhere_converges("kcbu", shapes::BIGINT_UNSIGNED).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_int_varchar_date_serve_killed_in_windows_and_replay_converges() {
    killed_everywhere_converges("kcivd", shapes::INT_VARCHAR50_DATE).await;
}

/// MariaDB's INET6 key (its binary form, ordered by memcmp) under the same kills.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_inet6_serve_killed_in_windows_and_replay_converges() {
    killed_everywhere_converges("kcinet", shapes::INET6).await;
}

/// The same for a string key under `_ci` (no DATE column: runs before temporal keys land).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_int_char_serve_killed_in_windows_and_replay_converges() {
    killed_everywhere_converges("kcic", shapes::INT_CHAR4).await;
}

/// Every other key shape of issue 14 under the same kills and restarts, one after another
/// (a failure names its shape): SMALLINT UNSIGNED, (INT, INT), (CHAR(3), CHAR(30)),
/// (INT, DATETIME, DATE, TIME) with zero dates, (INT, ENUM), CHAR(3), VARCHAR(255)
/// utf8mb4_general_ci, BINARY(16) with a 15-byte value, the NOT NULL UNIQUE (VARCHAR,
/// INT) key and (DECIMAL, TIMESTAMP, YEAR, SET).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_of_every_other_shape_serve_killed_in_windows_and_replay_converge() {
    let others = [
        shapes::SMALLINT_UNSIGNED,
        shapes::INT_INT,
        shapes::CHAR3_CHAR30,
        shapes::INT_DATETIME_DATE_TIME,
        shapes::INT_ENUM,
        shapes::CHAR3,
        shapes::VARCHAR255_GENERAL_CI,
        shapes::BINARY16,
        shapes::UNIQUE_VARCHAR_INT,
        shapes::DECIMAL_TIMESTAMP_YEAR_SET,
    ];
    for (i, shape) in others.into_iter().enumerate() {
        killed_everywhere_converges(&format!("kco{i}"), shape).await;
    }
}
