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
//! a slot when it needs a connection and gives it back when it is done with it; a
//! wait for a slot is bounded ([`SLOT_WAIT`]) and ends in a transient error naming the
//! server, never an endless wait.
//!
//! # Why it is safe
//!
//! Only CONTROL connections are reused, and only as a new connection would be: given
//! back ([`Pooled::close`]), one is reset with COM_RESET_CONNECTION, which rolls back any
//! open transaction and releases its locks, drops temporary tables, user variables and
//! prepared statements, and sets every session variable (`sql_mode`, `time_zone`,
//! `max_statement_time`, the transaction isolation level and access mode) back to the
//! server's global value; then the session setup of a new connection is run again
//! (`SET NAMES binary` on both sides, the target's `time_zone` and `sql_mode`). A
//! connection whose reset fails or takes longer than [`RESET_TIMEOUT`] is closed. Control
//! statements are single autocommitted statements, answered before the connection is
//! given back, so nothing of one job's use is visible to the next.
//!
//! DATA and KILL connections are never reused: a read view (REPEATABLE READ, READ ONLY,
//! its snapshot), a page write or a replay batch (an open or uncertain commit) ends with
//! its connection closed, or KILLed and confirmed gone, exactly as before
//! (`crate::io::bounded`, `crate::table::target_write`, `crate::table::replay`), and its
//! [`Slot`] (like its admission permit) is given back only after that confirmation; a
//! connection whose end cannot be confirmed keeps its slot for good ([`Slot::lose`]), so
//! the count on the server stays under the bound. A slot wait never holds another slot
//! of the same class, so slot waits cannot form a cycle; data slots are taken inside
//! permits, which never outnumber them.
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
    /// The tasks holding control slots now (the nesting check, [`holders`]).
    holders: holders::Holders,
    /// Control connections given back clean ([`Pooled::close`]), for the next taker of a
    /// control slot. Pushed before the slot is released and popped after one is taken, so
    /// idle + in use never exceeds the control slots.
    idle: std::sync::Mutex<Vec<Conn>>,
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
    permit: Option<OwnedSemaphorePermit>,
    _holder: Option<holders::Held>,
}

impl Slot {
    /// The slot's connection may still live on the server (its end could not be
    /// confirmed): the slot is never given back, so this process's count on the server
    /// stays bounded; its capacity is lost until serve restarts, as its permit's is.
    pub fn lose(mut self) {
        if let Some(p) = self.permit.take() {
            std::mem::forget(p);
        }
    }
}

/// A connection with its slot.
#[derive(Debug)]
pub struct Pooled {
    conn: Conn,
    slot: Slot,
    usage: Use,
    pool: ConnPool,
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
    /// confirmed (closed, or KILLed and gone). The connection is never reused.
    pub fn split(self) -> (Conn, Slot) {
        (self.conn, self.slot)
    }

    /// Ends this use of the connection, then gives the slot back. A control connection
    /// is reset to a new connection's state and kept for the next control use (see the
    /// module doc); any other (a read view, a write, a KILL) is closed. A close error is
    /// logged.
    pub async fn close(self) {
        let Pooled {
            mut conn,
            slot,
            usage,
            pool,
        } = self;
        if usage == Use::Control {
            match tokio::time::timeout(RESET_TIMEOUT, reset(&mut conn, pool.0.side)).await {
                Ok(Ok(())) => {
                    lock(&pool.0.idle).push(conn);
                    drop(slot);
                    return;
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "a control connection did not reset; closing it")
                }
                Err(_) => tracing::debug!("a control connection did not reset in time; closing it"),
            }
        }
        crate::io::connect::close(conn).await;
        drop(slot);
    }
}

impl Pooled {
    /// Ends a use whose statement may still run on the server (its client deadline
    /// passed): the connection is dropped, never reused, and the caller gets its id, its
    /// slot and its pool to KILL it and confirm it gone before the slot is given back
    /// (`crate::io::bounded::abandon`), or else to [`Slot::lose`] the slot.
    pub fn detach(self) -> (u32, Slot, ConnPool) {
        let id = self.conn.id();
        let Pooled {
            conn, slot, pool, ..
        } = self;
        drop(conn);
        (id, slot, pool)
    }
}

pub mod holders;

/// How long the reset of a control connection given back may take before it is closed.
const RESET_TIMEOUT: Duration = Duration::from_secs(5);

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// COM_RESET_CONNECTION (rolls back an open transaction, drops temporary tables, user
/// variables and prepared statements, sets every session variable back to its global
/// value), then the session setup a new connection runs: `SET NAMES binary` (mysql_async
/// re-runs the options' setup after a reset) and, on a target, its init statements
/// (time zone, sql_mode). A server without COM_RESET_CONNECTION is an error: the
/// connection is closed, never reused.
async fn reset(conn: &mut Conn, side: Side) -> std::result::Result<(), String> {
    use mysql_async::prelude::Queryable;
    if !conn.reset().await.map_err(|e| e.to_string())? {
        return Err("COM_RESET_CONNECTION is not supported by this server".into());
    }
    if side == Side::Target {
        for stmt in ledger::target::session_init() {
            conn.query_drop(stmt).await.map_err(|e| e.to_string())?;
        }
    }
    Ok(())
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
    /// Control connections open and idle, kept for the next control use.
    pub idle: u32,
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
            holders: holders::Holders::default(),
            idle: std::sync::Mutex::new(Vec::new()),
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
        if u == Use::Control {
            self.0.holders.check_not_nested(self.side(), &self.0.label);
        }
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
        let holder = (u == Use::Control).then(|| self.0.holders.hold()).flatten();
        Ok(Slot {
            permit: Some(permit),
            _holder: holder,
        })
    }

    /// A new connection under a slot of `u`; `how` names it in errors ("(read view)").
    pub async fn connect(&self, u: Use, how: &str) -> Result<Pooled> {
        self.connect_with(u, &self.0.opts, how).await
    }

    /// As [`ConnPool::connect`] with other options for the same server and account (the
    /// page writer's default database).
    pub async fn connect_with(&self, u: Use, opts: &Opts, how: &str) -> Result<Pooled> {
        let slot = self.slot(u).await?;
        if u == Use::Control {
            if let Some(conn) = lock(&self.0.idle).pop() {
                return Ok(self.pooled(conn, slot, u));
            }
        }
        let conn = match self.0.side {
            Side::Source => crate::io::connect::connect(opts.clone(), "source", how).await?,
            Side::Target => ledger::apply::connect(opts).await?,
        };
        self.gate(u).opened.fetch_add(1, Ordering::Relaxed);
        Ok(self.pooled(conn, slot, u))
    }

    fn pooled(&self, conn: Conn, slot: Slot, usage: Use) -> Pooled {
        Pooled {
            conn,
            slot,
            usage,
            pool: self.clone(),
        }
    }

    /// Closes the idle control connections (serve's shutdown).
    pub async fn close_idle(&self) {
        let idle: Vec<Conn> = std::mem::take(&mut *lock(&self.0.idle));
        for c in idle {
            crate::io::connect::close(c).await;
        }
    }

    /// The pool now.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            side: self.side(),
            idle: u32::try_from(lock(&self.0.idle).len()).unwrap_or(u32::MAX),
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

    /// The nesting check: a task asking for a control slot while it holds one is counted
    /// (debug builds, as tests are); one that gave its slot back first is not.
    #[tokio::test]
    async fn a_task_asking_for_a_second_control_slot_is_named() {
        let p = pool(1);
        let counted = tokio::spawn(async move {
            let before = holders::nested_control_waits();
            let first = p.slot(Use::Control).await;
            let alone = holders::nested_control_waits() - before;
            let second = p.slot(Use::Control).await;
            let nested = holders::nested_control_waits() - before;
            drop((first, second));
            let again = p.slot(Use::Control).await;
            let after_release = holders::nested_control_waits() - before;
            assert!(again.is_ok());
            (alone, nested, after_release)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            counted,
            (0, 1, 1),
            "(first slot, second while holding, after giving back)"
        );
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
