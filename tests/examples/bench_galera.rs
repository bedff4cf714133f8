//! Benchmark (issue 18 item 3): the bootstrap (every window sealed and applied, no
//! concurrent writes) of the same table with the state store on one server and with the
//! state store on a three-node Galera cluster (harness nodes on loopback, the multi-host
//! URL), in the same run, between the same source and target; prints both times and the
//! ratio. Not a test.
//!
//! `BACKFILL_BIN=target/debug/backfill-under-test cargo run -p backfill-tests --example
//! bench_galera -- [ROWS] [WINDOW_ROWS] [PAGE_ROWS]` (default 100 000 10 000 5 000).
//! Server settings are the harness's (innodb_flush_log_at_trx_commit=2, sync_binlog=0).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bootstrap::install::{install, InstallRequest, TableName};
use harness::{Cluster, Server, ServerOpts};
use std::process::Command;
use std::time::Instant;

const DDL: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL,
    amount DECIMAL(12,3) NOT NULL, at DATETIME(6) NOT NULL) ENGINE=InnoDB";

/// Installs `src_db.t` into `dst_db.t` with its state store at `state`, starts it and
/// runs `backfill serve --windows-only --exit-when-idle`; returns the serve's seconds.
async fn bootstrap(
    bin: &str,
    src: &Server,
    tgt: &Server,
    dbs: (&str, &str),
    state: &str,
    sizes: (u64, u64),
) -> f64 {
    let (src_db, dst_db) = dbs;
    let mut req = InstallRequest::new(
        state.to_string(),
        src.url(),
        TableName::new(src_db, "t"),
        tgt.url(),
        TableName::new(dst_db, "t"),
    );
    (req.window_rows, req.page_rows) = sizes;
    req.control_schema = format!("{src_db}_ctl");
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    let pool = kernel::state::open(state, &Default::default())
        .await
        .unwrap();
    bootstrap::store::commands::start(&pool, done.job_id)
        .await
        .unwrap();
    pool.close().await;
    let data = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let out = Command::new(bin)
        .args([
            "serve",
            "--exit-when-idle",
            "--windows-only",
            "--state",
            state,
        ])
        .arg("--data-dir")
        .arg(data.path())
        .env("RUST_LOG", "warn")
        .output()
        .expect("run serve");
    let secs = t0.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "serve: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    secs
}

#[tokio::main]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numeric arguments"))
        .collect();
    let rows = args.first().copied().unwrap_or(100_000);
    let sizes = (
        args.get(1).copied().unwrap_or(10_000),
        args.get(2).copied().unwrap_or(5_000),
    );
    let bin = std::env::var("BACKFILL_BIN").expect("BACKFILL_BIN: path of the backfill binary");
    let src = Server::start(ServerOpts::source());
    let tgt = Server::start(ServerOpts::target());
    let t0 = Instant::now();
    let cluster = Cluster::start();
    eprintln!(
        "Galera cluster of 3 Synced in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    for db in ["b1", "b2"] {
        src.sql(&format!("CREATE DATABASE {db}; CREATE DATABASE {db}_ctl"));
        src.sql_in(db, DDL);
        tgt.sql(&format!("CREATE DATABASE {db}_t"));
        tgt.sql_in(&format!("{db}_t"), DDL);
    }
    src.sql_in(
        "b1",
        &format!(
            "INSERT INTO t SELECT seq, CONCAT('customer-', LPAD(seq, 10, '0')), seq % 100000 / 7, \
             TIMESTAMP('2026-10-18 01:02:03') + INTERVAL seq SECOND FROM seq_1_to_{rows}"
        ),
    );
    src.sql_in("b2", "INSERT INTO t SELECT * FROM b1.t");
    let single = bootstrap(
        &bin,
        &src,
        &tgt,
        ("b1", "b1_t"),
        &tgt.url_db("bench_state"),
        sizes,
    )
    .await;
    let galera = bootstrap(
        &bin,
        &src,
        &tgt,
        ("b2", "b2_t"),
        &cluster.url_db("bench_state"),
        sizes,
    )
    .await;
    for db in ["b1_t", "b2_t"] {
        assert_eq!(tgt.sql_in(db, "SELECT COUNT(*) FROM t"), rows.to_string());
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "| rows | window/page | state on one server | state on 3-node Galera | ratio | load avg |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {rows} | {}/{} | {single:.2} s | {galera:.2} s | {:.2}x | {} |",
        sizes.0,
        sizes.1,
        galera / single,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
}
