//! `backfill status` without a JOB (issue 17 item 5): one line per job and a summary line,
//! for a fleet of thousands of tables.
//!
//! It reads the state store set-wise, never per job: the jobs (one query), the head of
//! every J (one query, each digest link checked), the window counters summed per job
//! (one grouped query), the replay progress rows (one query), the periodic verify records
//! (one query) and the serve processes (one query): six queries whatever the job count,
//! so the time grows with the rows read, not with round trips (1 000 jobs: see the
//! figure in tests/tests/cli/fleet_status.rs and bootstrap/BENCH.md). `status JOB` keeps
//! the per-job detail ([`super::gather`]).
//!
//! Each line is bounded ([`WIDTH`] characters; a long table name or pause reason is cut
//! with `~`), so 50 jobs fill 50 lines. Rows/s and the ETA are shown while the table is
//! in its windows: rows applied over the time from the first window's start to the last
//! counter update (`window_progress.started_at`, migration 0095), the ETA from the rows
//! the server estimated at install. Everything here is a report, never evidence.
use crate::store::jobs::{self, JobRecord};
use crate::store::processes::{self, ServeRow};
use crate::store::verifies::{self, Verifies};
use kernel::error::{from_sqlx, Definite};
use kernel::ids::{Generation, JobId};
use kernel::Result;
use ledger::journal::Journal;
use serde_json::{json, Value};
use sqlx::MySqlPool;
use std::collections::{BTreeMap, HashMap};

/// Longest line of the fleet view.
pub const WIDTH: usize = 120;

/// The states `--in-state` accepts (PAUSED matches every PAUSED(phase)).
pub const STATES: [&str; 10] = [
    "INSTALLED",
    "CAPTURING",
    "WINDOWS",
    "FENCED",
    "REPLAYING",
    "AUDITED",
    "STREAMING",
    "CANCELING",
    "CANCELLED",
    "PAUSED",
];

/// Which jobs to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// One of [`STATES`], upper case.
    pub state: Option<String>,
    /// A `*`/`?` pattern on `db.table` of the source or the target (case-insensitive).
    pub table: Option<String>,
}

impl Filter {
    /// Checks `state` against [`STATES`] (naming the accepted ones) and keeps `table`.
    pub fn new(state: Option<&str>, table: Option<&str>) -> Result<Filter> {
        let state = match state {
            Some(s) if STATES.contains(&s.to_uppercase().as_str()) => Some(s.to_uppercase()),
            Some(s) => {
                return Err(kernel::Error::definite(
                    kernel::error::DefiniteCode::Usage,
                    format!(
                        "--in-state `{s}` is not a job state; use one of {}",
                        STATES.join(", ")
                    ),
                ))
            }
            None => None,
        };
        Ok(Filter {
            state,
            table: table.map(str::to_string),
        })
    }

    /// Whether `row` is listed.
    pub fn keeps(&self, row: &FleetRow) -> bool {
        let state = row.state();
        let state_ok = match self.state.as_deref() {
            None => true,
            Some("PAUSED") => row.paused.is_some(),
            Some(s) => state == s,
        };
        let table_ok = self
            .table
            .as_deref()
            .is_none_or(|p| glob(p, &name(&row.job.source)) || glob(p, &name(&row.job.target)));
        state_ok && table_ok
    }
}

/// `db.table`, unquoted (what a `--table` pattern matches).
fn name(t: &jobs::TableRef) -> String {
    format!("{}.{}", t.db, t.table)
}

/// `db.table` as a fleet line and its JSON show it: a part of only ASCII letters, digits
/// and `_` as it is, any other backquoted with backquotes doubled, so that a name holding a
/// dot, a space or a backquote reads as one part (`` odd.`we.ird"name` ``).
fn shown(t: &jobs::TableRef) -> String {
    let part = |p: &str| {
        if !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            p.to_string()
        } else {
            kernel::schema::quote_ident(p)
        }
    };
    format!("{}.{}", part(&t.db), part(&t.table))
}

/// `*` (any run) and `?` (one character) against `text`, ASCII case-insensitive.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
    // The last `*` seen and where the text stood then: backtrack there on a mismatch.
    let (mut pi, mut ti, mut star) = (0, 0, None::<(usize, usize)>);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A job's window counters summed over its windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowSums {
    pub read: u64,
    pub sealed: u64,
    pub applied: u64,
}

/// A job's replay counters as the replayer last recorded them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplaySums {
    pub groups_applied: u64,
    pub behind_bytes: Option<u64>,
    pub lag_ms: u64,
}

/// One job of the fleet, from the set-wise reads.
#[derive(Clone, Debug)]
pub struct FleetRow {
    pub job: JobRecord,
    /// J's phase, upper case (None before serve first ran the job).
    pub phase: Option<String>,
    pub paused: Option<Definite>,
    pub windows_done: u32,
    /// Rows over all windows: read under the read views, sealed in FINAL pages, applied.
    pub rows: WindowSums,
    /// Milliseconds from the first window's start to the last counter update.
    pub window_ms: u64,
    /// What the replayer last recorded (None before its first record).
    pub replay: Option<ReplaySums>,
    pub verifies: Option<Verifies>,
    /// Material bytes the registry accounts for the job (0 once retention released them).
    pub held_bytes: u64,
}

impl FleetRow {
    /// As `status JOB` shows it.
    pub fn state(&self) -> String {
        super::state_of(
            self.paused.is_some(),
            self.phase.as_deref(),
            &self.job.state,
        )
    }

    /// Rows applied per second while the table is in its windows.
    pub fn rows_per_sec(&self) -> Option<f64> {
        let applied = self.rows.applied;
        (self.in_windows() && applied > 0 && self.window_ms > 0)
            .then(|| applied as f64 * 1000.0 / self.window_ms as f64)
    }

    /// Seconds left at that rate to the rows estimated at install.
    pub fn eta_secs(&self) -> Option<u64> {
        let rate = self.rows_per_sec().filter(|_| self.paused.is_none())?;
        let left = self.job.estimated_rows.saturating_sub(self.rows.applied);
        Some((left as f64 / rate).ceil() as u64)
    }

    fn in_windows(&self) -> bool {
        matches!(self.phase.as_deref(), Some("CAPTURING" | "WINDOWS"))
    }

    /// The replay lag in ms, once the replayer recorded one.
    pub fn lag_ms(&self) -> Option<u64> {
        self.replay.map(|r| r.lag_ms)
    }

    /// The pause reason, `code: message` (redacted), or None.
    pub fn reason(&self) -> Option<String> {
        self.paused.as_ref().map(|p| {
            format!(
                "{}: {}",
                p.code.as_str(),
                kernel::redact::redact_text(&p.message)
            )
        })
    }

    /// The fleet line.
    pub fn line(&self) -> String {
        let note = self.reason().unwrap_or_else(|| match &self.verifies {
            Some(v) => format!("verified {}x", v.verifies),
            None => String::new(),
        });
        let line = format!(
            "{:>6} {:<28} {:<17} {:>9} {:>7} {:>6} {:>6} {:>6}  {note}",
            self.job.job_id.0,
            cut(&shown(&self.job.source), 28),
            cut(&self.state(), 17),
            format!("{}/{}", self.windows_done, self.job.windows),
            self.rows_per_sec()
                .map_or_else(|| "-".into(), |r| format!("{r:.0}")),
            self.eta_secs().map_or_else(|| "-".into(), human_secs),
            self.lag_ms()
                .map_or_else(|| "-".into(), |ms| human_secs(ms.div_ceil(1000))),
            human_bytes(self.held_bytes),
        );
        cut(line.trim_end(), WIDTH)
    }

    pub fn json(&self) -> Value {
        json!({
            "job_id": self.job.job_id.0,
            "generation": self.job.generation.0,
            "source": shown(&self.job.source),
            "target": shown(&self.job.target),
            "state": self.state(),
            "phase": self.phase,
            "windows_done": self.windows_done,
            "windows": self.job.windows,
            "rows_known": self.job.estimated_rows,
            "rows_applied": self.rows.applied,
            "rows_per_sec": self.rows_per_sec(),
            "eta_secs": self.eta_secs(),
            "lag_ms": self.lag_ms(),
            "paused": self.paused.as_ref().map(|p| json!({
                "code": p.code.as_str(),
                "message": kernel::redact::redact_text(&p.message),
                "runbook": super::runbook(p.code),
            })),
            "verifies": self.verifies.as_ref().map(Verifies::json),
            "held_bytes": self.held_bytes,
        })
    }
}

/// The header of the fleet lines.
pub fn header() -> String {
    format!(
        "{:>6} {:<28} {:<17} {:>9} {:>7} {:>6} {:>6} {:>6}  {}",
        "JOB", "TABLE", "STATE", "WINDOWS", "ROWS/S", "ETA", "LAG", "HELD", "PAUSE REASON / NOTE"
    )
}

/// `s` cut to `n` characters, the last one `~` when cut.
fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut out: String = s.chars().take(n.saturating_sub(1)).collect();
    out.push('~');
    out
}

/// `0`, `512B`, `40K`, `7M`, `3G` (1024-based, rounded up).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    match UNITS.iter().find(|(u, _)| b >= *u) {
        Some((u, s)) => format!("{}{s}", b.div_ceil(*u)),
        None if b == 0 => "0".into(),
        None => format!("{b}B"),
    }
}

/// Per job: material bytes the registry accounts.
async fn held(pool: &MySqlPool) -> Result<HashMap<JobId, u64>> {
    let rows: Vec<(u64, u64)> =
        sqlx::query_as("SELECT job_id, bytes FROM ledger_material_usage WHERE job_id > 0")
            .fetch_all(pool)
            .await
            .map_err(|e| from_sqlx("reading material usage", &e))?;
    Ok(rows.into_iter().map(|(j, b)| (JobId(j), b)).collect())
}

/// `42s`, `7m05s`, `3h20m`, `2d04h`.
pub fn human_secs(s: u64) -> String {
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Per job: rows read, sealed and applied over all windows, and the window span in ms.
async fn window_sums(pool: &MySqlPool) -> Result<HashMap<(JobId, Generation), (WindowSums, u64)>> {
    let rows: Vec<(u64, u64, u64, u64, u64, i64)> = sqlx::query_as(
        "SELECT job_id, generation, CAST(SUM(rows_read) AS UNSIGNED), \
         CAST(SUM(rows_final) AS UNSIGNED), CAST(SUM(rows_applied) AS UNSIGNED), \
         TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(updated_at)) \
         FROM window_progress GROUP BY job_id, generation",
    )
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("summing window progress", &e))?;
    Ok(rows
        .into_iter()
        .map(|(j, g, read, sealed, applied, us)| {
            let ms = u64::try_from(us / 1000).unwrap_or(0);
            let sums = WindowSums {
                read,
                sealed,
                applied,
            };
            ((JobId(j), Generation(g)), (sums, ms))
        })
        .collect())
}

/// Per job: the replay counters as the replayer last recorded them.
async fn replays(pool: &MySqlPool) -> Result<HashMap<(JobId, Generation), ReplaySums>> {
    type Row = (u64, u64, u64, Option<u64>, Option<u64>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT job_id, generation, groups_applied, behind_bytes, behind_ms FROM replay_progress",
    )
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading replay progress", &e))?;
    Ok(rows
        .into_iter()
        .map(|(j, g, groups_applied, behind_bytes, ms)| {
            let r = ReplaySums {
                groups_applied,
                behind_bytes,
                lag_ms: ms.unwrap_or(0),
            };
            ((JobId(j), Generation(g)), r)
        })
        .collect())
}

/// Every job of the fleet, in job order (at most [`super::MAX_LISTED`]).
pub async fn gather(pool: &MySqlPool) -> Result<Vec<FleetRow>> {
    let all = jobs::list_jobs(pool, super::MAX_LISTED).await?;
    let heads: HashMap<_, _> = Journal::new(pool.clone())
        .heads_all()
        .await?
        .into_iter()
        .map(|h| ((h.record.job, h.record.generation), h))
        .collect();
    let windows = window_sums(pool).await?;
    let replays = replays(pool).await?;
    let mut verified = verifies::read_all(pool).await?;
    let held = held(pool).await?;
    Ok(all
        .into_iter()
        .map(|job| {
            let k = (job.job_id, job.generation);
            let head = heads.get(&k);
            let (rows, window_ms) = windows.get(&k).copied().unwrap_or_default();
            FleetRow {
                phase: head.map(|h| format!("{:?}", h.record.phase).to_uppercase()),
                paused: head.and_then(|h| h.record.paused.clone()),
                windows_done: head.map_or(0, |h| h.record.completed),
                rows,
                window_ms,
                replay: replays.get(&k).copied(),
                verifies: verified.remove(&k),
                held_bytes: held.get(&job.job_id).copied().unwrap_or(0),
                job,
            }
        })
        .collect())
}

/// Jobs per state (PAUSED(x) counted as PAUSED), in [`STATES`] order.
pub fn per_state(rows: &[FleetRow]) -> Vec<(String, usize)> {
    let mut m: BTreeMap<usize, (String, usize)> = BTreeMap::new();
    for r in rows {
        let s = if r.paused.is_some() {
            "PAUSED".to_string()
        } else {
            r.state()
        };
        let rank = STATES.iter().position(|x| *x == s).unwrap_or(STATES.len());
        m.entry(rank).or_insert_with(|| (s, 0)).1 += 1;
    }
    m.into_values().collect()
}

/// The summary line: jobs per state and the total replay lag (of the listed jobs).
pub fn summary(rows: &[FleetRow], of: usize) -> String {
    let states: Vec<String> = per_state(rows)
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect();
    let lag: u64 = rows.iter().filter_map(FleetRow::lag_ms).sum();
    let shown = match rows.len() == of {
        true => format!("{} jobs", rows.len()),
        false => format!("{} of {of} jobs", rows.len()),
    };
    format!(
        "{shown}: {}; total replay lag {}",
        if states.is_empty() {
            "none".to_string()
        } else {
            states.join(", ")
        },
        human_secs(lag.div_ceil(1000))
    )
}

/// One line per serve process: its liveness and each admission pool's use, then one line
/// per server it holds connections to.
fn serve_lines(serves: &[ServeRow]) -> String {
    serves
        .iter()
        .map(|r| {
            let pools: Vec<String> = r
                .admission
                .pools
                .iter()
                .map(|p| format!("{} {}/{}", p.pool, p.in_use.len(), p.capacity))
                .collect();
            let line = format!(
                "serve {} {} (pools: {})",
                r.owner,
                r.liveness(),
                pools.join(", ")
            );
            let mut out = format!("{}\n", cut(&line, WIDTH));
            // Its connections per server (DESIGN §17), one line each.
            for c in &r.admission.connections {
                let l = format!(
                    "  connections to the {} {}: {}/{} in use, {} idle, peak {}, {} waited",
                    c.side, c.server, c.in_use, c.capacity, c.idle, c.peak, c.waits
                );
                out.push_str(&format!("{}\n", cut(&l, WIDTH)));
            }
            out
        })
        .collect()
}

/// The fleet view as text or JSON.
pub async fn render(pool: &MySqlPool, filter: &Filter, as_json: bool) -> Result<String> {
    let all = gather(pool).await?;
    let of = all.len();
    let rows: Vec<FleetRow> = all.into_iter().filter(|r| filter.keeps(r)).collect();
    let serves = processes::read(pool).await?;
    if as_json {
        let states: serde_json::Map<String, Value> = per_state(&rows)
            .into_iter()
            .map(|(s, n)| (s, json!(n)))
            .collect();
        let v = json!({
            "jobs": rows.iter().map(FleetRow::json).collect::<Vec<_>>(),
            "summary": {
                "jobs": rows.len(),
                "of": of,
                "per_state": states,
                "total_lag_ms": rows.iter().filter_map(FleetRow::lag_ms).sum::<u64>(),
            },
            "serve": super::serves_json(&serves),
        });
        return Ok(format!("{v}\n"));
    }
    if of == 0 {
        return Ok(format!("no jobs installed\n{}", serve_lines(&serves)));
    }
    let mut out = format!("{}\n", header());
    for r in &rows {
        out.push_str(&r.line());
        out.push('\n');
    }
    out.push_str(&summary(&rows, of));
    out.push('\n');
    out.push_str(&serve_lines(&serves));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::error::DefiniteCode;

    fn row(id: u64, phase: Option<&str>, paused: bool) -> FleetRow {
        let t = |db: &str, table: &str| jobs::TableRef {
            identity: "srv".into(),
            db: db.into(),
            table: table.into(),
        };
        FleetRow {
            job: JobRecord {
                job_id: JobId(id),
                generation: Generation(1),
                state: "INSTALLED".into(),
                source: t("shop", &format!("orders_{id}")),
                target: t("copy", &format!("orders_{id}")),
                source_url: "mysql://u:***@h:1".into(),
                target_url: "mysql://u:***@h:2".into(),
                control_schema: "c".into(),
                window_rows: 100,
                page_rows: 10,
                windows: 10,
                estimated_rows: 1000,
                fingerprint: kernel::ids::Digest([0; 32]),
                plan_digest: kernel::ids::Digest([0; 32]),
            },
            phase: phase.map(str::to_string),
            paused: paused.then(|| Definite {
                code: DefiniteCode::VerifyFailed,
                message: format!("lost mysql://u:pw@h:1/x {}", "z".repeat(300)),
            }),
            windows_done: 4,
            rows: WindowSums {
                read: 400,
                sealed: 400,
                applied: 400,
            },
            window_ms: 2000,
            replay: phase.filter(|p| *p == "STREAMING").map(|_| ReplaySums {
                groups_applied: 3,
                behind_bytes: Some(0),
                lag_ms: 1500,
            }),
            verifies: None,
            held_bytes: 40 << 10,
        }
    }

    #[test]
    fn patterns_match_like_a_shell_glob_ignoring_case() {
        assert!(glob("shop.*", "shop.orders"));
        assert!(glob("SHOP.ord?rs", "shop.orders"));
        assert!(glob("*", ""));
        assert!(glob("*.o*s", "shop.orders"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("shop.*", "shopx.orders"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(!glob("?", ""));
    }

    #[test]
    fn a_line_is_bounded_and_shows_rate_eta_lag_and_the_redacted_reason() {
        let w = row(7, Some("WINDOWS"), false);
        assert_eq!(w.rows_per_sec(), Some(200.0));
        assert_eq!(w.eta_secs(), Some(3), "600 rows left at 200/s");
        let line = w.line();
        assert!(
            line.contains("4/10") && line.contains(" 200 ") && line.contains("3s"),
            "{line}"
        );
        let p = row(8, Some("WINDOWS"), true);
        assert_eq!(p.eta_secs(), None, "no ETA while paused");
        let line = p.line();
        assert!(
            line.contains("PAUSED(WINDOWS)") && line.contains("verify_failed: lost"),
            "{line}"
        );
        assert!(!line.contains("pw@"), "{line}");
        assert_eq!(line.chars().count(), WIDTH, "{line}");
        assert!(line.ends_with('~'));
        let s = row(9, Some("STREAMING"), false);
        assert_eq!(s.rows_per_sec(), None, "no rate after the windows");
        assert!(s.line().contains(" 2s"), "{}", s.line());
        assert!(header().chars().count() <= WIDTH);
    }

    #[test]
    fn filters_and_the_summary_count_states() {
        let rows = vec![
            row(1, None, false),
            row(2, Some("STREAMING"), false),
            row(3, Some("STREAMING"), false),
            row(4, Some("WINDOWS"), true),
        ];
        let f = |s: Option<&str>, t: Option<&str>| Filter::new(s, t).expect("valid");
        let kept = |f: &Filter| {
            rows.iter()
                .filter(|r| f.keeps(r))
                .map(|r| r.job.job_id.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(kept(&f(Some("streaming"), None)), [2, 3]);
        assert_eq!(kept(&f(Some("PAUSED"), None)), [4]);
        assert_eq!(kept(&f(Some("INSTALLED"), None)), [1]);
        assert_eq!(kept(&f(None, Some("copy.orders_3"))), [3]);
        assert_eq!(kept(&f(Some("STREAMING"), Some("shop.*_2"))), [2]);
        let e = Filter::new(Some("RUNNING"), None).expect_err("unknown state");
        assert!(e.to_string().contains("STREAMING, CANCELING"), "{e}");
        assert_eq!(
            summary(&rows, 4),
            "4 jobs: 1 INSTALLED, 2 STREAMING, 1 PAUSED; total replay lag 3s"
        );
        assert!(summary(&rows[..1], 4).starts_with("1 of 4 jobs: 1 INSTALLED;"));
        assert_eq!(human_secs(4000), "1h06m");
        assert_eq!(human_secs(90_000), "1d01h");
        assert_eq!(human_secs(61), "1m01s");
    }

    #[test]
    fn a_name_that_needs_quoting_is_shown_quoted_and_a_plain_one_as_it_is() {
        let t = |db: &str, table: &str| jobs::TableRef {
            identity: "srv".into(),
            db: db.into(),
            table: table.into(),
        };
        assert_eq!(shown(&t("shop", "orders_1")), "shop.orders_1");
        assert_eq!(shown(&t("shop", "we.ird\"name")), "shop.`we.ird\"name`");
        assert_eq!(shown(&t("a b", "back`tick")), "`a b`.`back``tick`");
        assert_eq!(shown(&t("shop", "ünï")), "shop.`ünï`");
        // The filter still matches the plain parts.
        assert_eq!(name(&t("shop", "we.ird")), "shop.we.ird");
    }
}
