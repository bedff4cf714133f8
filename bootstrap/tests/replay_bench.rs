//! Streaming-apply benchmark of issue 6. The suite runs it at a small size as a
//! correctness test (every group applied once, target checksum = source checksum); the
//! benchmark size is
//! `BENCH_TXNS=200000 BENCH_BIG=200 cargo test -p bootstrap --features failpoints --release --test replay_bench -- --nocapture`.
//!
//! In one run, on private servers: a source (relaxed durability, it only generates the
//! binlog), our target and a native MariaDB replica, both DURABLE
//! (`innodb_flush_log_at_trx_commit=1`, `sync_binlog=1`; our state store lives on our
//! target server). The workload after activation: BENCH_TXNS (default 2 000; 200 000 for the benchmark) single-row
//! INSERT transactions, then BENCH_BIG (default 5; 200 for the benchmark) UPDATE transactions of 1 000 rows.
//! Both sides apply the SAME binlog from an already-fetched copy: ours from L (the capture
//! has stored it before the clock starts), the replica's SQL thread from its relay log
//! (the IO thread has fetched it before the clock starts).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod finish_support;
use bootstrap::finish::Finish;
use bootstrap::replay::{ReplayConfig, Replayer, Until};
use finish_support::*;
use harness::{Server, ServerOpts};
use kernel::position::BinlogPos;
use kernel::range::KeyRange;
use ledger::journal::Journal;
use mysql_async::prelude::Queryable;
use std::time::{Duration, Instant};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn durable(o: ServerOpts) -> ServerOpts {
    o.config("innodb_flush_log_at_trx_commit=1")
        .config("sync_binlog=1")
        .config("innodb_buffer_pool_size=256M")
}

async fn conn(s: &Server) -> mysql_async::Conn {
    mysql_async::Conn::new(mysql_async::Opts::from_url(&s.url()).unwrap())
        .await
        .unwrap()
}

async fn end_of(s: &Server) -> BinlogPos {
    let mut c = conn(s).await;
    let p = kernel::lineage::binlog_end(&mut c).await.unwrap();
    c.disconnect().await.unwrap();
    p
}

async fn slave_status(c: &mut mysql_async::Conn) -> (String, String, String, u64) {
    let r: mysql_async::Row = c.query_first("SHOW SLAVE STATUS").await.unwrap().unwrap();
    let s = |n: &str| -> String { r.get::<Option<String>, _>(n).flatten().unwrap_or_default() };
    (
        s("Slave_SQL_Running"),
        s("Relay_Master_Log_File"),
        s("Last_SQL_Error"),
        s("Exec_Master_Log_Pos").parse().unwrap_or(0),
    )
}

/// Starts the replica's SQL thread until `p` and returns how long it took to reach it.
async fn replica_apply_until(c: &mut mysql_async::Conn, p: &BinlogPos) -> Duration {
    let t = Instant::now();
    c.query_drop(format!(
        "START SLAVE SQL_THREAD UNTIL MASTER_LOG_FILE = '{}', MASTER_LOG_POS = {}",
        p.file, p.pos
    ))
    .await
    .unwrap();
    loop {
        let (running, file, err, pos) = slave_status(c).await;
        if t.elapsed() > Duration::from_secs(30) && t.elapsed().as_millis() % 5000 < 5 {
            eprintln!("replica: running={running} file={file} pos={pos} want {p} err={err}");
        }
        assert!(err.is_empty(), "replica SQL error: {err}");
        if file == p.file && pos >= p.pos {
            let d = t.elapsed();
            // Wait for the thread to stop at UNTIL.
            while slave_status(c).await.0 == "Yes" {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            return d;
        }
        assert!(
            running == "Yes" || running == "Connecting" || t.elapsed() < Duration::from_secs(2)
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn wait_l(w: &World, pool: &sqlx::MySqlPool, p: &BinlogPos) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(900);
    kernel::log::wait_for_position(pool, &w.stream, p, deadline)
        .await
        .unwrap()
        .tail
        .seq
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streaming_apply_versus_a_native_replica() {
    let txns = env("BENCH_TXNS", 2_000);
    let big = env("BENCH_BIG", 5);
    let src = Server::start_private(ServerOpts::source().config("innodb_buffer_pool_size=256M"));
    let tgt = Server::start_private(durable(ServerOpts::target()));
    // The in-run native replica comparison is opt-in (BENCH_REPLICA=1): its SQL-thread
    // wait did not terminate in the first attempts here (issue 6 notes); the reference
    // figures of shared/notes/mariadb.md are quoted instead.
    let with_replica = env("BENCH_REPLICA", 0) == 1;
    let rep =
        with_replica.then(|| Server::start_private(durable(ServerOpts::target().server_id(3))));
    let w = world(&src, &tgt, "bench", 9900, 1000).await;
    // No audit triggers on the benchmark's target: they would add a row write per change.
    tgt.sql_in(
        &w.tdb,
        "DROP TRIGGER t_bi; DROP TRIGGER t_bu; DROP TRIGGER t_bd",
    );
    // The workload's procedures exist before B: a DDL naming the table after B pauses it.
    let pdb = src.fresh_db("benchproc");
    let mut sc = w.src_conn().await;
    let db = w.db.clone();
    sc.query_drop(format!(
            "CREATE PROCEDURE `{pdb}`.gen_a() BEGIN DECLARE i INT DEFAULT 0; WHILE i < {txns} DO \
             INSERT INTO `{db}`.t VALUES (1000001 + i, 'a', i, 1.5, NOW(6)); SET i = i + 1; END WHILE; END"
        ))
    .await
    .unwrap();
    sc.query_drop(
        format!(
            "CREATE PROCEDURE `{pdb}`.gen_b() BEGIN DECLARE k INT DEFAULT 0; WHILE k < {big} DO \
             UPDATE `{db}`.t SET n = n + 1, v = 'b' WHERE id BETWEEN 1000001 + (k * 1000) % {txns} AND 1000000 + (k * 1000) % {txns} + 1000; \
             SET k = k + 1; END WHILE; END"
        ),
    )
    .await
    .unwrap();
    let pool = w.pool().await;
    let reader = w.start_reader(&pool).await;
    let lease = w.lease(&pool).await;
    let ctx = w.ctx(lease.token).await;
    w.claim(&ctx).await;
    start(&w, &pool, &lease).await;
    window(&w, &pool, &lease, &ctx, 0, KeyRange::ALL, 1000).await;
    let journal = Journal::new(pool.clone());
    let store = w.store();
    let plan = vec![KeyRange::ALL];
    let src_opts = mysql_async::Opts::from_url(&w.src_url()).unwrap();
    let topts = w.target_opts();
    let cfg = ReplayConfig::default();
    let f = Finish {
        pool: &pool,
        scope: w.scope(),
        journal: &journal,
        lease: &lease,
        store: &store,
        plan: &plan,
        schema_fingerprint: w.sealed().await.fingerprint(),
        source: &src_opts,
        control_schema: &w.ctl,
        target: &topts,
        ctx: &ctx,
        replay: cfg.clone(),
        marker_wait: Duration::from_secs(60),
    };
    let a = f.activate().await.unwrap();
    eprintln!("bench: activated");
    let p0 = end_of(&src).await;
    // The replica: everything up to P0 first (schema and setup), not timed.
    let mut rc = match &rep {
        Some(r) => Some(conn(r).await),
        None => None,
    };
    if let Some(rc) = rc.as_mut() {
        rc.query_drop(format!(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, MASTER_USER = 'root', \
         MASTER_LOG_FILE = 'mysql-bin.000001', MASTER_LOG_POS = 4, MASTER_USE_GTID = no",
            src.port()
        ))
        .await
        .unwrap();
        rc.query_drop("START SLAVE IO_THREAD").await.unwrap();
        replica_apply_until(rc, &p0).await;
        eprintln!("bench: replica at P0 {p0}");
    }
    // Workload A: single-row transactions.
    let g = Instant::now();
    sc.query_drop(format!("CALL `{pdb}`.gen_a()"))
        .await
        .unwrap();
    eprintln!(
        "generated {txns} single-row transactions in {:?}",
        g.elapsed()
    );
    let pa = end_of(&src).await;
    let sa = wait_l(&w, &pool, &pa).await;
    eprintln!("bench: L holds workload A");
    // Workload B: 1 000-row transactions.
    sc.query_drop(format!("CALL `{pdb}`.gen_b()"))
        .await
        .unwrap();
    let pb = end_of(&src).await;
    let sb = wait_l(&w, &pool, &pb).await;
    // The replica's IO thread fetches everything before its SQL thread's clock starts.
    while let Some(rc) = rc.as_mut() {
        let r: mysql_async::Row = rc.query_first("SHOW SLAVE STATUS").await.unwrap().unwrap();
        let file: String = r
            .get::<Option<String>, _>("Master_Log_File")
            .flatten()
            .unwrap_or_default();
        let pos: u64 = r
            .get::<Option<String>, _>("Read_Master_Log_Pos")
            .flatten()
            .unwrap_or_default()
            .parse()
            .unwrap_or(0);
        if file == pb.file && pos >= pb.pos {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = Replayer {
        pool: &pool,
        scope: &w.scope(),
        target: &topts,
        ctx: &ctx,
        cfg: &cfg,
    };
    let t = Instant::now();
    let oa = r.run(a.b.seq, Until::CatchUp { upto: sa }).await.unwrap();
    let ours_a = t.elapsed();
    let t = Instant::now();
    let ob = r.run(a.b.seq, Until::CatchUp { upto: sb }).await.unwrap();
    let ours_b = t.elapsed();
    let (rep_a, rep_b) = match rc.as_mut() {
        Some(rc) => (
            replica_apply_until(rc, &pa).await,
            replica_apply_until(rc, &pb).await,
        ),
        None => (Duration::ZERO, Duration::ZERO),
    };
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    eprintln!(
        "A single-row: ours {} groups in {ours_a:?} = {:.0} txn/s; replica {rep_a:?} = {:.0} txn/s; ratio {:.2}",
        oa.groups_applied,
        rate(txns, ours_a),
        rate(txns, rep_a),
        rep_a.as_secs_f64() / ours_a.as_secs_f64()
    );
    eprintln!(
        "B 1000-row: ours {} groups in {ours_b:?} = {:.0} rows/s; replica {rep_b:?} = {:.0} rows/s; ratio {:.2}",
        ob.groups_applied,
        rate(big * 1000, ours_b),
        rate(big * 1000, rep_b),
        rep_b.as_secs_f64() / ours_b.as_secs_f64()
    );
    assert_eq!(oa.groups_applied, txns);
    assert_eq!(ob.groups_applied, big);
    assert_eq!(checksum(&src, &w.db), checksum(&tgt, &w.tdb));
    if let (Some(rep), Some(rc)) = (&rep, rc) {
        assert_eq!(checksum(&src, &w.db), checksum(rep, &w.db));
        rc.disconnect().await.unwrap();
    }
    reader.stop().await.unwrap();
}
