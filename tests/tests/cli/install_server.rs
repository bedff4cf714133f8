//! `backfill install` refusals that need a differently configured source server (binlog
//! off, STATEMENT, MINIMAL image or metadata, binlog filters) or a limited source user
//! (missing privileges), and the real `backfill` binary: stdout, stderr and exit codes.

use backfill_tests::install::{installs, names, refusal, Tables, DDL};
use backfill_tests::{leak, Run};
use harness::{Server, ServerOpts};

/// A private source with `lines` added to its configuration, holding `t`.
fn private_case(prefix: &str, lines: &[&str]) -> Tables {
    // Its own tmpdir: concurrent `mariadb-install-db` runs sharing /tmp were seen failing
    // with "Unknown table 'mysql.tmp_proxies_priv'". Named `<pid>-...` under the harness
    // root, so the harness sweeps it once this process is gone.
    let tmp = std::env::temp_dir()
        .join("backfill-harness")
        .join(format!("{}-install-tmp-{prefix}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("{}: {e}", tmp.display()));
    let mut opts = ServerOpts::source().config(format!("tmpdir={}", tmp.display()));
    for l in lines {
        opts = opts.config(*l);
    }
    let server = leak(Server::start_private(opts));
    Tables::on(server, prefix, DDL, DDL)
}

#[tokio::test]
async fn refuses_a_source_with_the_binlog_off() {
    let case = private_case("logoff", &["skip-log-bin"]);
    let msg = refusal(&case.req()).await;
    names(&msg, &["variable log_bin", "OFF", "log_bin=<basename>"]);
}

#[tokio::test]
async fn refuses_a_source_with_statement_binlog_format() {
    let case = private_case("stmt", &["binlog_format=STATEMENT"]);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "variable binlog_format",
            "is STATEMENT, must be ROW",
            "binlog_format=ROW",
        ],
    );
}

#[tokio::test]
async fn refuses_a_source_with_minimal_row_image() {
    let case = private_case("minimg", &["binlog_row_image=MINIMAL"]);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "variable binlog_row_image",
            "is MINIMAL, must be FULL",
            "binlog_row_image=FULL",
        ],
    );
}

#[tokio::test]
async fn refuses_a_source_with_minimal_row_metadata() {
    let case = private_case("minmeta", &["binlog_row_metadata=MINIMAL"]);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "variable binlog_row_metadata",
            "is MINIMAL, must be FULL",
            "binlog_row_metadata=FULL",
        ],
    );
}

#[tokio::test]
async fn refuses_a_source_with_compressed_binlog_events() {
    let case = private_case("compress", &["log_bin_compress=ON"]);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &["variable log_bin_compress", "is ON", "log_bin_compress=OFF"],
    );
}

#[tokio::test]
async fn refuses_a_binlog_filter_that_drops_the_table_schema() {
    let case = private_case("dodb", &["binlog_do_db=some_other_db"]);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "binlog filter",
            "binlog_do_db=[some_other_db]",
            &format!("`{}`", case.sdb),
            // The control schema is dropped as well, and named.
            &format!("`{}`", kernel::control::DEFAULT_SCHEMA),
            "remove binlog_do_db/binlog_ignore_db",
        ],
    );
}

#[tokio::test]
async fn refuses_a_binlog_filter_that_ignores_the_control_schema() {
    let ignore = format!("binlog_ignore_db={}", kernel::control::DEFAULT_SCHEMA);
    let case = private_case("igndb", &[&ignore]);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &["binlog_ignore_db=[backfill_control]", "`backfill_control`"],
    );
    assert!(!msg.contains(&format!("`{}`", case.sdb)), "{msg}");
}

/// A source user named after `case` with `grants` (`{db}` and `{ctl}` are replaced by the
/// source schema and the control schema); returns its URL.
fn user(case: &Tables, tag: &str, grants: &[&str], ctl: &str) -> (String, String) {
    let name = format!("u_{tag}_{}", std::process::id());
    let account = format!("'{name}'@'%'");
    case.source.sql(&format!(
        "DROP USER IF EXISTS {account}; CREATE USER {account} IDENTIFIED BY 's3cr3t-pw'"
    ));
    for g in grants {
        let g = g.replace("{db}", &case.sdb).replace("{ctl}", ctl);
        case.source.sql(&format!("GRANT {g} TO {account}"));
    }
    (case.source.url_user(&name, "s3cr3t-pw", ""), account)
}

const CTL: &str = kernel::control::DEFAULT_SCHEMA;

fn control_table_exists(case: &Tables) {
    for sql in kernel::control::create_statements(CTL) {
        case.source.sql(&sql);
    }
}

const FULL: [&str; 3] = [
    "SELECT ON `{db}`.t",
    "REPLICATION SLAVE, BINLOG MONITOR ON *.*",
    "INSERT ON `{ctl}`.*",
];

#[tokio::test]
async fn a_user_with_exactly_the_needed_privileges_installs() {
    let case = Tables::new("pok", DDL, DDL);
    control_table_exists(&case);
    let (url, _) = user(&case, "ok", &FULL, CTL);
    let mut req = case.req();
    req.source_url = url;
    installs(&req).await;
}

#[tokio::test]
async fn refuses_a_user_without_binlog_monitor() {
    let case = Tables::new("pmon", DDL, DDL);
    control_table_exists(&case);
    let (url, account) = user(
        &case,
        "mon",
        &[FULL[0], "REPLICATION SLAVE ON *.*", FULL[2]],
        CTL,
    );
    let mut req = case.req();
    req.source_url = url;
    let msg = refusal(&req).await;
    names(
        &msg,
        &[
            "privilege BINLOG MONITOR",
            &format!("GRANT BINLOG MONITOR ON *.* TO {account}"),
        ],
    );
    assert!(!msg.contains("s3cr3t-pw"), "password leaked: {msg}");
}

#[tokio::test]
async fn refuses_a_user_without_replication_slave() {
    let case = Tables::new("prepl", DDL, DDL);
    control_table_exists(&case);
    let (url, account) = user(
        &case,
        "repl",
        &[FULL[0], "BINLOG MONITOR ON *.*", FULL[2]],
        CTL,
    );
    let mut req = case.req();
    req.source_url = url;
    let msg = refusal(&req).await;
    names(
        &msg,
        &[
            "privilege REPLICATION SLAVE",
            &format!("GRANT REPLICATION SLAVE ON *.* TO {account}"),
        ],
    );
}

#[tokio::test]
async fn refuses_a_user_without_select_on_the_table() {
    let case = Tables::new("psel", DDL, DDL);
    control_table_exists(&case);
    let (url, account) = user(&case, "sel", &[FULL[1], FULL[2]], CTL);
    let mut req = case.req();
    req.source_url = url;
    let msg = refusal(&req).await;
    names(
        &msg,
        &[
            &format!("privilege SELECT on `{}`.`t`", case.sdb),
            &format!("GRANT SELECT ON `{}`.`t` TO {account}", case.sdb),
        ],
    );
}

#[tokio::test]
async fn refuses_a_user_without_insert_on_the_control_table() {
    let case = Tables::new("pins", DDL, DDL);
    control_table_exists(&case);
    let (url, account) = user(
        &case,
        "ins",
        &[FULL[0], FULL[1], "SELECT ON `{ctl}`.*"],
        CTL,
    );
    let mut req = case.req();
    req.source_url = url;
    let msg = refusal(&req).await;
    names(
        &msg,
        &[
            "privilege INSERT on control table",
            "GRANT INSERT ON",
            &account,
        ],
    );
}

#[tokio::test]
async fn refuses_a_user_that_cannot_create_a_missing_control_table() {
    let case = Tables::new("pcre", DDL, DDL);
    let ctl = format!("ctl_{}", case.sdb);
    let (url, account) = user(
        &case,
        "cre",
        &[FULL[0], FULL[1], "INSERT ON `{ctl}`.*"],
        &ctl,
    );
    let mut req = case.req();
    req.source_url = url;
    req.control_schema = ctl.clone();
    let msg = refusal(&req).await;
    names(
        &msg,
        &[
            &format!("privilege CREATE on `{ctl}`"),
            &format!("GRANT CREATE, INSERT ON `{ctl}`.* TO {account}"),
            "CREATE TABLE IF NOT EXISTS",
        ],
    );
}

#[tokio::test]
async fn refuses_a_state_store_on_the_source_even_when_the_source_user_cannot_read_it() {
    // The source user may not read the state schema (1142), so the token is invisible to
    // it; the server identity (server_id + server_uid) still says it is one server.
    let case = Tables::new("pstate", DDL, DDL);
    control_table_exists(&case);
    let (url, _) = user(&case, "st", &FULL, CTL);
    let mut req = case.req();
    req.source_url = url;
    req.state_url = case.source.url_db(&format!("{}_state", case.sdb));
    let msg = refusal(&req).await;
    names(
        &msg,
        &[
            "state store",
            "is on the source server",
            "both report server identity mariadb:1:",
        ],
    );
}

/// `backfill ARGS` with an empty environment.
fn backfill(args: &[&str]) -> Run {
    Run::of(backfill_tests::command().args(args).env_clear())
}

fn install_args(case: &Tables, source_url: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "install".into(),
        "--state".into(),
        case.state_url(),
        "--source".into(),
        source_url.into(),
        "--source-table".into(),
        format!("{}.t", case.sdb),
        "--target".into(),
        case.target.url(),
        "--target-table".into(),
        format!("{}.t", case.tdb),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run(args: &[String]) -> Run {
    backfill(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn the_binary_prints_the_job_id_and_json_and_uses_distinct_exit_codes() {
    let case = Tables::new("bin", DDL, DDL);
    case.source
        .sql_in(&case.sdb, "INSERT INTO t (id) SELECT seq FROM seq_1_to_250");

    // Text: only the job id on stdout.
    let out = run(&install_args(
        &case,
        &case.source.url(),
        &["--window-rows", "100", "--page-rows", "10"],
    ));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let job: u64 = out.stdout.trim().parse().expect("a job id on stdout");

    // status, JSON: what install recorded.
    let out = backfill(&[
        "status",
        "--state",
        &case.state_url(),
        &job.to_string(),
        "--format",
        "json",
    ]);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(v["job_id"], job);
    assert_eq!(v["state"], "INSTALLED");
    assert_eq!(v["generation"], 1);
    assert_eq!(v["windows"], 3);
    assert!(v["estimated_rows"].as_u64().is_some(), "{v}");
    assert_eq!(v["source"]["table"], "t");
    let out = backfill(&["status", "--state", &case.state_url()]);
    let line = out
        .stdout
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&job.to_string()))
        .unwrap_or_else(|| panic!("a fleet line of job {job}: {}", out.stdout));
    assert_eq!(
        line.split_whitespace().nth(2),
        Some("INSTALLED"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("1 jobs: 1 INSTALLED"), "{}", out.stdout);

    // A second install of the live table is refused: exit 3, the reason on stderr.
    case.target
        .sql_in(&case.tdb, &DDL.replace("CREATE TABLE t", "CREATE TABLE t2"));
    let mut args = install_args(&case, &case.source.url(), &["--format", "json"]);
    args[10] = format!("{}.t2", case.tdb);
    let out = run(&args);
    assert_eq!(out.code, 3, "stdout: {}", out.stdout);
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.contains("already has live generation g1"),
        "{}",
        out.stderr
    );

    // JSON output of a fresh install.
    let other = Tables::new("binjson", DDL, DDL);
    let out = run(&install_args(
        &other,
        &other.source.url(),
        &["--format", "json"],
    ));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert!(v["job_id"].as_u64().is_some(), "{v}");
    assert_eq!(v["generation"], 1);
    assert_eq!(v["windows"], 1);
    assert_eq!(v["fingerprint"].as_str().map(str::len), Some(64));
}

#[test]
fn the_binary_never_prints_a_password_and_exits_3_on_refusal() {
    let case = Tables::new("binpw", DDL, "");
    let (url, _) = user(&case, "pw", &FULL, CTL);
    let out = run(&install_args(&case, &url, &[]));
    assert_eq!(out.code, 3, "stderr: {}", out.stderr);
    let err = out.stderr;
    assert!(
        err.contains("install refused") && err.contains("does not exist"),
        "{err}"
    );
    assert!(
        !err.contains("s3cr3t-pw") && !out.stdout.contains("s3cr3t-pw"),
        "{err}"
    );
}

#[test]
fn the_binary_exits_2_on_usage_errors_and_1_on_runtime_failures() {
    let case = Tables::new("binuse", DDL, DDL);
    let out = run(&install_args(
        &case,
        &case.source.url(),
        &["--window-rows", "10", "--page-rows", "20"],
    ));
    assert_eq!(out.code, 2, "stderr: {}", out.stderr);
    assert!(out.stderr.contains("--page-rows"));
    assert_eq!(backfill(&["install"]).code, 2);
    assert_eq!(backfill(&["no-such-command"]).code, 2);
    let out = backfill(&["status", "--state", &case.state_url(), "999999"]);
    assert_eq!(out.code, 2, "unknown job: {}", out.stderr);

    // Nothing listens on this port: a runtime failure, not a refusal.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("port");
    let dead = format!("mysql://root:hunter2@127.0.0.1:{port}/st");
    let out = backfill(&["status", "--state", &dead]);
    assert_eq!(out.code, 1, "stderr: {}", out.stderr);
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
    // `backfill demo` copies for real now: bootstrap/tests/demo.rs runs it.
}

/// The least-privilege accounts of runbooks/install.md §1, each with exactly the grants
/// the runbook's table lists (the control schema and the state schema are this test's
/// fresh ones, named where the runbook says `backfill_control` and `backfill_state`):
/// install, start and serve through the program as those accounts only, under a writer
/// (root, on the source) of inserts, updates, deletes and key changes, until STREAMING
/// with no pause; then the target caught up equals the source by the independent
/// comparison, and serve never logged a denied privilege.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_grants_run_a_job_to_streaming() {
    use backfill_tests::compare::compare;
    use std::time::{Duration, Instant};
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("grants_s");
    let ctl = format!("{sdb}_ctl");
    let tdb = target.fresh_db("grants_t");
    let state_db = format!("{tdb}_state");
    source.sql_in(&sdb, backfill_tests::case::DDL);
    source.sql_in(
        &sdb,
        "INSERT INTO t SELECT seq, seq, CONCAT('v', seq) FROM seq_1_to_1500",
    );
    // §3: the target table made by hand with the source's definition.
    target.sql_in(&tdb, backfill_tests::case::DDL);
    let pid = std::process::id();
    let pw = "Gr4nts-documented";
    let account = |server: &Server, name: &str, grants: &[String]| {
        let a = format!("'{name}'@'%'");
        server.sql(&format!(
            "DROP USER IF EXISTS {a}; CREATE USER {a} IDENTIFIED BY '{pw}'"
        ));
        for g in grants {
            server.sql(&format!("GRANT {g} TO {a}"));
        }
    };
    let (cap, tgt, st) = (
        format!("cap_{pid}"),
        format!("tgt_{pid}"),
        format!("st_{pid}"),
    );
    // runbooks/install.md §1, row by row (CREATE on the control schema: the first install
    // on this server of that schema creates the control table).
    account(
        source,
        &cap,
        &[
            "BINLOG MONITOR ON *.*".into(),
            "REPLICATION SLAVE ON *.*".into(),
            format!("SELECT ON `{sdb}`.t"),
            format!("INSERT ON `{ctl}`.*"),
            format!("CREATE ON `{ctl}`.*"),
        ],
    );
    account(
        target,
        &tgt,
        &[format!(
            "SELECT, INSERT, UPDATE, DELETE, CREATE ON `{tdb}`.*"
        )],
    );
    account(target, &st, &[format!("ALL ON `{state_db}`.*")]);
    let state = target.url_user(&st, pw, &state_db);
    let job = backfill_tests::install::install_and_start_t(
        &state,
        (&source.url_user(&cap, pw, &sdb), &sdb),
        (&target.url_user(&tgt, pw, &tdb), &tdb),
        &ctl,
    );
    let writer = backfill_tests::workload::Workload::start(source.url_db(&sdb), 1500, 34);
    let data = tempfile::tempdir().unwrap();
    let (out, err) = (data.path().join("serve.out"), data.path().join("serve.err"));
    let mut serve = backfill_tests::command()
        .args(["serve", "--state", &state, "--data-dir"])
        .arg(data.path().join("d"))
        .args(["--owner", "grants-test", "--source"])
        .arg(source.url_user(&cap, pw, ""))
        .arg("--target")
        .arg(target.url_user(&tgt, pw, ""))
        .env("RUST_LOG", "warn")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("spawn backfill serve");
    let logs = || {
        let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
        format!("{}{}", read(&out), read(&err)).replace(pw, "<PW>")
    };
    let t0 = Instant::now();
    loop {
        let s = backfill(&["status", "--state", &state, &job, "--format", "json"]);
        assert_eq!(s.code, 0, "status: {}", s.all());
        let v: serde_json::Value = serde_json::from_str(s.stdout.trim()).expect("json");
        assert!(v["paused"].is_null(), "paused: {v}\n{}", logs());
        if v["phase"] == "STREAMING" {
            break;
        }
        if let Some(e) = serve.try_wait().unwrap() {
            panic!("serve exited with {e} before STREAMING: {v}\n{}", logs());
        }
        if t0.elapsed() > Duration::from_secs(180) {
            let _ = serve.kill();
            panic!("not STREAMING after 180 s: {v}\n{}", logs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let streaming = t0.elapsed();
    let writes = writer.stop().await;
    let t1 = Instant::now();
    let d = loop {
        let d = compare(source, &sdb, target, &tdb, "t", &["id"]);
        if d.is_clean() || t1.elapsed() > Duration::from_secs(60) {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let _ = serve.kill();
    let _ = serve.wait();
    let logs = logs();
    eprintln!(
        "documented grants: STREAMING after {streaming:?} under {} writes {writes:?}; \
         caught up in {:?}: {d}",
        writes.total(),
        t1.elapsed()
    );
    assert!(
        d.is_clean() && d.rows > 0,
        "target equals source: {d}\n{logs}"
    );
    assert!(writes.total() > 0, "the writer committed");
    for denied in ["denied", "1142", "1227", "1044"] {
        assert!(!logs.contains(denied), "serve logged {denied:?}:\n{logs}");
    }
}
