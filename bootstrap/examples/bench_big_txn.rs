//! Benchmark (issue 17, memory bound; not a test): the peak RSS of `backfill serve` while
//! one table is STREAMING and the source commits ONE large transaction (an UPDATE of every
//! row of ~1 KiB rows: 60 000 rows by default, ~80 MiB of binlog with FULL images), until
//! the target holds the update. The goal of the issue is under 300 MiB. Also prints the RSS
//! right before the UPDATE (after the bootstrap) and the time the change took to reach the
//! target.
//!
//! `cargo build --release -p bootstrap --bin backfill && BACKFILL_BIN=target/release/backfill
//!  cargo run --release -p bootstrap --example bench_big_txn -- [ROWS]`
//! (`BENCH_LOG=info` shows the serve log; `BENCH_SERVE_ARGS` adds serve flags).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bootstrap::install::{install, InstallRequest, TableName};
use harness::{Server, ServerOpts};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const DDL: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL,
    payload VARCHAR(1024) NOT NULL) ENGINE=InnoDB";

/// `VmRSS` or `VmHWM` of a process in MiB.
fn mem_mib(pid: u32, field: &str) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn fill(s: &Server, rows: i64) {
    let mut from = 1;
    while from <= rows {
        let to = (from + 49_999).min(rows);
        s.sql_in(
            "bench",
            &format!("INSERT INTO t SELECT seq, 0, REPEAT(CHAR(65 + seq % 26), 1000) FROM seq_{from}_to_{to}"),
        );
        from = to + 1;
    }
}

/// Polls `cond` every 100 ms for up to `secs`, sampling serve's RSS peak meanwhile.
fn wait(pid: u32, secs: u64, what: &str, mut cond: impl FnMut() -> bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut peak: f64 = 0.0;
    loop {
        peak = peak.max(mem_mib(pid, "VmRSS:"));
        if cond() {
            return peak;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {secs} s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn serve(bin: &str, state: &str, data: &std::path::Path) -> Child {
    Command::new(bin)
        .args(["serve", "--state", state, "--data-dir"])
        .arg(data)
        .args(
            std::env::var("BENCH_SERVE_ARGS")
                .unwrap_or_default()
                .split_whitespace(),
        )
        .env(
            "RUST_LOG",
            std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .spawn()
        .expect("spawn serve")
}

#[tokio::main]
async fn main() {
    let rows: i64 = std::env::args()
        .nth(1)
        .map_or(60_000, |a| a.parse().expect("ROWS"));
    let bin = std::env::var("BACKFILL_BIN").expect("BACKFILL_BIN: path of the release backfill");
    let src = Server::start(ServerOpts::source().config("max_allowed_packet=256M"));
    let tgt = Server::start(ServerOpts::target().config("max_allowed_packet=256M"));
    src.sql("CREATE DATABASE bench");
    src.sql_in("bench", DDL);
    fill(&src, rows);
    tgt.sql("CREATE DATABASE bench_t");
    tgt.sql_in("bench_t", DDL);
    let state = tgt.url_db("bench_state");
    let req = InstallRequest::new(
        state.clone(),
        src.url(),
        TableName::new("bench", "t"),
        tgt.url(),
        TableName::new("bench_t", "t"),
    );
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    let pool = kernel::state::open(&state, &Default::default())
        .await
        .unwrap();
    bootstrap::store::commands::start(&pool, done.job_id)
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut child = serve(&bin, &state, data.path());
    let pid = child.id();
    // J's head, not replay progress: an idle STREAMING table saves no progress row.
    let journal = ledger::journal::Journal::new(pool.clone());
    let phase = || {
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(journal.head(done.job_id, done.generation))
        })
        .ok()
        .flatten()
        .map(|h| h.record.phase)
    };
    let boot_peak = wait(pid, 600, "STREAMING", || {
        phase() == Some(ledger::record::Phase::Streaming)
    });
    let before = mem_mib(pid, "VmRSS:");
    let t0 = Instant::now();
    src.sql_in(
        "bench",
        "UPDATE t SET n = n + 1, payload = REPEAT('z', 1000)",
    );
    let binlog = src.sql("SHOW BINARY LOGS");
    let peak = wait(pid, 1200, "the UPDATE on the target", || {
        tgt.sql_in("bench_t", "SELECT COUNT(*) FROM t WHERE n = 1") == rows.to_string()
    });
    let secs = t0.elapsed().as_secs_f64();
    let hwm = mem_mib(pid, "VmHWM:");
    child.kill().ok();
    child.wait().ok();
    eprintln!("source binlogs after the UPDATE:\n{binlog}");
    println!("| rows | RSS peak in bootstrap | RSS before UPDATE | RSS peak through the UPDATE (sampled) | VmHWM | UPDATE to target |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {rows} | {boot_peak:.0} MiB | {before:.0} MiB | {peak:.0} MiB | {hwm:.0} MiB | {secs:.1} s |"
    );
}
