//! Table maps and rows events: rows of a captured table become changes decoded against
//! its sealed schema, or pause the table (keeping the event raw) when they cannot be
//! decoded exactly; rows of the control table become B/LOW/HIGH/F/K intents, which decide
//! from the stream itself which table-generations are captured.

use super::{malformed, read_set, Capturer, Key, MapInfo};
use crate::capture::decode::{check_table_map, RowDecoder};
use crate::change::{Change, ChangeId, Op};
use crate::control::{Intent, IntentKind, IntentSeen};
use crate::error::{DefiniteCode, Error, Result};
use crate::log::RawRows;
use crate::position::BinlogPos;
use crate::value::SqlValue;
use mysql_async::binlog::events::{Event, EventData, RowsEventData, TableMapEvent};

impl Capturer {
    pub(super) fn on_table_map(&mut self, tme: TableMapEvent<'static>, raw: &[u8]) {
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

    pub(super) fn on_rows(&mut self, ev: &Event, at: &BinlogPos) -> Result<()> {
        let data = match ev.read_data() {
            Ok(Some(EventData::RowsEvent(r))) => r,
            _ => return Err(malformed("rows", at)),
        };
        let id = data.table_id();
        let Some(info) = self.maps.get(&id) else {
            // A table map always precedes its rows; without it nothing can be decoded.
            return Err(Error::transient(format!(
                "rows event at {at} for table id {id} without a table map; restarting from the capture position"
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
        rows: Vec<crate::capture::decode::Images>,
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
}

/// Rows events must carry every column in both images (binlog_row_image=FULL, §3.7).
pub(crate) fn image_problems(data: &RowsEventData<'_>) -> Vec<String> {
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
