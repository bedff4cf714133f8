//! L's tail per stream, watched once per process for every table following it (DESIGN
//! §17: a STREAMING table costs nothing while idle).
//!
//! Before this, each following table polled D's row every 20 ms while waiting, and woke
//! at once whenever the stream's tail was past the table's own last record, which in a
//! stream shared with other tables is always: every idle table re-read L in a loop
//! (measured: 120 idle tables, 64 % of a core and ~3 600 state-store queries/s). Now one
//! task per stream reads the tail (`capture_position.tail_seq`) every
//! [`kernel::log::WAIT_POLL`] and publishes it; a table waits until the tail moves past
//! the value it noted BEFORE its last read of L came back empty.
//!
//! # Why no change is missed
//! A table notes the published tail `m` before it reads L. The value was read from D
//! before the note, and D's tail moves in the same state-store transaction as the L
//! records it counts, so every record with a seq <= `m` was committed before the read
//! started and the read (which has no upper bound but the fence) saw it. A record the
//! read did not see has a seq > `m`; its commit moves the tail past `m`, which the poller
//! publishes, which wakes the table. Should the poller fail or stall, the wait still ends
//! after its bound and the table reads L again: at worst late, never wrong. A stale
//! published value only wakes a table early (one more read).
use kernel::error::from_sqlx;
use kernel::log::{LSeq, WAIT_POLL};
use kernel::Result;
use sqlx::mysql::MySqlPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How long a table waits on the watch before it reads L again anyway.
pub const WATCH_BOUND: Duration = Duration::from_secs(30);
/// How long the poller waits after a failed read of the tail.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The watched tails of one process, by stream (cheap to clone: shared).
#[derive(Clone, Default)]
pub struct Tails {
    streams: Arc<Mutex<HashMap<String, watch::Receiver<LSeq>>>>,
}

impl std::fmt::Debug for Tails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.streams.lock().map_or(0, |m| m.len());
        write!(f, "Tails({n} streams watched)")
    }
}

/// D's tail seq of `stream` (ZERO before the first record).
async fn read_tail(pool: &MySqlPool, stream: &str) -> Result<LSeq> {
    let v: Option<LSeq> =
        sqlx::query_scalar("SELECT tail_seq FROM capture_position WHERE stream = ?")
            .bind(stream)
            .fetch_optional(pool)
            .await
            .map_err(|e| from_sqlx("reading the change log's tail", &e))?;
    Ok(v.unwrap_or(LSeq::ZERO))
}

impl Tails {
    /// A receiver of `stream`'s tail, starting its poller if none runs.
    async fn subscribe(&self, pool: &MySqlPool, stream: &str) -> Result<watch::Receiver<LSeq>> {
        if let Some(rx) = self.live(stream) {
            return Ok(rx);
        }
        let first = read_tail(pool, stream).await?;
        let mut map = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rx) = map.get(stream).filter(|rx| rx.has_changed().is_ok()) {
            return Ok(rx.clone());
        }
        let (tx, rx) = watch::channel(first);
        map.insert(stream.to_string(), rx.clone());
        drop(map);
        tokio::spawn(poll(self.clone(), pool.clone(), stream.to_string(), tx));
        Ok(rx)
    }

    fn live(&self, stream: &str) -> Option<watch::Receiver<LSeq>> {
        let map = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        map.get(stream)
            .filter(|rx| rx.has_changed().is_ok())
            .cloned()
    }

    /// The tail as last published: note it before a read of L.
    pub async fn mark(&self, pool: &MySqlPool, stream: &str) -> Result<LSeq> {
        Ok(*self.subscribe(pool, stream).await?.borrow())
    }

    /// Waits until the tail is past `mark`, `bound` passed or `cancel` fired; false only
    /// when the whole bound passed without the tail moving (the caller then checks the
    /// stream's stop, `kernel::log::stop`). When the tail cannot be watched (the state store fails), waits
    /// [`RETRY_AFTER`] at most: the caller reads L again, and that read reports the
    /// failure.
    pub async fn wait_past(
        &self,
        pool: &MySqlPool,
        stream: &str,
        mark: LSeq,
        bound: Duration,
        cancel: &CancellationToken,
    ) -> bool {
        let mut rx = match self.subscribe(pool, stream).await {
            Ok(rx) => rx,
            Err(e) => {
                tracing::debug!(%stream, error = %e, "cannot watch the change log's tail");
                tokio::select! {
                    _ = tokio::time::sleep(bound.min(RETRY_AFTER)) => {}
                    _ = cancel.cancelled() => {}
                }
                return true;
            }
        };
        let moved = rx.wait_for(|t| *t > mark);
        tokio::select! {
            r = moved => r.is_ok(),
            _ = tokio::time::sleep(bound) => false,
            _ = cancel.cancelled() => true,
        }
    }

    /// True when the stream's poller should stop: only the map's receiver is left. Checked
    /// under the map's lock, so no subscriber can take a receiver of a stopping poller.
    fn retire_if_unused(&self, stream: &str, tx: &watch::Sender<LSeq>) -> bool {
        let mut map = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if tx.receiver_count() > 1 {
            return false;
        }
        map.remove(stream);
        true
    }
}

/// The poller of one stream: publishes each newer tail, ends when no table waits on it.
async fn poll(tails: Tails, pool: MySqlPool, stream: String, tx: watch::Sender<LSeq>) {
    loop {
        tokio::time::sleep(WAIT_POLL).await;
        if tails.retire_if_unused(&stream, &tx) {
            return;
        }
        match read_tail(&pool, &stream).await {
            Ok(t) => {
                tx.send_if_modified(|cur| {
                    let newer = t > *cur;
                    if newer {
                        *cur = t;
                    }
                    newer
                });
            }
            Err(e) => {
                tracing::debug!(%stream, error = %e, "cannot read the change log's tail; tables wait out their bound");
                tokio::time::sleep(RETRY_AFTER).await;
            }
        }
    }
}
