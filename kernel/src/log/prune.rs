//! Deleting L records below a horizon (retention, DESIGN §17), in bounded batches.
//!
//! # Why it is safe
//!
//! * The caller computes the horizon as the minimum of every cursor or marker that still
//!   reads L (`bootstrap::table::retention::horizon`); this module additionally never
//!   deletes D's record or anything after it (`restart_seq`, `tail_seq` of
//!   `capture_position`, read in the same transaction), nor a record of an XA hold, so
//!   the reader's restart and its compare-and-set on L's tail are untouched. It stops at the
//!   first chunk of the group the horizon falls in, so no group is ever kept in part.
//! * One batch is one state-store transaction: the rows of `capture_log` and
//!   `capture_log_table` with seq in `[from, last]` are deleted and `capture_log_horizon`
//!   moves to `last + 1` with the chain digest of record `last`. The horizon therefore
//!   never disagrees with what is deleted: after a kill at any instant either the batch and
//!   its horizon are both there or neither is. A record at or above the horizon was never
//!   deleted, so a reader that reads the horizon AFTER reading L can drop what it read below
//!   it and still see a contiguous chain from the horizon on (the first kept record's
//!   `prev_chain` equals `below_chain`).
//! * Only row locks on existing rows are taken (the stream's `capture_position` and
//!   horizon rows, the deleted rows by primary key range): no GET_LOCK, no table lock; the
//!   horizon row is created with an upsert on its primary key.
use super::{st, LSeq};
use crate::error::Result;
use crate::ids::Digest;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// Where a stream's L starts after GC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Horizon {
    /// Every record with a smaller seq is deleted.
    pub below: LSeq,
    /// The chain digest of record `below - 1` (what record `below` links to).
    pub below_chain: Digest,
    /// Records deleted so far.
    pub deleted: u64,
}

/// The stream's horizon (None: nothing was ever deleted).
pub async fn horizon(pool: &MySqlPool, stream: &str) -> Result<Option<Horizon>> {
    let r = sqlx::query(
        "SELECT below_seq, below_chain, deleted FROM capture_log_horizon WHERE stream = ?",
    )
    .bind(stream)
    .fetch_optional(pool)
    .await
    .map_err(st("reading the change log's horizon"))?;
    r.map(|r| {
        Ok(Horizon {
            below: r
                .try_get("below_seq")
                .map_err(st("reading the change log's horizon"))?,
            below_chain: super::digest_col(&r, "below_chain")?,
            deleted: r
                .try_get("deleted")
                .map_err(st("reading the change log's horizon"))?,
        })
    })
    .transpose()
}

/// Deletes at most `batch` records of `stream` below `want` (and below D's record and
/// every XA hold) in one transaction; returns how many were deleted (0: nothing left).
pub async fn prune_batch(pool: &MySqlPool, stream: &str, want: LSeq, batch: u32) -> Result<u64> {
    let what = format!("deleting change log records of stream `{stream}` below {want}");
    let mut tx = pool.begin().await.map_err(st(&what))?;
    let d = sqlx::query(
        "SELECT restart_seq, tail_seq FROM capture_position WHERE stream = ? FOR UPDATE",
    )
    .bind(stream)
    .fetch_optional(&mut *tx)
    .await
    .map_err(st(&what))?;
    let Some(d) = d else { return Ok(0) };
    let restart: LSeq = d.try_get("restart_seq").map_err(st(&what))?;
    let tail: LSeq = d.try_get("tail_seq").map_err(st(&what))?;
    let held: Option<LSeq> =
        sqlx::query_scalar("SELECT MIN(first_seq) FROM capture_xa_hold WHERE stream = ?")
            .bind(stream)
            .fetch_one(&mut *tx)
            .await
            .map_err(st(&what))?;
    let mut upto = want.min(restart).min(tail);
    if let Some(h) = held {
        upto = upto.min(h);
    }
    // Never split a group: the horizon stops at the first chunk of the group it falls in.
    let chunk: Option<u32> =
        sqlx::query_scalar("SELECT chunk_no FROM capture_log WHERE stream = ? AND seq = ?")
            .bind(stream)
            .bind(upto)
            .fetch_optional(&mut *tx)
            .await
            .map_err(st(&what))?;
    upto = LSeq(upto.0.saturating_sub(u64::from(chunk.unwrap_or(0))));
    let from: LSeq =
        sqlx::query_scalar("SELECT below_seq FROM capture_log_horizon WHERE stream = ? FOR UPDATE")
            .bind(stream)
            .fetch_optional(&mut *tx)
            .await
            .map_err(st(&what))?
            .unwrap_or(LSeq(1));
    let last = sqlx::query(
        "SELECT seq, chain FROM capture_log WHERE stream = ? AND seq >= ? AND seq < ? \
         ORDER BY seq LIMIT ?",
    )
    .bind(stream)
    .bind(from)
    .bind(upto)
    .bind(batch.max(1))
    .fetch_all(&mut *tx)
    .await
    .map_err(st(&what))?;
    let Some(last) = last.last() else {
        return Ok(0);
    };
    let last_seq: LSeq = last.try_get("seq").map_err(st(&what))?;
    let chain = super::digest_col(last, "chain")?;
    let n = sqlx::query("DELETE FROM capture_log WHERE stream = ? AND seq >= ? AND seq <= ?")
        .bind(stream)
        .bind(from)
        .bind(last_seq)
        .execute(&mut *tx)
        .await
        .map_err(st(&what))?
        .rows_affected();
    sqlx::query("DELETE FROM capture_log_table WHERE stream = ? AND seq >= ? AND seq <= ?")
        .bind(stream)
        .bind(from)
        .bind(last_seq)
        .execute(&mut *tx)
        .await
        .map_err(st(&what))?;
    sqlx::query(
        "INSERT INTO capture_log_horizon (stream, below_seq, below_chain, deleted) \
         VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE below_seq = VALUES(below_seq), \
         below_chain = VALUES(below_chain), deleted = deleted + VALUES(deleted)",
    )
    .bind(stream)
    .bind(last_seq.next())
    .bind(&chain.0[..])
    .bind(n)
    .execute(&mut *tx)
    .await
    .map_err(st(&what))?;
    tx.commit().await.map_err(st(&what))?;
    Ok(n)
}
