//! XA transactions and kill -9 (DESIGN §3.8): a prepared group held in L survives the
//! capturing process being killed between the prepare and the commit, and restarts that
//! die at the fault points of the release converge to an uninterrupted capture.
use crate::support::probe::{end, end_at, Probe};
use crate::support::xa::{assert_xa_semantics, finish_workload, logged, prepare_big, T};
use crate::support::*;
use kernel::control::IntentKind;
use kernel::log;
use std::time::Duration;

const PROBE: Probe = Probe {
    max_batch: 5,
    tables: &[("t", 1)],
    pipe_stderr: true,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_prepare_and_commit_resumes_with_the_hold() {
    let e = env("cap_xa_kill").await;
    e.src.sql_in(&e.db, T);
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    e.init_stream_named(&e.pool, "crash", 100).await;
    e.init_stream_named(&e.pool, "clean", 100).await;
    e.intent(1, IntentKind::B).await;
    prepare_big(&e, "k_");
    // The hold becomes durable with D past the XA PREPARE; then the process is killed.
    let child = PROBE.spawn(&e, "crash", None);
    let secs = Duration::from_secs(60);
    wait_for(
        "no hold registered",
        secs,
        Duration::from_millis(20),
        || async {
            let holds = log::holds(&e.pool, "crash").await.unwrap();
            (!holds.is_empty()).then_some(())
        },
    )
    .await;
    assert_eq!(end(child, Duration::ZERO), None, "SIGKILLed");
    let hold = log::holds(&e.pool, "crash").await.unwrap();
    assert_eq!(hold.len(), 1);
    assert_eq!(hold[0].xid, logged("k_big"));
    assert_eq!(hold[0].last_seq.0 - hold[0].first_seq.0, 2, "3 held chunks");
    let d = log::load_position(&e.pool, "crash").await.unwrap().unwrap();
    assert!(
        d.restart_seq >= hold[0].last_seq,
        "D is past the XA PREPARE"
    );
    finish_workload(&e, "k_");
    let f = e.intent(1, IntentKind::F).await;
    // Restarts that die at the fault points on the way through the release, until the
    // release is stored: the first dies before the release reads the hold, the next ones
    // while its chunks are stored. `capture.after_store@1` is the last: the run it stops
    // has stored the release (the hold is gone), so a later point on the way through the
    // release does not exist (`capture.before_commit@2`, listed here before, never ran
    // with the hold still there: the loop stopped before it).
    let points = [
        "capture.before_release@1",
        "capture.before_commit@1",
        "capture.after_read_before_store@2",
        "capture.after_store@1",
    ];
    // Each restart must die at its own point, the hold still there before it: a point
    // never reached fails (it is not taken for a kill).
    for fp in points {
        let held = log::holds(&e.pool, "crash").await.unwrap();
        assert!(!held.is_empty(), "the hold was released before {fp} ran");
        let point = fp.split_once('@').map_or(fp, |(p, _)| p);
        let child = PROBE.spawn(&e, "crash", Some(fp.into()));
        let (code, hit, err) = end_at(child, Duration::from_secs(30), point);
        assert!(hit, "{fp} not reached within 30 s (exit {code:?}): {err}");
        log::verify_chain(&e.pool, "crash").await.unwrap();
    }
    // The store that `capture.after_store@1` stopped may have held other events read
    // with the release (the workload's last commits), not the release itself: later
    // stores are killed the same way, each with the hold still there, until one released
    // it (bounded; the release is the next event in the log, so a few suffice).
    for _ in 0..5 {
        if log::holds(&e.pool, "crash").await.unwrap().is_empty() {
            break;
        }
        let child = PROBE.spawn(&e, "crash", Some("capture.after_store@1".into()));
        let (code, hit, err) = end_at(child, Duration::from_secs(30), "capture.after_store");
        assert!(
            hit,
            "capture.after_store not reached within 30 s (exit {code:?}): {err}"
        );
        log::verify_chain(&e.pool, "crash").await.unwrap();
    }
    assert!(
        log::holds(&e.pool, "crash").await.unwrap().is_empty(),
        "a run stopped after the release's store released the hold"
    );
    PROBE.catch_up(&e, "crash", f.nonce).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    clean_capture(&e, &e.pool, "clean", &[(1, "t")], f.nonce, deadline).await;
    let crash = all_records(&e.pool, "crash").await;
    let clean = all_records(&e.pool, "clean").await;
    log::verify_chain(&e.pool, "crash").await.unwrap();
    assert_eq!(chunk_identities(&crash), chunk_identities(&clean));
    assert_xa_semantics(&e, &crash, "k_");
    assert!(log::holds(&e.pool, "crash").await.unwrap().is_empty());
}
