//! K waits for the job's unconfirmed releases (issue 7, DESIGN §8) against real MariaDB:
//! a page write hangs on a lock past its deadline and its KILL cannot be confirmed (test
//! seam: the server "keeps listing" the connection), so its write permit stays a hold and
//! the table pauses `release_unconfirmed`. A cancel recorded then is NOT completed by that
//! process: K is not written while an operation of the job may still commit after it.
//! Once the operator cleared the statement and restarted serve (a new process, no holds),
//! the cancel completes: CANCELLED(K), K written once, the target untouched after K.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use admission::PoolKind;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use kernel::error::DefiniteCode;
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn k_markers(c: &Case) -> String {
    c.target.sql_in(
        &c.state_db,
        &format!(
            "SELECT COUNT(*) FROM capture_marker WHERE job_id = {} AND kind = 'K'",
            c.job.0
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn k_is_not_written_while_a_write_of_the_job_may_still_run() {
    let _serial = in_process().await;
    let c = Case::new("cancel_held", 200, 100, 50).await;
    let mut locker =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&c.target.url_db(&c.tdb)).unwrap())
            .await
            .unwrap();
    locker.query_drop("LOCK TABLES t WRITE").await.unwrap();
    bf::seams::kills::fail_confirmations(1);

    let mut cfg = c.serve_cfg();
    cfg.exit_when_idle = false;
    cfg.deadlines.target_write = Duration::from_secs(2);
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg.clone(), stop.clone()));
    wait_for_async("the table paused", async || {
        c.head_opt().await.is_some_and(|h| h.paused.is_some())
    })
    .await;
    let paused = c.head().await.paused.unwrap();
    assert_eq!(paused.code, DefiniteCode::ReleaseUnconfirmed, "{paused:?}");
    let snap = backfill_tests::serving::admission_snapshot().unwrap();
    let holds = &snap.pool(PoolKind::TargetWrite).holds;
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert!(holds[0].owner.starts_with(&format!("job {} ", c.job)));

    bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    wait_for_async("CANCELING in J", async || {
        c.head_opt()
            .await
            .is_some_and(|h| h.phase == Phase::Canceling)
    })
    .await;
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    let o = out.get(&c.job).cloned().unwrap_or_default();
    assert!(o.contains("the cancel point (K) is not written"), "{o}");
    assert!(
        o.contains("release unknown") || o.contains("may still run"),
        "{o}"
    );
    assert_eq!(k_markers(&c), "0", "no K while the write may still run");
    assert_eq!(c.head().await.phase, Phase::Canceling);

    // The operator clears the statement (here: releases the lock) and restarts serve.
    locker.query_drop("UNLOCK TABLES").await.unwrap();
    locker.disconnect().await.unwrap();
    let at_restart = c.target_count();
    let mut cfg = c.serve_cfg();
    cfg.deadlines.target_write = Duration::from_secs(2);
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        serve::serve(cfg, CancellationToken::new()),
    )
    .await
    .expect("serve did not become idle")
    .unwrap();
    assert_eq!(out.get(&c.job).map(String::as_str), Some("cancelled"));
    let head = c.head().await;
    assert_eq!(head.phase, Phase::Cancelled);
    assert!(head.k.is_some());
    assert_eq!(k_markers(&c), "1", "K written once");
    assert_eq!(c.target_count(), at_restart, "the partial target is kept");
    c.source.sql_in(&c.sdb, "UPDATE t SET v = 'after-k'");
    let out = c.serve(None).await;
    assert_eq!(out, "", "a cancelled job is not run again");
    assert_eq!(c.target_count(), at_restart);
}
