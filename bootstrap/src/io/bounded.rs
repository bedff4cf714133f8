//! Statements with a client deadline, and confirmed connection release (DESIGN §8).
//!
//! Why it is safe: a timed-out future does not cancel SQL already sent. When a deadline
//! passes, the caller drops the future and turns its permit into a hold (release unknown,
//! visible in the admission snapshot and in status); [`kill_confirmed`] then KILLs the
//! connection by its server id from a NEW connection and returns only once
//! `information_schema.PROCESSLIST` no longer lists that id: only then has the statement
//! ended, and only then may the caller confirm the hold. If the server cannot show it
//! gone within [`CONFIRM_TIMEOUT`], the hold stays (the capacity stays lost, which is the
//! truth) and the caller gets a definite `release_unconfirmed`, never a retry that would
//! run beside the old statement.
//!
//! A close error after a success is reported, never masked ([`close_confirmed`]): the
//! connection is KILLed and confirmed gone, and if that fails the error names both the
//! earlier success and the close failure.
use crate::io::pool::{ConnPool, Pooled, Use};
use kernel::error::{from_mysql, DefiniteCode};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use std::time::Duration;

/// Gives `permit` back once `r`, the work done under it, has ended: confirmed, unless `r`
/// says a statement of it may still run (`release_unconfirmed`): then it stays a hold
/// (release unknown) with that reason.
pub fn settle<T>(permit: admission::Permit, r: &Result<T>) {
    match r {
        Err(Error::Definite(d)) if d.code == DefiniteCode::ReleaseUnconfirmed => {
            permit.mark_release_unknown(d.message.clone());
        }
        _ => permit.release_confirmed(),
    }
}

/// How long the server may take to show a KILLed connection gone.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// Client deadlines of one job's operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlines {
    /// One target write (a FINAL page's transaction, from its first statement to COMMIT).
    pub target_write: Duration,
}

impl Default for Deadlines {
    fn default() -> Deadlines {
        Deadlines {
            target_write: Duration::from_secs(300),
        }
    }
}

/// Ends a use whose statement may still run on the server (its client deadline passed):
/// the connection is never reused; it is KILLed from a kill slot and confirmed gone
/// before its slot is given back, else the slot is lost (the count on the server stays
/// bounded, see [`crate::io::pool::Slot::lose`]).
pub async fn abandon(conn: Pooled, what: &str) {
    let (id, slot, pool) = conn.detach();
    match kill_confirmed(&pool, what, id).await {
        Ok(()) => drop(slot),
        Err(e) => {
            tracing::warn!(id, error = %e, "an abandoned {what} connection was not confirmed gone; its slot stays taken");
            slot.lose();
        }
    }
}

/// KILLs connection `id` on the server of `pool` from a new connection (a kill slot of
/// the pool, never held while waiting for another) and waits until PROCESSLIST no longer
/// lists it. `what` names the server ("target", "source").
pub async fn kill_confirmed(pool: &ConnPool, what: &str, id: u32) -> Result<()> {
    crate::seams::kills::kill_gate().await;
    if crate::seams::kills::injected_failure() {
        return Err(Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!("{what} connection {id}: KILL not confirmed (injected by a test)"),
        ));
    }
    let confirm = async {
        let mut c = pool.connect(Use::Kill, "(confirm release)").await?;
        let r = kill_and_wait(&mut c, what, id).await;
        c.close().await;
        r
    };
    // Every step is bounded: a server that does not answer leaves the release unknown.
    let limit = CONFIRM_TIMEOUT * 2 + crate::io::connect::CONNECT_TIMEOUT;
    let r = tokio::time::timeout(limit, confirm)
        .await
        .unwrap_or_else(|_| Err(Error::transient(format!("no answer within {limit:?}"))));
    // Whatever failed, the statement may still run: the release is not confirmed.
    r.map_err(|e| match e {
        Error::Definite(d) if d.code == DefiniteCode::ReleaseUnconfirmed => Error::Definite(d),
        e => Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!("KILL of {what} connection {id} could not be confirmed: {e}"),
        ),
    })
}

/// KILLs connection `id` from `c` and waits, bounded by [`CONFIRM_TIMEOUT`], until the
/// server no longer lists it; still listed then is `release_unconfirmed`.
pub async fn kill_and_wait(c: &mut Conn, what: &str, id: u32) -> Result<()> {
    // An error here is fine when the thread is already gone (1094, unknown thread); the
    // PROCESSLIST check below is what confirms, whatever KILL answered.
    if let Err(e) = c.query_drop(format!("KILL CONNECTION {id}")).await {
        tracing::debug!(id, error = %e, "KILL answered with an error");
    }
    let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
    loop {
        let n: Option<u64> = c
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?",
                (id,),
            )
            .await
            .map_err(|e| from_mysql(&format!("confirming {what} connection {id} gone"), &e))?;
        if n == Some(0) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Error::definite(
                DefiniteCode::ReleaseUnconfirmed,
                format!(
                    "{what} connection {id} is still listed in PROCESSLIST {CONFIRM_TIMEOUT:?} \
                     after KILL: its statement may still run; check the {what} server \
                     (SHOW PROCESSLIST), then restart serve"
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Closes `conn` (server id `id`). A clean close proves the release only when every
/// statement sent was `answered`; otherwise (a failed COMMIT, a lost connection) the
/// server thread may live on, so the connection is KILLed and confirmed gone. A failed
/// close is followed by the same KILL and confirmation; only if that fails is an error
/// returned, naming the close failure (a success before it does not mask it).
pub async fn close_confirmed(
    pool: &ConnPool,
    what: &str,
    conn: Conn,
    id: u32,
    answered: bool,
) -> Result<()> {
    if !answered {
        drop(conn);
        return kill_confirmed(pool, what, id).await;
    }
    let close = match tokio::time::timeout(CONFIRM_TIMEOUT, conn.disconnect()).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(e)) => kernel::redact::redact_text(&e.to_string()),
        Err(_) => format!("no answer to the close within {CONFIRM_TIMEOUT:?}"),
    };
    tracing::warn!(id, error = %close, "closing the {what} connection failed; KILLing it");
    kill_confirmed(pool, what, id).await.map_err(|e| {
        Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!("closing {what} connection {id} failed ({close}) and: {e}"),
        )
    })
}
