//! Schema changes during the windows (issue 16 item 3, DESIGN §16) against real MariaDB,
//! with the real `backfill serve` as a child process.
//!
//! A hook on the source (`BACKFILL_WINDOW_HOOK_SQL`, after each window's LOW is durable)
//! runs one DDL of the list at every other window attempt: each DDL therefore lies
//! between an attempt's LOW and HIGH, inside the read view's fence. The list is issue 16's
//! compatible kinds: ADD COLUMN at the end, ADD COLUMN with a default in the middle, INT
//! to BIGINT, RENAME COLUMN, DROP COLUMN. A writer changes rows all along. serve is
//! stopped once right after the target ran a DDL during the windows (before T recorded
//! it), then runs to STREAMING.
//!
//! What must hold: every crossed window was read again (an attempt 2 exists), the table
//! reaches STREAMING without a pause with one schema version per DDL, the target's
//! definition is the source's and the independent comparison finds 0 missing, 0 extra, 0
//! differing; writes of the new shape while STREAMING go through; the audit passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::schema_change::{exited_at, fill, writer, DDL};
use backfill_tests::bf::table::faults;
use backfill_tests::bf::table::hooks::SQL_ENV;
use backfill_tests::case::Case;
use backfill_tests::keyed::{self, Serving, Writing};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The DDLs the hook runs, in order (the table of [`DDL`]).
const DDLS: [&str; 5] = [
    "ADD COLUMN e1 INT NULL",
    "ADD COLUMN m1 VARCHAR(8) NOT NULL DEFAULT 'd' AFTER v",
    "MODIFY qty BIGINT NOT NULL DEFAULT 0",
    "RENAME COLUMN note TO remark",
    "DROP COLUMN e1",
];

/// A compound statement: the hook's turn counter on the source, and at every even turn
/// the next DDL of [`DDLS`] (turn 2i runs DDL i).
fn hook_sql(db: &str) -> String {
    let mut arms = String::new();
    for (i, d) in DDLS.iter().enumerate() {
        let kw = if i == 0 { "IF" } else { "ELSEIF" };
        arms.push_str(&format!(
            "{kw} n = {} THEN ALTER TABLE `{db}`.`t` {d}; ",
            2 * i
        ));
    }
    format!(
        "BEGIN NOT ATOMIC DECLARE n INT DEFAULT 0; \
         SELECT k INTO n FROM `{db}`.`ddl_turn`; \
         UPDATE `{db}`.`ddl_turn` SET k = k + 1; \
         {arms}END IF; END"
    )
}

fn serve(c: &Case, hook: &str, failpoint: &str) -> Serving {
    let mut cmd = keyed::serve_command(
        c,
        &["--read-windows", "1", "--replay-batch-rows", "7"],
        failpoint,
    );
    cmd.env(SQL_ENV, format!("after_low={hook}"));
    Serving(cmd.spawn().expect("spawn backfill serve"))
}

/// Windows that were read more than once.
async fn reopened(c: &Case) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(DISTINCT window_id) FROM window_attempts WHERE job_id = ? \
         AND generation = ? AND attempt > 1",
    )
    .bind(c.job.0)
    .bind(c.generation.0)
    .fetch_one(&c.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatible_ddl_during_the_windows_reopens_the_crossed_window_and_streams_clean() {
    // 60 rows, windows of 10: six windows, five of them crossed by a DDL.
    let c = Case::of_table("ddl_windows", DDL, &fill(), 10, 5).await;
    c.source.sql_in(
        &c.sdb,
        "CREATE TABLE ddl_turn (k INT NOT NULL); INSERT INTO ddl_turn VALUES (0)",
    );
    let hook = c.data.path().join("ddl_hook.sql");
    std::fs::write(&hook, hook_sql(&c.sdb)).unwrap();
    let hook = hook.display().to_string();
    let url = c.source.url_db(&c.sdb);
    let hold = Arc::new(AtomicBool::new(false));
    let h = hold.clone();
    let w = Writing::spawn(|stop| writer(url, stop, h));
    // The second DDL that reaches the target during the windows: serve stops right after
    // the target ran it, before T recorded it.
    let fp = faults::SCHEMA_AFTER_TARGET_DDL;
    let mut s = serve(&c, &hook, &format!("{fp}@2"));
    exited_at(&mut s, fp);
    assert_eq!(c.head().await.phase, ledger::record::Phase::Windows);
    let mut s = serve(&c, &hook, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    hold.store(true, Ordering::SeqCst);
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    let turns = c.source.sql_in(&c.sdb, "SELECT k FROM ddl_turn");
    assert!(
        turns.trim().parse::<u64>().unwrap() >= 2 * DDLS.len() as u64 - 1,
        "every DDL ran during the windows (turns {turns})"
    );
    assert!(
        reopened(&c).await >= DDLS.len() as i64,
        "crossed windows are read again"
    );
    let versions =
        backfill_tests::bf::store::schema_versions::versions(&c.pool, c.job, c.generation)
            .await
            .unwrap();
    assert_eq!(
        versions.len(),
        DDLS.len(),
        "one version per DDL: {versions:?}"
    );
    // The new shape while STREAMING.
    hold.store(false, Ordering::SeqCst);
    c.source.sql_in(
        &c.sdb,
        "UPDATE t SET m1 = CONCAT('m', id), qty = 5000000000, remark = 'r' WHERE id % 3 = 0",
    );
    hold.store(true, Ordering::SeqCst);
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    assert_eq!(c.head().await.paused, None);
    let writes = w.stop().await;
    drop(s);
    keyed::assert_audit_passes(&c);
    eprintln!(
        "schema changes during the windows: {writes} writes, {} rows",
        d.rows
    );
}
