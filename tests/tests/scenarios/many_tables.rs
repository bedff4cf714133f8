//! Admission with many tables (issue 7, DESIGN §8) against real MariaDB: 40 tables of one
//! source in one state store.
//!
//! * `backfill start` (the binary) refuses the ninth job with the default limit of 8
//!   sessions and says how to raise it; with `--max-sessions 40` every job starts.
//! * One serve with the session limit raised to 40 runs them all to STREAMING while a
//!   sampler reads the servers' own process lists in a loop: on the source, read views are
//!   the connections with an open READ ONLY InnoDB transaction (`INNODB_TRX` joined to
//!   `PROCESSLIST`); on the target, page writes are the open InnoDB transactions of
//!   connections whose default database is the target schema (the page writer's marker,
//!   `bf::table::target_write`). Never more than 2 of either at once, and the sampler did see
//!   both (so the bound is not vacuous).
//! * Three writers (inserts, updates, deletes, key changes; each statement must succeed)
//!   change the tables during serve; after a second serve catches up on their last
//!   writes, every table equals its source by the independent comparison
//!   (`backfill_tests::compare`, not the product's verify); no permit is leaked.
//! * With the limits raised (`--read-windows 4 --target-writes 4`) the 40 tables stream
//!   without a job task ever failing for want of a connection slot: four activations at
//!   once once held all four control connections of the target, each waiting for a
//!   fifth, until the 120 s slot wait failed them (again and again).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::DDL;
use backfill_tests::compare::compare;
use backfill_tests::serving::{self as serve, ServeConfig};
use backfill_tests::workload::Workload;
use backfill_tests::{in_process, init_tracing};
use kernel::ids::{Generation, JobId};
use ledger::journal::Journal;
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const TABLES: usize = 40;
/// Concurrent writers during the first test's serve, spread over the tables.
const WRITERS: usize = 3;
const ROWS: i64 = 200;
/// `information_schema.INNODB_TRX` is a cache that InnoDB refreshes only when nobody read
/// it for 100 ms: sampling faster would read the same stale rows forever.
const SAMPLE_EVERY: Duration = Duration::from_millis(150);

struct World {
    source: &'static harness::Server,
    target: &'static harness::Server,
    sdb: String,
    tdb: String,
    state_url: String,
    jobs: Vec<(JobId, Generation, String)>,
}

async fn world() -> World {
    init_tracing();
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let sdb = source.fresh_db("many_s");
    let ctl = source.fresh_db("many_c");
    let tdb = target.fresh_db("many_t");
    let state_url = target.url_db(&format!("{tdb}_state"));
    let values: Vec<String> = (1..=ROWS).map(|i| format!("({i}, {i}, 'v{i}')")).collect();
    let mut src_sql = String::new();
    let mut tgt_sql = String::new();
    for i in 1..=TABLES {
        let ddl = DDL.replace("TABLE t ", &format!("TABLE t{i} "));
        src_sql.push_str(&format!("{ddl};\n"));
        if i == 1 {
            src_sql.push_str(&format!("INSERT INTO t1 VALUES {};\n", values.join(",")));
        } else {
            src_sql.push_str(&format!("INSERT INTO t{i} SELECT * FROM t1;\n"));
        }
        tgt_sql.push_str(&format!("{ddl};\n"));
    }
    source.sql_in(&sdb, &src_sql);
    target.sql_in(&tdb, &tgt_sql);
    let tables: Vec<String> = (1..=TABLES).map(|i| format!("t{i}")).collect();
    let at = backfill_tests::install::Each {
        state_url: &state_url,
        source: (source, &sdb),
        target: (target, &tdb),
        control_schema: &ctl,
        window_rows: 50,
        page_rows: 10,
    };
    let jobs = backfill_tests::install::install_each(&at, &tables).await;
    World {
        source,
        target,
        sdb,
        tdb,
        state_url,
        jobs,
    }
}

/// `backfill start JOB` through the binary: (exit code, stdout + stderr).
fn start(w: &World, job: JobId, max_sessions: Option<u32>) -> (i32, String) {
    let mut cmd = backfill_tests::command();
    cmd.env_remove("BACKFILL_MAX_SESSIONS").args([
        "start",
        "--state",
        &w.state_url,
        &job.0.to_string(),
    ]);
    if let Some(n) = max_sessions {
        cmd.args(["--max-sessions", &n.to_string()]);
    }
    let out = cmd.output().expect("run backfill start");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// The most read views and page writes seen open at once, and the number of samples.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    read_views: u64,
    page_writes: u64,
    samples: u64,
}

const READ_VIEWS: &str = "SELECT COUNT(*) FROM information_schema.INNODB_TRX x \
     JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id \
     WHERE x.trx_is_read_only = 1";

fn page_writes_sql(tdb: &str) -> String {
    format!(
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX x \
         JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id \
         WHERE p.DB = '{tdb}'"
    )
}

async fn sample(w: &World, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Seen> {
    let open = |url: String| async move {
        mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
            .await
            .unwrap()
    };
    let mut src = open(w.source.url()).await;
    let mut tgt = open(w.target.url()).await;
    let writes = page_writes_sql(&w.tdb);
    tokio::spawn(async move {
        let mut seen = Seen::default();
        while !stop.load(Ordering::SeqCst) {
            let r: Option<u64> = src.query_first(READ_VIEWS).await.unwrap();
            let p: Option<u64> = tgt.query_first(&writes).await.unwrap();
            seen.read_views = seen.read_views.max(r.unwrap_or(0));
            seen.page_writes = seen.page_writes.max(p.unwrap_or(0));
            seen.samples += 1;
            // InnoDB refreshes INNODB_TRX only when it was not read for 100 ms.
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
        let _ = src.disconnect().await;
        let _ = tgt.disconnect().await;
        seen
    })
}

/// Every table STREAMING and equal to its source by the independent comparison
/// (`backfill_tests::compare`: each server renders every row itself, nothing of the
/// product's verify or decoding), with `rows` rows each when no writer changed them.
async fn every_table_streams_clean(w: &World, out: &serve::Outcomes, rows: Option<usize>) {
    let pool = kernel::state::open(&w.state_url, &Default::default())
        .await
        .unwrap();
    let journal = Journal::new(pool.clone());
    for (job, g, table) in &w.jobs {
        let o = out.get(job).cloned().unwrap_or_default();
        let phase = journal
            .head(*job, *g)
            .await
            .unwrap()
            .map(|h| h.record.phase);
        assert_eq!(phase, Some(Phase::Streaming), "{table} (job {job}): {o}");
        let d = compare(w.source, &w.sdb, w.target, &w.tdb, table, &["id"]);
        assert!(d.is_clean() && d.rows > 0, "{table}: {d}");
        if let Some(n) = rows {
            assert_eq!(d.rows, n, "{table}");
        }
    }
    pool.close().await;
}

/// Three writers (`backfill_tests::workload`: inserts, updates, deletes, key changes,
/// multi-statement and rolled-back transactions; every statement must succeed), writer i
/// over the tables t(i+1), t(i+4), ..., each on its own connection.
fn writers(w: &World) -> Vec<Workload> {
    (0..WRITERS)
        .map(|i| {
            let tables: Vec<String> = (1..=TABLES)
                .filter(|t| (t - 1) % WRITERS == i)
                .map(|t| format!("t{t}"))
                .collect();
            let url = w.source.url_db(&w.sdb);
            Workload::across(url, &tables, ROWS, 70 + i as u64, Duration::from_millis(25))
        })
        .collect()
}

fn serve_cfg(w: &World, data: &std::path::Path) -> ServeConfig {
    let mut c = ServeConfig::new(&w.state_url, data.to_path_buf());
    c.exit_when_idle = true;
    c.poll = Duration::from_millis(100);
    c.reader = |r| {
        r.heartbeat = Duration::from_millis(200);
        r.silence_timeout = Duration::from_secs(5);
    };
    c.owner = format!("many-{}", std::process::id());
    c.limits.sessions = TABLES as u32;
    c.finish = Some(ReplayConfig::default());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forty_tables_stream_with_at_most_two_read_views_and_two_page_writes_at_once() {
    let _serial = in_process().await;
    let w = world().await;

    // The default limit: eight starts pass, the ninth is refused with how to raise it.
    for (job, _, _) in &w.jobs[..8] {
        let (code, text) = start(&w, *job, None);
        assert_eq!(code, 0, "start {job}: {text}");
    }
    let (code, text) = start(&w, w.jobs[8].0, None);
    assert_eq!(code, 3, "the ninth start is refused: {text}");
    for hint in [
        "8 execution sessions",
        "--max-sessions",
        "BACKFILL_MAX_SESSIONS",
    ] {
        assert!(text.contains(hint), "{hint:?} in: {text}");
    }
    let (code, text) = start(&w, w.jobs[0].0, None);
    assert_eq!(
        code, 0,
        "starting a started job again is no new session: {text}"
    );
    for (job, _, _) in &w.jobs[8..] {
        let (code, text) = start(&w, *job, Some(TABLES as u32));
        assert_eq!(code, 0, "start {job} with the limit raised: {text}");
    }

    let data = tempfile::tempdir().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(&w, stop.clone()).await;
    let writing = writers(&w);
    let t0 = std::time::Instant::now();
    let out = serve::serve_until_idle(serve_cfg(&w, data.path()), Duration::from_secs(600)).await;
    let took = t0.elapsed();
    stop.store(true, Ordering::SeqCst);
    let seen = sampler.await.unwrap();
    let mut commits = Vec::new();
    for wr in writing {
        commits.push(wr.stop().await);
    }
    eprintln!("process-list samples: {seen:?}");
    eprintln!(
        "serve to idle in {took:?} under {} writer commits: {commits:?}",
        commits.iter().map(|c| c.total()).sum::<u64>()
    );
    for c in &commits {
        assert!(
            c.inserts > 0 && c.updates > 0 && c.deletes > 0 && c.key_changes > 0,
            "each writer inserted, updated, deleted and changed keys: {c:?}"
        );
    }
    // What the writers committed after the jobs' catch-up ends: a second serve applies it.
    let t1 = std::time::Instant::now();
    let again = serve::serve_until_idle(serve_cfg(&w, data.path()), Duration::from_secs(300)).await;
    eprintln!(
        "the second serve caught up in {:?}: {again:?}",
        t1.elapsed()
    );

    assert!(seen.read_views <= 2, "read views at once: {seen:?}");
    assert!(seen.page_writes <= 2, "page writes at once: {seen:?}");
    assert!(
        seen.read_views >= 1,
        "the sampler saw a read view: {seen:?}"
    );
    assert!(
        seen.page_writes >= 1,
        "the sampler saw a page write: {seen:?}"
    );

    every_table_streams_clean(&w, &out, None).await;
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    for kind in admission::PoolKind::ALL {
        let p = snap.pool(kind);
        assert_eq!(p.available, p.capacity, "{kind}: {p:?}");
        assert!(p.holds.is_empty() && p.waiting.is_empty(), "{kind}: {p:?}");
    }
}

/// With read windows and target writes raised to 4, no job task fails for want of a
/// connection slot, and every table streams clean. Four activations at once held the
/// target's four control connections (one each, for the whole activation) while each
/// waited for a fifth (the replay's cursor read): nothing moved until the 120 s slot wait
/// failed them, and the restarted tasks met the same again. An activation now holds a
/// control connection only for its audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raised_limits_never_leave_a_job_waiting_for_a_connection_slot() {
    let _serial = in_process().await;
    backfill_tests::serving::forget();
    let w = world().await;
    for (job, _, _) in &w.jobs {
        let (code, text) = start(&w, *job, Some(TABLES as u32));
        assert_eq!(code, 0, "start {job}: {text}");
    }
    let data = tempfile::tempdir().unwrap();
    let mut cfg = serve_cfg(&w, data.path());
    cfg.limits.read_windows = 4;
    cfg.limits.target_writes = 4;
    let telemetry = cfg.telemetry.clone();
    let out = serve::serve_until_idle(cfg, Duration::from_secs(600)).await;
    let restarts: u64 = telemetry
        .retries()
        .iter()
        .filter(|(kind, _)| kind == "job_task")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        restarts,
        0,
        "job tasks failed and were started again: {:?}",
        telemetry.retries()
    );
    // Process-wide (every test of this binary): no task ever held a control connection
    // while asking for another of the same server (`bf::io::pool::holders`).
    assert_eq!(
        backfill_tests::bf::io::pool::holders::nested_control_waits(),
        0,
        "a task asked for a control connection while holding one (see the error log)"
    );
    every_table_streams_clean(&w, &out, Some(ROWS as usize)).await;
}
