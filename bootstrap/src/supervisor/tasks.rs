//! The job tasks of one serve: starting each with its context and lease, collecting how
//! it ended, restarting a transient failure after a backoff within the budget of
//! [`super::restarts`], and pausing a table whose task panicked or kept failing.
use super::leases::{
    exhausted, is_fenced, is_session_limit, pause_outside_task, release_lease, spawn_renewal,
    stop_renewal,
};
use super::restarts::{self, Restart};
use super::{Running, Serve};
use crate::io::connect::{resolve_url, Account};
use crate::io::pool::{ConnPool, Side};
use crate::store::jobs::{self, JobRecord};
use crate::table::ctx::Events as _;
use crate::table::ctx::{JobCtx, Reached};
use crate::table::hooks::{NoHooks, SqlFileHooks, WindowHooks};
use admission::Throttle;
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::{Error, Result};
use ledger::journal::Journal;
use ledger::registry::Registry;
use ledger::target::TargetCtx;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

impl Serve {
    pub(super) async fn maybe_spawn(&mut self, job: JobId, g: Generation) {
        if self.running.contains_key(&job) || self.outcomes.contains_key(&job) {
            return;
        }
        if self.retry_at.get(&job).is_some_and(|t| Instant::now() < *t) {
            return;
        }
        if self.awaiting_session.contains(&job) && self.admission.snapshot().sessions.available == 0
        {
            return; // still no session free here: nothing to load or try
        }
        match self.spawn(job, g).await {
            Ok(r) => {
                self.awaiting_session.remove(&job);
                self.running.insert(job, r);
            }
            // Fenced: another owner (another serve, or a pinned verify) holds the job's
            // lease; it is taken over once that lease is released or expires. Waiting
            // for it is no failure of this job: no budget.
            Err(e) if is_fenced(&e) => {
                let delay = super::TAKEOVER_POLL;
                self.retry_at.insert(job, Instant::now() + delay);
                self.cfg.telemetry.count_retry("job_start");
                tracing::info!(%job, error = %e, retry = "job_start", ?delay, "cannot start the job yet: its lease is held by another owner; trying to take it over later");
            }
            // At the session limit: a serve that keeps running keeps the job and takes it
            // once one of its sessions is free (a job of its own ended, was cancelled or
            // paused; another serve's jobs are tried within the lease then). One that exits
            // when idle reports it refused.
            Err(e) if is_session_limit(&e) && !self.cfg.exit_when_idle => {
                if self.awaiting_session.insert(job) {
                    tracing::error!(%job, error = %e, "the job cannot run here now: this serve runs it once one of its sessions is free");
                }
            }
            Err(e) if e.is_transient() => self.failed_transiently(job, g, "job_start", e).await,
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

    async fn context(
        &mut self,
        rec: JobRecord,
        schema: kernel::schema::SealedSchema,
        stream: String,
        throttle: Arc<Throttle>,
    ) -> Result<JobCtx> {
        let job = rec.job_id;
        let plan = jobs::load_plan(&self.pool, job).await?.ranges;
        let source_url = resolve_url(
            &rec.source_url,
            &self.cfg.sources,
            "--source",
            &format!("job {job}'s source"),
        )?;
        let target_url = resolve_url(
            &rec.target_url,
            &self.cfg.targets,
            "--target",
            &format!("job {job}'s target"),
        )?;
        let source = crate::io::connect::opts(&source_url, "source")?;
        let target = ledger::target::target_opts(&target_url)?;
        let source = self.conn_pool(Side::Source, &source_url, source)?;
        let target = self.conn_pool(Side::Target, &target_url, target)?;
        let lease =
            ledger::lease::acquire(&self.pool, job, &self.cfg.owner, self.cfg.lease_ttl).await?;
        kernel::failpoint::hit(crate::table::faults::LEASE_AFTER_ACQUIRED);
        let mut tschema = schema.clone();
        tschema.database = rec.target.db.clone();
        tschema.table = rec.target.table.clone();
        let tctx = TargetCtx {
            job,
            generation: rec.generation,
            keyer: crate::store::jobs::keyer(&tschema)?,
            schema: tschema,
            token: lease.token,
            within: None,
        };
        let mut run = self.cfg.run.clone();
        run.page_rows = usize::try_from(self.cfg.page_rows.unwrap_or(rec.page_rows))
            .unwrap_or(usize::MAX)
            .max(1);
        let hooks: Arc<dyn WindowHooks> = match &self.cfg.hooks {
            Some(h) => h.clone(),
            None => match SqlFileHooks::from_env(source.opts().clone()) {
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
            fields: Arc::new(crate::verify::activation::Comparer),
            events: Arc::new(self.cfg.telemetry.clone()),
            cancel: CancellationToken::new(),
        })
    }

    /// The pool of the server and account of `url` (created on first use): data slots
    /// are the admission permits of that side's work (read windows on a source, target
    /// writes on a target), so a job holding a permit always finds a slot.
    fn conn_pool(&mut self, side: Side, url: &str, opts: mysql_async::Opts) -> Result<ConnPool> {
        let account = Account::of(url).map_err(|e| {
            Error::definite(DefiniteCode::Usage, format!("{} URL: {e}", side.as_str()))
        })?;
        let data = match side {
            Side::Source => self.cfg.limits.read_windows,
            Side::Target => self.cfg.limits.target_writes,
        };
        let telemetry = &self.cfg.telemetry;
        let p = self
            .conn_pools
            .entry((side, account.clone()))
            .or_insert_with(|| {
                let p = ConnPool::new(side, account.label(), opts, data);
                telemetry.add_conn_pool(p.clone());
                p
            });
        Ok(p.clone())
    }

    /// Collects finished job tasks: outcomes are kept, transient failures retried later.
    pub(super) async fn reap(&mut self) {
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
            let joined = r.handle.await;
            stop_renewal(&r.cancel, r.renew).await;
            if r.started.elapsed() >= restarts::MAX_RETRY_DELAY {
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
            match res {
                Err(e) if e.is_transient() => {
                    self.failed_transiently(job, r.ctx.generation(), "job_task", e)
                        .await
                }
                res => self.record(job, res),
            }
        }
    }

    /// Counts one more failure of `job` in a row; returns the count.
    fn next_failure(&mut self, job: JobId) -> u32 {
        let n = self.failures.entry(job).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// A transient failure of the job's start or task (`kind`): started again after the
    /// backoff of [`restarts`], or, once `task_retries` failures came in a row, paused in J
    /// with `retries_exhausted` and the last error (never restarted forever; a definite
    /// cause pauses the table at once instead).
    async fn failed_transiently(
        &mut self,
        job: JobId,
        g: Generation,
        kind: &'static str,
        e: Error,
    ) {
        let n = self.next_failure(job);
        match restarts::after_failure(n, self.cfg.task_retries) {
            Restart::After(delay) => {
                self.retry_at.insert(job, Instant::now() + delay);
                self.cfg.telemetry.count_retry(kind);
                tracing::warn!(%job, error = %e, retry = kind, ?delay, failures = n, "the job failed transiently; starting it again later");
            }
            Restart::Pause => {
                self.failures.remove(&job);
                let reason = exhausted(job, n, &e);
                tracing::error!(%job, reason = %reason, "the job failed transiently too often; pausing the table");
                let (owner, ttl) = (self.cfg.owner.clone(), self.cfg.lease_ttl);
                let outcome =
                    match pause_outside_task(&self.pool, (job, g), &owner, ttl, reason).await {
                        Ok(d) => {
                            self.cfg.telemetry.paused(job, d.code);
                            format!("paused: {d}")
                        }
                        Err(err) => format!("stopped: {e}; the pause was not recorded: {err}"),
                    };
                self.outcomes.insert(job, outcome);
            }
        }
    }

    /// Keeps how a job task ended; a transient failure is retried later.
    pub(super) fn record(&mut self, job: JobId, res: Result<Reached>) {
        self.failures.remove(&job);
        match res {
            Ok(Reached::WindowsDone(h)) => {
                tracing::info!(%job, windows = h.record.completed, "every window applied; the final fence (F) continues from here");
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
}
