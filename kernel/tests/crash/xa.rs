//! XA transactions and kill -9 (DESIGN §3.8): a prepared group held in L survives the
//! capturing process being killed between the prepare and the commit, and restarts that
//! die at the fault points of the release converge to an uninterrupted capture.
use crate::support::probe::{end, Probe};
use crate::support::xa::{assert_xa_semantics, finish_workload, logged, prepare_big, T};
use crate::support::*;
use kernel::control::IntentKind;
use kernel::log;
use std::time::Duration;

const PROBE: Probe = Probe {
    max_batch: 5,
    tables: &[("t", 1)],
    pipe_stderr: false,
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
    // while its chunks are stored.
    let points = [
        "capture.before_release@1",
        "capture.before_commit@1",
        "capture.after_read_before_store@2",
        "capture.after_store@1",
        "capture.before_commit@2",
    ];
    let mut exits = 0;
    for fp in points {
        if log::holds(&e.pool, "crash").await.unwrap().is_empty() {
            break;
        }
        if let Some(code) = end(
            PROBE.spawn(&e, "crash", Some(fp.into())),
            Duration::from_secs(30),
        ) {
            assert_eq!(code, kernel::failpoint::EXIT_CODE, "probe failed");
            exits += 1;
        }
        log::verify_chain(&e.pool, "crash").await.unwrap();
    }
    PROBE.catch_up(&e, "crash", f.nonce).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    assert!(exits > 0, "no fault point fired");
    clean_capture(&e, &e.pool, "clean", &[(1, "t")], f.nonce, deadline).await;
    let crash = all_records(&e.pool, "crash").await;
    let clean = all_records(&e.pool, "clean").await;
    log::verify_chain(&e.pool, "crash").await.unwrap();
    assert_eq!(chunk_identities(&crash), chunk_identities(&clean));
    assert_xa_semantics(&e, &crash, "k_");
    assert!(log::holds(&e.pool, "crash").await.unwrap().is_empty());
}
