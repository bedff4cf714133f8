//! One chunk of a group and its compact persisted form. Encoding and decoding are exact
//! inverses (the change identities are rebuilt from the shared event headers), so a
//! chunk's digest does not depend on how it is laid out in memory.

use super::{PauseSeen, RawRows, StatementSeen};
use crate::change::Change;
use crate::control::IntentSeen;
use crate::ids::Digest;
use serde::{Deserialize, Serialize};

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
