//! Schema changes during the windows (issue 16 item 3, DESIGN §16) against real MariaDB,
//! with the real `backfill serve` as a child process.
//!
//! Hooks on the source (`BACKFILL_WINDOW_HOOK_SQL`: after each window's LOW is durable,
//! and after its read view closed, before HIGH) run the DDLs of a list one by one, every
//! other window attempt: each DDL therefore lies between an attempt's LOW and HIGH, before
//! its read view or after it. The list is issue 16's compatible kinds: ADD COLUMN at the
//! end, ADD COLUMN with a default in the middle, INT to BIGINT, a wider VARCHAR, ADD
//! INDEX, DROP INDEX, RENAME COLUMN, DROP COLUMN. A writer changes rows all along. serve
//! is stopped once right after the target ran a DDL during the windows (before T recorded
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

/// The DDLs the hooks run, in order (the table of [`DDL`]): issue 16's compatible kinds.
const DDLS: [&str; 8] = [
    "ADD COLUMN e1 INT NULL",
    "ADD COLUMN m1 VARCHAR(8) NOT NULL DEFAULT 'd' AFTER v",
    "MODIFY qty BIGINT NOT NULL DEFAULT 0",
    "MODIFY name VARCHAR(64) NULL",
    "ADD INDEX i_name (name)",
    "DROP INDEX i_qty",
    "RENAME COLUMN note TO remark",
    "DROP COLUMN e1",
];

/// The hook turn of DDL `i`. Both hooks run the same file and count turns, two per
/// window attempt (after LOW, after the read view closed): DDL 0 runs after LOW of the
/// first attempt, DDL 1 after the read view of the third closed, and so on, alternating,
/// with a clean attempt after each crossed one (an attempt stopped half-way shifts the
/// turns: then a DDL lands elsewhere in an attempt, every place of which is a case to
/// handle).
fn turn(i: usize) -> usize {
    4 * i + (i % 2)
}

/// A compound statement: the hooks' turn counter on the source, and at DDL `i`'s turn
/// that DDL.
fn hook_sql(db: &str) -> String {
    let mut arms = String::new();
    for (i, d) in DDLS.iter().enumerate() {
        let kw = if i == 0 { "IF" } else { "ELSEIF" };
        arms.push_str(&format!(
            "{kw} n = {} THEN ALTER TABLE `{db}`.`t` {d}; ",
            turn(i)
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
    cmd.env(
        SQL_ENV,
        format!("after_low={hook},after_read_closed={hook}"),
    );
    Serving(cmd.spawn().expect("spawn backfill serve"))
}

/// Window attempts beyond each window's first.
async fn extra_attempts(c: &Case) -> i64 {
    sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(a - 1), 0) AS SIGNED) FROM (SELECT MAX(attempt) AS a \
         FROM window_attempts WHERE job_id = ? AND generation = ? GROUP BY window_id) m",
    )
    .bind(c.job.0)
    .bind(c.generation.0)
    .fetch_one(&c.pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatible_ddl_during_the_windows_reopens_the_crossed_window_and_streams_clean() {
    // 60 rows, windows of 5: twelve windows, eight of them crossed by a DDL.
    let c = Case::of_table("ddl_windows", DDL, &fill(), 5, 3).await;
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
        turns.trim().parse::<usize>().unwrap() > turn(DDLS.len() - 1),
        "every DDL ran during the windows (turns {turns})"
    );
    // Each DDL fails at least the attempt it crossed (or, run by an attempt the pipeline
    // stopped, the next attempt of that window, which finds it at its LOW).
    assert!(
        extra_attempts(&c).await >= DDLS.len() as i64,
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
        "UPDATE t SET m1 = CONCAT('m', id), qty = 5000000000, remark = 'r', \
         name = REPEAT('w', 60) WHERE id % 3 = 0",
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

/// `backfill verify --pinned` with serve stopped, after DDLs that serve never saw: the
/// verify seals them (the same proof as serve) and replays across them, the target takes
/// them at their place, and the comparison at P is clean; serve then goes on STREAMING
/// from there without running a DDL twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_verify_seals_and_replays_across_ddls_made_while_serve_was_stopped() {
    let c = Case::of_table("ddl_vpin", DDL, &fill(), 30, 10).await;
    let mut s = Serving(keyed::serve_child(&c, &[], ""));
    keyed::wait_streaming(&c, &mut s.0).await;
    // Stopped cleanly (a pinned verify refuses while a serve's heartbeat is live).
    let pid = s.0.id().to_string();
    let term = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    assert!(term.unwrap().success());
    assert!(s.0.wait().unwrap().success(), "SIGTERM stops serve cleanly");
    for sql in [
        "UPDATE t SET v = v + 1 WHERE id % 2 = 0",
        "ALTER TABLE t ADD COLUMN e1 INT NULL",
        "UPDATE t SET e1 = id * 3 WHERE id % 3 = 0",
        "ALTER TABLE t RENAME COLUMN note TO remark",
        "UPDATE t SET remark = 'r', v = v + 1 WHERE id % 4 = 0",
    ] {
        c.source.sql_in(&c.sdb, sql);
    }
    let (code, out, err) = pinned_verify(&c);
    assert_eq!(code, Some(0), "verify --pinned: {out}{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let tally = &v["cursor"]["tally"];
    for what in ["missing", "extra", "differing_fields"] {
        assert_eq!(tally[what]["count"], 0, "{what}: {out}");
    }
    assert_eq!(tally["differing_rows"], 0, "{out}");
    assert!(tally["rows_compared"].as_u64().unwrap_or(0) > 40, "{out}");
    let versions =
        backfill_tests::bf::store::schema_versions::versions(&c.pool, c.job, c.generation)
            .await
            .unwrap();
    assert_eq!(versions.len(), 2, "sealed by the verify: {versions:?}");
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean(), "the target at the source's state: {d}");
    // serve goes on from T's cursor: the DDLs are in T, nothing runs twice.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET e1 = 7, remark = 's' WHERE id < 10");
    let mut s = Serving(keyed::serve_child(&c, &[], ""));
    keyed::wait_streaming(&c, &mut s.0).await;
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    assert_eq!(c.head().await.paused, None);
    drop(s);
    keyed::assert_audit_passes(&c);
}

/// `backfill verify --pinned` of the case (serve stopped), killed if it runs over 5
/// minutes: its exit code (None: killed), stdout and stderr.
fn pinned_verify(c: &Case) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (o, e) = (dir.path().join("out"), dir.path().join("err"));
    let job = c.job.0.to_string();
    let mut child = backfill_tests::command()
        .args(["verify", &job, "--state", &c.state_url(), "--pinned"])
        .args(["--source", &c.source.url(), "--target", &c.target.url()])
        .args(["--format", "json"])
        .env("RUST_LOG", "info")
        .stdout(std::fs::File::create(&o).unwrap())
        .stderr(std::fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        if t0.elapsed() > Duration::from_secs(300) {
            child.kill().unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p| std::fs::read_to_string(p).unwrap_or_default();
    (code, read(&o), read(&e))
}

/// Two DDLs back to back while STREAMING, the second before serve sealed the first (one
/// statement batch): the first is derived on the scratch table, the second is the live
/// definition; rows between and after them arrive in their shapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_ddls_in_a_row_while_streaming_are_both_applied() {
    let c = Case::of_table("ddl_pair", DDL, &fill(), 30, 10).await;
    let mut s = Serving(keyed::serve_child(&c, &[], ""));
    keyed::wait_streaming(&c, &mut s.0).await;
    c.source.sql_in(
        &c.sdb,
        "ALTER TABLE t ADD COLUMN e1 INT NULL; UPDATE t SET e1 = id WHERE id % 2 = 0; \
         ALTER TABLE t MODIFY name VARCHAR(64) NULL; \
         UPDATE t SET name = REPEAT('x', 50), e1 = 1 WHERE id % 5 = 0",
    );
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    assert_eq!(c.head().await.paused, None);
    let versions =
        backfill_tests::bf::store::schema_versions::versions(&c.pool, c.job, c.generation)
            .await
            .unwrap();
    assert_eq!(versions.len(), 2, "{versions:?}");
    drop(s);
    keyed::assert_audit_passes(&c);
}
