//! The replay loop: read the table's next groups from L, skip what T's cursor holds,
//! apply the rest as one batch, record progress, and repeat until F, a seq, or a cancel
//! ([`Until`]). The correctness argument (I1-I4, I6, apply streams, read-ahead) is the
//! module doc of [`super`]; this file sequences the steps it names.
use super::batch::{BatchWriter, Step, WritePermits};
use super::connections::Conns;
use super::group::{coverage, plan, Coverage};
use super::policy::{self, Budget, Decision, Event, Tries};
use super::progress::{behind_bytes, save_progress, start_point, Lag, Progress};
use super::source::{next_groups, Batch};
use super::{ReplayConfig, Scope};
use crate::table::schema::Chain;
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::log::{self, LSeq};
use kernel::{failpoint, Error, Result};
use ledger::apply::ReplayGroup;
use ledger::target::{self, ReplayCursor, TargetCtx};
use sqlx::mysql::MySqlPool;
use std::ops::ControlFlow;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What one replay run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Groups applied by this run (business DML ran).
    pub groups_applied: u64,
    /// Groups found already held by T and skipped.
    pub groups_held: u64,
    /// Apply calls that committed.
    pub batches: u64,
    /// T's cursor at the end.
    pub cursor: Option<ReplayCursor>,
    /// The L seq read up to.
    pub l_seq: LSeq,
    pub lag: Lag,
    /// The schema version this run applied (DESIGN §16): the run ends right after a
    /// DDL's step, and the caller continues with the target context of that version.
    pub schema_applied: Option<u32>,
}

/// Everything the loop needs.
pub struct Replayer<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    /// The source, asked for the weights of character keys (DESIGN §14) before a batch is
    /// applied; never read from otherwise.
    pub source: &'a crate::io::pool::ConnPool,
    pub target: &'a crate::io::pool::ConnPool,
    pub ctx: &'a TargetCtx,
    pub cfg: &'a ReplayConfig,
    /// The table's schema chain (DESIGN §16); None takes nothing after a DDL: its pause
    /// and the raw rows after it stop the run.
    pub chain: Option<&'a Chain>,
}

/// How far a run goes.
#[derive(Clone, Debug)]
pub enum Until {
    /// Up to and including L seq `f_seq` (the F marker's record), then return.
    Fence { f_seq: LSeq, failpoint_mid: bool },
    /// Follow L as the reader appends until `cancel`.
    Follow { cancel: CancellationToken },
    /// As after STREAMING, but only up to L seq `upto` (caught up once, then return).
    CatchUp { upto: LSeq },
}

impl Replayer<'_> {
    /// What one batch is applied with.
    fn writer(&self) -> BatchWriter<'_> {
        BatchWriter {
            scope: self.scope,
            source: self.source,
            ctx: self.ctx,
            limits: self.cfg.limits(),
            schema_lock_wait: self.cfg.schema_lock_wait,
        }
    }

    /// The next complete groups after L seq `after`.
    async fn read(&self, after: LSeq, upto: LSeq) -> Result<Batch> {
        next_groups(
            self.pool,
            self.scope,
            self.chain,
            after,
            upto,
            self.cfg.batch_groups,
            self.cfg.batch_rows.saturating_mul(2),
            self.cfg.read_page,
        )
        .await
    }

    /// T's main cursor (the only one "replay reached", status and restarts read).
    async fn cursor(&self, conns: &mut Conns<'_>) -> Result<Option<ReplayCursor>> {
        let mut c = conns.control().await?;
        let r = target::replay_cursor(&mut c, self.ctx, false).await;
        c.close().await;
        r
    }

    /// Replays from B (L seq `b_seq`) until `until`. See the module doc for why any crash
    /// or restart with another configuration converges.
    pub async fn run(&self, b_seq: LSeq, until: Until) -> Result<Outcome> {
        self.run_with(b_seq, until, None).await
    }

    /// As [`Replayer::run`], each batch under its own target-write permits when `permits`.
    pub async fn run_with(
        &self,
        b_seq: LSeq,
        until: Until,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Outcome> {
        let mut conns = Conns::new(self.target, self.cfg.apply_streams);
        let r = self.run_on(&mut conns, b_seq, until, permits).await;
        conns.close().await;
        r
    }

    /// The loop of one run, in named steps ([`Run`]): read, skip what T holds, apply,
    /// record progress; each outcome goes through [`policy::decide`].
    async fn run_on(
        &self,
        conns: &mut Conns<'_>,
        b_seq: LSeq,
        until: Until,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Outcome> {
        let mut run = Run::start(self, conns, b_seq, &until).await?;
        while !run.cancel.is_some_and(CancellationToken::is_cancelled) {
            if run.step(conns, permits).await?.is_break() {
                break;
            }
        }
        run.out.cursor = self.cursor(conns).await?;
        run.out.l_seq = run.after;
        Ok(run.out)
    }

    async fn save(
        &self,
        l_seq: LSeq,
        end: &GroupEnd,
        total: u64,
        lag: &Lag,
        phase: &str,
    ) -> Result<()> {
        save_progress(
            self.pool,
            self.scope,
            &Progress {
                l_seq,
                end: end.pos.clone(),
                groups_applied: total,
                lag: lag.clone(),
                phase: phase.into(),
            },
        )
        .await
    }

    /// Binlog bytes from the cursor to D (the capture's restart position); None across files.
    async fn behind(&self, cursor: Option<&GroupEnd>) -> Option<u64> {
        let d = log::load_position(self.pool, &self.scope.stream)
            .await
            .ok()??;
        behind_bytes(cursor, Some(&d.restart))
    }
}

/// The state of one run between its steps.
struct Run<'r> {
    r: &'r Replayer<'r>,
    until: &'r Until,
    /// The L seq read up to at most (F's record, a seq, or none while following).
    upto: LSeq,
    /// Set while following (until cancelled).
    cancel: Option<&'r CancellationToken>,
    /// The phase the progress row names.
    phase: &'static str,
    budget: Budget,
    tries: Tries,
    /// T's main cursor as last read or moved by a commit of this run.
    cursor: Option<ReplayCursor>,
    /// The L seq read up to, and the end of the table's group there.
    after: LSeq,
    prev: Option<GroupEnd>,
    /// Groups counted in the progress row (carried over from the hint).
    total: u64,
    out: Outcome,
    caught_up_at: Instant,
    last_status: Option<Instant>,
    /// The next batch, read from L while the current one applies.
    ahead: Option<Result<Batch>>,
    /// L's tail noted right before the last fresh read while following (None: the last
    /// read was a read-ahead, or not following): an empty read waits for the tail to
    /// move past it ([`super::tails`]).
    mark: Option<LSeq>,
}

impl<'r> Run<'r> {
    /// T's cursor, and where reading L starts ([`start_point`]).
    async fn start(
        r: &'r Replayer<'r>,
        conns: &mut Conns<'_>,
        b_seq: LSeq,
        until: &'r Until,
    ) -> Result<Run<'r>> {
        let cursor = r.cursor(conns).await?;
        let (after, prev, total) = start_point(r.pool, r.scope, b_seq, cursor.as_ref()).await?;
        let caught_up_at = Instant::now();
        let (upto, cancel, phase) = match until {
            Until::Fence { f_seq, .. } => (*f_seq, None, "REPLAYING"),
            Until::Follow { cancel } => (LSeq::MAX, Some(cancel), "STREAMING"),
            Until::CatchUp { upto } => (*upto, None, "STREAMING"),
        };
        Ok(Run {
            r,
            until,
            upto,
            cancel,
            phase,
            budget: Budget {
                following: cancel.is_some(),
                max_retries: r.cfg.max_retries,
            },
            tries: Tries::default(),
            cursor,
            after,
            prev,
            total,
            out: Outcome::default(),
            caught_up_at,
            last_status: None,
            ahead: None,
            mark: None,
        })
    }

    /// One turn of the loop: the next groups, then caught up, or one batch and progress.
    async fn step(
        &mut self,
        conns: &mut Conns<'_>,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<ControlFlow<()>> {
        let Some((found, next)) = self.read_next().await? else {
            return Ok(ControlFlow::Continue(()));
        };
        if found.is_empty() {
            return self.caught_up().await;
        }
        if let Some(flow) = self.schema_step(conns, &found, next, permits).await? {
            return Ok(flow);
        }
        self.same_version(&found)?;
        let plan = plan(self.r.scope, self.cursor.as_ref(), self.prev.clone(), found)
            .map_err(Error::Definite)?;
        self.out.groups_held += plan.held;
        let mut prev = plan.prev;
        if !plan.apply.is_empty() {
            if let Some(flow) = self
                .apply_batch(conns, prev.as_ref(), &plan.apply, next, permits)
                .await?
            {
                return Ok(flow);
            }
            prev = Some(self.committed(&plan.apply));
        }
        self.advance(prev, next).await?;
        Ok(ControlFlow::Continue(()))
    }

    /// A batch that is a DDL's group with a sealed version (it comes alone,
    /// [`next_groups`]) and T does not hold yet: the target takes the version, T records
    /// it, and the run ends (the caller goes on with that version's target context).
    async fn schema_step(
        &mut self,
        conns: &mut Conns<'_>,
        found: &[(ReplayGroup, LSeq)],
        next: LSeq,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Option<ControlFlow<()>>> {
        let (Some(chain), [(group, seq)]) = (self.r.chain, found) else {
            return Ok(None);
        };
        let Some(version) = chain.sealed_at(*seq) else {
            return Ok(None);
        };
        if coverage(self.cursor.as_ref(), &group.end).map_err(Error::Definite)? == Coverage::Held {
            return Ok(None);
        }
        let (_, before) = chain.in_force_after(*seq);
        let expect = self.cursor.clone();
        let step = self
            .r
            .writer()
            .ddl(conns, before, version, expect.as_ref(), group, permits)
            .await?;
        match step {
            Step::Done => {}
            Step::Stopped => return Ok(Some(ControlFlow::Break(()))),
            Step::NoPermit(m) | Step::Unknown(m) => return Err(Error::transient(m)),
        }
        self.cursor = Some(ReplayCursor {
            end: group.end.clone(),
            rows_done: 0,
            group_digest: group.digest(),
        });
        self.out.schema_applied = Some(version.version);
        self.total += 1;
        self.advance(Some(group.end.clone()), next).await?;
        self.save_due(true).await?;
        Ok(Some(ControlFlow::Break(())))
    }

    /// Every group of a batch is decoded with the version this run's target context
    /// writes (the DDL between two versions is a batch of its own): never apply rows of
    /// one shape with statements of another.
    fn same_version(&self, found: &[(ReplayGroup, LSeq)]) -> Result<()> {
        // No schema change: one version, nothing to compare (the usual table, every batch).
        let Some(chain) = self.r.chain.filter(|c| !c.versions.is_empty()) else {
            return Ok(());
        };
        let want = self.r.ctx.schema.fingerprint();
        // Groups of a batch are almost always of one version: hash each version once.
        let mut checked: Option<(u32, bool)> = None;
        for (g, seq) in found {
            let (v, s) = chain.in_force_after(*seq);
            let same = match checked {
                Some((cv, same)) if cv == v => same,
                _ => s.fingerprint() == want,
            };
            checked = Some((v, same));
            if !same
                && coverage(self.cursor.as_ref(), &g.end).map_err(Error::Definite)?
                    == Coverage::Apply
            {
                return Err(Error::definite(
                    DefiniteCode::Internal,
                    format!(
                        "job {} {}: the group ending at {} is of schema version {v}, the replay's \
                         target context is of another; this is a bug in backfill",
                        self.r.scope.job, self.r.scope.generation, g.end.pos
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The batch read ahead, or a read of L now; None when a failed read is to be retried
    /// (after `idle_wait`).
    async fn read_next(&mut self) -> Result<Option<Batch>> {
        let read = match self.ahead.take() {
            Some(s) => {
                self.mark = None;
                s
            }
            None => {
                self.mark = self.note_tail().await;
                self.r.read(self.after, self.upto).await
            }
        };
        let e = match read {
            Ok(batch) => return Ok(Some(batch)),
            Err(e) => e,
        };
        let event = Event::ReadFailed {
            transient: e.is_transient(),
        };
        match self.decide(event) {
            Decision::Retry => {
                let retries = self.tries.retries;
                tracing::warn!(job = %self.r.scope.job, error = %e, retries, "replay read failed; retrying");
                tokio::time::sleep(self.r.cfg.idle_wait).await;
                Ok(None)
            }
            _ => Err(e),
        }
    }

    /// Caught up with L (up to F, or L's tail while following): record it, then return
    /// (not following) or wait for the tail to move.
    async fn caught_up(&mut self) -> Result<ControlFlow<()>> {
        self.caught_up_at = Instant::now();
        self.out.lag = Lag {
            behind_bytes: Some(0),
            behind_ms: 0,
        };
        let Some(cancel) = self.cancel else {
            // The hint for the next run: it would otherwise re-read every group since the
            // last periodic save (all held by T).
            self.save_due(true).await?;
            return Ok(ControlFlow::Break(()));
        };
        self.save_due(false).await?;
        let r = self.r;
        match self.mark.take() {
            Some(m) => {
                let (tails, bound) = (&r.cfg.tails, super::tails::WATCH_BOUND);
                let moved = tails
                    .wait_past(r.pool, &r.scope.stream, m, bound, cancel)
                    .await;
                // A whole bound without the tail moving: a stream stopped by a finding
                // about the source's history pauses the table by name (never a silent
                // stall behind a STREAMING phase).
                if !moved {
                    if let Some(why) = kernel::log::stop::stopped(r.pool, &r.scope.stream).await? {
                        return Err(kernel::Error::Definite(why));
                    }
                }
            }
            // The empty read was a read-ahead (or the tail could not be noted): the next
            // read is a fresh one, after a short pause.
            None => tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(kernel::log::WAIT_POLL) => {}
            },
        }
        Ok(ControlFlow::Continue(()))
    }

    /// The tail to wait past should the next read find nothing (following only).
    async fn note_tail(&self) -> Option<LSeq> {
        self.cancel?;
        let r = self.r;
        match r.cfg.tails.mark(r.pool, &r.scope.stream).await {
            Ok(m) => Some(m),
            Err(e) => {
                tracing::debug!(job = %r.scope.job, error = %e, "cannot note the change log's tail");
                None
            }
        }
    }

    /// Applies `batch` while the next one is read from L; None once it committed, else
    /// what the loop does instead ([`policy::decide`]).
    async fn apply_batch(
        &mut self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        batch: &[ReplayGroup],
        next: LSeq,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Option<ControlFlow<()>>> {
        let r = self.r;
        let writer = r.writer();
        let (applied, read) = tokio::join!(
            writer.apply(conns, prev, batch, permits),
            r.read(next, self.upto)
        );
        let event = match &applied {
            Ok(Step::Done) => Event::Committed,
            // Cancelled while waiting for a write permit: nothing was sent.
            Ok(Step::Stopped) => Event::Stopped,
            // Nothing was sent: not a failed batch (never a release_unconfirmed pause);
            // past the budget a plain transient error, and serve restarts the task later
            // (the permit's holders are in status).
            Ok(Step::NoPermit(_)) => Event::NoPermit,
            // `apply` turns a second unknown into an error; never here.
            Ok(Step::Unknown(_)) => Event::Unknown,
            Err(e) => Event::ApplyFailed {
                transient: e.is_transient(),
            },
        };
        let decision = self.decide(event);
        let (retries, waits) = (self.tries.retries, self.tries.waits);
        match (decision, applied) {
            (Decision::Proceed, _) => {
                self.ahead = Some(read);
                Ok(None)
            }
            (Decision::Stop, _) => Ok(Some(ControlFlow::Break(()))),
            (Decision::Retry, Ok(Step::NoPermit(m))) => {
                tracing::warn!(job = %r.scope.job, waits, "{m}; retrying");
                tokio::time::sleep(r.cfg.idle_wait).await;
                Ok(Some(ControlFlow::Continue(())))
            }
            (Decision::Reread, Err(e)) => {
                tracing::warn!(job = %r.scope.job, error = %e, retries, "replay apply failed; retrying from the target ledger");
                tokio::time::sleep(r.cfg.idle_wait).await;
                self.cursor = r.cursor(conns).await?;
                Ok(Some(ControlFlow::Continue(())))
            }
            (Decision::Pause { failures }, Err(e)) => Err(self.paused(failures, &e)),
            (_, Err(e)) => Err(e),
            (_, Ok(Step::NoPermit(m) | Step::Unknown(m))) => Err(Error::transient(m)),
            // The policy proceeds on every commit and stops on every cancel.
            (_, Ok(Step::Done)) => Ok(None),
            (_, Ok(Step::Stopped)) => Ok(Some(ControlFlow::Break(()))),
        }
    }

    /// The policy's decision for `event`; its counters are kept for the next one.
    fn decide(&mut self, event: Event) -> Decision {
        let (decision, tries) = policy::decide(self.budget, self.tries, event);
        self.tries = tries;
        decision
    }

    /// DESIGN §8: while STREAMING at most `max_retries` failures in a row (reset by each
    /// confirmed commit), then the table pauses: a restarted task would otherwise retry
    /// forever.
    fn paused(&self, failures: u32, e: &Error) -> Error {
        let s = self.r.scope;
        Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!(
                "job {} {}: {} target batches in a row failed or ended \
                 uncertain while STREAMING (last: {e}); check the target, \
                 then `backfill resume {}`",
                s.job, s.generation, failures, s.job
            ),
        )
    }

    /// Counts a committed batch, hits its fault point, and moves the known cursor to its
    /// last group; returns that group's end.
    fn committed(&mut self, batch: &[ReplayGroup]) -> GroupEnd {
        self.out.batches += 1;
        self.out.groups_applied += batch.len() as u64;
        self.total += batch.len() as u64;
        match self.until {
            Until::Fence { .. } => failpoint::hit(crate::table::faults::REPLAY_AFTER_BATCH_T),
            Until::Follow { .. } | Until::CatchUp { .. } => {
                failpoint::hit(crate::table::faults::STREAM_AFTER_BATCH)
            }
        }
        let last = &batch[batch.len() - 1];
        self.cursor = Some(ReplayCursor {
            end: last.end.clone(),
            rows_done: 0,
            group_digest: last.digest(),
        });
        last.end.clone()
    }

    /// Moves past the groups read, refreshes the lag and the progress row (after every
    /// batch up to F, else every [`STATUS_EVERY`]).
    async fn advance(&mut self, prev: Option<GroupEnd>, next: LSeq) -> Result<()> {
        self.prev = prev;
        self.after = next;
        self.out.lag = Lag {
            behind_bytes: self.r.behind(self.prev.as_ref()).await,
            behind_ms: millis(self.caught_up_at.elapsed()),
        };
        self.save_due(matches!(self.until, Until::Fence { .. }))
            .await?;
        if let Until::Fence {
            failpoint_mid: true,
            ..
        } = self.until
        {
            failpoint::hit(crate::table::faults::REPLAY_MID);
        }
        Ok(())
    }

    /// Writes the progress row when a group has been seen and `now` or the last write is
    /// [`STATUS_EVERY`] old.
    async fn save_due(&mut self, now: bool) -> Result<()> {
        let Some(end) = &self.prev else {
            return Ok(());
        };
        if now || self.last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
            let lag = &self.out.lag;
            self.r
                .save(self.after, end, self.total, lag, self.phase)
                .await?;
            self.last_status = Some(Instant::now());
        }
        Ok(())
    }
}

/// How often the progress row is refreshed while following.
const STATUS_EVERY: Duration = Duration::from_millis(500);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Replays every group of the table in (B, F] (L seqs `b_seq`, `f_seq`) and returns
/// once T's cursor is at or past the last of them (DESIGN §6 "replay reached F").
pub async fn replay_to(r: &Replayer<'_>, b_seq: LSeq, f_seq: LSeq) -> Result<Outcome> {
    r.run(
        b_seq,
        Until::Fence {
            f_seq,
            failpoint_mid: true,
        },
    )
    .await
}

/// Replays after activation up to L's tail as it is now, then returns (a caught-up
/// stream: tests, `serve --exit-when-idle`).
pub async fn catch_up(r: &Replayer<'_>, b_seq: LSeq) -> Result<Outcome> {
    let tail = log::load_position(r.pool, &r.scope.stream)
        .await?
        .map_or(LSeq::ZERO, |d| d.tail.seq);
    r.run(b_seq, Until::CatchUp { upto: tail }).await
}

/// Follows L after activation until `cancel` (continuous replay, DESIGN §6/§7). Starts
/// after the later of F and T's cursor: every group at or before the cursor is held.
pub async fn follow(r: &Replayer<'_>, b_seq: LSeq, cancel: CancellationToken) -> Result<Outcome> {
    r.run(b_seq, Until::Follow { cancel }).await
}

/// As [`follow`], each batch under its own target-write permit (STREAMING in `serve`).
pub async fn follow_admitted(
    r: &Replayer<'_>,
    b_seq: LSeq,
    cancel: CancellationToken,
    permits: &WritePermits<'_>,
) -> Result<Outcome> {
    r.run_with(b_seq, Until::Follow { cancel }, Some(permits))
        .await
}
