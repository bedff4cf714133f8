//! Cancellation through CANCELING (issue 7, DESIGN §8) against real MariaDB: a cancel
//! recorded with serve down (before B, while STREAMING) or while serve runs (mid-window)
//! ends in CANCELLED(K) in J, the job cancelled in the jobs store, the target untouched by
//! later source writes, and a re-add under a new generation with a new empty target.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::bf::table::hooks::HookFuture;
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::bf::table::window::WindowHooks;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use kernel::ids::{Attempt, Generation, JobId, WindowId};
use ledger::record::Phase;
use std::sync::Arc;
use std::time::Duration;

async fn serve_with(
    c: &Case,
    finish: Option<ReplayConfig>,
    hooks: Option<Arc<dyn WindowHooks>>,
) -> String {
    let mut cfg = c.serve_cfg();
    cfg.finish = finish;
    cfg.hooks = hooks;
    let out = serve::serve_until_idle(cfg, Duration::from_secs(300)).await;
    out.get(&c.job).cloned().unwrap_or_default()
}

fn job_state(c: &Case) -> String {
    c.target.sql_in(
        &c.state_db,
        &format!("SELECT state FROM jobs WHERE job_id = {}", c.job.0),
    )
}

/// CANCELLED(K) in J, CANCELLED in the jobs store, K after B when B exists.
async fn assert_cancelled(c: &Case) {
    let head = c.head().await;
    assert_eq!(head.phase, Phase::Cancelled, "J: {head:?}");
    assert!(head.k.is_some(), "J records K");
    assert!(head.paused.is_none());
    assert_eq!(job_state(c), "CANCELLED");
}

/// Writes to the source after K, runs serve again, and checks the target did not move.
async fn assert_target_frozen(c: &Case) {
    let before = checksum(c.target, &c.tdb, "t");
    c.source.sql_in(
        &c.sdb,
        "INSERT INTO t VALUES (900001, 1, 'after-k'); UPDATE t SET v = 'after-k' WHERE id = 1;",
    );
    let out = serve_with(c, Some(ReplayConfig::default()), None).await;
    assert_eq!(out, "", "a cancelled job is not run again");
    assert_eq!(
        checksum(c.target, &c.tdb, "t"),
        before,
        "target changed after K"
    );
}

/// Re-adding the table needs a new generation and a new empty target; the old target is
/// refused (still claimed).
async fn assert_readd(c: &Case) {
    let old = InstallRequest::new(
        c.state_url(),
        c.source.url(),
        TableName::new(&c.sdb, "t"),
        c.target.url(),
        TableName::new(&c.tdb, "t"),
    );
    assert!(install(&old).await.is_err(), "the old target stays claimed");
    let tdb2 = c.target.fresh_db("cancel_readd_t");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_before_b_with_serve_down_completes_on_next_serve() {
    let _serial = in_process().await;
    let c = Case::unstarted("cancel_pre_b", 300, 100, 50).await;
    let (g, already) = bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    assert_eq!((g, already), (c.generation, false));
    assert!(c.head_opt().await.is_none(), "nothing ran yet");
    let out = serve_with(&c, None, None).await;
    assert_eq!(out, "cancelled");
    assert_cancelled(&c).await;
    assert!(c.head().await.b.is_none(), "B was never written");
    assert_eq!(c.target_count(), 0, "the target is kept as it was: empty");
    // Cancelling again is reported, not an error; start is refused.
    let (_, already) = bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    assert!(already);
    assert!(bf::store::commands::start(&c.pool, c.job).await.is_err());
    assert_target_frozen(&c).await;
    assert_readd(&c).await;
}

/// Records the cancel command while window 1 is between LOW and HIGH, and holds the window
/// there until serve has signalled the task: a witness table (a later job id, done with
/// its windows, so it has ended in this serve) is cancelled right after; serve handles the
/// recorded cancels in job order and logs that it runs the witness again to complete its
/// cancel, so once that line is logged the running task has been told to stop.
struct CancelMidWindow {
    pool: sqlx::MySqlPool,
    witness: (JobId, Generation),
}

impl WindowHooks for CancelMidWindow {
    fn after_low(&self, job: JobId, window: WindowId, _a: Attempt) -> HookFuture<'_> {
        Box::pin(async move {
            if window == WindowId(1) {
                let (w, wg) = self.witness;
                let j = ledger::journal::Journal::new(self.pool.clone());
                let plan = bf::store::jobs::load_plan(&self.pool, w)
                    .await
                    .unwrap()
                    .ranges
                    .len();
                let until = std::time::Instant::now() + WAIT_LIMIT;
                while j
                    .head(w, wg)
                    .await
                    .unwrap()
                    .is_none_or(|h| (h.record.completed as usize) < plan)
                {
                    assert!(
                        std::time::Instant::now() < until,
                        "the witness never finished its windows"
                    );
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                assert!(w > job, "the witness is handled after the job");
                bf::store::commands::cancel(&self.pool, job).await.unwrap();
                bf::store::commands::cancel(&self.pool, w).await.unwrap();
                let line = format!(" job={w} ");
                wait_for("serve handling the recorded cancels", || {
                    logs::count(|e| {
                        e.contains(&line) && e.contains("cancel recorded for a job that ended here")
                    }) > 0
                })
                .await;
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_mid_window_with_serve_running_finishes_the_window_taken_then_k() {
    let _serial = in_process().await;
    let c = Case::new("cancel_mid", 1000, 200, 50).await;
    let witness = c.start_second_table(100).await;
    let hooks: Arc<dyn WindowHooks> = Arc::new(CancelMidWindow {
        pool: c.pool.clone(),
        witness,
    });
    let out = serve_with(&c, None, Some(hooks)).await;
    assert_eq!(out, "cancelled");
    assert_cancelled(&c).await;
    let head = c.head().await;
    assert!(head.b.is_some());
    assert!(
        head.completed <= 2,
        "no window after the one taken: {head:?}"
    );
    let rows = c.target_count();
    assert!(rows <= 400, "partial target kept as is: {rows} rows");
    assert_target_frozen(&c).await;
    assert_readd(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_while_streaming_drains_capture_up_to_k_then_freezes() {
    let _serial = in_process().await;
    let c = Case::new("cancel_stream", 600, 200, 100).await;
    let out = serve_with(&c, Some(ReplayConfig::default()), None).await;
    assert!(out.contains("Streaming"), "reached STREAMING: {out}");
    assert_eq!(c.head().await.phase, Phase::Streaming);
    // Changes made while serve is down, before the cancel: they precede K and are drained.
    c.source.sql_in(
        &c.sdb,
        "INSERT INTO t VALUES (800001, 7, 'before-k'); DELETE FROM t WHERE id = 2; \
         UPDATE t SET k = k + 100 WHERE id BETWEEN 10 AND 20;",
    );
    bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    let out = serve_with(&c, Some(ReplayConfig::default()), None).await;
    assert_eq!(out, "cancelled");
    assert_cancelled(&c).await;
    assert_eq!(
        checksum(c.target, &c.tdb, "t"),
        checksum(c.source, &c.sdb, "t"),
        "the activated target holds the source as of K"
    );
    assert_target_frozen(&c).await;
    assert_ne!(
        checksum(c.target, &c.tdb, "t"),
        checksum(c.source, &c.sdb, "t")
    );
    assert_readd(&c).await;
}
