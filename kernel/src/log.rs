//! L (the raw log) and D (the reader's restart position) in the state store (DESIGN §3.6).
//!
//! Why L can have no hole and no duplicate, and why D never runs ahead of it (I7):
//! * Every record names the chain digest of the record before it and is appended in one
//!   state-store transaction together with a compare-and-set of `capture_position`
//!   (`WHERE tail_seq = expected AND tail_chain = expected`). If another writer or a lost
//!   commit moved the tail, zero rows match and the whole transaction rolls back: the
//!   reader restarts from the stored D and never continues from memory.
//! * D (the restart position) is written in that same transaction and is always the end of
//!   a complete group (or of a progress record), so "L durable, D not" cannot exist: there
//!   is no state between them (the `capture.*` fault points prove it in tests).
//! * A group larger than the chunk bound is stored as several records; while it is open D
//!   stays at the group's start and the tail names its last chunk. After a restart the
//!   reader re-reads the group from D and must regenerate byte-identical chunks: each is
//!   checked against the stored digest ([`Position::open_chunks`]) and not stored twice.
//!   The chunk bound is fixed per stream (stored in D) so regrouping cannot differ.
use crate::change::{Change, GroupEnd};
use crate::codec::{self, Versioned};
use crate::control::IntentSeen;
use crate::error::{from_sqlx, DefiniteCode, Error, Result};
use crate::ids::{Digest, Generation, JobId};
use crate::position::{BinlogPos, Gtid, Lineage};
use serde::{Deserialize, Serialize};
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;
use std::time::Duration;
use tokio::time::Instant;

impl Versioned for Lineage {
    const KIND: [u8; 4] = *b"LINE";
    const VERSION: u16 = 1;
}

/// One L record (persisted as postcard, kind `LREC`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogRecord {
    /// Where the group starts: the end of the group before it.
    pub start: BinlogPos,
    /// Index of this chunk inside its group (0 for the first).
    pub chunk: u32,
    /// The group's GTID (None for a progress record of a server without GTIDs).
    pub gtid: Option<Gtid>,
    /// Set on the last chunk of a group and on progress records.
    pub end: Option<GroupEnd>,
    pub body: RecordBody,
}

impl Versioned for LogRecord {
    const KIND: [u8; 4] = *b"LREC";
    const VERSION: u16 = 1;
}

/// What a record holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RecordBody {
    /// Part (or all) of a group touching a captured table or the control table.
    Chunk(GroupChunk),
    /// No captured change: D moved past groups of other tables (heartbeat, DESIGN §4).
    Progress,
    /// A chunk of a prepared XA group touching a captured table, held until its
    /// `XA COMMIT` (DESIGN §3.8). Not a change of any table yet: consumers skip it. The
    /// record that ends the prepared group registers the hold in `capture_xa_hold`.
    Held(XaHeld),
    /// The held group of `xid` was dropped at its `XA ROLLBACK` (this record's end).
    Dropped { xid: String },
}

/// One chunk of a held (prepared) XA group. At the group's `XA COMMIT` each held chunk is
/// appended again, unchanged, as a [`RecordBody::Chunk`] of the commit's group: the
/// changes keep their identities (original event positions), the group ends at the commit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct XaHeld {
    /// The xid as the server logs it (`X'7831',X'',1`).
    pub xid: String,
    pub chunk: GroupChunk,
}

/// A record to append, and the XA hold its storing releases (set on the last chunk of a
/// group released at its `XA COMMIT`, so the hold goes in the same transaction as D
/// moves past the commit).
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub record: LogRecord,
    pub releases: Option<String>,
}

impl From<LogRecord> for Entry {
    fn from(record: LogRecord) -> Entry {
        Entry {
            record,
            releases: None,
        }
    }
}

/// A registered hold: the L records (`first_seq..=last_seq`, body [`RecordBody::Held`])
/// of a prepared XA group that waits for its `XA COMMIT` or `XA ROLLBACK`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub xid: String,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// The captured content of one chunk of a group, in binlog order.
///
/// Persisted compactly: consecutive rows of one rows event share one event header
/// (lineage, schema, table, file, event position, op, first row index) instead of
/// repeating the change identity per row; [`Change`] values are rebuilt on decode.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupChunk {
    /// Decoded changes of captured (not paused) tables.
    pub changes: Vec<Change>,
    /// Control-table intents (B/LOW/HIGH/F/K) in this chunk.
    pub intents: Vec<IntentSeen>,
    /// Tables paused at this chunk, with the definite reason.
    pub pauses: Vec<PauseSeen>,
    /// Statements (DDL, statement-format DML) naming a captured table.
    pub statements: Vec<StatementSeen>,
    /// Rows events of paused tables, kept raw so that resuming loses nothing (§3.7).
    pub raw: Vec<RawRows>,
}

#[derive(Serialize)]
struct ChunkRef<'a> {
    events: Vec<EventRef<'a>>,
    intents: &'a [IntentSeen],
    pauses: &'a [PauseSeen],
    statements: &'a [StatementSeen],
    raw: &'a [RawRows],
}

#[derive(Serialize)]
struct EventRef<'a> {
    lineage: &'a Digest,
    schema: &'a str,
    table: &'a str,
    file: &'a str,
    event_pos: u64,
    op: crate::change::Op,
    first_row: u32,
    rows: Vec<(&'a Option<crate::value::Row>, &'a Option<crate::value::Row>)>,
}

#[derive(Deserialize)]
struct ChunkOwned {
    events: Vec<EventOwned>,
    intents: Vec<IntentSeen>,
    pauses: Vec<PauseSeen>,
    statements: Vec<StatementSeen>,
    raw: Vec<RawRows>,
}

#[derive(Deserialize)]
struct EventOwned {
    lineage: Digest,
    schema: String,
    table: String,
    file: String,
    event_pos: u64,
    op: crate::change::Op,
    first_row: u32,
    rows: Vec<(Option<crate::value::Row>, Option<crate::value::Row>)>,
}

impl Serialize for GroupChunk {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut events: Vec<EventRef<'_>> = Vec::new();
        for c in &self.changes {
            let id = &c.id;
            let same = events.last().is_some_and(|e| {
                e.lineage == &id.lineage
                    && e.schema == id.schema
                    && e.table == id.table
                    && e.file == id.file
                    && e.event_pos == id.event_pos
                    && e.op == id.op
                    && u64::from(e.first_row) + e.rows.len() as u64 == u64::from(id.row)
            });
            if !same {
                events.push(EventRef {
                    lineage: &id.lineage,
                    schema: &id.schema,
                    table: &id.table,
                    file: &id.file,
                    event_pos: id.event_pos,
                    op: id.op,
                    first_row: id.row,
                    rows: Vec::new(),
                });
            }
            if let Some(e) = events.last_mut() {
                e.rows.push((&c.before, &c.after));
            }
        }
        ChunkRef {
            events,
            intents: &self.intents,
            pauses: &self.pauses,
            statements: &self.statements,
            raw: &self.raw,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for GroupChunk {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let w = ChunkOwned::deserialize(d)?;
        let mut changes = Vec::new();
        for e in w.events {
            for (i, (before, after)) in e.rows.into_iter().enumerate() {
                changes.push(Change {
                    id: crate::change::ChangeId {
                        lineage: e.lineage,
                        schema: e.schema.clone(),
                        table: e.table.clone(),
                        file: e.file.clone(),
                        event_pos: e.event_pos,
                        row: e.first_row + i as u32,
                        op: e.op,
                    },
                    before,
                    after,
                });
            }
        }
        Ok(GroupChunk {
            changes,
            intents: w.intents,
            pauses: w.pauses,
            statements: w.statements,
            raw: w.raw,
        })
    }
}

/// A table paused by the reader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseSeen {
    pub job: JobId,
    pub generation: Generation,
    pub schema: String,
    pub table: String,
    pub at: BinlogPos,
    pub error: crate::error::Definite,
}

/// A statement event naming a captured table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementSeen {
    pub at: BinlogPos,
    pub default_schema: String,
    pub sql: String,
}

/// A rows event of a paused table, with the table map it was written against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawRows {
    pub schema: String,
    pub table: String,
    pub event_pos: u64,
    pub event_type: u8,
    pub table_map: Vec<u8>,
    pub data: Vec<u8>,
}

impl LogRecord {
    /// blake3 of the record's canonical versioned bytes.
    pub fn digest(&self) -> Digest {
        Digest::of(&codec::encode(self))
    }

    /// Number of changes and raw rows events held (a measure of the record's size).
    pub fn size(&self) -> usize {
        match &self.body {
            RecordBody::Chunk(c) | RecordBody::Held(XaHeld { chunk: c, .. }) => {
                c.changes.len() + c.raw.len()
            }
            RecordBody::Progress | RecordBody::Dropped { .. } => 0,
        }
    }

    /// True for a record that closes its group (or a progress record).
    pub fn is_group_end(&self) -> bool {
        self.end.is_some()
    }

    fn kind_code(&self) -> u8 {
        match self.body {
            RecordBody::Chunk(_) => 1,
            RecordBody::Progress => 2,
            RecordBody::Held(_) => 3,
            RecordBody::Dropped { .. } => 4,
        }
    }

    /// Number of changes per (schema, table) in this record.
    pub fn tables(&self) -> Vec<(String, String, u32)> {
        let mut out: Vec<(String, String, u32)> = Vec::new();
        if let RecordBody::Chunk(c) = &self.body {
            let names = c
                .changes
                .iter()
                .map(|ch| (&ch.id.schema, &ch.id.table))
                .chain(c.raw.iter().map(|r| (&r.schema, &r.table)))
                .chain(c.pauses.iter().map(|p| (&p.schema, &p.table)));
            for (s, t) in names {
                match out.iter_mut().find(|(a, b, _)| a == s && b == t) {
                    Some(e) => e.2 += 1,
                    None => out.push((s.clone(), t.clone(), 1)),
                }
            }
        }
        out
    }
}

/// The hash chain step: blake3("backfill-L-v1" | prev | seq LE | body digest).
pub fn chain_next(prev: &Digest, seq: u64, body: &Digest) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(b"backfill-L-v1");
    h.update(&prev.0);
    h.update(&seq.to_le_bytes());
    h.update(&body.0);
    Digest(*h.finalize().as_bytes())
}

/// The chain digest before the first record.
pub const GENESIS: Digest = Digest([0; 32]);

/// L's tail: the last record's seq and chain digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    pub seq: u64,
    pub chain: Digest,
}

/// D plus what the reader needs to resume.
#[derive(Clone, Debug, PartialEq)]
pub struct Position {
    pub stream: String,
    pub lineage: Lineage,
    /// Where the next read starts: always a group end.
    pub restart: GroupEnd,
    /// The L seq of the record that ends at `restart` (0 when none).
    pub restart_seq: u64,
    pub tail: Tail,
    pub chunk_changes: u32,
}

impl Position {
    /// Chunks stored after the restart position (an open group): the re-read must
    /// regenerate exactly these.
    pub fn open_chunks(&self) -> u64 {
        self.tail.seq - self.restart_seq
    }
}

/// A stored record with its chain fields, verified on read.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRecord {
    pub seq: u64,
    pub prev_chain: Digest,
    pub chain: Digest,
    pub body_digest: Digest,
    pub record: LogRecord,
}

fn st(what: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| from_sqlx(what, &e)
}

fn corrupt(msg: String) -> Error {
    Error::definite(DefiniteCode::EvidenceCorrupt, msg)
}

fn digest_col(row: &sqlx::mysql::MySqlRow, col: &str) -> Result<Digest> {
    let b: Vec<u8> = row.try_get(col).map_err(st("reading L"))?;
    Digest::from_slice(&b).ok_or_else(|| corrupt(format!("L column {col} is not 32 bytes")))
}

fn gtid_text(g: &Option<Gtid>) -> Option<String> {
    g.as_ref().map(|g| g.to_string())
}

fn parse_gtid(s: Option<String>) -> Result<Option<Gtid>> {
    match s {
        None => Ok(None),
        Some(s) => Gtid::parse(&s)
            .map(Some)
            .ok_or_else(|| corrupt(format!("stored GTID `{s}` does not parse"))),
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
    .map_err(st("reading D"))?;
    let Some(row) = row else { return Ok(None) };
    let lineage_bytes: Vec<u8> = row.try_get("lineage").map_err(st("reading D"))?;
    let lineage = codec::decode::<Lineage>(&lineage_bytes)
        .map_err(|e| corrupt(format!("D of stream `{stream}`: {e}")))?;
    Ok(Some(Position {
        stream: stream.to_string(),
        lineage,
        restart: GroupEnd {
            pos: BinlogPos::new(
                row.try_get::<String, _>("restart_file")
                    .map_err(st("reading D"))?,
                row.try_get::<u64, _>("restart_pos")
                    .map_err(st("reading D"))?,
            ),
            gtid: parse_gtid(row.try_get("restart_gtid").map_err(st("reading D"))?)?,
        },
        restart_seq: row.try_get("restart_seq").map_err(st("reading D"))?,
        tail: Tail {
            seq: row.try_get("tail_seq").map_err(st("reading D"))?,
            chain: digest_col(&row, "tail_chain")?,
        },
        chunk_changes: row.try_get("chunk_changes").map_err(st("reading D"))?,
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
    .map_err(st("creating D"))?;
    load_position(pool, stream)
        .await?
        .ok_or_else(|| Error::transient(format!("D of stream `{stream}` vanished after insert")))
}

/// Appends `records` after `expected` and moves D, in one state-store transaction.
/// Returns the new D. Fails (and changes nothing) if L's tail is not `expected`.
pub async fn append(pool: &MySqlPool, pos: &Position, entries: &[Entry]) -> Result<Position> {
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
    let mut tx = pool.begin().await.map_err(st("beginning L append"))?;
    // The compare-and-set first: a moved tail fails before anything is written.
    move_d(&mut tx, pos, &next).await?;
    insert_records(&mut tx, &pos.stream, &rows).await?;
    insert_table_index(&mut tx, &pos.stream, &rows).await?;
    for r in &rows {
        index_side_rows(&mut tx, &pos.stream, r.seq, &r.entry.record).await?;
        if let Some(xid) = &r.entry.releases {
            release_hold(&mut tx, &pos.stream, xid).await?;
        }
    }
    crate::failpoint::hit("capture.before_commit");
    tx.commit().await.map_err(st("committing L and D"))?;
    Ok(next)
}

/// One record ready to be stored.
struct EncodedRow<'a> {
    entry: &'a Entry,
    seq: u64,
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
            seq += 1;
            let canonical = codec::encode(&entry.record);
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
    .map_err(st("moving D"))?;
    if moved.rows_affected() != 1 {
        return Err(Error::transient(format!(
            "L tail of stream `{}` is no longer seq {}: another writer or a lost commit moved \
             it; restarting from the stored D",
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
        q.execute(&mut **tx).await.map_err(st("appending to L"))?;
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
    let index: Vec<(u64, String, String, u32)> = rows
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
        q.execute(&mut **tx).await.map_err(st("indexing L"))?;
    }
    Ok(())
}

async fn index_side_rows(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: u64,
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
        RecordBody::Progress => return Ok(()),
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
    index_pauses(tx, stream, seq, &c.pauses).await
}

async fn index_pauses(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: u64,
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

/// Registers the hold of a prepared XA group whose last held chunk is L record `seq`
/// (chunk number `chunk`: its chunks are the records `seq - chunk ..= seq`).
async fn register_hold(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: u64,
    chunk: u32,
    xid: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO capture_xa_hold (stream, xid, first_seq, last_seq) VALUES (?, ?, ?, ?)",
    )
    .bind(stream)
    .bind(xid.as_bytes())
    .bind(seq - u64::from(chunk))
    .bind(seq)
    .execute(&mut **tx)
    .await
    .map_err(|e| {
        let dup = crate::error::sqlx_server_code(&e).map(crate::error::classify_server_code)
            == Some(crate::error::ServerClass::Duplicate);
        if dup {
            corrupt(format!(
                "stream `{stream}`: XA {xid} is prepared again at L record {seq} while L \
                 already holds a prepared group of it"
            ))
        } else {
            from_sqlx("registering an XA hold", &e)
        }
    })?;
    Ok(())
}

/// Drops the hold of `xid` (its group was released at XA COMMIT or dropped at XA
/// ROLLBACK). A missing hold means L and the holds disagree: definite.
async fn release_hold(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    xid: &str,
) -> Result<()> {
    let done = sqlx::query("DELETE FROM capture_xa_hold WHERE stream = ? AND xid = ?")
        .bind(stream)
        .bind(xid.as_bytes())
        .execute(&mut **tx)
        .await
        .map_err(st("releasing an XA hold"))?;
    if done.rows_affected() != 1 {
        return Err(corrupt(format!(
            "stream `{stream}`: L holds no prepared group of XA {xid} to release"
        )));
    }
    Ok(())
}

/// The XA holds of `stream` (prepared groups waiting for their XA COMMIT or ROLLBACK).
pub async fn holds(pool: &MySqlPool, stream: &str) -> Result<Vec<Hold>> {
    let rows = sqlx::query(
        "SELECT xid, first_seq, last_seq FROM capture_xa_hold WHERE stream = ? \
         ORDER BY first_seq",
    )
    .bind(stream)
    .fetch_all(pool)
    .await
    .map_err(st("reading XA holds"))?;
    let g = |e| from_sqlx("reading XA holds", &e);
    let mut out = Vec::new();
    for r in rows {
        let xid: Vec<u8> = r.try_get("xid").map_err(g)?;
        out.push(Hold {
            xid: String::from_utf8(xid)
                .map_err(|_| corrupt(format!("stream `{stream}`: an XA hold's xid is not text")))?,
            first_seq: r.try_get("first_seq").map_err(g)?,
            last_seq: r.try_get("last_seq").map_err(g)?,
        });
    }
    Ok(out)
}

fn decode_row(row: &sqlx::mysql::MySqlRow) -> Result<StoredRecord> {
    let seq: u64 = row.try_get("seq").map_err(st("reading L"))?;
    let stored: Vec<u8> = row.try_get("body").map_err(st("reading L"))?;
    let codec: u8 = row.try_get("body_codec").map_err(st("reading L"))?;
    let body = load_body(codec, stored).map_err(|e| corrupt(format!("L record {seq}: {e}")))?;
    let body_digest = digest_col(row, "body_digest")?;
    let prev_chain = digest_col(row, "prev_chain")?;
    let chain = digest_col(row, "chain")?;
    if Digest::of(&body) != body_digest {
        return Err(corrupt(format!(
            "L record {seq}: body does not hash to its digest"
        )));
    }
    if chain_next(&prev_chain, seq, &body_digest) != chain {
        return Err(corrupt(format!(
            "L record {seq}: chain digest does not verify"
        )));
    }
    let record =
        codec::decode::<LogRecord>(&body).map_err(|e| corrupt(format!("L record {seq}: {e}")))?;
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

/// Body codecs (`capture_log.body_codec`): the LREC bytes as they are, or one zstd frame.
const CODEC_RAW: u8 = 0;
const CODEC_ZSTD: u8 = 1;

/// Bodies smaller than this are stored raw (a frame would not pay for itself).
const COMPRESS_FROM: usize = 256;

/// How a record's LREC bytes are stored: compressed (zstd level 1: L bodies of row
/// images shrink several times, which is what the state store writes, logs and
/// replicates) when that is smaller.
fn store_body(canonical: Vec<u8>) -> (u8, Vec<u8>) {
    if canonical.len() >= COMPRESS_FROM {
        if let Ok(z) = zstd::bulk::compress(&canonical, 1) {
            if z.len() < canonical.len() {
                return (CODEC_ZSTD, z);
            }
        }
    }
    (CODEC_RAW, canonical)
}

/// The LREC bytes of a stored body.
fn load_body(codec: u8, stored: Vec<u8>) -> std::result::Result<Vec<u8>, String> {
    match codec {
        CODEC_RAW => Ok(stored),
        CODEC_ZSTD => zstd::stream::decode_all(&stored[..]).map_err(|e| format!("zstd body: {e}")),
        c => Err(format!("unknown body codec {c}")),
    }
}

/// Records with `after < seq <= upto`, at most `limit`, in order; each verified against
/// its digest and chained to the one before it (the first is chained to `after`'s chain
/// by the caller through [`StoredRecord::prev_chain`]).
pub async fn read_range(
    pool: &MySqlPool,
    stream: &str,
    after: u64,
    upto: u64,
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
        .map_err(st("reading L"))?;
    let out = rows.iter().map(decode_row).collect::<Result<Vec<_>>>()?;
    check_links(&out)?;
    Ok(out)
}

/// Records touching `schema`.`table` with `after < seq <= upto`, at most `limit`.
pub async fn table_records(
    pool: &MySqlPool,
    stream: &str,
    schema: &str,
    table: &str,
    after: u64,
    upto: u64,
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
        .map_err(st("reading L by table"))?;
    rows.iter().map(decode_row).collect()
}

fn check_links(recs: &[StoredRecord]) -> Result<()> {
    for w in recs.windows(2) {
        if w[1].seq != w[0].seq + 1 || w[1].prev_chain != w[0].chain {
            return Err(corrupt(format!(
                "L hash chain broken between records {} and {}",
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
    .map_err(st("reading L's tail"))?;
    let found: Vec<(u64, Digest)> = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get("seq").map_err(st("reading L's tail"))?,
                digest_col(r, "chain")?,
            ))
        })
        .collect::<Result<_>>()?;
    let ok = match (d.tail.seq, found.as_slice()) {
        (0, []) => true,
        (seq, [(s, c)]) => *s == seq && *c == d.tail.chain,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    Err(corrupt(format!(
        "D of stream `{}` names tail seq {} but L's records there are {:?}: L and D disagree",
        d.stream,
        d.tail.seq,
        found.iter().map(|(s, _)| *s).collect::<Vec<_>>()
    )))
}

/// Verifies the whole chain of `stream` from seq 1 to D's tail, reading in pages; returns
/// the number of records checked. Any hole, tamper or D/L disagreement is definite (I7).
pub async fn verify_chain(pool: &MySqlPool, stream: &str) -> Result<u64> {
    let Some(d) = load_position(pool, stream).await? else {
        return Ok(0);
    };
    let mut prev = GENESIS;
    let mut after = 0;
    loop {
        let page = read_range(pool, stream, after, u64::MAX, 500).await?;
        let Some(last) = page.last() else { break };
        if page[0].seq != after + 1 || page[0].prev_chain != prev {
            return Err(corrupt(format!(
                "L hash chain broken before record {}",
                page[0].seq
            )));
        }
        prev = last.chain;
        after = last.seq;
    }
    if after != d.tail.seq || prev != d.tail.chain {
        return Err(corrupt(format!(
            "D of stream `{stream}` names tail {} but L ends at {after}",
            d.tail.seq
        )));
    }
    Ok(after)
}

/// The seq of the last record of `stream` that ends at or before `pos` (0 when none): turns
/// a binlog position (e.g. a read view's `binlog_snapshot_*`) into bounds for
/// [`table_records`]. Fails if L does not reach `pos` yet (use [`wait_for_position`]).
pub async fn seq_at_or_before(pool: &MySqlPool, stream: &str, pos: &BinlogPos) -> Result<u64> {
    let d = load_position(pool, stream)
        .await?
        .ok_or_else(|| Error::transient(format!("stream `{stream}` has no D yet")))?;
    let reached = d
        .restart
        .pos
        .try_cmp(pos)
        .map_err(|e| Error::definite(DefiniteCode::LineageChanged, e.to_string()))?;
    if reached == std::cmp::Ordering::Less {
        return Err(Error::transient(format!(
            "L of stream `{stream}` has not reached {pos} yet (D is {})",
            d.restart.pos
        )));
    }
    // File names of one series have equal length (zero-padded sequence), so they order
    // as strings; LENGTH keeps a 7-digit sequence after a 6-digit one.
    let seq: Option<u64> = sqlx::query_scalar(
        "SELECT MAX(seq) FROM capture_log WHERE stream = ? AND end_file IS NOT NULL AND          (LENGTH(end_file) < LENGTH(?) OR (LENGTH(end_file) = LENGTH(?) AND          (end_file < ? OR (end_file = ? AND end_pos <= ?))))",
    )
    .bind(stream)
    .bind(&pos.file)
    .bind(&pos.file)
    .bind(&pos.file)
    .bind(&pos.file)
    .bind(pos.pos)
    .fetch_one(pool)
    .await
    .map_err(st("locating a position in L"))?;
    Ok(seq.unwrap_or(0))
}

/// An intent marker L durably holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerSeen {
    pub intent: crate::control::Intent,
    pub obsolete: bool,
    /// The L record holding it.
    pub seq: u64,
    /// The end of the group holding it.
    pub end: GroupEnd,
}

/// The marker with `nonce`, if L holds it.
pub async fn marker(
    pool: &MySqlPool,
    stream: &str,
    nonce: crate::ids::Nonce,
) -> Result<Option<MarkerSeen>> {
    let row = sqlx::query(
        "SELECT job_id, generation, kind, window_id, attempt, obsolete, seq, end_file, \
         end_pos, gtid FROM capture_marker WHERE stream = ? AND nonce = ?",
    )
    .bind(stream)
    .bind(nonce.0)
    .fetch_optional(pool)
    .await
    .map_err(st("reading intent markers"))?;
    let Some(r) = row else { return Ok(None) };
    let g = |e| from_sqlx("reading intent markers", &e);
    let kind: String = r.try_get("kind").map_err(g)?;
    let kind = crate::control::IntentKind::parse(&kind)
        .ok_or_else(|| corrupt(format!("marker kind `{kind}` is unknown")))?;
    Ok(Some(MarkerSeen {
        intent: crate::control::Intent {
            job: JobId(r.try_get("job_id").map_err(g)?),
            generation: Generation(r.try_get("generation").map_err(g)?),
            kind,
            window: r
                .try_get::<Option<u32>, _>("window_id")
                .map_err(g)?
                .map(crate::ids::WindowId),
            attempt: r
                .try_get::<Option<u32>, _>("attempt")
                .map_err(g)?
                .map(crate::ids::Attempt),
            nonce,
        },
        obsolete: r.try_get::<i8, _>("obsolete").map_err(g)? != 0,
        seq: r.try_get("seq").map_err(g)?,
        end: GroupEnd {
            pos: BinlogPos::new(
                r.try_get::<String, _>("end_file").map_err(g)?,
                r.try_get::<u64, _>("end_pos").map_err(g)?,
            ),
            gtid: parse_gtid(r.try_get("gtid").map_err(g)?)?,
        },
    }))
}

/// Poll interval of the waits below (bounded; no wait is unbounded).
pub const WAIT_POLL: Duration = Duration::from_millis(20);

/// Waits until L durably holds the intent with `nonce`, or `deadline` passes (transient
/// error naming what was awaited: the caller decides whether to retry within its budget).
pub async fn wait_for_marker(
    pool: &MySqlPool,
    stream: &str,
    nonce: crate::ids::Nonce,
    deadline: Instant,
) -> Result<MarkerSeen> {
    loop {
        if let Some(m) = marker(pool, stream, nonce).await? {
            return Ok(m);
        }
        if Instant::now() >= deadline {
            return Err(Error::transient(format!(
                "L of stream `{stream}` does not hold intent {nonce} yet (deadline passed): \
                 is the capture running?"
            )));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// Waits until D is at or past `pos` (same binlog series), or `deadline` passes.
pub async fn wait_for_position(
    pool: &MySqlPool,
    stream: &str,
    pos: &BinlogPos,
    deadline: Instant,
) -> Result<Position> {
    loop {
        if let Some(d) = load_position(pool, stream).await? {
            let ord = d
                .restart
                .pos
                .try_cmp(pos)
                .map_err(|e| Error::definite(DefiniteCode::LineageChanged, e.to_string()))?;
            if ord != std::cmp::Ordering::Less {
                return Ok(d);
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::transient(format!(
                "L of stream `{stream}` has not reached {pos} yet (deadline passed)"
            )));
        }
        tokio::time::sleep(WAIT_POLL).await;
    }
}

/// A pause recorded by the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseRow {
    pub job: JobId,
    pub generation: Generation,
    pub schema: String,
    pub table: String,
    pub error: crate::error::Definite,
    pub seq: u64,
    pub at: BinlogPos,
}

/// Every table the reader paused in `stream`.
pub async fn pauses(pool: &MySqlPool, stream: &str) -> Result<Vec<PauseRow>> {
    let rows = sqlx::query(
        "SELECT job_id, generation, schema_name, table_name, code, message, seq, at_file, \
         at_pos FROM capture_pause WHERE stream = ? ORDER BY seq",
    )
    .bind(stream)
    .fetch_all(pool)
    .await
    .map_err(st("reading pauses"))?;
    let g = |e| from_sqlx("reading pauses", &e);
    let mut out = Vec::new();
    for r in rows {
        let code: String = r.try_get("code").map_err(g)?;
        out.push(PauseRow {
            job: JobId(r.try_get("job_id").map_err(g)?),
            generation: Generation(r.try_get("generation").map_err(g)?),
            schema: r.try_get("schema_name").map_err(g)?,
            table: r.try_get("table_name").map_err(g)?,
            error: crate::error::Definite {
                code: code_from_str(&code),
                message: r.try_get("message").map_err(g)?,
            },
            seq: r.try_get("seq").map_err(g)?,
            at: BinlogPos::new(
                r.try_get::<String, _>("at_file").map_err(g)?,
                r.try_get::<u64, _>("at_pos").map_err(g)?,
            ),
        });
    }
    Ok(out)
}

fn code_from_str(s: &str) -> DefiniteCode {
    match s {
        "schema_changed" => DefiniteCode::SchemaChanged,
        "binlog_purged" => DefiniteCode::BinlogPurged,
        "lineage_changed" => DefiniteCode::LineageChanged,
        _ => DefiniteCode::Uncapturable,
    }
}

/// Intent markers of (job, generation) held in L with seq <= `upto`, in L order.
pub async fn markers_of(
    pool: &MySqlPool,
    stream: &str,
    upto: u64,
) -> Result<Vec<(JobId, Generation, crate::control::IntentKind, u64)>> {
    let rows = sqlx::query(
        "SELECT job_id, generation, kind, seq FROM capture_marker \
         WHERE stream = ? AND seq <= ? AND obsolete = 0 ORDER BY seq",
    )
    .bind(stream)
    .bind(upto)
    .fetch_all(pool)
    .await
    .map_err(st("reading intent markers"))?;
    let g = |e| from_sqlx("reading intent markers", &e);
    let mut out = Vec::new();
    for r in rows {
        let kind: String = r.try_get("kind").map_err(g)?;
        if let Some(k) = crate::control::IntentKind::parse(&kind) {
            out.push((
                JobId(r.try_get("job_id").map_err(g)?),
                Generation(r.try_get("generation").map_err(g)?),
                k,
                r.try_get("seq").map_err(g)?,
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::change::{ChangeId, Op};
    use crate::control::{Intent, IntentKind};
    use crate::ids::{Attempt, Nonce, WindowId};
    use crate::value::SqlValue;

    fn sample() -> LogRecord {
        let at = BinlogPos::new("mysql-bin.000002", 1234);
        LogRecord {
            start: BinlogPos::new("mysql-bin.000002", 900),
            chunk: 1,
            gtid: Gtid::parse("0-1-42"),
            end: Some(GroupEnd {
                pos: BinlogPos::new("mysql-bin.000002", 2000),
                gtid: Gtid::parse("0-1-42"),
            }),
            body: RecordBody::Chunk(GroupChunk {
                changes: vec![Change {
                    id: ChangeId {
                        lineage: Digest([7; 32]),
                        schema: "db".into(),
                        table: "t".into(),
                        file: "mysql-bin.000002".into(),
                        event_pos: 1234,
                        row: 3,
                        op: Op::Update,
                    },
                    before: Some(vec![SqlValue::Int(50), SqlValue::Null]),
                    after: Some(vec![
                        SqlValue::Int(150),
                        SqlValue::Date(2024, 2, 29, 23, 59, 59, 123_456),
                    ]),
                }],
                intents: vec![crate::control::IntentSeen {
                    intent: Intent {
                        job: JobId(3),
                        generation: Generation(1),
                        kind: IntentKind::Low,
                        window: Some(WindowId(4)),
                        attempt: Some(Attempt(2)),
                        nonce: Nonce(0x0102_0304_0506_0708),
                    },
                    at: at.clone(),
                    obsolete: false,
                }],
                pauses: vec![PauseSeen {
                    job: JobId(3),
                    generation: Generation(1),
                    schema: "db".into(),
                    table: "t".into(),
                    at: at.clone(),
                    error: crate::error::Definite {
                        code: DefiniteCode::SchemaChanged,
                        message: "m".into(),
                    },
                }],
                statements: vec![StatementSeen {
                    at: at.clone(),
                    default_schema: "db".into(),
                    sql: "ALTER TABLE t".into(),
                }],
                raw: vec![RawRows {
                    schema: "db".into(),
                    table: "t".into(),
                    event_pos: 1234,
                    event_type: 31,
                    table_map: vec![1, 2],
                    data: vec![3],
                }],
            }),
        }
    }

    /// Golden bytes of LREC v1: a change of this format must keep decoding (STYLE §5).
    const LREC_V1: &str = "4c5245430100106d7973716c2d62696e2e303030303032840701010000012a01106d7973716c2d62696e2e303030303032d00f010000012a000107070707070707070707070707070707070707070707070707070707070707070264620174106d7973716c2d62696e2e303030303032d2090103010102026400010202ac0206e80f021d173b3bc0c4070103010101040102888e98a8c0e0808101106d7973716c2d62696e2e303030303032d209000103010264620174106d7973716c2d62696e2e303030303032d20902016d01106d7973716c2d62696e2e303030303032d2090264620d414c544552205441424c452074010264620174d2091f0201020103";

    #[test]
    fn record_format_is_pinned() {
        let bytes = codec::encode(&sample());
        assert_eq!(hex::encode(&bytes), LREC_V1, "LREC v1 bytes changed");
        let back: LogRecord = codec::decode(&hex::decode(LREC_V1).expect("hex")).expect("decodes");
        assert_eq!(back, sample());
        let progress = LogRecord {
            start: BinlogPos::new("b.000001", 4),
            chunk: 0,
            gtid: None,
            end: Some(GroupEnd {
                pos: BinlogPos::new("b.000001", 300),
                gtid: None,
            }),
            body: RecordBody::Progress,
        };
        assert_eq!(
            hex::encode(codec::encode(&progress)),
            "4c524543010008622e3030303030310400000108622e303030303031ac020001"
        );
    }

    /// Golden bytes of the XA bodies (appended variants of LREC v1: older records keep
    /// their variant numbers and bytes).
    #[test]
    fn xa_bodies_are_pinned() {
        let RecordBody::Chunk(chunk) = sample().body else {
            unreachable!()
        };
        let held = LogRecord {
            body: RecordBody::Held(XaHeld {
                xid: "X'7831',X'',1".into(),
                chunk: GroupChunk {
                    changes: chunk.changes,
                    ..GroupChunk::default()
                },
            }),
            end: None,
            ..sample()
        };
        let dropped = LogRecord {
            body: RecordBody::Dropped {
                xid: "X'7831',X'',1".into(),
            },
            ..sample()
        };
        for (rec, golden) in [(&held, LREC_V1_HELD), (&dropped, LREC_V1_DROPPED)] {
            let bytes = codec::encode(rec);
            assert_eq!(hex::encode(&bytes), golden, "LREC v1 XA bytes changed");
            let back: LogRecord = codec::decode(&bytes).expect("decodes");
            assert_eq!(&back, rec);
        }
        assert_eq!(held.size(), 1);
        assert!(
            held.tables().is_empty(),
            "held chunks are no table's changes"
        );
    }

    const LREC_V1_HELD: &str =
        "4c5245430100106d7973716c2d62696e2e303030303032840701010000012a00020d582737383331272c5827272c310107070707070707070707070707070707070707070707070707070707070707070264620174106d7973716c2d62696e2e303030303032d2090103010102026400010202ac0206e80f021d173b3bc0c40700000000";
    const LREC_V1_DROPPED: &str =
        "4c5245430100106d7973716c2d62696e2e303030303032840701010000012a01106d7973716c2d62696e2e303030303032d00f010000012a030d582737383331272c5827272c31";

    /// A stored zstd body (codec 1) of the LREC v1 sample: decoding must keep working
    /// whatever zstd version writes new frames.
    const LREC_V1_ZSTD: &str = "28b52ffd6000006d040062871c26902b1db3af6d6cf572cfa6e750c61dc001e8d64c12781c3f808f14965ef0c371dd7df3774a32ccf70d6e5ed1838ba98aa857c14910e52ddfccea2665e2d9643017cb0db0cddc381b4922140e7d02d7fc56f9dbcc6e5e8ef2cd0a757cb0aadd2a8adddd4d3c1a11e1804424d640cd78140c080089302cabf4d8022cf2c32b42981fae1dcfaba1e74906";

    #[test]
    fn bodies_are_stored_compressed_and_decode_to_the_same_bytes() {
        let canonical = codec::encode(&sample());
        let golden = hex::decode(LREC_V1_ZSTD).expect("hex");
        assert_eq!(load_body(CODEC_ZSTD, golden).expect("decodes"), canonical);
        let (c, stored) = store_body(canonical.clone());
        assert_eq!(c, CODEC_ZSTD, "the sample is worth compressing");
        assert!(stored.len() < canonical.len());
        assert_eq!(load_body(c, stored).expect("decodes"), canonical);
        let small = vec![1u8; 10];
        assert_eq!(store_body(small.clone()), (CODEC_RAW, small.clone()));
        assert_eq!(load_body(CODEC_RAW, small.clone()), Ok(small));
        assert!(load_body(9, Vec::new()).is_err());
        assert!(load_body(CODEC_ZSTD, vec![1, 2, 3]).is_err());
    }

    #[test]
    fn chain_is_pinned_and_order_sensitive() {
        let a = chain_next(&GENESIS, 1, &Digest::of(b"a"));
        let b = chain_next(&a, 2, &Digest::of(b"b"));
        assert_ne!(chain_next(&GENESIS, 1, &Digest::of(b"b")), a);
        assert_ne!(chain_next(&a, 3, &Digest::of(b"b")), b);
        assert_eq!(
            b.to_hex(),
            "57762deba1a7d328885abd006c486f3501a6105ef4287810f5c28bc4fb1a293f"
        );
    }

    #[test]
    fn rows_of_one_event_share_a_header_and_round_trip() {
        let base = match sample().body {
            RecordBody::Chunk(c) => c.changes[0].clone(),
            _ => unreachable!(),
        };
        let mut changes = Vec::new();
        for (row, pos) in [(0, 10), (1, 10), (2, 10), (0, 20), (5, 20)] {
            let mut c = base.clone();
            c.id.row = row;
            c.id.event_pos = pos;
            changes.push(c);
        }
        let chunk = GroupChunk {
            changes,
            ..GroupChunk::default()
        };
        let bytes = codec::to_canonical(&chunk);
        let one = codec::to_canonical(&GroupChunk {
            changes: vec![base],
            ..GroupChunk::default()
        });
        // 3 event headers for 5 rows, not 5 change identities.
        assert!(
            bytes.len() < 5 * one.len() - 80,
            "{} vs {}",
            bytes.len(),
            one.len()
        );
        let back: GroupChunk = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(back, chunk);
    }

    #[test]
    fn tables_counts_changes_raw_and_pauses() {
        assert_eq!(sample().tables(), vec![("db".into(), "t".into(), 3)]);
        assert!(sample().is_group_end());
    }
}
