//! `backfill install` (DESIGN §4, §9): check every precondition, seal the source schema,
//! record the lineage, plan the windows from the real key distribution and give the table
//! a new generation, in that order.
//!
//! Safety argument: nothing is written anywhere before every read-only check has passed,
//! except the state store's own identity token. The lineage is read (and compared with the
//! one the live jobs of the same source recorded) among those checks. Then the control
//! table is created (if missing) and probed with a rolled-back INSERT, the plan is read, and
//! the job, generation, sealed schema, lineage and plan are recorded in ONE state-store
//! transaction (`jobs::record_install`), which re-checks the live generation and the target
//! claim under a row lock, so two concurrent installs of one table cannot both succeed.
//! Nothing is read or written on the target besides checks (§4). A refusal is a definite
//! [`DefiniteCode::Precondition`] error whose message lists every failed check, each naming
//! the object and the fix.
pub mod bulk;
pub mod checks;
pub mod create;
pub mod identity;
pub mod plan;
pub mod privileges;
pub mod select;
pub mod shared;

use crate::io::connect;
use crate::store::jobs::{self, NewJob, TableRef};
use checks::Refusal;
use kernel::error::DefiniteCode;
use kernel::ids::{Digest, Generation, JobId};
use kernel::introspect::{
    self, BinlogStatus, InstallLineage, SelectProbe, ServerFacts, TableFacts,
};
use kernel::redact::redact_url;
use kernel::schema::{quote_ident, SealedSchema};
use kernel::{Error, Result};
use sqlx::MySqlPool;
use std::fmt;
use std::str::FromStr;

/// Default `--window-rows`.
pub const DEFAULT_WINDOW_ROWS: u64 = 50_000;
/// Default `--page-rows`.
pub const DEFAULT_PAGE_ROWS: u64 = 10_000;

/// `db.table`, as given on the command line (either part may be backtick-quoted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableName {
    pub db: String,
    pub table: String,
}

impl TableName {
    /// A table name from its parts.
    pub fn new(db: impl Into<String>, table: impl Into<String>) -> TableName {
        TableName {
            db: db.into(),
            table: table.into(),
        }
    }
}

impl FromStr for TableName {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<TableName, String> {
        let bad = || format!("`{s}` is not a table name of the form db.table");
        let (db, rest) = ident_prefix(s).ok_or_else(bad)?;
        let rest = rest.strip_prefix('.').ok_or_else(bad)?;
        let (table, tail) = ident_prefix(rest).ok_or_else(bad)?;
        if !tail.is_empty() || db.is_empty() || table.is_empty() {
            return Err(bad());
        }
        Ok(TableName { db, table })
    }
}

/// Splits one identifier off the front: `` `a``b`.x `` -> ("a`b", ".x"), `a.b` -> ("a", ".b").
fn ident_prefix(s: &str) -> Option<(String, &str)> {
    if let Some(body) = s.strip_prefix('`') {
        let mut out = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '`' {
                if matches!(chars.peek(), Some((_, '`'))) {
                    chars.next();
                    out.push('`');
                } else {
                    return Some((out, &body[i + 1..]));
                }
            } else {
                out.push(c);
            }
        }
        None
    } else {
        let end = s.find('.').unwrap_or(s.len());
        Some((s[..end].to_string(), &s[end..]))
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", quote_ident(&self.db), quote_ident(&self.table))
    }
}

/// What to install.
#[derive(Clone, Debug)]
pub struct InstallRequest {
    pub state_url: String,
    pub source_url: String,
    pub source_table: TableName,
    pub target_url: String,
    pub target_table: TableName,
    pub window_rows: u64,
    pub page_rows: u64,
    /// Schema of the control table on the source.
    pub control_schema: String,
    /// Create the target table from the sealed source definition when it does not exist
    /// (`--create-target`, [`create`]).
    pub create_target: bool,
}

impl InstallRequest {
    /// A request with the default window and page sizes and control schema.
    pub fn new(
        state_url: impl Into<String>,
        source_url: impl Into<String>,
        source_table: TableName,
        target_url: impl Into<String>,
        target_table: TableName,
    ) -> InstallRequest {
        InstallRequest {
            state_url: state_url.into(),
            source_url: source_url.into(),
            source_table,
            target_url: target_url.into(),
            target_table,
            window_rows: DEFAULT_WINDOW_ROWS,
            page_rows: DEFAULT_PAGE_ROWS,
            control_schema: kernel::control::DEFAULT_SCHEMA.to_string(),
            create_target: false,
        }
    }
}

/// The result of a successful install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub job_id: JobId,
    pub generation: Generation,
    pub windows: usize,
    pub fingerprint: Digest,
    pub plan_digest: Digest,
    pub estimated_rows: u64,
    /// The key the table is copied by (DESIGN §14), e.g. `PRIMARY (`a`, `b`)`.
    pub key: String,
    /// True when install created the target table (`--create-target`).
    pub created: bool,
}

/// Installs a table: opens (and migrates) the state store, then [`install_with`].
pub async fn install(req: &InstallRequest) -> Result<Installed> {
    checks::check_sizes(req.window_rows, req.page_rows)
        .map_err(|why| Error::definite(DefiniteCode::Usage, why))?;
    let pool = kernel::state::open(&req.state_url, &Default::default()).await?;
    let out = install_with(&pool, req).await;
    pool.close().await;
    out
}

/// Installs a table into an open state store.
pub async fn install_with(pool: &MySqlPool, req: &InstallRequest) -> Result<Installed> {
    install_checked(pool, req).await?.map_err(|r| refused(&r))
}

/// Installs a table into an open state store; `Ok(Err(refusals))` lists every failed
/// precondition (nothing of the table recorded), `Err` any other failure.
pub async fn install_checked(
    pool: &MySqlPool,
    req: &InstallRequest,
) -> Result<std::result::Result<Installed, Vec<Refusal>>> {
    install_checked_with(pool, req, None).await
}

/// [`install_checked`] for one table of a bulk command: the server-level reads come from
/// `shared` ([`shared`]: read once for the command).
pub async fn install_checked_with(
    pool: &MySqlPool,
    req: &InstallRequest,
    shared: Option<&shared::Shared>,
) -> Result<std::result::Result<Installed, Vec<Refusal>>> {
    checks::check_sizes(req.window_rows, req.page_rows)
        .map_err(|why| Error::definite(DefiniteCode::Usage, why))?;
    let source_opts = connect::opts(&req.source_url, "--source")?;
    let target_opts = connect::opts(&req.target_url, "--target")?;
    let mut source = connect::connect(source_opts.clone(), "source", &req.source_url).await?;
    let mut target = match connect::connect(target_opts, "target", &req.target_url).await {
        Ok(t) => t,
        Err(e) => {
            connect::close(source).await;
            return Err(e);
        }
    };
    let bounded = match connect::bound_statements(&mut source).await {
        Ok(()) => connect::bound_statements(&mut target).await,
        Err(e) => Err(e),
    };
    if let Err(e) = bounded {
        connect::close(source).await;
        connect::close(target).await;
        return Err(e);
    }
    let out = {
        let mut s = Session {
            pool,
            req,
            source: &mut source,
            source_opts: &source_opts,
            target: &mut target,
            create: false,
            shared,
        };
        s.run().await
    };
    connect::close(source).await;
    connect::close(target).await;
    out
}

/// Fault points of `backfill install` (this module), in protocol order: its durable
/// writes are the control schema on the source, the target table (`--create-target`)
/// and the state store's job rows, each written once every read-only check passed.
pub mod faults {
    /// The control schema and its table exist on the source; nothing else written.
    pub const AFTER_CONTROL: &str = "install.after_control";
    /// `--create-target` created the target table; the job is not recorded.
    pub const AFTER_TARGET_CREATED: &str = "install.after_target_created";
    /// The job's rows are committed in the state store; install has not answered.
    pub const AFTER_RECORDED: &str = "install.after_recorded";

    /// Every fault point, in protocol order.
    pub const ALL: [&str; 3] = [AFTER_CONTROL, AFTER_TARGET_CREATED, AFTER_RECORDED];
}

/// The refusal error: every failed check, one a line.
pub fn refused(refusals: &[Refusal]) -> Error {
    let lines: Vec<String> = refusals.iter().map(|r| format!("  - {r}")).collect();
    Error::definite(
        DefiniteCode::Precondition,
        format!(
            "install refused ({} problem{}):\n{}",
            refusals.len(),
            if refusals.len() == 1 { "" } else { "s" },
            lines.join("\n")
        ),
    )
}

struct Session<'a> {
    pool: &'a MySqlPool,
    req: &'a InstallRequest,
    source: &'a mut mysql_async::Conn,
    source_opts: &'a mysql_async::Opts,
    target: &'a mut mysql_async::Conn,
    /// The target table is missing and `--create-target` was given: created once every
    /// read-only check has passed.
    create: bool,
    /// The bulk command's server-level reads ([`shared`]); None for a single table.
    shared: Option<&'a shared::Shared>,
}

/// What the read-only checks found.
struct Checked {
    source_facts: ServerFacts,
    target_facts: ServerFacts,
    account: String,
    sealed: SealedSchema,
    lineage: InstallLineage,
    estimated_rows: u64,
    /// The source table's facts (the definition `--create-target` creates).
    facts: TableFacts,
}

impl Session<'_> {
    async fn run(&mut self) -> Result<std::result::Result<Installed, Vec<Refusal>>> {
        let mut refusals = Vec::new();
        let checked = self.read_only_checks(&mut refusals).await?;
        let checked = match checked {
            Some(c) if refusals.is_empty() => c,
            _ => return Ok(Err(refusals)),
        };
        let ctl = &self.req.control_schema;
        if let Some(r) = privileges::ensure_control(self.source, ctl, &checked.account).await? {
            return Ok(Err(vec![r]));
        }
        kernel::failpoint::hit(faults::AFTER_CONTROL);
        if self.create {
            let refusals = self.create_target(&checked).await?;
            if !refusals.is_empty() {
                return Ok(Err(refusals));
            }
        }
        let plan = plan::plan(self.source, &checked.sealed, self.req.window_rows).await?;
        let job = NewJob {
            source: self.source_ref(&checked.source_facts),
            target: self.target_ref(&checked.target_facts),
            source_url: redact_url(&self.req.source_url),
            target_url: redact_url(&self.req.target_url),
            control_schema: ctl.clone(),
            window_rows: self.req.window_rows,
            page_rows: self.req.page_rows,
            estimated_rows: checked.estimated_rows,
            schema: checked.sealed.clone(),
            lineage: checked.lineage.clone(),
            plan: plan.clone(),
        };
        let (job_id, generation) = jobs::record_install(self.pool, &job).await?;
        kernel::failpoint::hit(faults::AFTER_RECORDED);
        let key = checked.sealed.describe_key();
        tracing::info!(job = %job_id, %generation, windows = plan.len(), %key, "installed");
        Ok(Ok(Installed {
            key,
            job_id,
            generation,
            windows: plan.len(),
            fingerprint: checked.sealed.fingerprint(),
            plan_digest: plan.digest(),
            estimated_rows: checked.estimated_rows,
            created: self.create,
        }))
    }

    /// `--create-target`: creates the missing target, then reads it back through the same
    /// checks as a hand-made one (empty, same definition), so a table the server created
    /// otherwise than asked is refused, not copied into.
    async fn create_target(&mut self, checked: &Checked) -> Result<Vec<Refusal>> {
        let target = &self.req.target_table;
        let made = create::create(self.target, target, &checked.facts, &checked.sealed)
            .await
            .map_err(|e| create::failed(target, e))?;
        if let Some(r) = made {
            return Ok(vec![r]);
        }
        kernel::failpoint::hit(faults::AFTER_TARGET_CREATED);
        self.target_table(Some(&checked.sealed)).await
    }

    fn source_ref(&self, f: &ServerFacts) -> TableRef {
        TableRef {
            identity: f.identity(),
            db: self.req.source_table.db.clone(),
            table: self.req.source_table.table.clone(),
        }
    }

    fn target_ref(&self, f: &ServerFacts) -> TableRef {
        TableRef {
            identity: f.identity(),
            db: self.req.target_table.db.clone(),
            table: self.req.target_table.table.clone(),
        }
    }

    /// Every check that writes nothing (but the state token). Pushes refusals; returns the
    /// facts when the source table could be sealed.
    async fn read_only_checks(&mut self, refusals: &mut Vec<Refusal>) -> Result<Option<Checked>> {
        let shared = self.shared;
        let (source_facts, account) = shared::once(shared.map(|s| &s.source), || async {
            let facts = introspect::read_server_facts(self.source).await?;
            Ok((facts, introspect::current_account(self.source).await?))
        })
        .await?;
        let status = self.binlog(&source_facts, &account, refusals).await?;
        let lineage = match &status {
            Some(_) => Some(self.lineage(&source_facts, refusals).await?),
            None => None,
        };
        let table = self.source_table(&account, refusals).await?;
        let sealed = match &table {
            Some(t) => match checks::check_source_table(t) {
                Ok(s) => Some(s),
                Err(mut r) => {
                    refusals.append(&mut r);
                    None
                }
            },
            None => None,
        };
        if let Some(st) = &status {
            let opts = self.source_opts.clone();
            let probe = privileges::probe_replication(opts, &st.position, &account);
            if let Some(r) = shared::once(shared.map(|s| &s.replication), || probe).await? {
                refusals.push(r);
            }
        }
        let on_source = shared.map(|s| &s.state_on_source);
        let on_source = shared::once(on_source, || self.state_on_source(&source_facts));
        refusals.extend(on_source.await?);
        let target = &mut *self.target;
        let target_facts = shared::once(shared.map(|s| &s.target), || {
            introspect::read_server_facts(target)
        })
        .await?;
        refusals.extend(self.target_table(sealed.as_ref()).await?);
        let (src, tgt) = (
            self.source_ref(&source_facts),
            self.target_ref(&target_facts),
        );
        if src == tgt {
            refusals.push(Refusal::new(
                format!("target table {}", tgt.qualified()),
                "is the source table itself",
                "give a separate, empty target table",
            ));
        }
        if let Some((job, generation)) = jobs::live_job(self.pool, &src).await? {
            refusals.push(jobs::live_refusal(&src, job, generation));
        }
        if let Some(job) = jobs::target_claim(self.pool, &tgt).await? {
            refusals.push(jobs::claim_refusal(&tgt, job));
        }
        Ok(match (sealed, lineage, table) {
            (Some(sealed), Some(lineage), Some(facts)) => Some(Checked {
                source_facts,
                target_facts,
                account,
                sealed,
                lineage,
                estimated_rows: facts.estimated_rows,
                facts,
            }),
            _ => None,
        })
    }

    /// Reads the source lineage and compares it with the one every live job of this source
    /// server recorded (DESIGN §9): a changed binlog series under the same server identity
    /// means positions recorded so far belong to another history.
    async fn lineage(
        &mut self,
        facts: &ServerFacts,
        refusals: &mut Vec<Refusal>,
    ) -> Result<InstallLineage> {
        let now = introspect::read_install_lineage(self.source).await?;
        for (job, recorded) in jobs::live_lineages(self.pool, &facts.identity()).await? {
            if recorded.lineage != now.lineage {
                refusals.push(Refusal::new(
                    format!(
                        "source lineage of {}",
                        connect::server_label(self.source_opts)
                    ),
                    format!(
                        "differs from the one job {job} recorded: recorded [{}], found [{}]",
                        recorded.lineage, now.lineage
                    ),
                    format!(
                        "a swapped or re-initialised source is never re-interpreted: cancel \
                         job {job} and re-install its table against this source"
                    ),
                ));
            }
        }
        Ok(now)
    }

    async fn binlog(
        &mut self,
        facts: &ServerFacts,
        account: &str,
        refusals: &mut Vec<Refusal>,
    ) -> Result<Option<BinlogStatus>> {
        let label = connect::server_label(self.source_opts);
        let status = match introspect::read_binlog_status(self.source).await? {
            Ok(None) if facts.log_bin => {
                refusals.push(Refusal::new(
                    format!("source server {label}: SHOW MASTER STATUS"),
                    "returned no binlog position although log_bin is ON",
                    "check the server's binary log (SHOW BINARY LOGS, the error log)",
                ));
                None
            }
            Ok(s) => s,
            Err(denied) => {
                refusals.push(privileges::binlog_monitor_refusal(
                    facts.flavor,
                    account,
                    &denied,
                ));
                None
            }
        };
        let schemas = [
            self.req.source_table.db.as_str(),
            self.req.control_schema.as_str(),
        ];
        refusals.extend(checks::check_binlog(
            &label,
            facts,
            status.as_ref(),
            &schemas,
        ));
        Ok(status.filter(|_| facts.log_bin))
    }

    async fn source_table(
        &mut self,
        account: &str,
        refusals: &mut Vec<Refusal>,
    ) -> Result<Option<TableFacts>> {
        let TableName { db, table } = &self.req.source_table;
        match introspect::probe_select(self.source, db, table).await? {
            SelectProbe::Allowed => {}
            SelectProbe::Missing => {
                refusals.push(Refusal::new(
                    format!("source table {}", self.req.source_table),
                    format!(
                        "does not exist on source {}",
                        connect::server_label(self.source_opts)
                    ),
                    "check --source-table (db.table) and --source",
                ));
                return Ok(None);
            }
            SelectProbe::Denied(d) => {
                refusals.push(privileges::select_refusal(db, table, account, &d));
                return Ok(None);
            }
        }
        let parents = self.shared.and_then(|s| s.parents.as_ref());
        let facts = introspect::read_table_with(self.source, db, table, parents).await?;
        if facts.is_none() {
            refusals.push(Refusal::new(
                format!("source table {}", self.req.source_table),
                "is not visible in information_schema",
                "install a base table of the source schema",
            ));
        }
        Ok(facts)
    }

    async fn state_on_source(&mut self, source: &ServerFacts) -> Result<Option<Refusal>> {
        let state_db = connect::database_of(&self.req.state_url).unwrap_or_default();
        let token = identity::state_token(self.pool).await?;
        let sighting = identity::token_through_source(self.source, &state_db).await?;
        let state = identity::state_server_facts(self.pool).await?;
        Ok(identity::check_state_not_on_source(
            &self.req.state_url,
            &token,
            &sighting,
            source,
            &state,
        ))
    }

    async fn target_table(&mut self, sealed: Option<&SealedSchema>) -> Result<Vec<Refusal>> {
        let TableName { db, table } = &self.req.target_table;
        let name = format!("target table {}", self.req.target_table);
        match introspect::probe_select(self.target, db, table).await? {
            SelectProbe::Allowed => {}
            // Once: a table still missing after it was created is refused below.
            SelectProbe::Missing if self.req.create_target && !self.create => {
                self.create = true;
                return Ok(Vec::new());
            }
            SelectProbe::Missing => {
                return Ok(vec![Refusal::new(
                    name,
                    "does not exist on the target",
                    "pass --create-target, or create it with the source's definition (SHOW \
                     CREATE TABLE on the source) without triggers, foreign keys or extra \
                     unique keys",
                )])
            }
            SelectProbe::Denied(d) => {
                return Ok(vec![Refusal::new(
                    name,
                    format!("cannot be read by the target user ({d})"),
                    format!(
                        "GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO the target user",
                        self.req.target_table
                    ),
                )])
            }
        }
        let parents = self.shared.and_then(|s| s.target_parents.as_ref());
        let Some(facts) = introspect::read_table_with(self.target, db, table, parents).await?
        else {
            return Ok(vec![Refusal::new(
                name,
                "is not visible in information_schema",
                "create it as an InnoDB base table",
            )]);
        };
        let empty = introspect::is_empty(self.target, db, table).await?;
        Ok(checks::check_target_table(&facts, empty, sealed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_parse() {
        assert_eq!("d.t".parse(), Ok(TableName::new("d", "t")));
        assert_eq!("`a.b`.`c``d`".parse(), Ok(TableName::new("a.b", "c`d")));
        assert!("t".parse::<TableName>().is_err());
        assert!("a.b.c".parse::<TableName>().is_err());
        assert!(".t".parse::<TableName>().is_err());
        assert!("`d`x.t".parse::<TableName>().is_err());
        assert_eq!(TableName::new("a`", "t").to_string(), "`a```.`t`");
    }

    #[test]
    fn refusals_are_listed() {
        let e = refused(&[Refusal::new("a", "b", "c"), Refusal::new("d", "e", "f")]);
        let d = e.as_definite().map(|d| (d.code, d.message.clone()));
        let (code, msg) = d.unwrap_or_else(|| panic!("definite"));
        assert_eq!(code, DefiniteCode::Precondition);
        assert!(msg.contains("2 problems") && msg.contains("  - d: e; fix: f"));
    }
}
