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
    /// Capacity was free and nobody was queued: the permits are in use now.
    Granted(Vec<PermitId>),
    /// Queued; the receiver fires once ALL the permits are granted (they are then in use).
    Queued(Vec<PermitId>, oneshot::Receiver<()>),
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

/// One request in the queue: `ids.len()` permits granted together or not at all.
struct Waiter {
    ids: Vec<PermitId>,
    owner: String,
    since: Instant,
    grant: oneshot::Sender<()>,
    /// Queued ahead of every request that is not ([`PoolState::take_or_enqueue`]).
    ahead: bool,
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
        self.try_take_n(owner, 1, now)
            .and_then(|ids| ids.first().copied())
    }

    /// Takes `n` permits at once only if `n` are free and nobody is queued ahead:
    /// all or none, so two owners each holding part of what they need cannot occur.
    fn try_take_n(&mut self, owner: &str, n: usize, now: Instant) -> Option<Vec<PermitId>> {
        self.try_take_if(owner, n, now, self.waiters.is_empty())
    }

    /// Takes `n` permits if `n` are free and `first` (nobody it must wait behind).
    fn try_take_if(
        &mut self,
        owner: &str,
        n: usize,
        now: Instant,
        first: bool,
    ) -> Option<Vec<PermitId>> {
        if self.free() < n.max(1) || !first {
            return None;
        }
        let ids: Vec<PermitId> = (0..n.max(1)).map(|_| self.next_id()).collect();
        for id in &ids {
            self.in_use.insert(*id, in_use(owner, now));
        }
        Some(ids)
    }

    /// Takes `n` permits (all or none) if possible, otherwise queues `owner` at the
    /// back. A queued request is granted only whole and only at the head of the queue
    /// (FIFO): later requests never overtake it, even smaller ones, so it cannot starve.
    /// `n` above the capacity is the caller's to refuse (it would never be granted).
    ///
    /// An `ahead` request goes before every queued request that is not ahead (FIFO among
    /// the ahead ones), and takes free capacity even when requests that are not ahead
    /// wait. Who may ask ahead is the caller's argument to make: a request that is not
    /// ahead still cannot starve as long as the ahead requests are few at any time (the
    /// activation's field check, one per table holding target-write permits).
    pub(crate) fn take_or_enqueue(
        &mut self,
        owner: &str,
        n: usize,
        now: Instant,
        ahead: bool,
    ) -> Admit {
        let first = match ahead {
            true => !self.waiters.iter().any(|w| w.ahead),
            false => self.waiters.is_empty(),
        };
        if let Some(ids) = self.try_take_if(owner, n, now, first) {
            return Admit::Granted(ids);
        }
        let ids: Vec<PermitId> = (0..n.max(1)).map(|_| self.next_id()).collect();
        let (grant, granted) = oneshot::channel();
        let at = match ahead {
            true => self.waiters.iter().take_while(|w| w.ahead).count(),
            false => self.waiters.len(),
        };
        self.waiters.insert(
            at,
            Waiter {
                ids: ids.clone(),
                owner: owner.to_owned(),
                since: now,
                grant,
                ahead,
            },
        );
        Admit::Queued(ids, granted)
    }

    /// A waiter gives up. If it was granted meanwhile, the permits were never
    /// handed to anyone, so nothing can run under them: they are released.
    pub(crate) fn abandon(&mut self, ids: &[PermitId], now: Instant) {
        let Some(first) = ids.first() else { return };
        if let Some(pos) = self
            .waiters
            .iter()
            .position(|w| w.ids.first() == Some(first))
        {
            self.waiters.remove(pos);
            // The head may have been waiting for more than is free; the next may fit.
            self.grant_waiters(now);
        } else {
            for id in ids {
                self.in_use.remove(id);
            }
            self.grant_waiters(now);
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
    /// admit it: requests are granted whole in FIFO order, so confirming every hold
    /// admits exactly the waiters whose cumulative need fits in free + held.
    fn waiting_snapshot(&self, now: Instant) -> Vec<WaiterSnapshot> {
        let held = self.holds.len();
        let room = self.free() + held;
        let mut need = 0usize;
        let entries = self.waiters.iter().map(|w| {
            need += w.ids.len();
            WaiterSnapshot {
                owner: w.owner.clone(),
                waited: now.saturating_duration_since(w.since),
                blocked_by_holds: held > 0 && need <= room,
            }
        });
        entries.collect()
    }

    fn next_id(&mut self) -> PermitId {
        self.next_seq += 1;
        PermitId::new(self.kind, self.next_seq)
    }

    /// Grants whole requests from the head of the queue while they fit; the head that
    /// does not fit blocks the others (FIFO, no overtaking).
    fn grant_waiters(&mut self, now: Instant) {
        while self
            .waiters
            .front()
            .is_some_and(|w| w.ids.len() <= self.free())
        {
            let Some(waiter) = self.waiters.pop_front() else {
                return;
            };
            for id in &waiter.ids {
                self.in_use.insert(*id, in_use(&waiter.owner, now));
            }
            // A waiter removes itself from the queue before its receiver goes
            // away, so this cannot fail; if it did, nobody holds the permits.
            if waiter.grant.send(()).is_err() {
                for id in &waiter.ids {
                    self.in_use.remove(id);
                }
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
            Admit::Queued(ids, rx) => (ids[0], rx),
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
        let (b, mut b_rx) = queued(pool.take_or_enqueue("b", 1, now, false));
        let (_c, mut c_rx) = queued(pool.take_or_enqueue("c", 1, now, false));
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
        let (b, _b_rx) = queued(pool.take_or_enqueue("b", 1, now, false));
        pool.release(a, now);
        assert_eq!(pool.free(), 0);
        pool.abandon(&[b], now);
        assert_eq!(pool.free(), 1);
    }

    #[test]
    fn a_multi_permit_request_is_granted_whole_and_never_overtaken() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::TargetWrite, 3);
        let a = pool.try_take("a", now).expect("free");
        // 2 are free but 3 are asked: nothing is taken (no partial holding).
        let (ids, mut rx) = match pool.take_or_enqueue("streams", 3, now, false) {
            Admit::Queued(ids, rx) => (ids, rx),
            Admit::Granted(_) => panic!("expected to be queued"),
        };
        assert_eq!(ids.len(), 3);
        assert_eq!(pool.free(), 2);
        // A smaller request behind it waits too (FIFO): it cannot starve the big one.
        let (_d, mut d_rx) = queued(pool.take_or_enqueue("d", 1, now, false));
        assert!(pool.try_take("e", now).is_none());
        pool.release(a, now);
        assert!(rx.try_recv().is_ok());
        assert!(d_rx.try_recv().is_err());
        assert_eq!(pool.free(), 0);
        for id in &ids[..2] {
            pool.release(*id, now);
        }
        assert!(d_rx.try_recv().is_ok());
    }

    #[test]
    fn abandoning_a_multi_permit_wait_lets_the_next_in() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::TargetWrite, 2);
        let _a = pool.try_take("a", now).expect("free");
        let (ids, _rx) = match pool.take_or_enqueue("streams", 2, now, false) {
            Admit::Queued(ids, rx) => (ids, rx),
            Admit::Granted(_) => panic!("expected to be queued"),
        };
        let (_d, mut d_rx) = queued(pool.take_or_enqueue("d", 1, now, false));
        pool.abandon(&ids, now);
        assert!(d_rx.try_recv().is_ok());
        assert_eq!(pool.free(), 0);
    }

    #[test]
    fn an_ahead_request_goes_before_plain_waiters_and_after_earlier_ahead_ones() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::ReadWindow, 1);
        let a = pool.try_take("a", now).expect("free");
        let (b, mut b_rx) = queued(pool.take_or_enqueue("window b", 1, now, false));
        let (x, mut x_rx) = queued(pool.take_or_enqueue("check x", 1, now, true));
        let (y, mut y_rx) = queued(pool.take_or_enqueue("check y", 1, now, true));
        let names: Vec<String> = pool
            .snapshot(now)
            .waiting
            .iter()
            .map(|w| w.owner.clone())
            .collect();
        assert_eq!(names, ["check x", "check y", "window b"]);
        pool.release(a, now);
        assert!(x_rx.try_recv().is_ok());
        assert!(y_rx.try_recv().is_err() && b_rx.try_recv().is_err());
        pool.release(x, now);
        assert!(y_rx.try_recv().is_ok());
        assert!(b_rx.try_recv().is_err());
        pool.release(y, now);
        assert!(b_rx.try_recv().is_ok());
        pool.release(b, now);
        // Free capacity goes to an ahead request even while a plain one waits for more.
        let mut wide = PoolState::new(PoolKind::TargetWrite, 2);
        let c = wide.try_take("c", now).expect("free");
        let (_two, _two_rx) = queued(wide.take_or_enqueue("streams", 2, now, false));
        assert!(matches!(
            wide.take_or_enqueue("check z", 1, now, true),
            Admit::Granted(_)
        ));
        assert!(matches!(
            wide.take_or_enqueue("plain", 1, now, false),
            Admit::Queued(..)
        ));
        wide.release(c, now);
    }

    #[test]
    fn waiters_behind_holds_are_marked() {
        let now = Instant::now();
        let mut pool = PoolState::new(PoolKind::ReadWindow, 2);
        let a = pool.try_take("a", now).expect("free");
        let _b = pool.try_take("b", now).expect("free");
        pool.hold(a, "statement may still run".into(), now);
        let _c = queued(pool.take_or_enqueue("c", 1, now, false));
        let _d = queued(pool.take_or_enqueue("d", 1, now, false));
        let snap = pool.snapshot(now);
        let blocked: Vec<bool> = snap.waiting.iter().map(|w| w.blocked_by_holds).collect();
        assert_eq!(blocked, [true, false]);
        assert_eq!(snap.holds[0].owner, "a");
    }
}
