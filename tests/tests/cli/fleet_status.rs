//! `backfill status` for a fleet (issue 17 item 5) against real MariaDB: 200 jobs installed
//! through the library in one state store (FLEET_STATUS_JOBS=1000 for the measurement in
//! bootstrap/BENCH.md), one of them STREAMING, one paused (a DDL between install and B),
//! the rest INSTALLED. The real binary's fleet view has one bounded line per job whose
//! state is the job's real state in J, a summary line counting them, filters by state and
//! table pattern, the same data as JSON, and answers within a few seconds.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::{status_cli, DDL};
use backfill_tests::serving::ServeConfig;
use backfill_tests::{backfill, in_process, init_tracing};
use kernel::ids::{Generation, JobId};
use ledger::journal::Journal;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The longest fleet line (`bf::present::status::fleet::WIDTH`).
const WIDTH: usize = 120;

fn jobs_wanted() -> usize {
    std::env::var("FLEET_STATUS_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

struct Fleet {
    sdb: String,
    state_url: String,
    data: tempfile::TempDir,
    /// Table name per job, in install order (t1 first).
    jobs: Vec<(JobId, Generation, String)>,
}

/// `n` tables of 5 rows on the shared source, empty ones on the target, each installed.
async fn fleet(n: usize) -> Fleet {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("fleet_s");
    let ctl = source.fresh_db("fleet_c");
    let tdb = target.fresh_db("fleet_t");
    let state_url = target.url_db(&format!("{tdb}_state"));
    // In batches: the harness passes SQL as a command-line argument.
    for batch in (1..=n).collect::<Vec<_>>().chunks(100) {
        let (mut src, mut tgt) = (String::new(), String::new());
        for &i in batch {
            let ddl = DDL.replace("TABLE t ", &format!("TABLE t{i} "));
            src.push_str(&format!("{ddl};\n"));
            src.push_str(&match i {
                1 => "INSERT INTO t1 VALUES (1,1,'a'),(2,2,'b'),(3,3,'c'),(4,4,'d'),(5,5,'e');\n"
                    .to_string(),
                _ => format!("INSERT INTO t{i} SELECT * FROM t1;\n"),
            });
            tgt.push_str(&format!("{ddl};\n"));
        }
        source.sql_in(&sdb, &src);
        target.sql_in(&tdb, &tgt);
    }
    let started = Instant::now();
    let tables: Vec<String> = (1..=n).map(|i| format!("t{i}")).collect();
    let at = backfill_tests::install::Each {
        state_url: &state_url,
        source: (source, &sdb),
        target: (target, &tdb),
        control_schema: &ctl,
        window_rows: 2,
        page_rows: 1,
    };
    let jobs = backfill_tests::install::install_each(&at, &tables).await;
    eprintln!("installed {n} jobs in {:?}", started.elapsed());
    Fleet {
        sdb,
        state_url,
        data: tempfile::tempdir().unwrap(),
        jobs,
    }
}

/// Each job's state as J records it (what `status JOB` calls its state).
async fn real_states(f: &Fleet) -> BTreeMap<u64, String> {
    let pool = kernel::state::open(&f.state_url, &Default::default())
        .await
        .unwrap();
    let journal = Journal::new(pool.clone());
    let mut out = BTreeMap::new();
    for (job, g, _) in &f.jobs {
        let state = match journal.head(*job, *g).await.unwrap() {
            None => "INSTALLED".to_string(),
            Some(h) => {
                let phase = format!("{:?}", h.record.phase).to_uppercase();
                match h.record.paused {
                    Some(_) => format!("PAUSED({phase})"),
                    None => phase,
                }
            }
        };
        out.insert(job.0, state);
    }
    pool.close().await;
    out
}

/// The job lines of a text fleet view: (job id, table column, state column, whole line).
fn job_lines(text: &str) -> Vec<(u64, String, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].trim_start().starts_with("JOB "), "{text}");
    lines[1..]
        .iter()
        .take_while(|l| {
            // The summary line follows the jobs: `N jobs: ...` or `N of M jobs: ...`.
            let second = l.split_whitespace().nth(1);
            !matches!(second, Some("jobs:" | "of"))
        })
        .map(|l| {
            let mut w = l.split_whitespace();
            let job = w.next().unwrap().parse().unwrap();
            let table = w.next().unwrap().to_string();
            let state = w.next().unwrap().to_string();
            (job, table, state, l.to_string())
        })
        .collect()
}

/// Runs serve in-process until idle: the started jobs reach STREAMING or pause.
async fn serve_started(f: &Fleet) {
    let mut cfg = ServeConfig::new(&f.state_url, f.data.path().to_path_buf());
    cfg.exit_when_idle = true;
    cfg.finish = Some(backfill_tests::bf::table::replay::ReplayConfig::default());
    cfg.poll = Duration::from_millis(100);
    cfg.reader = |r| {
        r.heartbeat = Duration::from_millis(200);
        r.silence_timeout = Duration::from_secs(5);
    };
    cfg.owner = format!("fleet-{}", std::process::id());
    backfill_tests::case::serve_until_idle(cfg, Duration::from_secs(180)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_view_shows_every_jobs_real_state_on_one_line_and_filters() {
    let _serial = in_process().await;
    init_tracing();
    let n = jobs_wanted();
    let f = fleet(n).await;
    let pool = kernel::state::open(&f.state_url, &Default::default())
        .await
        .unwrap();
    let (streaming, paused) = (f.jobs[0].0, f.jobs[1].0);
    for job in [streaming, paused] {
        backfill_tests::bf::store::commands::start(&pool, job)
            .await
            .unwrap();
    }
    pool.close().await;
    // A DDL between install and B: job 2 pauses with schema_changed.
    harness::shared_source().sql_in(&f.sdb, "ALTER TABLE t2 ADD COLUMN extra INT NULL");
    serve_started(&f).await;
    let real = real_states(&f).await;
    assert_eq!(real[&streaming.0], "STREAMING");
    assert_eq!(real[&paused.0], "PAUSED(INSTALLED)");
    assert_eq!(real.values().filter(|s| *s == "INSTALLED").count(), n - 2);

    let took = Instant::now();
    let text = status_cli(&["--state", &f.state_url]);
    let text_took = took.elapsed();
    let lines = job_lines(&text);
    assert_eq!(lines.len(), n, "one line per job: {text}");
    for ((job, table, state, line), (id, _, name)) in lines.iter().zip(&f.jobs) {
        assert_eq!(*job, id.0, "{line}");
        assert_eq!(*table, format!("{}.{name}", f.sdb), "{line}");
        assert_eq!(*state, real[job], "{line}");
        assert!(line.chars().count() <= WIDTH, "{line}");
    }
    assert!(lines[1].3.contains("schema_changed"), "{}", lines[1].3);
    let summary = text.lines().nth(n + 1).unwrap();
    assert!(
        summary.starts_with(&format!(
            "{n} jobs: {} INSTALLED, 1 STREAMING, 1 PAUSED; total replay lag ",
            n - 2
        )),
        "{summary}"
    );
    assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");

    // Filters: by state, by table pattern, and a state that does not exist.
    let only = |args: &[&str]| -> Vec<u64> {
        let mut a = vec!["--state", f.state_url.as_str()];
        a.extend_from_slice(args);
        job_lines(&status_cli(&a)).iter().map(|l| l.0).collect()
    };
    assert_eq!(only(&["--in-state", "STREAMING"]), [streaming.0]);
    assert_eq!(only(&["--in-state", "paused"]), [paused.0]);
    assert_eq!(only(&["--in-state", "INSTALLED"]).len(), n - 2);
    let pattern = format!("{}.T1?", f.sdb);
    let expected: Vec<u64> = f
        .jobs
        .iter()
        .filter(|(_, _, t)| t.len() == 3 && t.starts_with("t1"))
        .map(|j| j.0 .0)
        .collect();
    assert_eq!(only(&["--table", &pattern]), expected);
    let (code, out, err) =
        backfill(&["status", "--state", &f.state_url, "--in-state", "RUNNING"]).parts();
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("is not a job state") && err.contains("STREAMING"),
        "{err}"
    );

    // JSON: the same jobs and states, and the summary's counts.
    let took = Instant::now();
    let json = status_cli(&["--state", &f.state_url, "--format", "json"]);
    let json_took = took.elapsed();
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), n);
    for j in jobs {
        let id = j["job_id"].as_u64().unwrap();
        assert_eq!(j["state"], real[&id], "{j}");
    }
    assert_eq!(v["summary"]["per_state"]["INSTALLED"], n - 2);
    assert_eq!(v["summary"]["per_state"]["STREAMING"], 1);
    assert_eq!(v["summary"]["per_state"]["PAUSED"], 1);
    let p = jobs.iter().find(|j| j["job_id"] == paused.0).unwrap();
    assert_eq!(p["paused"]["code"], "schema_changed", "{p}");
    eprintln!("fleet status of {n} jobs: text {text_took:?}, json {json_took:?}");
    assert!(
        text_took < Duration::from_secs(5),
        "text took {text_took:?}"
    );
    assert!(
        json_took < Duration::from_secs(5),
        "json took {json_took:?}"
    );
}
