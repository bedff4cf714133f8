//! No password reaches any output (DESIGN §13, issue 8): install, start, serve, status
//! (text and JSON), audit and verify (quiescent and pinned) run as the real binary at debug log level with URLs
//! that carry a password, plus error paths (a bad URL, an unreachable server, a refused
//! login, `--help` with the URL in the environment); every stdout and stderr is searched
//! for the password and must not contain it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::Run;

const PW: &str = "Zq7sEcReTpw41x";
const USER: &str = "bf_secret_user";

/// `backfill ARGS` at debug level with `env` set; returns its exit code and a transcript
/// of what it printed (the command line itself carries the password: only what the
/// program printed counts).
fn logged(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let mut c = backfill_tests::command();
    c.args(args)
        .env("RUST_LOG", "debug")
        .env("RUST_BACKTRACE", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let r = Run::of(&mut c);
    let out = format!(
        "--- stdout of {}\n{}\n--- stderr\n{}\n",
        args.first().copied().unwrap_or(""),
        r.stdout,
        r.stderr
    );
    (r.code, out)
}

fn url(port: u16, db: &str) -> String {
    format!("mysql://{USER}:{PW}@127.0.0.1:{port}/{db}")
}

#[test]
fn no_password_in_any_output_at_debug_level() {
    let source = harness::shared_source();
    let target = harness::shared_target();
    for s in [source, target] {
        s.sql(&format!(
            "CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PW}'; \
             GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%'"
        ));
    }
    let sdb = source.fresh_db("sec_s");
    let ctl = source.fresh_db("sec_c");
    let tdb = target.fresh_db("sec_t");
    let state_db = format!("{tdb}_state");
    let ddl = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NULL) ENGINE=InnoDB";
    source.sql_in(&sdb, ddl);
    target.sql_in(&tdb, ddl);
    source.sql_in(
        &sdb,
        "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_3000",
    );
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let state = url(target.port(), &state_db);
    let src = url(source.port(), "");
    let tgt = url(target.port(), "");
    let src = src.trim_end_matches('/');
    let tgt = tgt.trim_end_matches('/');
    let mut all = String::new();
    let mut run = |args: &[&str], env: &[(&str, &str)], want: i32| {
        let (code, out) = logged(args, env);
        // want < 0: any failure.
        let ok = if want < 0 { code > 0 } else { code == want };
        assert!(ok, "exit {code} (want {want}) {}", out.replace(PW, "<PW>"));
        all.push_str(&out);
        out
    };
    let out = run(
        &[
            "install",
            "--state",
            &state,
            "--source",
            src,
            "--source-table",
            &format!("{sdb}.t"),
            "--target",
            tgt,
            "--target-table",
            &format!("{tdb}.t"),
            "--control-schema",
            &ctl,
            "--window-rows",
            "1000",
            "--page-rows",
            "500",
        ],
        &[],
        0,
    );
    let job = out
        .lines()
        .skip_while(|l| !l.starts_with("--- stdout"))
        .nth(1)
        .unwrap()
        .trim()
        .to_string();
    run(&["start", "--state", &state, &job], &[], 0);
    let out = run(
        &["serve", "--data-dir", &data_dir, "--exit-when-idle"],
        &[
            ("BACKFILL_STATE", &state),
            ("BACKFILL_SOURCE", src),
            ("BACKFILL_TARGET", tgt),
        ],
        0,
    );
    assert!(out.contains("Streaming"), "{}", out.replace(PW, "<PW>"));
    run(&["status", "--state", &state], &[], 0);
    run(
        &["status", "--state", &state, &job, "--format", "json"],
        &[],
        0,
    );
    run(
        &[
            "audit",
            "--state",
            &state,
            &job,
            "--data-dir",
            &data_dir,
            "--target",
            tgt,
        ],
        &[],
        0,
    );
    run(
        &[
            "verify", "--state", &state, &job, "--source", src, "--target", tgt,
        ],
        &[],
        0,
    );
    // Pinned: this command runs its own capture reader and replay with the URLs.
    run(
        &[
            "verify", "--state", &state, &job, "--source", src, "--target", tgt, "--pinned",
        ],
        &[],
        0,
    );
    // Error paths: a URL that does not parse, a server that is not there, a refused login
    // of a user without privileges and of a wrong password, help with secrets in the env.
    let bad_port = format!("mysql://{USER}:{PW}@127.0.0.1:notaport/x");
    run(&["status", "--state", &bad_port], &[], 2);
    let closed = format!("mysql://{USER}:{PW}@127.0.0.1:1/x");
    run(&["status", "--state", &closed], &[], -1);
    target.sql(&format!(
        "CREATE USER IF NOT EXISTS 'bf_secret_noperm'@'%' IDENTIFIED BY '{PW}'"
    ));
    let denied = format!(
        "mysql://bf_secret_noperm:{PW}@127.0.0.1:{}/{state_db}",
        target.port()
    );
    run(&["status", "--state", &denied], &[], -1);
    let wrong = format!(
        "mysql://{USER}:{PW}x@127.0.0.1:{}/{state_db}",
        target.port()
    );
    run(&["status", "--state", &wrong], &[], -1);
    run(
        &["install", "--help"],
        &[("BACKFILL_SOURCE", src), ("BACKFILL_STATE", &state)],
        0,
    );
    run(
        &["install", "--source-table", "a.b"],
        &[("BACKFILL_SOURCE", src), ("BACKFILL_STATE", &state)],
        2,
    );
    // A panic whose message quotes a URL (the hook prints it redacted; DESIGN §13).
    let quoted = format!("cannot go on with {src} and {tgt}");
    let out = run(
        &["status", "--state", &state],
        &[("BACKFILL_TEST_PANIC", &quoted)],
        -1,
    );
    assert!(
        out.contains("internal error"),
        "{}",
        out.replace(PW, "<PW>")
    );
    assert!(all.contains("***"), "redacted URLs are expected somewhere");
    let hits: Vec<&str> = all.lines().filter(|l| l.contains(PW)).collect();
    assert!(
        hits.is_empty(),
        "the password leaked in {} line(s):\n{}",
        hits.len(),
        hits.join("\n").replace(PW, "<PW>")
    );
}
