//! Bulk `backfill install` (DESIGN §17): many tables in one command, one job per table.
//!
//! Safe because each table goes through the single-table path ([`super::install_checked`])
//! on its own: its own checks, its own state-store transaction, its own refusal. A refused
//! table records nothing and stops nothing; a table installed before a later one is
//! refused stays installed (its job is complete on its own, as if installed by a separate
//! command). What is decided for the whole command comes first and writes nothing: the
//! patterns are expanded on the source and mapped to targets ([`super::select`]), so a
//! pattern that matches nothing or two sources mapped onto one target stop the command
//! before any table is installed.
//!
//! The server-level facts (server facts, the account, the replication probe, whether the
//! state store is on the source) are read once for the command ([`super::shared`], which
//! argues why that is the same check).
//!
//! Tables are installed [`INSTALLS_AT_ONCE`] at a time, and reported in selection order.
//! Running them side by side changes nothing above: the selection maps every source to a
//! distinct target, each install's state-store transaction locks only its own source
//! table's rows (a conflict between two of them is a deadlock, which is transient and
//! retried, and a retry first looks for its own committed install), and two installs of
//! one table, from this command or another, are already serialised there.
use super::checks::Refusal;
use super::select::{self, TablePattern, TargetMap};
use super::shared::Shared;
use super::{install_checked_with, InstallRequest, Installed, TableName};
use crate::io::connect;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};

/// What to install: every table `sources` names, each into its `target` mapping.
#[derive(Clone, Debug)]
pub struct BulkRequest {
    /// The settings every table shares; its table names are replaced per table.
    pub base: InstallRequest,
    pub sources: Vec<TablePattern>,
    pub target: TargetMap,
}

/// One table's outcome.
#[derive(Debug)]
pub enum Outcome {
    Installed(Installed),
    /// Every failed precondition; nothing of the table was recorded.
    Refused(Vec<Refusal>),
    /// Another failure (a lost connection, a server error): nothing of the table was
    /// recorded unless the message says so; installing it again is safe.
    Failed(String),
}

/// The report: every selected table with its outcome, in selection order.
#[derive(Debug, Default)]
pub struct BulkReport {
    pub tables: Vec<(TableName, TableName, Outcome)>,
}

impl BulkReport {
    /// The tables installed.
    pub fn installed(&self) -> impl Iterator<Item = (&TableName, &TableName, &Installed)> {
        self.tables.iter().filter_map(|(s, t, o)| match o {
            Outcome::Installed(i) => Some((s, t, i)),
            _ => None,
        })
    }

    /// The tables refused, with their refusals.
    pub fn refused(&self) -> impl Iterator<Item = (&TableName, &TableName, &[Refusal])> {
        self.tables.iter().filter_map(|(s, t, o)| match o {
            Outcome::Refused(r) => Some((s, t, r.as_slice())),
            _ => None,
        })
    }

    /// The tables that failed otherwise, with the error.
    pub fn failed(&self) -> impl Iterator<Item = (&TableName, &TableName, &str)> {
        self.tables.iter().filter_map(|(s, t, o)| match o {
            Outcome::Failed(e) => Some((s, t, e.as_str())),
            _ => None,
        })
    }
}

/// The source tables `sources` name, each paired with its target (the whole-command
/// decisions: nothing is written).
pub async fn select(req: &BulkRequest) -> Result<Vec<(TableName, TableName)>> {
    Ok(select_with_parents(req).await?.0)
}

/// [`select`], and the foreign keys that reference the selected tables (read once for
/// every selected schema, [`Shared`]).
async fn select_with_parents(
    req: &BulkRequest,
) -> Result<(Vec<(TableName, TableName)>, kernel::introspect::ParentKeys)> {
    let opts = connect::opts(&req.base.source_url, "--source")?;
    let label = connect::server_label(&opts);
    let mut conn = connect::connect(opts, "source", &req.base.source_url).await?;
    let read = async {
        let found = select::expand(&mut conn, &label, &req.sources).await?;
        let pairs = req.target.map(&found)?;
        let mut schemas: Vec<String> = pairs.iter().map(|(s, _)| s.db.clone()).collect();
        schemas.sort();
        schemas.dedup();
        let parents = kernel::introspect::read_parent_keys(&mut conn, &schemas).await?;
        Ok((pairs, parents))
    };
    let out = read.await;
    connect::close(conn).await;
    out
}

/// The foreign keys that reference the target tables of `pairs`, read once ([`Shared`]).
async fn target_parents(
    req: &BulkRequest,
    pairs: &[(TableName, TableName)],
) -> Result<kernel::introspect::ParentKeys> {
    let opts = connect::opts(&req.base.target_url, "--target")?;
    let mut conn = connect::connect(opts, "target", &req.base.target_url).await?;
    let mut schemas: Vec<String> = pairs.iter().map(|(_, t)| t.db.clone()).collect();
    schemas.sort();
    schemas.dedup();
    let read = kernel::introspect::read_parent_keys(&mut conn, &schemas).await;
    connect::close(conn).await;
    read
}

/// Tables installed at once by [`install_many`]. An install is mostly round trips (the
/// table's facts, the binlog and privilege probes, the key distribution, one state-store
/// transaction), so a few side by side keep the servers busy; each holds one connection to
/// the source (two for the first, whose replication probe serves the whole command), one
/// to the target and one to the state store while it runs.
pub const INSTALLS_AT_ONCE: usize = 8;

/// Installs every selected table, [`INSTALLS_AT_ONCE`] at a time, each on its own.
pub async fn install_many(req: &BulkRequest) -> Result<BulkReport> {
    use futures_util::stream::{self, StreamExt as _};
    super::checks::check_sizes(req.base.window_rows, req.base.page_rows)
        .map_err(|why| Error::definite(DefiniteCode::Usage, why))?;
    let (pairs, parents) = select_with_parents(req).await?;
    let target_parents = target_parents(req, &pairs).await?;
    let pool = kernel::state::open(&req.base.state_url, &Default::default()).await?;
    let shared = Shared {
        parents: Some(parents),
        target_parents: Some(target_parents),
        ..Shared::default()
    };
    let tables = stream::iter(pairs)
        .map(|(source, target)| {
            let (pool, shared) = (&pool, &shared);
            async move {
                let outcome = install_one(pool, shared, &req.base, &source, &target).await;
                (source, target, outcome)
            }
        })
        .buffered(INSTALLS_AT_ONCE)
        .collect()
        .await;
    pool.close().await;
    Ok(BulkReport { tables })
}

/// One table of a bulk install, through the single-table path.
async fn install_one(
    pool: &sqlx::MySqlPool,
    shared: &Shared,
    base: &InstallRequest,
    source: &TableName,
    target: &TableName,
) -> Outcome {
    let mut one = base.clone();
    one.source_table = source.clone();
    one.target_table = target.clone();
    let outcome = match install_checked_with(pool, &one, Some(shared)).await {
        Ok(Ok(done)) => Outcome::Installed(done),
        Ok(Err(refusals)) => Outcome::Refused(refusals),
        Err(e) => Outcome::Failed(kernel::redact::redact_text(&e.to_string())),
    };
    if let Outcome::Refused(r) = &outcome {
        tracing::info!(table = %source, problems = r.len(), "install refused");
    }
    outcome
}
