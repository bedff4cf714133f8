//! The recorded field comparisons of a job (`field_checks`, migration 0080): the activation
//! audit's field check (origin [`AUDIT`]) and a `backfill verify` of a STREAMING table that
//! found a difference (origin [`VERIFY`]). A report for `status` and `audit`, never
//! evidence: the audit compares the servers again, it does not trust this row.
use kernel::error::from_sqlx;
use kernel::ids::{Generation, JobId};
use kernel::Result;
use sqlx::MySqlPool;

/// Origin of the activation audit's field check (every audit and re-audit on restart).
pub const AUDIT: &str = "audit";
/// Origin of a `backfill verify` that found a difference on a STREAMING table.
pub const VERIFY: &str = "verify";

/// One recorded comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldCheck {
    pub origin: String,
    /// When it was recorded, as the state store's clock wrote it (UTC).
    pub checked_at: String,
    /// `full` or `sampled 1/N chunks`, with the verify mode for [`VERIFY`].
    pub mode: String,
    pub seed: u64,
    /// The binlog position both sides were compared at, when pinned.
    pub position: Option<String>,
    pub rows_checked: u64,
    pub differing_rows: u64,
    /// Readable: the first differing keys, columns and values (hex).
    pub summary: String,
}

/// Records `c` for the job-generation, replacing the earlier one of its origin.
pub async fn record(pool: &MySqlPool, job: JobId, g: Generation, c: &FieldCheck) -> Result<()> {
    sqlx::query(
        "REPLACE INTO field_checks (job_id, generation, origin, checked_at, mode, seed, \
         position, rows_checked, differing_rows, summary) \
         VALUES (?, ?, ?, UTC_TIMESTAMP(6), ?, ?, ?, ?, ?, ?)",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(&c.origin)
    .bind(&c.mode)
    .bind(c.seed)
    .bind(&c.position)
    .bind(c.rows_checked)
    .bind(c.differing_rows)
    .bind(&c.summary)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("recording a field check in field_checks", &e))?;
    Ok(())
}

/// Deletes the record of `origin` (a later clean verify clears an earlier finding).
pub async fn clear(pool: &MySqlPool, job: JobId, g: Generation, origin: &str) -> Result<()> {
    sqlx::query("DELETE FROM field_checks WHERE job_id = ? AND generation = ? AND origin = ?")
        .bind(job.0)
        .bind(g.0)
        .bind(origin)
        .execute(pool)
        .await
        .map_err(|e| from_sqlx("clearing a field check in field_checks", &e))?;
    Ok(())
}

type Row = (
    String,
    String,
    String,
    u64,
    Option<String>,
    u64,
    u64,
    String,
);

/// Every recorded comparison of the job-generation, [`AUDIT`] first.
pub async fn read(pool: &MySqlPool, job: JobId, g: Generation) -> Result<Vec<FieldCheck>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT origin, DATE_FORMAT(checked_at, '%Y-%m-%d %H:%i:%s UTC'), mode, seed, position, \
         rows_checked, differing_rows, summary FROM field_checks \
         WHERE job_id = ? AND generation = ? ORDER BY origin",
    )
    .bind(job.0)
    .bind(g.0)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading field_checks", &e))?;
    Ok(rows
        .into_iter()
        .map(|r| FieldCheck {
            origin: r.0,
            checked_at: r.1,
            mode: r.2,
            seed: r.3,
            position: r.4,
            rows_checked: r.5,
            differing_rows: r.6,
            summary: r.7,
        })
        .collect())
}

impl FieldCheck {
    /// One status line: `verify: 1 differing row at <time> (quiescent, 100 rows), key ...`.
    pub fn line(&self) -> String {
        let what = if self.origin == AUDIT {
            "activation field check"
        } else {
            "verify"
        };
        let at = self
            .position
            .as_ref()
            .map(|p| format!(" at binlog {p}"))
            .unwrap_or_default();
        let verdict = match self.differing_rows {
            0 => "no difference".to_string(),
            1 => "1 differing row".to_string(),
            n => format!("{n} differing rows"),
        };
        let mut s = format!(
            "{what}: {verdict} at {} ({}, {} rows checked, seed {:#018x}{at})",
            self.checked_at, self.mode, self.rows_checked, self.seed
        );
        if !self.summary.is_empty() {
            s.push_str(&format!(": {}", self.summary));
        }
        s
    }
}
