//! The periodic verifies of STREAMING tables (`periodic_verifies`, migration 0096): per
//! job-generation, how many verifies ended with a result, how many found a difference, the
//! last one's rows, differing rows, duration and binlog point, and the last clean one.
//! Written by `crate::table::periodic` after each verify; read by `status` (one query for
//! every job). A report, never evidence: nothing decides from it.
use kernel::error::from_sqlx;
use kernel::ids::{Generation, JobId};
use kernel::Result;
use sqlx::MySqlPool;
use std::collections::HashMap;

/// One table's periodic verify record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verifies {
    pub verifies: u64,
    pub failures: u64,
    /// When the last one ended (state store clock, UTC text).
    pub last_at: String,
    pub last_rows: u64,
    pub last_differing: u64,
    pub last_ms: u64,
    pub last_position: Option<String>,
    /// The last clean verify: when, and the rows it compared.
    pub last_clean: Option<(String, u64)>,
}

/// What one verify found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub rows: u64,
    pub differing: u64,
    pub ms: u64,
    pub position: Option<String>,
}

/// Counts one finished verify of the job-generation.
pub async fn record(pool: &MySqlPool, job: JobId, g: Generation, o: &Outcome) -> Result<()> {
    let clean = o.differing == 0;
    sqlx::query(
        "INSERT INTO periodic_verifies (job_id, generation, verifies, failures, last_at, \
         last_rows, last_differing, last_ms, last_position, last_clean_at, last_clean_rows) \
         VALUES (?, ?, 1, ?, UTC_TIMESTAMP(6), ?, ?, ?, ?, IF(?, UTC_TIMESTAMP(6), NULL), IF(?, ?, NULL)) \
         ON DUPLICATE KEY UPDATE verifies = verifies + 1, failures = failures + VALUES(failures), \
         last_at = VALUES(last_at), last_rows = VALUES(last_rows), \
         last_differing = VALUES(last_differing), last_ms = VALUES(last_ms), \
         last_position = VALUES(last_position), \
         last_clean_at = IF(?, VALUES(last_clean_at), last_clean_at), \
         last_clean_rows = IF(?, VALUES(last_clean_rows), last_clean_rows)",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(u64::from(!clean))
    .bind(o.rows)
    .bind(o.differing)
    .bind(o.ms)
    .bind(&o.position)
    .bind(clean)
    .bind(clean)
    .bind(o.rows)
    .bind(clean)
    .bind(clean)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("recording a periodic verify in periodic_verifies", &e))?;
    Ok(())
}

type Row = (
    u64,
    u64,
    u64,
    u64,
    String,
    u64,
    u64,
    u64,
    Option<String>,
    Option<String>,
    Option<u64>,
);

const COLUMNS: &str = "job_id, generation, verifies, failures, \
    DATE_FORMAT(last_at, '%Y-%m-%d %H:%i:%s UTC'), last_rows, last_differing, last_ms, \
    last_position, DATE_FORMAT(last_clean_at, '%Y-%m-%d %H:%i:%s UTC'), last_clean_rows \
    FROM periodic_verifies";

fn of_row(r: Row) -> ((JobId, Generation), Verifies) {
    (
        (JobId(r.0), Generation(r.1)),
        Verifies {
            verifies: r.2,
            failures: r.3,
            last_at: r.4,
            last_rows: r.5,
            last_differing: r.6,
            last_ms: r.7,
            last_position: r.8,
            last_clean: r.9.zip(r.10),
        },
    )
}

/// The record of one job-generation (None before its first periodic verify).
pub async fn read(pool: &MySqlPool, job: JobId, g: Generation) -> Result<Option<Verifies>> {
    let sql = format!("SELECT {COLUMNS} WHERE job_id = ? AND generation = ?");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(job.0)
        .bind(g.0)
        .fetch_optional(pool)
        .await
        .map_err(|e| from_sqlx("reading periodic_verifies", &e))?;
    Ok(row.map(|r| of_row(r).1))
}

/// Every job-generation's record, in one query.
pub async fn read_all(pool: &MySqlPool) -> Result<HashMap<(JobId, Generation), Verifies>> {
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS}")))
        .fetch_all(pool)
        .await
        .map_err(|e| from_sqlx("reading periodic_verifies", &e))?;
    Ok(rows.into_iter().map(of_row).collect())
}

impl Verifies {
    /// As `status --format json` shows it (the fleet view and `status JOB`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "verifies": self.verifies,
            "failures": self.failures,
            "last_at": self.last_at,
            "last_rows": self.last_rows,
            "last_differing": self.last_differing,
            "last_ms": self.last_ms,
            "last_position": self.last_position,
            "last_clean_at": self.last_clean.as_ref().map(|c| &c.0),
            "last_clean_rows": self.last_clean.as_ref().map(|c| c.1),
            "line": self.line(),
        })
    }

    /// One status line: `12 verifies, last clean at ... (1000 rows, 35 ms)`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} verif{}, {} found a difference; last at {} ({} rows, {} differing, {} ms{})",
            self.verifies,
            if self.verifies == 1 { "y" } else { "ies" },
            self.failures,
            self.last_at,
            self.last_rows,
            self.last_differing,
            self.last_ms,
            self.last_position
                .as_ref()
                .map(|p| format!(", at binlog {p}"))
                .unwrap_or_default()
        );
        match &self.last_clean {
            Some((at, rows)) => s.push_str(&format!("; last clean at {at} ({rows} rows)")),
            None => s.push_str("; none clean yet"),
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_counts_last_and_last_clean() {
        let mut v = Verifies {
            verifies: 3,
            failures: 1,
            last_at: "2026-01-01 00:00:03 UTC".into(),
            last_rows: 100,
            last_differing: 1,
            last_ms: 12,
            last_position: Some("bin.000001:400".into()),
            last_clean: Some(("2026-01-01 00:00:02 UTC".into(), 100)),
        };
        assert_eq!(
            v.line(),
            "3 verifies, 1 found a difference; last at 2026-01-01 00:00:03 UTC (100 rows, 1 \
             differing, 12 ms, at binlog bin.000001:400); last clean at 2026-01-01 00:00:02 \
             UTC (100 rows)"
        );
        v.last_clean = None;
        v.verifies = 1;
        assert!(v.line().starts_with("1 verify, "), "{}", v.line());
        assert!(v.line().ends_with("none clean yet"), "{}", v.line());
    }
}
