//! The state of one pool, as a pure state machine: no I/O, no clock reads
//! (callers pass `now`), no waiting. Every transition keeps
//! `in_use + holds <= capacity` and grants freed capacity to waiters in FIFO
//! order before anyone else can take it.

use std::collections::{BTreeMap, VecDeque};

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::error::Holder;
use crate::ids::{HoldId, PermitId, PoolKind};
use crate::snapshot::{HoldSnapshot, InUseSnapshot, PoolSnapshot, WaiterSnapshot};

/// The result of asking for a permit.
pub(crate) enum Admit {
    /// Capacity was free and nobody was queued: the permit is in use now.
    Granted(PermitId),
    /// Queued; the receiver fires once the permit is granted (it is then in use).
    Queued(PermitId, oneshot::Receiver<()>),
}

struct InUse {
    owner: String,
    since: Instant,
}

struct Hold {
    owner: String,
    reason: String,
    since: Instant,
}

struct Waiter {
    id: PermitId,
    owner: String,
    since: Instant,
    grant: oneshot::Sender<()>,
}

pub(crate) struct PoolState {
    kind: PoolKind,
    capacity: u32,
    next_seq: u64,
    in_use: BTreeMap<PermitId, InUse>,
    holds: BTreeMap<HoldId, Hold>,
    waiters: VecDeque<Waiter>,
}

impl PoolState {
    pub(crate) fn new(kind: PoolKind, capacity: u32) -> Self {
        Self {
            kind,
            capacity,
            next_seq: 0,
            in_use: BTreeMap::new(),
            holds: BTreeMap::new(),
            waiters: VecDeque::new(),
        }
    }

    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Capacity neither in use nor held.
    pub(crate) fn free(&self) -> usize {
        let occupied = self.in_use.len() + self.holds.len();
        (self.capacity as usize).saturating_sub(occupied)
    }

    /// Takes a permit only if one is free and nobody is queued ahead.
    pub(crate) fn try_take(&mut self, owner: &str, now: Instant) -> Option<PermitId> {
        if self.free() == 0 || !self.waiters.is_empty() {
            return None;
        }
        let id = self.next_id();
        self.in_use.insert(id, in_use(owner, now));
        Some(id)
    }

    /// Takes a permit if possible, otherwise queues `owner` at the back.
    pub(crate) fn take_or_enqueue(&mut self, owner: &str, now: Instant) -> Admit {
        if let Some(id) = self.try_take(owner, now) {
            return Admit::Granted(id);
        }
        let id = self.next_id();
        let (grant, granted) = oneshot::channel();
        self.waiters.push_back(Waiter {
            id,
            owner: owner.to_owned(),
            since: now,
            grant,
        });
        Admit::Queued(id, granted)
    }

    /// A waiter gives up. If it was granted meanwhile, the permit was never
    /// handed to anyone, so nothing can run under it: it is released.
    pub(crate) fn abandon(&mut self, id: PermitId, now: Instant) {
        if let Some(pos) = self.waiters.iter().position(|w| w.id == id) {
            self.waiters.remove(pos);
        } else {
            self.release(id, now);
        }
    }

    /// Confirmed release: the capacity returns and goes to the next waiters.
    pub(crate) fn release(&mut self, id: PermitId, now: Instant) -> bool {
        let released = self.in_use.remove(&id).is_some();
        self.grant_waiters(now);
        released
    }

    /// Turns an in-use permit into a hold. Capacity stays occupied.
    pub(crate) fn hold(&mut self, id: PermitId, reason: String, now: Instant) -> Option<HoldId> {
        let entry = self.in_use.remove(&id)?;
        let hold = HoldId::from(id);
        let record = Hold {
            owner: entry.owner,
            reason,
            since: now,
        };
        self.holds.insert(hold, record);
        Some(hold)
    }

    /// The server confirmed the statement under a hold ended: capacity returns.
    pub(crate) fn confirm_hold(&mut self, hold: HoldId, now: Instant) -> bool {
        let confirmed = self.holds.remove(&hold).is_some();
        self.grant_waiters(now);
        confirmed
    }

    /// Everyone occupying capacity, in-use permits first, then holds.
    pub(crate) fn holders(&self) -> Vec<Holder> {
        let in_use = self.in_use.values().map(|e| Holder {
            owner: e.owner.clone(),
            release_unknown: None,
        });
        let held = self.holds.values().map(|h| Holder {
            owner: h.owner.clone(),
            release_unknown: Some(h.reason.clone()),
        });
        in_use.chain(held).collect()
    }

    pub(crate) fn snapshot(&self, now: Instant) -> PoolSnapshot {
        PoolSnapshot {
            pool: self.kind,
            capacity: self.capacity,
            available: u32::try_from(self.free()).unwrap_or(u32::MAX),
            in_use: self.in_use_snapshot(now),
            holds: self.holds_snapshot(now),
            waiting: self.waiting_snapshot(now),
        }
    }

    fn in_use_snapshot(&self, now: Instant) -> Vec<InUseSnapshot> {
        let entries = self.in_use.iter().map(|(id, e)| InUseSnapshot {
            permit: *id,
            owner: e.owner.clone(),
            age: now.saturating_duration_since(e.since),
        });
        entries.collect()
    }

    fn holds_snapshot(&self, now: Instant) -> Vec<HoldSnapshot> {
        let entries = self.holds.iter().map(|(id, h)| HoldSnapshot {
            hold: *id,
            owner: h.owner.clone(),
            reason: h.reason.clone(),
            age: now.saturating_duration_since(h.since),
        });
        entries.collect()
    }

    /// A queued waiter is blocked by holds when confirming the holds would
    /// admit it: waiters exist only while nothing is free, so confirming `h`
    /// holds admits exactly the first `h` waiters.
    fn waiting_snapshot(&self, now: Instant) -> Vec<WaiterSnapshot> {
        let held = self.holds.len();
        let entries = self
            .waiters
            .iter()
            .enumerate()
            .map(|(i, w)| WaiterSnapshot {
                owner: w.owner.clone(),
                waited: now.saturating_duration_since(w.since),
                blocked_by_holds: i < held,
            });
        entries.collect()
    }

    fn next_id(&mut self) -> PermitId {
        self.next_seq += 1;
        PermitId::new(self.kind, self.next_seq)
    }

    fn grant_waiters(&mut self, now: Instant) {
        while self.free() > 0 {
            let Some(waiter) = self.waiters.pop_front() else {
                return;
            };
            self.in_use.insert(waiter.id, in_use(&waiter.owner, now));
            // A waiter removes itself from the queue before its receiver goes
            // away, so this cannot fail; if it did, nobody holds the permit.
            if waiter.grant.send(()).is_err() {
                self.in_use.remove(&waiter.id);
            }
        }
    }
}

impl std::fmt::Debug for PoolState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolState")
            .field("capacity", &self.capacity())
            .field("free", &self.free())
            .finish_non_exhaustive()
    }
}

fn in_use(owner: &str, since: Instant) -> InUse {
    InUse {
        owner: owner.to_owned(),
        since,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queued(admit: Admit) -> (PermitId, oneshot::Receiver<()>) {
        match admit {
            Admit::Queued(id, rx) => (id, rx),
            Admit::Granted(_) => panic!("expected to be queued"),
        }
    }

    #[test]
    fn hold_keeps_capacity_until_confirmed() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::ReadWindow, 1);
        let a = pool.try_take("a", now).expect("free");
        let hold = pool.hold(a, "timed out".into(), now).expect("in use");
        assert_eq!(pool.free(), 0);
        assert!(pool.try_take("b", now).is_none());
        assert!(pool.confirm_hold(hold, now));
        assert!(!pool.confirm_hold(hold, now));
        assert!(pool.try_take("b", now).is_some());
    }

    #[test]
    fn freed_capacity_goes_to_the_oldest_waiter() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::TargetWrite, 1);
        let a = pool.try_take("a", now).expect("free");
        let (b, mut b_rx) = queued(pool.take_or_enqueue("b", now));
        let (_c, mut c_rx) = queued(pool.take_or_enqueue("c", now));
        // Nobody may jump the queue, even with a non-blocking attempt.
        assert!(pool.try_take("d", now).is_none());
        pool.release(a, now);
        assert!(b_rx.try_recv().is_ok());
        assert!(c_rx.try_recv().is_err());
        pool.release(b, now);
        assert!(c_rx.try_recv().is_ok());
    }

    #[test]
    fn abandoning_a_granted_wait_releases_it() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::ReadWindow, 1);
        let a = pool.try_take("a", now).expect("free");
        let (b, _b_rx) = queued(pool.take_or_enqueue("b", now));
        pool.release(a, now);
        assert_eq!(pool.free(), 0);
        pool.abandon(b, now);
        assert_eq!(pool.free(), 1);
    }

    #[test]
    fn waiters_behind_holds_are_marked() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::ReadWindow, 2);
        let a = pool.try_take("a", now).expect("free");
        let _b = pool.try_take("b", now).expect("free");
        pool.hold(a, "statement may still run".into(), now);
        let _c = queued(pool.take_or_enqueue("c", now));
        let _d = queued(pool.take_or_enqueue("d", now));
        let snap = pool.snapshot(now);
        let blocked: Vec<bool> = snap.waiting.iter().map(|w| w.blocked_by_holds).collect();
        assert_eq!(blocked, [true, false]);
        assert_eq!(snap.holds[0].owner, "a");
    }
}
