//! `backfill demo` (DESIGN §13, issue 8): the whole protocol on throwaway local MariaDB
//! servers, in this process, with the same code `serve`, `audit` and `verify` run.
//!
//! 1. Start a source (ROW binlog, FULL image and metadata) and a target/state server with
//!    the test harness (`tests/harness`: private directories, free ports, and a watchdog
//!    that kills the servers and removes their directories even if this process dies).
//! 2. Load a sample `orders` table (`--rows`, default 1 000 000), create the empty target,
//!    `install` and `start` it.
//! 3. Start a writer on its own connection (inserts, updates, deletes, key changes and
//!    multi-statement transactions at `--writes-per-sec`), and run `serve` in-process while
//!    a live display reads the state store (windows, rows, replay lag).
//! 4. Once the table is STREAMING, keep writing for `--stream-secs`, stop the writer, and
//!    run `serve --exit-when-idle` once more: it catches up with the source's binlog end.
//! 5. Run the activation `audit` and `verify` (library functions of the commands), print a
//!    summary and remove everything. Ctrl-C stops at any point and cleans up as well.
//!
//! A failed audit or verify is an error with the exit code of a failed check (4).
mod display;
mod servers;
mod writer;

use crate::install::{self, InstallRequest, TableName};
use crate::supervisor;
use crate::supervisor::telemetry::{LogCounts, Telemetry};
use crate::verify::{self, Endpoint, VerifyCursor, VerifyOptions};
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use serde_json::json;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What `backfill demo` runs (the command line's `DemoOptions`, without clap).
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Rows in the sample table.
    pub rows: u64,
    /// Statements per second of the concurrent writer (0: no writer).
    pub writes_per_sec: u32,
    /// Rows per window (None: rows / 32, between 1 000 and 100 000).
    pub window_rows: Option<u64>,
    /// Rows per page inside a window.
    pub page_rows: u64,
    /// Seconds the writer keeps writing once the table is STREAMING.
    pub stream_secs: u64,
    /// Serve Prometheus metrics on this address during the run (GET /metrics).
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The summary and progress as JSON lines instead of text.
    pub json: bool,
}

const SOURCE_DB: &str = "shop";
const TARGET_DB: &str = "shop_copy";
const STATE_DB: &str = "backfill_state";
const TABLE: &str = "orders";
/// Bound on each phase of the demo (a stuck run ends with an error, never hangs).
const PHASE_TIMEOUT: Duration = Duration::from_secs(3600);

/// The sample table: a realistic order row of about 120 bytes.
pub const DDL: &str = "CREATE TABLE orders (
    id BIGINT NOT NULL PRIMARY KEY,
    customer_id INT NOT NULL,
    status ENUM('new','paid','shipped','cancelled') NOT NULL,
    amount DECIMAL(12,2) NOT NULL,
    currency CHAR(3) NOT NULL,
    note VARCHAR(200) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NULL,
    KEY by_customer (customer_id)
) ENGINE=InnoDB";

/// Runs the demo; returns the summary.
pub async fn run(a: DemoOptions, logs: LogCounts) -> Result<String> {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        c.cancel();
    });
    let out = display::Out::new(a.json);
    out.line("starting a source and a target MariaDB server (throwaway, local)");
    let servers = servers::Servers::start(Telemetry::new(logs)).await?;
    let r = demo_on(&servers, &a, &out, &cancel).await;
    out.line("removing the servers and their directories");
    servers.stop().await;
    ctrl_c.abort();
    r
}

/// What the run measured, for the summary.
struct Measured {
    rows_loaded: u64,
    copy: Duration,
    total: Duration,
    windows: u32,
    writes: writer::Tally,
}

async fn demo_on(
    servers: &servers::Servers,
    a: &DemoOptions,
    out: &display::Out,
    cancel: &CancellationToken,
) -> Result<String> {
    let started = Instant::now();
    let rows = a.rows;
    out.line(&format!("loading {rows} rows into {SOURCE_DB}.{TABLE}"));
    servers.load(rows, cancel).await?;
    let window_rows = a.window_rows.unwrap_or((rows / 32).clamp(1_000, 100_000));
    let mut req = InstallRequest::new(
        servers.state_url(STATE_DB),
        servers.source_url(),
        TableName::new(SOURCE_DB, TABLE),
        servers.target_url(),
        TableName::new(TARGET_DB, TABLE),
    );
    req.window_rows = window_rows.max(1);
    req.page_rows = a.page_rows.clamp(1, req.window_rows);
    let done = install::install(&req).await?;
    out.line(&format!(
        "installed job {} ({} windows of {} rows, pages of {})",
        done.job_id, done.windows, req.window_rows, req.page_rows
    ));
    let pool = kernel::state::open(&req.state_url, &Default::default()).await?;
    let metrics = match a.metrics_addr {
        Some(addr) => {
            let t = servers.telemetry.clone();
            let m =
                crate::present::metrics::spawn(addr, &req.state_url, t, cancel.child_token()).await;
            if m.is_ok() {
                out.line(&format!("metrics on http://{addr}/metrics"));
            }
            Some(m)
        }
        None => None,
    };
    let r = async {
        let _m = match metrics {
            Some(m) => Some(AbortOnDrop(m?)),
            None => None,
        };
        crate::store::commands::start(&pool, done.job_id).await?;
        let w = writer::Writer::start(servers.source_opts(SOURCE_DB)?, rows, a.writes_per_sec);
        let r = stream_under_writes(servers, &pool, done.job_id, a, out, cancel, &w).await;
        let writes = w.stop().await;
        let copy = r?;
        out.line(&format!(
            "writer stopped after {} statements; catching up with the source's binlog end",
            writes.statements
        ));
        let outcome = run_serve(servers, true, cancel).await?;
        let outcome = outcome.get(&done.job_id).cloned().unwrap_or_default();
        if !outcome.ends_with("Streaming") {
            return Err(Error::transient(format!(
                "demo: the catch-up serve ended with `{outcome}`"
            )));
        }
        Ok(Measured {
            rows_loaded: rows,
            copy,
            total: Duration::ZERO,
            windows: u32::try_from(done.windows).unwrap_or(u32::MAX),
            writes,
        })
    }
    .await;
    pool.close().await;
    let mut m = r?;
    out.line("running the activation audit and verify");
    let audit = audit(servers, done.job_id).await?;
    let report = verify(servers).await?;
    m.total = started.elapsed();
    let summary = summary(a.json, &m, &audit, &report);
    if !audit.passed() {
        display::print_now(&summary);
        return Err(Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "demo: the audit failed with {} finding(s)",
                audit.findings.len()
            ),
        ));
    }
    if !report.is_clean() {
        display::print_now(&summary);
        return Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            "demo: verify found differences between source and target",
        ));
    }
    Ok(summary)
}

/// Runs serve (continuous) until the job is STREAMING, plus `stream_secs` of writes;
/// returns the time from start to STREAMING.
async fn stream_under_writes(
    servers: &servers::Servers,
    pool: &sqlx::MySqlPool,
    job: kernel::ids::JobId,
    a: &DemoOptions,
    out: &display::Out,
    cancel: &CancellationToken,
    w: &writer::Writer,
) -> Result<Duration> {
    let started = Instant::now();
    let serve_cancel = cancel.child_token();
    let mut task = tokio::spawn(supervisor::serve(
        servers.serve_cfg(false),
        serve_cancel.clone(),
    ));
    let mut view = display::Live::new(out, pool.clone(), job).await?;
    let mut streaming_at: Option<Instant> = None;
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let r = loop {
        tokio::select! {
            res = &mut task => {
                let res = res.map_err(|e| Error::transient(format!("serve task: {e}")))?;
                let outcomes = res?;
                break Err(Error::transient(format!("demo: serve ended early: {outcomes:?}")));
            }
            _ = tokio::time::sleep(view.every()) => {}
        }
        if cancel.is_cancelled() {
            break Err(Error::transient("demo: interrupted (Ctrl-C)"));
        }
        if Instant::now() > deadline {
            break Err(Error::transient(
                "demo: no STREAMING within the phase bound",
            ));
        }
        let st = view.tick(w.tally()).await?;
        if let Some(p) = &st.paused {
            break Err(Error::Definite(p.clone()));
        }
        if st.phase.as_deref() == Some("STREAMING") && streaming_at.is_none() {
            streaming_at = Some(Instant::now());
            view.message(&format!(
                "STREAMING after {:.1} s; writing for {} s more while the stream follows",
                started.elapsed().as_secs_f64(),
                a.stream_secs
            ));
        }
        if streaming_at.is_some_and(|t| t.elapsed() >= Duration::from_secs(a.stream_secs)) {
            break Ok(streaming_at.map_or(Duration::ZERO, |t| t - started));
        }
    };
    view.finish();
    serve_cancel.cancel();
    if !task.is_finished() {
        if let Ok(Err(e)) = task.await {
            if r.is_ok() {
                return Err(e);
            }
        }
    }
    r
}

async fn run_serve(
    servers: &servers::Servers,
    exit_when_idle: bool,
    cancel: &CancellationToken,
) -> Result<supervisor::Outcomes> {
    let r = tokio::time::timeout(
        PHASE_TIMEOUT,
        supervisor::serve(servers.serve_cfg(exit_when_idle), cancel.child_token()),
    )
    .await
    .map_err(|_| Error::transient("demo: serve did not become idle"))?;
    if cancel.is_cancelled() {
        return Err(Error::transient("demo: interrupted (Ctrl-C)"));
    }
    r
}

async fn audit(
    servers: &servers::Servers,
    job: kernel::ids::JobId,
) -> Result<crate::table::audit::AuditReport> {
    let state = servers.state_url(STATE_DB);
    let pool = kernel::state::open(&state, &Default::default()).await?;
    let targets = [servers.target_url()];
    // The demo's serve keeps materials where `ServeConfig::new` does (the state store).
    let at = (servers.data_dir(), ledger::material::Placement::default());
    let r = crate::table::audit::offline::audit_job(&pool, job, (&at.0, at.1), &targets).await;
    pool.close().await;
    r
}

async fn verify(servers: &servers::Servers) -> Result<verify::Report> {
    let src = Endpoint::from_url(&servers.source_url(), SOURCE_DB, TABLE)?;
    let tgt = Endpoint::from_url(&servers.target_url(), TARGET_DB, TABLE)?;
    let mut cursor = VerifyCursor::start();
    let r = verify::verify(&src, &tgt, &["id"], &VerifyOptions::default(), &mut cursor).await;
    let _ = src.pool.disconnect().await;
    let _ = tgt.pool.disconnect().await;
    r
}

fn summary(
    json: bool,
    m: &Measured,
    audit: &crate::table::audit::AuditReport,
    v: &verify::Report,
) -> String {
    let t = &v.cursor.tally;
    let secs = m.copy.as_secs_f64().max(1e-3);
    let rate = m.rows_loaded as f64 / secs;
    match json {
        true => format!(
            "{}\n",
            json!({
                "state": audit.phase.as_deref().map(str::to_uppercase),
                "rows": m.rows_loaded,
                "seconds_to_streaming": secs,
                "rows_per_sec": rate.round(),
                "total_seconds": m.total.as_secs_f64(),
                "windows": m.windows,
                "writer": { "statements": m.writes.statements, "refused": m.writes.refused },
                "audit": { "passed": audit.passed(), "windows": audit.windows, "final_pages": audit.final_pages,
                           "l_records": audit.l_records, "activation_credential": audit.activation_present,
                           "findings": audit.findings.len() },
                "verify": { "clean": v.is_clean(), "rows_compared": t.rows_compared, "missing": t.missing.count,
                            "extra": t.extra.count, "differing_fields": t.differing_fields.count },
            })
        ),
        false => format!(
            "\nbackfill demo summary\n\
             state:    {}\n\
             copied:   {} rows in {:.1} s to STREAMING ({:.0} rows/s), {} windows, under {} concurrent writes ({} refused by the source)\n\
             audit:    {} - {} windows, {} FINAL pages with their target ledger credentials and material hashes, change log chain of {} records from the start position (B) to the final fence (F), activation credential {}\n\
             verify:   {} missing / {} extra / {} differing fields over {} rows compared\n\
             total:    {:.1} s (load, copy, catch-up, audit, verify)\n",
            audit.phase.as_deref().unwrap_or("?").to_uppercase(),
            m.rows_loaded,
            secs,
            rate,
            m.windows,
            m.writes.statements,
            m.writes.refused,
            if audit.passed() { "PASS" } else { "FAIL" },
            audit.windows,
            audit.final_pages,
            audit.l_records,
            if audit.activation_present { "present" } else { "MISSING" },
            t.missing.count,
            t.extra.count,
            t.differing_fields.count,
            t.rows_compared,
            m.total.as_secs_f64(),
        ),
    }
}

/// Stops a background task when the demo step that started it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
