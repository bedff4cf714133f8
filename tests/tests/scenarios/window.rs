//! The window protocol end to end against real MariaDB servers (DESIGN §5).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;

/// Quiet table: every window sealed, applied once, evidence agrees, target = source.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quiet_table_is_copied_window_by_window() {
    let _serial = in_process().await;
    let c = Case::new("wq", 2_500, 1_000, 300).await;
    let out = c.serve(None).await;
    assert_eq!(out, "windows_done");
    let head = c.head().await;
    assert_eq!(head.completed as usize, c.plan().await.len());
    assert_eq!(c.target_count(), 2_500);
    assert_eq!(c.audit_count(), 2_500);
    c.assert_target_equals_source();
    c.assert_evidence_agrees().await;
    // Progress for status: rows read under read views, sealed and applied, per window.
    let p = bf::table::window::progress::read(&c.pool, c.job, c.generation)
        .await
        .unwrap();
    assert_eq!(p.len(), c.plan().await.len());
    assert!(p.iter().all(|w| w.step == "done"), "{p:?}");
    assert_eq!(p.iter().map(|w| w.rows_read).sum::<u64>(), 2_500);
    assert_eq!(p.iter().map(|w| w.rows_applied).sum::<u64>(), 2_500);
    // A second serve finds every window done and changes nothing.
    assert_eq!(c.serve(None).await, "windows_done");
    assert_eq!(c.audit_count(), 2_500);
}

/// `start` is a persisted command: a running serve picks it up by polling, and a start of
/// an unknown job is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_running_serve_picks_up_a_later_start() {
    let _serial = in_process().await;
    let c = Case::unstarted("wst", 1_200, 500, 200).await;
    // A witness: a second table, started. Once serve has run it through its windows, serve
    // has polled the started jobs (more than once) while `t` was installed but not started.
    let (witness, witness_g) = c.start_second_table(300).await;
    let mut cfg = c.serve_cfg();
    cfg.exit_when_idle = false;
    let cancel = tokio_util::sync::CancellationToken::new();
    let serve = tokio::spawn(backfill_tests::serving::serve(cfg, cancel.clone()));
    let j = c.journal();
    let plan = bf::store::jobs::load_plan(&c.pool, witness)
        .await
        .unwrap()
        .ranges
        .len() as u32;
    wait_for_async(
        "the started witness table through its windows",
        async || {
            j.head(witness, witness_g)
                .await
                .unwrap()
                .is_some_and(|h| h.record.completed >= plan)
        },
    )
    .await;
    assert_eq!(c.head_opt().await, None, "nothing runs before start");
    bf::store::commands::start(&c.pool, c.job).await.unwrap();
    let n = c.plan().await.len() as u32;
    let t0 = std::time::Instant::now();
    while c.head_opt().await.is_none_or(|h| h.completed < n) {
        assert!(
            t0.elapsed().as_secs() < 60,
            "serve did not run the started job"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    cancel.cancel();
    serve.await.unwrap().unwrap();
    c.assert_target_equals_source();
    let e = bf::store::commands::start(&c.pool, kernel::ids::JobId(999_999))
        .await
        .unwrap_err();
    assert_eq!(
        e.as_definite().map(|d| d.code),
        Some(kernel::error::DefiniteCode::Usage)
    );
}
