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
use super::decode::{check_table_map, RowDecoder};
use super::events::{self, types, QueryKind};
use super::{CaptureSet, SharedCaptureSet};
use crate::change::{Change, ChangeId, GroupEnd, Op};
use crate::control::{Intent, IntentKind, IntentSeen};
use crate::error::{Definite, DefiniteCode, Error, Result};
use crate::ids::{Digest, Generation, JobId};
use crate::log::{
    Entry, GroupChunk, LogRecord, PauseSeen, RawRows, RecordBody, StatementSeen, XaHeld,
};
use crate::position::{BinlogPos, Gtid};
use crate::value::SqlValue;
use mysql_async::binlog::events::{
    Event, EventData, QueryEvent, RotateEvent, RowsEventData, TableMapEvent,
};
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
                let gtid = match ev.read_data() {
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
                };
                self.open(gtid, false, true, &at)?;
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
                let id = table_id_of(ev.data());
                if let Some(MapInfo::Table { schema, table, .. }) = self.maps.get(&id) {
                    let (s, t2) = (schema.clone(), table.clone());
                    self.pause_table(
                        &s,
                        &t2,
                        &at,
                        DefiniteCode::Uncapturable,
                        "a compressed rows event (log_bin_compress): turn log_bin_compress off"
                            .into(),
                    );
                }
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

    fn on_rotate(&mut self, ev: &Event) -> Result<()> {
        let at = BinlogPos::new(self.file.clone(), 0);
        let r: RotateEvent<'_> = ev.read_event().map_err(|e| io("ROTATE", &at, e))?;
        let fake = ev.header().log_pos() == 0 || ev.header().flags_raw() & 0x20 != 0;
        self.file = if fake {
            events::fake_rotate_name(r.name_raw(), self.checksum_pending)
        } else {
            r.name().into_owned()
        };
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
                 restarting from D"
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

    fn on_query(&mut self, q: &QueryEvent<'_>, at: &BinlogPos, end: u64) -> Result<()> {
        let sql = q.query();
        let kind = events::classify_query(&sql);
        match kind {
            QueryKind::Begin => {
                self.ensure_open(at)?;
                if let Some(g) = &mut self.group {
                    g.undecided = false;
                    g.standalone = false;
                }
            }
            QueryKind::Commit | QueryKind::Rollback => {
                self.ensure_open(at)?;
                self.close(end, Closing::Normal);
            }
            QueryKind::XaStart => {
                self.ensure_open(at)?;
                if let Some(g) = &mut self.group {
                    g.undecided = false;
                    g.standalone = false;
                    g.xa = events::xa_xid(&sql);
                }
            }
            QueryKind::XaCommit | QueryKind::XaRollback => {
                self.ensure_open(at)?;
                let closing = self.xa_outcome(&sql, kind, at);
                self.close(end, closing);
            }
            QueryKind::Savepoint | QueryKind::XaInner => {}
            QueryKind::CreateIfNotExists => {
                self.ensure_open(at)?;
                let ends = self
                    .group
                    .as_ref()
                    .is_some_and(|g| g.standalone || g.undecided);
                if ends {
                    self.close(end, Closing::Normal);
                }
            }
            QueryKind::Dml | QueryKind::Ddl => {
                self.ensure_open(at)?;
                let schema = q.schema().into_owned();
                self.on_statement(&sql, &schema, at, kind);
                let ends = self
                    .group
                    .as_ref()
                    .is_some_and(|g| g.standalone || g.undecided);
                if ends {
                    self.close(end, Closing::Normal);
                }
            }
        }
        Ok(())
    }

    /// How an XA_PREPARE event closes the open group: held as a prepared group, or, with
    /// one_phase (MySQL's `XA COMMIT ... ONE PHASE`), committed here like any group.
    fn on_xa_prepare(&mut self, parsed: Option<(bool, String)>, at: &BinlogPos) -> Closing {
        let (one_phase, xid) = match parsed {
            Some((one, xid)) => (one, Some(xid)),
            None => (false, None),
        };
        let Some(g) = &mut self.group else {
            return Closing::Normal;
        };
        if g.xa.is_none() && g.chunk_no == 0 {
            // No XA START seen (e.g. not logged): nothing was cut yet, the event's xid holds.
            g.xa = xid;
        }
        match (&g.xa, one_phase) {
            (Some(_), false) => Closing::XaPrepare,
            (Some(xid), true) => {
                let xid = xid.clone();
                self.end_one_phase(&xid, at);
                Closing::Normal
            }
            (None, _) => {
                self.refuse_xa(at);
                Closing::Normal
            }
        }
    }

    /// A one-phase XA transaction commits where it ends. Chunks already emitted as held
    /// cannot be turned back into changes: pause rather than lose them.
    fn end_one_phase(&mut self, xid: &str, at: &BinlogPos) {
        let cut = self.group.as_ref().is_some_and(|g| g.chunk_no > 0);
        if let Some(g) = &mut self.group {
            g.xa = None;
        }
        if cut {
            self.pause_all_active(
                at,
                &format!("a one-phase XA transaction {xid} larger than one L chunk"),
            );
        }
    }

    /// How an `XA COMMIT|ROLLBACK xid` statement closes the open group.
    fn xa_outcome(&mut self, sql: &str, kind: QueryKind, at: &BinlogPos) -> Closing {
        let inside = self.group.as_ref().and_then(|g| g.xa.clone());
        if let Some(xid) = inside {
            // `XA COMMIT xid ONE PHASE` as a statement inside the XA group it ends.
            self.end_one_phase(&xid, at);
            return Closing::Normal;
        }
        match events::xa_xid(sql) {
            Some(xid) if self.state.held.contains(&xid) => {
                if kind == QueryKind::XaCommit {
                    Closing::XaCommit(xid)
                } else {
                    Closing::XaRollback(xid)
                }
            }
            // A prepared group that touched no captured table (nothing held).
            _ => Closing::Normal,
        }
    }

    fn on_statement(&mut self, sql: &str, default_schema: &str, at: &BinlogPos, kind: QueryKind) {
        if kind == QueryKind::Ddl
            && events::ddl_changes_table(
                sql,
                default_schema,
                &self.control_schema,
                crate::control::TABLE,
            )
        {
            // Intents can no longer be recognised reliably: every captured table pauses.
            if let Some(g) = &mut self.group {
                g.chunk.statements.push(StatementSeen {
                    at: at.clone(),
                    default_schema: default_schema.to_string(),
                    sql: sql.to_string(),
                });
            }
            let short: String = sql.chars().take(200).collect();
            let names: Vec<(String, String)> = read_set(&self.set)
                .tables
                .iter()
                .filter(|t| self.state.active.contains(&(t.job, t.generation)))
                .map(|t| (t.sealed.database.clone(), t.sealed.table.clone()))
                .collect();
            for (s, t) in names {
                self.pause_table(
                    &s,
                    &t,
                    at,
                    DefiniteCode::SchemaChanged,
                    format!(
                        "a DDL on the control table `{}`.{} (`{short}`)",
                        self.control_schema,
                        crate::control::TABLE
                    ),
                );
            }
            return;
        }
        let set = read_set(&self.set);
        let mut hits: Vec<(String, String)> = Vec::new();
        for t in &set.tables {
            let (s, n) = (&t.sealed.database, &t.sealed.table);
            let key = (t.job, t.generation);
            let names = match kind {
                QueryKind::Ddl => events::ddl_changes_table(sql, default_schema, s, n),
                // Statement-format DML: any mention (a multi-table UPDATE changes every
                // table it names).
                _ => events::names_table(sql, default_schema, s, n),
            };
            if self.state.active.contains(&key) && names && !hits.contains(&(s.clone(), n.clone()))
            {
                hits.push((s.clone(), n.clone()));
            }
        }
        drop(set);
        if hits.is_empty() {
            return;
        }
        if let Some(g) = &mut self.group {
            g.chunk.statements.push(StatementSeen {
                at: at.clone(),
                default_schema: default_schema.to_string(),
                sql: sql.to_string(),
            });
        }
        let (code, what) = match kind {
            QueryKind::Dml => (
                DefiniteCode::Uncapturable,
                "a statement-format DML (a session changed binlog_format): only ROW events can be captured",
            ),
            _ => (
                DefiniteCode::SchemaChanged,
                "a DDL statement: the sealed schema no longer describes the table",
            ),
        };
        let short: String = sql.chars().take(200).collect();
        for (s, t) in hits {
            self.pause_table(&s, &t, at, code, format!("{what} (`{short}`)"));
        }
    }

    fn on_table_map(&mut self, tme: TableMapEvent<'static>, raw: &[u8]) {
        let schema = tme.database_name().into_owned();
        let table = tme.table_name().into_owned();
        let id = tme.table_id();
        let info = if schema == self.control_schema && table == crate::control::TABLE {
            MapInfo::Control(tme)
        } else if read_set(&self.set)
            .tables
            .iter()
            .any(|t| t.sealed.database == schema && t.sealed.table == table)
        {
            MapInfo::Table {
                schema,
                table,
                decoder: RowDecoder::new(&tme),
                tme,
                raw: raw.to_vec(),
            }
        } else {
            MapInfo::Other
        };
        self.maps.insert(id, info);
        self.checked.retain(|(i, _), _| *i != id);
    }

    fn on_rows(&mut self, ev: &Event, at: &BinlogPos) -> Result<()> {
        let data = match ev.read_data() {
            Ok(Some(EventData::RowsEvent(r))) => r,
            _ => return Err(malformed("rows", at)),
        };
        let id = data.table_id();
        let Some(info) = self.maps.get(&id) else {
            // A table map always precedes its rows; without it nothing can be decoded.
            return Err(Error::transient(format!(
                "rows event at {at} for table id {id} without a table map; restarting from D"
            )));
        };
        match info {
            MapInfo::Other => Ok(()),
            MapInfo::Control(tme) => {
                let intents = control_intents(&data, tme);
                self.ensure_open(at)?;
                for i in intents {
                    self.on_intent(i, at);
                }
                Ok(())
            }
            MapInfo::Table { schema, table, .. } => {
                let (schema, table) = (schema.clone(), table.clone());
                self.on_table_rows(ev, &data, &schema, &table, id, at)
            }
        }
    }

    fn on_intent(&mut self, intent: Intent, at: &BinlogPos) {
        if self.group.as_ref().is_some_and(|g| g.xa.is_some()) {
            // The service never writes intents in an XA transaction; one that does cannot
            // be placed in binlog order before its outcome is known.
            self.pause_all_active(at, "an XA transaction writing the control table");
            return;
        }
        let key = (intent.job, intent.generation);
        let obsolete = self.state.cancelled.contains(&key);
        if !obsolete {
            match intent.kind {
                IntentKind::B => {
                    self.state.active.insert(key);
                }
                IntentKind::K => {
                    self.state.active.remove(&key);
                    self.state.cancelled.insert(key);
                }
                _ => {}
            }
        }
        if let Some(g) = &mut self.group {
            g.chunk.intents.push(IntentSeen {
                intent,
                at: at.clone(),
                obsolete,
            });
        }
    }

    fn on_table_rows(
        &mut self,
        ev: &Event,
        data: &RowsEventData<'_>,
        schema: &str,
        table: &str,
        id: u64,
        at: &BinlogPos,
    ) -> Result<()> {
        let set = read_set(&self.set);
        let entries: Vec<(Key, crate::schema::SealedSchema)> = set
            .tables
            .iter()
            .filter(|t| t.sealed.database == schema && t.sealed.table == table)
            .filter(|t| self.state.active.contains(&(t.job, t.generation)))
            .map(|t| ((t.job, t.generation), t.sealed.clone()))
            .collect();
        drop(set);
        let Some((key, sealed)) = entries.first().cloned() else {
            return Ok(()); // not captured at this position (before its B or after its K)
        };
        self.ensure_open(at)?;
        if entries.iter().all(|(k, _)| !self.state.paused.contains(k)) {
            let (tme, decoder) = match self.maps.get(&id) {
                Some(MapInfo::Table { tme, decoder, .. }) => (tme, decoder),
                _ => return Ok(()),
            };
            let mut problems = self
                .checked
                .entry((id, key))
                .or_insert_with(|| check_table_map(tme, &sealed))
                .clone();
            problems.extend(image_problems(data));
            if problems.is_empty() {
                let rows = decoder
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|d| d.rows(data, &sealed));
                match rows {
                    Ok(rows) => {
                        let op = op_of(data);
                        self.push_changes(op, rows, schema, table, at);
                        return Ok(());
                    }
                    Err(p) => problems.push(p),
                }
            }
            let code = if problems.iter().any(|p| p.starts_with("column")) {
                DefiniteCode::SchemaChanged
            } else {
                DefiniteCode::Uncapturable
            };
            self.pause_table(schema, table, at, code, problems.join("; "));
        }
        self.push_raw(ev, schema, table, id, at);
        Ok(())
    }

    fn push_changes(
        &mut self,
        op: Op,
        rows: Vec<super::decode::Images>,
        schema: &str,
        table: &str,
        at: &BinlogPos,
    ) {
        for (i, (before, after)) in rows.into_iter().enumerate() {
            let change = Change {
                id: ChangeId {
                    lineage: self.lineage,
                    schema: schema.to_string(),
                    table: table.to_string(),
                    file: at.file.clone(),
                    event_pos: at.pos,
                    row: i as u32,
                    op,
                },
                before,
                after,
            };
            if let Some(g) = &mut self.group {
                g.chunk.changes.push(change);
                g.count += 1;
            }
            self.maybe_cut();
        }
    }

    fn push_raw(&mut self, ev: &Event, schema: &str, table: &str, id: u64, at: &BinlogPos) {
        let table_map = match self.maps.get(&id) {
            Some(MapInfo::Table { raw, .. }) => raw.clone(),
            _ => Vec::new(),
        };
        if let Some(g) = &mut self.group {
            g.chunk.raw.push(RawRows {
                schema: schema.to_string(),
                table: table.to_string(),
                event_pos: at.pos,
                event_type: ev.header().event_type_raw(),
                table_map,
                data: ev.data().to_vec(),
            });
            g.count += 1;
        }
        self.maybe_cut();
    }

    /// Cuts the open group's chunk when it reached the bound.
    fn maybe_cut(&mut self) {
        let full = self
            .group
            .as_ref()
            .is_some_and(|g| g.count >= self.chunk_changes);
        if !full {
            return;
        }
        let first = self.group.as_ref().is_some_and(|g| g.chunk_no == 0);
        if first {
            let start = self.group.as_ref().map(|g| g.start.clone());
            if let Some(start) = start {
                if start != self.last_recorded_end {
                    self.emit_progress(start);
                }
            }
        }
        if let Some(g) = &mut self.group {
            let chunk = std::mem::take(&mut g.chunk);
            let rec = LogRecord {
                start: g.start.pos.clone(),
                chunk: g.chunk_no,
                gtid: g.gtid.clone(),
                end: None,
                body: body_of(&g.xa, chunk),
            };
            g.chunk_no += 1;
            g.count = 0;
            self.push(rec);
        }
    }

    fn close(&mut self, end: u64, closing: Closing) {
        let Some(mut g) = self.group.take() else {
            return;
        };
        let end = GroupEnd {
            pos: BinlogPos::new(self.file.clone(), end),
            gtid: g.gtid.clone(),
        };
        match closing {
            Closing::XaCommit(xid) => {
                self.state.held.remove(&xid);
                if g.start != self.last_recorded_end {
                    self.emit_progress(g.start.clone());
                }
                self.out.push(Emit::Release(Release {
                    xid,
                    start: g.start.pos.clone(),
                    gtid: g.gtid.clone(),
                    end: end.clone(),
                }));
                self.last_recorded_end = end.clone();
                self.last_end = end;
                return;
            }
            Closing::XaRollback(xid) => {
                self.state.held.remove(&xid);
                self.push(LogRecord {
                    start: g.start.pos.clone(),
                    chunk: 0,
                    gtid: g.gtid.clone(),
                    end: Some(end.clone()),
                    body: RecordBody::Dropped { xid },
                });
                self.last_recorded_end = end.clone();
                self.last_end = end;
                return;
            }
            Closing::XaPrepare => {}
            Closing::Normal => g.xa = None,
        }
        let c = &g.chunk;
        let has = !c.changes.is_empty()
            || !c.intents.is_empty()
            || !c.pauses.is_empty()
            || !c.statements.is_empty()
            || !c.raw.is_empty();
        if has || g.chunk_no > 0 {
            if let Some(xid) = &g.xa {
                self.state.held.insert(xid.clone());
            }
            self.push(LogRecord {
                start: g.start.pos.clone(),
                chunk: g.chunk_no,
                gtid: g.gtid.clone(),
                end: Some(end.clone()),
                body: body_of(&g.xa, g.chunk),
            });
            self.last_recorded_end = end.clone();
        }
        self.last_end = end;
    }

    fn refuse_xa(&mut self, at: &BinlogPos) {
        let touched: Vec<(String, String)> = match &self.group {
            Some(g) => {
                let mut v: Vec<(String, String)> = Vec::new();
                for c in &g.chunk.changes {
                    let k = (c.id.schema.clone(), c.id.table.clone());
                    if !v.contains(&k) {
                        v.push(k);
                    }
                }
                v
            }
            None => Vec::new(),
        };
        for (s, t) in touched {
            self.pause_table(&s, &t, at, DefiniteCode::Uncapturable, "an XA PREPARE group: XA transactions on captured tables are refused (DESIGN §3.8); finish them with XA COMMIT and re-install the table".into());
        }
    }

    fn pause_all_active(&mut self, at: &BinlogPos, what: &str) {
        let set = read_set(&self.set);
        let names: Vec<(String, String)> = set
            .tables
            .iter()
            .filter(|t| self.state.active.contains(&(t.job, t.generation)))
            .map(|t| (t.sealed.database.clone(), t.sealed.table.clone()))
            .collect();
        drop(set);
        for (s, t) in names {
            self.pause_table(
                &s,
                &t,
                at,
                DefiniteCode::Uncapturable,
                format!("{what} inside a transaction"),
            );
        }
    }

    /// Pauses every active, not yet paused generation of `schema`.`table` at `at`.
    fn pause_table(
        &mut self,
        schema: &str,
        table: &str,
        at: &BinlogPos,
        code: DefiniteCode,
        why: String,
    ) {
        let set = read_set(&self.set);
        let keys: Vec<Key> = set
            .tables
            .iter()
            .filter(|t| t.sealed.database == schema && t.sealed.table == table)
            .map(|t| (t.job, t.generation))
            .filter(|k| self.state.active.contains(k) && !self.state.paused.contains(k))
            .collect();
        drop(set);
        for key in keys {
            self.state.paused.insert(key);
            let error = Definite {
                code,
                message: format!(
                    "table `{schema}`.`{table}` ({}) paused at binlog {at}: {why}",
                    key.1
                ),
            };
            if self.group.is_none() {
                self.group = Some(OpenGroup {
                    start: self.last_end.clone(),
                    gtid: None,
                    standalone: true,
                    undecided: false,
                    chunk_no: 0,
                    chunk: GroupChunk::default(),
                    count: 0,
                    xa: None,
                });
            }
            if let Some(g) = &mut self.group {
                g.chunk.pauses.push(PauseSeen {
                    job: key.0,
                    generation: key.1,
                    schema: schema.to_string(),
                    table: table.to_string(),
                    at: at.clone(),
                    error,
                });
            }
        }
    }
}

/// A chunk's body: held while its group is an XA transaction.
fn body_of(xa: &Option<String>, chunk: GroupChunk) -> RecordBody {
    match xa {
        Some(xid) => RecordBody::Held(XaHeld {
            xid: xid.clone(),
            chunk,
        }),
        None => RecordBody::Chunk(chunk),
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
    Error::transient(format!("malformed {what} event at {at}; restarting from D"))
}

fn io(what: &str, at: &BinlogPos, e: std::io::Error) -> Error {
    Error::transient(format!(
        "cannot parse {what} event at {at}: {e}; restarting from D"
    ))
}

/// Rows events must carry every column in both images (binlog_row_image=FULL, §3.7).
fn image_problems(data: &RowsEventData<'_>) -> Vec<String> {
    let n = data.num_columns() as usize;
    let mut out = Vec::new();
    let before = data
        .columns_before_image()
        .is_none_or(|b| b.iter().take(n).filter(|x| **x).count() == n);
    let after = data
        .columns_after_image()
        .is_none_or(|b| b.iter().take(n).filter(|x| **x).count() == n);
    if !before || !after {
        out.push(
            "a rows event without every column (a session with binlog_row_image other than \
             FULL)"
                .to_string(),
        );
    }
    if matches!(data, RowsEventData::PartialUpdateRowsEvent(_)) {
        out.push("a partial JSON update (binlog_row_value_options=PARTIAL_JSON)".to_string());
    }
    out
}

fn op_of(data: &RowsEventData<'_>) -> Op {
    match data {
        RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => Op::Insert,
        RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => Op::Delete,
        _ => Op::Update,
    }
}

fn control_intents(data: &RowsEventData<'_>, tme: &TableMapEvent<'static>) -> Vec<Intent> {
    if op_of(data) != Op::Insert {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in data.rows(tme) {
        let Ok((_, Some(row))) = r else { continue };
        let vals: Vec<SqlValue> = row
            .unwrap()
            .into_iter()
            .map(|v| match v {
                mysql_async::binlog::value::BinlogValue::Value(v) => SqlValue::from(v),
                _ => SqlValue::Null,
            })
            .collect();
        if let Some(i) = Intent::from_row(&vals) {
            out.push(i);
        }
    }
    out
}
