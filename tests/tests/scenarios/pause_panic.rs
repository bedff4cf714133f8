//! serve supervision (issue 7, DESIGN §8) against real MariaDB: a panic in one table's
//! task pauses that table only, with a reason naming the panic, and the task is not
//! restarted in a loop; the other table of the same source keeps going to the end. The
//! panicked task's execution session is confirmed released (the task ended); after
//! `resume` the table completes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::install;
use backfill_tests::bf::seams::task_panic;
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::ids::JobId;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panicking_task_pauses_its_table_only_and_resume_completes_it() {
    let _serial = in_process().await;
    let c = Case::new("panic", 300, 100, 50).await;
    let mut req = c.second_table(200);
    req.window_rows = 50;
    req.page_rows = 25;
    let other = install(&req).await.unwrap().job_id;
    bf::store::commands::start(&c.pool, other).await.unwrap();

    // hits() counts over the whole process: earlier tests of this binary count too.
    let hits = task_panic::hits();
    bf::seams::task_panic::arm(c.job);
    let out = serve_until_idle(c.serve_cfg(), Duration::from_secs(300)).await;
    let mine = out.get(&c.job).cloned().unwrap_or_default();
    assert!(mine.starts_with("paused: internal"), "{mine}");
    assert!(mine.contains("panicked"), "{mine}");
    assert!(mine.contains("injected panic"), "names the panic: {mine}");
    assert_eq!(task_panic::hits() - hits, 1, "not restarted in a loop");
    let paused = c.head().await.paused.expect("J records the pause");
    assert!(paused.message.contains("injected panic"), "{paused:?}");
    assert_eq!(
        out.get(&other).map(String::as_str),
        Some("windows_done"),
        "the other table went on"
    );
    let n: String = c.target.sql_in(&c.tdb, "SELECT COUNT(*) FROM t2");
    assert_eq!(n, "200");
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    let sessions = snap.pool(admission::PoolKind::Session);
    assert!(sessions.holds.is_empty(), "session confirmed: {sessions:?}");
    assert_eq!(sessions.available, sessions.capacity, "{sessions:?}");

    // The operator resumes; without the fault the table completes.
    task_panic::arm(JobId(0));
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    let out = serve_until_idle(c.serve_cfg(), Duration::from_secs(300)).await;
    assert_eq!(
        out.get(&c.job).map(String::as_str),
        Some("windows_done"),
        "{out:?}"
    );
    assert_eq!(c.target_count(), 300);
    assert_eq!(c.audit_count(), 300, "every row exactly once");
}
