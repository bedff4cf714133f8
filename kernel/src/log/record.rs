//! The persisted L record (kind `LREC`) and what it can hold. A record's identity and
//! bytes depend on the source history only (group start, chunk number, end, body), never
//! on read or commit batching, which is what lets a re-read after a restart be compared
//! byte for byte with what is stored (the module doc of [`crate::log`]).

use super::{GroupChunk, LSeq};
use crate::change::GroupEnd;
use crate::codec::{self, Versioned};
use crate::ids::{Digest, Generation, JobId};
use crate::position::{BinlogPos, Gtid, Lineage};
use serde::{Deserialize, Serialize};

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

/// LREC versions: 1 holds every body but [`RecordBody::Switch`], 2 adds it. A record
/// that fits v1 is still written as v1 ([`LogRecord::encode`]), so the bytes (and the
/// digests an open group's re-read is checked against) of every other record are the
/// ones earlier builds wrote.
impl Versioned for LogRecord {
    const KIND: [u8; 4] = *b"LREC";
    const VERSION: u16 = 2;
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
    /// The stream's source moved to another server (LREC v2, `backfill repoint`,
    /// DESIGN §18). The record starts at D on the old lineage and ends at the position
    /// the new server maps D's GTID to, in the next lineage epoch; it holds no change.
    Switch(Box<LineageSwitch>),
}

/// A lineage switch: from here on the stream reads `to`'s binlog from `to_pos`, the end
/// of the group `gtid` there, which is the group that ended at `from_pos` on `from`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineageSwitch {
    pub from: Lineage,
    pub to: Lineage,
    /// D's GTID: the last group L holds, found in `to`'s binlog.
    pub gtid: Gtid,
    /// D on the old lineage (in its epoch).
    pub from_pos: BinlogPos,
    /// The end of `gtid`'s group in `to`'s binlog, in the new epoch.
    pub to_pos: BinlogPos,
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
    pub first_seq: LSeq,
    pub last_seq: LSeq,
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
    #[serde(with = "serde_bytes")]
    pub table_map: Vec<u8>,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

impl LogRecord {
    /// The record's canonical versioned bytes: v1 unless the body needs v2.
    pub fn encode(&self) -> Vec<u8> {
        match self.body {
            RecordBody::Switch(_) => codec::encode(self),
            _ => codec::encode_version(Self::KIND, 1, self),
        }
    }

    /// Decodes v1 or v2 bytes; a v1 record cannot hold a v2 body.
    pub fn decode(bytes: &[u8]) -> Result<LogRecord, codec::DecodeError> {
        let (version, body) = codec::split::<LogRecord>(bytes)?;
        let rec: LogRecord = codec::decode_body(&Self::KIND, version, body)?;
        if version < 2 && matches!(rec.body, RecordBody::Switch(_)) {
            return Err(codec::DecodeError::Malformed {
                kind: "LREC".into(),
                version,
                reason: "a lineage switch body in a v1 record".into(),
            });
        }
        Ok(rec)
    }

    /// blake3 of the record's canonical versioned bytes.
    pub fn digest(&self) -> Digest {
        Digest::of(&self.encode())
    }

    /// Number of changes and raw rows events held (a measure of the record's size).
    pub fn size(&self) -> usize {
        match &self.body {
            RecordBody::Chunk(c) | RecordBody::Held(XaHeld { chunk: c, .. }) => {
                c.changes.len() + c.raw.len()
            }
            RecordBody::Progress | RecordBody::Dropped { .. } | RecordBody::Switch(_) => 0,
        }
    }

    /// True for a record that closes its group (or a progress record).
    pub fn is_group_end(&self) -> bool {
        self.end.is_some()
    }

    pub(super) fn kind_code(&self) -> u8 {
        match self.body {
            RecordBody::Chunk(_) => 1,
            RecordBody::Progress => 2,
            RecordBody::Held(_) => 3,
            RecordBody::Dropped { .. } => 4,
            RecordBody::Switch(_) => 5,
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
