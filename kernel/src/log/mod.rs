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
//!
//! Layout: `record` and `chunk` are the persisted record types (kind `LREC`), `body`
//! how their bytes are stored, `chain` the hash chain and its checks, `restart` D,
//! `append` the one transaction that stores records and moves D, `hold` the XA holds
//! that transaction keeps in step with D, `read` the verified reads, `markers` the
//! intent markers and the bounded waits on them, `paused` the reader's pauses, `seq` the
//! typed record number [`LSeq`], `prune` the deletion of records below a GC horizon,
//! `switch` the lineage switch record of a repoint, `wake` the in-process wake-ups of
//! the waits on L.
mod append;
mod body;
mod chain;
mod chunk;
mod hold;
mod markers;
mod paused;
mod prune;
mod read;
mod record;
mod restart;
mod seq;
pub mod stop;
mod switch;
#[cfg(test)]
mod tests;
pub mod wake;

pub use append::{append, append_fenced};
pub use chain::{chain_next, check_tail, verify_chain, StoredRecord, Tail, GENESIS};
pub use chunk::GroupChunk;
pub use hold::holds;
pub use markers::{marker, markers_of, wait_for_marker, wait_for_position, MarkerSeen, WAIT_POLL};
pub use paused::{ddls, pauses, DdlRow, PauseRow};
pub use prune::{horizon, prune_batch, Horizon};
pub use read::{
    read_links, read_range, seq_at_or_before, table_records, table_seqs_desc, ChainLink,
};
pub use record::{
    Entry, Hold, LineageSwitch, LogRecord, PauseSeen, RawRows, RecordBody, StatementSeen, XaHeld,
};
pub use restart::{init_position, load_position, Position};
pub use seq::LSeq;
pub use switch::{append_switch, live_position, switch_record};

use crate::error::{from_sqlx, DefiniteCode, Error, Result};
use crate::ids::Digest;
use crate::position::Gtid;
use sqlx::Row as _;

fn st(what: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| from_sqlx(what, &e)
}

fn corrupt(msg: String) -> Error {
    Error::definite(DefiniteCode::EvidenceCorrupt, msg)
}

fn digest_col(row: &sqlx::mysql::MySqlRow, col: &str) -> Result<Digest> {
    let b: Vec<u8> = row.try_get(col).map_err(st("reading the change log"))?;
    Digest::from_slice(&b)
        .ok_or_else(|| corrupt(format!("change log column {col} is not 32 bytes")))
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
