//! `backfill audit JOB` and `backfill verify JOB` (DESIGN §7, §13): read-only checks an
//! operator runs at any time. Both print their report on stdout; a failed audit or a
//! difference found exits with [`crate::cli::EXIT_CHECK_FAILED`], distinct from a runtime
//! failure (1) and a usage error (2).
use crate::cli::{Format, StateArgs};
use crate::io::connect::resolve_url;
use crate::store::jobs;
use crate::table::audit::{self};
use crate::verify::{self, pinned, Endpoint, VerifyCursor, VerifyOptions};
use clap::Args;
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::{Error, Result};
use std::io::Write;
use std::path::PathBuf;

/// `backfill audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The job to audit.
    pub job: u64,
    /// Directory of the material store (RAW/FINAL pages, manifests).
    #[arg(long, env = "BACKFILL_DATA_DIR")]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub materials: crate::cli::materials::MaterialsArg,
    /// Target URLs with their passwords (jobs record them redacted); comma-separated.
    #[arg(
        long,
        env = "BACKFILL_TARGET",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub target: Vec<String>,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `--source` and `--target` of a command that connects to a job's servers (the jobs
/// record their URLs with the password redacted).
#[derive(Debug, Args)]
pub struct ServerUrls {
    /// Source URLs with their passwords (jobs record them redacted); comma-separated.
    #[arg(
        long,
        env = "BACKFILL_SOURCE",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub source: Vec<String>,
    /// Target URLs with their passwords; comma-separated.
    #[arg(
        long,
        env = "BACKFILL_TARGET",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub target: Vec<String>,
}

/// `backfill verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The job whose source and target tables are compared.
    pub job: u64,
    #[command(flatten)]
    pub urls: ServerUrls,
    /// Keys compared per chunk.
    #[arg(long, env = "BACKFILL_VERIFY_CHUNK", default_value_t = 10_000)]
    pub chunk_size: usize,
    /// Compare at one binlog position P while the source keeps writing: the source's
    /// consistent snapshot at P, the target replayed to exactly P by this command (serve
    /// must be stopped; a STREAMING job). Without it: a quiescent comparison.
    #[arg(long, env = "BACKFILL_VERIFY_PINNED")]
    pub pinned: bool,
    /// Stop after this many chunks and store the walk's cursor (continue with --resume).
    #[arg(long, env = "BACKFILL_VERIFY_MAX_CHUNKS", value_name = "N")]
    pub max_chunks: Option<u64>,
    /// Continue the stored walk of an earlier run split with --max-chunks or interrupted
    /// (same mode, pinned or not); counts accumulate.
    #[arg(long, env = "BACKFILL_VERIFY_RESUME")]
    pub resume: bool,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Prints `out` now (the report of a failed check goes to stdout before the error).
fn print_now(out: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(out.as_bytes()).and_then(|()| o.flush());
}

/// Runs the activation audit of DESIGN §7, read-only.
pub async fn audit(a: AuditArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = audit_in(&pool, &a).await;
    pool.close().await;
    let report = r?;
    let out = match a.format {
        Format::Text => report.text(),
        Format::Json => format!(
            "{}\n",
            serde_json::json!({
                "passed": report.passed(),
                "report": report,
            })
        ),
    };
    if report.passed() {
        return Ok(out);
    }
    print_now(&out);
    Err(Error::definite(
        DefiniteCode::EvidenceCorrupt,
        format!(
            "audit of job {} failed with {} finding(s); the report above names each",
            a.job,
            report.findings.len()
        ),
    ))
}

/// The audit of `a.job` from the state store, its materials and its target (shared with
/// `backfill demo`).
pub async fn audit_in(pool: &sqlx::MySqlPool, a: &AuditArgs) -> Result<audit::AuditReport> {
    let at = (a.data_dir.as_path(), a.materials.materials.into());
    audit::offline::audit_job(pool, JobId(a.job), at, &a.target).await
}

/// Compares the job's source and target row by row and field by field: quiescent (stop
/// writes to the source, or accept differences still in flight) or `--pinned` at one
/// binlog position. A walk split with `--max-chunks` stores its cursor for `--resume`.
pub async fn verify(a: VerifyArgs) -> Result<String> {
    let cancel = tokio_util::sync::CancellationToken::new();
    let interrupt = stop_on_ctrl_c(cancel.clone());
    let r = async {
        let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
        let r = verify_in(&pool, &a, cancel).await;
        pool.close().await;
        r
    }
    .await;
    interrupt.abort();
    let report = r?;
    let out = match a.format {
        Format::Text => format!("{report}\n"),
        Format::Json => format!(
            "{}\n",
            serde_json::to_string(&report).map_err(|e| Error::transient(e.to_string()))?
        ),
    };
    let t = &report.cursor.tally;
    let differs = !t.is_clean() || !report.schema_differences.is_empty();
    if !differs {
        return Ok(out);
    }
    print_now(&out);
    Err(Error::definite(
        DefiniteCode::EvidenceConflict,
        format!(
            "verify of job {}: target differs from source ({} missing keys, {} extra keys, {} differing fields, {} definition differences{})",
            a.job,
            t.missing.count,
            t.extra.count,
            t.differing_fields.count,
            report.schema_differences.len(),
            if report.complete { "" } else { "; walk incomplete, continue with --resume" }
        ),
    ))
}

async fn verify_in(
    pool: &sqlx::MySqlPool,
    a: &VerifyArgs,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<verify::Report> {
    let job = JobId(a.job);
    let rec = jobs::load_job(pool, job).await?;
    let mode = if a.pinned { "pinned" } else { "quiescent" };
    let mut cursor = match a.resume {
        true => pinned::load_cursor(pool, &rec, mode)
            .await?
            .ok_or_else(|| nothing_to_resume(job, mode))?,
        false => VerifyCursor::start(),
    };
    let opts = VerifyOptions {
        chunk_size: a.chunk_size.max(1),
        max_chunks: a.max_chunks,
        cancel,
        ..VerifyOptions::default()
    };
    let report = verify_with(pool, a, &rec, &mut cursor, opts).await;
    // The cursor only advances over whole steps: after an error it is still a resume point.
    if report.is_ok() || cursor.last_key.is_some() {
        pinned::store_cursor(pool, &rec, mode, &cursor).await?;
    }
    if let Ok(r) = &report {
        record_finding(pool, &rec, mode, r).await?;
    }
    report
}

/// On a STREAMING table, a difference is recorded where `status` shows it
/// (`field_checks`, origin `verify`), `backfill audit` fails on it, and a later clean,
/// complete walk clears it. It does not pause the table itself, and needs not:
/// * a pinned verify runs only with serve stopped, so a serve start follows it, and that
///   start's re-audit compares the fields at its own pinned point and pauses the table on
///   a difference it confirms (`crate::table::audit::fields`): the pause comes from the
///   component that owns J, under its lease, with the audit's named finding;
/// * a quiescent verify cannot tell a write still in flight from a real difference: a
///   pause on it would stop a healthy table whenever the source was not quiet. Its
///   finding stands in status (and fails `audit`) until a clean verify or a restart's
///   re-audit settles it.
async fn record_finding(
    pool: &sqlx::MySqlPool,
    rec: &jobs::JobRecord,
    mode: &str,
    r: &verify::Report,
) -> Result<()> {
    use crate::store::field_checks::{self, FieldCheck};
    let (job, g) = (rec.job_id, rec.generation);
    let head = ledger::journal::Journal::new(pool.clone())
        .head(job, g)
        .await?;
    if head.is_none_or(|h| h.record.phase != ledger::record::Phase::Streaming) {
        return Ok(());
    }
    if r.is_clean() {
        return field_checks::clear(pool, job, g, field_checks::VERIFY).await;
    }
    let s = verify::activation::sample_of(r, format!("{mode} verify"), 0);
    if s.differences() == 0 {
        // Clean so far but incomplete: an earlier finding stands until a whole walk is clean.
        return Ok(());
    }
    let check = FieldCheck {
        origin: field_checks::VERIFY.to_string(),
        ..s.record()
    };
    field_checks::record(pool, job, g, &check).await
}

fn nothing_to_resume(job: JobId, mode: &str) -> Error {
    Error::definite(
        DefiniteCode::Usage,
        format!("job {job}: no stored {mode} verify walk to resume; run without --resume"),
    )
}

/// The first Ctrl-C stops the walk between chunks (its cursor is stored for --resume, a
/// pinned run gives its lease up); a second one exits at once.
fn stop_on_ctrl_c(cancel: tokio_util::sync::CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::warn!(
                "interrupted: stopping after the current chunk (Ctrl-C again to exit now)"
            );
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    })
}

async fn verify_with(
    pool: &sqlx::MySqlPool,
    a: &VerifyArgs,
    rec: &jobs::JobRecord,
    cursor: &mut VerifyCursor,
    opts: VerifyOptions,
) -> Result<verify::Report> {
    let job = rec.job_id;
    let source_url = resolve_url(
        &rec.source_url,
        &a.urls.source,
        "--source",
        &format!("job {job}'s source"),
    )?;
    let target_url = resolve_url(
        &rec.target_url,
        &a.urls.target,
        "--target",
        &format!("job {job}'s target"),
    )?;
    if a.pinned {
        let req = pinned::PinnedRequest {
            job,
            source_url: &source_url,
            target_url: &target_url,
            options: opts,
        };
        pinned::run(pool, &req, cursor).await
    } else {
        quiescent(pool, rec, &source_url, &target_url, &opts, cursor).await
    }
}

async fn quiescent(
    pool: &sqlx::MySqlPool,
    rec: &jobs::JobRecord,
    source_url: &str,
    target_url: &str,
    opts: &VerifyOptions,
    cursor: &mut VerifyCursor,
) -> Result<verify::Report> {
    let schema = jobs::load_schema(pool, rec.job_id).await?;
    let key = jobs::key_columns(&schema);
    let key: Vec<&str> = key.iter().map(String::as_str).collect();
    let src = Endpoint::from_url(source_url, &rec.source.db, &rec.source.table)?;
    let tgt = Endpoint::from_url(target_url, &rec.target.db, &rec.target.table)?;
    let report = verify::verify(&src, &tgt, &key, opts, cursor).await;
    let _ = src.pool.disconnect().await;
    let _ = tgt.pool.disconnect().await;
    report
}
