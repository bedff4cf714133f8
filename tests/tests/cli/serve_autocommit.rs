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
use harness::{Server, ServerOpts};
use std::process::Stdio;
use std::time::{Duration, Instant};

const DDL: &str =
    "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NULL) ENGINE=InnoDB";
/// A serve that reaches STREAMING here takes a few seconds; one stuck waiting for a marker
/// would wait out its own (much longer) bounds.
const SERVE_BOUND: Duration = Duration::from_secs(120);

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
    let job = install_and_start(&state, (&source, &sdb, &ctl), (&target, &tdb));
    let data = tempfile::tempdir().unwrap();
    let (code, out) = serve_bounded(&[
        "serve",
        "--state",
        &state,
        "--data-dir",
        data.path().to_str().unwrap(),
        "--exit-when-idle",
        "--source",
        &source.url(),
        "--target",
        &target.url(),
    ]);
    assert_eq!(code, 0, "{out}");
    let st = backfill_tests::backfill(&["status", "--state", &state, &job, "--format", "json"]);
    assert!(
        st.stdout.contains("\"phase\":\"STREAMING\""),
        "job {job}: {}",
        st.all()
    );
    let d = compare(&source, &sdb, &target, &tdb, "t", &["id"]);
    assert!(d.is_clean() && d.rows == 3000, "{sdb}.t -> {tdb}.t: {d}");
}

fn install_and_start(
    state: &str,
    (source, sdb, ctl): (&Server, &str, &str),
    (target, tdb): (&Server, &str),
) -> String {
    let r = backfill_tests::backfill(&[
        "install",
        "--state",
        state,
        "--source",
        &source.url_db(sdb),
        "--source-table",
        &format!("{sdb}.t"),
        "--target",
        &target.url_db(tdb),
        "--target-table",
        &format!("{tdb}.t"),
        "--control-schema",
        ctl,
        "--window-rows",
        "1000",
        "--page-rows",
        "250",
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let job = v["job_id"].as_u64().unwrap().to_string();
    let s = backfill_tests::backfill(&["start", "--state", state, &job]);
    assert_eq!(s.code, 0, "{}", s.all());
    job
}

/// Runs `backfill ARGS` and returns its exit code and output; kills it (and fails) when it
/// has not ended within [`SERVE_BOUND`].
fn serve_bounded(args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = backfill_tests::command()
        .args(args)
        .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > SERVE_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = format!(
        "{}{}",
        std::fs::read_to_string(&out).unwrap_or_default(),
        std::fs::read_to_string(&err).unwrap_or_default()
    );
    match status {
        Some(s) => (s.code().unwrap_or(-1), text),
        None => panic!("serve did not reach STREAMING within {SERVE_BOUND:?}:\n{text}"),
    }
}
