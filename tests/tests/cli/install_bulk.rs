//! Bulk install (issue 17 item 3) through the real `backfill` program on real MariaDB: a
//! schema of 50 tables of mixed keys and types, some that must be refused, installed with
//! one `install --source-table 'db.*' --target-table 'copy.*' --create-target`; then
//! `start --all` and one `serve` take every installed table to STREAMING under a small
//! writer, and every table compares clean with the independent comparator.
use backfill_tests::bf;
use backfill_tests::bin::{backfill, Run};
use backfill_tests::bulk::{schema, writer, REFUSED};
use backfill_tests::compare;
use backfill_tests::keyed::Serving;
use harness::Server;
use kernel::ids::{Generation, JobId};
use ledger::journal::Journal;
use ledger::record::Phase;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `backfill install` of `source` into `target` with the state store `state`; `tables`
/// are the table flags and any other.
fn install(state: &str, source: &Server, target_url: &str, tables: &[&str]) -> Run {
    let source_url = source.url();
    let mut a = vec![
        "install",
        "--state",
        state,
        "--source",
        &source_url,
        "--target",
        target_url,
    ];
    a.extend_from_slice(tables);
    backfill(&a)
}

/// Asserts that the report on stdout starts with `head`.
#[track_caller]
fn reports(r: &Run, head: &str) {
    assert!(r.stdout.starts_with(head), "{}", r.all());
}

fn json(run: &Run) -> Value {
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", run.stdout, run.stderr))
}

/// Waits until J of every job is STREAMING; fails on a pause or when serve exits.
async fn wait_all_streaming(state: &str, jobs: &[(JobId, Generation)], serve: &mut Serving) {
    let pool = kernel::state::open(state, &Default::default())
        .await
        .expect("state store");
    let journal = Journal::new(pool.clone());
    let until = Instant::now() + Duration::from_secs(400);
    loop {
        let mut waiting = Vec::new();
        for (job, g) in jobs {
            let head = journal.head(*job, *g).await.expect("J").map(|h| h.record);
            if let Some(h) = &head {
                assert!(h.paused.is_none(), "job {job} paused: {:?}", h.paused);
            }
            if head.as_ref().map(|h| h.phase) != Some(Phase::Streaming) {
                waiting.push(job.0);
            }
        }
        if waiting.is_empty() {
            pool.close().await;
            return;
        }
        if let Some(s) = serve.0.try_wait().expect("serve status") {
            panic!("serve exited with {s} while jobs {waiting:?} were not STREAMING");
        }
        assert!(
            Instant::now() < until,
            "jobs {waiting:?} not STREAMING in time"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn a_schema_of_fifty_tables_installs_with_one_command_and_streams_clean() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let (sdb, tdb, tables) = schema(source, target);
    let state = target.url_db(&format!("{tdb}_state"));
    let data = tempfile::tempdir().expect("data dir");
    let started = Instant::now();
    let (pattern, copy) = (format!("{sdb}.*"), format!("{tdb}.*"));
    let run = install(
        &state,
        source,
        &target.url(),
        &[
            "--source-table",
            &pattern,
            "--target-table",
            &copy,
            "--create-target",
            "--window-rows",
            "100",
            "--page-rows",
            "50",
            "--format",
            "json",
        ],
    );
    eprintln!(
        "bulk install of 50 tables: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(run.code, 3, "some were refused: {}", run.all());
    let report = json(&run);
    assert_eq!(report["tables"], 50, "{report}");
    the_refusals_are_reported(&report);
    let jobs = installed_jobs(&report, tables.len(), &tdb);
    refused_tables_lost_nothing(target, &tdb);

    start_all(&state, jobs.len());

    let names: Vec<String> = tables.iter().map(|t| t.name.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writing = tokio::spawn(writer(source.url_db(&sdb), names, stop.clone()));
    let serve_started = Instant::now();
    let mut serve = Serving(
        backfill_tests::bin::command()
            .args(["serve", "--state", &state, "--data-dir"])
            .arg(data.path())
            .args(["--owner", "bulk-test", "--max-sessions", "64"])
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn serve"),
    );
    wait_all_streaming(&state, &jobs, &mut serve).await;
    eprintln!(
        "{} tables to STREAMING under the writer: {:.1} s",
        jobs.len(),
        serve_started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::SeqCst);
    let writes = writing.await.expect("writer");
    assert!(writes > 0);
    every_table_compares_clean(source, &sdb, target, &tdb, &tables).await;
    eprintln!(
        "{writes} writer statements; all {} tables compare clean",
        tables.len()
    );
}

fn the_refusals_are_reported(report: &Value) {
    let refused: BTreeMap<String, String> = report["refused"]
        .as_array()
        .expect("refused")
        .iter()
        .map(|r| {
            (
                r["source"]["table"]
                    .as_str()
                    .expect("source table")
                    .to_string(),
                r.to_string(),
            )
        })
        .collect();
    let want: BTreeSet<&str> = REFUSED.iter().map(|r| r.name).collect();
    assert_eq!(
        refused.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        want
    );
    for want in REFUSED {
        let r = &refused[want.name];
        assert!(
            r.contains(want.cause) && r.contains("\"fix\""),
            "{}: {r}",
            want.name
        );
    }
    assert_eq!(
        report["failed"].as_array().map(Vec::len),
        Some(0),
        "{report}"
    );
}

fn installed_jobs(report: &Value, tables: usize, tdb: &str) -> Vec<(JobId, Generation)> {
    let installed = report["installed"].as_array().expect("installed");
    assert_eq!(installed.len(), tables, "{report}");
    let mut jobs = Vec::new();
    for i in installed {
        let name = i["source"]["table"].as_str().expect("source table");
        assert_eq!(i["target"]["table"], name);
        assert_eq!(i["target"]["db"], tdb);
        // Every target was created but the one made by hand, which is used as it is.
        assert_eq!(i["target_created"], name != "int_pk_01", "{i}");
        jobs.push((
            JobId(i["job_id"].as_u64().expect("job_id")),
            Generation(i["generation"].as_u64().expect("generation")),
        ));
    }
    jobs
}

fn refused_tables_lost_nothing(target: &Server, tdb: &str) {
    // Refused tables lost nothing and got nothing: the non-empty target keeps its row, no
    // table was created for a refused source.
    assert_eq!(
        target.sql_in(tdb, "SELECT id, v FROM full_target"),
        "42\t42"
    );
    let missing = target.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{tdb}' \
         AND TABLE_NAME IN ('nokey_a', 'nokey_b', 'prefix_key', 'myisam', 'cascade_child')"
    ));
    assert_eq!(missing, "0");
    // The created targets carry no foreign key and no extra unique key.
    let fks = target.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA = \
         '{tdb}' AND CONSTRAINT_TYPE = 'FOREIGN KEY'"
    ));
    assert_eq!(fks, "0");
    let uniq = target.sql_in(
        tdb,
        "SELECT NON_UNIQUE FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() \
         AND TABLE_NAME = 'types_00' AND INDEX_NAME = 'u_code'",
    );
    assert_eq!(uniq, "1", "extra unique key created non-unique");
}

fn start_all(state: &str, jobs: usize) {
    let start = backfill(&[
        "start",
        "--state",
        state,
        "--all",
        "--max-sessions",
        "64",
        "--format",
        "json",
    ]);
    assert_eq!(start.code, 0, "{}", start.all());
    assert_eq!(json(&start)["jobs"].as_array().map(Vec::len), Some(jobs));
    // Nothing left to start: --all starts only jobs not yet started.
    let again = backfill(&["start", "--state", state, "--all"]);
    assert_eq!(again.code, 0, "{}", again.all());
    assert!(again.stdout.contains("no installed job"), "{}", again.all());
}

async fn every_table_compares_clean(
    source: &Server,
    sdb: &str,
    target: &Server,
    tdb: &str,
    tables: &[backfill_tests::bulk::Table],
) {
    let until = Instant::now() + Duration::from_secs(120);
    for t in tables {
        loop {
            let d = compare::compare(source, sdb, target, tdb, &t.name, t.key);
            if d.is_clean() {
                assert!(d.rows > 0, "{}: {d}", t.name);
                break;
            }
            assert!(
                Instant::now() < until,
                "{} never compared clean: {d}",
                t.name
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

#[tokio::test]
async fn lists_patterns_and_mistakes_are_reported() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("bulk_l");
    let tdb = target.fresh_db("bulk_lt");
    let state = target.url_db(&format!("{tdb}_state"));
    for t in ["orders", "order_items", "users"] {
        source.sql_in(
            &sdb,
            &format!("CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB"),
        );
    }
    source.sql_in(&sdb, "CREATE TABLE nokey (v INT) ENGINE=InnoDB");
    let dir = tempfile::tempdir().expect("tmp");
    let list = dir.path().join("tables.txt");
    std::fs::write(
        &list,
        format!("# the order tables\n{sdb}.order*\n\n  # and one more\n{sdb}.nokey\n"),
    )
    .expect("list file");
    let base = |extra: &[&str]| install(&state, source, &target.url(), extra);
    // A pattern that matches nothing names the pattern; nothing is installed.
    let nothing = format!("{sdb}.nope_*");
    let copy = format!("{tdb}.*");
    let r = base(&["--source-table", &nothing, "--target-table", &copy]);
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.stderr.contains("nope_*") && r.stderr.contains("matches no base table"),
        "{}",
        r.all()
    );
    // A literal target for several sources.
    let one = format!("{tdb}.t");
    let r = base(&[
        "--source-tables-from",
        list.to_str().unwrap(),
        "--target-table",
        &one,
    ]);
    assert_eq!(r.code, 2, "{}", r.all());
    assert!(
        r.stderr.contains("names one table but 3 source tables"),
        "{}",
        r.all()
    );
    // The list file plus a repeated flag, text report: three installed (targets created,
    // `old_` prefix), one refused with its cause and fix.
    let users = format!("{sdb}.users");
    let old = format!("{tdb}.old_*");
    let r = base(&[
        "--source-tables-from",
        list.to_str().unwrap(),
        "--source-table",
        &users,
        "--target-table",
        &old,
        "--create-target",
    ]);
    assert_eq!(r.code, 3, "{}", r.all());
    reports(&r, "installed 3 of 4 tables\n");
    for t in ["order_items", "orders", "users"] {
        let line = format!("`{sdb}`.`{t}` -> `{tdb}`.`old_{t}`");
        assert!(r.stdout.contains(&line), "{line} missing:\n{}", r.stdout);
    }
    assert!(r.stdout.contains("(target created)"), "{}", r.stdout);
    assert!(r.stdout.contains("refused 1 of 4 tables"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains(&format!("`{sdb}`.`nokey` -> `{tdb}`.`old_nokey`:")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("fix:"), "{}", r.stdout);
    let made = target.sql_in(&tdb, "SHOW TABLES");
    assert_eq!(made, "old_order_items\nold_orders\nold_users");
    // Installed again: every table is refused (a live job of each), nothing new created.
    let r = base(&[
        "--source-table",
        &users,
        "--source-table",
        &format!("{sdb}.orders"),
        "--target-table",
        &old,
        "--create-target",
    ]);
    assert_eq!(r.code, 3, "{}", r.all());
    reports(&r, "installed 0 of 2 tables\n");
}

#[tokio::test]
async fn create_target_names_the_missing_grant_and_database() {
    const PW: &str = "bulk-s3cret-pw";
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("bulk_g");
    let tdb = target.fresh_db("bulk_gt");
    let state = target.url_db(&format!("{tdb}_state"));
    source.sql_in(
        &sdb,
        "CREATE TABLE a (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB; \
         CREATE TABLE b (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB",
    );
    target.sql(&format!(
        "CREATE USER IF NOT EXISTS 'bf_bulk_nocreate'@'%' IDENTIFIED BY '{PW}'; \
         GRANT SELECT, INSERT, UPDATE, DELETE ON `{tdb}`.* TO 'bf_bulk_nocreate'@'%'"
    ));
    let all = format!("{sdb}.*");
    let install = |target_url: &str, target_table: &str| {
        let flags = [
            "--source-table",
            &all,
            "--target-table",
            target_table,
            "--create-target",
        ];
        install(&state, source, target_url, &flags)
    };
    let limited = target.url_user("bf_bulk_nocreate", PW, "");
    let r = install(&limited, &format!("{tdb}.*"));
    assert_eq!(r.code, 3, "{}", r.all());
    reports(&r, "installed 0 of 2 tables\n");
    assert_eq!(
        r.stdout
            .matches("cannot be created by the target user")
            .count(),
        2
    );
    assert!(
        r.stdout.contains(&format!(
            "GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON `{tdb}`.*"
        )),
        "{}",
        r.all()
    );
    assert!(!r.all().contains(PW), "the password leaked:\n{}", r.all());
    assert_eq!(target.sql_in(&tdb, "SHOW TABLES"), "");
    // A target database that does not exist is named, with the statement that creates it.
    let r = install(&target.url(), "bulk_no_such_db.*");
    assert_eq!(r.code, 3, "{}", r.all());
    assert!(
        r.stdout
            .contains("database `bulk_no_such_db` does not exist on the target")
            && r.stdout.contains("CREATE DATABASE `bulk_no_such_db`"),
        "{}",
        r.all()
    );
    // Granted CREATE, the same command installs both.
    target.sql(&format!(
        "GRANT CREATE ON `{tdb}`.* TO 'bf_bulk_nocreate'@'%'"
    ));
    let r = install(&limited, &format!("{tdb}.*"));
    assert_eq!(r.code, 0, "{}", r.all());
    reports(&r, "installed 2 of 2 tables\n");
}

/// `--create-target` copies the source's definition: every DEFAULT (literals, ENUM, BIT,
/// an expression, CURRENT_TIMESTAMP), ON UPDATE and AUTO_INCREMENT, a prefix index, and a
/// second unique key as a plain index (DESIGN §17); both `verify`'s definition check and
/// the tests' comparator find the two definitions equal.
#[tokio::test]
async fn create_target_copies_defaults_on_update_and_auto_increment() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("bulk_def");
    let tdb = target.fresh_db("bulk_deft");
    let state = target.url_db(&format!("{tdb}_state"));
    source.sql_in(
        &sdb,
        "CREATE TABLE t (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, \
         a VARCHAR(10) NOT NULL DEFAULT 'x''y', b INT NULL DEFAULT 7, \
         c TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6), \
         e ENUM('p','q') NULL DEFAULT 'q', f BIT(3) NULL DEFAULT b'101', \
         g INT NULL DEFAULT (b + 1), i DECIMAL(5,2) NOT NULL DEFAULT -1.5, n INT NULL, \
         UNIQUE KEY u_a (a), KEY p_a (a(4), b)) ENGINE=InnoDB",
    );
    let flags = [
        "--source-table",
        &format!("{sdb}.t"),
        "--target-table",
        &format!("{tdb}.t"),
        "--create-target",
    ];
    let r = install(&state, source, &target.url(), &flags);
    assert_eq!(r.code, 0, "{}", r.all());
    let q = |s: &Server, db: &str| {
        s.sql(&format!(
            "SELECT GROUP_CONCAT(CONCAT(COLUMN_NAME, ':', EXTRA, ':', IFNULL(COLUMN_DEFAULT, '-')) \
             ORDER BY ORDINAL_POSITION SEPARATOR ' ') FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = 't'"
        ))
    };
    let made = q(target, &tdb);
    assert_eq!(made, q(source, &sdb), "the target's columns");
    assert!(made.contains("id:auto_increment:-"), "{made}");
    assert!(
        made.contains("c:on update current_timestamp(6):current_timestamp(6)"),
        "{made}"
    );
    let d = compare::compare(source, &sdb, target, &tdb, "t", &["id"]);
    assert!(d.is_clean(), "{d}");
    let src = bf::verify::Endpoint::from_url(&source.url(), &sdb, "t").unwrap();
    let tgt = bf::verify::Endpoint::from_url(&target.url(), &tdb, "t").unwrap();
    let mut cursor = bf::verify::VerifyCursor::start();
    let opts = bf::verify::VerifyOptions::default();
    let v = bf::verify::verify(&src, &tgt, &["id"], &opts, &mut cursor)
        .await
        .unwrap();
    assert!(v.schema_differences.is_empty(), "{v}");
    assert!(v.is_clean(), "{v}");
    src.pool.disconnect().await.unwrap();
    tgt.pool.disconnect().await.unwrap();
}

/// `--create-target` keeps INVISIBLE columns INVISIBLE, with the source's default (MariaDB
/// refuses a NOT NULL INVISIBLE column without one, 4106): before, the created target
/// showed them to every `SELECT *`.
#[tokio::test]
async fn create_target_keeps_invisible_columns_invisible() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("bulk_inv");
    let tdb = target.fresh_db("bulk_invt");
    let state = target.url_db(&format!("{tdb}_state"));
    source.sql_in(
        &sdb,
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v INT NULL, \
         hid INT NULL INVISIBLE, hn INT NOT NULL DEFAULT 7 INVISIBLE, \
         hs VARCHAR(8) NOT NULL DEFAULT 'x''y' INVISIBLE) ENGINE=InnoDB",
    );
    let flags = [
        "--source-table",
        &format!("{sdb}.t"),
        "--target-table",
        &format!("{tdb}.t"),
        "--create-target",
    ];
    let r = install(&state, source, &target.url(), &flags);
    assert_eq!(r.code, 0, "{}", r.all());
    let q = |s: &Server, db: &str| {
        s.sql(&format!(
            "SELECT GROUP_CONCAT(CONCAT(COLUMN_NAME, ':', EXTRA, ':', IFNULL(COLUMN_DEFAULT, '-')) \
             ORDER BY ORDINAL_POSITION SEPARATOR ' ') FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = 't'"
        ))
    };
    let made = q(target, &tdb);
    assert_eq!(made, q(source, &sdb), "the target's columns");
    assert!(made.contains("hn:INVISIBLE:7"), "{made}");
    // A plain SELECT * shows what the source's shows.
    target.sql_in(&tdb, "INSERT INTO t (id, v) VALUES (1, 2)");
    assert_eq!(target.sql_in(&tdb, "SELECT * FROM t"), "1\t2");
    assert_eq!(target.sql_in(&tdb, "SELECT hn, hs FROM t"), "7\tx'y");
}

/// A server-level refusal (here the account may not read the binlog) is read once for the
/// whole command (`install::shared`) and listed under every table it refuses, with its fix;
/// nothing is installed or created.
#[tokio::test]
async fn a_server_level_refusal_is_listed_under_every_table() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("bulk_r");
    let tdb = target.fresh_db("bulk_rt");
    let state = target.url_db(&format!("{tdb}_state"));
    let ctl = kernel::control::DEFAULT_SCHEMA;
    for sql in kernel::control::create_statements(ctl) {
        source.sql(&sql);
    }
    for t in ["a", "b", "c"] {
        source.sql_in(
            &sdb,
            &format!("CREATE TABLE {t} (id BIGINT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB"),
        );
    }
    let name = format!("u_bulk_repl_{}", std::process::id());
    let account = format!("'{name}'@'%'");
    source.sql(&format!(
        "DROP USER IF EXISTS {account}; CREATE USER {account} IDENTIFIED BY 'bulk-pw'; \
         GRANT SELECT ON `{sdb}`.* TO {account}; GRANT BINLOG MONITOR ON *.* TO {account}; \
         GRANT INSERT ON `{ctl}`.* TO {account}"
    ));
    let r = backfill(&[
        "install",
        "--state",
        &state,
        "--source",
        &source.url_user(&name, "bulk-pw", ""),
        "--target",
        &target.url(),
        "--source-table",
        &format!("{sdb}.*"),
        "--target-table",
        &format!("{tdb}.*"),
        "--create-target",
    ]);
    assert_eq!(r.code, 3, "{}", r.all());
    reports(&r, "installed 0 of 3 tables\n");
    assert!(r.stdout.contains("refused 3 of 3 tables"), "{}", r.stdout);
    let fix = format!("GRANT REPLICATION SLAVE ON *.* TO {account}");
    assert_eq!(r.stdout.matches(&fix).count(), 3, "{}", r.stdout);
    for t in ["a", "b", "c"] {
        let line = format!("`{sdb}`.`{t}` -> `{tdb}`.`{t}`:");
        assert!(r.stdout.contains(&line), "{line} missing:\n{}", r.stdout);
    }
    assert!(!r.all().contains("bulk-pw"), "the password leaked");
    assert_eq!(target.sql_in(&tdb, "SHOW TABLES"), "", "nothing created");
}

/// The foreign keys a bulk install reads once for the command (`install::shared`): a
/// source child whose key cascades from a parent of another schema, and a target table
/// that a table of another target schema references, are each refused naming the key; the
/// other tables install. (Before, each table scanned every schema's constraints: a bulk
/// install was quadratic in the table count.)
#[tokio::test]
async fn foreign_keys_of_both_sides_are_refused_when_read_once_for_the_command() {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let (sdb, other) = (source.fresh_db("bulk_fk"), source.fresh_db("bulk_fko"));
    let (tdb, tother) = (target.fresh_db("bulk_fkt"), target.fresh_db("bulk_fkto"));
    let state = target.url_db(&format!("{tdb}_state"));
    source.sql_in(
        &other,
        "CREATE TABLE parent (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB",
    );
    source.sql_in(
        &sdb,
        &format!(
            "CREATE TABLE child (id BIGINT NOT NULL PRIMARY KEY, p BIGINT NULL, \
             CONSTRAINT fk_cascade FOREIGN KEY (p) REFERENCES `{other}`.parent (id) \
             ON DELETE CASCADE) ENGINE=InnoDB; \
             CREATE TABLE referenced (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB; \
             CREATE TABLE plain (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB"
        ),
    );
    target.sql_in(
        &tdb,
        "CREATE TABLE referenced (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB",
    );
    target.sql_in(
        &tother,
        &format!(
            "CREATE TABLE points_in (id BIGINT NOT NULL PRIMARY KEY, r BIGINT NULL, \
             CONSTRAINT fk_in FOREIGN KEY (r) REFERENCES `{tdb}`.referenced (id)) ENGINE=InnoDB"
        ),
    );
    let r = install(
        &state,
        source,
        &target.url(),
        &[
            "--source-table",
            &format!("{sdb}.*"),
            "--target-table",
            &format!("{tdb}.*"),
            "--create-target",
            "--format",
            "json",
        ],
    );
    assert_eq!(r.code, 3, "{}", r.all());
    let report = json(&r);
    let installed: Vec<&str> = report["installed"]
        .as_array()
        .expect("installed")
        .iter()
        .map(|i| i["source"]["table"].as_str().expect("table"))
        .collect();
    assert_eq!(installed, ["plain"], "{report}");
    let refused = report["refused"].to_string();
    assert!(refused.contains("fk_cascade"), "{report}");
    assert!(
        refused.contains("fk_in") && refused.contains("points_in"),
        "the target referenced from another schema: {report}"
    );
}
