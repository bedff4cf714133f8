//! Benchmark (issue 4): apply FINAL pages of a 1 000 000-row table into an empty target,
//! ledger included, against `LOAD DATA` of the same rows and `mariadb-dump | mariadb`, in
//! the same run on one private MariaDB server started by the test harness.
//!
//! `cargo run --release -p ledger --example bench_apply -- [ROWS] [PAGE_ROWS] [STREAMS]`
//!
//! Server settings are the harness's (innodb_flush_log_at_trx_commit=2, sync_binlog=0,
//! binlog on, 64M buffer pool) unless `BENCH_DURABLE=1` (flush=1, sync_binlog=1).
#![allow(clippy::unwrap_used)]
use harness::{Server, ServerOpts};
use kernel::ids::{Attempt, Generation, JobId, WindowId};
use kernel::key::Keyer;
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::apply::{self, Limits};
use ledger::material::LocalDirStore;
use ledger::page;
use ledger::target::{self, TargetCtx};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const DDL: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL,
    amount DECIMAL(12,3) NOT NULL, at DATETIME(6) NOT NULL, ts TIMESTAMP(6) NOT NULL,
    bin VARBINARY(16) NOT NULL) ENGINE=InnoDB";

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

fn row(i: i64) -> Row {
    vec![
        SqlValue::Int(i),
        SqlValue::Bytes(format!("customer-{i:010}-abcdefghijklmnopqrstuvwxyz").into_bytes()),
        SqlValue::Bytes(format!("{}.{:03}", i % 1_000_000, i % 1000).into_bytes()),
        SqlValue::Date(2026, 10, 18, 1, 2, 3, (i % 1_000_000) as u32),
        SqlValue::Date(2024, 2, 29, 12, 34, 56, 789_012),
        SqlValue::Bytes(b"abcdefgh01234567".to_vec()),
    ]
}

fn tsv_line(i: i64, out: &mut impl Write) {
    writeln!(
        out,
        "{i}\tcustomer-{i:010}-abcdefghijklmnopqrstuvwxyz\t{}.{:03}\t2026-10-18 01:02:03.{:06}\t2024-02-29 12:34:56.789012\tabcdefgh01234567",
        i % 1_000_000,
        i % 1000,
        i % 1_000_000
    )
    .unwrap();
}

fn client(s: &Server) -> Command {
    let mut c = Command::new("mariadb");
    c.args([
        "--no-defaults",
        "-h127.0.0.1",
        "-uroot",
        &format!("-P{}", s.port()),
    ]);
    c
}

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let rows = *args.first().unwrap_or(&1_000_000) as i64;
    let page_rows = *args.get(1).unwrap_or(&10_000);
    let streams = *args.get(2).unwrap_or(&1);
    let mut opts = ServerOpts::target();
    if std::env::var_os("BENCH_DURABLE").is_some() {
        opts = opts
            .config("innodb_flush_log_at_trx_commit=1")
            .config("sync_binlog=1");
    }
    let s = Server::start_private(
        opts.config("innodb_buffer_pool_size=512M")
            .config("max_allowed_packet=64M"),
    );
    let dir = tempfile::tempdir().unwrap();

    // Materials: FINAL pages sealed and stored (not timed: that is the window's work).
    let store = Arc::new(LocalDirStore::open(dir.path()).unwrap());
    let mut digests = Vec::new();
    let all: Vec<Row> = (1..=rows).map(row).collect();
    let t0 = Instant::now();
    for p in page::cut_final_pages(
        JobId(1),
        Generation(1),
        WindowId(0),
        Attempt(1),
        all,
        page_rows,
    ) {
        let sealed = page::seal(&p);
        digests.push(store.put(&sealed.bytes).unwrap());
    }
    eprintln!(
        "sealed {} pages in {:.2}s",
        digests.len(),
        t0.elapsed().as_secs_f64()
    );
    let tsv = dir.path().join("rows.tsv");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&tsv).unwrap());
        for i in 1..=rows {
            tsv_line(i, &mut f);
        }
    }

    // 1. Page apply with T credentials: prepared statements, then text statements.
    let digests = Arc::new(digests);
    let mut pages = Vec::new();
    for text in [false, true] {
        let limits = Limits {
            text_pages: text,
            ..Limits::default()
        };
        let secs = page_apply(&s, &store, &digests, streams, limits, rows).await;
        pages.push(secs);
    }
    let pages_s = pages[1];
    // 2. LOAD DATA of the same rows (server-side file).
    let db2 = s.fresh_db("bench_load");
    s.sql_in(&db2, DDL);
    let t0 = Instant::now();
    s.sql_in(
        &db2,
        &format!("LOAD DATA INFILE '{}' INTO TABLE t", tsv.display()),
    );
    let load_s = t0.elapsed().as_secs_f64();
    assert_eq!(s.sql_in(&db2, "SELECT COUNT(*) FROM t"), rows.to_string());

    // 3. mariadb-dump | mariadb from the loaded copy into an empty table.
    let db3 = s.fresh_db("bench_dump");
    let t0 = Instant::now();
    let mut dump = Command::new("mariadb-dump")
        .args([
            "--no-defaults",
            "-h127.0.0.1",
            "-uroot",
            &format!("-P{}", s.port()),
            &db2,
            "t",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let st = client(&s)
        .arg(&db3)
        .stdin(dump.stdout.take().unwrap())
        .status()
        .unwrap();
    assert!(st.success() && dump.wait().unwrap().success());
    let dump_s = t0.elapsed().as_secs_f64();
    assert_eq!(s.sql_in(&db3, "SELECT COUNT(*) FROM t"), rows.to_string());

    println!(
        "rows={rows} page_rows={page_rows} streams={streams} durable={}\n\
         page apply (ledger incl.): prepared {:.2}s, text {pages_s:.2}s\nLOAD DATA: {load_s:.2}s\nmariadb-dump|mariadb: {dump_s:.2}s\n\
         text page/LOAD DATA = {:.2}x, text page/dump = {:.2}x",
        std::env::var_os("BENCH_DURABLE").is_some(),
        pages[0],
        pages_s / load_s,
        pages_s / dump_s
    );
}

/// Applies every sealed page into a fresh copy of the table, ledger included; returns the
/// seconds it took.
async fn page_apply(
    s: &Server,
    store: &Arc<LocalDirStore>,
    digests: &Arc<Vec<kernel::ids::Digest>>,
    streams: usize,
    limits: Limits,
    rows: i64,
) -> f64 {
    let db = s.fresh_db("bench_pages");
    s.sql_in(&db, DDL);
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
    let t0 = Instant::now();
    // The first page commits alone: parallel first inserts into an empty table deadlock.
    let first = store.get(&digests[0]).unwrap().unwrap();
    apply::apply_page(&mut c, &ctx, &first, limits)
        .await
        .unwrap();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let mut tasks = Vec::new();
    for _ in 0..streams {
        let (o, ctx, store, digests, next) = (
            o.clone(),
            ctx.clone(),
            store.clone(),
            digests.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            // A connection per page, as the window runner opens one.
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(d) = digests.get(i) else { break };
                let bytes = store.get(d).unwrap().unwrap();
                let mut c = apply::connect(&o).await.unwrap();
                apply::apply_page(&mut c, &ctx, &bytes, limits)
                    .await
                    .unwrap();
                c.disconnect().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(s.sql_in(&db, "SELECT COUNT(*) FROM t"), rows.to_string());
    secs
}
