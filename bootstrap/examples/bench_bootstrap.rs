//! Benchmark (issue 5): a bootstrap (every window sealed and applied: LOW/HIGH, read views,
//! RAW and FINAL pages fsynced and registered, manifests, T credentials, J) of a table with
//! no concurrent writes, against `mariadb-dump --single-transaction | mariadb` and
//! `mydumper`/`myloader` with 2 threads of the same table between the same two servers, in
//! the same run. Reports times, the ratio and the
//! peak RSS of the `backfill serve` process (measured by /usr/bin/time).
//!
//! `scripts/bench-bootstrap.sh [ROWS] [WINDOW_ROWS] [PAGE_ROWS]` (`BENCH_LOG=info` shows the
//! serve log: per window, read and seal times).
//!
//! `BENCH_TYPES=1` adds a GEOMETRY, a JSON and a latin1 VARCHAR column (issue 15).
//!
//! `BENCH_KEY=composite` keys the table by `(uid BIGINT UNSIGNED, uuid VARCHAR(36)
//! utf8mb4_general_ci)` instead of `id BIGINT` (issue 14: character keys are ordered by the
//! server's weights, fetched with every page); `BENCH_KEY=wide` is the same table (same
//! columns and values) keyed by `id BIGINT`, the integer-key run to compare it with; `BENCH_STREAMING=1` runs serve to STREAMING
//! (the fence, replay and activation audit) instead of `--windows-only`; `BENCH_SERVE_ARGS`
//! adds serve flags (e.g. `--audit-sample-every 1000000` to measure the activation audit's
//! field check: with `BENCH_LOG=info` the serve log's `activation field check` line has its
//! `total_ms`); `BENCH_KEEP_DATA=1` keeps the data directory (its path is printed);
//! `BENCH_ROUNDS=N` runs N rounds alternating which tool goes first and compares medians;
//! `BENCH_PROFILE=1` (`--profile` of the script) prints where serve's wall time went, per
//! protocol step and per window (`BACKFILL_PROFILE`, `bootstrap::present::profile`).
//!
//! `BENCH_ALL=1` (issue 35, `scripts/bench-bootstrap-matrix.sh`) runs every tool each
//! round (backfill to STREAMING and windows only, the dump, mydumper, LOAD DATA on two
//! connections: the ingest limit) and prints every ratio in one line; `BENCH_INDEXES=1`
//! adds two secondary indexes to the table (every copy has them).
//!
//! Server settings are the harness's (innodb_flush_log_at_trx_commit=2, sync_binlog=0,
//! binlog on) with a 512M buffer pool, unless `BENCH_DURABLE=1` (flush=1, sync_binlog=1).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bootstrap::install::{install, InstallRequest, TableName};
use harness::{Server, ServerOpts};
use std::process::Command;
use std::time::Instant;

const DDL: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(64) NOT NULL,
    amount DECIMAL(12,3) NOT NULL, at DATETIME(6) NOT NULL, ts TIMESTAMP(6) NOT NULL,
    bin VARBINARY(16) NOT NULL) ENGINE=InnoDB";

const DDL_WIDE: &str = "CREATE TABLE t (id BIGINT NOT NULL, uid BIGINT UNSIGNED NOT NULL,
    uuid VARCHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL,
    name VARCHAR(64) NOT NULL, amount DECIMAL(12,3) NOT NULL, at DATETIME(6) NOT NULL,
    ts TIMESTAMP(6) NOT NULL, bin VARBINARY(16) NOT NULL, PRIMARY KEY (KEYCOLS)) ENGINE=InnoDB";

fn key_mode() -> String {
    std::env::var("BENCH_KEY").unwrap_or_default()
}

/// The table has the uid and uuid columns (keyed by them, or by id).
fn wide() -> bool {
    matches!(key_mode().as_str(), "composite" | "wide")
}

/// `BENCH_INDEXES=1` (issue 35): two secondary indexes on the table, on every copy.
fn indexes() -> bool {
    std::env::var("BENCH_INDEXES").is_ok_and(|v| v == "1")
}

fn ddl() -> String {
    let d = match key_mode().as_str() {
        "composite" => DDL_WIDE.replace("KEYCOLS", "uid, uuid"),
        "wide" => DDL_WIDE.replace("KEYCOLS", "id"),
        _ => DDL.to_string(),
    };
    let d = if indexes() {
        d.replace(
            ") ENGINE=InnoDB",
            ", KEY k_name (name), KEY k_at (at)) ENGINE=InnoDB",
        )
    } else {
        d
    };
    if types() {
        d.replace(
            ") ENGINE=InnoDB",
            &format!(", {TYPES_COLUMNS}) ENGINE=InnoDB"),
        )
    } else {
        d
    }
}

/// `BENCH_TYPES=1` (issue 15): a GEOMETRY (SRID 4326), a JSON and a latin1 VARCHAR column
/// beside the usual ones.
fn types() -> bool {
    std::env::var("BENCH_TYPES").is_ok_and(|v| v == "1")
}

const TYPES_COLUMNS: &str = "g GEOMETRY NOT NULL, j JSON NOT NULL, \
    l VARCHAR(64) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL";

/// The values of [`TYPES_COLUMNS`] for row `seq`, or nothing.
fn types_values() -> &'static str {
    if types() {
        ", ST_GeomFromText(CONCAT('POINT(', seq % 1000, ' ', seq % 777, ')'), 4326), \
         JSON_OBJECT('id', seq, 'tags', JSON_ARRAY('a', 'b'), 'ok', TRUE), \
         CONCAT('Ærø-Ñandú-', seq)"
    } else {
        ""
    }
}

fn opts(o: ServerOpts) -> ServerOpts {
    let o = o.config("innodb_buffer_pool_size=512M");
    if std::env::var("BENCH_DURABLE").is_ok_and(|v| v == "1") {
        o.config("innodb_flush_log_at_trx_commit=1")
            .config("sync_binlog=1")
    } else {
        o
    }
}

fn fill(s: &Server, db: &str, rows: i64) {
    let mut from = 1;
    // Composite: uid repeats every 4 rows (so the VARCHAR part decides order inside a uid),
    // uuid is a v4-looking text derived from seq (never random: runs are comparable).
    let key = if wide() {
        "seq, (seq DIV 4) + 9223372036854775808, LOWER(CONCAT(LPAD(HEX(seq * 2654435761 % 4294967296), 8, '0'), \
         '-4d2c-8a1b-', LPAD(HEX(seq), 12, '0'))),"
    } else {
        "seq,"
    };
    while from <= rows {
        let to = (from + 99_999).min(rows);
        s.sql_in(
            db,
            &format!(
                "INSERT INTO t SELECT {key} CONCAT('customer-', LPAD(seq, 10, '0'), '-abcdefghijklmnopqrstuvwxyz'), \
                 CONCAT(seq % 1000000, '.', LPAD(seq % 1000, 3, '0')), \
                 TIMESTAMP('2026-10-18 01:02:03') + INTERVAL (seq % 1000000) MICROSECOND, \
                 TIMESTAMP('2024-02-29 12:34:56.789012'), 'abcdefgh01234567'{} FROM seq_{from}_to_{to}",
                types_values()
            ),
        );
        from = to + 1;
    }
}

static LAST_CPU: std::sync::Mutex<Option<f64>> = std::sync::Mutex::new(None);

/// User + system CPU seconds of the last `timed` command run under /usr/bin/time.
fn cpu_seconds() -> Option<f64> {
    *LAST_CPU.lock().unwrap()
}

/// Runs `cmd` under /usr/bin/time; returns (seconds, peak RSS in MiB).
fn timed(cmd: &mut Command) -> (f64, f64) {
    let t0 = Instant::now();
    let out = cmd.output().expect("run");
    let secs = t0.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed: {err}");
    if std::env::var("BENCH_LOG").is_ok() {
        eprintln!("{}", err.trim_end());
    }
    let rss_kb: f64 = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("MAXRSS_KB="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(f64::NAN);
    let cpu = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("CPU_S="))
        .and_then(|v| {
            let (u, s) = v.trim().split_once('+')?;
            Some(u.parse::<f64>().ok()? + s.parse::<f64>().ok()?)
        });
    *LAST_CPU.lock().unwrap() = cpu;
    (secs, rss_kb / 1024.0)
}

/// One backfill run `tag` (e.g. `0s`: round 0 to STREAMING): install into `bench_t{tag}`
/// with the state store `bench_state{tag}` (both new), start, `serve` to idle, to
/// STREAMING when `streaming` (the fence, replay, activation audit and its full field
/// check) or `--windows-only`; (seconds, peak RSS MiB, data dir size in bytes).
async fn backfill_round(
    src: &Server,
    tgt: &Server,
    tag: &str,
    streaming: bool,
    sizes: (i64, u64, u64),
) -> (f64, f64, u64) {
    let (rows, window_rows, page_rows) = sizes;
    let r = tag;
    let bin = std::env::var("BACKFILL_BIN").expect("BACKFILL_BIN: path of the release backfill");
    let tdb = format!("bench_t{r}");
    tgt.sql(&format!("CREATE DATABASE {tdb}"));
    tgt.sql_in(&tdb, &ddl());
    let state = tgt.url_db(&format!("bench_state{r}"));
    let mut req = InstallRequest::new(
        state.clone(),
        src.url(),
        TableName::new("bench", "t"),
        tgt.url(),
        TableName::new(&tdb, "t"),
    );
    req.window_rows = window_rows;
    req.page_rows = page_rows;
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    let pool = kernel::state::open(&state, &Default::default())
        .await
        .unwrap();
    bootstrap::store::commands::start(&pool, done.job_id)
        .await
        .unwrap();
    pool.close().await;
    let data = tempfile::tempdir().unwrap();
    let profile = data.path().join("profile.jsonl");
    let (secs, rss) = timed(
        Command::new("/usr/bin/time")
            .args(["-f", "CPU_S=%U+%S\nMAXRSS_KB=%M"])
            .arg(&bin)
            .args(["serve", "--exit-when-idle", "--state", &state])
            .args((!streaming).then_some("--windows-only"))
            .args(
                std::env::var("BENCH_SERVE_ARGS")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .arg("--data-dir")
            .arg(data.path())
            .envs(
                std::env::var("BENCH_PROFILE")
                    .is_ok_and(|v| v == "1")
                    .then(|| ("BACKFILL_PROFILE", profile.as_os_str().to_owned())),
            )
            .env(
                "RUST_LOG",
                std::env::var("BENCH_LOG").unwrap_or_else(|_| "warn".into()),
            ),
    );
    if profile.exists() {
        print_profile(&profile, secs);
    }
    if let Some(cpu) = cpu_seconds() {
        eprintln!("round {r}: backfill serve CPU (user+sys): {cpu:.1} s in {secs:.1} s");
    }
    let copied = tgt.sql_in(&tdb, "SELECT COUNT(*) FROM t");
    assert_eq!(copied, rows.to_string(), "backfill copied every row");
    let materials = dir_size(data.path());
    if std::env::var("BENCH_KEEP_DATA").is_ok_and(|v| v == "1") {
        eprintln!("materials kept in {}", data.keep().display());
    }
    (secs, rss, materials)
}

/// The serve profile (`BACKFILL_PROFILE`): per phase its count, total and largest time
/// and its total as a share of serve's wall time (phases overlap: windows run two at a
/// time, a window's read contains its page reads), then per window its steps' totals.
fn print_profile(path: &std::path::Path, wall: f64) {
    use std::collections::BTreeMap;
    let text = std::fs::read_to_string(path).unwrap();
    let mut phases: BTreeMap<String, (u64, f64, f64)> = BTreeMap::new();
    let mut windows: BTreeMap<u64, BTreeMap<String, f64>> = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let (phase, ms) = (
            v["phase"].as_str().unwrap().to_string(),
            v["ms"].as_f64().unwrap(),
        );
        let e = phases.entry(phase.clone()).or_default();
        *e = (e.0 + 1, e.1 + ms, e.2.max(ms));
        if let Some(w) = v["w"].as_u64() {
            *windows.entry(w).or_default().entry(phase).or_default() += ms;
        }
    }
    println!("\nprofile of serve ({wall:.2} s wall): phase, count, total s, max ms, total / wall");
    for (p, (n, total, max)) in &phases {
        println!(
            "  {p:<20} {n:>6} {:>9.3} {max:>9.1} {:>6.0}%",
            total / 1000.0,
            total / 10.0 / wall
        );
    }
    let cols = [
        "window.low",
        "window.read",
        "window.high",
        "window.seal",
        "window.apply_page",
        "window.j",
    ];
    println!("  per window (ms): {}", cols.join(" "));
    for (w, m) in &windows {
        let v: Vec<String> = cols
            .iter()
            .map(|c| format!("{:.0}", m.get(*c).unwrap_or(&0.0)))
            .collect();
        println!("  w{w:<5} {}", v.join(" "));
    }
}

/// One `mariadb-dump --single-transaction | mariadb` of the table into `bench_d{r}`.
fn dump_round(src: &Server, tgt: &Server, r: usize, rows: i64) -> f64 {
    let db = format!("bench_d{r}");
    tgt.sql(&format!("CREATE DATABASE {db}"));
    let dump = format!(
        "mariadb-dump --no-defaults -h127.0.0.1 -uroot -P{} --single-transaction bench t \
         | mariadb --no-defaults -h127.0.0.1 -uroot -P{} {db}; \
         echo MAXRSS_KB=0 >&2",
        src.port(),
        tgt.port()
    );
    let (secs, _) = timed(Command::new("bash").args(["-o", "pipefail", "-c", &dump]));
    assert_eq!(tgt.sql_in(&db, "SELECT COUNT(*) FROM t"), rows.to_string());
    secs
}

/// Drops every copy on the target, so every run starts from the same buffer pool and
/// disk (every tool's copy goes: the comparison stays fair).
fn clear_copies(tgt: &Server) {
    let dbs = tgt.sql(
        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'bench\\_%'",
    );
    for db in dbs.lines().filter(|l| !l.is_empty()) {
        tgt.sql(&format!("DROP DATABASE `{db}`"));
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// What a run copies with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tool {
    /// backfill to STREAMING (fence, replay, activation audit with the full field check).
    Streaming,
    /// backfill `--windows-only`.
    Windows,
    /// `mariadb-dump --single-transaction | mariadb`.
    Dump,
    /// `mydumper -t 2` then `myloader -t 2`.
    Mydumper,
    /// `LOAD DATA LOCAL INFILE` of the table's rows on two connections at once (the
    /// files written before the clock starts): the target's ingest limit.
    LoadData,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Streaming => "backfill to STREAMING",
            Tool::Windows => "backfill windows only",
            Tool::Dump => "mariadb-dump | mariadb",
            Tool::Mydumper => "mydumper/myloader -t 2",
            Tool::LoadData => "LOAD DATA x2",
        }
    }
}

/// The tools of every round: `BENCH_ALL=1` all five (mydumper when installed, LOAD DATA
/// unless `BENCH_TYPES`: its text files cannot carry GEOMETRY bytes); else backfill
/// (to STREAMING with `BENCH_STREAMING=1`, else windows only) and the dump, with mydumper
/// once when there is one round (the historical run).
fn tools(rounds: usize) -> Vec<Tool> {
    let has_mydumper = Command::new("mydumper").arg("--version").output().is_ok();
    if !has_mydumper {
        eprintln!("mydumper is not installed (apt-get install -y mydumper): skipped");
    }
    if std::env::var("BENCH_ALL").is_ok_and(|v| v == "1") {
        let mut t = vec![Tool::Streaming, Tool::Windows, Tool::Dump];
        t.extend(has_mydumper.then_some(Tool::Mydumper));
        t.extend((!types()).then_some(Tool::LoadData));
        return t;
    }
    let backfill = if std::env::var("BENCH_STREAMING").is_ok_and(|v| v == "1") {
        Tool::Streaming
    } else {
        Tool::Windows
    };
    let mut t = vec![backfill, Tool::Dump];
    t.extend((has_mydumper && rounds == 1).then_some(Tool::Mydumper));
    t
}

/// What the runs measured: every tool's seconds per round, serve's peak RSS and the
/// materials' size.
#[derive(Default)]
struct Measured {
    secs: std::collections::BTreeMap<Tool, Vec<f64>>,
    rss: f64,
    materials: u64,
}

impl Measured {
    fn median(&self, t: Tool) -> f64 {
        median(self.secs.get(&t).cloned().unwrap_or_default())
    }
}

/// One run of `tool` in round `r`.
async fn run_tool(
    tool: Tool,
    (src, tgt): (&Server, &Server),
    r: usize,
    sizes: (i64, u64, u64),
    out: &mut Measured,
) {
    let rows = sizes.0;
    let secs = match tool {
        Tool::Streaming | Tool::Windows => {
            let streaming = tool == Tool::Streaming;
            let tag = format!("{r}{}", if streaming { "s" } else { "w" });
            let (b, rss, materials) = backfill_round(src, tgt, &tag, streaming, sizes).await;
            out.rss = out.rss.max(rss);
            out.materials = materials;
            b
        }
        Tool::Dump => dump_round(src, tgt, r, rows),
        Tool::Mydumper => mydumper(src, tgt, r, rows, sizes.1),
        Tool::LoadData => load_data(src, tgt, r, rows),
    };
    eprintln!("round {r}: {} {secs:.2} s", tool.name());
    out.secs.entry(tool).or_default().push(secs);
}

/// `BENCH_ROUNDS=N` (default 1): N rounds, the tools rotating which goes first (round r
/// starts with tool r mod n), every copy dropped after each run; every run is printed and
/// the medians compared. One round is the historical order (backfill, the dump, mydumper).
#[tokio::main]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("numeric arguments"))
        .collect();
    let rows = args.first().copied().unwrap_or(1_000_000) as i64;
    let window_rows = args.get(1).copied().unwrap_or(50_000);
    let page_rows = args.get(2).copied().unwrap_or(5_000);
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let src = Server::start(opts(ServerOpts::source()));
    let tgt = Server::start(opts(ServerOpts::target()));
    src.sql("CREATE DATABASE bench");
    src.sql_in("bench", &ddl());
    let t0 = Instant::now();
    fill(&src, "bench", rows);
    eprintln!("filled {rows} rows in {:.1} s", t0.elapsed().as_secs_f64());
    let sizes = (rows, window_rows, page_rows);
    let tools = tools(rounds);
    let mut m = Measured::default();
    for r in 0..rounds {
        for i in 0..tools.len() {
            let tool = tools[(r + i) % tools.len()];
            run_tool(tool, (&src, &tgt), r, sizes, &mut m).await;
            clear_copies(&tgt);
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("load average at the end: {}", load.trim());
    if std::env::var("BENCH_ALL").is_ok_and(|v| v == "1") {
        print_all(&m, &tools, sizes, rounds);
    } else {
        print_classic(&m, &tools, sizes, rounds);
    }
}

/// The historical table: backfill against the dump and mydumper.
fn print_classic(m: &Measured, tools: &[Tool], sizes: (i64, u64, u64), rounds: usize) {
    let (rows, window_rows, page_rows) = sizes;
    let b = tools[0];
    if rounds > 1 {
        let pairs: Vec<String> = m.secs[&b]
            .iter()
            .zip(&m.secs[&Tool::Dump])
            .map(|(x, y)| format!("{x:.2}/{y:.2}"))
            .collect();
        println!("rounds: {}", pairs.join(", "));
        println!("medians of {rounds} rotating rounds:");
    }
    let (b_secs, d_secs) = (m.median(b), m.median(Tool::Dump));
    println!(
        "| rows | window/page | {} | mariadb-dump \\| mariadb | ratio | mydumper/myloader -t 2 | ratio | serve peak RSS | materials |",
        b.name()
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let my = match m.secs.get(&Tool::Mydumper) {
        Some(_) => {
            let x = m.median(Tool::Mydumper);
            (format!("{x:.2} s"), format!("{:.2}x", b_secs / x))
        }
        None => ("-".into(), "-".into()),
    };
    println!(
        "| {rows} | {window_rows}/{page_rows} | {b_secs:.2} s | {d_secs:.2} s | {:.2}x | {} | {} | {:.0} MiB | {:.0} MiB |",
        b_secs / d_secs,
        my.0,
        my.1,
        m.rss,
        m.materials as f64 / 1048576.0
    );
}

/// `BENCH_ALL=1`: every tool's median and every ratio of backfill to a peer, one line.
fn print_all(m: &Measured, tools: &[Tool], sizes: (i64, u64, u64), rounds: usize) {
    let (rows, window_rows, page_rows) = sizes;
    for t in tools {
        let v: Vec<String> = m.secs[t].iter().map(|x| format!("{x:.2}")).collect();
        println!("{}: {} s", t.name(), v.join(", "));
    }
    let settings = format!(
        "{}, {} indexes, {}",
        if std::env::var("BENCH_DURABLE").is_ok_and(|v| v == "1") {
            "durable"
        } else {
            "harness settings"
        },
        if indexes() { "2" } else { "no" },
        if key_mode().is_empty() {
            "id key".to_string()
        } else {
            format!("{} key", key_mode())
        },
    );
    println!("medians of {rounds} rotating rounds ({settings}):");
    let cell = |t: Tool| {
        m.secs
            .get(&t)
            .map_or("-".to_string(), |_| format!("{:.2} s", m.median(t)))
    };
    let ratio = |a: Tool, b: Tool| match (m.secs.get(&a), m.secs.get(&b)) {
        (Some(_), Some(_)) => format!("{:.2}x", m.median(a) / m.median(b)),
        _ => "-".to_string(),
    };
    println!(
        "| rows | window/page | settings | to STREAMING | windows only | dump\\|load | mydumper -t 2 | LOAD DATA x2 | STREAMING / mydumper | STREAMING / dump | STREAMING / LOAD DATA | windows / mydumper | serve peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {rows} | {window_rows}/{page_rows} | {settings} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} MiB |",
        cell(Tool::Streaming),
        cell(Tool::Windows),
        cell(Tool::Dump),
        cell(Tool::Mydumper),
        cell(Tool::LoadData),
        ratio(Tool::Streaming, Tool::Mydumper),
        ratio(Tool::Streaming, Tool::Dump),
        ratio(Tool::Streaming, Tool::LoadData),
        ratio(Tool::Windows, Tool::Mydumper),
        m.rss
    );
}

/// The table's rows written by the source's client as two tab-separated files (halves by
/// `id`, before the clock starts), then loaded into `bench_l{r}` on the target by two
/// `LOAD DATA LOCAL INFILE` at once; the load's seconds.
fn load_data(src: &Server, tgt: &Server, r: usize, rows: i64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let half = rows / 2;
    let files: Vec<std::path::PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("t{i}.tsv")))
        .collect();
    for (i, f) in files.iter().enumerate() {
        let cond = if i == 0 {
            format!("id <= {half}")
        } else {
            format!("id > {half}")
        };
        let dump = format!(
            "mariadb --no-defaults -h127.0.0.1 -uroot -P{} -B -N -e \
             \"SET time_zone = '+00:00'; SELECT * FROM bench.t WHERE {cond}\" > {}",
            src.port(),
            f.display()
        );
        let ok = Command::new("bash")
            .args(["-o", "pipefail", "-c", &dump])
            .status()
            .unwrap();
        assert!(ok.success(), "{dump}");
    }
    let db = format!("bench_l{r}");
    tgt.sql(&format!("CREATE DATABASE {db}"));
    tgt.sql_in(&db, &ddl());
    let load: Vec<String> = files
        .iter()
        .map(|f| {
            format!(
                "mariadb --no-defaults --local-infile=1 -h127.0.0.1 -uroot -P{} {db} -e \
                 \"SET time_zone = '+00:00'; LOAD DATA LOCAL INFILE '{}' INTO TABLE t\" &",
                tgt.port(),
                f.display()
            )
        })
        .collect();
    let cmd = format!("{} wait; echo MAXRSS_KB=0 >&2", load.join("\n"));
    let (secs, _) = timed(Command::new("bash").args(["-c", &cmd]));
    assert_eq!(
        tgt.sql_in(&db, "SELECT COUNT(*) FROM t"),
        rows.to_string(),
        "LOAD DATA loaded every row"
    );
    secs
}

/// `mydumper --trx-consistency-only -t 2 -r CHUNK` of the table, then `myloader -t 2` into
/// `bench_m{r}` on the target; the time of both.
fn mydumper(src: &Server, tgt: &Server, r: usize, rows: i64, chunk: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dump");
    let db = format!("bench_m{r}");
    tgt.sql(&format!("CREATE DATABASE {db}"));
    let cmd = format!(
        "mydumper -h 127.0.0.1 -u root -P {} -B bench -t 2 -r {chunk} \
         --trx-consistency-only -o {out} && \
         myloader -h 127.0.0.1 -u root -P {} -d {out} -B {db} -t 2 && \
         echo MAXRSS_KB=0 >&2",
        src.port(),
        tgt.port(),
        out = out.display()
    );
    let (secs, _) = timed(Command::new("bash").args(["-o", "pipefail", "-c", &cmd]));
    assert_eq!(
        tgt.sql_in(&db, "SELECT COUNT(*) FROM t"),
        rows.to_string(),
        "myloader loaded every row"
    );
    secs
}

fn dir_size(p: &std::path::Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let m = e.metadata().unwrap();
            n += if m.is_dir() {
                dir_size(&e.path())
            } else {
                m.len()
            };
        }
    }
    n
}
