//! Storing what a session reads: entries wait in a bounded batch, a writer task appends
//! batches in order (at most two in flight), and records L already holds beyond D are
//! checked against their stored digests instead of stored twice. The writer stops at its
//! first failure and the session ends, so nothing read after a write of unknown outcome
//! is ever stored (the module doc of [`crate::capture`], points 3 and 4).

use super::{Ctx, ReaderConfig};
use crate::error::{DefiniteCode, Error, Result};
use crate::failpoint;
use crate::log::{self, Entry, LogRecord, Position};
use sqlx::mysql::MySqlPool;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

/// Verification of records already in L beyond D (an open group's chunks).
pub(super) struct Replay {
    pub(super) next_seq: log::LSeq,
    pub(super) upto: log::LSeq,
}

impl Replay {
    /// Returns true when `rec` is already stored (and matches), false when it is new.
    pub(super) async fn check(
        &mut self,
        pool: &MySqlPool,
        stream: &str,
        rec: &LogRecord,
    ) -> Result<bool> {
        if self.next_seq > self.upto {
            return Ok(false);
        }
        let seq = self.next_seq;
        let stored = log::read_range(pool, stream, log::LSeq(seq.0 - 1), seq, 1).await?;
        let Some(s) = stored.first() else {
            return Err(Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!("the change log of stream `{stream}` has no record {seq} although the capture position names it"),
            ));
        };
        if s.body_digest != rec.digest() {
            return Err(Error::definite(
                DefiniteCode::EvidenceConflict,
                format!(
                    "re-reading the group that starts at {} regenerated chunk {} with another \
                     digest than change log record {seq} holds: the source history differs from what \
                     was captured",
                    rec.start, rec.chunk
                ),
            ));
        }
        self.next_seq = self.next_seq.next();
        Ok(true)
    }
}

/// Stores batches in order on its own task, so reading and decoding go on while a batch
/// commits. It stops at its first failure; the session then ends and the next one starts
/// from the stored D, so nothing read after a write of unknown outcome is ever stored.
pub(super) struct Writer {
    fence: Option<u64>,
    tx: tokio::sync::mpsc::Sender<Vec<Entry>>,
    handle: tokio::task::JoinHandle<Result<Position>>,
}

impl Writer {
    pub(super) fn start(
        pool: MySqlPool,
        mut d: Position,
        progressed: Arc<AtomicBool>,
        fence: Option<u64>,
    ) -> Writer {
        // Two batches in flight at most: memory stays bounded by the batch size.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Entry>>(2);
        let handle = tokio::spawn(async move {
            while let Some(batch) = rx.recv().await {
                d = log::append_fenced(&pool, &d, &batch, fence).await?;
                progressed.store(true, Ordering::Relaxed);
                failpoint::hit("capture.after_store");
            }
            Ok(d)
        });
        Writer { fence, tx, handle }
    }

    /// Queues a batch; on a dead writer returns its error.
    pub(super) async fn send(self, batch: Vec<Entry>) -> std::result::Result<Writer, Error> {
        if batch.is_empty() {
            return Ok(self);
        }
        if self.tx.send(batch).await.is_ok() {
            return Ok(self);
        }
        Err(self.finish().await.err().unwrap_or_else(|| {
            Error::transient("the change log writer stopped; resuming from the capture position")
        }))
    }

    /// Waits until everything queued is stored and starts a new writer at the stored D
    /// (so that what was queued is visible to reads of the state store).
    pub(super) async fn sync(
        self,
        pool: &MySqlPool,
        progressed: &Arc<AtomicBool>,
    ) -> Result<Writer> {
        let fence = self.fence;
        let d = self.finish().await?;
        Ok(Writer::start(pool.clone(), d, progressed.clone(), fence))
    }

    /// Ends the session on `e`: waits for the batches already queued (so no writer outlives
    /// its session) and returns `e`, or the writer's own failure when it is definite.
    pub(super) async fn abandon(self, e: Error) -> Error {
        match self.finish().await {
            Err(w @ Error::Definite(_)) => w,
            _ => e,
        }
    }

    /// Waits until every queued batch is stored; returns the stored D.
    pub(super) async fn finish(self) -> Result<Position> {
        drop(self.tx);
        match self.handle.await {
            Ok(r) => r,
            Err(e) => Err(Error::transient(format!(
                "change log writer task failed: {e}"
            ))),
        }
    }
}

/// Entries read but not yet queued to the writer.
#[derive(Default)]
pub(super) struct Pending {
    pub(super) items: Vec<Entry>,
    pub(super) changes: usize,
    pub(super) flush_at: Option<Instant>,
}

impl Pending {
    pub(super) fn push(&mut self, e: Entry, cfg: &ReaderConfig) {
        self.changes += e.record.size();
        self.items.push(e);
        if self.flush_at.is_none() {
            self.flush_at = Some(Instant::now() + cfg.flush_interval);
        }
    }

    pub(super) fn take(&mut self) -> Vec<Entry> {
        self.changes = 0;
        self.flush_at = None;
        std::mem::take(&mut self.items)
    }

    pub(super) fn full(&self, cfg: &ReaderConfig) -> bool {
        self.items.len() >= cfg.batch_records.max(1) || self.changes >= cfg.batch_changes
    }
}

/// Queues `entry` unless L already holds it (an open group re-read after a restart).
pub(super) async fn queue(
    ctx: &Ctx<'_>,
    replay: &mut Replay,
    batch: &mut Pending,
    entry: Entry,
) -> Result<()> {
    failpoint::hit("capture.after_read_before_store");
    if !replay.check(ctx.pool, ctx.stream, &entry.record).await? {
        batch.push(entry, ctx.cfg);
    }
    Ok(())
}
