//! `backfill refresh-schema JOB` (DESIGN §16, seed 003): resumes a STREAMING table paused
//! at a DDL the service did not apply on its own, without a re-copy, once the operator has
//! made the target match (or, for a compatible DDL, with `--apply`). The checks and the
//! seal are `crate::table::schema::seal::refresh`; this file is the command.
use crate::cli::{Format, StateArgs};
use crate::io::connect::resolve_url;
use crate::store::jobs;
use crate::table::replay;
use crate::table::schema::{self, seal};
use clap::Args;
use kernel::control::IntentKind;
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::log::LSeq;
use kernel::{Error, Result};
use ledger::journal::Journal;
use ledger::record::Phase;
use serde_json::json;

/// `backfill refresh-schema`.
#[derive(Debug, Args)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The STREAMING job paused at a DDL (`backfill status JOB` names it).
    pub job: u64,
    #[command(flatten)]
    pub urls: crate::cli::check::ServerUrls,
    /// Run the DDL's own clauses on the target first (only for a compatible DDL).
    #[arg(long, env = "BACKFILL_REFRESH_APPLY")]
    pub apply: bool,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

fn usage(message: String) -> Error {
    Error::definite(DefiniteCode::Usage, message)
}

/// Seals the table's next schema version from the live definition and records a resume.
pub async fn refresh(a: RefreshArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = refresh_in(&pool, &a).await;
    pool.close().await;
    let (v, resumed) = r?;
    Ok(match a.format {
        Format::Text => format!(
            "job {}: schema version {} sealed at {} (`{}`){}\n",
            a.job,
            v.version,
            v.at,
            kernel::redact::redact_text(&v.ddl.chars().take(200).collect::<String>()),
            if resumed {
                "; resume recorded: `backfill serve` applies it and goes on"
            } else {
                ""
            }
        ),
        Format::Json => format!(
            "{}\n",
            json!({
                "job_id": a.job, "version": v.version, "at": v.at.to_string(),
                "ddl": kernel::redact::redact_text(&v.ddl), "resumed": resumed,
            })
        ),
    })
}

async fn refresh_in(
    pool: &sqlx::MySqlPool,
    a: &RefreshArgs,
) -> Result<(crate::store::schema_versions::SchemaVersion, bool)> {
    let job = JobId(a.job);
    let rec = jobs::load_job(pool, job).await?;
    let g = rec.generation;
    let head = Journal::new(pool.clone()).head(job, g).await?;
    let Some(head) = head.filter(|h| h.record.phase == Phase::Streaming) else {
        return Err(usage(format!(
            "job {job}: refresh-schema applies to a STREAMING table paused at a DDL; a table \
             paused before STREAMING must be re-added (runbooks/cancel-and-readd.md)"
        )));
    };
    let stream = replay::stream_of(pool, job, g).await?.ok_or_else(|| {
        usage(format!(
            "job {job}: no capture stream holds its start marker (B)"
        ))
    })?;
    let scope = replay::Scope {
        job,
        generation: g,
        stream: stream.clone(),
        source_db: rec.source.db.clone(),
        source_table: rec.source.table.clone(),
    };
    let b = replay::find_marker(pool, &scope, IntentKind::B, None)
        .await?
        .map_or(LSeq::ZERO, |m| m.seq);
    let install = jobs::load_schema(pool, job).await?;
    let chain = schema::load(pool, job, g, &install, &stream).await?;
    let src = resolve_url(
        &rec.source_url,
        &a.urls.source,
        "--source",
        &format!("job {job}'s source"),
    )?;
    let tgt = resolve_url(
        &rec.target_url,
        &a.urls.target,
        "--target",
        &format!("job {job}'s target"),
    )?;
    let source = crate::io::pool::ConnPool::of_opts(
        crate::io::pool::Side::Source,
        crate::io::connect::opts(&src, "--source")?,
        1,
    );
    let target = ledger::target::target_opts(&tgt)?;
    let env = seal::SealEnv {
        pool,
        scope: scope.seal_table(),
        source: &source,
        wait: std::time::Duration::from_secs(60),
        // refresh-schema seals from the live definition only (it refuses a later DDL).
        scratch: None,
    };
    let t = seal::TargetTable {
        opts: &target,
        db: &rec.target.db,
        table: &rec.target.table,
        apply: a.apply,
    };
    match seal::refresh(&env, &chain, b, &t).await? {
        seal::Sealed::Version(v) => {
            let resumed = head.record.paused.is_some();
            if resumed {
                crate::store::commands::resume(pool, job).await?;
            }
            Ok((v, resumed))
        }
        seal::Sealed::NoDdl => Err(usage(format!(
            "job {job}: no DDL of the table waits for a schema version (`backfill status {job}`)"
        ))),
        seal::Sealed::Refused(d) => Err(usage(d.message)),
    }
}
