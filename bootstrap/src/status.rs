//! `backfill status` (DESIGN §13, STYLE §10): per job, what install recorded plus where the
//! execution is, read from the state store only (status needs no source or target URL):
//!
//! * phase, pause reason and window count from J (the authority on where a table is);
//! * rows known (the server's estimate at install) versus rows read, sealed and applied
//!   (`window_progress`, counters written by the window runner);
//! * replay cursor, groups applied and lag (`replay_progress`, written by the replayer);
//! * the capture position D of the job's source stream.
//!
//! Everything here is a report, never evidence: `audit` is the check. The same snapshot
//! feeds the live display of `backfill demo`.
use crate::jobs::{self, JobRecord};
use crate::replay;
use crate::window::progress;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::JobId;
use kernel::Result;
use ledger::journal::Journal;
use serde_json::{json, Value};
use sqlx::MySqlPool;

/// At most this many jobs are listed.
pub const MAX_LISTED: u32 = 10_000;

/// The jobs to show: one, or all.
pub async fn read(pool: &MySqlPool, job: Option<JobId>) -> Result<Vec<JobRecord>> {
    match job {
        Some(j) => Ok(vec![jobs::load_job(pool, j).await?]),
        None => jobs::list_jobs(pool, MAX_LISTED).await,
    }
}

/// One job's execution as the state store shows it now.
#[derive(Clone, Debug)]
pub struct JobStatus {
    pub job: JobRecord,
    /// J's phase (None before `serve` first ran the job).
    pub phase: Option<String>,
    pub paused: Option<Definite>,
    pub windows_done: u32,
    /// Rows read under read views, sealed FINAL and applied, summed over windows.
    pub rows_read: u64,
    pub rows_final: u64,
    pub rows_applied: u64,
    /// The L stream of the job's source, once B was written.
    pub stream: Option<String>,
    /// D: where the capture reader restarts, and L's tail seq.
    pub capture: Option<(String, u64)>,
    pub replay: Option<replay::Progress>,
}

/// Reads the execution status of `job`.
pub async fn gather(pool: &MySqlPool, job: JobRecord) -> Result<JobStatus> {
    let head = Journal::new(pool.clone())
        .head(job.job_id, job.generation)
        .await?;
    let windows = progress::read(pool, job.job_id, job.generation).await?;
    let stream = replay::stream_of(pool, job.job_id, job.generation).await?;
    let capture = match &stream {
        Some(s) => kernel::log::load_position(pool, s)
            .await?
            .map(|d| (d.restart.pos.to_string(), d.tail.seq)),
        None => None,
    };
    let replay = replay::replay_progress(pool, job.job_id, job.generation).await?;
    let (phase, paused, windows_done) = match head {
        Some(h) => (
            Some(format!("{:?}", h.record.phase).to_uppercase()),
            h.record.paused,
            h.record.completed,
        ),
        None => (None, None, 0),
    };
    Ok(JobStatus {
        rows_read: windows.iter().map(|w| w.rows_read).sum(),
        rows_final: windows.iter().map(|w| w.rows_final).sum(),
        rows_applied: windows.iter().map(|w| w.rows_applied).sum(),
        job,
        phase,
        paused,
        windows_done,
        stream,
        capture,
        replay,
    })
}

impl JobStatus {
    /// The state to show: PAUSED(phase) while paused, else J's phase, else install's state.
    pub fn state(&self) -> String {
        match (&self.paused, &self.phase) {
            (Some(_), Some(p)) => format!("PAUSED({p})"),
            (None, Some(p)) => p.clone(),
            (_, None) => self.job.state.clone(),
        }
    }
}

/// The runbook an operator follows for a pause reason (runbooks/pauses.md has each).
pub fn runbook(code: DefiniteCode) -> &'static str {
    match code {
        DefiniteCode::BinlogPurged => "runbooks/binlog-purged.md",
        DefiniteCode::LineageChanged => "runbooks/source-swapped.md",
        DefiniteCode::EvidenceConflict | DefiniteCode::EvidenceCorrupt => {
            "runbooks/audit-failure.md"
        }
        DefiniteCode::TargetRejected => "runbooks/target-tampered.md",
        _ => "runbooks/pauses.md",
    }
}

/// One job as JSON.
pub fn job_json(s: &JobStatus) -> Value {
    let j = &s.job;
    json!({
        "job_id": j.job_id.0,
        "state": s.state(),
        "phase": s.phase,
        "installed_state": j.state,
        "generation": j.generation.0,
        "source": { "server": j.source.identity, "url": j.source_url, "db": j.source.db, "table": j.source.table },
        "target": { "server": j.target.identity, "url": j.target_url, "db": j.target.db, "table": j.target.table },
        "control_schema": j.control_schema,
        "windows": j.windows,
        "windows_done": s.windows_done,
        "estimated_rows": j.estimated_rows,
        "rows": { "known": j.estimated_rows, "read": s.rows_read, "final": s.rows_final, "applied": s.rows_applied },
        "window_rows": j.window_rows,
        "page_rows": j.page_rows,
        "fingerprint": j.fingerprint.to_hex(),
        "plan_digest": j.plan_digest.to_hex(),
        "capture": s.capture.as_ref().map(|(d, tail)| json!({ "stream": s.stream, "restart": d, "l_tail_seq": tail })),
        "replay": s.replay.as_ref().map(|r| json!({
            "cursor": r.end.to_string(),
            "l_seq": r.l_seq,
            "groups_applied": r.groups_applied,
            "lag_bytes": r.lag.behind_bytes,
            "lag_ms": r.lag.behind_ms,
            "phase": r.phase,
        })),
        "paused": s.paused.as_ref().map(|p| json!({
            "code": p.code.as_str(),
            "message": kernel::redact::redact_text(&p.message),
            "runbook": runbook(p.code),
        })),
        "admission_holds": Value::Null,
    })
}

/// One job as a small text table.
pub fn job_text(s: &JobStatus) -> String {
    let j = &s.job;
    let mut rows: Vec<(&str, String)> = vec![
        (
            "source",
            format!("{} on {}", j.source.qualified(), j.source_url),
        ),
        (
            "target",
            format!("{} on {}", j.target.qualified(), j.target_url),
        ),
        (
            "windows",
            format!(
                "{}/{} done ({} rows each, pages of {})",
                s.windows_done, j.windows, j.window_rows, j.page_rows
            ),
        ),
        (
            "rows",
            format!(
                "known {} (estimate at install), read {}, sealed {}, applied {}",
                j.estimated_rows, s.rows_read, s.rows_final, s.rows_applied
            ),
        ),
    ];
    rows.push((
        "capture D",
        match &s.capture {
            Some((d, tail)) => format!("{d} (L tail seq {tail})"),
            None => "not started (no B yet)".into(),
        },
    ));
    rows.push((
        "replay",
        match &s.replay {
            Some(r) => format!(
                "cursor {} ({} groups applied, {}), lag {} bytes / {} ms",
                r.end,
                r.groups_applied,
                r.phase,
                r.lag
                    .behind_bytes
                    .map_or_else(|| "?".to_string(), |b| b.to_string()),
                r.lag.behind_ms
            ),
            None => "not started".into(),
        },
    ));
    rows.push((
        "admission holds",
        "in the serve process: see its metrics (backfill_admission_*)".into(),
    ));
    if let Some(p) = &s.paused {
        rows.push((
            "paused",
            format!(
                "{}: {} -> follow {}",
                p.code.as_str(),
                kernel::redact::redact_text(&p.message),
                runbook(p.code)
            ),
        ));
    }
    let mut out = format!(
        "job {}  {}  generation {}\n",
        j.job_id,
        s.state(),
        j.generation
    );
    for (k, v) in rows {
        out.push_str(&format!("  {k:<16} {v}\n"));
    }
    out
}

/// `backfill status [JOB] [--watch SECS] [--format json]`.
pub async fn command(a: crate::cli::StatusArgs) -> Result<String> {
    use crate::cli::Format;
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = async {
        let Some(every) = a.watch else {
            return render(&pool, &a).await;
        };
        let every = std::time::Duration::from_secs(every.max(1));
        loop {
            let out = render(&pool, &a).await?;
            match a.format {
                // Clear the screen and redraw from the top left.
                Format::Text => print!("\x1b[2J\x1b[H{out}"),
                Format::Json => print!("{out}"),
            }
            let _ = std::io::Write::flush(&mut std::io::stdout());
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(String::new()),
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
    .await;
    pool.close().await;
    r
}

async fn render(pool: &MySqlPool, a: &crate::cli::StatusArgs) -> Result<String> {
    use crate::cli::Format;
    let mut all = Vec::new();
    for j in read(pool, a.job.map(JobId)).await? {
        all.push(gather(pool, j).await?);
    }
    Ok(match (a.format, a.job) {
        (Format::Json, Some(_)) => format!("{}\n", all.first().map(job_json).unwrap_or_default()),
        (Format::Json, None) => format!(
            "{}\n",
            json!({ "jobs": all.iter().map(job_json).collect::<Vec<_>>() })
        ),
        (Format::Text, _) if all.is_empty() => "no jobs installed\n".to_string(),
        (Format::Text, _) => all.iter().map(job_text).collect(),
    })
}
