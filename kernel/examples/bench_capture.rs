//! Benchmark of issue 3 (run by scripts/bench-capture.sh, not a test): durable capture of a
//! 200 000-row-change binlog into L, against (a) a native MariaDB replica applying the same
//! binlog and (b) the Python `mysql-replication` package decoding it; then peak memory of
//! the capture for the same number of changes in 1 000-row transactions versus ONE
//! transaction.
//!
//! Servers are the harness's throwaway instances (innodb_flush_log_at_trx_commit=2,
//! sync_binlog=0 on every server, said in the output). Usage:
//! `cargo run --release -p kernel --example bench_capture -- [ROWS]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use harness::{Server, ServerOpts};
use kernel::capture::{CaptureSet, CaptureTable, Reader, ReaderConfig};
use kernel::change::GroupEnd;
use kernel::control::{Intent, IntentKind};
use kernel::ids::{Generation, JobId};
use kernel::log;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const DB: &str = "bench";
const CTL: &str = "bench_ctl";

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// Samples RSS every 5 ms while alive; returns the peak.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    h: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start() -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss_kb()));
        let (s, p) = (stop.clone(), peak.clone());
        let h = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss_kb(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssSampler {
            stop,
            peak,
            h: Some(h),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.h.take() {
            h.join().unwrap();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

async fn conn(url: &str) -> mysql_async::Conn {
    mysql_async::Conn::new(mysql_async::Opts::from_url(url).unwrap())
        .await
        .unwrap()
}

async fn end_of(c: &mut mysql_async::Conn) -> GroupEnd {
    let pos = kernel::lineage::binlog_end(c).await.unwrap();
    let st: Option<Option<String>> = c
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (pos.file.as_str(), pos.pos))
        .await
        .unwrap();
    let gtid = st
        .flatten()
        .and_then(|s| s.split(',').next().and_then(kernel::position::Gtid::parse));
    GroupEnd { pos, gtid }
}

/// Captures from `start` into a new stream until L holds `until`; returns (seconds, growth
/// of RSS over the capture in KB: its peak minus the RSS when the capture started).
async fn capture(
    state: &Server,
    src: &Server,
    name: &str,
    start: &GroupEnd,
    set: &CaptureSet,
    until: &Intent,
) -> (f64, u64) {
    let state_db = state.fresh_db(name);
    let pool = kernel::state::open(&state.url_db(&state_db), &Default::default())
        .await
        .unwrap();
    let mut c = conn(&src.url()).await;
    let lin = kernel::lineage::read_lineage(&mut c).await.unwrap();
    log::init_position(&pool, name, &lin, start, 1000)
        .await
        .unwrap();
    let mut cfg = ReaderConfig::new(name, &src.url(), 4000 + rand::random::<u32>() % 1000);
    cfg.control_schema = CTL.into();
    let rss0 = rss_kb();
    let rss = RssSampler::start();
    let t = Instant::now();
    let reader = Reader::start(pool.clone(), cfg, set.clone().shared());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    log::wait_for_marker(&pool, name, until.nonce, deadline)
        .await
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    reader.stop().await.unwrap();
    let peak = rss.finish().saturating_sub(rss0);
    log::verify_chain(&pool, name).await.unwrap();
    (secs, peak)
}

/// Reads and decodes `start..end` into records without storing them (diagnostic).
async fn decode_only(
    src: &Server,
    start: &GroupEnd,
    end: &GroupEnd,
    set: &CaptureSet,
) -> (f64, usize) {
    use futures_util::StreamExt;
    let mut c = conn(&src.url()).await;
    let lin = kernel::lineage::read_lineage(&mut c).await.unwrap();
    c.query_drop("SET @mariadb_slave_capability=4")
        .await
        .unwrap();
    let file = start.pos.file.clone().into_bytes();
    let req = mysql_async::BinlogStreamRequest::new(5999)
        .with_filename(&file)
        .with_pos(start.pos.pos);
    let t = Instant::now();
    let mut stream = c.get_binlog_stream(req).await.unwrap();
    let mut restored = kernel::capture::assemble::Restored::default();
    restored.active.insert((JobId(1), Generation(1)));
    let mut cap = kernel::capture::assemble::Capturer::new(
        lin.digest(),
        CTL,
        set.clone().shared(),
        1000,
        start.clone(),
        restored,
    );
    let mut records = 0;
    while let Some(ev) = stream.next().await {
        cap.on_event(&ev.unwrap()).unwrap();
        for r in cap.take() {
            records += 1;
            if let kernel::capture::assemble::Emit::Record(e) = r {
                std::hint::black_box(kernel::codec::encode(&e.record));
            }
        }
        if cap
            .last_end()
            .pos
            .try_cmp(&end.pos)
            .is_ok_and(|o| o.is_ge())
            && !cap.in_group()
        {
            break;
        }
    }
    (t.elapsed().as_secs_f64(), records)
}

async fn intent(src: &Server, kind: IntentKind) -> Intent {
    let i = Intent::new(JobId(1), Generation(1), kind, None, None);
    let mut c = conn(&src.url()).await;
    kernel::control::write_intent(&mut c, CTL, &i)
        .await
        .unwrap();
    i
}

async fn replica_apply(src: &Server, start: &GroupEnd, end: &GroupEnd) -> f64 {
    let rep = Server::start(ServerOpts::target().server_id(77));
    for sql in kernel::control::create_statements(CTL) {
        rep.sql(&sql);
    }
    rep.sql(&format!("CREATE DATABASE {DB}"));
    rep.sql_in(DB, TABLE);
    rep.sql(&format!(
        "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='root', \
         MASTER_PASSWORD='', MASTER_LOG_FILE='{}', MASTER_LOG_POS={}, MASTER_USE_GTID=no",
        src.port(),
        start.pos.file,
        start.pos.pos
    ));
    let mut c = conn(&rep.url()).await;
    let t = Instant::now();
    rep.sql("START SLAVE");
    loop {
        let row: Option<mysql_async::Row> = c.query_first("SHOW SLAVE STATUS").await.unwrap();
        let row = row.expect("replica status");
        let file: Option<String> = row.get("Relay_Master_Log_File");
        let pos: Option<u64> = row.get("Exec_Master_Log_Pos");
        let err: Option<String> = row.get("Last_SQL_Error");
        assert!(err.unwrap_or_default().is_empty(), "replica failed");
        let at = kernel::position::BinlogPos::new(file.unwrap_or_default(), pos.unwrap_or(0));
        if at.try_cmp(&end.pos).is_ok_and(|o| o.is_ge()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    t.elapsed().as_secs_f64()
}

fn python_decode(src: &Server, start: &GroupEnd, end: &GroupEnd) -> Option<(f64, u64)> {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scripts/bench_capture_py.py"
    );
    let out = std::process::Command::new("python3")
        .args([
            script,
            &src.port().to_string(),
            &start.pos.file,
            &start.pos.pos.to_string(),
            &end.pos.file,
            &end.pos.pos.to_string(),
        ])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    let rows = it.next()?.parse().ok()?;
    let secs = it.next()?.parse().ok()?;
    Some((secs, rows))
}

const TABLE: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(64) NOT NULL, \
                     n INT NOT NULL, d DATETIME(6) NOT NULL, x DECIMAL(12,3) NOT NULL) ENGINE=InnoDB";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rows: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let src = Server::start(ServerOpts::source());
    let state = Server::start(ServerOpts::target());
    for sql in kernel::control::create_statements(CTL) {
        src.sql(&sql);
    }
    src.sql(&format!("CREATE DATABASE {DB}"));
    src.sql_in(DB, TABLE);
    let mut c = conn(&src.url_db(DB)).await;
    let facts = kernel::introspect::read_table(&mut c, DB, "t")
        .await
        .unwrap()
        .unwrap();
    let mut set = CaptureSet::default();
    set.add(CaptureTable {
        job: JobId(1),
        generation: Generation(1),
        sealed: kernel::introspect::seal(&facts).unwrap(),
    });

    // Phase 1: 2 x ROWS changes in 1 000-row transactions.
    let start = end_of(&mut c).await;
    intent(&src, IntentKind::B).await;
    for lo in (0..rows).step_by(1000) {
        src.sql_in(DB, &format!(
            "INSERT INTO t SELECT seq, concat('row ', seq), seq % 97, '2024-02-29 12:00:00.123456', seq / 7 \
             FROM seq_{}_to_{}", lo + 1, (lo + 1000).min(rows)));
    }
    for lo in (0..rows).step_by(1000) {
        src.sql_in(
            DB,
            &format!(
                "UPDATE t SET n = n + 1, s = concat(s, '!') WHERE id > {lo} AND id <= {}",
                lo + 1000
            ),
        );
    }
    let f1 = intent(&src, IntentKind::High).await;
    let end1 = end_of(&mut c).await;
    // Phase 2: the same number of changes in ONE transaction.
    intent(&src, IntentKind::B).await;
    src.sql_in(
        DB,
        "BEGIN; UPDATE t SET n = n + 1; UPDATE t SET n = n - 1; COMMIT",
    );
    let f2 = intent(&src, IntentKind::F).await;
    let changes = 2 * rows;

    println!("source and state store: MariaDB 10.11 (harness instances, innodb_flush_log_at_trx_commit=2, sync_binlog=0); release build");
    let (cap_s, cap_peak) = capture(&state, &src, "p1", &start, &set, &f1).await;
    println!(
        "capture into L (durable, state store on another server): {changes} changes in {cap_s:.2} s = {:.0} changes/s, RSS growth {} MB",
        changes as f64 / cap_s,
        cap_peak / 1024
    );
    let (dec_s, dec_n) = decode_only(&src, &start, &end1, &set).await;
    println!(
        "  of which read + decode + encode alone: {dec_s:.2} s ({dec_n} records, {:.0} changes/s)",
        changes as f64 / dec_s
    );
    let rep_s = replica_apply(&src, &start, &end1).await;
    println!(
        "native MariaDB replica applying the same binlog: {rep_s:.2} s = {:.0} changes/s; ratio capture/replica = {:.2}",
        changes as f64 / rep_s,
        rep_s / cap_s
    );
    let py = if std::env::var_os("BENCH_SKIP_PY").is_some() {
        None
    } else {
        python_decode(&src, &start, &end1)
    };
    match py {
        Some((py_s, py_rows)) => println!(
            "python mysql-replication decoding it: {py_rows} rows in {py_s:.2} s = {:.0} rows/s; ratio capture/python = {:.1}",
            py_rows as f64 / py_s,
            py_s / cap_s
        ),
        None => println!("python mysql-replication: not available (pip install mysql-replication)"),
    }
    let (big_s, big_peak) = capture(&state, &src, "p2", &end1, &set, &f2).await;
    println!(
        "one transaction of {rows} rows x2: captured in {big_s:.2} s, RSS growth {} MB (vs {} MB for 1 000-row transactions)",
        big_peak / 1024,
        cap_peak / 1024
    );
}
