//! The context every protocol step of one table takes ([`JobCtx`]), the tunables that may
//! change between restarts ([`RunConfig`]), how a job task ended ([`Reached`]), and the
//! [`Events`] through which the protocol reports upwards (pauses, retries) without
//! knowing who listens: the supervisor implements it, `present::metrics` reads it.
use crate::io::pool::ConnPool;
use crate::store::jobs::JobRecord;
use crate::table::hooks::WindowHooks;
use admission::Admission;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{Generation, JobId};
use kernel::range::KeyRange;
use kernel::schema::SealedSchema;
use kernel::{Error, Result};
use ledger::journal::{Head, Journal};
use ledger::lease::Lease;
use ledger::material::MaterialStore;
use ledger::record::Phase;
use ledger::registry::Registry;
use ledger::target::TargetCtx;
use sqlx::MySqlPool;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Everything a job's protocol steps need. Built by `serve`; issue 6 (F, replay, audit)
/// and issue 7 (cancel, pause/resume) take the same context.
#[derive(Clone)]
pub struct JobCtx {
    pub job: JobRecord,
    pub schema: SealedSchema,
    pub plan: Vec<KeyRange>,
    pub pool: MySqlPool,
    pub journal: Journal,
    pub lease: Lease,
    pub registry: Registry,
    pub store: Arc<dyn MaterialStore>,
    /// The L stream of the job's source server.
    pub stream: String,
    /// The source server's connections, shared by every job on it (`crate::io::pool`;
    /// options with the password, never printed).
    pub source: ConnPool,
    /// The target server's connections (ledger session settings), shared likewise.
    pub target: ConnPool,
    pub tctx: TargetCtx,
    pub admission: Admission,
    /// Client deadlines of target writes (a timed-out statement is KILLed and confirmed).
    pub deadlines: crate::io::bounded::Deadlines,
    /// The source's read rate limits (rows/s, bytes/s), shared by the jobs of one source.
    pub throttle: Arc<admission::Throttle>,
    pub cfg: RunConfig,
    pub hooks: Arc<dyn WindowHooks>,
    /// The activation audit's field comparer (`crate::verify`'s, put here by the
    /// supervisor: this layer cannot import verify).
    pub fields: Arc<dyn crate::table::audit::FieldComparer>,
    /// Where pauses and automatic retries are reported (the supervisor's telemetry).
    pub events: Arc<dyn Events>,
    pub cancel: CancellationToken,
}

/// What the protocol reports upwards while it runs (Vector's internal events are the
/// model): the supervisor implements it and `present::metrics` renders its counts. The
/// protocol never learns who listens, so no layer below the supervisor holds a counter.
pub trait Events: Send + Sync {
    /// J recorded a pause of `job` with `code`.
    fn paused(&self, job: JobId, code: DefiniteCode);
    /// An automatic retry or recovery of `kind` (a name from a short fixed list).
    fn retried(&self, job: Option<JobId>, kind: &'static str);
    /// A periodic verify of `job` (`serve --verify-every`) ended: `differing` rows differ
    /// (0: clean). Listeners that do not count verifies ignore it.
    fn verified(&self, _job: JobId, _differing: u64) {}
}

impl JobCtx {
    pub fn id(&self) -> JobId {
        self.job.job_id
    }

    pub fn generation(&self) -> Generation {
        self.job.generation
    }

    /// J's head (it exists once the job ran).
    pub async fn head(&self) -> Result<Head> {
        self.journal
            .head(self.id(), self.generation())
            .await?
            .ok_or_else(|| Error::transient(format!("the journal of job {} vanished", self.id())))
    }

    /// Paces window page reads to the source's read rate limits (DESIGN §8): call once
    /// per page read. Waits end when the job is asked to stop.
    pub async fn throttle_read(&self, rows: &[kernel::value::Row]) -> Result<()> {
        let n = u32::try_from(rows.len()).unwrap_or(u32::MAX);
        let bytes: u64 = rows.iter().flatten().map(value_bytes).sum();
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.throttle
            .throttle(n, bytes, &self.cancel)
            .await
            .map_err(|_| Error::transient("the job task was asked to stop (read rate limit wait)"))
    }
}

/// About the bytes a value takes on the wire (for the bytes/s read limit).
fn value_bytes(v: &kernel::value::SqlValue) -> u64 {
    use kernel::value::SqlValue as V;
    match v {
        V::Null => 1,
        V::Bytes(b) => b.len() as u64,
        V::Int(_) | V::UInt(_) | V::Double(_) => 8,
        V::Float(_) => 4,
        V::Date(..) => 11,
        V::Time(..) => 12,
    }
}

/// How a job task ended.
#[derive(Debug)]
pub enum Reached {
    /// Every window is sealed, applied and recorded in J (phase WINDOWS, completed = n).
    /// Issue 6 continues from here with F.
    WindowsDone(Box<Head>),
    /// J records a pause with this reason; the job waits for an operator.
    Paused(Definite),
    /// J is past the windows (FENCED or later): not this task's business.
    Beyond(Phase),
}

/// Tunables of a job's execution that may change between restarts (DESIGN §11 I3).
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Rows per RAW and FINAL page of windows sealed from now on.
    pub page_rows: usize,
    /// How long a marker (B, LOW, HIGH) may take to become durable in L.
    pub marker_timeout: std::time::Duration,
    /// How long to wait for a read or write permit.
    pub permit_timeout: std::time::Duration,
    /// How long one read view may take (open, every page, commit); then the attempt
    /// fails and the read connection's close must be confirmed (DESIGN §8).
    pub read_view_timeout: std::time::Duration,
    /// Failed attempts of one window in a row (lost connection, ...) before the table
    /// pauses with the window and the last error.
    pub max_attempts: u32,
    /// Limits of one target statement.
    pub limits: ledger::apply::Limits,
    /// The activation audit's field comparison (full or sampled).
    pub fields: crate::table::audit::FieldConfig,
    /// `serve --verify-every`: the process's turns of periodic verifies of STREAMING
    /// tables (`crate::table::periodic`, `crate::table::turns`), shared by every job; None: no periodic verify.
    pub verify: Option<Arc<crate::table::turns::Turns>>,
    /// Retention and GC of STREAMING tables (`crate::table::retention`); None: no GC
    /// (`serve --no-gc`, and library callers unless they ask).
    pub retention: Option<crate::table::retention::policy::Policy>,
}

impl Default for RunConfig {
    fn default() -> RunConfig {
        RunConfig {
            page_rows: crate::install::DEFAULT_PAGE_ROWS as usize,
            marker_timeout: std::time::Duration::from_secs(60),
            permit_timeout: std::time::Duration::from_secs(600),
            read_view_timeout: std::time::Duration::from_secs(300),
            max_attempts: 5,
            limits: ledger::apply::Limits::default(),
            fields: crate::table::audit::FieldConfig::default(),
            verify: None,
            retention: None,
        }
    }
}
