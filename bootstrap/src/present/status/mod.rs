//! `backfill status` (DESIGN §13, STYLE §10): per job, what install recorded plus where the
//! execution is, read from the state store only (status needs no source or target URL):
//!
//! * phase, pause reason and window count from J (the authority on where a table is);
//! * rows known (the server's estimate at install) versus rows read, sealed and applied
//!   (`window_progress`, counters written by the window runner);
//! * in the window phase, the window J is on: its attempts and, once one failed, the last
//!   error kept for it (`window_attempts`, redacted), and the bytes of abandoned attempts'
//!   materials awaiting release (`Registry::garbage_bytes`);
//! * replay cursor, groups applied and lag (`replay_progress`, written by the replayer);
//! * the capture position D of the job's source stream;
//! * the activation audit's last field check and a `verify` finding on a STREAMING table
//!   (`field_checks`), until a later clean verify clears it;
//! * the periodic verifies of `serve --verify-every` (`periodic_verifies`): how many, how
//!   many found a difference, the last one and the last clean one;
//! * commands recorded but not yet carried out by `serve` (`start`, `cancel`, `resume`);
//! * the admission state each `serve` persisted (`crate::store::processes`): permits in use,
//!   holds whose release is unknown and queues, with the jobs they belong to, marked stale
//!   when that serve's heartbeat is old (it is not running).
//!
//! Everything here is a report, never evidence: `audit` is the check. The same snapshot
//! feeds the live display of `backfill demo`.
use crate::store::jobs::{self, JobRecord};
use crate::store::processes;
use crate::table::replay;
use crate::table::window::{attempts, progress};
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{JobId, WindowId};
use kernel::Result;
use ledger::journal::{Head, Journal};
use ledger::record::Phase;
use ledger::registry::Registry;
use serde_json::{json, Value};
use sqlx::MySqlPool;

pub mod fleet;
mod json;
mod text;

pub use json::{job_json, serves_json};
pub use text::{job_text, serves_text};

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
    /// The key the table is copied by (DESIGN §14).
    pub key: String,
    /// Rows read under read views, sealed FINAL and applied, summed over windows.
    pub rows_read: u64,
    pub rows_final: u64,
    pub rows_applied: u64,
    /// The L stream of the job's source, once B was written.
    pub stream: Option<String>,
    /// D: where the capture reader restarts, and L's tail seq.
    pub capture: Option<(String, kernel::log::LSeq)>,
    pub replay: Option<replay::Progress>,
    /// Commands recorded for this generation that serve has not carried out yet.
    pub pending: Vec<Pending>,
    /// In the window phase: the window J is on.
    pub window: Option<WindowNow>,
    /// The activation audit's last field check and a verify's standing finding
    /// (`crate::store::field_checks`).
    pub field_checks: Vec<crate::store::field_checks::FieldCheck>,
    /// The periodic verifies of `serve --verify-every` (`crate::store::verifies`).
    pub verifies: Option<crate::store::verifies::Verifies>,
    /// The table's last schema version after install's (DESIGN §16), if any.
    pub schema: Option<crate::store::schema_versions::SchemaVersion>,
    /// Material bytes held and released by retention (DESIGN §17).
    pub materials: Materials,
    /// The process holding the job's lease (DESIGN §18), and the one reading its stream.
    pub owner: Option<crate::store::owners::Holder>,
    pub reader: Option<crate::store::owners::Holder>,
}

/// A table's materials: bytes the registry accounts now, and its release (retention).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Materials {
    pub held_bytes: u64,
    /// `retained`, `releasing` or `released` once serve's GC has seen the table STREAMING.
    pub release: Option<&'static str>,
    pub released_bytes: u64,
    pub released_materials: u64,
    /// When the intent or the release was recorded.
    pub at: Option<String>,
}

impl Materials {
    /// One text line.
    pub fn text(&self) -> String {
        let mut out = format!("held {} bytes", self.held_bytes);
        match self.release {
            Some("released") | Some("releasing") => out.push_str(&format!(
                ", {} {} bytes ({} materials) at {}",
                self.release.unwrap_or_default(),
                self.released_bytes,
                self.released_materials,
                self.at.as_deref().unwrap_or("?")
            )),
            Some(r) => out.push_str(&format!(" ({r} by the retention policy)")),
            None => {}
        }
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "held_bytes": self.held_bytes,
            "release": self.release,
            "released_bytes": self.released_bytes,
            "released_materials": self.released_materials,
            "at": self.at,
        })
    }
}

/// The materials row of `job`.
async fn materials(pool: &MySqlPool, job: &JobRecord) -> Result<Materials> {
    use crate::store::retention as rows;
    let held = Registry::new(pool.clone())
        .usage(job.job_id)
        .await?
        .map_or(0, |u| u.bytes);
    let r = rows::read(pool, job.job_id, job.generation).await?;
    Ok(Materials {
        held_bytes: held,
        release: r.as_ref().map(|r| match r.state {
            rows::DONE => "released",
            rows::INTENT => "releasing",
            _ => "retained",
        }),
        released_bytes: r
            .as_ref()
            .filter(|r| r.state >= rows::INTENT)
            .map_or(0, |r| r.bytes),
        released_materials: r
            .as_ref()
            .filter(|r| r.state >= rows::INTENT)
            .map_or(0, |r| r.materials),
        at: r.and_then(|r| r.done_at.or(r.intent_at)),
    })
}

/// The window J is on, while the table is in the window phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowNow {
    pub window: WindowId,
    pub attempts: attempts::Tries,
    /// Materials of abandoned attempts not released yet (`Registry::garbage_bytes`).
    pub garbage_bytes: u64,
}

impl WindowNow {
    /// The last attempt's error, shown once the window has had more than one attempt
    /// (an error is then why the current attempt exists), redacted.
    pub fn last_error(&self) -> Option<String> {
        match &self.attempts.last_error {
            Some(e) if self.attempts.attempts > 1 => Some(kernel::redact::redact_text(e)),
            _ => None,
        }
    }

    /// One text line: `w3 attempt 2 (last error: ...)`.
    pub fn text(&self) -> String {
        let mut out = format!("{} attempt {}", self.window, self.attempts.attempts);
        if let Some(e) = self.last_error() {
            out.push_str(&format!(" (last error: {e})"));
        }
        out
    }

    pub fn json(&self) -> Value {
        json!({
            "window": self.window.0,
            "attempts": self.attempts.attempts,
            "last_error": self.last_error(),
            "garbage_bytes": self.garbage_bytes,
        })
    }
}

/// The window J is on, when J is in the window phase with windows left.
async fn window_now(pool: &MySqlPool, job: &JobRecord, head: &Head) -> Result<Option<WindowNow>> {
    let r = &head.record;
    if r.phase != Phase::Windows || r.completed >= job.windows {
        return Ok(None);
    }
    let w = WindowId(r.completed);
    Ok(Some(WindowNow {
        window: w,
        attempts: attempts::tries(pool, job.job_id, job.generation, w).await?,
        garbage_bytes: Registry::new(pool.clone())
            .garbage_bytes(job.job_id, job.generation)
            .await?,
    }))
}

/// A persisted command not yet carried out by `serve`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    pub command: String,
    /// Age of the record (state store clock).
    pub age_ms: u64,
    pub meaning: &'static str,
}

/// The commands of `job` that serve has not carried out: `start` before J has a head,
/// `cancel` until CANCELLED, `resume` until consumed.
async fn pending(pool: &MySqlPool, job: &JobRecord, has_head: bool) -> Result<Vec<Pending>> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT command, TIMESTAMPDIFF(MICROSECOND, issued_at, CURRENT_TIMESTAMP(6)) \
         FROM job_commands WHERE job_id = ? AND generation = ? ORDER BY issued_at LIMIT 16",
    )
    .bind(job.job_id.0)
    .bind(job.generation.0)
    .fetch_all(pool)
    .await
    .map_err(|e| kernel::error::from_sqlx("reading job commands", &e))?;
    let cancelled = job.state == jobs::STATE_CANCELLED;
    Ok(rows
        .into_iter()
        .filter_map(|(command, age)| {
            let meaning = match command.as_str() {
                crate::store::commands::START if !has_head => {
                    "recorded; no serve has run the job yet"
                }
                crate::store::commands::CANCEL if !cancelled => {
                    "CANCELING: serve stops the job at its next boundary, then writes the cancel point (K)"
                }
                crate::store::commands::RESUME => {
                    "recorded; serve clears the pause when it runs the job"
                }
                _ => return None,
            };
            Some(Pending {
                command,
                age_ms: u64::try_from(age / 1000).unwrap_or(0),
                meaning,
            })
        })
        .collect())
}

/// Reads the execution status of `job`.
pub async fn gather(pool: &MySqlPool, job: JobRecord) -> Result<JobStatus> {
    let head = Journal::new(pool.clone())
        .head(job.job_id, job.generation)
        .await?;
    let windows = progress::read(pool, job.job_id, job.generation).await?;
    let key = jobs::load_schema(pool, job.job_id).await?.describe_key();
    let stream = replay::stream_of(pool, job.job_id, job.generation).await?;
    let capture = match &stream {
        Some(s) => kernel::log::load_position(pool, s)
            .await?
            .map(|d| (d.restart.pos.to_string(), d.tail.seq)),
        None => None,
    };
    let replay = replay::replay_progress(pool, job.job_id, job.generation).await?;
    let owner = crate::store::owners::job_owner(pool, job.job_id).await?;
    let reader = match &stream {
        Some(s) => crate::store::owners::stream_reader(pool, s).await?,
        None => None,
    };
    let pending = pending(pool, &job, head.is_some()).await?;
    let field_checks = crate::store::field_checks::read(pool, job.job_id, job.generation).await?;
    let verifies = crate::store::verifies::read(pool, job.job_id, job.generation).await?;
    let schema = crate::store::schema_versions::versions(pool, job.job_id, job.generation)
        .await?
        .pop();
    let materials = materials(pool, &job).await?;
    let window = match &head {
        Some(h) => window_now(pool, &job, h).await?,
        None => None,
    };
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
        key,
        stream,
        capture,
        replay,
        pending,
        window,
        field_checks,
        verifies,
        schema,
        materials,
        owner,
        reader,
    })
}

impl JobStatus {
    /// The state to show: PAUSED(phase) while paused, else J's phase, else install's state.
    pub fn state(&self) -> String {
        state_of(
            self.paused.is_some(),
            self.phase.as_deref(),
            &self.job.state,
        )
    }
}

/// PAUSED(phase) while paused, else J's phase, else the state install recorded.
pub fn state_of(paused: bool, phase: Option<&str>, installed: &str) -> String {
    match (paused, phase) {
        (true, Some(p)) => format!("PAUSED({p})"),
        (false, Some(p)) => p.to_string(),
        (_, None) => installed.to_string(),
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
        DefiniteCode::VerifyFailed => "runbooks/periodic-verify.md",
        _ => "runbooks/pauses.md",
    }
}

/// `status JOB` (the per-job detail, text or one JSON document) or, without a job, the
/// fleet view of every job that `filter` keeps ([`fleet`]).
pub async fn render(
    pool: &MySqlPool,
    job: Option<JobId>,
    filter: &fleet::Filter,
    json: bool,
) -> Result<String> {
    let Some(job) = job else {
        return fleet::render(pool, filter, json).await;
    };
    let s = gather(pool, jobs::load_job(pool, job).await?).await?;
    let serves = processes::read(pool).await?;
    Ok(if json {
        let mut v = job_json(&s, &serves);
        v["serve"] = serves_json(&serves);
        format!("{v}\n")
    } else {
        format!("{}{}", job_text(&s, &serves), serves_text(&serves))
    })
}

#[cfg(test)]
mod tests {
    use super::text::replay_text;
    use super::*;

    fn now(attempts: u32, last_error: Option<&str>) -> WindowNow {
        WindowNow {
            window: WindowId(3),
            attempts: attempts::Tries {
                attempts,
                last_error: last_error.map(str::to_string),
            },
            garbage_bytes: 4096,
        }
    }

    #[test]
    fn the_last_error_shows_after_a_failed_attempt_redacted() {
        let w = now(2, Some("lost mysql://u:pw@h:1/db mid-read"));
        assert_eq!(
            w.text(),
            "w3 attempt 2 (last error: lost mysql://u:***@h:1/db mid-read)"
        );
        let j = w.json();
        assert_eq!(j["window"], 3);
        assert_eq!(j["attempts"], 2);
        assert_eq!(j["garbage_bytes"], 4096);
        assert_eq!(j["last_error"], "lost mysql://u:***@h:1/db mid-read");
        assert!(!j.to_string().contains("pw@"), "{j}");
    }

    #[test]
    fn the_replay_row_says_why_there_is_no_cursor_yet() {
        assert_eq!(replay_text(Some("WINDOWS"), None), "not started");
        assert!(replay_text(Some("REPLAYING"), None)
            .starts_with("replaying from the start position (B)"));
        assert!(replay_text(Some("STREAMING"), None).starts_with("streaming:"));
        let p = replay::Progress {
            l_seq: kernel::log::LSeq(9),
            end: kernel::position::BinlogPos::new("mysql-bin.000001", 400),
            groups_applied: 3,
            lag: replay::Lag {
                behind_bytes: None,
                behind_ms: 12,
            },
            phase: "REPLAYING".into(),
        };
        assert_eq!(
            replay_text(Some("REPLAYING"), Some(&p)),
            "cursor mysql-bin.000001:400 (3 groups applied, REPLAYING), lag ? bytes / 12 ms"
        );
    }

    #[test]
    fn l_seqs_show_in_json_as_bare_numbers() {
        // `l_seq` and `l_tail_seq` keep the shape they had as u64.
        let seq = kernel::log::LSeq(9);
        assert_eq!(serde_json::to_value(seq).unwrap(), json!(9));
        assert_eq!(json!({ "l_seq": seq }).to_string(), r#"{"l_seq":9}"#);
    }

    #[test]
    fn every_runbook_named_exists() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for code in crate::supervisor::telemetry::PAUSE_CODES {
            let path = root.join(runbook(code));
            assert!(path.is_file(), "{code:?}: {}", path.display());
        }
        assert_eq!(
            runbook(DefiniteCode::VerifyFailed),
            "runbooks/periodic-verify.md"
        );
    }

    #[test]
    fn a_first_attempt_shows_no_error() {
        assert_eq!(now(1, Some("stale")).last_error(), None);
        assert_eq!(now(1, None).text(), "w3 attempt 1");
        assert_eq!(now(0, None).json()["last_error"], Value::Null);
        assert_eq!(now(4, None).last_error(), None);
    }
}
