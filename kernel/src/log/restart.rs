//! D, the reader's restart position: always a group end, created once per stream and
//! afterwards moved only by [`super::append`] in the transaction that stores the records
//! it covers.

use super::{corrupt, digest_col, gtid_text, parse_gtid, st, LSeq, Tail, GENESIS};
use crate::change::GroupEnd;
use crate::codec::{self};
use crate::error::{Error, Result};
use crate::position::{BinlogPos, Lineage};
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// D plus what the reader needs to resume.
#[derive(Clone, Debug, PartialEq)]
pub struct Position {
    pub stream: String,
    pub lineage: Lineage,
    /// Where the next read starts: always a group end.
    pub restart: GroupEnd,
    /// The L seq of the record that ends at `restart` ([`LSeq::ZERO`] when none).
    pub restart_seq: LSeq,
    pub tail: Tail,
    pub chunk_changes: u32,
}

impl Position {
    /// Chunks stored after the restart position (an open group): the re-read must
    /// regenerate exactly these.
    pub fn open_chunks(&self) -> u64 {
        self.tail.seq.0 - self.restart_seq.0
    }
}

/// Reads D of `stream`, if the stream exists.
pub async fn load_position(pool: &MySqlPool, stream: &str) -> Result<Option<Position>> {
    let row = sqlx::query(
        "SELECT lineage, restart_file, restart_pos, restart_gtid, restart_seq, tail_seq, \
         tail_chain, chunk_changes FROM capture_position WHERE stream = ?",
    )
    .bind(stream)
    .fetch_optional(pool)
    .await
    .map_err(st("reading the capture position"))?;
    let Some(row) = row else { return Ok(None) };
    let lineage_bytes: Vec<u8> = row
        .try_get("lineage")
        .map_err(st("reading the capture position"))?;
    let lineage = codec::decode::<Lineage>(&lineage_bytes)
        .map_err(|e| corrupt(format!("the capture position of stream `{stream}`: {e}")))?;
    Ok(Some(Position {
        stream: stream.to_string(),
        lineage,
        restart: GroupEnd {
            pos: BinlogPos::new(
                row.try_get::<String, _>("restart_file")
                    .map_err(st("reading the capture position"))?,
                row.try_get::<u64, _>("restart_pos")
                    .map_err(st("reading the capture position"))?,
            ),
            gtid: parse_gtid(
                row.try_get("restart_gtid")
                    .map_err(st("reading the capture position"))?,
            )?,
        },
        restart_seq: row
            .try_get("restart_seq")
            .map_err(st("reading the capture position"))?,
        tail: Tail {
            seq: row
                .try_get("tail_seq")
                .map_err(st("reading the capture position"))?,
            chain: digest_col(&row, "tail_chain")?,
        },
        chunk_changes: row
            .try_get("chunk_changes")
            .map_err(st("reading the capture position"))?,
    }))
}

/// Creates D for a new stream at `start` (a group end the caller read from the server),
/// unless it exists; returns the stored D either way.
pub async fn init_position(
    pool: &MySqlPool,
    stream: &str,
    lineage: &Lineage,
    start: &GroupEnd,
    chunk_changes: u32,
) -> Result<Position> {
    sqlx::query(
        "INSERT IGNORE INTO capture_position (stream, lineage, restart_file, restart_pos, \
         restart_gtid, restart_seq, tail_seq, tail_chain, chunk_changes) \
         VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?)",
    )
    .bind(stream)
    .bind(codec::encode(lineage))
    .bind(&start.pos.file)
    .bind(start.pos.pos)
    .bind(gtid_text(&start.gtid))
    .bind(GENESIS.0.to_vec())
    .bind(chunk_changes.max(1))
    .execute(pool)
    .await
    .map_err(st("creating the capture position"))?;
    load_position(pool, stream).await?.ok_or_else(|| {
        Error::transient(format!(
            "the capture position of stream `{stream}` vanished after insert"
        ))
    })
}
