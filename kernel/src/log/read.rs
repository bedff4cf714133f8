//! Verified reads of L: every record is checked against its body digest and chained to
//! the one before it, so a reader never sees a record L does not durably hold.

use super::body::load_body;
use super::chain::check_links;
use super::{chain_next, corrupt, digest_col, load_position, st, LSeq, LogRecord, StoredRecord};

use crate::error::{DefiniteCode, Error, Result};
use crate::ids::Digest;
use crate::position::BinlogPos;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

fn decode_row(row: &sqlx::mysql::MySqlRow) -> Result<StoredRecord> {
    let seq: LSeq = row.try_get("seq").map_err(st("reading the change log"))?;
    let stored: Vec<u8> = row.try_get("body").map_err(st("reading the change log"))?;
    let codec: u8 = row
        .try_get("body_codec")
        .map_err(st("reading the change log"))?;
    let body =
        load_body(codec, stored).map_err(|e| corrupt(format!("change log record {seq}: {e}")))?;
    let body_digest = digest_col(row, "body_digest")?;
    let prev_chain = digest_col(row, "prev_chain")?;
    let chain = digest_col(row, "chain")?;
    if Digest::of(&body) != body_digest {
        return Err(corrupt(format!(
            "change log record {seq}: body does not hash to its digest"
        )));
    }
    if chain_next(&prev_chain, seq, &body_digest) != chain {
        return Err(corrupt(format!(
            "change log record {seq}: chain digest does not verify"
        )));
    }
    let record =
        LogRecord::decode(&body).map_err(|e| corrupt(format!("change log record {seq}: {e}")))?;
    Ok(StoredRecord {
        seq,
        prev_chain,
        chain,
        body_digest,
        record,
    })
}

const SELECT_REC: &str =
    "SELECT l.seq, l.body, l.body_codec, l.body_digest, l.prev_chain, l.chain FROM capture_log l";

/// Records with `after < seq <= upto`, at most `limit`, in order; each verified against
/// its digest and chained to the one before it (the first is chained to `after`'s chain
/// by the caller through [`StoredRecord::prev_chain`]).
pub async fn read_range(
    pool: &MySqlPool,
    stream: &str,
    after: LSeq,
    upto: LSeq,
    limit: u32,
) -> Result<Vec<StoredRecord>> {
    let sql = format!(
        "{SELECT_REC} WHERE l.stream = ? AND l.seq > ? AND l.seq <= ? ORDER BY l.seq LIMIT ?"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(stream)
        .bind(after)
        .bind(upto)
        .bind(limit)
        .fetch_all(pool)
        .await
        .map_err(st("reading the change log"))?;
    let out = rows.iter().map(decode_row).collect::<Result<Vec<_>>>()?;
    check_links(&out)?;
    Ok(out)
}

/// The chain fields of one L record, read without its body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainLink {
    pub seq: LSeq,
    pub prev_chain: Digest,
    pub chain: Digest,
    pub body_digest: Digest,
}

impl ChainLink {
    /// The record's own chain step: its chain digest is the step from its predecessor's
    /// over its seq and body digest. (Whether the body hashes to `body_digest` is checked
    /// by every reader of the body.)
    pub fn step_verifies(&self) -> bool {
        chain_next(&self.prev_chain, self.seq, &self.body_digest) == self.chain
    }
}

/// The chain fields of the records with `after < seq <= upto`, at most `limit`, in order,
/// as stored: no body is read, and nothing is checked here (a hole or a broken step is
/// the caller's finding, so one bad record does not hide the ones after it).
pub async fn read_links(
    pool: &MySqlPool,
    stream: &str,
    after: LSeq,
    upto: LSeq,
    limit: u32,
) -> Result<Vec<ChainLink>> {
    let rows = sqlx::query(
        "SELECT seq, body_digest, prev_chain, chain FROM capture_log WHERE stream = ? \
         AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
    )
    .bind(stream)
    .bind(after)
    .bind(upto)
    .bind(limit)
    .fetch_all(pool)
    .await
    .map_err(st("reading the change log's chain"))?;
    rows.iter()
        .map(|row| {
            Ok(ChainLink {
                seq: row
                    .try_get("seq")
                    .map_err(st("reading the change log's chain"))?,
                prev_chain: digest_col(row, "prev_chain")?,
                chain: digest_col(row, "chain")?,
                body_digest: digest_col(row, "body_digest")?,
            })
        })
        .collect()
}

/// The seqs of the records L's table index names for `schema`.`table` with
/// `after < seq <= upto`, newest first, at most `limit` (no body is read).
pub async fn table_seqs_desc(
    pool: &MySqlPool,
    stream: &str,
    schema: &str,
    table: &str,
    after: LSeq,
    upto: LSeq,
    limit: u32,
) -> Result<Vec<LSeq>> {
    sqlx::query_scalar(
        "SELECT seq FROM capture_log_table WHERE stream = ? AND schema_name = ? \
         AND table_name = ? AND seq > ? AND seq <= ? ORDER BY seq DESC LIMIT ?",
    )
    .bind(stream)
    .bind(schema)
    .bind(table)
    .bind(after)
    .bind(upto)
    .bind(limit)
    .fetch_all(pool)
    .await
    .map_err(st("reading the change log's table index"))
}

/// Records touching `schema`.`table` with `after < seq <= upto`, at most `limit`.
pub async fn table_records(
    pool: &MySqlPool,
    stream: &str,
    schema: &str,
    table: &str,
    after: LSeq,
    upto: LSeq,
    limit: u32,
) -> Result<Vec<StoredRecord>> {
    let sql = format!(
        "{SELECT_REC} JOIN capture_log_table t ON t.stream = l.stream AND t.seq = l.seq \
         WHERE t.stream = ? AND t.schema_name = ? AND t.table_name = ? AND t.seq > ? \
         AND t.seq <= ? ORDER BY t.seq LIMIT ?"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(stream)
        .bind(schema)
        .bind(table)
        .bind(after)
        .bind(upto)
        .bind(limit)
        .fetch_all(pool)
        .await
        .map_err(st("reading the change log by table"))?;
    rows.iter().map(decode_row).collect()
}

/// The seq of the last record of `stream` that ends at or before `pos` ([`LSeq::ZERO`] when none): turns
/// a binlog position (e.g. a read view's `binlog_snapshot_*`) into bounds for
/// [`table_records`]. Fails if L does not reach `pos` yet (use [`super::wait_for_position`]).
pub async fn seq_at_or_before(pool: &MySqlPool, stream: &str, pos: &BinlogPos) -> Result<LSeq> {
    let d = load_position(pool, stream).await?.ok_or_else(|| {
        Error::transient(format!("stream `{stream}` has no capture position yet"))
    })?;
    let reached = d
        .restart
        .pos
        .try_cmp(pos)
        .map_err(|e| Error::definite(DefiniteCode::LineageChanged, e.to_string()))?;
    if reached == std::cmp::Ordering::Less {
        return Err(Error::transient(format!(
            "the change log of stream `{stream}` has not reached {pos} yet (the capture position is {})",
            d.restart.pos
        )));
    }
    // File names of one series have equal length (zero-padded sequence), so they order
    // as strings; LENGTH keeps a 7-digit sequence after a 6-digit one. Only records of
    // `pos`'s lineage epoch compare by name (they share its `N/` prefix); every record
    // of an earlier epoch is before them in L.
    let epoch = pos.epoch();
    let same_epoch = epoch_predicate(epoch);
    let sql = format!(
        "SELECT MAX(seq) FROM capture_log WHERE stream = ? AND end_file IS NOT NULL AND \
         {same_epoch} AND (LENGTH(end_file) < LENGTH(?) OR (LENGTH(end_file) = LENGTH(?) AND \
         (end_file < ? OR (end_file = ? AND end_pos <= ?))))"
    );
    let seq: Option<LSeq> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(stream)
        .bind(&pos.file)
        .bind(&pos.file)
        .bind(&pos.file)
        .bind(&pos.file)
        .bind(pos.pos)
        .fetch_one(pool)
        .await
        .map_err(st("locating a position in the change log"))?;
    if let Some(seq) = seq {
        return Ok(seq);
    }
    if epoch == 0 {
        return Ok(LSeq::ZERO);
    }
    // Before the first record of its epoch (the switch record that opened it).
    let sql = format!("SELECT MIN(seq) FROM capture_log WHERE stream = ? AND {same_epoch}");
    let first: Option<LSeq> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(stream)
        .fetch_one(pool)
        .await
        .map_err(st("locating a position in the change log"))?;
    Ok(first
        .map(|s| LSeq(s.0.saturating_sub(1)))
        .unwrap_or(LSeq::ZERO))
}

/// SQL over `end_file` selecting the records of lineage `epoch` (`N/` prefixed names; no
/// prefix for epoch 0). Built from a number only.
fn epoch_predicate(epoch: u32) -> String {
    match epoch {
        0 => "end_file NOT LIKE '%/%'".to_string(),
        n => format!("end_file LIKE '{n}/%'"),
    }
}
