//! The one state-store transaction that stores records and moves D: a compare-and-set
//! on L's tail, the records, their table and pause index rows, and the XA holds the
//! records register or release. Zero rows matched on the compare-and-set rolls all of
//! it back, so there is no state in which L is durable and D is not (I7).

use super::body::store_body;
use super::hold::{register_hold, release_hold};
use super::{
    chain_next, gtid_text, st, Entry, LSeq, LogRecord, PauseSeen, Position, RecordBody, Tail,
};

use crate::error::{Error, Result};
use crate::ids::Digest;
use sqlx::mysql::MySqlPool;

/// Appends `records` after `expected` and moves D, in one state-store transaction.
/// Returns the new D. Fails (and changes nothing) if L's tail is not `expected`.
pub async fn append(pool: &MySqlPool, pos: &Position, entries: &[Entry]) -> Result<Position> {
    append_fenced(pool, pos, entries, None).await
}

/// [`append`] under the stream's capture lease token (`crate::capture::owner`): the
/// transaction also writes the lease row where the token is still `fence`, so a reader
/// whose lease was taken over appends nothing (`fenced`).
pub async fn append_fenced(
    pool: &MySqlPool,
    pos: &Position,
    entries: &[Entry],
    fence: Option<u64>,
) -> Result<Position> {
    append_tx(pool, pos, entries, fence, None).await
}

/// [`append_fenced`], also moving D to the lineage `switch_to` in the same transaction
/// (the lineage switch record of `super::switch`).
pub(super) async fn append_tx(
    pool: &MySqlPool,
    pos: &Position,
    entries: &[Entry],
    fence: Option<u64>,
    switch_to: Option<&crate::position::Lineage>,
) -> Result<Position> {
    if entries.is_empty() {
        return Ok(pos.clone());
    }
    // Encoding, digests and the chain are computed before the transaction opens.
    let rows = encode_rows(pos, entries);
    let mut next = pos.clone();
    for r in &rows {
        if let Some(end) = &r.entry.record.end {
            next.restart = end.clone();
            next.restart_seq = r.seq;
        }
    }
    if let Some(last) = rows.last() {
        next.tail = Tail {
            seq: last.seq,
            chain: last.chain,
        };
    }
    let mut tx = pool
        .begin()
        .await
        .map_err(st("beginning change log append"))?;
    // The compare-and-set first: a moved tail fails before anything is written.
    move_d(&mut tx, pos, &next).await?;
    if let Some(token) = fence {
        crate::capture::owner::check_in(&mut tx, &pos.stream, token).await?;
    }
    if let Some(to) = switch_to {
        sqlx::query("UPDATE capture_position SET lineage = ? WHERE stream = ?")
            .bind(crate::codec::encode(to))
            .bind(&pos.stream)
            .execute(&mut *tx)
            .await
            .map_err(st("switching the capture position's lineage"))?;
        next.lineage = to.clone();
    }
    insert_records(&mut tx, &pos.stream, &rows).await?;
    insert_table_index(&mut tx, &pos.stream, &rows).await?;
    for r in &rows {
        index_side_rows(&mut tx, &pos.stream, r.seq, &r.entry.record).await?;
        if let Some(xid) = &r.entry.releases {
            release_hold(&mut tx, &pos.stream, xid).await?;
        }
    }
    crate::failpoint::hit("capture.before_commit");
    tx.commit()
        .await
        .map_err(st("committing the change log and the capture position"))?;
    super::wake::appended();
    Ok(next)
}

/// One record ready to be stored.
struct EncodedRow<'a> {
    entry: &'a Entry,
    seq: LSeq,
    /// The stored body: the LREC bytes, or their zstd frame (`codec`).
    body: Vec<u8>,
    codec: u8,
    body_digest: Digest,
    prev: Digest,
    chain: Digest,
}

fn encode_rows<'a>(pos: &Position, entries: &'a [Entry]) -> Vec<EncodedRow<'a>> {
    let mut chain = pos.tail.chain;
    let mut seq = pos.tail.seq;
    entries
        .iter()
        .map(|entry| {
            seq = seq.next();
            let canonical = entry.record.encode();
            let body_digest = Digest::of(&canonical);
            let (codec, body) = store_body(canonical);
            let prev = chain;
            chain = chain_next(&prev, seq, &body_digest);
            EncodedRow {
                entry,
                seq,
                body,
                codec,
                body_digest,
                prev,
                chain,
            }
        })
        .collect()
}

/// The compare-and-set of D and L's tail (`WHERE tail = expected`). Zero rows matched
/// means another writer or a lost commit moved the tail: the caller restarts from the
/// stored D, and dropping the transaction rolls back.
async fn move_d(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    pos: &Position,
    next: &Position,
) -> Result<()> {
    let moved = sqlx::query(
        "UPDATE capture_position SET restart_file = ?, restart_pos = ?, restart_gtid = ?, \
         restart_seq = ?, tail_seq = ?, tail_chain = ? \
         WHERE stream = ? AND tail_seq = ? AND tail_chain = ?",
    )
    .bind(&next.restart.pos.file)
    .bind(next.restart.pos.pos)
    .bind(gtid_text(&next.restart.gtid))
    .bind(next.restart_seq)
    .bind(next.tail.seq)
    .bind(next.tail.chain.0.to_vec())
    .bind(&pos.stream)
    .bind(pos.tail.seq)
    .bind(pos.tail.chain.0.to_vec())
    .execute(&mut **tx)
    .await
    .map_err(st("moving the capture position"))?;
    if moved.rows_affected() != 1 {
        return Err(Error::transient(format!(
            "the change log's tail of stream `{}` is no longer seq {}: another writer or a lost commit moved \
             it; restarting from the stored capture position",
            pos.stream, pos.tail.seq
        )));
    }
    Ok(())
}

/// Body bytes per multi-row INSERT (well under the server's default max_allowed_packet
/// of 16 MB; a larger single record goes alone).
const INSERT_BYTES: usize = 4 << 20;

/// Inserts the records with as few multi-row INSERTs as the byte bound allows.
async fn insert_records(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    rows: &[EncodedRow<'_>],
) -> Result<()> {
    let mut from = 0;
    while from < rows.len() {
        let mut to = from + 1;
        let mut bytes = rows[from].body.len();
        while to < rows.len() && bytes + rows[to].body.len() <= INSERT_BYTES {
            bytes += rows[to].body.len();
            to += 1;
        }
        let part = &rows[from..to];
        let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; part.len()].join(", ");
        let sql = format!(
            "INSERT INTO capture_log (stream, seq, kind, start_file, start_pos, chunk_no, \
             end_file, end_pos, gtid, body_digest, prev_chain, chain, body, body_codec) \
             VALUES {values}"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for r in part {
            let rec = &r.entry.record;
            q = q
                .bind(stream)
                .bind(r.seq)
                .bind(rec.kind_code())
                .bind(&rec.start.file)
                .bind(rec.start.pos)
                .bind(rec.chunk)
                .bind(rec.end.as_ref().map(|e| e.pos.file.as_str()))
                .bind(rec.end.as_ref().map(|e| e.pos.pos))
                .bind(gtid_text(&rec.gtid))
                .bind(&r.body_digest.0[..])
                .bind(&r.prev.0[..])
                .bind(&r.chain.0[..])
                .bind(&r.body[..])
                .bind(r.codec);
        }
        q.execute(&mut **tx)
            .await
            .map_err(st("appending to the change log"))?;
        from = to;
    }
    Ok(())
}

/// Indexes which captured tables each record touches, in one multi-row INSERT.
async fn insert_table_index(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    rows: &[EncodedRow<'_>],
) -> Result<()> {
    let index: Vec<(LSeq, String, String, u32)> = rows
        .iter()
        .flat_map(|r| {
            r.entry
                .record
                .tables()
                .into_iter()
                .map(move |(s, t, n)| (r.seq, s, t, n))
        })
        .collect();
    for part in index.chunks(1000) {
        let values = vec!["(?, ?, ?, ?, ?)"; part.len()].join(", ");
        let sql = format!(
            "INSERT INTO capture_log_table (stream, schema_name, table_name, seq, changes) \
             VALUES {values}"
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (seq, s, t, n) in part {
            q = q.bind(stream).bind(s).bind(t).bind(seq).bind(n);
        }
        q.execute(&mut **tx)
            .await
            .map_err(st("indexing the change log"))?;
    }
    Ok(())
}

async fn index_side_rows(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: LSeq,
    rec: &LogRecord,
) -> Result<()> {
    let c = match &rec.body {
        RecordBody::Chunk(c) => c,
        RecordBody::Held(h) => {
            if rec.end.is_some() {
                register_hold(tx, stream, seq, rec.chunk, &h.xid).await?;
            }
            return index_pauses(tx, stream, seq, &h.chunk.pauses).await;
        }
        RecordBody::Dropped { xid } => return release_hold(tx, stream, xid).await,
        RecordBody::Progress | RecordBody::Switch(_) => return Ok(()),
    };
    // A marker's position is the end of its group; a marker in a non-final chunk is
    // recorded when the group ends (see capture), so `end` is known here.
    for i in &c.intents {
        let end = rec
            .end
            .as_ref()
            .map(|e| e.pos.clone())
            .unwrap_or(i.at.clone());
        sqlx::query(
            "INSERT INTO capture_marker (stream, nonce, job_id, generation, kind, window_id, \
             attempt, obsolete, seq, end_file, end_pos, gtid) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(stream)
        .bind(i.intent.nonce.0)
        .bind(i.intent.job.0)
        .bind(i.intent.generation.0)
        .bind(i.intent.kind.as_str())
        .bind(i.intent.window.map(|w| w.0))
        .bind(i.intent.attempt.map(|a| a.0))
        .bind(i.obsolete)
        .bind(seq)
        .bind(&end.file)
        .bind(end.pos)
        .bind(gtid_text(&rec.gtid))
        .execute(&mut **tx)
        .await
        .map_err(st("recording an intent marker"))?;
    }
    index_pauses(tx, stream, seq, &c.pauses).await?;
    index_ddl(tx, stream, seq, c).await
}

/// One `capture_ddl` row per table paused at a DDL statement of this chunk (the pause and
/// the statement at the same position).
async fn index_ddl(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: LSeq,
    c: &super::GroupChunk,
) -> Result<()> {
    for p in c
        .pauses
        .iter()
        .filter(|p| p.error.code == crate::error::DefiniteCode::SchemaChanged)
    {
        let Some(s) = c.statements.iter().find(|s| s.at == p.at) else {
            continue;
        };
        sqlx::query(
            "INSERT IGNORE INTO capture_ddl (stream, seq, schema_name, table_name, at_file, \
             at_pos, default_schema, statement) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(stream)
        .bind(seq)
        .bind(&p.schema)
        .bind(&p.table)
        .bind(&p.at.file)
        .bind(p.at.pos)
        .bind(&s.default_schema)
        .bind(&s.sql)
        .execute(&mut **tx)
        .await
        .map_err(st("indexing a DDL"))?;
    }
    Ok(())
}

async fn index_pauses(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: LSeq,
    pauses: &[PauseSeen],
) -> Result<()> {
    for p in pauses {
        sqlx::query(
            "INSERT IGNORE INTO capture_pause (stream, job_id, generation, schema_name, \
             table_name, code, message, seq, at_file, at_pos) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(stream)
        .bind(p.job.0)
        .bind(p.generation.0)
        .bind(&p.schema)
        .bind(&p.table)
        .bind(p.error.code.as_str())
        .bind(&p.error.message)
        .bind(seq)
        .bind(&p.at.file)
        .bind(p.at.pos)
        .execute(&mut **tx)
        .await
        .map_err(st("recording a pause"))?;
    }
    Ok(())
}
