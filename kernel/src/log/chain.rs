//! The hash chain over L and its checks (I7): every record names the chain digest of
//! the one before it, so a hole, a duplicate, a tampered body or a D that does not name
//! L's tail is detected on read and is definite.

use super::{corrupt, digest_col, load_position, read_range, st, LSeq, LogRecord, Position};
use crate::error::Result;
use crate::ids::Digest;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// The hash chain step: blake3("backfill-L-v1" | prev | seq LE | body digest).
pub fn chain_next(prev: &Digest, seq: LSeq, body: &Digest) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(b"backfill-L-v1");
    h.update(&prev.0);
    h.update(&seq.0.to_le_bytes());
    h.update(&body.0);
    Digest(*h.finalize().as_bytes())
}

/// The chain digest before the first record.
pub const GENESIS: Digest = Digest([0; 32]);

/// L's tail: the last record's seq and chain digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    pub seq: LSeq,
    pub chain: Digest,
}

/// A stored record with its chain fields, verified on read.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRecord {
    pub seq: LSeq,
    pub prev_chain: Digest,
    pub chain: Digest,
    pub body_digest: Digest,
    pub record: LogRecord,
}

pub(super) fn check_links(recs: &[StoredRecord]) -> Result<()> {
    for w in recs.windows(2) {
        if w[1].seq != w[0].seq.next() || w[1].prev_chain != w[0].chain {
            return Err(corrupt(format!(
                "change log hash chain broken between records {} and {}",
                w[0].seq, w[1].seq
            )));
        }
    }
    Ok(())
}

/// Checks that D names L's tail: the record at D's tail seq carries D's chain digest and no
/// record follows it (I7). Cheap: two indexed reads; run on every reader start.
pub async fn check_tail(pool: &MySqlPool, d: &Position) -> Result<()> {
    let rows = sqlx::query(
        "SELECT seq, chain FROM capture_log WHERE stream = ? AND seq >= ? ORDER BY seq LIMIT 2",
    )
    .bind(&d.stream)
    .bind(d.tail.seq)
    .fetch_all(pool)
    .await
    .map_err(st("reading the change log's tail"))?;
    let found: Vec<(LSeq, Digest)> = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get("seq")
                    .map_err(st("reading the change log's tail"))?,
                digest_col(r, "chain")?,
            ))
        })
        .collect::<Result<_>>()?;
    let ok = match (d.tail.seq, found.as_slice()) {
        (LSeq::ZERO, []) => true,
        (seq, [(s, c)]) => *s == seq && *c == d.tail.chain,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(corrupt(format!(
        "the capture position of stream `{}` names tail seq {} but the change log's records there are {:?}: the change log and the capture position disagree",
        d.stream,
        d.tail.seq,
        found.iter().map(|(s, _)| s.0).collect::<Vec<_>>()
    )))
}

/// Verifies the whole chain of `stream` from seq 1 to D's tail, reading in pages; returns
/// the number of records checked. Any hole, tamper or D/L disagreement is definite (I7).
pub async fn verify_chain(pool: &MySqlPool, stream: &str) -> Result<u64> {
    let Some(d) = load_position(pool, stream).await? else {
        return Ok(0);
    };
    let mut prev = GENESIS;
    let mut after = LSeq::ZERO;
    loop {
        let page = read_range(pool, stream, after, LSeq::MAX, 500).await?;
        let Some(last) = page.last() else { break };
        if page[0].seq != after.next() || page[0].prev_chain != prev {
            return Err(corrupt(format!(
                "change log hash chain broken before record {}",
                page[0].seq
            )));
        }
        prev = last.chain;
        after = last.seq;
    }
    if after != d.tail.seq || prev != d.tail.chain {
        return Err(corrupt(format!(
            "the capture position of stream `{stream}` names tail {} but the change log ends at {after}",
            d.tail.seq
        )));
    }
    // Seqs start at 1 without holes (checked above), so the tail's seq is the count.
    Ok(after.0)
}
