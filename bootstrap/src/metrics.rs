//! Prometheus text exposition (STYLE §10) on an optional `--metrics-addr` of `serve` and
//! `demo`: a tiny HTTP/1.1 handler on tokio, no framework.
//!
//! What is exposed is read at scrape time, so the protocol code carries no metric calls:
//! * per job, from the state store through [`crate::status::gather`] (the numbers
//!   `status` prints): rows known/read/sealed/applied, windows planned/completed, replay
//!   groups and lag, phase and pause code;
//! * the admission pools of this process (capacity, in use, held by unconfirmed
//!   releases, waiting), published by `serve` through [`observe_admission`], and its
//!   source read rate limiters (page reads granted and waited);
//! * warning and error events of this process per module (`_total`), counted by a tracing
//!   layer: every retry and every pause is logged at one of these levels;
//! * automatic retries and recoveries per kind (`backfill_retries_total`): the same layer
//!   counts every event that carries a `retry = "kind"` field (serve's job task and
//!   capture reader restarts, recoveries of uncertain target commits, ...);
//! * tables paused by this process per pause code (`backfill_pauses_total`), counted by
//!   the one place a pause is recorded in J (`crate::job::pause`), through [`count_pause`].
//!
//! Labels are low-cardinality: job id, pool, phase, pause code, module; never error text.
use crate::status::{self, JobStatus};
use admission::Admission;
use kernel::error::DefiniteCode;
use kernel::Result;
use sqlx::MySqlPool;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Largest request head read (bytes).
const MAX_REQUEST: usize = 8 * 1024;
/// Bound on reading a request and on rendering the answer.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

fn admission_slot() -> &'static Mutex<Option<Admission>> {
    static SLOT: OnceLock<Mutex<Option<Admission>>> = OnceLock::new();
    SLOT.get_or_init(|| Mutex::new(None))
}

/// Kinds of automatic retry or recovery: every one is listed (at 0) before it happens.
pub const RETRY_KINDS: [&str; 5] = [
    "job_task",
    "job_start",
    "capture_reader",
    "uncertain_commit",
    "lease_renewal",
];

fn retries() -> &'static Mutex<BTreeMap<String, u64>> {
    static RETRIES: OnceLock<Mutex<BTreeMap<String, u64>>> = OnceLock::new();
    RETRIES.get_or_init(|| Mutex::new(RETRY_KINDS.iter().map(|k| ((*k).to_string(), 0)).collect()))
}

/// The retry kind an event carries in its `retry` field, if any.
struct RetryField(Option<String>);

impl tracing::field::Visit for RetryField {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "retry" {
            self.0 = Some(value.to_string());
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "retry" {
            self.0 = Some(format!("{value:?}").trim_matches('"').to_string());
        }
    }
}

/// Kinds beyond this many are counted as `other` (the label set stays small).
const MAX_RETRY_KINDS: usize = 32;

fn count_retry(kind: String) {
    let mut m = retries().lock().unwrap_or_else(|p| p.into_inner());
    let kind = if m.contains_key(&kind) || m.len() < MAX_RETRY_KINDS {
        kind
    } else {
        "other".to_string()
    };
    *m.entry(kind).or_insert(0) += 1;
}

/// Every pause code, each listed at 0 in `backfill_pauses_total` (the label set is this
/// list, never free text).
pub const PAUSE_CODES: [DefiniteCode; 13] = [
    DefiniteCode::Precondition,
    DefiniteCode::Usage,
    DefiniteCode::SchemaChanged,
    DefiniteCode::BinlogPurged,
    DefiniteCode::LineageChanged,
    DefiniteCode::EvidenceConflict,
    DefiniteCode::EvidenceCorrupt,
    DefiniteCode::CapacityExhausted,
    DefiniteCode::TargetRejected,
    DefiniteCode::ReleaseUnconfirmed,
    DefiniteCode::Fenced,
    DefiniteCode::Uncapturable,
    DefiniteCode::Preparation,
];

/// Fails to compile when a code is added to [`DefiniteCode`]: whoever adds it here adds it
/// to [`PAUSE_CODES`] next to it.
const _: fn(DefiniteCode) = |c| match c {
    DefiniteCode::Precondition
    | DefiniteCode::Usage
    | DefiniteCode::SchemaChanged
    | DefiniteCode::BinlogPurged
    | DefiniteCode::LineageChanged
    | DefiniteCode::EvidenceConflict
    | DefiniteCode::EvidenceCorrupt
    | DefiniteCode::CapacityExhausted
    | DefiniteCode::TargetRejected
    | DefiniteCode::ReleaseUnconfirmed
    | DefiniteCode::Fenced
    | DefiniteCode::Uncapturable
    | DefiniteCode::Preparation => {}
};

fn pauses() -> &'static Mutex<BTreeMap<&'static str, u64>> {
    static PAUSES: OnceLock<Mutex<BTreeMap<&'static str, u64>>> = OnceLock::new();
    PAUSES.get_or_init(|| Mutex::new(PAUSE_CODES.iter().map(|c| (c.as_str(), 0)).collect()))
}

/// Counts one table paused with `code` (called once J records the pause).
pub fn count_pause(code: DefiniteCode) {
    *pauses()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(code.as_str())
        .or_insert(0) += 1;
}

fn pauses_family() -> Family {
    let mut f = Family::new(
        "backfill_pauses_total",
        "counter",
        "tables paused by this process per pause code (runbooks/pauses.md)",
    );
    for (code, n) in pauses().lock().unwrap_or_else(|p| p.into_inner()).iter() {
        f.add(&[("reason", code)], *n as f64);
    }
    f
}

fn events() -> &'static Mutex<BTreeMap<(&'static str, String), u64>> {
    static EVENTS: OnceLock<Mutex<BTreeMap<(&'static str, String), u64>>> = OnceLock::new();
    EVENTS.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Makes this process's admission pools visible to the metrics endpoint.
pub fn observe_admission(a: &Admission) {
    *admission_slot().lock().unwrap_or_else(|p| p.into_inner()) = Some(a.clone());
}

/// The admission pools of the last `serve` of this process (tests take permits from it).
pub fn observed_admission() -> Option<Admission> {
    admission_slot()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The admission state of the last `serve` of this process (tests: no permit leaked).
pub fn admission_snapshot() -> Option<admission::AdmissionSnapshot> {
    admission_slot()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .map(Admission::snapshot)
}

/// A tracing layer counting WARN and ERROR events per module (crate::module, no text),
/// and every event with a `retry = "kind"` field as one automatic retry or recovery.
pub struct EventCounter;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for EventCounter {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut retry = RetryField(None);
        event.record(&mut retry);
        if let Some(kind) = retry.0 {
            count_retry(kind);
        }
        let level = *event.metadata().level();
        let kind = if level == tracing::Level::ERROR {
            "error"
        } else if level == tracing::Level::WARN {
            "warn"
        } else {
            return;
        };
        // The module path up to two segments keeps the label set small.
        let target: String = event
            .metadata()
            .target()
            .split("::")
            .take(2)
            .collect::<Vec<_>>()
            .join("::");
        *events()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry((kind, target))
            .or_insert(0) += 1;
    }
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
    cancel: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        kernel::Error::definite(
            kernel::error::DefiniteCode::Usage,
            format!("--metrics-addr {addr}: cannot listen: {e}"),
        )
    })?;
    let pool = kernel::state::open(state_url, &Default::default()).await?;
    tracing::info!(%addr, "metrics endpoint listening (GET /metrics)");
    Ok(tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                _ = cancel.cancelled() => break,
                a = listener.accept() => a,
            };
            let Ok((sock, _)) = accepted else { continue };
            let pool = pool.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(IO_TIMEOUT, answer(sock, &pool)).await;
            });
        }
        pool.close().await;
    }))
}

async fn answer(mut sock: tokio::net::TcpStream, pool: &MySqlPool) -> std::io::Result<()> {
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
        ("200 OK", "text/plain; version=0.0.4", render(pool).await)
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

/// The whole exposition.
pub async fn render(pool: &MySqlPool) -> String {
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
    for f in admission_families() {
        f.write(&mut out);
    }
    for f in throttle_families() {
        f.write(&mut out);
    }
    let mut ev = Family::new(
        "backfill_log_events_total",
        "counter",
        "WARN and ERROR events of this process (retries, pauses, failures) per module",
    );
    for ((level, target), n) in events().lock().unwrap_or_else(|p| p.into_inner()).iter() {
        ev.add(&[("level", level), ("module", target)], *n as f64);
    }
    ev.write(&mut out);
    retries_family().write(&mut out);
    pauses_family().write(&mut out);
    out
}

fn retries_family() -> Family {
    let mut f = Family::new(
        "backfill_retries_total",
        "counter",
        "automatic retries and recoveries of this process (job task restarts, capture reader \
         restarts, uncertain target commits resolved from T, ...) per kind",
    );
    for (kind, n) in retries().lock().unwrap_or_else(|p| p.into_inner()).iter() {
        f.add(&[("kind", kind)], *n as f64);
    }
    f
}

async fn jobs_status(pool: &MySqlPool) -> Result<Vec<JobStatus>> {
    let mut all = Vec::new();
    for j in status::read(pool, None).await? {
        all.push(status::gather(pool, j).await?);
    }
    Ok(all)
}

fn job_families(all: &[JobStatus]) -> Vec<Family> {
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
        "windows applied and recorded in J",
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
        "binlog bytes from T's cursor to the capture position (same file)",
    );
    let mut lag_s = Family::new(
        "backfill_replay_lag_seconds",
        "gauge",
        "age of the oldest captured group not yet replayed",
    );
    let mut phase = Family::new("backfill_job_phase", "gauge", "1 for the job's J phase");
    let mut paused = Family::new(
        "backfill_job_paused",
        "gauge",
        "1 while the job is paused, labelled with the pause code",
    );
    for s in all {
        let job = s.job.job_id.0.to_string();
        let j = [("job", job.as_str())];
        rows_read.add(&j, s.rows_read as f64);
        rows_final.add(&j, s.rows_final as f64);
        rows_applied.add(&j, s.rows_applied as f64);
        rows_known.add(&j, s.job.estimated_rows as f64);
        win_done.add(&j, f64::from(s.windows_done));
        win_plan.add(&j, f64::from(s.job.windows));
        if let Some(r) = &s.replay {
            groups.add(&j, r.groups_applied as f64);
            if let Some(b) = r.lag.behind_bytes {
                lag_b.add(&j, b as f64);
            }
            lag_s.add(&j, r.lag.behind_ms as f64 / 1000.0);
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
fn throttle_families() -> Vec<Family> {
    let t = crate::serve::read_throttle_stats();
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

fn admission_families() -> Vec<Family> {
    let Some(a) = admission_slot()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    else {
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

    fn retries_of(kind: &str) -> u64 {
        retries()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(kind)
            .copied()
            .unwrap_or(0)
    }

    #[test]
    fn every_pause_code_is_listed_and_a_pause_moves_its_own() {
        let mut before = String::new();
        pauses_family().write(&mut before);
        for c in PAUSE_CODES {
            let line = format!("backfill_pauses_total{{reason=\"{}\"}}", c.as_str());
            assert!(before.contains(&line), "{before}");
        }
        let n = |out: &str| -> f64 {
            let l = "backfill_pauses_total{reason=\"binlog_purged\"} ";
            out.lines()
                .find_map(|x| x.strip_prefix(l))
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1.0)
        };
        count_pause(DefiniteCode::BinlogPurged);
        let mut after = String::new();
        pauses_family().write(&mut after);
        assert_eq!(n(&after), n(&before) + 1.0, "{after}");
    }

    #[test]
    fn events_with_a_retry_field_count_as_retries() {
        use tracing_subscriber::layer::SubscriberExt;
        let before = retries_of("job_task");
        let sub = tracing_subscriber::registry().with(EventCounter);
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(
                retry = "job_task",
                "job task failed transiently; restarting it"
            );
            tracing::info!(retry = "job_task", "counted whatever the level");
            tracing::warn!("no retry field: not a retry");
        });
        assert_eq!(retries_of("job_task"), before + 2);
        let mut out = String::new();
        retries_family().write(&mut out);
        for kind in RETRY_KINDS {
            assert!(
                out.contains(&format!("backfill_retries_total{{kind=\"{kind}\"}}")),
                "{out}"
            );
        }
    }
}
