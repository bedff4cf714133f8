//! `serve --source/--target` URLs match jobs by server and account, not by database path
//! (issue 17): two jobs of two databases on one source, installed with URLs naming their
//! databases and a password, are served by ONE source URL and one target URL without a
//! database path; both reach STREAMING and compare clean with the independent comparator.
//! Before that, a serve whose `--source` names only another server refuses both jobs at
//! once with the server (host:port, user, never the password) and the flag to pass, not
//! ERROR 1045's "grant the missing privilege", and loses nothing: the same jobs then run.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::compare::compare;
use backfill_tests::install::install_and_start_t;
use backfill_tests::Run;
use std::time::{Duration, Instant};

const PW: &str = "Url7sErvErPw";
const USER: &str = "bf_url_user";
const DDL: &str =
    "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(32) NULL) ENGINE=InnoDB";

fn run(args: &[&str]) -> Run {
    let mut c = backfill_tests::command();
    c.args(args);
    Run::of(&mut c)
}

#[test]
fn one_url_per_server_serves_every_database_and_a_missing_one_is_named() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    for s in [source, target] {
        s.sql(&format!(
            "CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PW}'; \
             GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'%'"
        ));
    }
    let (sdb1, sdb2) = (source.fresh_db("urls_a"), source.fresh_db("urls_b"));
    let ctl = source.fresh_db("urls_c");
    let (tdb1, tdb2) = (target.fresh_db("urls_ta"), target.fresh_db("urls_tb"));
    let state = target.url_db(&format!("{tdb1}_state"));
    for (i, db) in [&sdb1, &sdb2].into_iter().enumerate() {
        source.sql_in(db, DDL);
        source.sql_in(
            db,
            &format!("INSERT INTO t SELECT seq, CONCAT('v{i}_', seq) FROM seq_1_to_1500"),
        );
    }
    target.sql_in(&tdb1, DDL);
    target.sql_in(&tdb2, DDL);
    let pairs = [(&sdb1, &tdb1), (&sdb2, &tdb2)];
    let mut jobs = Vec::new();
    for (db, tdb) in pairs {
        let (src, tgt) = (
            source.url_user(USER, PW, db),
            target.url_user(USER, PW, tdb),
        );
        jobs.push(install_and_start_t(&state, (&src, db), (&tgt, tdb), &ctl));
    }
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap();
    let target_url = target.url_user(USER, PW, "");
    let serve = |source_url: &str| {
        run(&[
            "serve",
            "--state",
            &state,
            "--data-dir",
            data_dir,
            "--exit-when-idle",
            "--source",
            source_url,
            "--target",
            &target_url,
        ])
    };

    // The only --source URL is for another server: both jobs are refused at once.
    let t0 = Instant::now();
    let wrong = serve(&format!("mysql://{USER}:{PW}@127.0.0.1:1/"));
    let took = t0.elapsed();
    the_other_server_refuses_every_job(&wrong.all(), source, &jobs);
    assert!(took < Duration::from_secs(60), "refusing took {took:?}");

    // One URL per server, without a database path, serves both databases' jobs.
    let ok = serve(&source.url_user(USER, PW, ""));
    let out = ok.all();
    assert_eq!(ok.code, 0, "{}", out.replace(PW, "<PW>"));
    assert!(!out.contains(PW), "the password leaked");
    for job in &jobs {
        let st = run(&["status", "--state", &state, job, "--format", "json"]);
        assert!(
            st.stdout.contains("\"phase\":\"STREAMING\""),
            "job {job}: {}",
            st.all()
        );
    }
    for (db, tdb) in pairs {
        let d = compare(source, db, target, tdb, "t", &["id"]);
        assert!(d.is_clean() && d.rows == 1500, "{db}.t -> {tdb}.t: {d}");
    }
}

fn the_other_server_refuses_every_job(out: &str, source: &harness::Server, jobs: &[String]) {
    let server = format!("127.0.0.1:{}", source.port());
    for job in jobs {
        assert!(
            out.contains(&format!(
                "job {job}'s source is on the server {server} as user `{USER}`"
            )),
            "{}",
            out.replace(PW, "<PW>")
        );
    }
    assert!(
        out.contains(&format!("--source 'mysql://{USER}:PASSWORD@{server}/'")),
        "{out}"
    );
    assert!(
        !out.contains(PW),
        "the password leaked: {}",
        out.replace(PW, "<PW>")
    );
    assert!(!out.contains("1045") && !out.contains("grant"), "{out}");
}
