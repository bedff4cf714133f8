//! Intent markers (B/LOW/HIGH/F/K) as L durably holds them, and the bounded waits on a
//! marker or on D reaching a position (every wait has a deadline; none is unbounded).

use super::{corrupt, load_position, parse_gtid, st, LSeq, Position};
use crate::change::GroupEnd;
use crate::error::{from_sqlx, DefiniteCode, Error, Result};
use crate::ids::{Generation, JobId};
use crate::position::BinlogPos;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;
use std::time::Duration;
use tokio::time::Instant;

/// An intent marker L durably holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerSeen {
    pub intent: crate::control::Intent,
    pub obsolete: bool,
    /// The L record holding it.
    pub seq: LSeq,
    /// The end of the group holding it.
    pub end: GroupEnd,
}

/// The marker with `nonce`, if L holds it.
pub async fn marker(
    pool: &MySqlPool,
    stream: &str,
    nonce: crate::ids::Nonce,
) -> Result<Option<MarkerSeen>> {
    let row = sqlx::query(
        "SELECT job_id, generation, kind, window_id, attempt, obsolete, seq, end_file, \
         end_pos, gtid FROM capture_marker WHERE stream = ? AND nonce = ?",
    )
    .bind(stream)
    .bind(nonce.0)
    .fetch_optional(pool)
    .await
    .map_err(st("reading intent markers"))?;
    let Some(r) = row else { return Ok(None) };
    let g = |e| from_sqlx("reading intent markers", &e);
    let kind: String = r.try_get("kind").map_err(g)?;
    let kind = crate::control::IntentKind::parse(&kind)
        .ok_or_else(|| corrupt(format!("marker kind `{kind}` is unknown")))?;
    Ok(Some(MarkerSeen {
        intent: crate::control::Intent {
            job: JobId(r.try_get("job_id").map_err(g)?),
            generation: Generation(r.try_get("generation").map_err(g)?),
            kind,
            window: r
                .try_get::<Option<u32>, _>("window_id")
                .map_err(g)?
                .map(crate::ids::WindowId),
            attempt: r
                .try_get::<Option<u32>, _>("attempt")
                .map_err(g)?
                .map(crate::ids::Attempt),
            nonce,
        },
        obsolete: r.try_get::<i8, _>("obsolete").map_err(g)? != 0,
        seq: r.try_get("seq").map_err(g)?,
        end: GroupEnd {
            pos: BinlogPos::new(
                r.try_get::<String, _>("end_file").map_err(g)?,
                r.try_get::<u64, _>("end_pos").map_err(g)?,
            ),
            gtid: parse_gtid(r.try_get("gtid").map_err(g)?)?,
        },
    }))
}

/// Poll interval of the waits below (bounded; no wait is unbounded).
pub const WAIT_POLL: Duration = Duration::from_millis(20);

/// Waits until L durably holds the intent with `nonce`, or `deadline` passes (transient
/// error naming what was awaited: the caller decides whether to retry within its budget).
pub async fn wait_for_marker(
    pool: &MySqlPool,
    stream: &str,
    nonce: crate::ids::Nonce,
    deadline: Instant,
) -> Result<MarkerSeen> {
    let mut woken = super::wake::subscribe();
    loop {
        if let Some(m) = marker(pool, stream, nonce).await? {
            return Ok(m);
        }
        if Instant::now() >= deadline {
            return Err(Error::transient(format!(
                "the change log of stream `{stream}` does not hold intent {nonce} yet (deadline passed): \
                 is the capture running?"
            )));
        }
        super::wake::pause(&mut woken, WAIT_POLL).await;
    }
}

/// Waits until D is at or past `pos` (same binlog series), or `deadline` passes.
pub async fn wait_for_position(
    pool: &MySqlPool,
    stream: &str,
    pos: &BinlogPos,
    deadline: Instant,
) -> Result<Position> {
    let mut woken = super::wake::subscribe();
    loop {
        if let Some(d) = load_position(pool, stream).await? {
            let ord = d
                .restart
                .pos
                .try_cmp(pos)
                .map_err(|e| Error::definite(DefiniteCode::LineageChanged, e.to_string()))?;
            if ord != std::cmp::Ordering::Less {
                return Ok(d);
            }
        }
        if Instant::now() >= deadline {
            return Err(Error::transient(format!(
                "the change log of stream `{stream}` has not reached {pos} yet (deadline passed)"
            )));
        }
        super::wake::pause(&mut woken, WAIT_POLL).await;
    }
}

/// Intent markers of (job, generation) held in L with seq <= `upto`, in L order.
pub async fn markers_of(
    pool: &MySqlPool,
    stream: &str,
    upto: LSeq,
) -> Result<Vec<(JobId, Generation, crate::control::IntentKind, LSeq)>> {
    let rows = sqlx::query(
        "SELECT job_id, generation, kind, seq FROM capture_marker \
         WHERE stream = ? AND seq <= ? AND obsolete = 0 ORDER BY seq",
    )
    .bind(stream)
    .bind(upto)
    .fetch_all(pool)
    .await
    .map_err(st("reading intent markers"))?;
    let g = |e| from_sqlx("reading intent markers", &e);
    let mut out = Vec::new();
    for r in rows {
        let kind: String = r.try_get("kind").map_err(g)?;
        if let Some(k) = crate::control::IntentKind::parse(&kind) {
            out.push((
                JobId(r.try_get("job_id").map_err(g)?),
                Generation(r.try_get("generation").map_err(g)?),
                k,
                r.try_get("seq").map_err(g)?,
            ));
        }
    }
    Ok(out)
}
