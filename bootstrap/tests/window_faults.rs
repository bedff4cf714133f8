//! Definite pauses and new attempts of the window protocol (DESIGN §4, §5, §9, I6): a DDL
//! between install and B, a DDL inside a window, a read connection KILLed mid-window.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod window_support;
use bootstrap::window::hooks::HookFuture;
use bootstrap::window::WindowHooks;
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, JobId, WindowId};
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use window_support::*;

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
    let c = Case::new("wfb", 500, 200, 100).await;
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t MODIFY v VARCHAR(80) NULL");
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: schema_changed"), "{out}");
    let head = c.head().await;
    let p = head.paused.expect("J records the pause");
    assert_eq!(p.code, DefiniteCode::SchemaChanged);
    assert!(p.message.contains("between install and B"), "{}", p.message);
    assert!(p.message.contains("`v`"), "names the column: {}", p.message);
    assert_eq!(head.phase, Phase::Installed);
    assert_eq!(c.target_count(), 0, "nothing was applied");
    // A restart keeps the pause (an operator must resume or re-install).
    assert!(c.serve(None).await.starts_with("paused: schema_changed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ddl_inside_a_window_pauses_definitely_and_never_seals() {
    let c = Case::new("wfd", 3_000, 1_000, 300).await;
    let hooks = Arc::new(SqlAt {
        url: c.source.url_db(&c.sdb),
        at: WindowId(1),
        sql: "ALTER TABLE t ADD COLUMN extra INT NULL",
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
    assert_eq!(head.completed, 1, "window 0 was applied before the DDL");
    let seals: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM window_seals WHERE job_id = ? AND window_id = 1")
            .bind(c.job.0)
            .fetch_one(&c.pool)
            .await
            .unwrap();
    assert_eq!(seals, 0, "the window with the DDL was never sealed");
    assert_eq!(c.audit_count(), c.target_count());
}

/// KILLs the read connection of window 1's first attempt after its first page.
struct KillRead {
    url: String,
    kills: AtomicU32,
}

impl WindowHooks for KillRead {
    fn mid_read(&self, _: JobId, w: WindowId, a: Attempt, id: u32) -> HookFuture<'_> {
        Box::pin(async move {
            if w == WindowId(1) && a == Attempt(1) {
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
    let c = Case::new("wfk", 3_000, 1_000, 100).await;
    let hooks = Arc::new(KillRead {
        url: c.source.url(),
        kills: AtomicU32::new(0),
    });
    let out = c.serve(Some(hooks.clone())).await;
    assert_eq!(out, "windows_done");
    assert_eq!(hooks.kills.load(Ordering::SeqCst), 1);
    let chain = c.chain().await;
    assert_eq!(chain[0].1, 1);
    assert_eq!(chain[1].1, 2, "window 1 was sealed by a second attempt");
    assert_eq!(c.target_rows().await, c.source_rows().await);
    assert_eq!(c.audit_count(), 3_000);
    c.assert_evidence_agrees().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prepared_xa_transaction_at_b_pauses() {
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
