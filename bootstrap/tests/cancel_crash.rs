//! Cancelling a job whose process is down (issue 7, DESIGN §8) against real MariaDB: serve
//! is killed at a protocol step (a fault point exits it hard), the operator records cancel
//! with no process running, and the next serve completes it: CANCELLED(K), the partial
//! target kept as it was at the crash and untouched after K, the table re-addable. The
//! cancel itself is killed after CANCELING and converges on restart (K written once). A
//! table whose T holds the activation credential while J is not yet STREAMING is drained
//! up to K (T decides, not J).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod window_support;
use bootstrap::replay::ReplayConfig;
use bootstrap::window::fp;
use ledger::record::Phase;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use window_support::*;

fn checksum(server: &harness::Server, db: &str) -> String {
    let out = server.sql_in(db, "CHECKSUM TABLE t");
    out.split('\t').nth(1).unwrap_or("").trim().to_string()
}

/// Runs `backfill serve` until it exits; returns its exit code.
fn serve_bin(c: &Case, windows_only: bool, failpoints: &str) -> Option<i32> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_backfill"));
    cmd.args(["serve", "--exit-when-idle", "--owner", "cancel-crash"])
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .env(kernel::failpoint::ENV, failpoints)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    if windows_only {
        cmd.arg("--windows-only");
    }
    let mut child = cmd.spawn().expect("spawn backfill serve");
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        assert!(t0.elapsed() < Duration::from_secs(180), "serve stalled");
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn serve_in_process(c: &Case) -> String {
    let mut cfg = c.serve_cfg();
    cfg.owner = "cancel-crash".into();
    cfg.finish = Some(ReplayConfig::default());
    let out = tokio::time::timeout(
        Duration::from_secs(180),
        bootstrap::serve::serve(cfg, CancellationToken::new()),
    )
    .await
    .expect("serve did not become idle")
    .unwrap_or_else(|e| panic!("serve: {e}"));
    out.get(&c.job).cloned().unwrap_or_default()
}

async fn crash_then_cancel(prefix: &str, windows_only: bool, failpoint: &str, activated: bool) {
    let c = Case::new(prefix, 600, 200, 100).await;
    // Changes during the copy give replay something to do.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id <= 300");
    let code = serve_bin(&c, windows_only, failpoint);
    assert_eq!(
        code,
        Some(kernel::failpoint::EXIT_CODE),
        "{failpoint} was hit"
    );
    if activated {
        // T holds the credential, J does not say STREAMING yet: T decides, so this change
        // (before K) must be drained into the published target.
        c.source.sql_in(&c.sdb, "DELETE FROM t WHERE id = 3");
    }
    let at_crash = checksum(c.target, &c.tdb);
    bootstrap::commands::cancel(&c.pool, c.job).await.unwrap();
    // The cancel itself is killed once right after CANCELING, then completes.
    let code = serve_bin(&c, windows_only, "cancel.after_canceling");
    assert_eq!(code, Some(kernel::failpoint::EXIT_CODE));
    assert_eq!(c.head().await.phase, Phase::Canceling);
    let out = serve_in_process(&c).await;
    assert_eq!(out, "cancelled", "{failpoint}");
    let head = c.head().await;
    assert_eq!(head.phase, Phase::Cancelled);
    assert!(head.k.is_some());
    let ks = c.target.sql_in(
        &c.state_db,
        &format!(
            "SELECT COUNT(*) FROM capture_marker WHERE job_id = {} AND kind = 'K'",
            c.job.0
        ),
    );
    assert_eq!(ks, "1", "K written once across the restart");
    let at_k = checksum(c.target, &c.tdb);
    if activated {
        assert_eq!(at_k, checksum(c.source, &c.sdb), "drained up to K");
    } else {
        assert_eq!(at_k, at_crash, "not activated: the partial target is kept");
    }
    c.source.sql_in(&c.sdb, "UPDATE t SET v = 'after-k'");
    assert_eq!(serve_in_process(&c).await, "");
    assert_eq!(checksum(c.target, &c.tdb), at_k, "untouched after K");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_after_final_sealed_before_t_with_process_down() {
    crash_then_cancel("cancel_fin", true, fp::AFTER_FINAL_SEALED, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_after_t_credential_before_j_streaming_drains_with_process_down() {
    crash_then_cancel(
        "cancel_act",
        false,
        "activate.after_credential_before_j",
        true,
    )
    .await;
}
