//! The replay progress row (state store, migration 0050): the restart hint, the groups
//! counted and the lag that status shows, and where a run starts reading L.
//!
//! # Why it is safe
//!
//! I4 crash anywhere: the row is written only after the T commit it describes (never
//! ahead of T), and [`start_point`] uses it only when L confirms that the group it names
//! ends there and T's cursor is at or past it. A lost, stale or foreign row costs a
//! re-read of L from B (every group up to T's cursor is then held), nothing else.
use super::group::cmp_end;
use super::Scope;
use kernel::change::GroupEnd;
use kernel::error::from_sqlx;
use kernel::ids::{Generation, JobId};
use kernel::log::{self, LSeq};
use kernel::position::BinlogPos;
use kernel::Result;
use ledger::target::ReplayCursor;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;
use std::cmp::Ordering;

/// Lag of the replay (DESIGN §13 status).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Lag {
    /// Binlog bytes from T's cursor to the end of the newest group of the table in L
    /// (None across binlog files).
    pub behind_bytes: Option<u64>,
    /// Age of the oldest group of the table that L holds and T does not, measured from
    /// when this replayer first saw it in L (L records carry no source timestamps), 0 when
    /// caught up.
    pub behind_ms: u64,
}

/// Bytes from `cursor` to `newest` in one binlog file.
pub fn behind_bytes(cursor: Option<&GroupEnd>, newest: Option<&GroupEnd>) -> Option<u64> {
    match (cursor, newest) {
        (_, None) => Some(0),
        (None, Some(_)) => None,
        (Some(c), Some(n)) if c.pos.file == n.pos.file => Some(n.pos.pos.saturating_sub(c.pos.pos)),
        _ => None,
    }
}

/// The stored replay hint/status row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub l_seq: LSeq,
    pub end: BinlogPos,
    pub groups_applied: u64,
    pub lag: Lag,
    pub phase: String,
}

/// Reads the replay progress row of a table-generation.
pub async fn replay_progress(
    pool: &MySqlPool,
    job: JobId,
    generation: Generation,
) -> Result<Option<Progress>> {
    let r = sqlx::query(
        "SELECT l_seq, end_file, end_pos, groups_applied, behind_bytes, behind_ms, phase \
         FROM replay_progress WHERE job_id = ? AND generation = ?",
    )
    .bind(job.0)
    .bind(generation.0)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("reading replay progress", &e))?;
    let Some(r) = r else { return Ok(None) };
    let g = |e| from_sqlx("reading replay progress", &e);
    Ok(Some(Progress {
        l_seq: r.try_get("l_seq").map_err(g)?,
        end: BinlogPos::new(
            r.try_get::<String, _>("end_file").map_err(g)?,
            r.try_get::<u64, _>("end_pos").map_err(g)?,
        ),
        groups_applied: r.try_get("groups_applied").map_err(g)?,
        lag: Lag {
            behind_bytes: r.try_get("behind_bytes").map_err(g)?,
            behind_ms: r
                .try_get::<Option<u64>, _>("behind_ms")
                .map_err(g)?
                .unwrap_or(0),
        },
        phase: r.try_get("phase").map_err(g)?,
    }))
}

pub(super) async fn save_progress(pool: &MySqlPool, scope: &Scope, p: &Progress) -> Result<()> {
    sqlx::query(
        "INSERT INTO replay_progress (job_id, generation, l_seq, end_file, end_pos, groups_applied, \
         behind_bytes, behind_ms, phase) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON DUPLICATE KEY UPDATE l_seq = VALUES(l_seq), end_file = VALUES(end_file), \
         end_pos = VALUES(end_pos), groups_applied = VALUES(groups_applied), \
         behind_bytes = VALUES(behind_bytes), behind_ms = VALUES(behind_ms), phase = VALUES(phase)",
    )
    .bind(scope.job.0)
    .bind(scope.generation.0)
    .bind(p.l_seq)
    .bind(&p.end.file)
    .bind(p.end.pos)
    .bind(p.groups_applied)
    .bind(p.lag.behind_bytes)
    .bind(p.lag.behind_ms)
    .bind(&p.phase)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("writing replay progress", &e))?;
    Ok(())
}

/// Where reading L starts: after the hint when L confirms it and T's cursor is at or past
/// it, else right after B. Returns (after seq, end of the group before, groups counted).
pub(super) async fn start_point(
    pool: &MySqlPool,
    scope: &Scope,
    b_seq: LSeq,
    cursor: Option<&ReplayCursor>,
) -> Result<(LSeq, Option<GroupEnd>, u64)> {
    let Some(h) = replay_progress(pool, scope.job, scope.generation).await? else {
        return Ok((b_seq, None, 0));
    };
    let Some(c) = cursor else {
        return Ok((b_seq, None, 0));
    };
    if h.l_seq <= b_seq {
        return Ok((b_seq, None, 0));
    }
    let recs = log::read_range(pool, &scope.stream, LSeq(h.l_seq.0 - 1), h.l_seq, 1).await?;
    let Some(end) = recs.first().and_then(|r| r.record.end.clone()) else {
        return Ok((b_seq, None, 0));
    };
    if end.pos != h.end || !matches!(cmp_end(&end, &c.end), Ok(Ordering::Less | Ordering::Equal)) {
        tracing::warn!(job = %scope.job, "replay hint not confirmed by the change log and the target ledger; reading the change log from the start position (B)");
        return Ok((b_seq, None, 0));
    }
    Ok((h.l_seq, Some(end), h.groups_applied))
}
