//! Cancelling a job whose process is down (issue 7, DESIGN §8) against real MariaDB: serve
//! is killed at a protocol step (a fault point exits it hard), the operator records cancel
//! with no process running, and the next serve completes it: CANCELLED(K), the partial
//! target kept as it was at the crash and untouched after K, the table re-addable. The
//! cancel itself is killed after CANCELING and converges on restart (K written once). A
//! table whose T holds the activation credential while J is not yet STREAMING is drained
//! up to K (T decides, not J). The exactly-once oracle over both binlogs holds up to K:
//! no change applied twice or skipped, every page once, nothing after K applied.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::bf::table::hooks::SQL_ENV;
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::bf::table::window::fp;
use backfill_tests::case::*;
use backfill_tests::*;
use ledger::record::Phase;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Runs `backfill serve` until it exits; returns its exit code. With `hook`, every
/// window's LOW is followed by that SQL file on the source (changes inside (B, F]).
fn serve_bin(c: &Case, windows_only: bool, failpoints: &str, hook: Option<&Path>) -> Option<i32> {
    let mut cmd = backfill_tests::command();
    if let Some(h) = hook {
        cmd.env(SQL_ENV, format!("after_low={}", h.display()));
    }
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

/// Runs serve in-process until idle; asserts no permit of it is left in use, held or
/// waited for; returns the job's outcome.
async fn serve_in_process(c: &Case) -> String {
    // One in-process serve at a time, so the admission snapshot read after it is its own.
    let _one = in_process().await;
    let out = c
        .serve_tuned(Duration::from_secs(180), |cfg| {
            cfg.owner = "cancel-crash".into();
            cfg.finish = Some(ReplayConfig::default());
        })
        .await;
    assert_no_permit_left();
    out
}

/// A SQL file that changes rows of the case's table (run after each window's LOW, so the
/// changes lie in (B, F] and replay has groups to apply).
fn hook_file(c: &Case) -> PathBuf {
    let p = c.data.path().join("after_low.sql");
    std::fs::write(
        &p,
        format!("UPDATE `{}`.t SET k = k + 1 WHERE id <= 300", c.sdb),
    )
    .unwrap();
    p
}

/// Re-adding the table needs a new generation and a new empty target.
async fn assert_readd(c: &Case) {
    let tdb2 = c.target.fresh_db("cancel_crash_readd_t");
    c.target.sql_in(&tdb2, DDL);
    let mut req = InstallRequest::new(
        c.state_url(),
        c.source.url(),
        TableName::new(&c.sdb, "t"),
        c.target.url(),
        TableName::new(&tdb2, "t"),
    );
    req.control_schema = c.ctl.clone();
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("re-add: {e}"));
    assert!(done.generation > c.generation, "a new generation");
}

async fn crash_then_cancel(prefix: &str, windows_only: bool, failpoint: &str, activated: bool) {
    crash_then_cancel_with(prefix, windows_only, failpoint, activated, false).await;
}

async fn crash_then_cancel_with(
    prefix: &str,
    windows_only: bool,
    failpoint: &str,
    activated: bool,
    changes_in_copy: bool,
) -> Case {
    let c = Case::new(prefix, 600, 200, 100).await;
    // Changes during the copy give replay something to do.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id <= 300");
    let hook = changes_in_copy.then(|| hook_file(&c));
    let code = serve_bin(&c, windows_only, failpoint, hook.as_deref());
    assert_eq!(
        code,
        Some(kernel::failpoint::EXIT_CODE),
        "{failpoint} was hit"
    );
    if changes_in_copy {
        assert_eq!(c.head().await.phase, Phase::Replaying, "killed in replay");
    }
    if activated {
        // T holds the credential, J does not say STREAMING yet: T decides, so this change
        // (before K) must be drained into the published target.
        c.source.sql_in(&c.sdb, "DELETE FROM t WHERE id = 3");
    }
    let at_crash = checksum(c.target, &c.tdb, "t");
    bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    // The cancel itself is killed once right after CANCELING, then completes.
    let code = serve_bin(&c, windows_only, "cancel.after_canceling", None);
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
    let at_k = checksum(c.target, &c.tdb, "t");
    if activated {
        assert_eq!(at_k, checksum(c.source, &c.sdb, "t"), "drained up to K");
    } else {
        assert_eq!(at_k, at_crash, "not activated: the partial target is kept");
    }
    let after_k: usize = c
        .source
        .sql_in(&c.sdb, "SELECT COUNT(*) FROM t")
        .parse()
        .unwrap();
    c.source.sql_in(&c.sdb, "UPDATE t SET v = 'after-k'");
    assert_eq!(serve_in_process(&c).await, "");
    assert_eq!(checksum(c.target, &c.tdb, "t"), at_k, "untouched after K");
    stopped_at_k(&c, after_k, activated);
    c
}

/// The exactly-once oracle of a table cancelled at K, followed by `after_k` source
/// changes (one per row): no change applied twice, none skipped before the last cursor,
/// nothing wrong, every page in T applied once; the changes after K never applied, and
/// when the cancel `drained` the table up to K, every change before them was.
fn stopped_at_k(c: &Case, after_k: usize, drained: bool) {
    let r = c.oracle();
    r.assert_exactly_once_until_stopped();
    let pages = c.target.sql_in(
        &c.tdb,
        &format!(
            "SELECT COUNT(*) FROM {} WHERE job_id = {}",
            ledger::target::PAGES,
            c.job.0
        ),
    );
    assert_eq!(
        r.pages.to_string(),
        pages,
        "every page credential in T: {r}"
    );
    assert!(r.unreached >= after_k, "the changes after K applied: {r}");
    if drained {
        assert_eq!(r.unreached, after_k, "drained up to K: {r}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_during_replay_of_b_to_f_with_process_down_keeps_the_partial_target() {
    // Killed right after the first replay batch of (B, F] committed in T: J says
    // REPLAYING, T holds no activation credential, so the partial target is kept at K.
    let c = crash_then_cancel_with("cancel_rep", false, "replay.after_batch_t", false, true).await;
    let t = |table: &str| {
        c.target.sql_in(
            &c.tdb,
            &format!("SELECT COUNT(*) FROM {table} WHERE job_id = {}", c.job.0),
        )
    };
    assert_eq!(t(ledger::target::CURSOR), "1", "replay had reached T");
    assert_eq!(t(ledger::target::ACTIVATION), "0", "never activated");
    assert_readd(&c).await;
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
