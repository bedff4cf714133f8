//! Pausing a table at a position: every active generation of the table gets a definite
//! error in the open group (one is opened if needed), so the pause is stored at exactly
//! the position where capture stopped being exact.
//!
//! A table already paused gets one again at every later event that cannot be captured
//! exactly (a DDL, a compressed rows event, a statement-format DML): its rows are kept
//! raw after the first pause and may be decoded later against a definition sealed after
//! a DDL (DESIGN §16), so each such event must stay in L as a stop at its position; an
//! event that is neither kept raw nor recorded as a pause would be lost silently.

use super::{read_set, Capturer, Key, OpenGroup};
use crate::error::{Definite, DefiniteCode};
use crate::log::{GroupChunk, PauseSeen};
use crate::position::BinlogPos;

impl Capturer {
    pub(super) fn pause_all_active(&mut self, at: &BinlogPos, what: &str) {
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

    /// Pauses every active generation of `schema`.`table` at `at` (again, if it already is).
    pub(super) fn pause_table(
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
            .filter(|k| self.state.active.contains(k))
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
