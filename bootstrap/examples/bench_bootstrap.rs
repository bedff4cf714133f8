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

fn ddl() -> String {
    let d = match key_mode().as_str() {
        "composite" => DDL_WIDE.replace("KEYCOLS", "uid, uuid"),
        "wide" => DDL_WIDE.replace("KEYCOLS", "id"),
        _ => DDL.to_string(),
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

/// What one round measured: serve's time and peak RSS, the dump's time, the field check.
struct Round {
    backfill: f64,
    rss: f64,
    dump: f64,
}

/// One backfill run of round `r`: install into `bench_t{r}` with the state store
/// `bench_state{r}` (both new), start, `serve` to idle; (seconds, peak RSS MiB, data dir
/// size in bytes).
async fn backfill_round(
    src: &Server,
    tgt: &Server,
    r: usize,
    sizes: (i64, u64, u64),
) -> (f64, f64, u64) {
    let (rows, window_rows, page_rows) = sizes;
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
            .args(
                (!std::env::var("BENCH_STREAMING").is_ok_and(|v| v == "1"))
                    .then_some("--windows-only"),
            )
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

/// Drops what round `r` wrote on the target, so every round starts from the same
/// buffer pool and disk (both tools' copies go: the comparison stays fair).
fn clear_round(tgt: &Server, r: usize) {
    tgt.sql(&format!(
        "DROP DATABASE IF EXISTS bench_t{r}; DROP DATABASE IF EXISTS bench_d{r}; \
         DROP DATABASE IF EXISTS bench_state{r}"
    ));
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `BENCH_ROUNDS=N` (default 1): N rounds, the two tools alternating which goes first
/// (round 0 backfill first, round 1 the dump first, ...), each round's copies dropped
/// before the next; every round is printed and the medians compared. One round is the
/// historical order (backfill, then the dump, then mydumper).
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
    let mut done = Vec::new();
    let mut materials = 0;
    for r in 0..rounds {
        let (b, d, rss);
        if r % 2 == 0 {
            let x = backfill_round(&src, &tgt, r, sizes).await;
            (b, rss, materials) = x;
            d = dump_round(&src, &tgt, r, rows);
        } else {
            d = dump_round(&src, &tgt, r, rows);
            let x = backfill_round(&src, &tgt, r, sizes).await;
            (b, rss, materials) = x;
        }
        eprintln!(
            "round {r} ({} first): backfill {b:.2} s, mariadb-dump | mariadb {d:.2} s: {:.2}x",
            if r % 2 == 0 { "backfill" } else { "dump" },
            b / d
        );
        done.push(Round {
            backfill: b,
            rss,
            dump: d,
        });
        if rounds > 1 {
            clear_round(&tgt, r);
        }
    }
    let m_secs = if rounds == 1 {
        mydumper(&src, &tgt, rows, window_rows)
    } else {
        None
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("load average at the end: {}", load.trim());
    let b_secs = median(done.iter().map(|x| x.backfill).collect());
    let d_secs = median(done.iter().map(|x| x.dump).collect());
    let b_rss = done.iter().map(|x| x.rss).fold(0.0, f64::max);
    if rounds > 1 {
        println!(
            "rounds: {}",
            done.iter()
                .map(|x| format!("{:.2}/{:.2}", x.backfill, x.dump))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!("medians of {rounds} alternating rounds:");
    }
    println!(
        "| rows | window/page | backfill windows | mariadb-dump \\| mariadb | ratio | mydumper/myloader -t 2 | ratio | serve peak RSS | materials |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let m = match m_secs {
        Some(m) => (format!("{m:.2} s"), format!("{:.2}x", b_secs / m)),
        None if rounds > 1 => ("-".into(), "-".into()),
        None => ("not installed".into(), "-".into()),
    };
    println!(
        "| {rows} | {window_rows}/{page_rows} | {b_secs:.2} s | {d_secs:.2} s | {:.2}x | {} | {} | {b_rss:.0} MiB | {:.0} MiB |",
        b_secs / d_secs,
        m.0,
        m.1,
        materials as f64 / 1048576.0
    );
}

/// `mydumper --trx-consistency-only -t 2 -r CHUNK` of the table, then `myloader -t 2` into
/// `bench_m` on the target; the time of both (None when mydumper is not installed).
fn mydumper(src: &Server, tgt: &Server, rows: i64, chunk: u64) -> Option<f64> {
    if Command::new("mydumper").arg("--version").output().is_err() {
        eprintln!("mydumper is not installed (apt-get install -y mydumper): skipped");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dump");
    tgt.sql("CREATE DATABASE bench_m");
    let cmd = format!(
        "mydumper -h 127.0.0.1 -u root -P {} -B bench -t 2 -r {chunk} \
         --trx-consistency-only -o {out} && \
         myloader -h 127.0.0.1 -u root -P {} -d {out} -B bench_m -t 2 && \
         echo MAXRSS_KB=0 >&2",
        src.port(),
        tgt.port(),
        out = out.display()
    );
    let (secs, _) = timed(Command::new("bash").args(["-o", "pipefail", "-c", &cmd]));
    assert_eq!(
        tgt.sql_in("bench_m", "SELECT COUNT(*) FROM t"),
        rows.to_string(),
        "myloader loaded every row"
    );
    Some(secs)
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
