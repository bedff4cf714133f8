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

/// Everything the runs printed, for the final search.
#[derive(Default)]
struct Transcript {
    all: String,
}

impl Transcript {
    /// Runs `backfill ARGS` ([`logged`]), asserts its exit code (`want` < 0: any failure)
    /// and keeps what it printed.
    fn run(&mut self, args: &[&str], env: &[(&str, &str)], want: i32) -> String {
        let (code, out) = logged(args, env);
        let ok = if want < 0 { code > 0 } else { code == want };
        assert!(ok, "exit {code} (want {want}) {}", out.replace(PW, "<PW>"));
        self.all.push_str(&out);
        out
    }
}

/// The URLs (each with the password) of one installed table's servers.
struct Urls {
    state: String,
    state_db: String,
    src: String,
    tgt: String,
    sdb: String,
    tdb: String,
    ctl: String,
}

/// The password user on both servers, a source table of 3000 rows and its empty target.
fn servers() -> Urls {
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
    Urls {
        state: url(target.port(), &state_db),
        src: url(source.port(), "").trim_end_matches('/').to_string(),
        tgt: url(target.port(), "").trim_end_matches('/').to_string(),
        state_db,
        sdb,
        tdb,
        ctl,
    }
}

/// install, start, serve to STREAMING, status (text and JSON), audit and verify
/// (quiescent and pinned), each succeeding.
fn the_happy_path(t: &mut Transcript, u: &Urls, data_dir: &str) {
    let (state, src, tgt) = (u.state.as_str(), u.src.as_str(), u.tgt.as_str());
    let out = t.run(
        &[
            "install",
            "--state",
            state,
            "--source",
            src,
            "--source-table",
            &format!("{}.t", u.sdb),
            "--target",
            tgt,
            "--target-table",
            &format!("{}.t", u.tdb),
            "--control-schema",
            &u.ctl,
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
    let job = job.as_str();
    t.run(&["start", "--state", state, job], &[], 0);
    let out = t.run(
        &["serve", "--data-dir", data_dir, "--exit-when-idle"],
        &[
            ("BACKFILL_STATE", state),
            ("BACKFILL_SOURCE", src),
            ("BACKFILL_TARGET", tgt),
        ],
        0,
    );
    assert!(out.contains("Streaming"), "{}", out.replace(PW, "<PW>"));
    t.run(&["status", "--state", state], &[], 0);
    t.run(
        &["status", "--state", state, job, "--format", "json"],
        &[],
        0,
    );
    t.run(
        &[
            "audit",
            "--state",
            state,
            job,
            "--data-dir",
            data_dir,
            "--target",
            tgt,
        ],
        &[],
        0,
    );
    t.run(
        &[
            "verify", "--state", state, job, "--source", src, "--target", tgt,
        ],
        &[],
        0,
    );
    // Pinned: this command runs its own capture reader and replay with the URLs.
    t.run(
        &[
            "verify", "--state", state, job, "--source", src, "--target", tgt, "--pinned",
        ],
        &[],
        0,
    );
}

/// Error paths: a URL that does not parse, a server that is not there, a refused login
/// of a user without privileges and of a wrong password, help with secrets in the env,
/// and a panic whose message quotes a URL (the hook prints it redacted; DESIGN §13).
fn the_error_paths(t: &mut Transcript, u: &Urls) {
    let target = harness::shared_target();
    let (state, state_db, src, tgt) = (&u.state, &u.state_db, &u.src, &u.tgt);
    let bad_port = format!("mysql://{USER}:{PW}@127.0.0.1:notaport/x");
    t.run(&["status", "--state", &bad_port], &[], 2);
    let closed = format!("mysql://{USER}:{PW}@127.0.0.1:1/x");
    t.run(&["status", "--state", &closed], &[], -1);
    target.sql(&format!(
        "CREATE USER IF NOT EXISTS 'bf_secret_noperm'@'%' IDENTIFIED BY '{PW}'"
    ));
    let denied = format!(
        "mysql://bf_secret_noperm:{PW}@127.0.0.1:{}/{state_db}",
        target.port()
    );
    t.run(&["status", "--state", &denied], &[], -1);
    let wrong = format!(
        "mysql://{USER}:{PW}x@127.0.0.1:{}/{state_db}",
        target.port()
    );
    t.run(&["status", "--state", &wrong], &[], -1);
    t.run(
        &["install", "--help"],
        &[("BACKFILL_SOURCE", src), ("BACKFILL_STATE", state)],
        0,
    );
    t.run(
        &["install", "--source-table", "a.b"],
        &[("BACKFILL_SOURCE", src), ("BACKFILL_STATE", state)],
        2,
    );
    let quoted = format!("cannot go on with {src} and {tgt}");
    let out = t.run(
        &["status", "--state", state],
        &[("BACKFILL_TEST_PANIC", &quoted)],
        -1,
    );
    assert!(
        out.contains("internal error"),
        "{}",
        out.replace(PW, "<PW>")
    );
}

#[test]
fn no_password_in_any_output_at_debug_level() {
    let u = servers();
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_string();
    let mut t = Transcript::default();
    the_happy_path(&mut t, &u, &data_dir);
    the_error_paths(&mut t, &u);
    let all = t.all;
    assert!(all.contains("***"), "redacted URLs are expected somewhere");
    let hits: Vec<&str> = all.lines().filter(|l| l.contains(PW)).collect();
    assert!(
        hits.is_empty(),
        "the password leaked in {} line(s):\n{}",
        hits.len(),
        hits.join("\n").replace(PW, "<PW>")
    );
}
