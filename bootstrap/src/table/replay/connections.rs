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
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use ledger::apply;
use mysql_async::{Conn, Opts};

/// The target connections of one replay run: `streams` of them, opened together, one
/// per key partition ([`ledger::parts`]). Kept open across batches; dropped as a whole
/// after any failure (each KILL-confirmed first) and reopened by the next batch.
pub(super) struct Conns<'a> {
    opts: &'a Opts,
    /// Connections opened together (one per key partition, at least 1).
    pub(super) streams: usize,
    conns: Vec<Conn>,
}

impl<'a> Conns<'a> {
    pub(super) fn new(opts: &'a Opts, streams: usize) -> Conns<'a> {
        Conns {
            opts,
            streams: streams.clamp(1, ledger::parts::MAX_PARTS),
            conns: Vec::new(),
        }
    }

    pub(super) async fn get(&mut self) -> Result<&mut [Conn]> {
        while self.conns.len() < self.streams {
            match apply::connect(self.opts).await {
                Ok(c) => self.conns.push(c),
                Err(e) => {
                    // Only session settings were sent on them, all answered.
                    self.close().await;
                    return Err(e);
                }
            }
        }
        Ok(&mut self.conns)
    }

    pub(super) async fn first(&mut self) -> Result<&mut Conn> {
        self.get()
            .await?
            .first_mut()
            .ok_or_else(|| Error::transient("target connection unavailable"))
    }

    fn ids(&self) -> Vec<u32> {
        self.conns.iter().map(|c| c.id()).collect()
    }

    pub(super) async fn close(&mut self) {
        for c in self.conns.drain(..) {
            let _ = c.disconnect().await;
        }
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
            let r = crate::io::bounded::kill_confirmed(self.opts, "target", id).await;
            out.push((id, r));
        }
        drop(dead);
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
