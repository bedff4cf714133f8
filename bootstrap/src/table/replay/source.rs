//! Reading L for one table: intent markers and the table's next complete groups (waiting
//! for L's tail is [`super::tails`]). Only reads: L is append-only and hash chained, and
//! every read is bounded by a seq (F, K or the tail seen), a page and a change budget.
//!
//! What is read decides nothing on its own: the driver applies a group only when T's
//! cursor says T does not hold it ([`super::group::coverage`]), so a read that comes back
//! short, is repeated or is dropped (the read-ahead, on any failure) changes no outcome.
use super::group::{build_group, continues, Built};
use super::Scope;
use crate::table::schema::Chain;
use kernel::change::GroupEnd;
use kernel::error::from_sqlx;
use kernel::ids::{Generation, JobId};
use kernel::log::{self, LSeq, StoredRecord};
use kernel::position::BinlogPos;
use kernel::{Error, Result};
use ledger::apply::ReplayGroup;
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// An intent marker as L holds it: the record and the end of its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerAt {
    pub seq: LSeq,
    pub end: GroupEnd,
}

/// The first non-obsolete marker of `kind` of the table-generation in L, or the one whose
/// group ends at `at` when given.
pub async fn find_marker(
    pool: &MySqlPool,
    scope: &Scope,
    kind: kernel::control::IntentKind,
    at: Option<&BinlogPos>,
) -> Result<Option<MarkerAt>> {
    let mut sql = String::from(
        "SELECT seq, end_file, end_pos, gtid FROM capture_marker WHERE stream = ? AND job_id = ? \
         AND generation = ? AND kind = ? AND obsolete = 0",
    );
    if at.is_some() {
        sql.push_str(" AND end_file = ? AND end_pos = ?");
    }
    sql.push_str(" ORDER BY seq LIMIT 1");
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&scope.stream)
        .bind(scope.job.0)
        .bind(scope.generation.0)
        .bind(kind.as_str());
    if let Some(p) = at {
        q = q.bind(&p.file).bind(p.pos);
    }
    let what = format!("reading the {} marker of job {}", kind.as_str(), scope.job);
    let row = q
        .fetch_optional(pool)
        .await
        .map_err(|e| from_sqlx(&what, &e))?;
    let Some(r) = row else { return Ok(None) };
    let g = |e| from_sqlx(&what, &e);
    let gtid: Option<String> = r.try_get("gtid").map_err(g)?;
    Ok(Some(MarkerAt {
        seq: r.try_get("seq").map_err(g)?,
        end: GroupEnd {
            pos: BinlogPos::new(
                r.try_get::<String, _>("end_file").map_err(g)?,
                r.try_get::<u64, _>("end_pos").map_err(g)?,
            ),
            gtid: gtid.as_deref().and_then(kernel::position::Gtid::parse),
        },
    }))
}

/// The L stream holding the table-generation's B marker (the stream is named by whoever
/// runs the reader; the marker finds it).
pub async fn stream_of(
    pool: &MySqlPool,
    job: JobId,
    generation: Generation,
) -> Result<Option<String>> {
    sqlx::query_scalar(
        "SELECT stream FROM capture_marker WHERE job_id = ? AND generation = ? AND kind = 'B' \
         AND obsolete = 0 ORDER BY seq LIMIT 1",
    )
    .bind(job.0)
    .bind(generation.0)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("finding the capture stream of a job", &e))
}

/// Reads the rest of the group whose chunks `chunks` are so far (its later chunks are
/// the next L records) and builds it.
pub async fn finish_group(
    pool: &MySqlPool,
    scope: &Scope,
    chain: Option<&Chain>,
    mut chunks: Vec<StoredRecord>,
    upto: LSeq,
) -> Result<Built> {
    // Usually the next record ends the group: read one, then more and more (records are
    // up to a whole chunk of changes each; reading ahead of the group's end is wasted).
    let mut limit = 1u32;
    while chunks.last().is_some_and(|c| c.record.end.is_none()) {
        let after = chunks.last().map_or(LSeq::ZERO, |c| c.seq);
        let more = log::read_range(pool, &scope.stream, after, upto, limit).await?;
        limit = (limit * 2).min(64);
        if more.is_empty() {
            return Ok(Built::Open);
        }
        for r in more {
            let done = r.record.end.is_some();
            chunks.push(r);
            if done {
                break;
            }
        }
    }
    build_group(scope, chain, chunks).map_err(Error::Definite)
}

/// The L seq (at most `upto`) up to which the table's next records after `after` hold
/// `budget` changes, from L's table index alone (no record body is read): a batch of big
/// groups then reads only the records it uses.
async fn read_bound(
    pool: &MySqlPool,
    scope: &Scope,
    after: LSeq,
    upto: LSeq,
    page: u32,
    budget: usize,
) -> Result<LSeq> {
    let rows: Vec<(LSeq, u32)> = sqlx::query_as(
        "SELECT seq, changes FROM capture_log_table WHERE stream = ? AND schema_name = ? \
         AND table_name = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
    )
    .bind(&scope.stream)
    .bind(&scope.source_db)
    .bind(&scope.source_table)
    .bind(after)
    .bind(upto)
    .bind(page)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading the change log's table index", &e))?;
    let mut sum = 0usize;
    for (seq, n) in rows {
        sum += n as usize;
        if sum >= budget {
            return Ok(seq);
        }
    }
    Ok(upto)
}

/// Complete groups with the L seq of their last chunk, and the seq to continue after.
pub type Batch = (Vec<(ReplayGroup, LSeq)>, LSeq);

/// The next complete groups of the table after L seq `after` (up to `upto`), at most
/// `max` of them and no more once they hold `max_changes` changes; also returns the seq to
/// continue after. Stops before an open group.
/// A group's later chunks are taken from the same read when they touch the table and
/// follow directly; only the others are read record by record ([`finish_group`]).
/// The group of a DDL with a sealed schema version (DESIGN §16) comes alone: the groups
/// before it end the batch, and it is the next batch by itself.
#[allow(clippy::too_many_arguments)]
pub async fn next_groups(
    pool: &MySqlPool,
    scope: &Scope,
    chain: Option<&Chain>,
    after: LSeq,
    upto: LSeq,
    max: usize,
    max_changes: usize,
    page: u32,
) -> Result<Batch> {
    let mut out: Vec<(ReplayGroup, LSeq)> = Vec::new();
    let mut changes = 0usize;
    let mut next = after;
    'outer: while out.len() < max.max(1) && changes < max_changes.max(1) {
        let bound = read_bound(pool, scope, next, upto, page, max_changes - changes).await?;
        let recs = log::table_records(
            pool,
            &scope.stream,
            &scope.source_db,
            &scope.source_table,
            next,
            bound,
            page,
        )
        .await?;
        if recs.is_empty() {
            break;
        }
        let mut it = recs.into_iter().peekable();
        while let Some(first) = it.next() {
            if first.seq <= next {
                continue;
            }
            let mut chunks = vec![first];
            while let Some(r) = it.next_if(|r| chunks.last().is_some_and(|l| continues(l, r))) {
                chunks.push(r);
            }
            match finish_group(pool, scope, chain, chunks, upto).await? {
                Built::Open => break 'outer,
                Built::Complete { group, last_seq } => {
                    if chain.and_then(|c| c.sealed_at(last_seq)).is_some() {
                        if out.is_empty() {
                            out.push((group, last_seq));
                            next = last_seq;
                        }
                        break 'outer;
                    }
                    changes += group.changes.len();
                    out.push((group, last_seq));
                    next = last_seq;
                }
            }
            if out.len() >= max.max(1) || changes >= max_changes.max(1) {
                break 'outer;
            }
        }
    }
    Ok((out, next))
}
