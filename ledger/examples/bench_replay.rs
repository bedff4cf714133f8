//! Replay throughput: full-image upserts by key through `apply_groups` (T cursor CAS in
//! every transaction) over a loaded table, then through `parts::apply_groups_parts` over
//! P key partitions (P connections) in the same run.
//!
//! `cargo run --release -p ledger --example bench_replay -- [ROWS] [GROUP_ROWS] [TXN_ROWS] [STMT_ROWS]`
//!
//! `BENCH_PARTS` lists the P values to measure after the two single-connection passes
//! (default `1,2,4`; `0` skips them); `BENCH_PARTS_RR=1` adds, for every P > 1, a pass at
//! the session's default isolation (part 0 then starts after the other parts committed).
#![allow(clippy::unwrap_used)]
use harness::{Server, ServerOpts};
use kernel::change::{Change, ChangeId, GroupEnd, Op};
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use kernel::key::Keyer;
use kernel::position::BinlogPos;
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::apply::{self, Limits, ReplayGroup};
use ledger::page;
use ledger::parts::{self, PartsOpts};
use ledger::target::{self, TargetCtx};
use std::time::Instant;

fn col(name: &str, kind: ColumnKind) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        kind,
        column_type: String::new(),
        unsigned: false,
        nullable: false,
        char_len: None,
        numeric_precision: None,
        numeric_scale: None,
        datetime_precision: None,
        charset: None,
        collation: None,
        generated: None,
    }
}

fn row(i: i64, v: u32) -> Row {
    vec![
        SqlValue::Int(i),
        SqlValue::Bytes(format!("customer-{i:010}-v{v}-abcdefghijklmnopqrstuvwxyz").into_bytes()),
        SqlValue::Bytes(format!("{}.{:03}", i % 1_000_000, v % 1000).into_bytes()),
        SqlValue::Date(2026, 10, 18, 1, 2, 3, v),
        SqlValue::Date(2024, 2, 29, 12, 34, 56, 789_012),
        SqlValue::Bytes(b"abcdefgh01234567".to_vec()),
    ]
}

/// The command line: `[ROWS] [GROUP_ROWS] [TXN_ROWS] [STMT_ROWS]`.
struct Args {
    rows: i64,
    group_rows: usize,
    txn_rows: usize,
    stmt_rows: usize,
}

impl Args {
    fn parse() -> Args {
        let args: Vec<usize> = std::env::args()
            .skip(1)
            .map(|a| a.parse().unwrap())
            .collect();
        Args {
            rows: *args.first().unwrap_or(&200_000) as i64,
            group_rows: *args.get(1).unwrap_or(&1000),
            txn_rows: *args.get(2).unwrap_or(&20_000),
            stmt_rows: *args.get(3).unwrap_or(&Limits::default().stmt_rows),
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            txn_rows: self.txn_rows,
            stmt_rows: self.stmt_rows,
            ..Limits::default()
        }
    }

    /// The figures of a pass that replayed `groups` groups in `secs`.
    fn line(&self, groups: usize, secs: f64) -> String {
        let (rows, group_rows, txn_rows, stmt_rows) =
            (self.rows, self.group_rows, self.txn_rows, self.stmt_rows);
        format!(
            "replayed {rows} full-image updates in {groups} groups of {group_rows}, txn_rows={txn_rows} stmt_rows={stmt_rows}: {secs:.2}s = {:.0} rows/s",
            rows as f64 / secs
        )
    }
}

/// The bench table in a fresh database of `s`, claimed, loaded with `rows` rows from FINAL
/// pages: its database, the target context, the connection options and the connection
/// that loaded it.
async fn loaded_table(
    s: &Server,
    rows: i64,
) -> (String, TargetCtx, mysql_async::Opts, mysql_async::Conn) {
    let db = s.fresh_db("bench_replay");
    s.sql_in(
        &db,
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL,
        amount DECIMAL(12,3) NOT NULL, at DATETIME(6) NOT NULL, ts TIMESTAMP(6) NOT NULL,
        bin VARBINARY(16) NOT NULL) ENGINE=InnoDB",
    );
    let schema = SealedSchema {
        database: db.clone(),
        table: "t".into(),
        columns: vec![
            col("id", ColumnKind::BigInt),
            col("name", ColumnKind::Varchar),
            col("amount", ColumnKind::Decimal),
            col("at", ColumnKind::Datetime),
            col("ts", ColumnKind::Timestamp),
            col("bin", ColumnKind::Varbinary),
        ],
        key: vec![0],
        key_name: "PRIMARY".into(),
    };
    let ctx = TargetCtx {
        job: JobId(1),
        generation: Generation(1),
        keyer: Keyer::of(&schema).unwrap(),
        schema,
        token: 1,
        within: None,
    };
    let o = target::target_opts(&s.url_db(&db)).unwrap();
    let mut c = apply::connect(&o).await.unwrap();
    target::ensure_ledger_tables(&mut c, &db).await.unwrap();
    target::claim(&mut c, &ctx).await.unwrap();
    let all: Vec<Row> = (1..=rows).map(|i| row(i, 0)).collect();
    for p in page::cut_final_pages(
        ctx.job,
        ctx.generation,
        WindowId(0),
        Attempt(1),
        all,
        10_000,
    ) {
        apply::apply_page(&mut c, &ctx, &page::seal(&p).bytes, Limits::default())
            .await
            .unwrap();
    }
    (db, ctx, o, c)
}

/// Asserts that every row holds pass `pass`'s image.
fn assert_pass(s: &Server, db: &str, rows: i64, pass: u32) {
    assert_eq!(
        s.sql_in(
            db,
            &format!("SELECT COUNT(*) FROM t WHERE name LIKE '%-v{pass}-%'")
        ),
        rows.to_string()
    );
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let rows = args.rows;
    let s = Server::start_private(ServerOpts::target().config("innodb_buffer_pool_size=512M"));
    let (db, ctx, o, mut c) = loaded_table(&s, rows).await;
    let mut prev = serial_passes(&s, &db, &ctx, &mut c, &args).await;
    println!("load average before the P passes: {}", loadavg());
    for (i, (p, rc)) in parts_passes().into_iter().enumerate() {
        let pass = 3 + i as u32;
        let groups = updates(rows, args.group_rows, pass);
        let mut conns = Vec::new();
        for _ in 0..p {
            conns.push(apply::connect(&o).await.unwrap());
        }
        let opts = PartsOpts {
            read_committed: rc,
            ..PartsOpts::default()
        };
        let t0 = Instant::now();
        parts::apply_groups_parts_with(
            &mut conns,
            &ctx,
            prev.as_ref(),
            &groups,
            args.limits(),
            opts,
        )
        .await
        .unwrap();
        let secs = t0.elapsed().as_secs_f64();
        assert_pass(&s, &db, rows, pass);
        println!(
            "parts P={p} {}: {}",
            if rc || p == 1 {
                "read-committed"
            } else {
                "default-isolation"
            },
            args.line(groups.len(), secs)
        );
        prev = groups.last().map(|g| g.end.clone());
        for c in conns {
            let _ = c.disconnect().await;
        }
    }
    // Peer without any ledger: the same kind of full-image ODKU split by partition_of over
    // n plain connections, one transaction per `txn_rows / n` rows on each (what the issue
    // measured by hand), to see whether the server scales at all right now.
    for (i, n) in [1usize, 2, 4, 1, 2, 4].into_iter().enumerate() {
        let pass = 100 + i as u32;
        let t0 = Instant::now();
        raw_odku(&o, rows, n, args.txn_rows, pass).await;
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "raw ODKU over {n} connections (no ledger): {rows} rows: {secs:.2}s = {:.0} rows/s",
            rows as f64 / secs
        );
    }
    println!("load average after: {}", loadavg());
}

/// Every row updated once per pass (same key, new full image), in groups of `group_rows`:
/// first with prepared statements, then with text statements, on the loading connection. Returns
/// the end of the last group replayed.
async fn serial_passes(
    s: &Server,
    db: &str,
    ctx: &TargetCtx,
    c: &mut mysql_async::Conn,
    args: &Args,
) -> Option<GroupEnd> {
    let mut prev: Option<GroupEnd> = None;
    for (pass, text) in [(1u32, false), (2, true)] {
        let groups = updates(args.rows, args.group_rows, pass);
        let t0 = Instant::now();
        let limits = Limits {
            text_replay: text,
            ..args.limits()
        };
        apply::apply_groups(c, ctx, prev.as_ref(), &groups, limits)
            .await
            .unwrap();
        let secs = t0.elapsed().as_secs_f64();
        assert_pass(s, db, args.rows, pass);
        println!(
            "{}: {}",
            if text { "text" } else { "prepared" },
            args.line(groups.len(), secs)
        );
        prev = groups.last().map(|g| g.end.clone());
    }
    prev
}

/// The (P, read committed) passes `BENCH_PARTS` and `BENCH_PARTS_RR` ask for.
fn parts_passes() -> Vec<(usize, bool)> {
    let list = std::env::var("BENCH_PARTS").unwrap_or_else(|_| "1,2,4".into());
    let rr = std::env::var("BENCH_PARTS_RR").is_ok_and(|v| v == "1");
    let mut passes: Vec<(usize, bool)> = Vec::new();
    for p in list
        .split(',')
        .filter_map(|p| p.trim().parse::<usize>().ok())
    {
        if p == 0 {
            continue;
        }
        passes.push((p, true));
        if rr && p > 1 {
            passes.push((p, false));
        }
    }
    passes
}

async fn raw_odku(o: &mysql_async::Opts, rows: i64, n: usize, txn_rows: usize, pass: u32) {
    use mysql_async::prelude::Queryable;
    let mut tasks = Vec::new();
    for part in 0..n {
        let o = o.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = mysql_async::Conn::new(o).await.unwrap();
            let keys: Vec<i64> = (1..=rows)
                .filter(|k| parts::partition_of_int(*k, n) == part)
                .collect();
            for txn in keys.chunks((txn_rows / n).max(1)) {
                let mut tx = c
                    .start_transaction(mysql_async::TxOpts::default())
                    .await
                    .unwrap();
                for stmt in txn.chunks(10_000) {
                    let marks = vec!["(?, ?, ?, ?, ?, ?)"; stmt.len()].join(",");
                    let sql = format!(
                        "INSERT INTO t (id, name, amount, at, ts, bin) VALUES {marks} ON DUPLICATE KEY UPDATE name = VALUES(name), amount = VALUES(amount), at = VALUES(at), ts = VALUES(ts), bin = VALUES(bin)"
                    );
                    let params: Vec<mysql_async::Value> = stmt
                        .iter()
                        .flat_map(|k| row(*k, pass))
                        .map(mysql_async::Value::from)
                        .collect();
                    tx.exec_drop(sql, mysql_async::Params::Positional(params))
                        .await
                        .unwrap();
                }
                tx.commit().await.unwrap();
            }
            let _ = c.disconnect().await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn updates(rows: i64, group_rows: usize, pass: u32) -> Vec<ReplayGroup> {
    let base = u64::from(pass) * 1_000_000_000;
    (0..rows as usize)
        .collect::<Vec<_>>()
        .chunks(group_rows)
        .enumerate()
        .map(|(g, ids)| ReplayGroup {
            end: GroupEnd {
                pos: BinlogPos::new("mysql-bin.000001", base + 1000 * (g as u64 + 1)),
                gtid: None,
            },
            changes: ids
                .iter()
                .map(|&i| {
                    let id = i as i64 + 1;
                    Change {
                        id: ChangeId {
                            lineage: Digest([1; 32]),
                            schema: "s".into(),
                            table: "t".into(),
                            file: "mysql-bin.000001".into(),
                            event_pos: base + 1000 * g as u64 + 4,
                            row: (i % group_rows) as u32,
                            op: Op::Update,
                        },
                        before: Some(row(id, pass - 1)),
                        after: Some(row(id, pass)),
                    }
                })
                .collect(),
        })
        .collect()
}
