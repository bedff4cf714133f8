//! QUERY events: transaction control opens and closes groups, XA statements decide
//! whether a group is held, released or dropped, and a DDL or statement-format DML naming
//! a captured table (or any DDL on the control table) pauses it at its position. A
//! statement that might name a table counts as naming it: a pause is safe, a miss is not.

use super::{read_set, Capturer, Closing};
use crate::capture::events::{self, QueryKind};
use crate::error::{DefiniteCode, Result};
use crate::log::StatementSeen;
use crate::position::BinlogPos;
use mysql_async::binlog::events::QueryEvent;

impl Capturer {
    pub(super) fn on_query(&mut self, q: &QueryEvent<'_>, at: &BinlogPos, end: u64) -> Result<()> {
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
    pub(super) fn on_xa_prepare(
        &mut self,
        parsed: Option<(bool, String)>,
        at: &BinlogPos,
    ) -> Closing {
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
                &format!("a one-phase XA transaction {xid} larger than one change log chunk"),
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

    /// A DDL on the control table: intents can no longer be recognised reliably, so every
    /// captured table pauses.
    fn on_control_ddl(&mut self, sql: &str, default_schema: &str, at: &BinlogPos) {
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
            self.on_control_ddl(sql, default_schema, at);
            return;
        }
        let set = read_set(&self.set);
        let mut hits: Vec<(String, String)> = Vec::new();
        let mut class: Option<String> = None;
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
                if kind == QueryKind::Ddl && class.is_none() {
                    class = Some(crate::schema_change::classify(sql, &t.sealed).describe());
                }
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
        // DESIGN §16: the class is named (a compatible change is not applied to the target
        // by this version either; it pauses like any other until it is).
        let class = class.map(|c| format!("; {c}")).unwrap_or_default();
        for (s, t) in hits {
            self.pause_table(&s, &t, at, code, format!("{what} (`{short}`){class}"));
        }
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
}
