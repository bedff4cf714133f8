//! Definite pauses and new attempts of the window protocol (DESIGN §4, §5, §9, §16, I6): a
//! DDL between install and B, an incompatible DDL inside a window (a pause) and a
//! compatible one (the window read again), a read connection KILLed mid-window.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::hooks::HookFuture;
use backfill_tests::bf::table::window::WindowHooks;
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, JobId, WindowId};
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Runs `sql` on the source when window `at` reaches the hook (first attempt only).
struct SqlAt {
    url: String,
    at: WindowId,
    sql: &'static str,
}

impl WindowHooks for SqlAt {
    fn after_low(&self, _: JobId, w: WindowId, a: Attempt) -> HookFuture<'_> {
        Box::pin(async move {
            if w == self.at && a == Attempt(1) {
                let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&self.url).unwrap())
                    .await
                    .unwrap();
                c.query_drop(self.sql).await.unwrap();
                c.disconnect().await.unwrap();
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ddl_between_install_and_b_pauses_definitely() {
    let _serial = in_process().await;
    let c = Case::new("wfb", 500, 200, 100).await;
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t MODIFY v VARCHAR(80) NULL");
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: schema_changed"), "{out}");
    let head = c.head().await;
    let p = head.paused.expect("J records the pause");
    assert_eq!(p.code, DefiniteCode::SchemaChanged);
    assert!(
        p.message
            .contains("between install and the start position (B)"),
        "{}",
        p.message
    );
    assert!(p.message.contains("`v`"), "names the column: {}", p.message);
    assert_eq!(head.phase, Phase::Installed);
    assert_eq!(c.target_count(), 0, "nothing was applied");
    // A restart keeps the pause (an operator must resume or re-install).
    assert!(c.serve(None).await.starts_with("paused: schema_changed"));
}

/// A DDL that is not compatible (a default no row event carries) inside a window: the
/// table pauses, naming it; the window is never sealed and nothing after it applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_incompatible_ddl_inside_a_window_pauses_definitely_and_never_seals() {
    let _serial = in_process().await;
    let c = Case::new("wfd", 3_000, 1_000, 300).await;
    let hooks = Arc::new(SqlAt {
        url: c.source.url_db(&c.sdb),
        at: WindowId(2),
        sql: "ALTER TABLE t ADD COLUMN extra TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP",
    });
    let out = c.serve(Some(hooks)).await;
    assert!(out.starts_with("paused: schema_changed"), "{out}");
    let head = c.head().await;
    let p = head.paused.expect("J records the pause");
    assert_eq!(p.code, DefiniteCode::SchemaChanged, "{}", p.message);
    assert!(
        p.message.contains("ALTER TABLE"),
        "names the DDL: {}",
        p.message
    );
    assert_eq!(head.phase, Phase::Windows);
    // Read-ahead: window 2 starts once window 0 is sealed, so window 0's HIGH precedes
    // the DDL; window 1 is read at the same time as window 2 and may see it too.
    assert!(
        (1..=2).contains(&head.completed),
        "windows before the DDL were applied: {}",
        head.completed
    );
    let seals: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM window_seals WHERE job_id = ? AND window_id = 2")
            .bind(c.job.0)
            .fetch_one(&c.pool)
            .await
            .unwrap();
    assert_eq!(seals, 0, "the window with the DDL was never sealed");
    // A window read ahead may have sealed before the DDL (its HIGH precedes it): it is
    // never applied past the paused window.
    assert_eq!(
        c.target_count(),
        1_000 * u64::from(head.completed),
        "only windows recorded in J are in T"
    );
    assert_eq!(c.audit_count(), c.target_count());
}

/// A compatible DDL inside a window (DESIGN §16): the window is read again in the new
/// schema version, the target takes the DDL before that window's first page, and every
/// window is applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compatible_ddl_inside_a_window_reopens_it_and_the_windows_finish() {
    let _serial = in_process().await;
    let c = Case::new("wfc", 3_000, 1_000, 300).await;
    let hooks = Arc::new(SqlAt {
        url: c.source.url_db(&c.sdb),
        at: WindowId(2),
        sql: "ALTER TABLE t ADD COLUMN extra INT NULL",
    });
    let out = c.serve(Some(hooks)).await;
    assert_eq!(out, "windows_done");
    every_window_with_the_new_column(&c).await;
    let attempts: i64 = sqlx::query_scalar(
        "SELECT CAST(MAX(attempt) AS SIGNED) FROM window_attempts WHERE job_id = ? \
         AND window_id = 2",
    )
    .bind(c.job.0)
    .fetch_one(&c.pool)
    .await
    .unwrap();
    assert_eq!(attempts, 2, "the crossed window was read again");
}

/// Starts `sql` on the source while window `at`'s read view is open (first attempt, after
/// its first RAW page) and returns once the server shows it waiting for the table's
/// metadata lock, which the read transaction holds: the DDL takes effect right after the
/// view closes, before HIGH.
struct DdlInView {
    url: String,
    at: WindowId,
    sql: &'static str,
    waited: std::sync::atomic::AtomicBool,
}

impl WindowHooks for DdlInView {
    fn mid_read(&self, _: JobId, w: WindowId, a: Attempt, _: u32) -> HookFuture<'_> {
        Box::pin(async move {
            if w != self.at || a != Attempt(1) {
                return;
            }
            let opts = mysql_async::Opts::from_url(&self.url).unwrap();
            let (o, sql) = (opts.clone(), self.sql);
            tokio::spawn(async move {
                let mut c = mysql_async::Conn::new(o).await.unwrap();
                c.query_drop(sql).await.unwrap();
                c.disconnect().await.unwrap();
            });
            let mut c = mysql_async::Conn::new(opts).await.unwrap();
            for _ in 0..200 {
                let n: Option<i64> = c
                    .query_first(
                        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE \
                         STATE = 'Waiting for table metadata lock' AND INFO LIKE 'ALTER TABLE%'",
                    )
                    .await
                    .unwrap();
                if n == Some(1) {
                    self.waited.store(true, Ordering::SeqCst);
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            c.disconnect().await.unwrap();
        })
    }
}

/// The DDL of [`DdlInView`]: it crosses the read view itself (it waits for it), and the
/// window is read again in the new version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_compatible_ddl_waiting_on_a_read_view_is_taken_after_it() {
    let _serial = in_process().await;
    let c = Case::new("wfv", 3_000, 1_000, 300).await;
    let hooks = Arc::new(DdlInView {
        url: c.source.url_db(&c.sdb),
        at: WindowId(1),
        sql: "ALTER TABLE t ADD COLUMN extra INT NULL",
        waited: std::sync::atomic::AtomicBool::new(false),
    });
    let out = c.serve(Some(hooks.clone())).await;
    assert_eq!(out, "windows_done");
    assert!(
        hooks.waited.load(Ordering::SeqCst),
        "the DDL waited on the open read view"
    );
    every_window_with_the_new_column(&c).await;
}

/// Every window applied, no pause, every row in the target, which took the DDL.
async fn every_window_with_the_new_column(c: &Case) {
    let head = c.head().await;
    let windows = c.plan().await.len() as u32;
    assert_eq!((head.completed, head.paused), (windows, None));
    assert_eq!(c.target_count(), 3_000);
    let cols = c.target.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = '{}' \
         AND TABLE_NAME = 't' AND COLUMN_NAME = 'extra'",
        c.tdb
    ));
    assert_eq!(cols.trim(), "1", "the target took the DDL");
}

/// KILLs the read connection of window 1 after its first RAW page: in its first attempt
/// only, or in every attempt (`always`). Counts the RAW materials registered for the
/// attempt it kills.
struct KillRead {
    url: String,
    pool: sqlx::MySqlPool,
    always: bool,
    kills: AtomicU32,
    raw_registered: AtomicU32,
}

impl KillRead {
    fn new(c: &Case, always: bool) -> Arc<KillRead> {
        Arc::new(KillRead {
            url: c.source.url(),
            pool: c.pool.clone(),
            always,
            kills: AtomicU32::new(0),
            raw_registered: AtomicU32::new(0),
        })
    }
}

impl WindowHooks for KillRead {
    fn mid_read(&self, job: JobId, w: WindowId, a: Attempt, id: u32) -> HookFuture<'_> {
        Box::pin(async move {
            if w == WindowId(1) && (a == Attempt(1) || self.always) {
                let n: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM ledger_material WHERE job_id = ? AND window_id = ? \
                     AND attempt = ? AND kind = 'RAWP'",
                )
                .bind(job.0)
                .bind(w.0)
                .bind(a.0)
                .fetch_one(&self.pool)
                .await
                .unwrap();
                self.raw_registered.fetch_add(n as u32, Ordering::SeqCst);
                let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&self.url).unwrap())
                    .await
                    .unwrap();
                c.query_drop(format!("KILL CONNECTION {id}")).await.unwrap();
                c.disconnect().await.unwrap();
                self.kills.fetch_add(1, Ordering::SeqCst);
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_read_connection_starts_a_new_attempt() {
    let _serial = in_process().await;
    let c = Case::new("wfk", 3_000, 1_000, 100).await;
    let hooks = KillRead::new(&c, false);
    let out = c.serve(Some(hooks.clone())).await;
    assert_eq!(out, "windows_done");
    assert_eq!(hooks.kills.load(Ordering::SeqCst), 1);
    let chain = c.chain().await;
    assert_eq!(chain[0].1, 1);
    assert_eq!(chain[1].1, 2, "window 1 was sealed by a second attempt");
    c.assert_target_equals_source();
    assert_eq!(c.audit_count(), 3_000);
    c.assert_evidence_agrees().await;
    // The abandoned attempt's RAW pages were registered (garbage, accounted) and are
    // released once attempt 2 sealed the window: registry rows and files.
    assert!(hooks.raw_registered.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        c.materials_of(1, 1).await,
        0,
        "attempt 1's materials unregistered"
    );
    assert_eq!(c.garbage_bytes().await, 0);
    let reg = ledger::registry::Registry::new(c.pool.clone());
    let entries = reg.entries(c.job, c.generation).await.unwrap();
    assert_eq!(
        c.material_files(),
        entries.len(),
        "attempt 1's files removed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_window_failing_every_attempt_pauses_naming_it() {
    let _serial = in_process().await;
    let c = Case::new("wfa", 3_000, 1_000, 100).await;
    let hooks = KillRead::new(&c, true);
    let mut cfg = c.serve_cfg();
    cfg.run.max_attempts = 3;
    cfg.hooks = Some(hooks.clone());
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        backfill_tests::serving::serve(cfg, tokio_util::sync::CancellationToken::new()),
    )
    .await
    .expect("serve became idle")
    .unwrap();
    let out = out.get(&c.job).cloned().unwrap_or_default();
    assert!(out.starts_with("paused: retries_exhausted"), "{out}");
    assert_eq!(
        hooks.kills.load(Ordering::SeqCst),
        3,
        "three attempts, then the pause"
    );
    let head = c.head().await;
    let p = head.paused.expect("J records the pause");
    assert_eq!(p.code, DefiniteCode::RetriesExhausted);
    assert!(p.message.contains("w1"), "names the window: {}", p.message);
    assert!(p.message.contains("3 attempts in a row"), "{}", p.message);
    assert!(p.message.contains("last error"), "{}", p.message);
    assert!(head.completed <= 1, "nothing after window 1 was recorded");
    let errors: Vec<(u32, Option<String>)> = sqlx::query_as(
        "SELECT attempt, last_error FROM window_attempts WHERE job_id = ? AND window_id = 1 \
         ORDER BY attempt",
    )
    .bind(c.job.0)
    .fetch_all(&c.pool)
    .await
    .unwrap();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors.iter().all(|(_, e)| e.is_some()),
        "every failure kept: {errors:?}"
    );
    // Unsealed attempts' RAW pages stay registered (accounted) until a seal releases them.
    assert!(c.materials_of(1, 3).await >= 1);
    // A restart keeps the pause (the operator fixes the cause and resumes).
    assert!(c.serve(None).await.starts_with("paused: retries_exhausted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prepared_xa_transaction_at_b_pauses() {
    let _serial = in_process().await;
    // XA RECOVER is server-wide: a private source keeps the other tests out of it.
    let src: &'static harness::Server = Box::leak(Box::new(harness::Server::start_private(
        harness::ServerOpts::source(),
    )));
    let c = Case::on(src, "wfx", 300, 200, 100).await;
    c.source.sql_in(
        &c.sdb,
        "CREATE TABLE other (id INT PRIMARY KEY) ENGINE=InnoDB;
         XA START 'wfx'; INSERT INTO other VALUES (1); XA END 'wfx'; XA PREPARE 'wfx';",
    );
    let out = c.serve(None).await;
    c.source.sql("XA ROLLBACK 'wfx'");
    assert!(out.starts_with("paused: precondition"), "{out}");
    let p = c.head().await.paused.expect("J records the pause");
    assert!(p.message.contains("XA RECOVER"), "{}", p.message);
    assert_eq!(c.target_count(), 0);
}
