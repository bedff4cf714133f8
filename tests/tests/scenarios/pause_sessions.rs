//! Admission of execution sessions in serve (issue 7, DESIGN §8) against real MariaDB:
//! every running table holds one session; beyond the limit a job is refused at once with
//! a message saying how to raise the limit (never an endless wait); with the limit raised
//! the refused job runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::install;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn serve_all(c: &Case, sessions: u32) -> serve::Outcomes {
    let mut cfg = c.serve_cfg();
    cfg.limits.sessions = sessions;
    serve_until_idle(cfg, Duration::from_secs(300)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_beyond_the_session_limit_is_refused_with_how_to_raise_it() {
    let _serial = in_process().await;
    let c = Case::new("sess", 200, 100, 50).await;
    // A second table of the same source in the same state store.
    let req = c.second_table(100);
    let second = install(&req).await.unwrap().job_id;
    bf::store::commands::start(&c.pool, second).await.unwrap();
    let out = serve_all(&c, 1).await;
    assert_eq!(out.get(&c.job).map(String::as_str), Some("windows_done"));
    let refused = out.get(&second).cloned().unwrap_or_default();
    assert!(
        refused.starts_with("refused: capacity_exhausted"),
        "{refused}"
    );
    assert!(refused.contains("--max-sessions"), "{refused}");
    assert!(refused.contains("BACKFILL_MAX_SESSIONS"), "{refused}");
    let out = serve_all(&c, 2).await;
    assert_eq!(out.get(&second).map(String::as_str), Some("windows_done"));
    let n: String = c.target.sql_in(&c.tdb, "SELECT COUNT(*) FROM t2");
    assert_eq!(n, "100");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_whose_lease_another_owner_holds_is_taken_over_once_released() {
    let _serial = in_process().await;
    let c = Case::new("sess_lease", 200, 100, 50).await;
    // Another owner (a second serve, a pinned verify) holds the job's lease.
    let other = ledger::lease::acquire(&c.pool, c.job, "someone-else", Duration::from_secs(300))
        .await
        .unwrap();
    let task = tokio::spawn(serve::serve(c.serve_cfg(), CancellationToken::new()));
    // serve keeps retrying the start (fenced), it does not give the job up: it says so
    // each time it tries.
    let job = format!(" job={} ", c.job);
    wait_for("serve retrying the fenced start twice", || {
        logs::count(|e| e.contains(&job) && e.contains("retry=job_start")) >= 2
    })
    .await;
    assert!(!task.is_finished(), "serve gave up a fenced job");
    assert!(
        c.head_opt().await.is_none(),
        "nothing ran under another owner's lease"
    );
    ledger::lease::release(&c.pool, &other).await.unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), task)
        .await
        .expect("serve did not become idle")
        .unwrap()
        .unwrap_or_else(|e| panic!("serve: {e}"));
    assert_eq!(out.get(&c.job).map(String::as_str), Some("windows_done"));
    assert_eq!(c.target_count(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_refused_at_the_session_limit_runs_once_a_session_is_free() {
    let _serial = in_process().await;
    let c = Case::new("sess_free", 200, 100, 50).await;
    let done = install(&c.second_table(100)).await.unwrap();
    let (second, g) = (done.job_id, done.generation);
    bf::store::commands::start(&c.pool, second).await.unwrap();
    // One session, a serve that keeps running: the first job takes the session, the
    // second is refused; once the first is done with its windows (its task ends and
    // gives the session back) the same serve runs the second, without a restart.
    let mut cfg = c.serve_cfg();
    cfg.limits.sessions = 1;
    cfg.exit_when_idle = false;
    let cancel = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, cancel.clone()));
    let windows = bf::store::jobs::load_plan(&c.pool, second)
        .await
        .unwrap()
        .ranges
        .len();
    let j = c.journal();
    wait_for_async("the second job's windows applied", async || {
        let h = j.head(second, g).await.unwrap().map(|h| h.record);
        h.is_some_and(|h| h.completed as usize == windows)
    })
    .await;
    let refused = format!(" job={second} ");
    assert!(
        logs::count(|e| e.contains(&refused) && e.contains("once one of its sessions is free"))
            == 1,
        "the second job was refused once at the limit first"
    );
    cancel.cancel();
    let out = task.await.unwrap().unwrap_or_else(|e| panic!("serve: {e}"));
    assert_eq!(out.get(&c.job).map(String::as_str), Some("windows_done"));
    let n: String = c.target.sql_in(&c.tdb, "SELECT COUNT(*) FROM t2");
    assert_eq!(n, "100");
}
