//! Faults beyond kills (issue 34 item 4), each against real servers and the real
//! `backfill serve` binary, each ending in a named pause or a recovery with nothing lost
//! (the exactly-once oracle over both binlogs, and the comparison with the source where
//! the source still has the table):
//! - TRUNCATE, RENAME and DROP of a captured table while STREAMING: a pause naming the
//!   statement; every change before it applied exactly once, nothing after it;
//! - a source transaction holding row locks in a window's range, open across that
//!   window's LOW and HIGH: the window reads around it, the change arrives by replay;
//! - the target server (with the state store on it) restarted during page apply and
//!   again while STREAMING: serve rides both out;
//! - RESET MASTER on the source while serve runs: the capture stops and the table pauses
//!   with `lineage_changed`; nothing of the new history is applied;
//! - PURGE BINARY LOGS while serve runs: of files already read, nothing pauses and nothing
//!   is lost; of a file holding a change never read, the table pauses with
//!   `binlog_purged` and neither that change nor any later one is applied;
//! - the material directory (`--materials local`) full, then read-only: the table pauses
//!   naming the file and the OS error, resumes once the operator fixed it, and converges
//!   with no partial file left.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::keyed;
use backfill_tests::workload::Workload;
use backfill_tests::*;
use harness::{Server, ServerOpts};
use kernel::error::DefiniteCode;
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::process::Child;
use std::time::{Duration, Instant};

const ROWS: i64 = 1_500;

fn fill_sql() -> Vec<String> {
    vec![format!(
        "INSERT INTO t (id, k, v) SELECT seq, seq, CONCAT('v', seq) FROM seq_1_to_{ROWS}"
    )]
}

/// A case of `t` between private servers, with the audit triggers' log on the target.
async fn private_case(prefix: &str, source: &'static Server, target: &'static Server) -> Case {
    let c = Case::of_table_between((source, target), prefix, DDL, &fill_sql(), 400, 150).await;
    add_audit_triggers(c.target, &c.tdb);
    c
}

/// Waits until the job is paused; its reason.
async fn paused(c: &Case, what: &str) -> kernel::error::Definite {
    c.paused_within(what, Duration::from_secs(120)).await
}

/// J's phase and whether it is paused, None while the state store does not answer (its
/// server restarting): the test's own reads ride out the outage as serve must.
async fn phase(c: &Case) -> Option<(Phase, bool)> {
    let j = ledger::journal::Journal::new(c.pool.clone());
    let h = j.head(c.job, c.generation).await.ok().flatten()?;
    Some((h.record.phase, h.record.paused.is_some()))
}

/// Waits until STREAMING (not paused) while `child` runs, riding out state-store outages.
async fn streaming(c: &Case, child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(180);
    while phase(c).await != Some((Phase::Streaming, false)) {
        assert!(child.try_wait().unwrap().is_none(), "serve ended");
        assert!(
            Instant::now() < until,
            "not STREAMING: {:?}",
            phase(c).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    child.wait().unwrap();
}

/// Waits until the target equals the source and the oracle finds every change applied.
async fn caught_up(c: &Case) {
    keyed::wait_clean(c, &["id"], Duration::from_secs(90)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn truncate_rename_and_drop_while_streaming_pause_by_name_and_lose_nothing_before() {
    for (n, ddl, named) in [
        (0, "TRUNCATE TABLE t", "TRUNCATE"),
        (1, "RENAME TABLE t TO t_old", "RENAME"),
        (2, "DROP TABLE t", "DROP"),
    ] {
        let c = Case::new(&format!("fddl{n}"), ROWS, 400, 150).await;
        let w = Workload::start(c.source.url_db(&c.sdb), ROWS, 100 + n);
        let mut s = keyed::serve_child(&c, &[], "");
        keyed::wait_streaming(&c, &mut s).await;
        let writes = w.stop().await;
        caught_up(&c).await;
        c.source.sql_in(&c.sdb, ddl);
        // A change after the statement, to a table of that name: never applied.
        let after = match n {
            0 => "INSERT INTO t (id, k, v) VALUES (99000001, 0, 'after')",
            _ => {
                "CREATE TABLE t (id BIGINT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64)); \
                  INSERT INTO t VALUES (99000001, 0, 'after')"
            }
        };
        c.source.sql_in(&c.sdb, after);
        let p = paused(&c, ddl).await;
        assert_eq!(p.code, DefiniteCode::SchemaChanged, "{ddl}: {p:?}");
        assert!(p.message.contains(named), "{ddl}: {}", p.message);
        let later = c
            .target
            .sql_in(&c.tdb, "SELECT COUNT(*) FROM t WHERE id = 99000001");
        assert_eq!(
            later.trim(),
            "0",
            "{ddl}: a change after it reached the target"
        );
        stop(s);
        let r = c.oracle();
        // The one change after the statement is the only one not applied.
        assert!(
            r.duplicates == 0 && r.skipped == 0 && r.wrong == 0 && r.unreached == 1,
            "{ddl}: {r}"
        );
        eprintln!(
            "{ddl} while STREAMING after {} writes: paused, {r}",
            writes.total()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_transaction_open_across_low_and_high_holding_row_locks_converges() {
    let c = Case::new("flock", ROWS, 400, 150).await;
    // Rows of windows 2 and 3 locked and changed, not committed, before serve starts.
    let mut holder = c.source_conn().await;
    holder
        .query_drop("BEGIN; UPDATE t SET k = k + 1000, v = 'held' WHERE id BETWEEN 500 AND 1000")
        .await
        .unwrap();
    let w = Workload::start(c.source.url_db(&c.sdb), ROWS, 7);
    let mut s = keyed::serve_child(&c, &["--read-windows", "1"], "");
    // Held across at least two windows' LOW and HIGH (windows 1 and 2 in J).
    wait_for_async(
        "two windows applied while the transaction is open",
        async || c.head_opt().await.is_some_and(|h| h.completed >= 2),
    )
    .await;
    holder.query_drop("COMMIT").await.unwrap();
    keyed::wait_streaming(&c, &mut s).await;
    let writes = w.stop().await;
    caught_up(&c).await;
    stop(s);
    let held = c
        .target
        .sql_in(&c.tdb, "SELECT COUNT(*) FROM t WHERE v = 'held'");
    assert!(
        held.trim().parse::<u32>().unwrap() > 0,
        "the held change is in the target"
    );
    c.assert_exactly_once();
    eprintln!(
        "a transaction open across LOW and HIGH: converged, {} writes",
        writes.total()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_target_restarted_during_page_apply_and_while_streaming_is_ridden_out() {
    let source = harness::shared_source();
    let target = leak(Server::start_private(ServerOpts::target().server_id(91)));
    let c = private_case("ftrst", source, target).await;
    let w = Workload::start(c.source.url_db(&c.sdb), ROWS, 9);
    // Reads throttled so the restart falls among the windows' page applies.
    let mut cmd = keyed::serve_command(&c, &[], "");
    let mut s = cmd
        .env("BACKFILL_READ_ROWS_PER_SEC", "1000")
        .spawn()
        .unwrap();
    wait_for_async("a window applied", async || {
        c.head_opt().await.is_some_and(|h| h.completed >= 1)
    })
    .await;
    let windows_left = (c.head().await.completed as usize) < c.plan().await.len();
    target.restart();
    assert!(windows_left, "the first restart came after the windows");
    streaming(&c, &mut s).await;
    target.restart();
    // Changes while STREAMING and across the second restart reach the target.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes = w.stop().await;
    caught_up(&c).await;
    assert!(s.try_wait().unwrap().is_none(), "serve ended");
    stop(s);
    assert_eq!(c.head().await.paused, None);
    c.assert_exactly_once();
    eprintln!(
        "target restarted twice: converged, {} writes",
        writes.total()
    );
}

/// RESET MASTER while serve runs. MariaDB's dump thread then keeps sending heartbeats
/// from the removed history and never the new events (measured), so before the reader's
/// lineage probe the stream stalled without a word, its table STREAMING. Now the probe
/// finds D's position gone from the new history within `lineage_probe`, the capture stops
/// with `lineage_changed` (recorded as the stream's stop, refused again at every connect),
/// the table pauses with it once its wait for L's tail ends without the tail moving, and
/// nothing of the new history is ever applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reset_master_while_serve_runs_pauses_with_lineage_changed_and_applies_nothing_new() {
    let source = leak(Server::start_private(ServerOpts::source().server_id(92)));
    let target = harness::shared_target();
    let c = private_case("freset", source, target).await;
    let log = c.data.path().join("serve.log");
    let mut s = keyed::serve_command(&c, &[], "")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    streaming(&c, &mut s).await;
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'before' WHERE id <= 10");
    caught_up(&c).await;
    c.source.sql("RESET MASTER");
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'after reset' WHERE id <= 10");
    let named = "lineage_changed";
    wait_for("the capture stopped with lineage_changed", || {
        std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("capture stopped") && l.contains(named))
    })
    .await;
    let p = paused(&c, "RESET MASTER").await;
    assert_eq!(p.code, DefiniteCode::LineageChanged, "{p:?}");
    assert!(
        p.message.contains("capture of this table's source stopped"),
        "{}",
        p.message
    );
    // A reconnect is refused the same way: give it a few restarts to apply anything.
    wait_for("the capture refused again after a restart", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.matches(named).count() >= 3)
    })
    .await;
    stop(s);
    let after = c
        .target
        .sql_in(&c.tdb, "SELECT COUNT(*) FROM t WHERE v = 'after reset'");
    assert_eq!(after.trim(), "0", "a change of the new history was applied");
    let before = c
        .target
        .sql_in(&c.tdb, "SELECT COUNT(*) FROM t WHERE v = 'before'");
    assert_eq!(before.trim(), "10");
    eprintln!(
        "RESET MASTER while serving: paused with {named}, nothing new applied: {}",
        p.message
    );
}

/// The Binlog Dump threads of `source` (the capture's connections).
fn dump_threads(source: &Server) -> Vec<String> {
    source
        .sql("SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// PURGE BINARY LOGS TO `file` until it is the only file left: the server keeps a log
/// a dump thread still reads, or whose binlog checkpoint is not yet written, and purges
/// it at a later try.
async fn purge_to(source: &Server, file: &str) {
    wait_for(&format!("every binlog before {file} purged"), || {
        source.sql(&format!("PURGE BINARY LOGS TO '{file}'"));
        source.binlog_files() == [file.to_string()]
    })
    .await;
}

/// The source's current binlog file.
fn current_binlog(source: &Server) -> String {
    source.binlog_end().0
}

/// PURGE BINARY LOGS while serve runs, twice. First of files the capture has read: the
/// source keeps streaming, nothing pauses, a later change is applied and the target
/// equals the source. Then of the file holding changes the capture has not read: the
/// capture is held (the state store's L locked by the test, so the reader cannot store),
/// its dump connection killed, a change written, the logs flushed and purged, the lock
/// released: the reader reconnects at D, the source refuses the purged position, the
/// capture stops with `binlog_purged` and the table pauses with it; the lost change and
/// every later one are never applied (DESIGN §9: never guess).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn binlog_purges_while_serve_runs_lose_nothing_read_and_pause_on_a_purged_position() {
    let source = leak(Server::start_private(ServerOpts::source().server_id(93)));
    let target = harness::shared_target();
    let c = private_case("fpurge", source, target).await;
    let log = c.data.path().join("serve.log");
    let mut s = keyed::serve_command(&c, &[], "")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    streaming(&c, &mut s).await;
    // 1. Files already captured.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'read' WHERE id <= 20");
    caught_up(&c).await;
    c.source.sql("FLUSH BINARY LOGS");
    let kept = current_binlog(c.source);
    purge_to(c.source, &kept).await;
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'after purge' WHERE id <= 20");
    caught_up(&c).await;
    assert_eq!(c.head().await.paused, None, "a purge of read files paused");
    // 2. A file with a change the capture never read.
    let mut hold = mysql_async::Conn::new(mysql_async::Opts::from_url(&c.state_url()).unwrap())
        .await
        .unwrap();
    hold.query_drop("LOCK TABLES capture_log WRITE")
        .await
        .unwrap();
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'held' WHERE id <= 5");
    let dumps = dump_threads(c.source);
    assert!(!dumps.is_empty(), "the capture streams from the source");
    for id in &dumps {
        let _ = c.source.try_sql(&format!("KILL {id}"));
    }
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'lost' WHERE id BETWEEN 6 AND 10");
    c.source.sql("FLUSH BINARY LOGS");
    let last = current_binlog(c.source);
    purge_to(c.source, &last).await;
    c.source.sql_in(
        &c.sdb,
        "UPDATE t SET v = 'later' WHERE id BETWEEN 11 AND 15",
    );
    hold.query_drop("UNLOCK TABLES").await.unwrap();
    hold.disconnect().await.unwrap();
    let p = paused(&c, "the purged position").await;
    assert_eq!(p.code, DefiniteCode::BinlogPurged, "{p:?}");
    stop(s);
    let count = |v: &str| {
        c.target
            .sql_in(&c.tdb, &format!("SELECT COUNT(*) FROM t WHERE v = '{v}'"))
            .trim()
            .to_string()
    };
    assert_eq!(
        count("lost"),
        "0",
        "a change of the purged file was applied"
    );
    assert_eq!(
        count("later"),
        "0",
        "a change after the purged one was applied"
    );
    assert_eq!(
        count("after purge"),
        "15",
        "the change after the first purge"
    );
    eprintln!(
        "binlog purges while serving: read files purged, nothing paused; unread file \
         purged: paused with binlog_purged: {}",
        p.message
    );
}

/// Waits until J records a pause whose reason names `what` (an earlier pause of another
/// cause is waited past).
async fn paused_with(c: &Case, what: &str) -> kernel::error::Definite {
    let mut found = None;
    wait_for_async(&format!("a pause naming {what}"), async || {
        found = c
            .head_opt()
            .await
            .and_then(|h| h.paused)
            .filter(|p| p.message.contains(what));
        found.is_some()
    })
    .await;
    found.expect("waited for it")
}

/// A small tmpfs mounted over a directory (the case's data dir) for the test's life:
/// the material directory can be made full or read-only by the server's own kernel.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &std::path::Path, size: &str) -> Tmpfs {
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "this test mounts a small tmpfs (it needs root, as CI runs it): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs(dir.to_path_buf())
    }

    fn remount(&self, opts: &str) {
        let out = std::process::Command::new("mount")
            .args(["-o", &format!("remount,{opts}")])
            .arg(&self.0)
            .output()
            .expect("run mount");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The material directory (`--materials local`) full, then read-only, while serve copies:
/// each time the table pauses naming the directory and the error, the operator gives it
/// room (or makes it writable) and resumes, and the table reaches STREAMING with every
/// page and change applied exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_then_read_only_material_directory_pauses_by_name_and_resumes_losing_nothing() {
    let c = Case::new("fdisk", 20_000, 2_000, 500).await;
    let fs = Tmpfs::mount(c.data.path(), "256k");
    let w = Workload::start(c.source.url_db(&c.sdb), 20_000, 17);
    let log = std::env::temp_dir().join(format!("fdisk-{}.log", std::process::id()));
    // The material files name the directory in every error: the directory is the case's.
    let mut s = keyed::serve_command(&c, &["--materials", "local"], "")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for_async("J created", async || c.head_opt().await.is_some()).await;
    let full = paused_with(&c, "No space left on device").await;
    assert!(full.message.contains("backfill resume"), "{}", full.message);
    eprintln!("material directory full: {:?} {}", full.code, full.message);
    fs.remount("size=64m,ro");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    let ro = paused_with(&c, "Read-only file system").await;
    eprintln!("material directory read-only: {:?} {}", ro.code, ro.message);
    fs.remount("rw");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    streaming(&c, &mut s).await;
    let writes = w.stop().await;
    caught_up(&c).await;
    stop(s);
    c.assert_exactly_once();
    eprintln!(
        "material directory full, read-only: resumed, {} writes",
        writes.total()
    );
}
