//! Cancelling a PAUSED table while serve runs (issue 7, DESIGN §8) against real MariaDB:
//! the job's task ended paused in this process; the cancel recorded afterwards is carried
//! out by the same running serve (no restart needed): CANCELLED(K), the partial target
//! kept, no permit left in use or held.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::seams::task_panic;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use ledger::record::Phase;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_table_paused_in_a_running_serve_is_cancelled_by_that_serve() {
    let _serial = in_process().await;
    let c = Case::new("cancel_paused", 300, 100, 50).await;
    // hits() counts over the whole process: earlier tests of this binary count too.
    let hits = task_panic::hits();
    task_panic::arm(c.job);
    let mut cfg = c.serve_cfg();
    cfg.exit_when_idle = false;
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, stop.clone()));
    wait_for_async("the table paused", async || {
        c.head_opt().await.is_some_and(|h| h.paused.is_some())
    })
    .await;
    let at_pause = c.target_count();
    bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    wait_for_async("CANCELLED", async || {
        c.head_opt()
            .await
            .is_some_and(|h| h.phase == Phase::Cancelled)
    })
    .await;
    let head = c.head().await;
    assert!(head.k.is_some(), "J records K");
    assert!(head.paused.is_none(), "the pause is superseded: {head:?}");
    assert_eq!(c.target_count(), at_pause, "the partial target is kept");
    assert_eq!(task_panic::hits() - hits, 1);
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.get(&c.job).map(String::as_str), Some("cancelled"));
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    for kind in admission::PoolKind::ALL {
        let p = snap.pool(kind);
        assert_eq!(p.available, p.capacity, "{kind}: {p:?}");
        assert!(p.in_use.is_empty() && p.holds.is_empty());
    }
}
