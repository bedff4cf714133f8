//! The replay loop: read the table's next groups from L, skip what T's cursor holds,
//! apply the rest as one batch, record progress, and repeat until F, a seq, or a cancel
//! ([`Until`]). The correctness argument (I1-I4, I6, apply streams, read-ahead) is the
//! module doc of [`super`]; this file sequences the steps it names.
use super::batch::{BatchWriter, Step, WritePermits};
use super::connections::Conns;
use super::group::{coverage, Coverage};
use super::progress::{behind_bytes, save_progress, start_point, Lag, Progress};
use super::source::{next_groups, wait_for_tail, Batch};
use super::{ReplayConfig, Scope};
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::log;
use kernel::{failpoint, Error, Result};
use ledger::apply::ReplayGroup;
use ledger::target::{self, ReplayCursor, TargetCtx};
use mysql_async::Opts;
use sqlx::mysql::MySqlPool;
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
    pub l_seq: u64,
    pub lag: Lag,
}

/// Everything the loop needs.
pub struct Replayer<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    pub target: &'a Opts,
    pub ctx: &'a TargetCtx,
    pub cfg: &'a ReplayConfig,
}

/// How far a run goes.
#[derive(Clone, Debug)]
pub enum Until {
    /// Up to and including L seq `f_seq` (the F marker's record), then return.
    Fence { f_seq: u64, failpoint_mid: bool },
    /// Follow L as the reader appends until `cancel`.
    Follow { cancel: CancellationToken },
    /// As after STREAMING, but only up to L seq `upto` (caught up once, then return).
    CatchUp { upto: u64 },
}

impl Replayer<'_> {
    /// What one batch is applied with.
    fn writer(&self) -> BatchWriter<'_> {
        BatchWriter {
            scope: self.scope,
            ctx: self.ctx,
            limits: self.cfg.limits(),
        }
    }

    /// The next complete groups after L seq `after`.
    async fn read(&self, after: u64, upto: u64) -> Result<Batch> {
        next_groups(
            self.pool,
            self.scope,
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
        let r = {
            let c = conns.first().await?;
            target::replay_cursor(c, self.ctx, false).await
        };
        if r.is_err() {
            conns.close().await;
        }
        r
    }

    /// Replays from B (L seq `b_seq`) until `until`. See the module doc for why any crash
    /// or restart with another configuration converges.
    pub async fn run(&self, b_seq: u64, until: Until) -> Result<Outcome> {
        self.run_with(b_seq, until, None).await
    }

    /// As [`Replayer::run`], each batch under its own target-write permits when `permits`.
    pub async fn run_with(
        &self,
        b_seq: u64,
        until: Until,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Outcome> {
        let mut conns = Conns::new(self.target, self.cfg.apply_streams);
        let r = self.run_on(&mut conns, b_seq, until, permits).await;
        conns.close().await;
        r
    }

    async fn run_on(
        &self,
        conn: &mut Conns<'_>,
        b_seq: u64,
        until: Until,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Outcome> {
        let mut cursor = self.cursor(conn).await?;
        let (mut after, mut prev, mut total) =
            start_point(self.pool, self.scope, b_seq, cursor.as_ref()).await?;
        let mut out = Outcome::default();
        let mut retries = 0u32;
        // Permit waits that timed out in a row (nothing sent).
        let mut waits = 0u32;
        let mut caught_up_at = Instant::now();
        let mut last_status: Option<Instant> = None;
        // The next batch, read from L while the current one applies.
        let mut ahead: Option<Result<Batch>> = None;
        let (upto, cancel, phase) = match &until {
            Until::Fence { f_seq, .. } => (*f_seq, None, "REPLAYING"),
            Until::Follow { cancel } => (u64::MAX, Some(cancel), "STREAMING"),
            Until::CatchUp { upto } => (*upto, None, "STREAMING"),
        };
        loop {
            if cancel.is_some_and(|c| c.is_cancelled()) {
                break;
            }
            let step = match ahead.take() {
                Some(s) => s,
                None => self.read(after, upto).await,
            };
            let (found, next) = match step {
                Ok(x) => x,
                Err(e)
                    if e.is_transient() && cancel.is_some() && retries < self.cfg.max_retries =>
                {
                    retries += 1;
                    tracing::warn!(job = %self.scope.job, error = %e, retries, "replay read failed; retrying");
                    tokio::time::sleep(self.cfg.idle_wait).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if found.is_empty() {
                // Caught up with L (up to F, or L's tail while following).
                caught_up_at = Instant::now();
                out.lag = Lag {
                    behind_bytes: Some(0),
                    behind_ms: 0,
                };
                let Some(cancel) = cancel else {
                    // The hint for the next run: it would otherwise re-read every group
                    // since the last periodic save (all held by T).
                    if let Some(end) = &prev {
                        self.save(after, end, total, &out.lag, phase).await?;
                    }
                    break;
                };
                if let Some(end) = &prev {
                    if last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
                        self.save(after, end, total, &out.lag, phase).await?;
                        last_status = Some(Instant::now());
                    }
                }
                wait_for_tail(
                    self.pool,
                    &self.scope.stream,
                    after,
                    self.cfg.idle_wait,
                    cancel,
                )
                .await?;
                continue;
            }
            let mut batch: Vec<ReplayGroup> = Vec::new();
            let mut batch_prev = prev.clone();
            for (g, _) in found {
                match coverage(cursor.as_ref(), &g.end).map_err(Error::Definite)? {
                    Coverage::Held if batch.is_empty() => {
                        out.groups_held += 1;
                        batch_prev = Some(g.end.clone());
                    }
                    Coverage::Held => {
                        return Err(Error::definite(
                            DefiniteCode::EvidenceConflict,
                            format!(
                            "job {} {}: T's cursor lies inside a run of groups it does not hold",
                            self.scope.job, self.scope.generation
                        ),
                        ))
                    }
                    Coverage::Apply => batch.push(g),
                }
            }
            if !batch.is_empty() {
                let writer = self.writer();
                let (applied, read) = tokio::join!(
                    writer.apply(conn, batch_prev.as_ref(), &batch, permits),
                    self.read(next, upto)
                );
                match applied {
                    // `apply` turns a second unknown into an error; never here.
                    Ok(Step::Unknown(m)) => return Err(Error::transient(m)),
                    Ok(Step::Done) => {
                        retries = 0;
                        waits = 0;
                        ahead = Some(read);
                    }
                    // Cancelled while waiting for a write permit: nothing was sent.
                    Ok(Step::Stopped) => break,
                    // Nothing was sent: not a failed batch (never a release_unconfirmed
                    // pause). Retried here a few times, then a plain transient error:
                    // serve restarts the task later (the permit's holders are in status).
                    Ok(Step::NoPermit(m)) => {
                        waits += 1;
                        if cancel.is_none() || waits > self.cfg.max_retries {
                            return Err(Error::transient(m));
                        }
                        tracing::warn!(job = %self.scope.job, waits, "{m}; retrying");
                        tokio::time::sleep(self.cfg.idle_wait).await;
                        continue;
                    }
                    Err(e)
                        if e.is_transient()
                            && cancel.is_some()
                            && retries < self.cfg.max_retries =>
                    {
                        retries += 1;
                        tracing::warn!(job = %self.scope.job, error = %e, retries, "replay apply failed; retrying from T");
                        tokio::time::sleep(self.cfg.idle_wait).await;
                        cursor = self.cursor(conn).await?;
                        continue;
                    }
                    // DESIGN §8: while STREAMING at most `max_retries` in a row (reset by
                    // each confirmed commit), then the table pauses: a restarted task
                    // would otherwise retry forever.
                    Err(e) if e.is_transient() && cancel.is_some() => {
                        return Err(Error::definite(
                            DefiniteCode::ReleaseUnconfirmed,
                            format!(
                                "job {} {}: {} target batches in a row failed or ended \
                                 uncertain while STREAMING (last: {e}); check the target, \
                                 then `backfill resume {}`",
                                self.scope.job,
                                self.scope.generation,
                                retries + 1,
                                self.scope.job
                            ),
                        ))
                    }
                    Err(e) => return Err(e),
                }
                out.batches += 1;
                out.groups_applied += batch.len() as u64;
                total += batch.len() as u64;
                match &until {
                    Until::Fence { .. } => {
                        failpoint::hit(crate::table::faults::REPLAY_AFTER_BATCH_T)
                    }
                    Until::Follow { .. } | Until::CatchUp { .. } => {
                        failpoint::hit(crate::table::faults::STREAM_AFTER_BATCH)
                    }
                }
                let last = &batch[batch.len() - 1];
                cursor = Some(ReplayCursor {
                    end: last.end.clone(),
                    rows_done: 0,
                    group_digest: last.digest(),
                });
                batch_prev = Some(last.end.clone());
            }
            prev = batch_prev;
            after = next;
            out.lag = Lag {
                behind_bytes: self.behind(prev.as_ref()).await,
                behind_ms: millis(caught_up_at.elapsed()),
            };
            let fence = matches!(until, Until::Fence { .. });
            if let Some(end) = &prev {
                if fence || last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
                    self.save(after, end, total, &out.lag, phase).await?;
                    last_status = Some(Instant::now());
                }
            }
            if let Until::Fence {
                failpoint_mid: true,
                ..
            } = until
            {
                failpoint::hit(crate::table::faults::REPLAY_MID);
            }
        }
        out.cursor = self.cursor(conn).await?;
        out.l_seq = after;
        Ok(out)
    }

    async fn save(
        &self,
        l_seq: u64,
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

/// How often the progress row is refreshed while following.
const STATUS_EVERY: Duration = Duration::from_millis(500);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Replays every group of the table in (B, F] (L seqs `b_seq`, `f_seq`) and returns
/// once T's cursor is at or past the last of them (DESIGN §6 "replay reached F").
pub async fn replay_to(r: &Replayer<'_>, b_seq: u64, f_seq: u64) -> Result<Outcome> {
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
pub async fn catch_up(r: &Replayer<'_>, b_seq: u64) -> Result<Outcome> {
    let tail = log::load_position(r.pool, &r.scope.stream)
        .await?
        .map_or(0, |d| d.tail.seq);
    r.run(b_seq, Until::CatchUp { upto: tail }).await
}

/// Follows L after activation until `cancel` (continuous replay, DESIGN §6/§7). Starts
/// after the later of F and T's cursor: every group at or before the cursor is held.
pub async fn follow(r: &Replayer<'_>, b_seq: u64, cancel: CancellationToken) -> Result<Outcome> {
    r.run(b_seq, Until::Follow { cancel }).await
}

/// As [`follow`], each batch under its own target-write permit (STREAMING in `serve`).
pub async fn follow_admitted(
    r: &Replayer<'_>,
    b_seq: u64,
    cancel: CancellationToken,
    permits: &WritePermits<'_>,
) -> Result<Outcome> {
    r.run_with(b_seq, Until::Follow { cancel }, Some(permits))
        .await
}
