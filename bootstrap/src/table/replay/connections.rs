//! The target connections of one replay run and how their end is confirmed.
//!
//! # Why it is safe
//!
//! After a batch failed, ended unknown or timed out, a statement of it may still run on
//! ANY of the connections (DESIGN §8). So no connection is simply dropped: each is KILLed
//! and the server must show it gone ([`crate::io::bounded::kill_confirmed`]) before its
//! permit is released, and the `Conn`s stay open until then so that what the server
//! shows is the KILL's doing. A connection whose end is not confirmed is named in a
//! definite `release_unconfirmed` ([`unconfirmed`]), never assumed gone.
//!
//! They are data connections of the target's pool (`crate::io::pool`): a run under
//! per-batch permits closes them before it releases the batch's permits (so no
//! STREAMING table holds a connection while it waits for the binlog); a run under coarse
//! permits keeps them for the run.
use crate::io::pool::{ConnPool, Pooled, Slot, Use};
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use mysql_async::Conn;

/// The target connections of one replay run: `streams` of them, opened together, one
/// per key partition ([`ledger::parts`]). Kept open across batches; dropped as a whole
/// after any failure (each KILL-confirmed first) and reopened by the next batch.
pub(super) struct Conns<'a> {
    pool: &'a ConnPool,
    /// Connections opened together (one per key partition, at least 1).
    pub(super) streams: usize,
    conns: Vec<Conn>,
    /// The pool slot of each connection, given back once it is confirmed closed.
    slots: Vec<Slot>,
}

impl<'a> Conns<'a> {
    pub(super) fn new(pool: &'a ConnPool, streams: usize) -> Conns<'a> {
        Conns {
            pool,
            streams: streams.clamp(1, ledger::parts::MAX_PARTS),
            conns: Vec::new(),
            slots: Vec::new(),
        }
    }

    pub(super) async fn get(&mut self) -> Result<&mut [Conn]> {
        while self.conns.len() < self.streams {
            match self.pool.connect(Use::Data, "(replay)").await {
                Ok(c) => {
                    let (c, slot) = c.split();
                    self.conns.push(c);
                    self.slots.push(slot);
                }
                Err(e) => {
                    // Only session settings were sent on them, all answered.
                    self.close().await;
                    return Err(e);
                }
            }
        }
        Ok(&mut self.conns)
    }

    fn ids(&self) -> Vec<u32> {
        self.conns.iter().map(|c| c.id()).collect()
    }

    pub(super) async fn close(&mut self) {
        for c in self.conns.drain(..) {
            let _ = c.disconnect().await;
        }
        self.slots.clear();
    }

    /// A control connection of the same pool, for T reads outside any permit (the
    /// cursor): never one of the data connections, which are taken within permits.
    pub(super) async fn control(&self) -> Result<Pooled> {
        self.pool.connect(Use::Control, "(replay cursor)").await
    }

    /// After a failed, unknown or timed-out batch a statement may still run on ANY of
    /// the connections: each is KILLed and confirmed gone (the `Conn`s are kept open until
    /// then, so what the server shows is the KILL's doing). Returns, per connection id,
    /// whether its end is confirmed.
    pub(super) async fn kill_all(&mut self) -> Vec<(u32, Result<()>)> {
        let ids = self.ids();
        let dead: Vec<Conn> = self.conns.drain(..).collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let r = crate::io::bounded::kill_confirmed(self.pool, "target", id).await;
            out.push((id, r));
        }
        drop(dead);
        for (slot, (_, r)) in self.slots.drain(..).zip(&out) {
            if r.is_err() {
                slot.lose(); // it may live on: its slot stays counted
            }
        }
        out
    }
}

/// The definite `release_unconfirmed` naming every connection whose KILL was not
/// confirmed, or Ok when all were.
pub(super) fn unconfirmed(killed: &[(u32, Result<()>)]) -> Result<()> {
    let bad: Vec<String> = killed
        .iter()
        .filter_map(|(id, r)| r.as_ref().err().map(|e| format!("{id} ({e})")))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::ReleaseUnconfirmed,
        format!(
            "KILL of target connection(s) {} not confirmed: a replay statement may still \
             run there; check the target (SHOW PROCESSLIST), then restart serve",
            bad.join(", ")
        ),
    ))
}
