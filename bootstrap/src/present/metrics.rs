//! Prometheus text exposition (STYLE §10) on an optional `--metrics-addr` of `serve` and
//! `demo`: a tiny HTTP/1.1 handler on tokio, no framework.
//!
//! What is exposed is read at scrape time, from two sources:
//! * per job, from the state store through [`crate::present::status::fleet::gather`] (the
//!   set-wise reads of `status` without a JOB: a scrape is the same few queries for any
//!   number of jobs): rows known/read/sealed/applied, windows planned/completed, replay
//!   groups and lag, phase and pause code;
//! * the [`Telemetry`] of the serve this endpoint belongs to (handed to [`spawn`]; nothing
//!   process-global): its admission pools (capacity, in use, held by unconfirmed releases,
//!   waiting), its source read rate limiters (page reads granted and waited), WARN and
//!   ERROR log events per module (`_total`), automatic retries and recoveries per kind
//!   (`backfill_retries_total`: job task and capture reader restarts, lease renewals,
//!   uncertain target commits resolved from T) and tables paused per pause code
//!   (`backfill_pauses_total`, reported by the one place a pause is recorded in J,
//!   `crate::table::pause`, through `table::ctx::Events`), and the periodic verifies of
//!   `serve --verify-every` (`backfill_verifies_total`, `backfill_verify_failures_total`,
//!   `backfill_verify_differing_rows_total`).
//!
//! Labels are low-cardinality: job id, pool, phase, pause code, module; never error text.
use crate::present::status::fleet::{self, FleetRow};
use crate::supervisor::telemetry::Telemetry;
use kernel::Result;
use sqlx::MySqlPool;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Largest request head read (bytes).
const MAX_REQUEST: usize = 8 * 1024;
/// Bound on reading a request and on rendering the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn pauses_family(t: &Telemetry) -> Family {
    let mut f = Family::new(
        "backfill_pauses_total",
        "counter",
        "tables paused by this process per pause code (runbooks/pauses.md)",
    );
    for (code, n) in t.pauses() {
        f.add(&[("reason", code)], n as f64);
    }
    f
}

/// Parses `--metrics-addr`.
pub fn parse_addr(s: &str) -> std::result::Result<SocketAddr, String> {
    s.parse()
        .map_err(|e| format!("`{s}` is not an address like 127.0.0.1:9187: {e}"))
}

/// Binds `addr` and serves `/metrics` until `cancel`. Binding errors are returned at once.
pub async fn spawn(
    addr: SocketAddr,
    state_url: &str,
    telemetry: Telemetry,
    cancel: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        kernel::Error::definite(
            kernel::error::DefiniteCode::Usage,
            format!("--metrics-addr {addr}: cannot listen: {e}"),
        )
    })?;
    let pool = kernel::state::open(state_url, &STATE_OPTIONS).await?;
    tracing::info!(%addr, "metrics endpoint listening (GET /metrics)");
    Ok(tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => break,
                a = listener.accept() => a,
            };
            let Ok((sock, _)) = accepted else { continue };
            let pool = pool.clone();
            let t = telemetry.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(IO_TIMEOUT, answer(sock, &pool, &t)).await;
            });
        }
        pool.close().await;
    }))
}

async fn answer(
    mut sock: tokio::net::TcpStream,
    pool: &MySqlPool,
    t: &Telemetry,
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let path = head.split_whitespace().nth(1).unwrap_or("");
    let (code, kind, body) = if head.starts_with("GET ") && (path == "/metrics" || path == "/") {
        ("200 OK", "text/plain; version=0.0.4", render(pool, t).await)
    } else {
        ("404 Not Found", "text/plain", "GET /metrics\n".to_string())
    };
    let resp = format!(
        "HTTP/1.1 {code}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(resp.as_bytes()).await?;
    sock.shutdown().await
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

impl Family {
    fn new(name: &'static str, kind: &'static str, help: &'static str) -> Family {
        Family {
            name,
            kind,
            help,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: &[(&str, &str)], v: f64) {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
            .collect();
        self.samples.push((l.join(","), v));
    }

    fn write(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (l, v) in &self.samples {
            let _ = if l.is_empty() {
                writeln!(out, "{} {v}", self.name)
            } else {
                writeln!(out, "{}{{{l}}} {v}", self.name)
            };
        }
    }
}

/// The metrics endpoint's own state-store connections: a scrape reads with one, so two
/// are plenty, and they count in the state store's bound (docs/connections.md).
pub const STATE_CONNECTIONS: u32 = 2;

const STATE_OPTIONS: kernel::state::StateOptions = kernel::state::StateOptions {
    max_connections: STATE_CONNECTIONS,
    connect_timeout: std::time::Duration::from_secs(10),
};

/// The whole exposition.
pub async fn render(pool: &MySqlPool, t: &Telemetry) -> String {
    let mut out = String::new();
    let mut up = Family::new(
        "backfill_state_store_up",
        "gauge",
        "1 when the state store answered this scrape",
    );
    match jobs_status(pool).await {
        Ok(all) => {
            up.add(&[], 1.0);
            for f in job_families(&all) {
                f.write(&mut out);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "metrics: cannot read the state store");
            up.add(&[], 0.0);
        }
    }
    up.write(&mut out);
    for f in admission_families(t) {
        f.write(&mut out);
    }
    for f in throttle_families(t) {
        f.write(&mut out);
    }
    for f in conn_pool_families(t) {
        f.write(&mut out);
    }
    let mut ev = Family::new(
        "backfill_log_events_total",
        "counter",
        "WARN and ERROR events of this process (retries, pauses, failures) per module",
    );
    for ((level, target), n) in t.log_events() {
        ev.add(&[("level", level), ("module", &target)], n as f64);
    }
    ev.write(&mut out);
    retries_family(t).write(&mut out);
    pauses_family(t).write(&mut out);
    verify_families(t).iter().for_each(|f| f.write(&mut out));
    out
}

/// The periodic verifies of `serve --verify-every`: how many ran, how many found a
/// difference, and the differing rows they found.
fn verify_families(t: &Telemetry) -> [Family; 3] {
    let v = t.verifies();
    let mut all = [
        Family::new(
            "backfill_verifies_total",
            "counter",
            "periodic verifies (serve --verify-every) that ended with a result",
        ),
        Family::new(
            "backfill_verify_failures_total",
            "counter",
            "periodic verifies that found a difference (each paused its table: verify_failed)",
        ),
        Family::new(
            "backfill_verify_differing_rows_total",
            "counter",
            "rows the periodic verifies found differing (missing, extra, differing fields)",
        ),
    ];
    for (f, n) in all.iter_mut().zip([v.verifies, v.failed, v.differing_rows]) {
        f.add(&[], n as f64);
    }
    all
}

fn retries_family(t: &Telemetry) -> Family {
    let mut f = Family::new(
        "backfill_retries_total",
        "counter",
        "automatic retries and recoveries of this process (job task restarts, capture reader \
         restarts, uncertain target commits resolved from the target ledger, ...) per kind",
    );
    for (kind, n) in t.retries() {
        f.add(&[("kind", &kind)], n as f64);
    }
    f
}

/// Every job's numbers in a fixed number of set-wise reads (the fleet's, as `status`
/// without a JOB): a scrape costs the same few queries with 10 or 1 000 jobs.
async fn jobs_status(pool: &MySqlPool) -> Result<Vec<FleetRow>> {
    fleet::gather(pool).await
}

fn job_families(all: &[FleetRow]) -> Vec<Family> {
    let mut rows_read = Family::new(
        "backfill_rows_read_total",
        "counter",
        "rows read under window read views",
    );
    let mut rows_final = Family::new(
        "backfill_rows_sealed_total",
        "counter",
        "rows sealed in FINAL pages",
    );
    let mut rows_applied = Family::new(
        "backfill_rows_applied_total",
        "counter",
        "window rows applied to the target",
    );
    let mut rows_known = Family::new(
        "backfill_rows_known",
        "gauge",
        "rows the source estimated at install",
    );
    let mut win_done = Family::new(
        "backfill_windows_completed_total",
        "counter",
        "windows applied and recorded in the journal",
    );
    let mut win_plan = Family::new("backfill_windows_planned", "gauge", "windows in the plan");
    let mut groups = Family::new(
        "backfill_replay_groups_total",
        "counter",
        "source transactions (groups) replayed into the target",
    );
    let mut lag_b = Family::new(
        "backfill_replay_lag_bytes",
        "gauge",
        "binlog bytes from the target ledger's replay cursor to the capture position (same file)",
    );
    let mut lag_s = Family::new(
        "backfill_replay_lag_seconds",
        "gauge",
        "age of the oldest captured group not yet replayed",
    );
    let mut phase = Family::new(
        "backfill_job_phase",
        "gauge",
        "1 for the job's phase in the journal",
    );
    let mut paused = Family::new(
        "backfill_job_paused",
        "gauge",
        "1 while the job is paused, labelled with the pause code",
    );
    for s in all {
        let job = s.job.job_id.0.to_string();
        let j = [("job", job.as_str())];
        rows_read.add(&j, s.rows.read as f64);
        rows_final.add(&j, s.rows.sealed as f64);
        rows_applied.add(&j, s.rows.applied as f64);
        rows_known.add(&j, s.job.estimated_rows as f64);
        win_done.add(&j, f64::from(s.windows_done));
        win_plan.add(&j, f64::from(s.job.windows));
        if let Some(r) = &s.replay {
            groups.add(&j, r.groups_applied as f64);
            if let Some(b) = r.behind_bytes {
                lag_b.add(&j, b as f64);
            }
            lag_s.add(&j, r.lag_ms as f64 / 1000.0);
        }
        let p = s.phase.clone().unwrap_or_else(|| s.job.state.clone());
        phase.add(&[("job", &job), ("phase", &p)], 1.0);
        match &s.paused {
            Some(d) => paused.add(&[("job", &job), ("code", d.code.as_str())], 1.0),
            None => paused.add(&[("job", &job), ("code", "")], 0.0),
        }
    }
    vec![
        rows_known,
        rows_read,
        rows_final,
        rows_applied,
        win_plan,
        win_done,
        groups,
        lag_b,
        lag_s,
        phase,
        paused,
    ]
}

/// The source read rate limits of this process's serve (`--read-rows-per-sec`,
/// `--read-bytes-per-sec`): page reads granted, and those that had to wait.
fn throttle_families(telemetry: &Telemetry) -> Vec<Family> {
    let t = telemetry.throttle_stats();
    let mut calls = Family::new(
        "backfill_read_throttle_calls_total",
        "counter",
        "window page reads that passed the source read rate limit",
    );
    calls.add(&[], t.calls as f64);
    let mut waits = Family::new(
        "backfill_read_throttle_waits_total",
        "counter",
        "window page reads that waited for the source read rate limit",
    );
    waits.add(&[], t.waits as f64);
    vec![calls, waits]
}

/// The connections of this process per server (`crate::io::pool`): slots per use
/// (data, control, kill), in use now, the most in use at once, waits for a slot.
fn conn_pool_families(t: &Telemetry) -> Vec<Family> {
    let mut cap = Family::new(
        "backfill_connections_capacity",
        "gauge",
        "connection slots of the pool per server and use",
    );
    let mut used = Family::new(
        "backfill_connections_in_use",
        "gauge",
        "connections open now per server and use",
    );
    let mut peak = Family::new(
        "backfill_connections_peak",
        "gauge",
        "most connections open at once per server and use",
    );
    let mut waits = Family::new(
        "backfill_connections_waits_total",
        "counter",
        "connections that waited for a free slot",
    );
    for p in t.conn_pools() {
        for s in &p.slots {
            let l = [
                ("side", p.side),
                ("server", p.server.as_str()),
                ("use", s.usage.as_str()),
            ];
            cap.add(&l, f64::from(s.capacity));
            used.add(&l, f64::from(s.in_use));
            peak.add(&l, f64::from(s.peak));
            waits.add(&l, s.waits as f64);
        }
    }
    vec![cap, used, peak, waits]
}

fn admission_families(t: &Telemetry) -> Vec<Family> {
    let Some(a) = t.admission() else {
        return Vec::new();
    };
    let snap = a.snapshot();
    let mut cap = Family::new(
        "backfill_admission_capacity",
        "gauge",
        "permits of the pool",
    );
    let mut used = Family::new("backfill_admission_in_use", "gauge", "permits in use");
    let mut held = Family::new(
        "backfill_admission_holds",
        "gauge",
        "permits held by a release not yet confirmed",
    );
    let mut waiting = Family::new(
        "backfill_admission_waiting",
        "gauge",
        "owners waiting for a permit",
    );
    let mut blocked = Family::new(
        "backfill_admission_waiting_blocked_by_holds",
        "gauge",
        "waiters that would be admitted if the pool's holds (release unknown) were confirmed",
    );
    for kind in admission::PoolKind::ALL {
        let p = snap.pool(kind);
        let l = [("pool", kind.as_str())];
        cap.add(&l, f64::from(p.capacity));
        used.add(&l, p.in_use.len() as f64);
        held.add(&l, p.holds.len() as f64);
        waiting.add(&l, p.waiting.len() as f64);
        let n = p.waiting.iter().filter(|w| w.blocked_by_holds).count();
        blocked.add(&l, n as f64);
    }
    vec![cap, used, held, waiting, blocked]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervisor::telemetry::{PAUSE_CODES, RETRY_KINDS};
    use kernel::error::DefiniteCode;

    #[test]
    fn families_render_in_text_format() {
        let mut f = Family::new("backfill_x_total", "counter", "x");
        f.add(&[("job", "1")], 3.0);
        f.add(&[("job", "a\"b")], 1.5);
        let mut s = String::new();
        f.write(&mut s);
        assert_eq!(
            s,
            "# HELP backfill_x_total x\n# TYPE backfill_x_total counter\n\
             backfill_x_total{job=\"1\"} 3\nbackfill_x_total{job=\"a\\\"b\"} 1.5\n"
        );
        assert!(parse_addr("127.0.0.1:9187").is_ok());
        assert!(parse_addr("nope").is_err());
    }

    fn value(out: &str, line: &str) -> f64 {
        out.lines()
            .find_map(|x| x.strip_prefix(line))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(-1.0)
    }

    #[test]
    fn every_pause_code_and_retry_kind_is_listed_and_an_event_moves_its_own() {
        use crate::table::ctx::Events;
        let t = Telemetry::default();
        let mut before = String::new();
        pauses_family(&t).write(&mut before);
        retries_family(&t).write(&mut before);
        for c in PAUSE_CODES {
            let line = format!("backfill_pauses_total{{reason=\"{}\"}}", c.as_str());
            assert!(before.contains(&line), "{before}");
        }
        for kind in RETRY_KINDS {
            let line = format!("backfill_retries_total{{kind=\"{kind}\"}}");
            assert!(before.contains(&line), "{before}");
        }
        t.paused(kernel::ids::JobId(1), DefiniteCode::BinlogPurged);
        t.retried(None, "job_task");
        let mut after = String::new();
        pauses_family(&t).write(&mut after);
        retries_family(&t).write(&mut after);
        let purged = "backfill_pauses_total{reason=\"binlog_purged\"} ";
        assert_eq!(
            value(&after, purged),
            value(&before, purged) + 1.0,
            "{after}"
        );
        let task = "backfill_retries_total{kind=\"job_task\"} ";
        assert_eq!(value(&after, task), value(&before, task) + 1.0, "{after}");
    }
}
