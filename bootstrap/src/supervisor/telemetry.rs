//! What one `serve` process counts while it runs, owned by the supervisor and handed to
//! whoever renders it (`present::metrics`): tables paused per code, automatic retries per
//! kind, the admission pools, the source read limiters, and WARN/ERROR log events per
//! module. Nothing here is process-global: a [`Telemetry`] is created by the command that
//! runs `serve` (or `demo`) and passed down; the protocol reports into it through
//! [`crate::table::ctx::Events`], which it implements.
use crate::table::ctx::Events;
use admission::{Admission, AdmissionSnapshot, Throttle, ThrottleStats};
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Kinds of automatic retry or recovery: every one is listed (at 0) before it happens.
pub const RETRY_KINDS: [&str; 6] = [
    "job_task",
    "job_start",
    "capture_reader",
    "uncertain_commit",
    "lease_renewal",
    "state_store",
];

/// Kinds beyond this many are counted as `other` (the label set stays small).
const MAX_RETRY_KINDS: usize = 32;

/// Every pause code, each listed at 0 in the pause counts (the label set is this list,
/// never free text).
pub const PAUSE_CODES: [DefiniteCode; 17] = [
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
    DefiniteCode::Internal,
    DefiniteCode::JournalMissing,
    DefiniteCode::RetriesExhausted,
    DefiniteCode::VerifyFailed,
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
    | DefiniteCode::Preparation
    | DefiniteCode::Internal
    | DefiniteCode::JournalMissing
    | DefiniteCode::RetriesExhausted
    | DefiniteCode::VerifyFailed => {}
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The counters of one process. Cheap to clone (shared).
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    pauses: Mutex<BTreeMap<&'static str, u64>>,
    retries: Mutex<BTreeMap<String, u64>>,
    admission: Mutex<Option<Admission>>,
    throttles: Mutex<Vec<Arc<Throttle>>>,
    verifies: Mutex<VerifyCounts>,
    conn_pools: Mutex<Vec<crate::io::pool::ConnPool>>,
    log: LogCounts,
}

/// What the periodic verifies of one process found (`serve --verify-every`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyCounts {
    /// Verifies that ended with a result (clean or not).
    pub verifies: u64,
    /// Verifies that found a difference (each paused its table).
    pub failed: u64,
    /// Differing rows found, summed (missing, extra and differing fields).
    pub differing_rows: u64,
}

impl Default for Telemetry {
    fn default() -> Telemetry {
        Telemetry::new(LogCounts::default())
    }
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

impl Telemetry {
    /// Counters that also show the log events counted by `log`'s tracing layer.
    pub fn new(log: LogCounts) -> Telemetry {
        Telemetry {
            inner: Arc::new(Inner {
                pauses: Mutex::new(PAUSE_CODES.iter().map(|c| (c.as_str(), 0)).collect()),
                retries: Mutex::new(RETRY_KINDS.iter().map(|k| ((*k).to_string(), 0)).collect()),
                admission: Mutex::new(None),
                throttles: Mutex::new(Vec::new()),
                verifies: Mutex::new(VerifyCounts::default()),
                conn_pools: Mutex::new(Vec::new()),
                log,
            }),
        }
    }

    /// The admission pools of the serve this telemetry belongs to.
    pub fn observe_admission(&self, a: &Admission) {
        *lock(&self.inner.admission) = Some(a.clone());
    }

    /// The admission pools, once serve started (tests take permits from them).
    pub fn admission(&self) -> Option<Admission> {
        lock(&self.inner.admission).clone()
    }

    /// The admission state, once serve started (tests: no permit leaked).
    pub fn admission_snapshot(&self) -> Option<AdmissionSnapshot> {
        lock(&self.inner.admission)
            .as_ref()
            .map(Admission::snapshot)
    }

    /// A connection pool of serve (one per server and account).
    pub fn add_conn_pool(&self, p: crate::io::pool::ConnPool) {
        lock(&self.inner.conn_pools).push(p);
    }

    /// Every connection pool of serve now (size, use, peak, waits).
    pub fn conn_pools(&self) -> Vec<crate::io::pool::PoolStats> {
        lock(&self.inner.conn_pools)
            .iter()
            .map(crate::io::pool::ConnPool::stats)
            .collect()
    }

    /// A source read limiter started by serve.
    pub fn add_throttle(&self, t: Arc<Throttle>) {
        lock(&self.inner.throttles).push(t);
    }

    /// What the read limiters granted, summed over the sources.
    pub fn throttle_stats(&self) -> ThrottleStats {
        lock(&self.inner.throttles).iter().map(|t| t.stats()).fold(
            ThrottleStats::default(),
            |a, b| ThrottleStats {
                calls: a.calls + b.calls,
                waits: a.waits + b.waits,
                rows: a.rows + b.rows,
                bytes: a.bytes + b.bytes,
            },
        )
    }

    /// Tables paused per code, every code listed.
    pub fn pauses(&self) -> Vec<(&'static str, u64)> {
        lock(&self.inner.pauses)
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect()
    }

    /// Automatic retries per kind, every known kind listed.
    pub fn retries(&self) -> Vec<(String, u64)> {
        lock(&self.inner.retries)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    }

    /// The periodic verifies' counts.
    pub fn verifies(&self) -> VerifyCounts {
        *lock(&self.inner.verifies)
    }

    /// WARN and ERROR events per (level, module).
    pub fn log_events(&self) -> Vec<((&'static str, String), u64)> {
        self.inner.log.snapshot()
    }

    /// Counts one automatic retry or recovery of `kind`.
    pub fn count_retry(&self, kind: &str) {
        let mut m = lock(&self.inner.retries);
        let kind = if m.contains_key(kind) || m.len() < MAX_RETRY_KINDS {
            kind.to_string()
        } else {
            "other".to_string()
        };
        *m.entry(kind).or_insert(0) += 1;
    }
}

impl Events for Telemetry {
    fn paused(&self, _job: JobId, code: DefiniteCode) {
        *lock(&self.inner.pauses).entry(code.as_str()).or_insert(0) += 1;
    }

    fn retried(&self, _job: Option<JobId>, kind: &'static str) {
        self.count_retry(kind);
    }

    fn verified(&self, _job: JobId, differing: u64) {
        let mut v = lock(&self.inner.verifies);
        v.verifies += 1;
        v.failed += u64::from(differing > 0);
        v.differing_rows += differing;
    }
}

/// WARN and ERROR log events per (level, module), filled by [`EventCounter`].
#[derive(Clone, Default)]
pub struct LogCounts(Arc<Mutex<BTreeMap<(&'static str, String), u64>>>);

impl LogCounts {
    fn snapshot(&self) -> Vec<((&'static str, String), u64)> {
        lock(&self.0).iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// A tracing layer counting WARN and ERROR events per module (crate::module, no text)
/// into its [`LogCounts`]. The program installs one with the log subscriber and hands the
/// counts to the telemetry of the command it runs.
pub struct EventCounter(pub LogCounts);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for EventCounter {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
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
        *lock(&self.0 .0).entry((kind, target)).or_insert(0) += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_and_kind_is_listed_and_each_event_moves_its_own() {
        let t = Telemetry::default();
        assert_eq!(t.pauses().len(), PAUSE_CODES.len());
        assert!(t.pauses().iter().all(|(_, n)| *n == 0));
        t.paused(JobId(1), DefiniteCode::BinlogPurged);
        let purged = t.pauses().into_iter().find(|(c, _)| *c == "binlog_purged");
        assert_eq!(purged, Some(("binlog_purged", 1)));
        let kinds: Vec<String> = t.retries().into_iter().map(|(k, _)| k).collect();
        for k in RETRY_KINDS {
            assert!(kinds.contains(&k.to_string()), "{kinds:?}");
        }
        t.retried(None, "job_task");
        t.retried(Some(JobId(2)), "job_task");
        let n = t.retries().into_iter().find(|(k, _)| k == "job_task");
        assert_eq!(n, Some(("job_task".to_string(), 2)));
        assert_eq!(t.verifies(), VerifyCounts::default());
        t.verified(JobId(3), 0);
        t.verified(JobId(3), 2);
        let v = t.verifies();
        assert_eq!((v.verifies, v.failed, v.differing_rows), (2, 1, 2));
    }

    #[test]
    fn unknown_kinds_beyond_the_cap_count_as_other() {
        let t = Telemetry::default();
        for i in 0..(MAX_RETRY_KINDS + 3) {
            t.count_retry(&format!("k{i}"));
        }
        let r = t.retries();
        assert_eq!(r.len(), MAX_RETRY_KINDS + 1, "{r:?}");
        // The five known kinds take five of the places.
        let other = (RETRY_KINDS.len() + 3) as u64;
        assert_eq!(
            r.iter().find(|(k, _)| k == "other").map(|x| x.1),
            Some(other)
        );
    }

    #[test]
    fn the_layer_counts_warn_and_error_per_module_only() {
        use tracing_subscriber::layer::SubscriberExt;
        let logs = LogCounts::default();
        let sub = tracing_subscriber::registry().with(EventCounter(logs.clone()));
        tracing::subscriber::with_default(sub, || {
            tracing::warn!("one");
            tracing::error!("two");
            tracing::info!("not counted");
        });
        let t = Telemetry::new(logs);
        let total: u64 = t.log_events().iter().map(|(_, n)| n).sum();
        assert_eq!(total, 2, "{:?}", t.log_events());
    }
}
