//! `backfill status --format json`: one document per job (and the serve processes), the
//! same numbers as the text form.
use super::{runbook, JobStatus, WindowNow};
use crate::store::processes::{self, ServeRow};
use serde_json::{json, Value};

/// One job as JSON.
pub fn job_json(s: &JobStatus, serves: &[ServeRow]) -> Value {
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
        "key": s.key,
        "windows_done": s.windows_done,
        "estimated_rows": j.estimated_rows,
        "rows": { "known": j.estimated_rows, "read": s.rows_read, "final": s.rows_final, "applied": s.rows_applied },
        "window": s.window.as_ref().map(WindowNow::json),
        "materials": s.materials.json(),
        "window_rows": j.window_rows,
        "page_rows": j.page_rows,
        "fingerprint": j.fingerprint.to_hex(),
        "plan_digest": j.plan_digest.to_hex(),
        "owner": s.owner.as_ref().map(|h| json!({ "owner": h.owner, "token": h.token, "live": h.live(), "expires_in_ms": h.expires_in_ms })),
        "reader": s.reader.as_ref().map(|h| json!({ "owner": h.owner, "token": h.token, "live": h.live(), "expires_in_ms": h.expires_in_ms })),
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
        "pending_commands": s.pending.iter().map(|p| json!({
            "command": p.command, "age_ms": p.age_ms, "meaning": p.meaning,
        })).collect::<Vec<_>>(),
        "admission": admission_json(s, serves),
        "audit_fields": field_check_json(s, crate::store::field_checks::AUDIT),
        "verify": field_check_json(s, crate::store::field_checks::VERIFY),
        "periodic_verify": s.verifies.as_ref().map(crate::store::verifies::Verifies::json),
        "schema": s.schema.as_ref().map_or(json!({ "version": 1 }), |v| json!({
            "version": v.version,
            "since": v.at.to_string(),
            "l_seq": v.l_seq.0,
            "how": v.how,
            "last_ddl": kernel::redact::redact_text(&v.ddl),
        })),
    })
}

/// The recorded field check of `origin` (None when there is none).
fn field_check_json(s: &JobStatus, origin: &str) -> Value {
    match s.field_checks.iter().find(|c| c.origin == origin) {
        Some(c) => json!({
            "checked_at": c.checked_at,
            "mode": c.mode,
            "seed": c.seed,
            "position": c.position,
            "rows_checked": c.rows_checked,
            "differing_rows": c.differing_rows,
            "summary": kernel::redact::redact_text(&c.summary),
            "line": kernel::redact::redact_text(&c.line()),
        }),
        None => Value::Null,
    }
}

/// What the job holds and waits for in each serve's persisted admission state.
fn admission_json(s: &JobStatus, serves: &[ServeRow]) -> Value {
    let mut out = Vec::new();
    for r in serves {
        let mine = processes::for_job(&r.admission, s.job.job_id.0);
        if mine.is_empty() {
            continue;
        }
        let blocked = |pool: &str| -> Vec<Value> {
            processes::pool(&r.admission, pool)
                .map(|p| {
                    p.holds
                        .iter()
                        .map(|h| json!({ "owner": h.owner, "reason": h.reason }))
                        .collect()
                })
                .unwrap_or_default()
        };
        out.push(json!({
            "serve": r.owner,
            "serve_state": r.liveness(),
            "heartbeat_age_ms": r.heartbeat_age_ms,
            "in_use": mine.in_use.iter().map(|(p, u)| json!({ "pool": p, "owner": u.owner, "age_ms": u.age_ms })).collect::<Vec<_>>(),
            "holds": mine.holds.iter().map(|(p, h)| json!({ "pool": p, "owner": h.owner, "reason": h.reason, "age_ms": h.age_ms, "release": "unknown" })).collect::<Vec<_>>(),
            "waiting": mine.waiting.iter().map(|(p, w)| json!({
                "pool": p, "owner": w.owner, "waited_ms": w.waited_ms,
                "blocked_by_holds": w.blocked_by_holds,
                "holds": if w.blocked_by_holds { blocked(p) } else { Vec::new() },
            })).collect::<Vec<_>>(),
        }));
    }
    Value::Array(out)
}

/// Every serve process and its pools, as JSON.
pub fn serves_json(serves: &[ServeRow]) -> Value {
    Value::Array(
        serves
            .iter()
            .map(|r| {
                json!({
                    "owner": r.owner,
                    "pid": r.pid,
                    "state": r.liveness(),
                    "stale": !r.stopped && !r.live(),
                    "heartbeat_age_ms": r.heartbeat_age_ms,
                    "up_ms": r.up_ms,
                    "pools": r.admission.pools,
                    "connections": r.admission.connections,
                })
            })
            .collect(),
    )
}
