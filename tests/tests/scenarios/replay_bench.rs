//! Streaming-apply benchmark of issue 6. The suite runs it at a small size as a
//! correctness test (every group applied once, target checksum = source checksum = the
//! replica's); the benchmark size is
//! `BENCH_TXNS=200000 BENCH_BIG=200 BENCH_LAG_SECS=20 cargo test -p backfill-tests --release --test scenarios replay_bench -- --nocapture`.
//!
//! In one run, on private servers: a source (relaxed durability, it only generates the
//! binlog), our target and a native MariaDB replica, both DURABLE
//! (`innodb_flush_log_at_trx_commit=1`, `sync_binlog=1`, binlog on; our state store lives
//! on our target server). The replica logs what it applies (`log_slave_updates=ON`,
//! `BENCH_REPLICA_LOG=0` turns that off) because our target's binlog records every change
//! we apply too. The workload after activation: BENCH_TXNS (default 2 000; 200 000 for
//! the benchmark) single-row INSERT transactions, then, once per entry of BENCH_STREAMS
//! (comma-separated apply-stream counts, default `1,2`: the suite's small run exercises
//! key-partitioned apply; `1,2,4` for the benchmark), BENCH_BIG (default 5; 200 for the
//! benchmark) UPDATE transactions of 1 000 rows. Workload A is applied on 1 stream; each
//! B segment on its own stream count, timed separately against the replica's time for
//! the same segment (its SQL thread stopped at each segment's end).
//! Both sides apply the SAME binlog from an already-fetched copy: ours from L (the capture
//! has stored it before the clock starts), the replica's SQL thread from its relay log
//! (the IO thread has fetched it before the clock starts). The replica's time ends when
//! `MASTER_GTID_WAIT` sees the GTID of the source's position (its SQL thread started with
//! `UNTIL` that position, then stopped).
//!
//! `BENCH_TYPES=1` adds issue 15's columns to the table on both sides before B
//! (`g GEOMETRY` holding SRID 4326 points, `j JSON`, `l VARCHAR(64) latin1`), and every workload
//! writes them (a point, a nested JSON object, non-ASCII latin1 text).
//!
//! Then the lag phase: a writer commits BENCH_LAG_RATE (default 2 000) single-row
//! transactions per second for BENCH_LAG_SECS (default 2) seconds while the capture reader
//! and the continuous replay follow. Lag of a row = when a 5 ms poll of the target first
//! sees it minus when the writer's COMMIT returned on the source (both clocks are this
//! process's): an over-estimate by at most the poll period.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::replay::{self, ReplayConfig, Replayer, Until};
use backfill_tests::world::*;
use backfill_tests::*;
use harness::{Server, ServerOpts};
use kernel::log::LSeq;
use kernel::position::BinlogPos;
use kernel::range::KeyRange;
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

/// The source's GTID state at `p`.
async fn gtid_at(src: &Server, p: &BinlogPos) -> String {
    let mut c = conn(src).await;
    let g: Option<String> = c
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (&p.file, p.pos))
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    g.expect("BINLOG_GTID_POS of the workload's end")
}

/// Runs the replica's SQL thread until the source position `p` (GTID state `gtid`) and
/// returns how long it took to apply up to there. An idle SQL thread does not stop at an
/// UNTIL position that is the end of its relay log (it waits for the next event), so the
/// end is `MASTER_GTID_WAIT`, or Exec_Master_Log_Pos reaching `p`, and the thread is then
/// stopped explicitly.
async fn replica_apply_until(c: &mut mysql_async::Conn, p: &BinlogPos, gtid: &str) -> Duration {
    let t = Instant::now();
    c.query_drop(format!(
        "START SLAVE SQL_THREAD UNTIL MASTER_LOG_FILE = '{}', MASTER_LOG_POS = {}",
        p.file, p.pos
    ))
    .await
    .unwrap();
    let d = loop {
        let w: Option<i64> = c
            .exec_first("SELECT MASTER_GTID_WAIT(?, 0.05)", (gtid,))
            .await
            .unwrap();
        if w == Some(0) {
            break t.elapsed();
        }
        let (running, file, err, pos) = slave_status(c).await;
        assert!(err.is_empty(), "replica SQL error: {err}");
        if file == p.file && pos >= p.pos {
            break t.elapsed();
        }
        assert!(
            t.elapsed() < Duration::from_secs(900),
            "replica did not reach {p} ({gtid}): running={running} at {file}:{pos}"
        );
    };
    c.query_drop("STOP SLAVE SQL_THREAD").await.unwrap();
    d
}

async fn wait_l(w: &World, pool: &sqlx::MySqlPool, p: &BinlogPos) -> LSeq {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(900);
    kernel::log::wait_for_position(pool, &w.stream, p, deadline)
        .await
        .unwrap()
        .tail
        .seq
}

/// The columns BENCH_TYPES=1 adds (issue 15's benchmark table).
const TYPES_COLUMNS: &str = "ADD COLUMN g GEOMETRY NULL, ADD COLUMN j JSON NULL, \
     ADD COLUMN l VARCHAR(64) CHARACTER SET latin1 NULL";

fn types() -> bool {
    env("BENCH_TYPES", 0) == 1
}

/// The values of a row written by a workload: the fixed columns, then (BENCH_TYPES=1) the
/// types columns; `id` and `n` are SQL expressions.
fn row_values(id: &str, v: &str, n: &str) -> String {
    let fixed = format!("{id}, '{v}', {n}, 1.5, NOW(6)");
    match types() {
        true => format!(
            "{fixed}, ST_GeomFromText(CONCAT('POINT(', {n} % 90, ' 2.5)'), 4326), \
             JSON_OBJECT('n', {n}, 'a', JSON_ARRAY(1, 2.5, 'x'), 'big', 18446744073709551615), \
             CONVERT(CONCAT('caf\u{e9} ', {n}) USING latin1)"
        ),
        false => fixed,
    }
}

/// The workload's procedures, created before B (a DDL naming the table after B pauses
/// it): `gen_a()` commits `txns` single-row INSERTs, `gen_b()` `big` UPDATEs of 1 000 rows.
async fn create_procedures(sc: &mut mysql_async::Conn, pdb: &str, db: &str, txns: u64, big: u64) {
    sc.query_drop(format!(
        "CREATE PROCEDURE `{pdb}`.gen_a() BEGIN DECLARE i INT DEFAULT 0; WHILE i < {txns} DO \
             INSERT INTO `{db}`.t VALUES ({}); SET i = i + 1; END WHILE; END",
        row_values("1000001 + i", "a", "i")
    ))
    .await
    .unwrap();
    sc.query_drop(
        format!(
            "CREATE PROCEDURE `{pdb}`.gen_b() BEGIN DECLARE k INT DEFAULT 0; WHILE k < {big} DO \
             UPDATE `{db}`.t SET n = n + 1, v = 'b'{} WHERE id BETWEEN 1000001 + (k * 1000) % {txns} AND 1000000 + (k * 1000) % {txns} + 1000; \
             SET k = k + 1; END WHILE; END",
            if types() {
                ", j = JSON_SET(j, '$.n', n + 1), l = CONVERT('na\u{ef}ve' USING latin1)"
            } else {
                ""
            }
        ),
    )
    .await
    .unwrap();
}

/// The replica of `src`: everything up to `p0` first (schema and setup), not timed.
async fn replica_at(rc: &mut mysql_async::Conn, src: &Server, p0: &BinlogPos) {
    rc.query_drop(format!(
        "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {}, MASTER_USER = 'root', \
         MASTER_LOG_FILE = 'mysql-bin.000001', MASTER_LOG_POS = 4, MASTER_USE_GTID = no",
        src.port()
    ))
    .await
    .unwrap();
    rc.query_drop("START SLAVE IO_THREAD").await.unwrap();
    replica_apply_until(rc, p0, &gtid_at(src, p0).await).await;
    eprintln!("bench: replica at P0 {p0}");
}

/// Waits until the replica's IO thread fetched everything up to `pb`, so its SQL thread's
/// clock starts with the relay log in place.
async fn replica_fetched(rc: &mut mysql_async::Conn, pb: &BinlogPos) {
    loop {
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
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The replica's times for workload A (up to `pa`) and for each B segment (`segs`).
async fn replica_times(
    rc: &mut mysql_async::Conn,
    src: &Server,
    pa: &BinlogPos,
    segs: &[(BinlogPos, LSeq)],
) -> (Duration, Vec<Duration>) {
    let ga = gtid_at(src, pa).await;
    let d = replica_apply_until(rc, pa, &ga).await;
    let mut rep_b = Vec::new();
    for (pb, _) in segs {
        let gb = gtid_at(src, pb).await;
        rep_b.push(replica_apply_until(rc, pb, &gb).await);
    }
    (d, rep_b)
}

/// Ours and the replica's times of one run, for the report.
struct Timings {
    txns: u64,
    big: u64,
    oa: replay::Outcome,
    ours_a: Duration,
    rep_a: Duration,
    ours_b: Vec<(usize, replay::Outcome, Duration)>,
    rep_b: Vec<Duration>,
}

/// Prints the A and B figures with their same-run ratios and the settings; asserts that
/// every group was applied once.
fn report(t: &Timings, cfg: &ReplayConfig, log_updates: bool) {
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64();
    let (txns, big, ours_a, rep_a) = (t.txns, t.big, t.ours_a, t.rep_a);
    eprintln!(
        "A single-row: ours {} groups in {ours_a:?} = {:.0} txn/s; replica {rep_a:?} = {:.0} txn/s; ratio {:.2}",
        t.oa.groups_applied,
        rate(txns, ours_a),
        rate(txns, rep_a),
        rep_a.as_secs_f64() / ours_a.as_secs_f64()
    );
    for ((n, ob, ours), rep) in t.ours_b.iter().zip(&t.rep_b) {
        eprintln!(
            "B 1000-row, {n} apply stream(s): ours {} groups in {ours:?} = {:.0} rows/s; replica {rep:?} = {:.0} rows/s; ratio {:.2}",
            ob.groups_applied,
            rate(big * 1000, *ours),
            rate(big * 1000, *rep),
            rep.as_secs_f64() / ours.as_secs_f64()
        );
        assert_eq!(ob.groups_applied, big, "{n} streams");
    }
    eprintln!(
        "settings: ours batch_rows={} batch_groups={} read_page={} stmt_rows={} stmt_bytes={}; \
         both durable (flush_log_at_trx_commit=1, sync_binlog=1, binlog on), replica \
         log_slave_updates={log_updates}",
        cfg.batch_rows,
        cfg.batch_groups,
        cfg.read_page,
        cfg.limits().stmt_rows,
        cfg.limits().stmt_bytes
    );
    assert_eq!(t.oa.groups_applied, txns);
}

/// Workload A (`txns` single-row transactions), then one B segment (1 000-row
/// transactions) per stream count, each waited for in L: A's end on the source and in L,
/// and each segment's.
async fn workloads(
    sc: &mut mysql_async::Conn,
    pdb: &str,
    (src, w, pool): (&Server, &World, &sqlx::MySqlPool),
    streams: &[usize],
    txns: u64,
) -> (BinlogPos, LSeq, Vec<(BinlogPos, LSeq)>) {
    // Workload A: single-row transactions.
    let g = Instant::now();
    sc.query_drop(format!("CALL `{pdb}`.gen_a()"))
        .await
        .unwrap();
    eprintln!(
        "generated {txns} single-row transactions in {:?}",
        g.elapsed()
    );
    let pa = end_of(src).await;
    let g = Instant::now();
    let sa = wait_l(w, pool, &pa).await;
    eprintln!(
        "bench: L holds workload A {:?} after the writer finished",
        g.elapsed()
    );
    // Workload B: 1 000-row transactions, one segment per stream count.
    let mut segs = Vec::new();
    for _ in streams {
        sc.query_drop(format!("CALL `{pdb}`.gen_b()"))
            .await
            .unwrap();
        let pb = end_of(src).await;
        let sb = wait_l(w, pool, &pb).await;
        segs.push((pb, sb));
    }
    (pa, sa, segs)
}

/// Our replay of workload A on one stream, then of each B segment on its stream count,
/// each timed.
async fn ours(
    r: &Replayer<'_>,
    b: LSeq,
    sa: LSeq,
    streams: &[usize],
    segs: &[(BinlogPos, LSeq)],
) -> (
    replay::Outcome,
    Duration,
    Vec<(usize, replay::Outcome, Duration)>,
) {
    let t = Instant::now();
    let oa = r.run(b, Until::CatchUp { upto: sa }).await.unwrap();
    let ours_a = t.elapsed();
    let mut ours_b = Vec::new();
    for (&n, (_, sb)) in streams.iter().zip(segs) {
        let cfg_n = ReplayConfig {
            apply_streams: n,
            ..r.cfg.clone()
        };
        let rn = Replayer { cfg: &cfg_n, ..*r };
        let t = Instant::now();
        let ob = rn.run(b, Until::CatchUp { upto: *sb }).await.unwrap();
        ours_b.push((n, ob, t.elapsed()));
    }
    (oa, ours_a, ours_b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streaming_apply_versus_a_native_replica() {
    // Alone: its timings, and the tests beside it with client deadlines of a few seconds,
    // are not to share the two cores.
    let _serial = in_process().await;
    let txns = env("BENCH_TXNS", 2_000);
    let big = env("BENCH_BIG", 5);
    let streams = streams_list();
    let src = Server::start_private(ServerOpts::source().config("innodb_buffer_pool_size=256M"));
    let tgt = Server::start_private(durable(ServerOpts::target()));
    // The native replica, measured in the same run (BENCH_REPLICA=0 leaves it out).
    let with_replica = env("BENCH_REPLICA", 1) == 1;
    let log_updates = env("BENCH_REPLICA_LOG", 1) == 1;
    let rep = with_replica.then(|| {
        let o = durable(ServerOpts::target().server_id(3));
        Server::start_private(if log_updates {
            o.config("log_slave_updates=ON")
        } else {
            o
        })
    });
    let w = world(&src, &tgt, "bench", 9900, 1000).await;
    if types() {
        src.sql_in(&w.db, &format!("ALTER TABLE t {TYPES_COLUMNS}"));
        tgt.sql_in(&w.tdb, &format!("ALTER TABLE t {TYPES_COLUMNS}"));
    }
    // No audit triggers on the benchmark's target: they would add a row write per change.
    tgt.sql_in(
        &w.tdb,
        "DROP TRIGGER t_bi; DROP TRIGGER t_bu; DROP TRIGGER t_bd",
    );
    let pdb = src.fresh_db("benchproc");
    let mut sc = w.src_conn().await;
    create_procedures(&mut sc, &pdb, &w.db, txns, big).await;
    let fin = Finishing::open(&w, vec![KeyRange::ALL]).await;
    let pool = &fin.pool;
    start(&w, pool, &fin.lease).await;
    window(&w, pool, &fin.lease, &fin.ctx, 0, KeyRange::ALL, 1000).await;
    let cfg = ReplayConfig::default();
    let f = fin.finish(&w, cfg.clone());
    let a = f.activate().await.unwrap();
    eprintln!("bench: activated");
    let p0 = end_of(&src).await;
    let mut rc = match &rep {
        Some(r) => Some(conn(r).await),
        None => None,
    };
    if let Some(rc) = rc.as_mut() {
        replica_at(rc, &src, &p0).await;
    }
    let (pa, sa, segs) = workloads(&mut sc, &pdb, (&src, &w, pool), &streams, txns).await;
    let pb = segs.last().map(|s| s.0.clone()).unwrap();
    if let Some(rc) = rc.as_mut() {
        replica_fetched(rc, &pb).await;
    }
    let r = Replayer {
        pool,
        scope: &w.scope(),
        source: &fin.source,
        target: &fin.target,
        ctx: &fin.ctx,
        cfg: &cfg,
        chain: None,
    };
    let (oa, ours_a, ours_b) = ours(&r, a.b.seq, sa, &streams, &segs).await;
    let (rep_a, mut rep_b) = match rc.as_mut() {
        Some(rc) => replica_times(rc, &src, &pa, &segs).await,
        None => (Duration::ZERO, Vec::new()),
    };
    rep_b.resize(segs.len(), Duration::ZERO);
    let timings = Timings {
        txns,
        big,
        oa,
        ours_a,
        rep_a,
        ours_b,
        rep_b,
    };
    report(&timings, &cfg, log_updates);
    assert_eq!(checksum(&src, &w.db, "t"), checksum(&tgt, &w.tdb, "t"));
    if let (Some(rep), Some(rc)) = (&rep, rc) {
        assert_eq!(checksum(&src, &w.db, "t"), checksum(rep, &w.db, "t"));
        rc.disconnect().await.unwrap();
    }
    let (lags, in_l) = lag_phase(pool, &tgt, &w, &r, a.b.seq).await;
    eprintln!(
        "lag under a steady {} rows/s writer for {} s ({} rows): source commit -> target \
         commit p50 {:?} p99 {:?} max {:?}; of which source commit -> in L p50 {:?} p99 {:?}",
        env("BENCH_LAG_RATE", 2_000),
        env("BENCH_LAG_SECS", 2),
        lags.len(),
        pct(&lags, 50),
        pct(&lags, 99),
        lags.last().copied().unwrap_or_default(),
        pct(&in_l, 50),
        pct(&in_l, 99),
    );
    assert_eq!(checksum(&src, &w.db, "t"), checksum(&tgt, &w.tdb, "t"));
    fin.reader.stop().await.unwrap();
}

/// BENCH_STREAMS: the apply-stream counts of the B segments (default `1,2`).
fn streams_list() -> Vec<usize> {
    let v: Vec<usize> = std::env::var("BENCH_STREAMS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|n| (1..=ledger::parts::MAX_PARTS).contains(n))
        .collect();
    if v.is_empty() {
        vec![1]
    } else {
        v
    }
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// First id the lag phase's writer inserts (above every id of the other workloads).
const LAG_ID: i64 = 9_000_001;

/// Commits `rate` single-row transactions per second for `secs` seconds on the source;
/// returns each row's id and when its COMMIT returned.
async fn steady_writer(w: &World, rate: u64, secs: u64) -> Vec<(i64, Instant)> {
    let mut c = w.src_conn().await;
    let per_tick = (rate / 100).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut out = Vec::new();
    let mut id = LAG_ID;
    for _ in 0..secs * 100 {
        tick.tick().await;
        for _ in 0..per_tick {
            c.query_drop(format!(
                "INSERT INTO `{}`.t VALUES ({})",
                w.db,
                row_values(&id.to_string(), "lag", "0")
            ))
            .await
            .unwrap();
            out.push((id, Instant::now()));
            id += 1;
        }
    }
    c.disconnect().await.unwrap();
    out
}

/// Polls the target's highest id every 5 ms until it reaches `last` (after `done` is
/// set), then cancels the follower; returns (when the poll answered, highest id).
async fn poll_target(
    tgt: &Server,
    w: &World,
    last: &std::sync::atomic::AtomicI64,
    cancel: &tokio_util::sync::CancellationToken,
) -> Vec<(Instant, i64)> {
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&tgt.url_db(&w.tdb)).unwrap())
        .await
        .unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let m: Option<i64> = c
            .query_first(format!(
                "SELECT COALESCE(MAX(id), 0) FROM t WHERE id >= {LAG_ID}"
            ))
            .await
            .unwrap();
        let m = m.unwrap_or(0);
        out.push((Instant::now(), m));
        let want = last.load(std::sync::atomic::Ordering::SeqCst);
        if want > 0 && m >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the target never reached id {want}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cancel.cancel();
    c.disconnect().await.unwrap();
    out
}

/// Polls L every 5 ms for the lag phase's rows until it holds `last`; returns (when the
/// poll answered, highest id in L): the capture's share of the lag.
async fn poll_l(
    pool: &sqlx::MySqlPool,
    w: &World,
    from_seq: LSeq,
    last: &std::sync::atomic::AtomicI64,
) -> Vec<(Instant, i64)> {
    let scope = w.scope();
    let mut after = from_seq;
    let mut top = 0i64;
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let (groups, next) = bf::table::replay::next_groups(
            pool,
            &scope,
            None,
            after,
            LSeq::MAX,
            100_000,
            usize::MAX,
            500,
        )
        .await
        .unwrap();
        after = next;
        for (g, _) in &groups {
            for ch in &g.changes {
                if let Some(id) = ch.after.as_ref().and_then(|a| a[0].as_key()) {
                    top = top.max(id);
                }
            }
        }
        out.push((Instant::now(), top));
        let want = last.load(std::sync::atomic::Ordering::SeqCst);
        if want > 0 && top >= want {
            return out;
        }
        assert!(Instant::now() < deadline, "L never held id {want}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn lags_of(rows: &[(i64, Instant)], seen: &[(Instant, i64)]) -> Vec<Duration> {
    let mut lags: Vec<Duration> = rows
        .iter()
        .map(|(id, at)| {
            let (seen_at, _) = seen.iter().find(|(_, m)| m >= id).expect("every row seen");
            seen_at.saturating_duration_since(*at)
        })
        .collect();
    lags.sort();
    lags
}

/// The lag phase (module doc): sorted per-row lags to the target, and to L alone.
async fn lag_phase(
    pool: &sqlx::MySqlPool,
    tgt: &Server,
    w: &World,
    r: &Replayer<'_>,
    b_seq: LSeq,
) -> (Vec<Duration>, Vec<Duration>) {
    let from_seq = kernel::log::load_position(pool, &w.stream)
        .await
        .unwrap()
        .map_or(LSeq::ZERO, |d| d.tail.seq);
    let rate = env("BENCH_LAG_RATE", 2_000);
    let secs = env("BENCH_LAG_SECS", 2);
    let cancel = tokio_util::sync::CancellationToken::new();
    let last = std::sync::atomic::AtomicI64::new(0);
    let writer = async {
        let rows = steady_writer(w, rate, secs).await;
        let top = rows.last().map_or(LAG_ID, |x| x.0);
        last.store(top, std::sync::atomic::Ordering::SeqCst);
        rows
    };
    let (rows, seen, in_l, followed) = tokio::join!(
        writer,
        poll_target(tgt, w, &last, &cancel),
        poll_l(pool, w, from_seq, &last),
        r.run(
            b_seq,
            Until::Follow {
                cancel: cancel.clone()
            }
        )
    );
    followed.unwrap();
    (lags_of(&rows, &seen), lags_of(&rows, &in_l))
}
