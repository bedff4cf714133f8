//! `backfill serve` (DESIGN §13): finds every started job in the state store, runs ONE
//! shared capture reader per source server with the capture set built from those jobs,
//! and one task per job (`crate::table`).
//!
//! Why the capture set is safe across restarts: it holds every started, non-cancelled job
//! of a source, whatever its phase, and is filled BEFORE a job task can write B. The
//! reader decides what it captures by binlog position (B to K), so a restart from an older
//! D captures exactly what it captured before (DESIGN §2).
//!
//! Several serves on one state store (DESIGN §18) share the jobs: a job runs where its
//! lease could be taken (free, expired or released), others retry every
//! [`TAKEOVER_POLL`]; each source stream's reader runs in one process only, under the
//! stream's capture lease (`sources`).
//!
//! Ownership: each job task takes the job's lease (a fresh fencing token, DESIGN §4) and
//! renews it; a task that loses its lease stops writing because every J and T write checks
//! the token. A job task that fails transiently is started again after a backoff, up to
//! `task_retries` failures in a row, then it pauses with its last error; a definite
//! failure pauses the table in J and the task ends. A task that panics pauses its table
//! (reason naming the panic) and is not restarted until `resume`; the others go on.
use crate::io::connect::Account;
use crate::io::pool::{ConnPool, Side};
use crate::store::commands;
use crate::table::ctx::{JobCtx, Reached, RunConfig};
use crate::table::hooks::WindowHooks;
use admission::Admission;
use kernel::capture::ReaderConfig;
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::{Error, Result};
use ledger::material::{MaterialStore, Placement};
use sqlx::MySqlPool;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

mod leases;
mod restarts;
pub use restarts::DEFAULT_TASK_RETRIES;
mod sources;
mod tasks;
pub mod telemetry;

use leases::release_lease;
use sources::Source;
pub use telemetry::Telemetry;

/// How long serve's main loop keeps retrying the state store before it ends with the
/// last error: longer than a Galera node's eviction and a single server's restart.
pub const STATE_OUTAGE: Duration = Duration::from_secs(60);

/// The retries of serve's own state-store reads within [`STATE_OUTAGE`].
const STATE_RETRY: admission::RetryPolicy = admission::RetryPolicy::exponential(
    u32::MAX,
    Duration::from_millis(250),
    Duration::from_secs(5),
)
.with_deadline(STATE_OUTAGE);

/// How long serve's stop (SIGTERM, SIGINT) waits for the jobs' tasks to end on their own.
/// Each stops at its next await of the cancel token (a statement in flight is answered
/// first, bounded by its client deadline); one still running then is aborted.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// The bound of each step of serve's stop after the jobs' tasks (the lease renewals, the
/// last admission snapshot, the readers, closing the pools). A step past it is left
/// behind and named in a warning, as a kill would leave it: serve's stop never waits on
/// a wakeup that may not come (seen: the state-store pool's close waiting 23 minutes for
/// a connection given back through sqlx's unbounded ping).
pub const STOP_STEP: Duration = Duration::from_secs(10);

/// Runs one step of serve's stop within [`STOP_STEP`]; None (and a warning naming the
/// step) past it.
async fn stop_step<T>(step: &str, f: impl std::future::Future<Output = T>) -> Option<T> {
    let r = tokio::time::timeout(STOP_STEP, f).await.ok();
    if r.is_none() {
        tracing::warn!(
            step,
            secs = STOP_STEP.as_secs(),
            "a step of serve's stop did not end in time: left behind, as a kill would leave it"
        );
    }
    r
}

/// Awaits a cancelled job's task until `deadline`; past it the task is aborted, named in
/// a warning, and None is returned (nothing of it is released: as after a kill).
async fn stop_task(
    job: JobId,
    mut handle: JoinHandle<Result<Reached>>,
    deadline: tokio::time::Instant,
) -> Option<std::result::Result<Result<Reached>, tokio::task::JoinError>> {
    match tokio::time::timeout_at(deadline, &mut handle).await {
        Ok(joined) => Some(joined),
        Err(_) => {
            tracing::warn!(
                %job,
                grace_secs = SHUTDOWN_GRACE.as_secs(),
                "the job's task did not stop within the grace period: aborted, as a kill \
                 would stop it (its lease expires by itself; the next serve resumes it from the journal)"
            );
            handle.abort();
            let _ = handle.await;
            None
        }
    }
}

/// How often a job whose lease another live process holds is tried again: a lost host's
/// jobs are taken over within the lease TTL plus this.
pub const TAKEOVER_POLL: Duration = Duration::from_secs(2);

/// How `serve` runs.
#[derive(Clone)]
pub struct ServeConfig {
    pub state_url: String,
    pub data_dir: PathBuf,
    /// Where materials live (the state store by default; the data directory is then a
    /// read-through cache).
    pub materials: Placement,
    /// Lease owner name; a restarted process with the same name takes over at once.
    pub owner: String,
    /// Full URLs (with passwords) matched against the redacted ones jobs recorded.
    pub sources: Vec<String>,
    pub targets: Vec<String>,
    /// Overrides the jobs' page size for windows sealed from now on.
    pub page_rows: Option<u64>,
    pub limits: admission::Limits,
    /// Client deadlines of target writes (`crate::io::bounded`).
    pub deadlines: crate::io::bounded::Deadlines,
    /// Read rate limits of each source (window page reads), one limiter per source.
    pub rate: admission::RateLimits,
    pub run: RunConfig,
    /// How often the state store is polled for new start commands.
    pub poll: Duration,
    pub lease_ttl: Duration,
    /// Transient failures in a row (start or task) after which a job pauses with
    /// `retries_exhausted` and its last error instead of being restarted again.
    pub task_retries: u32,
    /// Return once every started job is done with its windows or paused (tests, bench).
    pub exit_when_idle: bool,
    /// Hooks between LOW and HIGH (tests); None = the SQL-file hooks of the environment
    /// when fault points are compiled in, else none.
    pub hooks: Option<Arc<dyn WindowHooks>>,
    /// Capture reader tuning applied to every source stream.
    pub reader: fn(&mut ReaderConfig),
    /// After the windows: F, replay of (B, F], activation audit, STREAMING and continuous
    /// replay with this configuration (`crate::table::activation`). None stops at "every window
    /// applied" (the window protocol's own tests).
    pub finish: Option<crate::table::replay::ReplayConfig>,
    /// Where this serve counts pauses, retries, permits and read limits (metrics, tests).
    pub telemetry: Telemetry,
}

impl ServeConfig {
    /// Defaults for a state store and data directory.
    pub fn new(state_url: &str, data_dir: PathBuf) -> ServeConfig {
        ServeConfig {
            state_url: state_url.to_string(),
            data_dir,
            materials: Placement::State,
            owner: default_owner(),
            sources: Vec::new(),
            targets: Vec::new(),
            page_rows: None,
            limits: admission::Limits::default(),
            deadlines: Default::default(),
            rate: Default::default(),
            run: RunConfig::default(),
            poll: Duration::from_millis(500),
            lease_ttl: Duration::from_secs(30),
            task_retries: restarts::DEFAULT_TASK_RETRIES,
            exit_when_idle: false,
            hooks: None,
            reader: |_| {},
            finish: None,
            telemetry: Telemetry::default(),
        }
    }
}

/// `serve@HOST`: stable across restarts of the process on one host.
pub fn default_owner() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    format!(
        "serve@{}",
        if host.is_empty() { "localhost" } else { &host }
    )
}

/// How each job ended in this process (for `exit_when_idle`).
pub type Outcomes = BTreeMap<JobId, String>;

struct Running {
    handle: JoinHandle<Result<Reached>>,
    cancel: CancellationToken,
    renew: JoinHandle<()>,
    /// The task's context, to pause the table if the task panics.
    ctx: JobCtx,
    /// The hold the task's session becomes if the task panics (confirmed once it ended).
    session: admission::HoldId,
    started: Instant,
}

struct Serve {
    cfg: ServeConfig,
    pool: MySqlPool,
    store: Arc<dyn MaterialStore>,
    admission: Admission,
    sources: HashMap<String, Source>,
    /// One connection pool per server and account, shared by every job on it.
    conn_pools: HashMap<(Side, Account), ConnPool>,
    running: HashMap<JobId, Running>,
    retry_at: HashMap<JobId, Instant>,
    /// Transient failures in a row per job (start or task), for the retry backoff.
    failures: HashMap<JobId, u32>,
    outcomes: Outcomes,
    /// Jobs re-run once in this process to complete a cancel recorded after they ended.
    cancel_runs: std::collections::HashSet<JobId>,
    /// Started jobs already added to their source's capture set (whoever runs them).
    known: std::collections::HashSet<(JobId, kernel::ids::Generation)>,
    /// A started job could not be loaded in the last pass: its source is unknown, so no
    /// stream lease is taken until every started job is placed (`sources::keep_lease`).
    unplaced_jobs: bool,
    /// Tables of started jobs whose source no job here could register yet (its URL does
    /// not resolve in this serve), by source identity, with their control schema.
    unplaced: HashMap<String, Vec<(kernel::capture::CaptureTable, String)>>,
    /// Started jobs refused here for want of an execution session: a serve that keeps
    /// running takes them once one of its sessions is free (`tasks`).
    awaiting_session: std::collections::HashSet<JobId>,
}

/// Runs until `cancel` fires (or, with `exit_when_idle`, until every started job is done
/// with its windows or paused). Returns each job's outcome in this process.
pub async fn serve(cfg: ServeConfig, cancel: CancellationToken) -> Result<Outcomes> {
    let pool = kernel::state::open(&cfg.state_url, &Default::default()).await?;
    let store = ledger::material::open(cfg.materials, &pool, &cfg.data_dir)?;
    crate::store::processes::claim_materials(&pool, &cfg.owner, cfg.materials.as_str()).await?;
    let admission = Admission::new(cfg.limits)
        .map_err(|e| Error::definite(DefiniteCode::Usage, e.to_string()))?;
    cfg.telemetry.observe_admission(&admission);
    let mut s = Serve {
        cfg,
        pool,
        store,
        admission,
        sources: HashMap::new(),
        conn_pools: HashMap::new(),
        running: HashMap::new(),
        retry_at: HashMap::new(),
        failures: HashMap::new(),
        outcomes: BTreeMap::new(),
        cancel_runs: Default::default(),
        known: Default::default(),
        unplaced_jobs: false,
        unplaced: HashMap::new(),
        awaiting_session: Default::default(),
    };
    let telemetry = s.cfg.telemetry.clone();
    let conns: crate::store::processes::Connections = Arc::new(move || {
        let pools = telemetry.conn_pools();
        pools
            .iter()
            .map(crate::store::processes::ConnRow::from)
            .collect()
    });
    let publisher =
        crate::store::processes::publish(s.pool.clone(), &s.admission, conns, &s.cfg.owner);
    let r = s.main_loop(&cancel).await;
    stop_step("writing serve's last admission snapshot", publisher.stop()).await;
    s.shutdown().await;
    r.map(|()| s.outcomes)
}

impl Serve {
    async fn main_loop(&mut self, cancel: &CancellationToken) -> Result<()> {
        loop {
            let Some(started) = self.started_jobs(cancel).await? else {
                return Ok(());
            };
            // Every started job is in its source's capture set before that source's
            // reader runs here and before any job of it may write B (`sources`).
            self.know_started(&started).await;
            self.tend_streams().await;
            for (job, g) in &started {
                self.maybe_spawn(*job, *g).await;
            }
            self.signal_cancels().await;
            self.take_resumes().await;
            self.reap().await;
            let idle = started.iter().all(|(j, _)| self.outcomes.contains_key(j));
            if self.cfg.exit_when_idle && self.running.is_empty() && idle {
                return Ok(());
            }
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tokio::time::sleep(self.cfg.poll) => {}
            }
        }
    }

    /// The started jobs, read again through a state-store outage of up to
    /// [`STATE_OUTAGE`] (a Galera node failing over, a restarted server): serve keeps
    /// running and its jobs keep their state meanwhile (their own state-store writes fail
    /// transiently and are retried within their budgets). `None`: cancelled while waiting.
    async fn started_jobs(
        &self,
        cancel: &CancellationToken,
    ) -> Result<Option<Vec<(JobId, kernel::ids::Generation)>>> {
        let on_retry = |e: &Error| {
            self.cfg.telemetry.count_retry("state_store");
            tracing::warn!(error = %e, retry = "state_store", "cannot read the state store; retrying");
        };
        let tries = admission::retry(
            |_| async {
                let r = commands::started(&self.pool).await;
                if let Err(e) = &r {
                    if e.is_transient() {
                        on_retry(e);
                    }
                }
                r
            },
            |e: &Error| !e.is_transient(),
            &STATE_RETRY,
            cancel,
        )
        .await;
        match tries {
            Ok(started) => Ok(Some(started)),
            Err(admission::RetryError::Cancelled { .. }) => Ok(None),
            Err(e) => Err(e.into_last().unwrap_or_else(|| {
                Error::transient(format!(
                    "the state store did not answer within {STATE_OUTAGE:?}"
                ))
            })),
        }
    }

    /// Tells the task of every job with a persisted `cancel` to stop at its next boundary
    /// (it then completes the cancel itself, `crate::table::cancel`).
    async fn signal_cancels(&mut self) {
        match commands::canceling(&self.pool).await {
            Ok(list) => {
                for (job, _) in list {
                    if let Some(r) = self.running.get(&job) {
                        r.cancel.cancel();
                    } else if self.outcomes.contains_key(&job) && self.cancel_runs.insert(job) {
                        self.outcomes.remove(&job);
                        // Ended here before (paused, refused, stopped): run it once more;
                        // its task completes the cancel. Once only per process, so a
                        // cancel that cannot complete is not retried in a loop.
                        tracing::info!(%job, "cancel recorded for a job that ended here: running it to complete the cancel");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read cancel commands; retrying"),
        }
    }

    /// A job that ended paused (or stopped) in this process runs again once a `resume`
    /// is recorded for it; its task clears the pause and consumes the command.
    async fn take_resumes(&mut self) {
        match crate::store::commands::resumes(&self.pool).await {
            Ok(list) => {
                for job in list {
                    if !self.running.contains_key(&job) && self.outcomes.remove(&job).is_some() {
                        tracing::info!(%job, "resume recorded: running the job again");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot read resume commands; retrying"),
        }
    }

    /// Stops every job: all are told to stop at once (one job still working while
    /// another is awaited could wait on a permit the stopping ones hold), then each is
    /// awaited until [`SHUTDOWN_GRACE`]. A task still running then is aborted and named:
    /// that is a kill of that task, which every step of a job survives (DESIGN §11, I4), and
    /// its lease is left to expire as a killed process's would.
    async fn shutdown(&mut self) {
        let running: Vec<(JobId, Running)> = self.running.drain().collect();
        for (_, r) in &running {
            r.cancel.cancel();
        }
        let deadline = tokio::time::Instant::now() + SHUTDOWN_GRACE;
        let stopped =
            futures_util::future::join_all(running.into_iter().map(|(job, r)| async move {
                let stopped = stop_task(job, r.handle, deadline).await;
                leases::stop_renewal(&r.cancel, r.renew).await;
                (job, r.ctx, stopped)
            }))
            .await;
        for (job, ctx, stopped) in stopped {
            let Some(joined) = stopped else {
                continue;
            };
            stop_step(
                "releasing a job lease",
                release_lease(&self.pool, &ctx.lease),
            )
            .await;
            // A task that ended on its own while stopping (done, paused, a definite
            // failure) is reported; one stopped by the shutdown is not an outcome.
            match joined {
                Ok(Err(e)) if e.is_transient() => {}
                Ok(res) => self.record(job, res),
                Err(e) => tracing::error!(%job, error = %e, "job task failed while stopping"),
            }
        }
        self.stop_streams().await;
        for (_, p) in self.conn_pools.drain() {
            stop_step("closing a source or target pool", p.close_idle()).await;
        }
        let (size, idle) = (self.pool.size(), self.pool.num_idle());
        if stop_step("closing the state-store pool", self.pool.close())
            .await
            .is_none()
        {
            tracing::warn!(
                connections = size,
                idle,
                "state-store connections not given back at serve's stop (a statement dropped mid-flight); the process's exit closes them"
            );
        }
    }
}
