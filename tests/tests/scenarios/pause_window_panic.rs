//! A panic inside a window sub-task (the read-ahead task of one window) against real
//! MariaDB: the table pauses after that ONE attempt (a bug is not retried up to the
//! attempt cap), the reason names the window and the panic with its URL redacted, the
//! read permit the task held stays a hold (release unknown) as the serve-level panic path
//! leaves permits; after `resume` the table completes, every row exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::seams::read_panic;
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::ids::{JobId, WindowId};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panicking_window_task_pauses_the_table_after_one_attempt() {
    let _serial = in_process().await;
    let c = Case::new("wpanic", 300, 100, 50).await;
    // hits() counts over the whole process: earlier tests of this binary count too.
    let hits = read_panic::hits();
    read_panic::arm(c.job, WindowId(1));
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: internal"), "{out}");
    assert!(
        out.contains("the w1 read-ahead task panicked"),
        "names the window: {out}"
    );
    assert!(out.contains("injected panic"), "names the panic: {out}");
    assert_eq!(read_panic::hits() - hits, 1, "the panic is not retried");
    let paused = c.head().await.paused.expect("J records the pause");
    assert!(paused.message.contains("w1 read-ahead"), "{paused:?}");
    assert!(paused.message.contains("seam:***@"), "redacted: {paused:?}");
    assert!(
        !paused.message.contains("hunter2"),
        "secret shown: {paused:?}"
    );
    let w1 = c.last_attempts().await.into_iter().find(|(w, _)| *w == 1);
    assert_eq!(w1, Some((1, 1)), "window_attempts shows one attempt of w1");

    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    let reads = snap.pool(admission::PoolKind::ReadWindow);
    assert!(
        reads
            .holds
            .iter()
            .any(|h| h.owner.contains("w1") && h.owner.contains("read")),
        "the panicked task's read permit is a hold: {reads:?}"
    );

    read_panic::arm(JobId(0), WindowId(0));
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    assert_eq!(c.serve(None).await, "windows_done");
    assert_eq!(c.target_count(), 300);
    assert_eq!(c.audit_count(), 300, "every row exactly once");
    c.assert_evidence_agrees().await;
}
