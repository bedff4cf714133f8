//! Any table name MariaDB allows (issue 39 item 3), through the real `backfill` program:
//! tables whose names hold a dot, a double quote, a backquote, a space, `$`, non-ASCII
//! letters, and the Debezium special-characters fixture's name, are installed by a pattern
//! (`db.*`, unquoted), and a table of the same name in a second database by backquoted
//! parts into another odd name (`` `db2`.`we.ird"name` `` -> `` `db3`.`copy.of``it` ``); `start --all`, one
//! `serve`, a writer changing every table (inserts, updates, deletes, key changes) while the
//! tables copy and stream; then every table compares clean with the independent
//! comparator, `audit` passes and `verify` is clean for every job, and `status` prints
//! each name quoted, unambiguous (the job detail and the fleet view).
use backfill_tests::bin::{backfill, Run};
use backfill_tests::compare::{self, ident};
use backfill_tests::keyed::Serving;
use harness::Server;
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The names, each as MariaDB stores it.
const NAMES: [&str; 6] = [
    "we.ird\"name",
    "back`tick",
    "with space",
    "dollar$sign",
    "ünïcødé_表",
    "special\"[`]$'",
];
/// The table installed by backquoted parts (from a second database), and its target.
const LITERAL: (&str, &str) = ("we.ird\"name", "copy.of`it");
const ROWS: u32 = 1_200;

fn json(run: &Run) -> Value {
    serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", run.all()))
}

/// `` `db`.`table` `` with backquotes doubled, as a user types it.
fn quoted(db: &str, table: &str) -> String {
    format!("{}.{}", ident(db), ident(table))
}

fn install(state: &str, urls: (&str, &str), tables: (&str, &str), ctl: &str) -> Value {
    let r = backfill(&[
        "install",
        "--state",
        state,
        "--source",
        urls.0,
        "--source-table",
        tables.0,
        "--target",
        urls.1,
        "--target-table",
        tables.1,
        "--create-target",
        "--control-schema",
        ctl,
        "--window-rows",
        "500",
        "--page-rows",
        "200",
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 0, "install {tables:?}: {}", r.all());
    json(&r)
}

/// The job ids of a bulk install's report, by source table name.
fn jobs_of(report: &Value) -> Vec<(String, String)> {
    report["installed"]
        .as_array()
        .unwrap_or_else(|| panic!("installed: {report}"))
        .iter()
        .map(|i| {
            (
                i["source"]["table"].as_str().expect("table").to_string(),
                i["job_id"].as_u64().expect("job_id").to_string(),
            )
        })
        .collect()
}

/// Inserts, updates, deletes and key changes on every table, one statement each 10 ms,
/// every error failing the test; returns the statements committed.
async fn writer(url: String, dbs: [String; 2], stop: Arc<AtomicBool>) -> u64 {
    let mut conn = mysql_async::Conn::from_url(url.as_str())
        .await
        .expect("writer connects");
    let mut rng = rand::rngs::StdRng::seed_from_u64(39);
    let (mut next, mut done) = (100_000_u32, 0);
    while !stop.load(Ordering::SeqCst) {
        let i = rng.random_range(0..=NAMES.len());
        let t = match NAMES.get(i) {
            Some(name) => quoted(&dbs[0], name),
            None => quoted(&dbs[1], LITERAL.0),
        };
        let id = rng.random_range(1..=ROWS);
        next += 1;
        let sql = match rng.random_range(0..4) {
            0 => format!("INSERT INTO {t} VALUES ({next}, 'ins {next}')"),
            1 => format!("UPDATE {t} SET v = CONCAT(v, '+') WHERE id = {id}"),
            2 => format!("DELETE FROM {t} WHERE id = {id}"),
            _ => format!("UPDATE IGNORE {t} SET id = {next} WHERE id = {id}"),
        };
        conn.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        done += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    done
}

async fn wait_streaming(state: &str, jobs: &[String], serve: &mut Serving) {
    let until = Instant::now() + Duration::from_secs(300);
    for job in jobs {
        loop {
            let st = backfill(&["status", "--state", state, job, "--format", "json"]);
            if st.stdout.contains("\"phase\":\"STREAMING\"") {
                break;
            }
            assert!(!st.stdout.contains("\"paused\":true"), "{}", st.all());
            if let Ok(Some(s)) = serve.0.try_wait() {
                panic!("serve exited ({s}) before job {job} streamed: {}", st.all());
            }
            assert!(Instant::now() < until, "job {job}: {}", st.all());
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// Every (source db, target db, source name, target name) compares clean, waiting for
/// the replay to catch up.
async fn compare_clean(source: &Server, target: &Server, pairs: &[(String, String, &str, &str)]) {
    let until = Instant::now() + Duration::from_secs(120);
    for (sdb, tdb, name, tname) in pairs {
        loop {
            let d = compare::compare_tables(source, (sdb, name), target, (tdb, tname), &["id"]);
            if d.is_clean() {
                assert!(d.rows > 0, "{name}: {d}");
                break;
            }
            assert!(Instant::now() < until, "{name} -> {tname}: {d}");
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn odd_table_names_install_copy_stream_audit_and_verify_clean() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("odd_s");
    let sdb2 = source.fresh_db("odd_s2");
    let ctl = source.fresh_db("odd_c");
    let tdb = target.fresh_db("odd_t");
    let lit_db = format!("{tdb}_lit");
    target.sql(&format!("CREATE DATABASE {}", ident(&lit_db)));
    let state = target.url_db(&format!("{tdb}_state"));
    for (db, name) in NAMES.iter().map(|n| (&sdb, *n)).chain([(&sdb2, LITERAL.0)]) {
        source.sql_in(
            db,
            &format!(
                "CREATE TABLE {} (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(200) NULL) \
                 ENGINE=InnoDB; INSERT INTO {0} SELECT seq, CONCAT('row ', seq) FROM \
                 seq_1_to_{ROWS}",
                ident(name)
            ),
        );
    }
    let urls = (source.url(), target.url());
    let urls = (urls.0.as_str(), urls.1.as_str());
    let bulk = install(
        &state,
        urls,
        (&format!("{sdb}.*"), &format!("{tdb}.*")),
        &ctl,
    );
    let mut jobs = jobs_of(&bulk);
    jobs.sort();
    let mut names: Vec<String> = NAMES.iter().map(|n| n.to_string()).collect();
    names.sort();
    assert_eq!(
        jobs.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        names,
        "the pattern installed every odd name: {bulk}"
    );
    let lit = install(
        &state,
        urls,
        (&quoted(&sdb2, LITERAL.0), &quoted(&lit_db, LITERAL.1)),
        &ctl,
    );
    assert_eq!(lit["target"]["table"], LITERAL.1, "{lit}");
    assert_eq!(lit["source"]["table"], LITERAL.0, "{lit}");
    let lit_job = lit["job_id"].as_u64().expect("job_id").to_string();
    let start = backfill(&["start", "--state", &state, "--all"]);
    assert_eq!(start.code, 0, "{}", start.all());

    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writer(
        source.url_db(&sdb),
        [sdb.clone(), sdb2.clone()],
        stop.clone(),
    ));
    let data = tempfile::tempdir().expect("tmp");
    let mut serve = Serving(
        backfill_tests::bin::command()
            .args(["serve", "--state", &state, "--data-dir"])
            .arg(data.path())
            .args(["--owner", "odd-names"])
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn serve"),
    );
    let mut all: Vec<String> = jobs.iter().map(|(_, j)| j.clone()).collect();
    all.push(lit_job.clone());
    wait_streaming(&state, &all, &mut serve).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    let writes = writing.await.expect("writer");
    assert!(writes > 50, "{writes} writes");
    let mut pairs: Vec<(String, String, &str, &str)> = NAMES
        .iter()
        .map(|n| (sdb.clone(), tdb.clone(), *n, *n))
        .collect();
    pairs.push((sdb2.clone(), lit_db.clone(), LITERAL.0, LITERAL.1));
    compare_clean(source, target, &pairs).await;
    drop(serve);

    let (src, tgt) = (source.url(), target.url());
    let lit = (LITERAL.0.to_string(), lit_job);
    for (name, job) in jobs.iter().chain([&lit]) {
        let db = if job == &lit.1 { &sdb2 } else { &sdb };
        let dir = data.path().to_str().expect("utf-8 path");
        let a = backfill(&["audit", job, "--state", &state, "--data-dir", dir]);
        assert_eq!(a.code, 0, "audit of {name}: {}", a.all());
        let v = backfill(&[
            "verify", job, "--state", &state, "--source", &src, "--target", &tgt,
        ]);
        assert_eq!(v.code, 0, "verify of {name}: {}", v.all());
        let st = backfill(&["status", "--state", &state, job]);
        assert!(
            st.stdout.contains(&quoted(db, name)),
            "status of job {job} names {}: {}",
            quoted(db, name),
            st.all()
        );
    }
    // The fleet view: every name quoted (its text cuts a long one at 28 characters with
    // `~`; the JSON is whole).
    let fleet = backfill(&["status", "--state", &state]);
    assert_eq!(fleet.code, 0, "{}", fleet.all());
    let cell = fleet_cell(&format!("{sdb}.`we.ird\"name`"));
    assert!(
        fleet.stdout.contains(&cell),
        "the fleet view shows {cell}: {}",
        fleet.stdout
    );
    let fleet = json(&backfill(&[
        "status", "--state", &state, "--format", "json",
    ]));
    let mut shown: Vec<String> = fleet["jobs"]
        .as_array()
        .unwrap_or_else(|| panic!("jobs: {fleet}"))
        .iter()
        .map(|j| j["source"].as_str().expect("source").to_string())
        .collect();
    shown.sort();
    let mut expected: Vec<String> = NAMES
        .iter()
        .map(|n| format!("{sdb}.{}", ident(n)))
        .chain([format!("{sdb2}.{}", ident(LITERAL.0))])
        .collect();
    expected.sort();
    assert_eq!(shown, expected, "{fleet}");
    eprintln!(
        "{} odd names copied, streamed and verified clean under {writes} writes",
        NAMES.len() + 1
    );
}

/// What the fleet text's 28-character TABLE column shows for `name`: whole, or its first
/// 27 characters and `~` (the schema names of this test grow with the run's ids, so a
/// CI machine's can be longer than a workstation's).
fn fleet_cell(name: &str) -> String {
    if name.chars().count() <= 28 {
        return name.to_string();
    }
    let mut cut: String = name.chars().take(27).collect();
    cut.push('~');
    cut
}
