//! The process-wide admission: three pools behind one handle.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::AdmissionError;
use crate::ids::{HoldId, PermitId, PoolKind};
use crate::permit::Permit;
use crate::pool::{Admit, PoolState};
use crate::snapshot::AdmissionSnapshot;

/// Pool capacities (DESIGN §8 defaults: 2 read windows, 2 target writes, 8 sessions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub read_windows: u32,
    pub target_writes: u32,
    /// A streaming tail holds one session for as long as it runs.
    pub sessions: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            read_windows: 2,
            target_writes: 2,
            sessions: 8,
        }
    }
}

impl Limits {
    pub fn capacity(&self, pool: PoolKind) -> u32 {
        match pool {
            PoolKind::ReadWindow => self.read_windows,
            PoolKind::TargetWrite => self.target_writes,
            PoolKind::Session => self.sessions,
        }
    }

    /// Every limit must admit at least one owner.
    pub fn validate(&self) -> Result<(), AdmissionError> {
        let fields = [
            ("read_windows", self.read_windows),
            ("target_writes", self.target_writes),
            ("sessions", self.sessions),
        ];
        match fields.into_iter().find(|(_, v)| *v == 0) {
            Some((field, _)) => Err(AdmissionError::InvalidLimit { field }),
            None => Ok(()),
        }
    }
}

/// State shared by the handle, its permits and its waiters.
#[derive(Debug)]
pub(crate) struct Shared {
    pools: [Mutex<PoolState>; 3],
}

impl Shared {
    /// Never held across an await or user code; a poisoned lock still holds
    /// consistent state because every transition is a few map operations.
    fn pool(&self, kind: PoolKind) -> MutexGuard<'_, PoolState> {
        self.pools[kind.index()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn release(&self, id: PermitId) {
        self.pool(id.pool()).release(id, Instant::now());
        tracing::debug!(permit = %id, "permit released (confirmed)");
    }

    pub(crate) fn hold(&self, id: PermitId, owner: &str, reason: String) -> HoldId {
        tracing::warn!(permit = %id, owner, reason = %reason, "permit held: release unknown");
        self.pool(id.pool()).hold(id, reason, Instant::now());
        HoldId::from(id)
    }
}

/// Permits for read windows, target writes and execution sessions. Cloning
/// gives another handle to the same pools.
#[derive(Debug, Clone)]
pub struct Admission {
    shared: Arc<Shared>,
}

impl Admission {
    pub fn new(limits: Limits) -> Result<Self, AdmissionError> {
        limits.validate()?;
        let pool = |kind| Mutex::new(PoolState::new(kind, limits.capacity(kind)));
        let pools = PoolKind::ALL.map(pool);
        Ok(Self {
            shared: Arc::new(Shared { pools }),
        })
    }

    /// Waits (FIFO) for a read-window permit, at most `deadline`.
    pub async fn acquire_read(
        &self,
        owner: &str,
        deadline: Duration,
        cancel: &CancellationToken,
    ) -> Result<Permit, AdmissionError> {
        self.acquire(PoolKind::ReadWindow, owner, deadline, cancel, false)
            .await
    }

    /// As [`Admission::acquire_read`], queued ahead of every read request that is not
    /// itself ahead (FIFO among those that are). For a reader that already holds
    /// target-write permits (the activation's field check): behind a queue of windows it
    /// would keep those permits idle, and the windows' own page writes wait for them. A
    /// window's read still cannot starve: each ahead request holds target-write permits,
    /// so at most `target_writes` of them wait or run at once.
    pub async fn acquire_read_ahead(
        &self,
        owner: &str,
        deadline: Duration,
        cancel: &CancellationToken,
    ) -> Result<Permit, AdmissionError> {
        self.acquire(PoolKind::ReadWindow, owner, deadline, cancel, true)
            .await
    }

    /// Waits (FIFO) for a target-write permit, at most `deadline`.
    pub async fn acquire_write(
        &self,
        owner: &str,
        deadline: Duration,
        cancel: &CancellationToken,
    ) -> Result<Permit, AdmissionError> {
        self.acquire(PoolKind::TargetWrite, owner, deadline, cancel, false)
            .await
    }

    /// Waits (FIFO) for `n` target-write permits granted together, at most `deadline`:
    /// all or none, so two owners each holding part of what they need (a deadlock at
    /// a small capacity) cannot occur, and a queued request is never overtaken. `n`
    /// above the capacity is refused at once (it could never be granted).
    pub async fn acquire_writes(
        &self,
        owner: &str,
        n: usize,
        deadline: Duration,
        cancel: &CancellationToken,
    ) -> Result<Vec<Permit>, AdmissionError> {
        self.acquire_n(PoolKind::TargetWrite, owner, n, deadline, cancel, false)
            .await
    }

    /// Takes a session now or refuses: a tail holds its session indefinitely,
    /// so waiting for one could be endless.
    pub fn try_acquire_session(&self, owner: &str) -> Result<Permit, AdmissionError> {
        let mut pool = self.shared.pool(PoolKind::Session);
        match pool.try_take(owner, Instant::now()) {
            Some(id) => Ok(Permit::new(self.shared.clone(), id, owner)),
            None => Err(AdmissionError::SessionLimit {
                limit: pool.capacity(),
                holders: pool.holders(),
            }),
        }
    }

    /// The server confirmed that the statement under `hold` ended (e.g. its
    /// connection was KILLed and is gone): the capacity returns to the pool.
    pub fn confirm_hold(&self, hold: HoldId) -> Result<(), AdmissionError> {
        let confirmed = self
            .shared
            .pool(hold.pool())
            .confirm_hold(hold, Instant::now());
        if !confirmed {
            return Err(AdmissionError::UnknownHold(hold));
        }
        tracing::info!(%hold, "hold confirmed released");
        Ok(())
    }

    pub fn snapshot(&self) -> AdmissionSnapshot {
        let now = Instant::now();
        let pool = |kind| self.shared.pool(kind).snapshot(now);
        AdmissionSnapshot {
            read_windows: pool(PoolKind::ReadWindow),
            target_writes: pool(PoolKind::TargetWrite),
            sessions: pool(PoolKind::Session),
        }
    }

    async fn acquire(
        &self,
        kind: PoolKind,
        owner: &str,
        deadline: Duration,
        cancel: &CancellationToken,
        ahead: bool,
    ) -> Result<Permit, AdmissionError> {
        let mut permits = self
            .acquire_n(kind, owner, 1, deadline, cancel, ahead)
            .await?;
        permits.pop().ok_or(AdmissionError::InvalidLimit {
            field: "permits asked",
        })
    }

    /// `n` permits of `kind` granted together; `ahead`: queued before the requests that
    /// are not (`PoolState::take_or_enqueue`).
    async fn acquire_n(
        &self,
        kind: PoolKind,
        owner: &str,
        n: usize,
        deadline: Duration,
        cancel: &CancellationToken,
        ahead: bool,
    ) -> Result<Vec<Permit>, AdmissionError> {
        if cancel.is_cancelled() {
            return Err(cancelled(kind, owner));
        }
        let n = n.max(1);
        let admit = {
            let mut pool = self.shared.pool(kind);
            if n > pool.capacity() as usize {
                return Err(AdmissionError::BeyondCapacity {
                    pool: kind,
                    asked: n,
                    capacity: pool.capacity(),
                });
            }
            pool.take_or_enqueue(owner, n, Instant::now(), ahead)
        };
        let (ids, granted) = match admit {
            Admit::Granted(ids) => return Ok(self.permits(&ids, owner)),
            Admit::Queued(ids, granted) => (ids, granted),
        };
        let waiter = Waiter {
            shared: self.shared.clone(),
            ids,
            since: Instant::now(),
            settled: false,
        };
        waiter.wait(owner, granted, deadline, cancel).await
    }

    fn permits(&self, ids: &[PermitId], owner: &str) -> Vec<Permit> {
        ids.iter()
            .map(|id| Permit::new(self.shared.clone(), *id, owner))
            .collect()
    }
}

enum Outcome {
    Granted,
    Cancelled,
    TimedOut,
}

/// A queued request. Dropping it (or giving up) removes it from the queue, or
/// releases the permits if they were granted but never handed out.
struct Waiter {
    shared: Arc<Shared>,
    ids: Vec<PermitId>,
    since: Instant,
    settled: bool,
}

impl Waiter {
    async fn wait(
        mut self,
        owner: &str,
        granted: oneshot::Receiver<()>,
        deadline: Duration,
        cancel: &CancellationToken,
    ) -> Result<Vec<Permit>, AdmissionError> {
        let outcome = tokio::select! {
            biased;
            () = grant_signal(granted) => Outcome::Granted,
            () = cancel.cancelled() => Outcome::Cancelled,
            () = tokio::time::sleep(deadline) => Outcome::TimedOut,
        };
        self.settled = true;
        let kind = self.kind();
        match outcome {
            Outcome::Granted => Ok(self
                .ids
                .iter()
                .map(|id| Permit::new(self.shared.clone(), *id, owner))
                .collect()),
            Outcome::Cancelled => {
                self.give_up();
                Err(cancelled(kind, owner))
            }
            Outcome::TimedOut => {
                let mut pool = self.shared.pool(kind);
                pool.abandon(&self.ids, Instant::now());
                Err(AdmissionError::Timeout {
                    pool: kind,
                    waited: self.since.elapsed(),
                    holders: pool.holders(),
                })
            }
        }
    }

    fn kind(&self) -> PoolKind {
        self.ids
            .first()
            .map_or(PoolKind::TargetWrite, |id| id.pool())
    }

    fn give_up(&self) {
        self.shared
            .pool(self.kind())
            .abandon(&self.ids, Instant::now());
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if !self.settled {
            self.give_up();
        }
    }
}

/// Completes when the grant arrives. The sender is never dropped unsent while
/// the waiter is queued, so a closed channel cannot occur; if it did, the
/// waiter would still end at its deadline or on cancel.
async fn grant_signal(granted: oneshot::Receiver<()>) {
    if granted.await.is_err() {
        std::future::pending::<()>().await;
    }
}

fn cancelled(pool: PoolKind, owner: &str) -> AdmissionError {
    AdmissionError::Cancelled {
        pool,
        owner: owner.to_owned(),
    }
}
