//! Bounded recovery of uncertain target commits (issue 7, DESIGN §8) against real
//! MariaDB: four COMMIT answers lost in one execution of the bootstrap (the test seam of
//! `bf::table::target_write`, compiled in with fault points: the commit lands, its answer is
//! dropped). Three are resolved from T automatically, across windows (the persisted budget
//! does not reset per window); the fourth pauses the table with `release_unconfirmed`.
//! `resume` starts a new execution and the table completes with every row applied once.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::error::DefiniteCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_uncertain_commits_recover_the_fourth_pauses_and_resume_continues() {
    let _serial = in_process().await;
    let c = Case::new("pause_unc", 600, 100, 50).await;
    bf::seams::lost_commits::inject_lost_commit_answers(4);
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: release_unconfirmed"), "{out}");
    let head = c.head().await;
    let p = head.paused.clone().expect("J records the pause");
    assert_eq!(p.code, DefiniteCode::ReleaseUnconfirmed);
    assert!(p.message.contains("backfill resume"), "{}", p.message);
    assert!(
        head.completed >= 1,
        "windows completed across the recoveries: {head:?}"
    );
    let used = bf::table::target_write::used(&c.pool, c.job, c.generation)
        .await
        .unwrap();
    assert_eq!(used, 3, "three recovered, persisted");
    // A restart does not refund the budget: still paused.
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: release_unconfirmed"), "{out}");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    let out = c.serve(None).await;
    assert_eq!(out, "windows_done");
    assert_eq!(
        bf::table::target_write::used(&c.pool, c.job, c.generation)
            .await
            .unwrap(),
        0
    );
    c.assert_target_equals_source();
    assert_eq!(c.audit_count(), 600, "every row inserted exactly once");
    assert_target_is_finals(&c).await;
}
