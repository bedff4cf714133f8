//! One replay batch on the target: its per-batch write permits, the apply over every
//! connection, and what the attempt ended with ([`Step`]).
//!
//! # Why it is safe
//!
//! * DESIGN §8 target writes. Under [`WritePermits`] a batch takes one permit per apply
//!   stream, all together (all or none), before its first statement; each is given back
//!   only once its connection's end is confirmed: the COMMIT answered, or the connection
//!   KILLed and seen gone ([`super::connections`]). An unconfirmed one stays a hold naming
//!   the connection. A permit wait that times out sent nothing and says so ([`no_permit`]).
//! * Without per-batch permits (a run under coarse ones, or none) every end after a
//!   lost or unanswered connection is still KILL-confirmed: the caller releases its coarse
//!   permits on this module's word.
//! * I2 unknown COMMIT. A batch whose COMMIT may have landed is planned again from T's
//!   cursor on new connections: T decides whether it ran, never this process's memory.
use super::connections::{unconfirmed, Conns};
use super::Scope;
use kernel::change::GroupEnd;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use ledger::apply::{self, ApplyError, Limits, ReplayGroup};
use ledger::target::TargetCtx;
use mysql_async::Conn;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Per-batch target-write permits for continuous replay (DESIGN §8): each batch takes one
/// per apply stream, all together, before its first statement and gives each back only
/// once its end is confirmed (COMMIT answered, or every connection KILLed and seen gone;
/// an unconfirmed connection's permit stays a hold). Only for runs NOT already under a
/// coarse permit (`crate::table::activation::under_write_permits`): a nested acquire there deadlocks at
/// `--target-writes 1`.
pub struct WritePermits<'a> {
    pub admission: &'a admission::Admission,
    /// Names the replay in the admission snapshot and status.
    pub owner: String,
    /// Bound on waiting for a permit.
    pub deadline: Duration,
    /// A cancel while waiting is a stop, not a failure.
    pub cancel: &'a CancellationToken,
    /// Client deadline of one batch (first statement to COMMIT).
    pub write_deadline: Duration,
}

/// The reason of a permit wait that timed out: nothing was sent, so it says how long it
/// waited and who held the permits, never that a release is unconfirmed.
pub(super) fn no_permit(owner: &str, e: &admission::AdmissionError) -> String {
    match e {
        admission::AdmissionError::Timeout {
            waited, holders, ..
        } => {
            let held: Vec<String> = holders.iter().map(ToString::to_string).collect();
            format!(
                "{owner}: waited {} s for a target-write permit (held by: {}); nothing was sent",
                waited.as_secs(),
                if held.is_empty() {
                    "nobody".into()
                } else {
                    held.join(", ")
                }
            )
        }
        e => format!("{owner}: {e}; nothing was sent"),
    }
}

/// One replay apply over every connection (key partitions, [`ledger::parts`]).
async fn apply_on(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
) -> Result<apply::Applied, ApplyError> {
    ledger::parts::apply_groups_parts(conns, ctx, prev, groups, limits).await
}

/// What one apply attempt ended with.
pub(super) enum Step {
    Done,
    /// The permit wait was cancelled: nothing was sent.
    Stopped,
    /// The permit wait timed out: nothing was sent (the reason says how long it waited).
    NoPermit(String),
    /// The COMMIT's outcome is unknown (the connections are gone; re-plan from T).
    Unknown(String),
}

/// What a batch is applied with: the table it belongs to (named in messages), T's
/// context and the statement limits.
pub(super) struct BatchWriter<'a> {
    pub(super) scope: &'a Scope,
    pub(super) source: &'a crate::io::pool::ConnPool,
    pub(super) ctx: &'a TargetCtx,
    pub(super) limits: Limits,
    /// The metadata lock wait of a DDL's step ([`super::ReplayConfig::schema_lock_wait`]).
    pub(super) schema_lock_wait: Duration,
}

impl BatchWriter<'_> {
    /// Applies one batch through T; an unknown COMMIT is resolved by re-reading T's cursor
    /// on new connections (the apply plans from T again, under fresh permits).
    /// Never returns [`Step::Unknown`]: a second unknown is a transient error.
    pub(super) async fn apply(
        &self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        groups: &[ReplayGroup],
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Step> {
        self.weigh(groups).await?;
        let m = match self.attempt(conns, prev, groups, permits).await? {
            Step::Unknown(m) => m,
            other => return Ok(other),
        };
        tracing::warn!(job = %self.scope.job, "{m}");
        match self.attempt(conns, prev, groups, permits).await? {
            Step::Unknown(m) => Err(Error::transient(m)),
            other => Ok(other),
        }
    }

    /// Asks the source for the weights of the batch's character keys the keyer lacks
    /// (DESIGN §14), before any statement: apply orders and partitions by sort key. The
    /// cache is bounded here, between batches, never while one is applied.
    async fn weigh(&self, groups: &[ReplayGroup]) -> Result<()> {
        let keyer = &self.ctx.keyer;
        if !keyer.def.needs_weights() {
            return Ok(());
        }
        let images = || {
            groups
                .iter()
                .flat_map(|g| g.changes.iter())
                .flat_map(kernel::change::Change::images)
        };
        let missing = keyer.unweighed(images());
        if missing.is_empty() {
            return Ok(());
        }
        keyer.make_room(missing.len());
        // Emptied: every value of this batch is asked again.
        let missing = keyer.unweighed(images());
        let mut conn = self
            .source
            .connect(crate::io::pool::Use::Control, "(key weights)")
            .await?;
        let n = missing.len();
        let r = kernel::key::weigh::weigh_values(&mut conn, keyer, &missing).await;
        conn.close().await;
        tracing::debug!(job = %self.scope.job, values = n, trips = ?r.as_ref().ok(), "asked the source for key weights");
        r.map(|_| ())
    }

    /// One batch under its own target-write permits: one per connection, taken together
    /// (all or none, [`admission::Admission::acquire_writes`]) so N connections writing at
    /// once count as N target writes (DESIGN §8).
    async fn attempt(
        &self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        groups: &[ReplayGroup],
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Step> {
        let Some(p) = permits else {
            return self.attempt_unadmitted(conns, prev, groups).await;
        };
        let held = match p
            .admission
            .acquire_writes(&p.owner, conns.streams, p.deadline, p.cancel)
            .await
        {
            Ok(held) => held,
            Err(_) if p.cancel.is_cancelled() => return Ok(Step::Stopped),
            Err(e) if e.is_definite() => {
                return Err(Error::definite(
                    DefiniteCode::Usage,
                    format!("{}: {e}", p.owner),
                ))
            }
            Err(e) => return Ok(Step::NoPermit(no_permit(&p.owner, &e))),
        };
        let c = match conns.get().await {
            Ok(c) => c,
            Err(e) => {
                // Nothing was sent on connections that never opened.
                held.into_iter()
                    .for_each(admission::Permit::release_confirmed);
                return Err(e);
            }
        };
        let work = apply_on(c, self.ctx, prev, groups, self.limits);
        let (outcome, reason) = match tokio::time::timeout(p.write_deadline, work).await {
            Ok(Ok(_)) => {
                // Answered: a clean close ends them. Their pool slots and the permits go
                // back together; the table holds no connection until its next batch.
                conns.close().await;
                held.into_iter()
                    .for_each(admission::Permit::release_confirmed);
                return Ok(Step::Done);
            }
            Ok(Err(ApplyError::Failed(e))) => {
                let r = format!("replay batch failed: {e}");
                (Err(e), r)
            }
            Ok(Err(ApplyError::Unknown(m))) => (Ok(Step::Unknown(m.clone())), m),
            Err(_) => {
                let m = format!(
                    "job {} {}: a replay batch got no answer within {:?} (client deadline)",
                    self.scope.job, self.scope.generation, p.write_deadline
                );
                (Err(Error::transient(m.clone())), m)
            }
        };
        // A statement may still run on any connection: each permit is released only once
        // the server shows its connection gone; an unconfirmed one stays a hold naming it.
        let killed = conns.kill_all().await;
        for (permit, (id, r)) in held.into_iter().zip(&killed) {
            match r {
                Ok(()) => permit.release_confirmed(),
                Err(_) => {
                    permit.mark_release_unknown(format!("target connection {id}: {reason}"));
                }
            }
        }
        unconfirmed(&killed)?;
        outcome
    }

    /// For runs under a coarse permit (or none): no per-batch permit; a transient failure or
    /// an unknown COMMIT is KILL-confirmed on every connection (a definite
    /// `release_unconfirmed` naming the ids if it cannot be, which
    /// [`crate::table::activation::under_write_permits`] turns into holds).
    async fn attempt_unadmitted(
        &self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        groups: &[ReplayGroup],
    ) -> Result<Step> {
        let r = {
            let c = conns.get().await?;
            apply_on(c, self.ctx, prev, groups, self.limits).await
        };
        let outcome = match r {
            Ok(_) => return Ok(Step::Done),
            // Answered by the server: the connections stay usable.
            Err(ApplyError::Failed(e)) if !e.is_transient() => return Err(e),
            Err(ApplyError::Failed(e)) => Err(e),
            Err(ApplyError::Unknown(m)) => Ok(Step::Unknown(m)),
        };
        // A lost or unanswered connection: its statement may still run, and the caller's
        // coarse permits are released on our word, so every end is confirmed by KILL first.
        let killed = conns.kill_all().await;
        unconfirmed(&killed)?;
        outcome
    }
}

impl BatchWriter<'_> {
    /// The DDL's own step (DESIGN §16, [`crate::table::schema::step`]) on the first
    /// connection, under one target-write permit when `permits`; after a failure every
    /// connection is KILL-confirmed before the permit is released, as for a batch.
    pub(super) async fn ddl(
        &self,
        conns: &mut Conns<'_>,
        before: &kernel::schema::SealedSchema,
        next: &crate::store::schema_versions::SchemaVersion,
        expect: Option<&ledger::target::ReplayCursor>,
        group: &ReplayGroup,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Step> {
        let held = match permits {
            None => Vec::new(),
            Some(p) => match p
                .admission
                .acquire_writes(&p.owner, 1, p.deadline, p.cancel)
                .await
            {
                Ok(held) => held,
                Err(_) if p.cancel.is_cancelled() => return Ok(Step::Stopped),
                Err(e) => return Ok(Step::NoPermit(no_permit(&p.owner, &e))),
            },
        };
        let r = match conns.get().await {
            Ok(c) => match c.first_mut() {
                Some(c) => {
                    crate::table::schema::step::apply(
                        c,
                        self.ctx,
                        crate::table::schema::step::Ddl {
                            before,
                            next,
                            lock_wait: self.schema_lock_wait,
                        },
                        expect,
                        group,
                    )
                    .await
                }
                None => Err(Error::transient("no target connection for the schema step")),
            },
            Err(e) => Err(e),
        };
        let Err(e) = r else {
            // Answered: closed with the permit, as after a batch.
            conns.close().await;
            held.into_iter()
                .for_each(admission::Permit::release_confirmed);
            return Ok(Step::Done);
        };
        let killed = conns.kill_all().await;
        for (permit, (id, k)) in held.into_iter().zip(&killed) {
            match k {
                Ok(()) => permit.release_confirmed(),
                Err(_) => {
                    permit.mark_release_unknown(format!(
                        "target connection {id}: schema step failed: {e}"
                    ));
                }
            }
        }
        unconfirmed(&killed)?;
        Err(e)
    }
}
