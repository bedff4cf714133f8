//! `backfill audit JOB` outside `serve`: gathers a job's evidence from the state store,
//! its material store and its target (read-only; T is read with token 0, never written)
//! and runs the activation audit's checks on it, requiring the activation credential once
//! J records STREAMING. It does not compare fields itself (that replays the target, a
//! write): it shows the field checks recorded by the last activation audit and by a
//! `verify` of the STREAMING table, and a recorded difference is a finding.
use super::checks::{audit, Require};
use super::gather::{gather, Sources};
use super::report::AuditReport;
use crate::io::connect::resolve_url;
use crate::store::jobs::{self, stream_name};
use crate::table::replay::{self, Scope};
use kernel::ids::JobId;
use kernel::Result;
use ledger::journal::Journal;
use ledger::material::Placement;
use ledger::record::{JournalRecord, Phase};
use ledger::target::{self, TargetCtx};
use std::path::Path;

/// The audit report of `a.job` (also the demo's audit).
pub async fn audit_job(
    pool: &sqlx::MySqlPool,
    job: JobId,
    (data_dir, materials): (&Path, Placement),
    targets: &[String],
) -> Result<AuditReport> {
    let rec = jobs::load_job(pool, job).await?;
    let schema = jobs::load_schema(pool, job).await?;
    let plan = jobs::load_plan(pool, job).await?.ranges;
    let stream = replay::stream_of(pool, job, rec.generation)
        .await?
        .unwrap_or_else(|| stream_name(&rec.source.identity));
    let scope = Scope {
        job,
        generation: rec.generation,
        stream,
        source_db: rec.source.db.clone(),
        source_table: rec.source.table.clone(),
    };
    let mut tschema = schema.clone();
    tschema.database = rec.target.db.clone();
    tschema.table = rec.target.table.clone();
    let ctx = TargetCtx {
        job,
        generation: rec.generation,
        keyer: crate::store::jobs::keyer(&tschema)?,
        schema: tschema,
        token: 0,
        within: None,
    };
    let store = ledger::material::open(materials, pool, data_dir)?;
    let whose = format!("job {job}'s target");
    let opts = target::target_opts(&resolve_url(&rec.target_url, targets, "--target", &whose)?)?;
    let chain =
        crate::table::schema::load(pool, job, rec.generation, &schema, &scope.stream).await?;
    let mut conn = ledger::apply::connect(&opts).await?;
    let ev = gather(&mut Sources {
        pool,
        scope: &scope,
        store: store.as_ref(),
        target: &mut conn,
        ctx: &ctx,
        plan: &plan,
        schema_fingerprint: schema.fingerprint(),
        chain: Some(&chain),
    })
    .await;
    crate::io::connect::close(conn).await;
    let ev = ev?;
    let head: Option<JournalRecord> = Journal::new(pool.clone())
        .head(job, rec.generation)
        .await
        .ok()
        .flatten()
        .map(|h| h.record);
    let require = if head.is_some_and(|h| h.phase == Phase::Streaming) {
        Require::Activated
    } else {
        Require::Gate
    };
    let mut report = audit(&ev, require);
    let recorded = crate::store::field_checks::read(pool, job, rec.generation).await?;
    report
        .findings
        .extend(super::checks::recorded_findings(&recorded));
    report.recorded_fields = recorded.iter().map(|c| c.line()).collect();
    Ok(report)
}
