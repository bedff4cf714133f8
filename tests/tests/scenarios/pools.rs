//! Connections per server (issue 17, DESIGN §17) against real MariaDB: 120 tables of 200
//! rows on one source, one `serve` (the real binary) with the session limit raised to 120,
//! both servers started with `max_connections=40` and the state store on the target.
//!
//! serve connects as its own users (`bf_pool` to source and target, `bf_pool_state` to the
//! state store), so a sampler (root) reads each server's PROCESSLIST every 100 ms and
//! counts exactly serve's connections. At every sample each count stays under the bound
//! of docs/connections.md (defaults: 2 read windows, 2 target writes): 8 on the source
//! (2 read views, 4 control, 1 kill, 1 binlog), 9 on the target (2 writes, 2 field
//! checks, 4 control, 1 kill) and 10 on the state store (8, and 2 for the metrics).
//! Meanwhile `backfill status` (root) answers every second and shows the pools, as the
//! metrics do. At the end every table is STREAMING and compares clean with the
//! independent comparator (`backfill_tests::compare`).
//!
//! A writer (`backfill_tests::workload`: inserts, updates, deletes, primary-key changes,
//! multi-statement and rolled-back transactions) changes random tables
//! (`POOLS_WRITER_RATE` steps/s, default 20) while serve bootstraps; then a second `serve --exit-when-idle` catches up
//! and the tables are compared; then serve runs idle for `POOLS_IDLE_SECS` (default 3) to
//! measure the idle cost (CPU, state-store queries/s; the figure is the last half, and at
//! 1 000 tables the restart's re-audits take about a minute: use 120) and stops on SIGTERM. The sizes are
//! the CI's by default; the acceptance run of issue 17 is
//! `POOLS_TABLES=1000 POOLS_ROWS=1000 POOLS_MAX_CONNECTIONS=151 POOLS_WRITER_RATE=200
//! POOLS_PEER=1 cargo test --release -p backfill-tests --test scenarios a_hundred -- --nocapture`
//! (`POOLS_PEER=1` also times `mariadb-dump --single-transaction | mariadb` of the same
//! database between the same servers, once before our run and once after it, and prints
//! the ratio to the faster of the two; serve's peak RSS, the machine's CPU and each
//! server's statements during serve's run are printed).
//! The tables are installed by one bulk install with `--create-target` (the source tables
//! and their rows are made before the clock starts; the peer, too, creates its tables),
//! with windows of `POOLS_WINDOW_ROWS` rows (default 100: ten windows a table; 0 keeps
//! install's defaults, one window for such a table).
//!
//! `POOLS_SERVE_ARGS` adds serve flags (other admission limits, for a benchmark).
//!
//! The reuse of control connections is `pools_reuse.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::bulk::{install_many, BulkRequest};
use backfill_tests::bf::install::select::{TablePattern, TargetMap};
use backfill_tests::bf::install::{InstallRequest, TableName};
use backfill_tests::bf::store::commands;
use backfill_tests::case::DDL;
use backfill_tests::compare::compare;
use backfill_tests::workload::Workload;
use harness::{Server, ServerOpts};
use kernel::ids::{Generation, JobId};
use ledger::journal::Journal;
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tables() -> usize {
    env("POOLS_TABLES", 120) as usize
}

fn rows() -> i64 {
    env("POOLS_ROWS", 200) as i64
}
const USER: &str = "bf_pool";
/// serve's state-store account (on the target server), counted apart.
const STATE_USER: &str = "bf_pool_state";
const PW: &str = "P00lsPerServer";
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The documented bounds (docs/connections.md) with R read windows and W target writes
/// (2 and 2, or as `POOLS_SERVE_ARGS` sets them): R + 4 + 1 + 1 on the source (read views,
/// control, KILL, binlog), W + R + 4 + 1 on the target (writes, field checks, control,
/// KILL).
fn source_bound() -> u64 {
    serve_limit("--read-windows") + 4 + 1 + 1
}

fn target_bound() -> u64 {
    serve_limit("--target-writes") + serve_limit("--read-windows") + 4 + 1
}

/// `flag`'s value in `POOLS_SERVE_ARGS`, else serve's default (2).
fn serve_limit(flag: &str) -> u64 {
    let args = extra_serve_args();
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}
/// serve's state-store pool (8) and the metrics endpoint's (2).
const STATE_BOUND: u64 = 8 + 2;
/// The server may still list, for a moment, a connection serve has closed (COM_QUIT
/// sent, its slot given back) while the slot's next connection opens: seen as one over
/// the bound in about 1 of 5 runs while serve's own pool counts stayed within it. The
/// gap is named in docs/connections.md and issue 17's note; the sampler allows exactly
/// one such connection per server, and serve's own peaks are checked against the bound
/// exactly (`pool_peaks_within_bounds`).
const CLOSING: u64 = 1;

fn server(opts: ServerOpts) -> Server {
    let max = env("POOLS_MAX_CONNECTIONS", 40);
    let s = Server::start_private(opts.config(format!("max_connections={max}")));
    for u in [USER, STATE_USER] {
        s.sql(&format!(
            "CREATE USER IF NOT EXISTS '{u}'@'%' IDENTIFIED BY '{PW}'; \
             GRANT ALL PRIVILEGES ON *.* TO '{u}'@'%'"
        ));
    }
    s
}

/// serve's connections on a server now: as the source/target account, as the state-store
/// account, and every connection of the server.
async fn count(c: &mut mysql_async::Conn) -> (u64, u64, u64) {
    let q = format!(
        "SELECT COALESCE(SUM(USER = '{USER}'), 0), COALESCE(SUM(USER = '{STATE_USER}'), 0), \
         COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND <> 'Daemon'"
    );
    let r: Option<(u64, u64, u64)> = c.query_first(q).await.unwrap();
    r.unwrap_or((0, 0, 0))
}

/// serve's connections on a server, one a line, for a failure message.
async fn list(c: &mut mysql_async::Conn) -> String {
    let q = format!(
        "SELECT ID, USER, COALESCE(DB, '-'), COMMAND, TIME_MS, COALESCE(STATE, ''), LEFT(COALESCE(INFO, ''), 80) \
         FROM information_schema.PROCESSLIST WHERE USER IN ('{USER}', '{STATE_USER}')"
    );
    match c.query::<mysql_async::Row, _>(q).await {
        Ok(rows) => rows
            .into_iter()
            .map(|r| format!("{:?}\n", r.unwrap()))
            .collect(),
        Err(e) => format!("(cannot list: {e})"),
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    source_peak: u64,
    target_peak: u64,
    state_peak: u64,
    source_all_peak: u64,
    target_all_peak: u64,
    samples: u64,
}

fn sampler(
    source: String,
    target: String,
    addr: String,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let open = |u: String| async move {
            mysql_async::Conn::new(mysql_async::Opts::from_url(&u).unwrap())
                .await
                .unwrap()
        };
        let (mut s, mut t) = (open(source).await, open(target).await);
        let mut seen = Seen::default();
        while !stop.load(Ordering::SeqCst) {
            let (sb, _, sa) = count(&mut s).await;
            let (tb, st, ta) = count(&mut t).await;
            if sb > source_bound() + CLOSING {
                let l = list(&mut s).await;
                let m = pools_of(&addr);
                panic!("serve had {sb} connections on the source: {seen:?}\n{l}{m}");
            }
            if tb > target_bound() + CLOSING || st > STATE_BOUND + CLOSING {
                let l = format!("{}{}", list(&mut t).await, pools_of(&addr));
                panic!("serve had {tb} connections on the target, {st} on the state store: {seen:?}\n{l}");
            }
            seen.source_peak = seen.source_peak.max(sb);
            seen.target_peak = seen.target_peak.max(tb);
            seen.state_peak = seen.state_peak.max(st);
            seen.source_all_peak = seen.source_all_peak.max(sa);
            seen.target_all_peak = seen.target_all_peak.max(ta);
            seen.samples += 1;
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
        let _ = s.disconnect().await;
        let _ = t.disconnect().await;
        seen
    })
}

/// serve's own view of its pools (metrics), for a failure message.
/// serve's own count: each pool's peak is within its capacity, and the capacities per side
/// are the documented bound (the source's plus its binlog connection).
fn pool_peaks_within_bounds(metrics: &str) {
    let series = |name: &str| -> Vec<(String, u64)> {
        metrics
            .lines()
            .filter_map(|l| l.strip_prefix(name))
            .filter_map(|l| {
                let (labels, v) = l.rsplit_once(' ')?;
                Some((labels.to_string(), v.trim().parse::<f64>().ok()? as u64))
            })
            .collect()
    };
    let (caps, peaks) = (
        series("backfill_connections_capacity"),
        series("backfill_connections_peak"),
    );
    assert!(!peaks.is_empty(), "no pool peaks in the metrics: {metrics}");
    for (labels, peak) in &peaks {
        let cap = caps.iter().find(|(l, _)| l == labels).map(|c| c.1);
        assert!(
            cap.is_some_and(|c| *peak <= c),
            "{labels}: peak {peak}, capacity {cap:?}"
        );
    }
    let side = |s: &str| -> u64 {
        caps.iter()
            .filter(|(l, _)| l.contains(&format!("side=\"{s}\"")))
            .map(|c| c.1)
            .sum()
    };
    assert_eq!(side("source") + 1, source_bound(), "{metrics}");
    // The target's R activation field-check sessions are inside read permits, not the pool.
    let field_checks = serve_limit("--read-windows");
    assert_eq!(side("target") + field_checks, target_bound(), "{metrics}");
}

fn pools_of(addr: &str) -> String {
    scrape(addr)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("backfill_connections_in_use"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn scrape(addr: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

/// Waits until no connection of [`USER`] or [`STATE_USER`] is listed on `s`.
async fn none_of_the_account_left(s: &Server) {
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&s.url()).unwrap())
        .await
        .unwrap();
    let what = format!("the installs' connections on port {} to end", s.port());
    backfill_tests::wait_for_async(&what, async || {
        let (a, b, _) = count(&mut c).await;
        a + b == 0
    })
    .await;
    let _ = c.disconnect().await;
}

/// The source tables and their data (not timed: the peer is timed without them too).
/// Returns the source, control and target databases and the state store's URL.
fn world(source: &Server, target: &Server) -> (String, String, String, String) {
    let sdb = source.fresh_db("pools_s");
    let ctl = source.fresh_db("pools_c");
    let tdb = target.fresh_db("pools_t");
    let state = target.url_user(STATE_USER, PW, &format!("{tdb}_state"));
    let values: Vec<String> = (1..=rows())
        .map(|i| format!("({i}, {i}, 'v{i}')"))
        .collect();
    let mut src_sql = String::new();
    for i in 1..=tables() {
        let ddl = DDL.replace("TABLE t ", &format!("TABLE t{i} "));
        src_sql.push_str(&format!("{ddl};\n"));
        match i {
            1 => src_sql.push_str(&format!("INSERT INTO t1 VALUES {};\n", values.join(","))),
            _ => src_sql.push_str(&format!("INSERT INTO t{i} SELECT * FROM t1;\n")),
        }
        // The client takes the SQL as an argument: sent every 100 tables (a thousand
        // tables' statements are over the argument size limit).
        if i % 100 == 0 || i == tables() {
            source.sql_in(&sdb, &std::mem::take(&mut src_sql));
        }
    }
    (sdb, ctl, tdb, state)
}

/// One bulk install of `sdb.t*` into `tdb` with `--create-target` (as an operator runs
/// it, and as the peer creates its own tables), then a start of every job installed.
async fn install_all(
    source: &Server,
    target: &Server,
    (sdb, ctl, tdb, state): (&str, &str, &str, &str),
) -> Vec<(JobId, Generation, String)> {
    let mut base = InstallRequest::new(
        state.to_string(),
        source.url_user(USER, PW, sdb),
        TableName::new(sdb, "t"),
        target.url_user(USER, PW, tdb),
        TableName::new(tdb, "t"),
    );
    // Several windows per table by default (the protocol's steps under the bound);
    // POOLS_WINDOW_ROWS=0 keeps install's default sizes (the benchmark's setting).
    match env("POOLS_WINDOW_ROWS", 100) {
        0 => {}
        w => {
            base.window_rows = w;
            base.page_rows = (w / 2).max(1);
        }
    }
    base.control_schema = ctl.to_string();
    base.create_target = true;
    let req = BulkRequest {
        base,
        sources: vec![TablePattern {
            db: sdb.to_string(),
            table: "t*".into(),
            glob: true,
        }],
        target: TargetMap::Pattern {
            db: tdb.to_string(),
            prefix: String::new(),
            suffix: String::new(),
        },
    };
    let report = install_many(&req).await.unwrap();
    let problems: Vec<String> = report
        .refused()
        .map(|(s, _, r)| format!("{s}: refused {r:?}"))
        .chain(report.failed().map(|(s, _, e)| format!("{s}: {e}")))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
    let pool = kernel::state::open(state, &Default::default())
        .await
        .unwrap();
    let mut jobs = Vec::new();
    for (s, _, done) in report.installed() {
        commands::start_within(&pool, done.job_id, tables() as u32)
            .await
            .unwrap();
        jobs.push((done.job_id, done.generation, s.table.clone()));
    }
    pool.close().await;
    assert_eq!(jobs.len(), tables(), "every table installed");
    jobs
}

/// What the first serve run showed besides the sampler.
#[derive(Debug, Default)]
struct Watched {
    statuses: u32,
    slowest: Duration,
    pools_seen: bool,
    status_pools: bool,
    last_metrics: String,
    peak_rss_mib: f64,
    /// serve's CPU (user + system, ticks of 1/100 s) as last seen, at most a second
    /// before it exited.
    cpu_ticks: u64,
}

/// CPU time of a process so far (user + system, in ticks of 1/100 s; 0 once it is gone).
fn cpu_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = s
        .rsplit_once(')')
        .map_or("", |x| x.1)
        .split_whitespace()
        .collect();
    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
}

/// `VmHWM` of a process in MiB (0 once it is gone).
fn peak_rss_mib(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Runs `backfill status` every second and scrapes the metrics until serve exits.
async fn watch(child: &mut std::process::Child, root_state: &str, addr: &str) -> Watched {
    let (t1, mut w) = (Instant::now(), Watched::default());
    loop {
        if child.try_wait().unwrap().is_some() {
            return w;
        }
        if t1.elapsed() >= Duration::from_secs(1800) {
            // Never left running after the test: it would load the next runs.
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve did not become idle in 1800 s");
        }
        w.peak_rss_mib = w.peak_rss_mib.max(peak_rss_mib(child.id()));
        w.cpu_ticks = w.cpu_ticks.max(cpu_ticks(child.id()));
        let at = Instant::now();
        let r = tokio::task::spawn_blocking({
            let s = root_state.to_string();
            move || {
                backfill_tests::Run::of(backfill_tests::command().args(["status", "--state", &s]))
            }
        })
        .await
        .unwrap();
        if child.try_wait().unwrap().is_none() {
            assert_eq!(r.code, 0, "status while serve runs: {}", r.all());
            w.statuses += 1;
            w.slowest = w.slowest.max(at.elapsed());
            w.status_pools |= r
                .stdout
                .contains(&format!("connections to the source {USER}@"))
                && r.stdout
                    .contains(&format!("connections to the target {USER}@"));
        }
        if let Some(m) = scrape(addr) {
            w.pools_seen |= m.contains("backfill_connections_capacity{side=\"target\"")
                && m.contains("backfill_connections_in_use{side=\"source\"");
            if m.contains("backfill_connections_peak") {
                w.last_metrics = m;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The workload's writer (`backfill_tests::workload`: inserts, updates, deletes, key
/// changes, multi-statement and rolled-back transactions, a large update every 40th step)
/// over every table, each step on a random one, about `rate` steps a second (root, so the
/// sampler does not count it); every statement must succeed.
fn writer(source: &Server, sdb: &str) -> Workload {
    let rate = env("POOLS_WRITER_RATE", 20).max(1);
    let tables: Vec<String> = (1..=tables()).map(|i| format!("t{i}")).collect();
    let pause = Duration::from_secs_f64(1.0 / rate as f64);
    Workload::across(source.url_db(sdb), &tables, rows(), 17, pause)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_and_twenty_tables_stay_under_the_connection_bound_per_server() {
    let (source, target) = (server(ServerOpts::source()), server(ServerOpts::target()));
    let (sdb, ctl, tdb, state) = world(&source, &target);
    // The peer runs before ours too: after ours the servers still settle (purge, the
    // state store's writes), which slows it and would flatter the ratio.
    let peer_first = (env("POOLS_PEER", 0) == 1).then(|| peer_copy(&source, &sdb, &target));
    let t0 = Instant::now();
    let jobs = install_all(&source, &target, (&sdb, &ctl, &tdb, &state)).await;
    let installed = t0.elapsed();
    // The sampler counts the account's connections, whoever holds them: the installs of
    // this test process (same account) must have left none before serve starts.
    none_of_the_account_left(&source).await;
    none_of_the_account_left(&target).await;
    let root_state = target.url_db(&format!("{tdb}_state"));
    let data = tempfile::tempdir().unwrap();
    // POOLS_LOG_DIR keeps serve's output (serve.out, serve.err) for a look afterwards.
    let logs = tempfile::tempdir().unwrap();
    let log = match std::env::var("POOLS_LOG_DIR") {
        Ok(d) => std::path::PathBuf::from(d).join("serve"),
        Err(_) => logs.path().join("serve"),
    };
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let seen = sampler(source.url(), target.url(), addr.clone(), stop.clone());
    let writes = writer(&source, &sdb);
    let t1 = Instant::now();
    let before = Load::now(&source, &target);
    let com_before = com_counts(&target);
    let serve =
        |extra: &[&str]| spawn_serve(&state, data.path(), &log, &source, &target, &addr, extra);
    let mut child = serve(&["--exit-when-idle"]);
    let w = watch(&mut child, &root_state, &addr).await;
    let ran = t1.elapsed();
    let load = Load::now(&source, &target).since(&before);
    stop.store(true, Ordering::SeqCst);
    let (seen, writes) = (seen.await.unwrap(), writes.stop().await);
    let exit = child.wait().unwrap();
    let (out, err) = output(&log);
    assert!(
        exit.success(),
        "serve: {exit}\n{out}\n{}",
        err.replace(PW, "<PW>")
    );
    eprintln!(
        "pools: {} tables x {} rows installed in {installed:?}, serve to idle in {ran:?} \
         under {} writes {writes:?} (peak RSS {:.0} MiB); {seen:?}; {} status runs answered, \
         slowest {:?}",
        tables(),
        rows(),
        writes.total(),
        w.peak_rss_mib,
        w.statuses,
        w.slowest
    );
    eprintln!(
        "pools load: {load}; serve's own CPU {:.1} s ({:.1} ms a table)",
        w.cpu_ticks as f64 / 100.0,
        w.cpu_ticks as f64 * 10.0 / tables() as f64
    );
    eprintln!(
        "pools target statements by kind (a table): {}",
        com_since(&com_before, &com_counts(&target))
    );
    assert!(
        seen.samples >= 10 && seen.source_peak >= 2,
        "the sampler saw serve: {seen:?}"
    );
    assert!(w.statuses >= 1, "status ran during serve");
    assert!(
        writes.inserts > 0 && writes.updates > 0 && writes.deletes > 0 && writes.key_changes > 0,
        "the writer inserted, updated, deleted and changed keys: {writes:?}"
    );
    assert!(w.pools_seen, "the metrics showed the connection pools");
    pool_peaks_within_bounds(&w.last_metrics);
    assert!(w.status_pools, "status showed the connection pools");
    assert!(!out.contains("paused") && !out.contains("refused"), "{out}");
    // The writes after serve went idle are caught up by the next run, then compared.
    let mut again = serve(&["--exit-when-idle"]);
    assert!(again.wait().unwrap().success(), "{:?}", output(&log));
    every_job_streams_clean(&root_state, &source, &sdb, &target, &tdb, &jobs).await;
    idle_cost(&serve, &target).await;
    if env("POOLS_PEER", 0) == 1 {
        let after = peer_copy(&source, &sdb, &target);
        let best = peer_first.map_or(after, |p| p.min(after));
        eprintln!(
            "pools peer: mariadb-dump | mariadb {peer_first:?} before ours, {after:?} after; \
             backfill install -> all STREAMING {:?}: ratio {:.2} to the faster peer run",
            installed + ran,
            (installed + ran).as_secs_f64() / best.as_secs_f64()
        );
    }
}

/// What the machine and the servers did over a stretch: the CPU time of the whole
/// machine (every process: serve, both servers, the writer, the sampler) and the
/// statements each server ran, for the benchmark's per-table figures.
#[derive(Debug, Clone, Copy)]
struct Load {
    busy: u64,
    total: u64,
    source_q: u64,
    target_q: u64,
}

impl Load {
    fn now(source: &Server, target: &Server) -> Load {
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let ticks: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
        let total: u64 = ticks.iter().take(8).sum();
        let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
        Load {
            busy: total - idle,
            total,
            source_q: questions(source),
            target_q: questions(target),
        }
    }

    fn since(&self, before: &Load) -> Load {
        Load {
            busy: self.busy - before.busy,
            total: self.total - before.total,
            source_q: self.source_q - before.source_q,
            target_q: self.target_q - before.target_q,
        }
    }
}

/// A server's `Com_*` counters (statements by kind since it started).
fn com_counts(s: &Server) -> std::collections::BTreeMap<String, u64> {
    let q = "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME LIKE 'COM\\_%' AND VARIABLE_VALUE > 0";
    s.sql(q)
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(k, v)| Some((k.to_lowercase(), v.trim().parse().ok()?)))
        .collect()
}

/// The kinds that grew from `before` to `after`, most first, as counts a table.
fn com_since(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> String {
    let mut grew: Vec<(&String, u64)> = after
        .iter()
        .map(|(k, v)| (k, v - before.get(k).copied().unwrap_or(0).min(*v)))
        .filter(|(_, d)| *d > 0)
        .collect();
    grew.sort_by_key(|g| std::cmp::Reverse(g.1));
    let n = tables() as f64;
    grew.iter()
        .take(14)
        .map(|(k, d)| format!("{} {:.1}", k.trim_start_matches("com_"), *d as f64 / n))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The statements a server has run since it started (its global `Questions`).
fn questions(s: &Server) -> u64 {
    let q = "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
             WHERE VARIABLE_NAME = 'QUESTIONS'";
    s.sql(q).trim().parse().unwrap()
}

impl std::fmt::Display for Load {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = tables() as f64;
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        write!(
            f,
            "machine CPU busy {:.0} % of {cores} cores; statements: source {} ({:.0} a table), \
             target+state {} ({:.0} a table)",
            100.0 * self.busy as f64 / self.total.max(1) as f64,
            self.source_q,
            self.source_q as f64 / n,
            self.target_q,
            self.target_q as f64 / n
        )
    }
}

/// serve running idle with every table STREAMING: CPU share and state-store queries per
/// second over `POOLS_IDLE_SECS`; then SIGTERM stops it cleanly.
async fn idle_cost(serve: &dyn Fn(&[&str]) -> std::process::Child, target: &Server) {
    let secs = env("POOLS_IDLE_SECS", 3).max(1);
    let questions = || questions(target);
    let mut child = serve(&[]);
    let pid = child.id();
    let cpu = || cpu_ticks(pid);
    // Its start (leases, the re-audit of every table) is not idle: each second is
    // printed, and the figure is the last half of the run.
    let (mut series, mut last) = (Vec::new(), (cpu(), questions(), Instant::now()));
    for _ in 0..secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = (cpu(), questions(), Instant::now());
        let took = now.2.duration_since(last.2).as_secs_f64();
        // USER_HZ is 100 ticks a second.
        let cpu_pct = (now.0 - last.0) as f64 / took;
        series.push((cpu_pct, (now.1 - last.1) as f64 / took));
        last = now;
    }
    let tail = &series[series.len() / 2..];
    let avg = |f: fn(&(f64, f64)) -> f64| tail.iter().map(f).sum::<f64>() / tail.len() as f64;
    let (cpu_pct, qps) = (avg(|x| x.0), avg(|x| x.1));
    let shown: Vec<String> = series
        .iter()
        .map(|(c, q)| format!("{c:.0}%/{q:.0}q"))
        .collect();
    eprintln!(
        "pools idle: {} STREAMING tables, last {} of {secs} s: CPU {cpu_pct:.1} % of a core, \
         {qps:.0} queries/s on the target+state server ({:.3} per table per second); \
         each second: {}",
        tables(),
        tail.len(),
        qps / tables() as f64,
        shown.join(" ")
    );
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    // serve's own grace for its jobs is 20 s (SHUTDOWN_GRACE): past a minute it hangs.
    let t = Instant::now();
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("serve did not stop within 60 s of SIGTERM");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        exit.success(),
        "SIGTERM stops serve cleanly: {exit} after {:?}",
        t.elapsed()
    );
    eprintln!("pools stop: SIGTERM to exit {:?}", t.elapsed());
}

/// `mariadb-dump --single-transaction DB | mariadb` of the same database between the
/// same servers into a fresh database, timed.
fn peer_copy(source: &Server, sdb: &str, target: &Server) -> Duration {
    let pdb = target.fresh_db("pools_peer");
    let dump = format!(
        "mariadb-dump --no-defaults -h127.0.0.1 -uroot -P{} --single-transaction {sdb} \
         | mariadb --no-defaults -h127.0.0.1 -uroot -P{} {pdb}",
        source.port(),
        target.port()
    );
    let t = Instant::now();
    let ok = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c", &dump])
        .status()
        .unwrap()
        .success();
    let took = t.elapsed();
    assert!(ok, "{dump}");
    // Its thousand tables would otherwise stay on the server our run uses.
    target.sql(&format!("DROP DATABASE {pdb}"));
    took
}

fn spawn_serve(
    state: &str,
    data: &std::path::Path,
    log: &std::path::Path,
    source: &Server,
    target: &Server,
    addr: &str,
    extra: &[&str],
) -> std::process::Child {
    // Files, not pipes: a thousand tables' output must never block serve on a full pipe.
    // Appended: each run's output follows the previous one's.
    let file = |ext: &str| {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log.with_extension(ext))
            .unwrap()
    };
    backfill_tests::command()
        .args([
            "serve",
            "--state",
            state,
            "--data-dir",
            data.to_str().unwrap(),
            "--source",
            &source.url_user(USER, PW, ""),
            "--target",
            &target.url_user(USER, PW, ""),
            "--max-sessions",
            &tables().to_string(),
            "--metrics-addr",
            addr,
        ])
        .args(extra_serve_args())
        .args(extra)
        .stdout(file("out"))
        .stderr(file("err"))
        .spawn()
        .unwrap()
}

/// `POOLS_SERVE_ARGS`: more serve flags, split at whitespace, for a benchmark of other
/// limits (e.g. `--read-windows 4 --target-writes 4`; the harness clears `BACKFILL_*`).
fn extra_serve_args() -> Vec<String> {
    std::env::var("POOLS_SERVE_ARGS")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// serve's stdout and stderr so far, every run's (the last has exited).
fn output(data: &std::path::Path) -> (String, String) {
    let read = |ext: &str| std::fs::read_to_string(data.with_extension(ext)).unwrap_or_default();
    (read("out"), read("err"))
}

async fn every_job_streams_clean(
    root_state: &str,
    source: &Server,
    sdb: &str,
    target: &Server,
    tdb: &str,
    jobs: &[(JobId, Generation, String)],
) {
    let pool = kernel::state::open(root_state, &Default::default())
        .await
        .unwrap();
    let journal = Journal::new(pool.clone());
    for (job, g, table) in jobs {
        let phase = journal
            .head(*job, *g)
            .await
            .unwrap()
            .map(|h| h.record.phase);
        assert_eq!(phase, Some(Phase::Streaming), "{table} (job {job})");
        let d = compare(source, sdb, target, tdb, table, &["id"]);
        assert!(d.is_clean() && d.rows > 0, "{table}: {d}");
    }
    pool.close().await;
}
