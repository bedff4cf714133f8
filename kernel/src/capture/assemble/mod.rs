//! Group assembly: binlog events in, L records out. No I/O (STYLE §4).
//!
//! Why the records are the same however the stream was batched or restarted (§3.1, I3):
//! * A group starts where the group before it ended (`start`) and ends at its XID, COMMIT,
//!   XA PREPARE or the QUERY closing a standalone statement: both are positions in the
//!   source history, never counters of this process.
//! * A group is cut into chunks after every `chunk_changes` changes, counted from the
//!   group's first event; the bound is fixed per stream. A re-read from the same start
//!   therefore regenerates byte-identical chunks.
//! * Which table-generations are captured is decided by the B and K intents in the
//!   stream itself (state restored from L up to D on restart), never by job state.
//! * Before the first chunk of a multi-chunk group is emitted, a progress record moves
//!   the last recorded end to the group's start, so D (the end of the last record that
//!   closes a group) is exactly where a re-read of the open group begins.
//!
//! XA (DESIGN §3.8; MariaDB 10.11 and MySQL 8 log a prepared transaction as its own group
//! `XA START xid`, rows, `XA END xid`, XA_PREPARE event, and its outcome later as a group
//! holding only `XA COMMIT xid` or `XA ROLLBACK xid`; MariaDB logs `XA COMMIT ... ONE
//! PHASE` as an ordinary transaction):
//! * A prepared group touching a captured table is emitted as Held records (not changes of
//!   any table); the record ending it registers the hold with D past the XA PREPARE.
//! * At the `XA COMMIT` the capturer emits [`Emit::Release`]: the reader appends every
//!   held chunk again, unchanged, as the chunks of the commit's group (start and end are
//!   the commit group's, the change identities keep their original event positions), and
//!   the last one drops the hold. Chunk bytes depend on the prepared group only, so the
//!   released group is identical however the stream was batched or restarted.
//! * At the `XA ROLLBACK` a Dropped record drops the hold; its changes never take effect.
//! * Which xids are held is restored from the holds at D on restart.
//!
//! Layout: this module holds the capturer's state and the event dispatch, `query` QUERY
//! events (transaction control, XA outcomes, statements naming a captured table),
//! `rows` table maps, rows and control-table intents, `group` chunk cuts and group
//! ends, `pause` pausing a table at a position. All of it is pure.
#[cfg(test)]
mod fixtures;
mod group;
mod pause;
mod query;
mod rows;
pub(crate) use rows::image_problems;
#[cfg(test)]
mod tests;

use crate::capture::decode::RowDecoder;
use crate::capture::events::{self, types};
use crate::capture::{CaptureSet, SharedCaptureSet};
use crate::change::GroupEnd;
use crate::error::{DefiniteCode, Error, Result};
use crate::ids::{Digest, Generation, JobId};
use crate::log::{Entry, GroupChunk, LogRecord, RecordBody, XaHeld};
use crate::position::{BinlogPos, Gtid};
use mysql_async::binlog::events::{Event, EventData, QueryEvent, RotateEvent, TableMapEvent};
use mysql_async::binlog::EventType;
use std::collections::{BTreeSet, HashMap};

type Key = (JobId, Generation);

/// What a table id maps to.
enum MapInfo {
    Control(TableMapEvent<'static>),
    Table {
        schema: String,
        table: String,
        tme: TableMapEvent<'static>,
        /// The table map event's bytes, kept with raw rows of a paused table.
        raw: Vec<u8>,
        /// Its row decoder, built once per table map.
        decoder: std::result::Result<RowDecoder, String>,
    },
    Other,
}

struct OpenGroup {
    start: GroupEnd,
    gtid: Option<Gtid>,
    /// A statement group without BEGIN: it ends with its first non-BEGIN QUERY.
    standalone: bool,
    /// MySQL: after a GTID event, whether the next QUERY is BEGIN is not known yet.
    undecided: bool,
    chunk_no: u32,
    chunk: GroupChunk,
    count: usize,
    /// The xid of an XA transaction (from its XA START): its chunks are held.
    xa: Option<String>,
}

/// What the capturer asks the reader to store.
#[derive(Clone, Debug, PartialEq)]
pub enum Emit {
    /// An L record (with the hold its storing releases, if any).
    Record(Entry),
    /// Append the held chunks of `xid` again as the group `start`..`end` of its XA COMMIT;
    /// the last one releases the hold.
    Release(Release),
}

/// A held XA group taking effect at its XA COMMIT.
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub xid: String,
    pub start: BinlogPos,
    pub gtid: Option<Gtid>,
    pub end: GroupEnd,
}

impl Release {
    /// The record of the commit's group for held chunk `held` (chunk `n` of `last`).
    pub fn record(&self, held: XaHeld, n: u32, last: bool) -> Entry {
        Entry {
            record: LogRecord {
                start: self.start.clone(),
                chunk: n,
                gtid: self.gtid.clone(),
                end: last.then(|| self.end.clone()),
                body: RecordBody::Chunk(held.chunk),
            },
            releases: last.then(|| self.xid.clone()),
        }
    }
}

/// How a group ends.
enum Closing {
    /// XID, COMMIT, ROLLBACK, a standalone statement.
    Normal,
    /// The XA_PREPARE event of an XA group.
    XaPrepare,
    /// `XA COMMIT xid` (two-phase, its own group).
    XaCommit(String),
    /// `XA ROLLBACK xid`.
    XaRollback(String),
}

/// The state restored from L up to D.
#[derive(Clone, Debug, Default)]
pub struct Restored {
    pub active: BTreeSet<Key>,
    pub cancelled: BTreeSet<Key>,
    pub paused: BTreeSet<Key>,
    /// xids of the prepared groups held at D.
    pub held: BTreeSet<String>,
}

/// Turns events into L records.
pub struct Capturer {
    lineage: Digest,
    control_schema: String,
    set: SharedCaptureSet,
    chunk_changes: usize,
    file: String,
    /// The lineage epoch of D (`BinlogPos::epoch`): every position read is placed in it.
    epoch: u32,
    checksum_pending: bool,
    last_end: GroupEnd,
    last_recorded_end: GroupEnd,
    group: Option<OpenGroup>,
    state: Restored,
    maps: HashMap<u64, MapInfo>,
    /// Table-map checks against a sealed schema, per table id and generation; a table map
    /// arriving again for the id (every statement sends one) clears them.
    checked: HashMap<(u64, Key), Vec<String>>,
    out: Vec<Emit>,
}

fn pos_of(ev: &Event) -> (u64, u64) {
    let h = ev.header();
    let end = u64::from(h.log_pos());
    (end.saturating_sub(u64::from(h.event_size())), end)
}

impl Capturer {
    /// A capturer resuming after `restart` (D) with the state restored from L.
    pub fn new(
        lineage: Digest,
        control_schema: &str,
        set: SharedCaptureSet,
        chunk_changes: u32,
        restart: GroupEnd,
        state: Restored,
    ) -> Capturer {
        Capturer {
            lineage,
            control_schema: control_schema.to_string(),
            set,
            chunk_changes: chunk_changes.max(1) as usize,
            file: restart.pos.file.clone(),
            epoch: restart.pos.epoch(),
            checksum_pending: true,
            last_end: restart.clone(),
            last_recorded_end: restart,
            group: None,
            state,
            maps: HashMap::new(),
            checked: HashMap::new(),
            out: Vec::new(),
        }
    }

    /// Records emitted since the last call.
    pub fn take(&mut self) -> Vec<Emit> {
        std::mem::take(&mut self.out)
    }

    /// Records waiting to be taken.
    pub fn pending(&self) -> usize {
        self.out.len()
    }

    /// True while a group is open (between its first event and its end).
    pub fn in_group(&self) -> bool {
        self.group.is_some()
    }

    /// The end of the last complete group read.
    pub fn last_end(&self) -> &GroupEnd {
        &self.last_end
    }

    /// The current binlog file.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Emits a progress record when groups of no captured table were read since the last
    /// record and no group is open. Returns whether it did.
    pub fn progress(&mut self) -> bool {
        if self.group.is_some() || self.last_end == self.last_recorded_end {
            return false;
        }
        self.emit_progress(self.last_end.clone());
        true
    }

    fn emit_progress(&mut self, end: GroupEnd) {
        self.push(LogRecord {
            start: self.last_recorded_end.pos.clone(),
            chunk: 0,
            gtid: end.gtid.clone(),
            end: Some(end.clone()),
            body: RecordBody::Progress,
        });
        self.last_recorded_end = end;
    }

    fn push(&mut self, record: LogRecord) {
        self.out.push(Emit::Record(record.into()));
    }

    /// Processes one event.
    pub fn on_event(&mut self, ev: &Event) -> Result<()> {
        let raw_type = ev.header().event_type_raw();
        let (start, end) = pos_of(ev);
        let at = BinlogPos::new(self.file.clone(), start);
        match raw_type {
            t if t == EventType::ROTATE_EVENT as u8 => self.on_rotate(ev)?,
            t if t == EventType::FORMAT_DESCRIPTION_EVENT as u8 => self.checksum_pending = false,
            types::MARIADB_GTID => {
                let g = events::parse_mariadb_gtid(ev.data(), ev.header().server_id())
                    .ok_or_else(|| malformed("MariaDB GTID", &at))?;
                self.open(Some(g.gtid.clone()), g.standalone(), false, &at)?;
                if g.prepared_xa() {
                    // MariaDB logs the XA START of a prepared group inside its GTID event.
                    if let Some(open) = &mut self.group {
                        open.xa = g.xid.clone();
                    }
                }
            }
            t if t == EventType::GTID_EVENT as u8 || t == EventType::ANONYMOUS_GTID_EVENT as u8 => {
                self.open(mysql_gtid(ev), false, true, &at)?;
            }
            t if t == EventType::QUERY_EVENT as u8 => {
                let q: QueryEvent<'_> = ev.read_event().map_err(|e| io("QUERY", &at, e))?;
                self.on_query(&q, &at, end)?;
            }
            t if t == EventType::TABLE_MAP_EVENT as u8 => {
                let tme: TableMapEvent<'_> =
                    ev.read_event().map_err(|e| io("TABLE_MAP", &at, e))?;
                self.on_table_map(tme.into_owned(), ev.data());
            }
            t if t == EventType::XID_EVENT as u8 => self.close(end, Closing::Normal),
            t if t == EventType::XA_PREPARE_LOG_EVENT as u8 => {
                let closing = self.on_xa_prepare(events::parse_xa_prepare(ev.data()), &at);
                self.close(end, closing);
            }
            t if is_rows(t) => self.on_rows(ev, &at)?,
            types::QUERY_COMPRESSED => {
                if self.group.is_some() {
                    self.pause_all_active(&at, "a compressed QUERY event (log_bin_compress)");
                }
            }
            t if (types::FIRST_COMPRESSED_ROWS..=types::LAST_COMPRESSED_ROWS).contains(&t) => {
                self.on_compressed_rows(ev, &at);
            }
            t if t == EventType::TRANSACTION_PAYLOAD_EVENT as u8 => {
                // MySQL binlog_transaction_compression=ON: the whole transaction (its rows
                // and its XID) is one compressed event. Not decoded: every captured table
                // pauses at its position rather than lose or misplace its changes.
                self.pause_all_active(
                    &at,
                    "a compressed transaction payload (MySQL binlog_transaction_compression=ON: turn it off)",
                );
                self.close(end, Closing::Normal);
            }
            t if is_ignorable(t) => {}
            t => {
                if self.group.is_some() {
                    self.pause_all_active(&at, &format!("an unknown event type {t}"));
                }
            }
        }
        Ok(())
    }

    /// A compressed rows event (MariaDB log_bin_compress) is not decoded: its table, if
    /// captured, pauses at its position.
    fn on_compressed_rows(&mut self, ev: &Event, at: &BinlogPos) {
        let id = table_id_of(ev.data());
        if let Some(MapInfo::Table { schema, table, .. }) = self.maps.get(&id) {
            let (s, t2) = (schema.clone(), table.clone());
            self.pause_table(
                &s,
                &t2,
                at,
                DefiniteCode::Uncapturable,
                "a compressed rows event (log_bin_compress): turn log_bin_compress off".into(),
            );
        }
    }

    fn on_rotate(&mut self, ev: &Event) -> Result<()> {
        let at = BinlogPos::new(self.file.clone(), 0);
        let r: RotateEvent<'_> = ev.read_event().map_err(|e| io("ROTATE", &at, e))?;
        let fake = ev.header().log_pos() == 0 || ev.header().flags_raw() & 0x20 != 0;
        let name = if fake {
            events::fake_rotate_name(r.name_raw(), self.checksum_pending)
        } else {
            r.name().into_owned()
        };
        self.file = BinlogPos::new(name, 0).in_epoch(self.epoch).file;
        // table ids are only valid within one file's table maps
        if !fake {
            self.maps.clear();
            self.checked.clear();
        }
        Ok(())
    }

    fn open(
        &mut self,
        gtid: Option<Gtid>,
        standalone: bool,
        undecided: bool,
        at: &BinlogPos,
    ) -> Result<()> {
        if self.group.is_some() {
            return Err(Error::transient(format!(
                "binlog stream: a new group starts at {at} while the previous one is open; \
                 restarting from the capture position"
            )));
        }
        self.group = Some(OpenGroup {
            start: self.last_end.clone(),
            gtid,
            standalone,
            undecided,
            chunk_no: 0,
            chunk: GroupChunk::default(),
            count: 0,
            xa: None,
        });
        Ok(())
    }

    fn ensure_open(&mut self, at: &BinlogPos) -> Result<()> {
        if self.group.is_none() {
            self.open(None, false, false, at)?;
        }
        Ok(())
    }
}

/// The GTID of a MySQL GTID event (`uuid:gno`), or None for an anonymous one.
fn mysql_gtid(ev: &Event) -> Option<Gtid> {
    match ev.read_data() {
        Ok(Some(EventData::GtidEvent(g))) => {
            let sid: String = g.sid().iter().map(|b| format!("{b:02x}")).collect();
            let uuid = format!(
                "{}-{}-{}-{}-{}",
                &sid[0..8],
                &sid[8..12],
                &sid[12..16],
                &sid[16..20],
                &sid[20..32]
            );
            Some(Gtid::Mysql { uuid, seq: g.gno() })
        }
        _ => None,
    }
}

fn read_set(set: &SharedCaptureSet) -> std::sync::RwLockReadGuard<'_, CaptureSet> {
    set.read().unwrap_or_else(|p| p.into_inner())
}

fn is_rows(t: u8) -> bool {
    use EventType::*;
    [
        WRITE_ROWS_EVENT,
        UPDATE_ROWS_EVENT,
        DELETE_ROWS_EVENT,
        WRITE_ROWS_EVENT_V1,
        UPDATE_ROWS_EVENT_V1,
        DELETE_ROWS_EVENT_V1,
        PARTIAL_UPDATE_ROWS_EVENT,
    ]
    .iter()
    .any(|e| *e as u8 == t)
}

fn is_ignorable(t: u8) -> bool {
    use EventType::*;
    [
        STOP_EVENT,
        INTVAR_EVENT,
        RAND_EVENT,
        USER_VAR_EVENT,
        HEARTBEAT_EVENT,
        IGNORABLE_EVENT,
        ROWS_QUERY_EVENT,
        PREVIOUS_GTIDS_EVENT,
        TRANSACTION_CONTEXT_EVENT,
        VIEW_CHANGE_EVENT,
        INCIDENT_EVENT,
    ]
    .iter()
    .any(|e| *e as u8 == t)
        || [
            types::ANNOTATE_ROWS,
            types::BINLOG_CHECKPOINT,
            types::GTID_LIST,
            types::START_ENCRYPTION,
        ]
        .contains(&t)
}

fn table_id_of(data: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    if let Some(s) = data.get(0..6) {
        b[..6].copy_from_slice(s);
    }
    u64::from_le_bytes(b)
}

fn malformed(what: &str, at: &BinlogPos) -> Error {
    Error::transient(format!(
        "malformed {what} event at {at}; restarting from the capture position"
    ))
}

fn io(what: &str, at: &BinlogPos, e: std::io::Error) -> Error {
    Error::transient(format!(
        "cannot parse {what} event at {at}: {e}; restarting from the capture position"
    ))
}
