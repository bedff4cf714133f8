//! Every column type of issue 15 item 2 in one table ([`backfill_tests::typed`]) under
//! kill -9 of the real `backfill serve`: it exits hard at named fault points in the
//! windows, in F, in the replay, in activation and while STREAMING, and is SIGKILLed at
//! an arbitrary instant, each time restarted with other page and batch sizes, while a
//! writer rewrites every column of rows (spatial values with SRIDs, UUID/INET values
//! whose binary form ends in 0x00, zero dates, YEAR 0000, BIT, ENUM/SET with quotes,
//! DECIMAL(65,30), FLOAT/DOUBLE bounds) and bumps the column the generated ones read. It
//! reaches STREAMING, the audit passes and the independent comparison (which reads the
//! generated and INVISIBLE columns too) finds 0 missing, 0 extra, 0 differing.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults::{self, window};
use backfill_tests::case::Case;
use backfill_tests::keyed;
use backfill_tests::typed;
use std::time::{Duration, Instant};

/// (fault point @ hit, serve flags of that run), in protocol order.
fn runs() -> Vec<(String, Vec<&'static str>)> {
    let at = |p: &str, n: u32| format!("{p}@{n}");
    vec![
        (at(window::MID_PAGES, 2), vec!["--page-rows", "7"]),
        (at(window::AFTER_FINAL_SEALED, 1), vec!["--page-rows", "25"]),
        (at(window::AFTER_PAGE_APPLIED, 2), vec!["--page-rows", "4"]),
        (
            at(faults::FENCE_AFTER_F_WRITTEN, 1),
            vec!["--page-rows", "9"],
        ),
        (at(faults::REPLAY_MID, 2), vec!["--replay-batch-rows", "17"]),
        (
            at(faults::REPLAY_AFTER_BATCH_T, 1),
            vec!["--replay-batch-rows", "3", "--apply-streams", "2"],
        ),
        (at(faults::ACTIVATE_AFTER_CREDENTIAL_BEFORE_J, 1), vec![]),
        (
            at(faults::STREAM_AFTER_BATCH, 2),
            vec!["--replay-batch-rows", "2"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn types_of_item_2_serve_killed_in_windows_replay_and_streaming_converge() {
    let t0 = Instant::now();
    let c = Case::of_table("tyk", typed::DDL, &typed::fill(), 30, 10).await;
    let windows = c.plan().await.len();
    assert!(windows >= 3, "{windows} windows");
    let w = typed::writing(&c);
    for (fp, args) in runs() {
        let code = keyed::run_to_end(&c, &args, &fp, None);
        assert_eq!(
            code,
            Some(kernel::failpoint::EXIT_CODE),
            "serve did not stop at {fp}"
        );
        let head = c.head_opt().await;
        assert_eq!(head.and_then(|h| h.paused), None, "paused after {fp}");
    }
    // A SIGKILL at an arbitrary instant (STREAMING by now: a kill in the windows would
    // race the fault points above, which need windows left to stop in).
    keyed::sigkill_after(
        &c,
        &["--replay-batch-rows", "3"],
        Duration::from_millis(700),
    );
    let writes = w.stop().await;
    let code = keyed::run_to_end(&c, &["--replay-batch-rows", "1000"], "", None);
    assert_eq!(code, Some(0), "the last serve");
    assert_eq!(c.head().await.phase, ledger::record::Phase::Streaming);
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean(), "{d}");
    c.assert_exactly_once();
    assert!(d.rows > 50, "{d}");
    keyed::assert_audit_passes(&c);
    // The comparison is not blind to a generated column's inputs nor to a FLOAT's last bit.
    c.target.sql_in(
        &c.tdb,
        "UPDATE t SET f = 1.0000002 WHERE f > 1 AND f < 1.00000015 ORDER BY id LIMIT 1",
    );
    let d2 = keyed::diff(&c, &["id"]);
    assert_eq!((d2.missing, d2.extra, d2.differing), (0, 0, 1), "{d2}");
    eprintln!(
        "types: {windows} windows, {writes} writes, {} rows, 0/0/0, {:?}",
        d.rows,
        t0.elapsed()
    );
}
