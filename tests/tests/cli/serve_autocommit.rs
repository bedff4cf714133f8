//! Servers whose global `autocommit` is 0 (a my.cnf or `SET GLOBAL` some shops use): every
//! session backfill opens sets `autocommit = 1` itself (the data plane in its `SET NAMES`
//! statement, the state store on connect), so a marker's INSERT on the source, the state
//! store's single-statement writes and a lone read of T are each their own transaction.
//! Before, the markers stayed uncommitted in the session (then rolled back by its reset) and
//! the job waited for a B that never reached the binlog; the state store's writes outside a
//! transaction stayed uncommitted on their pooled connection.
//!
//! Both servers are private: the setting is global.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::compare::compare;
use backfill_tests::install::install_and_start_t;
use harness::{Server, ServerOpts};
use std::process::Stdio;
use std::time::Duration;

const DDL: &str =
    "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NULL) ENGINE=InnoDB";
/// A serve that reaches STREAMING here takes a few seconds; one stuck waiting for a marker
/// would wait out its own (much longer) bounds, so it is killed at this one.
const SERVE_BOUND: Duration = Duration::from_secs(60);

#[test]
fn a_job_reaches_streaming_on_servers_whose_global_autocommit_is_off() {
    let source = Server::start_private(ServerOpts::source());
    let target = Server::start_private(ServerOpts::target());
    let (sdb, ctl) = (source.fresh_db("ac_s"), source.fresh_db("ac_c"));
    let tdb = target.fresh_db("ac_t");
    source.sql_in(&sdb, DDL);
    source.sql_in(
        &sdb,
        "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_3000",
    );
    target.sql_in(&tdb, DDL);
    let state = target.url_db(&format!("{tdb}_state"));
    for s in [&source, &target] {
        s.sql("SET GLOBAL autocommit = 0");
        assert_eq!(s.sql("SELECT @@GLOBAL.autocommit").trim(), "0");
    }
    let (src, tgt) = (source.url_db(&sdb), target.url_db(&tdb));
    let job = install_and_start_t(&state, (&src, &sdb), (&tgt, &tdb), &ctl);
    let data = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("serve.log");
    let serve = backfill_tests::command()
        .args(["serve", "--state", &state, "--data-dir"])
        .arg(data.path())
        .args([
            "--exit-when-idle",
            "--source",
            &source.url(),
            "--target",
            &target.url(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let code = backfill_tests::case::wait(serve, Some(SERVE_BOUND));
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        code,
        Some(0),
        "serve (None: killed at {SERVE_BOUND:?}):\n{out}"
    );
    let st = backfill_tests::backfill(&["status", "--state", &state, &job, "--format", "json"]);
    assert!(
        st.stdout.contains("\"phase\":\"STREAMING\""),
        "job {job}: {}",
        st.all()
    );
    let d = compare(&source, &sdb, &target, &tdb, "t", &["id"]);
    assert!(d.is_clean() && d.rows == 3000, "{sdb}.t -> {tdb}.t: {d}");
}
