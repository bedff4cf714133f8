//! Captured changes and groups: the units L stores and the ledger applies (DESIGN §3).
//!
//! Identities come from the source history only: a change is named by
//! `(lineage, schema, table, binlog file, event position, row index in event, op)`, a group
//! by the position of the event that ends it (its XID, or the QUERY closing a standalone
//! DDL) on its lineage. Neither depends on how a reader batched its reads, so a restart
//! with other batch sizes names the same content the same way (seed 002).
//! A primary-key-changing UPDATE is ONE change with both images, never a DELETE/INSERT
//! pair that could be acknowledged half-way (seed 000).
use crate::ids::Digest;
use crate::position::{BinlogPos, Gtid};
use crate::value::Row;
use serde::{Deserialize, Serialize};

/// The kind of row change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    Insert,
    Update,
    Delete,
}

/// The identity of one row change (DESIGN §3.2).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChangeId {
    pub lineage: Digest,
    pub schema: String,
    pub table: String,
    pub file: String,
    /// Start position of the rows event.
    pub event_pos: u64,
    /// Index of the row inside the event.
    pub row: u32,
    pub op: Op,
}

/// One row change with full images as server values. `before` is set for updates and
/// deletes, `after` for inserts and updates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub id: ChangeId,
    pub before: Option<Row>,
    pub after: Option<Row>,
}

impl Change {
    /// The row images the change carries (before, then after).
    pub fn images(&self) -> impl Iterator<Item = &Row> {
        self.before.iter().chain(self.after.iter())
    }
}

/// Where a complete group ends: the resume position after it, and its GTID.
/// D and T's replay cursor are both of this type, and only ever point at group ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupEnd {
    pub pos: BinlogPos,
    pub gtid: Option<Gtid>,
}

/// A cursor into L: a group end plus, for a group stored or applied in chunks, the
/// number of chunks already covered (0 = the group is complete).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupCursor {
    pub end: GroupEnd,
    pub chunk: u32,
}

/// The identity of a complete group: its lineage and where it ends.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GroupId {
    pub lineage: Digest,
    pub end: GroupEnd,
}
