//! `backfill status` as text: one block per job, then the serve processes.
use super::{runbook, JobStatus};
use crate::store::processes::{self, ServeRow};
use crate::table::replay;

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

/// Text lines on the job's admission state in every serve.
fn admission_text(s: &JobStatus, serves: &[ServeRow]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in serves {
        let mine = processes::for_job(&r.admission, s.job.job_id.0);
        let tag = match r.liveness() {
            "running" => String::new(),
            other => format!(
                " [{other}: {} heartbeat {} ago, serve not running]",
                r.owner,
                secs(r.heartbeat_age_ms)
            ),
        };
        for (p, u) in &mine.in_use {
            lines.push(format!(
                "{p} permit in use by `{}` for {}{tag}",
                u.owner,
                secs(u.age_ms)
            ));
        }
        for (p, h) in &mine.holds {
            lines.push(format!(
                "{p} permit HELD, release unknown, by `{}` for {}: {}{tag}",
                h.owner,
                secs(h.age_ms),
                h.reason
            ));
        }
        for (p, w) in &mine.waiting {
            let why = match processes::pool(&r.admission, p) {
                Some(pool) if w.blocked_by_holds => format!(
                    ": blocked by {} hold(s) with release unknown ({})",
                    pool.holds.len(),
                    pool.holds
                        .iter()
                        .map(|h| format!("`{}`: {}", h.owner, h.reason))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                _ => String::new(),
            };
            lines.push(format!(
                "`{}` waiting for a {p} permit for {}{why}{tag}",
                w.owner,
                secs(w.waited_ms)
            ));
        }
    }
    if lines.is_empty() {
        lines.push(match serves.iter().find(|r| r.live()) {
            Some(r) => format!("no permit in use or awaited ({} running)", r.owner),
            None => "no serve running".into(),
        });
    }
    lines
}

/// Text lines on every serve process and its pools.
pub fn serves_text(serves: &[ServeRow]) -> String {
    let mut out = String::new();
    for r in serves {
        out.push_str(&format!(
            "serve {}  pid {}  {}  heartbeat {} ago{}\n",
            r.owner,
            r.pid,
            r.liveness().to_uppercase(),
            secs(r.heartbeat_age_ms),
            if r.live() {
                ""
            } else {
                " (the pools below are as they were then)"
            }
        ));
        for p in &r.admission.pools {
            out.push_str(&format!(
                "  {:<16} {}/{} in use, {} held (release unknown), {} waiting\n",
                p.pool,
                p.in_use.len(),
                p.capacity,
                p.holds.len(),
                p.waiting.len()
            ));
            for h in &p.holds {
                out.push_str(&format!(
                    "  {:<16} HELD by `{}` for {}: {}\n",
                    "",
                    h.owner,
                    secs(h.age_ms),
                    h.reason
                ));
            }
        }
        for c in &r.admission.connections {
            out.push_str(&format!(
                "  connections to the {} {}: {}/{} in use, {} idle, peak {}, {} waited\n",
                c.side, c.server, c.in_use, c.capacity, c.idle, c.peak, c.waits
            ));
        }
    }
    out
}

/// One job as a small text table.
pub fn job_text(s: &JobStatus, serves: &[ServeRow]) -> String {
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
        ("key", s.key.clone()),
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
    if let Some(w) = &s.window {
        rows.push(("window now", w.text()));
        rows.push((
            "garbage",
            format!(
                "{} bytes of abandoned attempts awaiting release",
                w.garbage_bytes
            ),
        ));
    }
    rows.push(("materials", s.materials.text()));
    rows.push((
        "owner",
        s.owner
            .as_ref()
            .map_or_else(|| "none (no serve has run the job)".into(), |h| h.text()),
    ));
    if let Some(r) = &s.reader {
        rows.push(("reader", r.text()));
    }
    rows.push((
        "capture position",
        match &s.capture {
            Some((d, tail)) => format!("{d} (change log tail seq {tail})"),
            None => "not started: no start position (B) yet".into(),
        },
    ));
    rows.push(("replay", replay_text(s.phase.as_deref(), s.replay.as_ref())));
    for (i, l) in admission_text(s, serves).into_iter().enumerate() {
        rows.push((if i == 0 { "admission" } else { "" }, l));
    }
    for (i, p) in s.pending.iter().enumerate() {
        rows.push((
            if i == 0 { "pending" } else { "" },
            format!(
                "{} recorded {} ago: {}",
                p.command,
                secs(p.age_ms),
                p.meaning
            ),
        ));
    }
    rows.extend(checks_rows(s));
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

/// The rows of what was checked, the schema version and the pause, in that order.
fn checks_rows(s: &JobStatus) -> Vec<(&'static str, String)> {
    let mut rows = Vec::new();
    for c in &s.field_checks {
        let label = match c.origin.as_str() {
            crate::store::field_checks::AUDIT => "audit fields",
            _ => "verify",
        };
        rows.push((label, kernel::redact::redact_text(&c.line())));
    }
    if let Some(v) = &s.verifies {
        rows.push(("periodic verify", v.line()));
    }
    if let Some(v) = &s.schema {
        let ddl: String = v.ddl.chars().take(120).collect();
        rows.push((
            "schema",
            kernel::redact::redact_text(&format!(
                "version {} since {} (change log record {}, {}): `{ddl}`",
                v.version, v.at, v.l_seq, v.how
            )),
        ));
    }
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
    rows
}

/// The replay row: the stored progress, or why there is none yet. No progress row in
/// REPLAYING means no batch of (B, F] has committed yet (or (B, F] holds no change of the
/// table); in STREAMING, no change of the table applied since activation.
pub(super) fn replay_text(phase: Option<&str>, replay: Option<&replay::Progress>) -> String {
    match (replay, phase) {
        (Some(r), _) => format!(
            "cursor {} ({} groups applied, {}), lag {} bytes / {} ms",
            r.end,
            r.groups_applied,
            r.phase,
            r.lag
                .behind_bytes
                .map_or_else(|| "?".to_string(), |b| b.to_string()),
            r.lag.behind_ms
        ),
        (None, Some("FENCED" | "REPLAYING" | "AUDITED")) => {
            "replaying from the start position (B) to the final fence (F): no batch committed \
             yet (or no change of the table in it)"
                .into()
        }
        (None, Some("STREAMING")) => "streaming: no change of the table applied yet".into(),
        (None, _) => "not started".into(),
    }
}
