//! `backfill serve` (DESIGN §13): finds every started job in the state store, runs ONE
//! shared capture reader per source server with the capture set built from those jobs,
//! and one task per job (`crate::table`).
//!
//! Why the capture set is safe across restarts: it holds every started, non-cancelled job
//! of a source, whatever its phase, and is filled BEFORE a job task can write B. The
//! reader decides what it captures by binlog position (B to K), so a restart from an older
//! D captures exactly what it captured before (DESIGN §2).
//!
//! Ownership: each job task takes the job's lease (a fresh fencing token, DESIGN §4) and
//! renews it; a task that loses its lease stops writing because every J and T write checks
//! the token. A job task that fails transiently is started again after a pause; a definite
//! failure pauses the table in J and the task ends. A task that panics pauses its table
//! (reason naming the panic) and is not restarted until `resume`; the others go on.
use crate::io::connect::resolve_url;
use crate::store::commands;
use crate::store::jobs::stream_name;
use crate::store::jobs::{self, JobRecord};
use crate::table::ctx::{JobCtx, Reached, RunConfig};
use crate::table::hooks::{NoHooks, SqlFileHooks, WindowHooks};
use admission::{Admission, Throttle};
use kernel::capture::{CaptureSet, CaptureTable, Reader, ReaderConfig, SharedCaptureSet};
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::{Error, Result};
use ledger::journal::Journal;
use ledger::material::LocalDirStore;
use ledger::registry::Registry;
use ledger::target::TargetCtx;
use sqlx::MySqlPool;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub mod telemetry;
pub use telemetry::Telemetry;

/// How `serve` runs.
#[derive(Clone)]
pub struct ServeConfig {
    pub state_url: String,
    pub data_dir: PathBuf,
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

struct Source {
    reader: Option<Reader>,
    throttle: Arc<Throttle>,
    set: SharedCaptureSet,
    cfg: ReaderConfig,
    restart_at: Option<Instant>,
}

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
    store: Arc<LocalDirStore>,
    admission: Admission,
    sources: HashMap<String, Source>,
    running: HashMap<JobId, Running>,
    retry_at: HashMap<JobId, Instant>,
    /// Transient failures in a row per job (start or task), for the retry backoff.
    failures: HashMap<JobId, u32>,
    outcomes: Outcomes,
    /// Jobs re-run once in this process to complete a cancel recorded after they ended.
    cancel_runs: std::collections::HashSet<JobId>,
}

/// Runs until `cancel` fires (or, with `exit_when_idle`, until every started job is done
/// with its windows or paused). Returns each job's outcome in this process.
pub async fn serve(cfg: ServeConfig, cancel: CancellationToken) -> Result<Outcomes> {
    let pool = kernel::state::open(&cfg.state_url, &Default::default()).await?;
    let store = Arc::new(LocalDirStore::open(&cfg.data_dir)?);
    let admission = Admission::new(cfg.limits)
        .map_err(|e| Error::definite(DefiniteCode::Usage, e.to_string()))?;
    cfg.telemetry.observe_admission(&admission);
    let mut s = Serve {
        cfg,
        pool,
        store,
        admission,
        sources: HashMap::new(),
        running: HashMap::new(),
        retry_at: HashMap::new(),
        failures: HashMap::new(),
        outcomes: BTreeMap::new(),
        cancel_runs: Default::default(),
    };
    let publisher = crate::store::processes::publish(s.pool.clone(), &s.admission, &s.cfg.owner);
    let r = s.main_loop(&cancel).await;
    publisher.stop().await;
    s.shutdown().await;
    r.map(|()| s.outcomes)
}

impl Serve {
    async fn main_loop(&mut self, cancel: &CancellationToken) -> Result<()> {
        loop {
            let started = commands::started(&self.pool).await?;
            for (job, g) in &started {
                self.maybe_spawn(*job, *g).await;
            }
            self.signal_cancels().await;
            self.take_resumes().await;
            self.reap().await;
            self.watch_readers().await;
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

    async fn maybe_spawn(&mut self, job: JobId, g: Generation) {
        if self.running.contains_key(&job) || self.outcomes.contains_key(&job) {
            return;
        }
        if self.retry_at.get(&job).is_some_and(|t| Instant::now() < *t) {
            return;
        }
        match self.spawn(job, g).await {
            Ok(r) => {
                self.running.insert(job, r);
            }
            // Fenced: another owner (another serve, or a pinned verify) holds the job's
            // lease; it is taken over once that lease is released or expires.
            Err(e) if e.is_transient() || is_fenced(&e) => {
                let delay = self.retry_later(job);
                self.cfg.telemetry.count_retry("job_start");
                tracing::warn!(%job, error = %e, retry = "job_start", ?delay, "cannot start the job yet; retrying");
            }
            Err(e) => {
                tracing::error!(%job, error = %e, "the job cannot run");
                self.outcomes.insert(job, format!("refused: {e}"));
            }
        }
    }

    async fn spawn(&mut self, job: JobId, g: Generation) -> Result<Running> {
        let rec = jobs::load_job(&self.pool, job).await?;
        if rec.generation != g {
            return Err(Error::definite(
                DefiniteCode::Usage,
                format!(
                    "job {job}: the start command names {g}, the job is {}",
                    rec.generation
                ),
            ));
        }
        let schema = jobs::load_schema(&self.pool, job).await?;
        let session = self.session(job)?;
        // Nothing runs on the session until the task starts: an error before is a
        // confirmed release.
        let (stream, throttle) = match self.ensure_source(&rec, &schema) {
            Ok(s) => s,
            Err(e) => {
                session.release_confirmed();
                return Err(e);
            }
        };
        let ctx = match self.context(rec, schema, stream, throttle).await {
            Ok(c) => c,
            Err(e) => {
                session.release_confirmed();
                return Err(e);
            }
        };
        let cancel = ctx.cancel.clone();
        let task_ctx = ctx.clone();
        let session_hold = session.hold_id();
        let renew = spawn_renewal(
            self.cfg.telemetry.clone(),
            self.pool.clone(),
            ctx.lease.clone(),
            self.cfg.lease_ttl,
            cancel.clone(),
        );
        let span = tracing::info_span!("job", job = %job, generation = %g);
        let finish = self.cfg.finish.clone();
        let idle = self.cfg.exit_when_idle;
        let handle = tokio::spawn(
            async move {
                let out = crate::table::run_task(&ctx, finish.as_ref(), idle).await;
                // Every operation of the task has ended (connections closed, commits
                // resolved): the session is free. A panic never gets here and keeps it
                // counted as a hold (release unknown).
                session.release_confirmed();
                out
            }
            .instrument(span),
        );
        Ok(Running {
            handle,
            cancel,
            renew,
            ctx: task_ctx,
            session: session_hold,
            started: Instant::now(),
        })
    }

    /// An execution session for the job's task, or a refusal that says how to raise the
    /// limit (DESIGN §8: a streaming tail holds its session, so never an endless wait).
    fn session(&self, job: JobId) -> Result<admission::Permit> {
        self.admission
            .try_acquire_session(&format!("job {job}"))
            .map_err(|e| {
                Error::definite(
                    DefiniteCode::CapacityExhausted,
                    format!(
                        "job {job} refused: {e}; every running table holds one execution \
                         session. Raise the limit with `serve --max-sessions N` \
                         (BACKFILL_MAX_SESSIONS, or max_sessions in --config) and restart \
                         serve, or cancel a job (`backfill cancel JOB`)"
                    ),
                )
            })
    }

    /// Adds the job's table to its source's capture set (starting that source's reader on
    /// first use) and returns the source's L stream name and read limiter.
    fn ensure_source(
        &mut self,
        rec: &JobRecord,
        schema: &kernel::schema::SealedSchema,
    ) -> Result<(String, Arc<Throttle>)> {
        let url = resolve_url(&rec.source_url, &self.cfg.sources);
        let stream = stream_name(&rec.source.identity);
        let table = CaptureTable {
            job: rec.job_id,
            generation: rec.generation,
            sealed: schema.clone(),
        };
        if let Some(src) = self.sources.get(&rec.source.identity) {
            if src.cfg.control_schema != rec.control_schema {
                return Err(Error::definite(
                    DefiniteCode::Usage,
                    format!(
                        "job {}: control schema `{}` differs from `{}` used by the other jobs of its source",
                        rec.job_id, rec.control_schema, src.cfg.control_schema
                    ),
                ));
            }
            src.set
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .add(table);
            return Ok((stream, src.throttle.clone()));
        }
        let mut cfg = ReaderConfig::new(&stream, &url, replica_id(&stream, &self.cfg.state_url));
        cfg.control_schema = rec.control_schema.clone();
        (self.cfg.reader)(&mut cfg);
        let mut set = CaptureSet::default();
        set.add(table);
        let set = set.shared();
        let reader = Reader::start(self.pool.clone(), cfg.clone(), set.clone());
        let throttle = Arc::new(Throttle::new(self.cfg.rate));
        self.cfg.telemetry.add_throttle(throttle.clone());
        self.sources.insert(
            rec.source.identity.clone(),
            Source {
                reader: Some(reader),
                throttle: throttle.clone(),
                set,
                cfg,
                restart_at: None,
            },
        );
        Ok((stream, throttle))
    }

    async fn context(
        &self,
        rec: JobRecord,
        schema: kernel::schema::SealedSchema,
        stream: String,
        throttle: Arc<Throttle>,
    ) -> Result<JobCtx> {
        let job = rec.job_id;
        let plan = jobs::load_plan(&self.pool, job).await?.ranges;
        let source =
            crate::io::connect::opts(&resolve_url(&rec.source_url, &self.cfg.sources), "source")?;
        let target = ledger::target::target_opts(&resolve_url(&rec.target_url, &self.cfg.targets))?;
        let lease =
            ledger::lease::acquire(&self.pool, job, &self.cfg.owner, self.cfg.lease_ttl).await?;
        let mut tschema = schema.clone();
        tschema.database = rec.target.db.clone();
        tschema.table = rec.target.table.clone();
        let tctx = TargetCtx {
            job,
            generation: rec.generation,
            schema: tschema,
            token: lease.token,
        };
        let mut run = self.cfg.run.clone();
        run.page_rows = usize::try_from(self.cfg.page_rows.unwrap_or(rec.page_rows))
            .unwrap_or(usize::MAX)
            .max(1);
        let hooks: Arc<dyn WindowHooks> = match &self.cfg.hooks {
            Some(h) => h.clone(),
            None => match SqlFileHooks::from_env(source.clone()) {
                Some(h) => Arc::new(h),
                None => Arc::new(NoHooks),
            },
        };
        Ok(JobCtx {
            job: rec,
            schema,
            plan,
            pool: self.pool.clone(),
            journal: Journal::new(self.pool.clone()),
            lease,
            registry: Registry::new(self.pool.clone()),
            store: self.store.clone(),
            stream,
            source,
            target,
            tctx,
            admission: self.admission.clone(),
            deadlines: self.cfg.deadlines,
            throttle,
            cfg: run,
            hooks,
            events: Arc::new(self.cfg.telemetry.clone()),
            cancel: CancellationToken::new(),
        })
    }

    /// Collects finished job tasks: outcomes are kept, transient failures retried later.
    async fn reap(&mut self) {
        let done: Vec<JobId> = self
            .running
            .iter()
            .filter(|(_, r)| r.handle.is_finished())
            .map(|(j, _)| *j)
            .collect();
        for job in done {
            let Some(r) = self.running.remove(&job) else {
                continue;
            };
            r.renew.abort();
            let joined = r.handle.await;
            if r.started.elapsed() >= MAX_RETRY_DELAY {
                // It ran a while: a failure now starts a new series.
                self.failures.remove(&job);
            }
            // The task has ended: nothing writes under its lease any more.
            release_lease(&self.pool, &r.ctx.lease).await;
            let res = match joined {
                Ok(res) => res,
                Err(e) if e.is_panic() => {
                    let outcome = self.paused_by_panic(&r.ctx, r.session, e).await;
                    self.outcomes.insert(job, outcome);
                    continue;
                }
                Err(e) => Err(Error::transient(format!("job task failed: {e}"))),
            };
            self.record(job, res);
        }
    }

    /// When a job that failed transiently is tried again: 1 s after the first failure in a
    /// row, doubling up to [`MAX_RETRY_DELAY`] (never a tight loop, never given up: the
    /// cause, e.g. a server down, may go away; a definite cause pauses the table instead).
    fn retry_later(&mut self, job: JobId) -> Duration {
        let n = self.failures.entry(job).or_insert(0);
        *n = n.saturating_add(1);
        let delay = retry_delay(*n);
        self.retry_at.insert(job, Instant::now() + delay);
        delay
    }

    /// Keeps how a job task ended; a transient failure is retried later.
    fn record(&mut self, job: JobId, res: Result<Reached>) {
        if !matches!(&res, Err(e) if e.is_transient()) {
            self.failures.remove(&job);
        }
        match res {
            Ok(Reached::WindowsDone(h)) => {
                tracing::info!(%job, windows = h.record.completed, "every window applied; F (issue 6) continues from here");
                self.outcomes.insert(job, "windows_done".into());
            }
            Ok(Reached::Paused(d)) => {
                self.outcomes.insert(job, format!("paused: {d}"));
            }
            Ok(Reached::Beyond(ledger::record::Phase::Cancelled)) => {
                self.outcomes.insert(job, "cancelled".into());
            }
            Ok(Reached::Beyond(p)) => {
                self.outcomes.insert(job, format!("beyond windows: {p:?}"));
            }
            Err(e) if e.is_transient() => {
                let delay = self.retry_later(job);
                self.cfg.telemetry.count_retry("job_task");
                tracing::warn!(%job, error = %e, retry = "job_task", ?delay, "job task failed transiently; restarting it");
            }
            Err(e) => {
                tracing::error!(%job, error = %e, "job task stopped");
                self.outcomes.insert(job, format!("stopped: {e}"));
            }
        }
    }

    /// A job task panicked: its table pauses (never restarted in a loop) and the others go
    /// on. The task has ended, so its execution session is confirmed released; read or
    /// write permits it held stay holds (their statements' end is unknown). Returns the
    /// job's outcome.
    async fn paused_by_panic(
        &mut self,
        ctx: &JobCtx,
        session: admission::HoldId,
        e: tokio::task::JoinError,
    ) -> String {
        let job = ctx.id();
        let what = crate::table::window::panics::text(e.into_panic());
        tracing::error!(%job, panic = %what, "job task panicked; pausing the table");
        if let Err(e) = self.admission.confirm_hold(session) {
            tracing::warn!(%job, error = %e, "the panicked task's session was not a hold");
        }
        let reason = kernel::Definite {
            code: DefiniteCode::Internal,
            message: format!(
                "job {job}: its task panicked ({what}); this is a bug in backfill: keep the \
                 serve log for a report, then `backfill resume {job}` (after an upgrade if \
                 the panic repeats)"
            ),
        };
        let paused = async {
            let head = crate::table::ensure_journal(ctx).await?;
            crate::table::pause::pause(ctx, &head, reason).await
        }
        .await;
        match paused {
            Ok(d) => format!("paused: {d}"),
            Err(err) => {
                tracing::error!(%job, error = %err, "cannot record the pause of a panicked task");
                format!("stopped: the task panicked ({what}) and the pause was not recorded: {err}")
            }
        }
    }

    /// Restarts a reader that ended (its own retries exhausted, or a definite error that
    /// the affected tables see as pauses or marker timeouts).
    async fn watch_readers(&mut self) {
        for src in self.sources.values_mut() {
            if src.reader.as_ref().is_some_and(Reader::is_finished) {
                if let Some(r) = src.reader.take() {
                    let res = r.join().await;
                    self.cfg.telemetry.count_retry("capture_reader");
                    tracing::error!(stream = %src.cfg.stream, result = ?res, retry = "capture_reader", "capture reader ended; restarting it");
                }
                src.restart_at = Some(Instant::now() + Duration::from_secs(2));
            }
            if src.reader.is_none() && src.restart_at.is_some_and(|t| Instant::now() >= t) {
                src.reader = Some(Reader::start(
                    self.pool.clone(),
                    src.cfg.clone(),
                    src.set.clone(),
                ));
                src.restart_at = None;
            }
        }
    }

    async fn shutdown(&mut self) {
        let running: Vec<(JobId, Running)> = self.running.drain().collect();
        for (job, r) in running {
            r.cancel.cancel();
            r.renew.abort();
            let joined = r.handle.await;
            release_lease(&self.pool, &r.ctx.lease).await;
            // A task that ended on its own while stopping (done, paused, a definite
            // failure) is reported; one stopped by the shutdown is not an outcome.
            match joined {
                Ok(Err(e)) if e.is_transient() => {}
                Ok(res) => self.record(job, res),
                Err(e) => tracing::error!(%job, error = %e, "job task failed while stopping"),
            }
        }
        for (_, s) in self.sources.drain() {
            if let Some(r) = s.reader {
                let _ = r.stop().await;
            }
        }
        self.pool.close().await;
    }
}

/// The longest wait before a job that keeps failing transiently is tried again.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// 1 s, 2 s, 4 s, ... up to [`MAX_RETRY_DELAY`] for the n-th failure in a row (n >= 1).
fn retry_delay(n: u32) -> Duration {
    let secs = 1u64 << n.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(MAX_RETRY_DELAY)
}

/// Gives up a job's lease once its task has ended, so another process (a restarted serve
/// with another owner name, a pinned verify) need not wait for it to expire.
async fn release_lease(pool: &MySqlPool, lease: &ledger::lease::Lease) {
    if let Err(e) = ledger::lease::release(pool, lease).await {
        tracing::warn!(job = %lease.job, error = %e, "releasing the job lease (it expires by itself)");
    }
}

fn is_fenced(e: &Error) -> bool {
    e.as_definite()
        .is_some_and(|d| d.code == DefiniteCode::Fenced)
}

fn spawn_renewal(
    telemetry: Telemetry,
    pool: MySqlPool,
    lease: ledger::lease::Lease,
    ttl: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            match ledger::lease::renew(&pool, &lease, ttl).await {
                Ok(()) => {}
                Err(e) if e.is_transient() => {
                    telemetry.count_retry("lease_renewal");
                    tracing::warn!(job = %lease.job, error = %e, retry = "lease_renewal", "lease renewal failed; retrying")
                }
                Err(e) => {
                    tracing::error!(job = %lease.job, error = %e, "lease lost: stopping the job task");
                    cancel.cancel();
                    return;
                }
            }
        }
    })
}

/// A replica server_id distinct per stream and state store (two readers with one id kick
/// each other off the source, error 4052).
fn replica_id(stream: &str, state_url: &str) -> u32 {
    let d = kernel::ids::Digest::of(format!("{stream}\n{state_url}").as_bytes());
    let n = u32::from_le_bytes([d.0[0], d.0[1], d.0[2], d.0[3]]);
    0x4000_0000 | (n & 0x0fff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_a_minute() {
        let d: Vec<u64> = (1..=9).map(|n| retry_delay(n).as_secs()).collect();
        assert_eq!(d, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(retry_delay(u32::MAX), MAX_RETRY_DELAY);
    }

    #[test]
    fn urls_resolve_by_their_redacted_form() {
        let c = vec!["mysql://u:secret@h:1".to_string(), "mysql://v@h:2".into()];
        assert_eq!(resolve_url("mysql://u:***@h:1", &c), "mysql://u:secret@h:1");
        assert_eq!(resolve_url("mysql://w@h:3", &c), "mysql://w@h:3");
        assert!(stream_name("x").len() <= 64);
        assert_ne!(replica_id("a", "s"), replica_id("b", "s"));
    }
}
