//! Tests of the harness itself, against real MariaDB servers.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use harness::{shared_source, shared_target, Server, ServerOpts, INSTALL_HINT, MARIADBD_ENV};

/// Set by the parent tests for the `child_*` tests they run in a subprocess.
const CHILD_ENV: &str = "HARNESS_SELF_TEST_CHILD";

#[test]
fn shared_source_logs_full_row_events() {
    let source = shared_source();
    let settings = source
        .sql("SELECT @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@server_id");
    assert_eq!(settings, "ROW\tFULL\tFULL\t1");
    let more =
        source.sql("SELECT @@log_bin, @@binlog_checksum, @@gtid_domain_id, @@character_set_server");
    assert_eq!(more, "1\tCRC32\t0\tutf8mb4");
    assert_eq!(source.server_id(), 1);
    assert!(source.url().starts_with("mysql://root@127.0.0.1:"));
    assert!(source.binlog_dir().starts_with(source.dir()));
}

#[test]
fn shared_target_has_its_own_id_and_a_binlog() {
    let target = shared_target();
    assert_eq!(target.sql("SELECT @@server_id, @@log_bin"), "2\t1");
    assert_eq!(target.server_id(), 2);
    assert_ne!(target.port(), shared_source().port());
    assert!(
        std::ptr::eq(target, shared_target()),
        "started once per binary"
    );
}

#[test]
fn fresh_dbs_are_isolated_and_well_named() {
    let source = shared_source();
    let (a, b) = (source.fresh_db("iso"), source.fresh_db("iso"));
    assert_ne!(a, b);
    for (db, n) in [(&a, 1), (&b, 3)] {
        source.sql_in(db, "CREATE TABLE t (id INT PRIMARY KEY)");
        let rows: Vec<String> = (1..=n).map(|i| format!("({i})")).collect();
        source.sql_in(db, &format!("INSERT INTO t VALUES {}", rows.join(",")));
    }
    assert_eq!(source.sql(&format!("SELECT COUNT(*) FROM `{a}`.t")), "1");
    assert_eq!(source.sql(&format!("SELECT COUNT(*) FROM `{b}`.t")), "3");
    let long = source.fresh_db(&"Weird-Prefix.With Spaces/".repeat(5));
    assert!(long.len() <= 64, "{long}");
    assert!(long
        .bytes()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'));
    assert!(source.url_db(&a).ends_with(&format!("/{a}")));
}

#[test]
fn url_user_encodes_credentials() {
    let url = shared_target().url_user("cap", "p@ss:w/rd", "db1");
    let port = shared_target().port();
    assert_eq!(
        url,
        format!("mysql://cap:p%40ss%3Aw%2Frd@127.0.0.1:{port}/db1")
    );
}

#[test]
fn sql_errors_carry_the_server_message() {
    let err = shared_source()
        .try_sql("SELECT * FROM no_such_db.t")
        .expect_err("a missing database must fail");
    assert!(err.contains("no_such_db"), "{err}");
}

#[test]
fn binlog_is_decodable_independently() {
    let source = shared_source();
    let db = source.fresh_db("binlog");
    source.sql_in(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)); INSERT INTO t VALUES (7, 'seven')",
    );
    let last = source.binlog_files().pop().expect("binlog files");
    assert!(last.starts_with("mysql-bin."), "{last}");
    let decoded = source.mariadb_binlog_verbose(&last);
    assert!(
        decoded.contains(&format!("### INSERT INTO `{db}`.`t`")),
        "{decoded}"
    );
    assert!(decoded.contains("'seven'"), "{decoded}");
}

#[test]
fn kill9_then_restart_keeps_committed_rows() {
    let server = Server::start_private(ServerOpts::source());
    let db = server.fresh_db("crash");
    server.sql_in(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1),(2),(3)",
    );
    let files_before = server.binlog_files().len();
    server.kill9();
    assert!(server.pid().is_none());
    assert!(
        server.try_sql("SELECT 1").is_err(),
        "server still answers after kill9"
    );
    server.restart();
    assert_eq!(server.sql(&format!("SELECT COUNT(*) FROM `{db}`.t")), "3");
    assert!(
        server.binlog_files().len() > files_before,
        "a restart opens a new binlog"
    );
    server.stop();
    assert!(server.try_sql("SELECT 1").is_err());
    server.start_again();
    assert_eq!(server.sql(&format!("SELECT MAX(id) FROM `{db}`.t")), "3");
}

#[test]
fn private_server_drops_cleanly() {
    let opts = ServerOpts::target()
        .server_id(42)
        .config("max_allowed_packet=33554432");
    let server = Server::start_private(opts);
    assert_eq!(
        server.sql("SELECT @@server_id, @@max_allowed_packet"),
        "42\t33554432"
    );
    let (dir, port, pid) = (
        server.dir().to_path_buf(),
        server.port(),
        server.pid().expect("pid"),
    );
    assert!(dir.join("my.cnf").exists());
    drop(server);
    assert!(!dir.exists(), "{} survived drop", dir.display());
    assert!(!mariadbd_alive(pid), "mariadbd {pid} survived drop");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn bogus_mariadbd_panics_with_install_hint() {
    let opts = ServerOpts::source().mariadbd("/nonexistent/mariadbd");
    let payload = catch_unwind(AssertUnwindSafe(|| Server::start(opts)));
    let message = panic_message(payload.err().expect("must panic"));
    assert!(message.contains(INSTALL_HINT), "{message}");
    assert!(message.contains("/nonexistent/mariadbd"), "{message}");
}

#[test]
fn server_that_does_not_start_fails_with_error_log_tail() {
    let opts = ServerOpts::source().config("no_such_server_option=1");
    let payload = catch_unwind(AssertUnwindSafe(|| Server::start_private(opts)));
    let message = panic_message(payload.err().expect("must panic"));
    assert!(message.contains("no_such_server_option"), "{message}");
    assert!(message.contains(INSTALL_HINT), "{message}");
}

#[test]
fn env_override_of_mariadbd_fails_the_test_with_install_hint() {
    let out = run_child(
        "child_start_private",
        &[(MARIADBD_ENV, "/nonexistent/env-mariadbd")],
    );
    let text = combined(&out);
    assert!(!out.status.success(), "child passed:\n{text}");
    assert!(text.contains(INSTALL_HINT), "{text}");
    assert!(text.contains(MARIADBD_ENV), "{text}");
}

#[test]
fn watchdog_cleans_up_after_abort_and_stale_dirs_are_swept() {
    let stale = fake_stale_dir();
    let out = run_child("child_start_private", &[("HARNESS_CHILD_ABORT", "1")]);
    let text = combined(&out);
    assert!(!out.status.success(), "child did not abort:\n{text}");
    let dir = PathBuf::from(field(&text, "DIR=").unwrap_or_else(|| panic!("no DIR in:\n{text}")));
    let pid: u32 = field(&text, "PID=")
        .and_then(|p| p.parse().ok())
        .expect("PID");
    assert!(
        !stale.exists(),
        "stale dir {} was not swept",
        stale.display()
    );
    wait_for(
        || !dir.exists() && !mariadbd_alive(pid),
        "watchdog cleanup after abort",
    );
}

fn run_child(test: &str, env: &[(&str, &str)]) -> Output {
    assert_eq!(test, "child_start_private");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness-child"));
    cmd.env(CHILD_ENV, "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run harness-child")
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn combined(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.split_once(key))
        .map(|(_, v)| v.trim())
}

/// A directory that looks like one left by a dead test process.
fn fake_stale_dir() -> PathBuf {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let dead_pid = child.id();
    child.wait().expect("wait true");
    let dir = std::env::temp_dir()
        .join("backfill-harness")
        .join(format!("{dead_pid}-999"));
    std::fs::create_dir_all(dir.join("data")).expect("create stale dir");
    dir
}

fn mariadbd_alive(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).contains("mariadbd")
}

fn wait_for(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
