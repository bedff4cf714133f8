//! Connections per server (DESIGN §17): one [`ConnPool`] per server and account (source,
//! target), shared by every job of the process, so the connections this process opens to
//! a server have a fixed bound whatever the number of tables:
//!
//! | use | slots | taken by |
//! |---|---|---|
//! | [`Use::Data`] | the admission permits of that server's work (`--read-windows` on a source, `--target-writes` on a target) | read views, page writes, replay batches: always inside their permit, so a slot is free whenever the permit was granted |
//! | [`Use::Control`] | [`CONTROL_SLOTS`] | short statements outside any permit: markers, schema and XA checks, T reads (cursor, credentials), key weights |
//! | [`Use::Kill`] | [`KILL_SLOTS`] | the new connection of KILL + confirm (`crate::io::bounded`), never held while waiting for another slot |
//!
//! Bound per server = data + control + kill slots (+ the capture reader's one binlog
//! connection on a source; + the activation audit's field check, which holds a read-window
//! permit and one connection on each side: + `--read-windows` on a target). A job takes
//! a slot when it needs a connection and gives it back when the connection is closed; a
//! wait for a slot is bounded ([`SLOT_WAIT`]) and ends in a transient error naming the
//! server, never an endless wait.
//!
//! # Why it is safe
//!
//! A slot is returned only with its connection CLOSED: a connection is never handed from
//! one operation (or job) to another. So no session state crosses: no session variable
//! (`SET NAMES binary`, `sql_mode`, `time_zone`, `max_statement_time`, the isolation
//! level and `READ ONLY` of a read view), no open or half-committed transaction, no
//! temporary table, no lock. Each connection is made by the same connect functions as
//! before, which run the session setup on every new connection. What the pool changes is
//! only how many exist at once. The protocol's release rules stand as they were: a
//! connection that held a read view or an uncertain commit is closed or KILLed and
//! confirmed gone (`crate::io::bounded`, `crate::table::target_write`) BEFORE its slot
//! (and its admission permit) is given back, because the [`Pooled`] connection and its
//! [`Slot`] are kept together until the caller drops the slot after that confirmation.
//! Reusing connections across operations was measured as not needed for the bound and
//! would have to reset each of the states above; it is not done.
use kernel::{Error, Result};
use mysql_async::{Conn, Opts};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections for short statements outside any permit, per server.
pub const CONTROL_SLOTS: u32 = 4;
/// Connections for KILL + confirm, per server.
pub const KILL_SLOTS: u32 = 1;
/// How long a job waits for a free slot before a transient error.
pub const SLOT_WAIT: Duration = Duration::from_secs(120);

/// What a connection is for (the slot class it takes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    Data,
    Control,
    Kill,
}

impl Use {
    pub const ALL: [Use; 3] = [Use::Data, Use::Control, Use::Kill];

    pub fn as_str(self) -> &'static str {
        match self {
            Use::Data => "data",
            Use::Control => "control",
            Use::Kill => "kill",
        }
    }
}

/// How new connections to the server are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// `crate::io::connect::connect` (SET NAMES binary).
    Source,
    /// `ledger::apply::connect` (the target session setup).
    Target,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Source => "source",
            Side::Target => "target",
        }
    }
}

struct Gate {
    capacity: u32,
    sem: Arc<Semaphore>,
    peak: AtomicU32,
    waits: AtomicU64,
    opened: AtomicU64,
}

impl Gate {
    fn new(capacity: u32) -> Gate {
        let capacity = capacity.max(1);
        Gate {
            capacity,
            sem: Arc::new(Semaphore::new(capacity as usize)),
            peak: AtomicU32::new(0),
            waits: AtomicU64::new(0),
            opened: AtomicU64::new(0),
        }
    }

    fn in_use(&self) -> u32 {
        let free = u32::try_from(self.sem.available_permits()).unwrap_or(u32::MAX);
        self.capacity.saturating_sub(free)
    }
}

struct Inner {
    side: Side,
    label: String,
    opts: Opts,
    gates: [Gate; 3],
}

/// The connections of this process to one server and account. Cheap to clone.
#[derive(Clone)]
pub struct ConnPool(Arc<Inner>);

impl std::fmt::Debug for ConnPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConnPool({} {})", self.0.side.as_str(), self.0.label)
    }
}

/// A slot of a pool: given back when dropped. Keep it until the connection it was taken
/// for is confirmed closed.
#[derive(Debug)]
pub struct Slot {
    _permit: OwnedSemaphorePermit,
}

impl Slot {
    /// The slot's connection may still live on the server (its end could not be
    /// confirmed): the slot is never given back, so this process's count on the server
    /// stays bounded; its capacity is lost until serve restarts, as its permit's is.
    pub fn lose(self) {
        std::mem::forget(self._permit);
    }
}

/// A connection with its slot.
#[derive(Debug)]
pub struct Pooled {
    conn: Conn,
    slot: Slot,
}

impl std::ops::Deref for Pooled {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

impl Pooled {
    /// The connection and its slot apart: drop the slot once the connection's end is
    /// confirmed (closed, or KILLed and gone).
    pub fn split(self) -> (Conn, Slot) {
        (self.conn, self.slot)
    }

    /// Closes the connection (a close error is logged), then gives the slot back.
    pub async fn close(self) {
        let (conn, slot) = self.split();
        crate::io::connect::close(conn).await;
        drop(slot);
    }
}

/// One slot class of a pool at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotStats {
    pub usage: Use,
    pub capacity: u32,
    pub in_use: u32,
    pub peak: u32,
    pub waits: u64,
    pub opened: u64,
}

/// A pool at one instant, for status and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolStats {
    /// `source` or `target`.
    pub side: &'static str,
    /// `user@host:port` (never a password).
    pub server: String,
    pub slots: Vec<SlotStats>,
}

impl PoolStats {
    /// Every slot of the pool (its bound, without the binlog or audit connections).
    pub fn capacity(&self) -> u32 {
        self.slots.iter().map(|s| s.capacity).sum()
    }
}

impl ConnPool {
    /// A pool of `data` data slots (the permits of that server's work) to the server of
    /// `opts`, labelled `label` (`user@host:port`).
    pub fn new(side: Side, label: impl Into<String>, opts: Opts, data: u32) -> ConnPool {
        ConnPool(Arc::new(Inner {
            side,
            label: label.into(),
            opts,
            gates: [
                Gate::new(data),
                Gate::new(CONTROL_SLOTS),
                Gate::new(KILL_SLOTS),
            ],
        }))
    }

    /// A pool for one command's own use (verify, audit): `data` data slots.
    pub fn of_opts(side: Side, opts: Opts, data: u32) -> ConnPool {
        let label = format!(
            "{}@{}",
            opts.user().unwrap_or(""),
            crate::io::connect::server_label(&opts)
        );
        ConnPool::new(side, label, opts, data)
    }

    /// The options new connections are made with.
    pub fn opts(&self) -> &Opts {
        &self.0.opts
    }

    /// `source` or `target`.
    pub fn side(&self) -> &'static str {
        self.0.side.as_str()
    }

    fn gate(&self, u: Use) -> &Gate {
        match u {
            Use::Data => &self.0.gates[0],
            Use::Control => &self.0.gates[1],
            Use::Kill => &self.0.gates[2],
        }
    }

    /// Takes a slot of `u`, waiting at most [`SLOT_WAIT`].
    pub async fn slot(&self, u: Use) -> Result<Slot> {
        let g = self.gate(u);
        let permit = match g.sem.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                g.waits.fetch_add(1, Ordering::Relaxed);
                match tokio::time::timeout(SLOT_WAIT, g.sem.clone().acquire_owned()).await {
                    Ok(Ok(p)) => p,
                    _ => {
                        return Err(Error::transient(format!(
                            "no {} connection to the {} {} was free within {SLOT_WAIT:?} \
                             ({} of {} in use)",
                            u.as_str(),
                            self.side(),
                            self.0.label,
                            g.in_use(),
                            g.capacity
                        )))
                    }
                }
            }
        };
        g.peak.fetch_max(g.in_use(), Ordering::Relaxed);
        Ok(Slot { _permit: permit })
    }

    /// A new connection under a slot of `u`; `how` names it in errors ("(read view)").
    pub async fn connect(&self, u: Use, how: &str) -> Result<Pooled> {
        self.connect_with(u, &self.0.opts, how).await
    }

    /// As [`ConnPool::connect`] with other options for the same server and account (the
    /// page writer's default database).
    pub async fn connect_with(&self, u: Use, opts: &Opts, how: &str) -> Result<Pooled> {
        let slot = self.slot(u).await?;
        let conn = match self.0.side {
            Side::Source => crate::io::connect::connect(opts.clone(), "source", how).await?,
            Side::Target => ledger::apply::connect(opts).await?,
        };
        self.gate(u).opened.fetch_add(1, Ordering::Relaxed);
        Ok(Pooled { conn, slot })
    }

    /// The pool now.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            side: self.side(),
            server: self.0.label.clone(),
            slots: Use::ALL
                .into_iter()
                .map(|u| {
                    let g = self.gate(u);
                    SlotStats {
                        usage: u,
                        capacity: g.capacity,
                        in_use: g.in_use(),
                        peak: g.peak.load(Ordering::Relaxed),
                        waits: g.waits.load(Ordering::Relaxed),
                        opened: g.opened.load(Ordering::Relaxed),
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(data: u32) -> ConnPool {
        let opts = Opts::from_url("mysql://u@127.0.0.1:1/").unwrap_or_else(|e| panic!("{e}"));
        ConnPool::of_opts(Side::Target, opts, data)
    }

    #[tokio::test]
    async fn slots_are_bounded_per_use_and_come_back_when_dropped() {
        let p = pool(2);
        let a = p.slot(Use::Data).await;
        let b = p.slot(Use::Data).await;
        assert!(a.is_ok() && b.is_ok());
        let c = tokio::time::timeout(Duration::from_millis(50), p.slot(Use::Data)).await;
        assert!(c.is_err(), "a third data slot was given with 2");
        // Other classes are apart: control and kill still have theirs.
        let k = p.slot(Use::Kill).await;
        assert!(k.is_ok());
        let mut ctl = Vec::new();
        for _ in 0..CONTROL_SLOTS {
            ctl.push(p.slot(Use::Control).await);
        }
        assert!(ctl.iter().all(|s| s.is_ok()));
        let s = p.stats();
        assert_eq!(s.capacity(), 2 + CONTROL_SLOTS + KILL_SLOTS);
        assert_eq!(s.server, "u@127.0.0.1:1");
        let data = &s.slots[0];
        assert_eq!((data.in_use, data.peak, data.waits), (2, 2, 1));
        drop(a);
        assert!(p.slot(Use::Data).await.is_ok());
        assert_eq!(p.stats().slots[0].in_use, 1);
    }

    #[tokio::test]
    async fn a_failed_connect_gives_its_slot_back() {
        let p = pool(1);
        assert!(p.connect(Use::Data, "(test)").await.is_err());
        assert_eq!(p.stats().slots[0].in_use, 0);
        assert_eq!(p.stats().slots[0].opened, 0);
    }
}
