//! Replay of a table's captured change groups into the target (DESIGN §6): every group of
//! the table in (B, F] before activation, then continuously after STREAMING.
//!
//! # Why it is safe
//!
//! * I1 convergence. Groups are applied in L order, which is binlog order, which is the
//!   source's commit order (DESIGN §3.8). Each row change is applied by primary key and full
//!   image only ([`ledger::apply`]): an insert or update upserts the after-image, a
//!   key-changing update deletes the old key then upserts the new one, a delete deletes by
//!   key and accepts 0 rows. Replaying an older image over a window's newer baseline makes
//!   the row regress briefly and then converge: the last change of every key in (B, F]
//!   is applied last, and a key no change touches keeps the window's value, which is its
//!   value at F (the window's HIGH is before F and nothing touched it since). Nothing is
//!   dropped because a window's HIGH already covered it. The target is exclusive and
//!   unpublished until STREAMING, so the regression is never visible.
//! * I2 no duplicate effect. Every target transaction first moves T's cursor with a
//!   conditional update from the cursor it expects ([`ledger::apply::apply_groups`]), so
//!   a batch whose COMMIT landed (even one lost on the wire) makes the retry find the cursor
//!   moved and run no business DML. A group is skipped here only when T's cursor is at or
//!   past its end; the decision is T's, never this process's memory.
//! * I3 regrouping (seed 002). The identity of what was applied is the source history's:
//!   a group is one source transaction, named by its end position, GTID and the digest of
//!   its changes ([`ledger::apply::ReplayGroup::digest`]); a chunked group's sub-cursor
//!   counts changes, not chunks. Neither depends on how many groups or rows a batch held,
//!   so a restart with another `batch_rows`/`batch_groups` resumes exactly at T's cursor
//!   and never conflicts: the reference system stalled here because its batch id was a
//!   callback sequence number whose content changed when the restart regrouped.
//! * I4 crash anywhere. The only state kept outside T is [`replay_progress`]: a hint
//!   written after the T commit it describes (never ahead of T) and used only when L
//!   confirms the group it names ends there and T's cursor is at or past it. Losing it costs
//!   a re-read of L from B, nothing else.
//! * I6 no silent loss. A pause or raw rows of this table in L (the reader met something it
//!   could not decode safely), a group whose chunks do not chain, or a cursor that names no
//!   group boundary stop the replay with a definite error naming the position.
//!
//! * Apply streams ([`ReplayConfig::apply_streams`]). With N > 1 a batch is applied over
//!   N target connections by [`ledger::parts::apply_groups_parts`]: keys split into N
//!   partitions, each its own target transaction with its own cursor row in T, the one
//!   moving the main cursor committed last (see that module for why I1/I2 hold). This
//!   loop keeps reading only the main cursor, so what it skips, the restart point and the
//!   lag are as with one stream. N connections writing at once are N target writes
//!   (DESIGN §8): a STREAMING batch takes N permits together, and after any failed,
//!   unknown or timed-out batch every one of the N connections is KILLed and confirmed
//!   gone before its permit is released (an unconfirmed one stays a hold naming it).
//!
//! * Read-ahead. While a batch applies, the next one is read from L (append-only, hash
//!   chained, read only up to the same bound). It is used only once the batch before it
//!   committed and is dropped on any failure; what to apply is still decided by T's
//!   cursor, never by what was read.
//!
//! "Replay reached F" (DESIGN §6) means T's cursor is at or past the table's last group at
//! or before F in L; with no group in (B, F] no cursor is needed and none is invented
//! ([`replay_to`] then applies nothing).
use kernel::change::{Change, GroupEnd};
use kernel::error::{from_sqlx, Definite, DefiniteCode};
use kernel::ids::{Generation, JobId};
use kernel::log::{self, RecordBody, StoredRecord};
use kernel::position::BinlogPos;
use kernel::{failpoint, Error, Result};
use ledger::apply::{self, ApplyError, Limits, ReplayGroup};
use ledger::target::{self, ReplayCursor, TargetCtx};
use mysql_async::{Conn, Opts};
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;
use std::cmp::Ordering;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One table-generation as fence, replay and audit see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    pub job: JobId,
    pub generation: Generation,
    /// The L stream that captures the source server.
    pub stream: String,
    /// The SOURCE table's schema and name, as L's changes name it.
    pub source_db: String,
    pub source_table: String,
}

/// How replay batches (every bound is finite; changing any of them across a restart is
/// safe, see the module doc).
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// Changes per target transaction at most; whole groups are packed, a larger group is
    /// applied in chunks with the sub-cursor.
    pub batch_rows: usize,
    /// Groups handed to one apply call at most.
    pub batch_groups: usize,
    /// L records read per query.
    pub read_page: u32,
    /// Longest single wait for L's tail to move while following.
    pub idle_wait: Duration,
    /// Consecutive transient failures tolerated while following (reset by each commit).
    pub max_retries: u32,
    /// Target connections the replay applies on at once, keys split between them by
    /// [`ledger::parts::partition_of`] (1 = one connection, as before key partitions).
    /// Each is a target write: per-batch permits are taken together, and a coarse run
    /// holds as many (`crate::table::activation::under_write_permits`).
    pub apply_streams: usize,
}

impl Default for ReplayConfig {
    fn default() -> ReplayConfig {
        ReplayConfig {
            batch_rows: 20_000,
            batch_groups: 500,
            read_page: 500,
            idle_wait: Duration::from_millis(200),
            max_retries: 3,
            apply_streams: 1,
        }
    }
}

impl ReplayConfig {
    /// The ledger's statement limits for this configuration.
    pub fn limits(&self) -> Limits {
        Limits {
            txn_rows: self.batch_rows.max(1),
            ..Limits::default()
        }
    }
}

// ---------------------------------------------------------------------------------------
// Pure: what one L record holds for the table, and complete groups from chunks
// ---------------------------------------------------------------------------------------

fn definite(code: DefiniteCode, message: String) -> Definite {
    Definite { code, message }
}

/// The changes of the table in one L record, in binlog order. A pause of this
/// table-generation or rows kept raw for it are a definite stop: replay never skips them.
pub fn table_part(scope: &Scope, rec: &StoredRecord) -> Result<Vec<Change>, Definite> {
    let RecordBody::Chunk(c) = &rec.record.body else {
        return Ok(Vec::new());
    };
    let mine = |s: &str, t: &str| s == scope.source_db && t == scope.source_table;
    if let Some(p) = c.pauses.iter().find(|p| {
        (p.job == scope.job && p.generation == scope.generation) || mine(&p.schema, &p.table)
    }) {
        return Err(definite(
            p.error.code,
            format!(
                "job {} {}: the reader paused `{}`.`{}` at {} (L record {}): {}; replay stops there",
                scope.job, scope.generation, p.schema, p.table, p.at, rec.seq, p.error.message
            ),
        ));
    }
    if let Some(r) = c.raw.iter().find(|r| mine(&r.schema, &r.table)) {
        return Err(definite(
            DefiniteCode::Uncapturable,
            format!(
                "job {} {}: L record {} keeps rows of `{}`.`{}` at {}:{} raw (not decodable against the sealed schema); replay stops there",
                scope.job, scope.generation, rec.seq, r.schema, r.table, rec.record.start.file, r.event_pos
            ),
        ));
    }
    Ok(c.changes
        .iter()
        .filter(|ch| mine(&ch.id.schema, &ch.id.table))
        .cloned()
        .collect())
}

/// A group of the table built from its chunk records.
#[derive(Clone, Debug, PartialEq)]
pub enum Built {
    /// The group is complete in L; `last_seq` is the L seq of its last chunk.
    Complete { group: ReplayGroup, last_seq: u64 },
    /// L does not hold the group's end yet (it is still being captured).
    Open,
}

/// Builds one group from consecutive chunk records of the same group (the first given
/// chunk need not be chunk 0: earlier chunks without this table's changes add nothing).
/// Chunks must have consecutive seqs, one start and consecutive chunk numbers, and only
/// the last may carry the end.
pub fn build_group(scope: &Scope, chunks: &[StoredRecord]) -> Result<Built, Definite> {
    let Some(first) = chunks.first() else {
        return Ok(Built::Open);
    };
    let mut changes = Vec::new();
    for (i, r) in chunks.iter().enumerate() {
        if i > 0 {
            let p = &chunks[i - 1];
            if r.seq != p.seq + 1
                || r.record.start != first.record.start
                || r.record.chunk != p.record.chunk + 1
                || p.record.end.is_some()
            {
                return Err(definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!(
                        "L records {} and {} do not chain as chunks of the group starting at {}",
                        p.seq, r.seq, first.record.start
                    ),
                ));
            }
        }
        changes.extend(table_part(scope, r)?);
    }
    let last = &chunks[chunks.len() - 1];
    Ok(match &last.record.end {
        Some(end) => Built::Complete {
            group: ReplayGroup {
                end: end.clone(),
                changes,
            },
            last_seq: last.seq,
        },
        None => Built::Open,
    })
}

/// Orders two group ends; positions of another binlog series are a definite lineage
/// error, never "not before".
pub fn cmp_end(a: &GroupEnd, b: &GroupEnd) -> Result<Ordering, Definite> {
    a.pos
        .try_cmp(&b.pos)
        .map_err(|e| definite(DefiniteCode::LineageChanged, e.to_string()))
}

/// What to do with a group given T's cursor: skip it (T holds all of it), or apply it
/// (from the start, or from the sub-cursor when T holds part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    Held,
    Apply,
}

/// Decides [`Coverage`] for a group ending at `end`.
pub fn coverage(cursor: Option<&ReplayCursor>, end: &GroupEnd) -> Result<Coverage, Definite> {
    let Some(c) = cursor else {
        return Ok(Coverage::Apply);
    };
    Ok(match cmp_end(end, &c.end)? {
        Ordering::Less => Coverage::Held,
        Ordering::Equal if c.rows_done == 0 => Coverage::Held,
        _ => Coverage::Apply,
    })
}

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

// ---------------------------------------------------------------------------------------
// L reading
// ---------------------------------------------------------------------------------------

/// An intent marker as L holds it: the record and the end of its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerAt {
    pub seq: u64,
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
async fn finish_group(
    pool: &MySqlPool,
    scope: &Scope,
    mut chunks: Vec<StoredRecord>,
    upto: u64,
) -> Result<Built> {
    // Usually the next record ends the group: read one, then more and more (records are
    // up to a whole chunk of changes each; reading ahead of the group's end is wasted).
    let mut limit = 1u32;
    while chunks.last().is_some_and(|c| c.record.end.is_none()) {
        let after = chunks.last().map_or(0, |c| c.seq);
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
    build_group(scope, &chunks).map_err(Error::Definite)
}

/// True when `r` is the L record right after `last` in the same group.
fn continues(last: &StoredRecord, r: &StoredRecord) -> bool {
    last.record.end.is_none() && r.seq == last.seq + 1 && r.record.start == last.record.start
}

/// The L seq (at most `upto`) up to which the table's next records after `after` hold
/// `budget` changes, from L's table index alone (no record body is read): a batch of big
/// groups then reads only the records it uses.
async fn read_bound(
    pool: &MySqlPool,
    scope: &Scope,
    after: u64,
    upto: u64,
    page: u32,
    budget: usize,
) -> Result<u64> {
    let rows: Vec<(u64, u32)> = sqlx::query_as(
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
    .map_err(|e| from_sqlx("reading L's table index", &e))?;
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
pub type Batch = (Vec<(ReplayGroup, u64)>, u64);

/// The next complete groups of the table after L seq `after` (up to `upto`), at most
/// `max` of them and no more once they hold `max_changes` changes; also returns the seq to
/// continue after. Stops before an open group.
/// A group's later chunks are taken from the same read when they touch the table and
/// follow directly; only the others are read record by record ([`finish_group`]).
pub async fn next_groups(
    pool: &MySqlPool,
    scope: &Scope,
    after: u64,
    upto: u64,
    max: usize,
    max_changes: usize,
    page: u32,
) -> Result<Batch> {
    let mut out: Vec<(ReplayGroup, u64)> = Vec::new();
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
            match finish_group(pool, scope, chunks, upto).await? {
                Built::Open => break 'outer,
                Built::Complete { group, last_seq } => {
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

// ---------------------------------------------------------------------------------------
// Progress hint and lag (state store, migration 0050)
// ---------------------------------------------------------------------------------------

/// The stored replay hint/status row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    pub l_seq: u64,
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

async fn save_progress(pool: &MySqlPool, scope: &Scope, p: &Progress) -> Result<()> {
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
async fn start_point(
    pool: &MySqlPool,
    scope: &Scope,
    b_seq: u64,
    cursor: Option<&ReplayCursor>,
) -> Result<(u64, Option<GroupEnd>, u64)> {
    let Some(h) = replay_progress(pool, scope.job, scope.generation).await? else {
        return Ok((b_seq, None, 0));
    };
    let Some(c) = cursor else {
        return Ok((b_seq, None, 0));
    };
    if h.l_seq <= b_seq {
        return Ok((b_seq, None, 0));
    }
    let recs = log::read_range(pool, &scope.stream, h.l_seq - 1, h.l_seq, 1).await?;
    let Some(end) = recs.first().and_then(|r| r.record.end.clone()) else {
        return Ok((b_seq, None, 0));
    };
    if end.pos != h.end || !matches!(cmp_end(&end, &c.end), Ok(Ordering::Less | Ordering::Equal)) {
        tracing::warn!(job = %scope.job, "replay hint not confirmed by L and T; reading L from B");
        return Ok((b_seq, None, 0));
    }
    Ok((h.l_seq, Some(end), h.groups_applied))
}

// ---------------------------------------------------------------------------------------
// The replay loop
// ---------------------------------------------------------------------------------------

/// What one replay run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Groups applied by this run (business DML ran).
    pub groups_applied: u64,
    /// Groups found already held by T and skipped.
    pub groups_held: u64,
    /// Apply calls that committed.
    pub batches: u64,
    /// T's cursor at the end.
    pub cursor: Option<ReplayCursor>,
    /// The L seq read up to.
    pub l_seq: u64,
    pub lag: Lag,
}

/// Everything the loop needs.
pub struct Replayer<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    pub target: &'a Opts,
    pub ctx: &'a TargetCtx,
    pub cfg: &'a ReplayConfig,
}

/// Per-batch target-write permits for continuous replay (DESIGN §8): each batch takes one
/// per apply stream, all together, before its first statement and gives each back only
/// once its end is confirmed (COMMIT answered, or every connection KILLed and seen gone;
/// an unconfirmed connection's permit stays a hold). Only for runs NOT already under a
/// coarse permit (`crate::table::activation::under_write_permits`): a nested acquire there deadlocks at
/// `--target-writes 1`.
pub struct WritePermits<'a> {
    pub admission: &'a admission::Admission,
    /// Names the replay in the admission snapshot and status.
    pub owner: String,
    /// Bound on waiting for a permit.
    pub deadline: Duration,
    /// A cancel while waiting is a stop, not a failure.
    pub cancel: &'a CancellationToken,
    /// Client deadline of one batch (first statement to COMMIT).
    pub write_deadline: Duration,
}

/// How far a run goes.
#[derive(Clone, Debug)]
pub enum Until {
    /// Up to and including L seq `f_seq` (the F marker's record), then return.
    Fence { f_seq: u64, failpoint_mid: bool },
    /// Follow L as the reader appends until `cancel`.
    Follow { cancel: CancellationToken },
    /// As after STREAMING, but only up to L seq `upto` (caught up once, then return).
    CatchUp { upto: u64 },
}

/// The target connections of one replay run: `streams` of them, opened together, one
/// per key partition ([`ledger::parts`]). Kept open across batches; dropped as a whole
/// after any failure (each KILL-confirmed first) and reopened by the next batch.
struct Conns<'a> {
    opts: &'a Opts,
    streams: usize,
    conns: Vec<Conn>,
}

impl<'a> Conns<'a> {
    fn new(opts: &'a Opts, streams: usize) -> Conns<'a> {
        Conns {
            opts,
            streams: streams.clamp(1, ledger::parts::MAX_PARTS),
            conns: Vec::new(),
        }
    }

    async fn get(&mut self) -> Result<&mut [Conn]> {
        while self.conns.len() < self.streams {
            match apply::connect(self.opts).await {
                Ok(c) => self.conns.push(c),
                Err(e) => {
                    // Only session settings were sent on them, all answered.
                    self.close().await;
                    return Err(e);
                }
            }
        }
        Ok(&mut self.conns)
    }

    async fn first(&mut self) -> Result<&mut Conn> {
        self.get()
            .await?
            .first_mut()
            .ok_or_else(|| Error::transient("target connection unavailable"))
    }

    fn ids(&self) -> Vec<u32> {
        self.conns.iter().map(|c| c.id()).collect()
    }

    async fn close(&mut self) {
        for c in self.conns.drain(..) {
            let _ = c.disconnect().await;
        }
    }

    /// After a failed, unknown or timed-out batch a statement may still run on ANY of
    /// the connections: each is KILLed and confirmed gone (the `Conn`s are kept open until
    /// then, so what the server shows is the KILL's doing). Returns, per connection id,
    /// whether its end is confirmed.
    async fn kill_all(&mut self) -> Vec<(u32, Result<()>)> {
        let ids = self.ids();
        let dead: Vec<Conn> = self.conns.drain(..).collect();
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let r = crate::io::bounded::kill_confirmed(self.opts, "target", id).await;
            out.push((id, r));
        }
        drop(dead);
        out
    }
}

/// The definite `release_unconfirmed` naming every connection whose KILL was not
/// confirmed, or Ok when all were.
fn unconfirmed(killed: &[(u32, Result<()>)]) -> Result<()> {
    let bad: Vec<String> = killed
        .iter()
        .filter_map(|(id, r)| r.as_ref().err().map(|e| format!("{id} ({e})")))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::ReleaseUnconfirmed,
        format!(
            "KILL of target connection(s) {} not confirmed: a replay statement may still \
             run there; check the target (SHOW PROCESSLIST), then restart serve",
            bad.join(", ")
        ),
    ))
}

/// The reason of a permit wait that timed out: nothing was sent, so it says how long it
/// waited and who held the permits, never that a release is unconfirmed.
fn no_permit(owner: &str, e: &admission::AdmissionError) -> String {
    match e {
        admission::AdmissionError::Timeout {
            waited, holders, ..
        } => {
            let held: Vec<String> = holders.iter().map(ToString::to_string).collect();
            format!(
                "{owner}: waited {} s for a target-write permit (held by: {}); nothing was sent",
                waited.as_secs(),
                if held.is_empty() {
                    "nobody".into()
                } else {
                    held.join(", ")
                }
            )
        }
        e => format!("{owner}: {e}; nothing was sent"),
    }
}

/// One replay apply over every connection (key partitions, [`ledger::parts`]).
async fn apply_on(
    conns: &mut [Conn],
    ctx: &TargetCtx,
    prev: Option<&GroupEnd>,
    groups: &[ReplayGroup],
    limits: Limits,
) -> Result<apply::Applied, ApplyError> {
    ledger::parts::apply_groups_parts(conns, ctx, prev, groups, limits).await
}

/// What one apply attempt ended with.
enum Step {
    Done,
    /// The permit wait was cancelled: nothing was sent.
    Stopped,
    /// The permit wait timed out: nothing was sent (the reason says how long it waited).
    NoPermit(String),
    /// The COMMIT's outcome is unknown (the connections are gone; re-plan from T).
    Unknown(String),
}

impl Replayer<'_> {
    /// Applies one batch through T; an unknown COMMIT is resolved by re-reading T's cursor
    /// on new connections (the apply plans from T again, under fresh permits).
    /// Never returns [`Step::Unknown`]: a second unknown is a transient error.
    async fn apply(
        &self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        groups: &[ReplayGroup],
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Step> {
        let m = match self.attempt(conns, prev, groups, permits).await? {
            Step::Unknown(m) => m,
            other => return Ok(other),
        };
        tracing::warn!(job = %self.scope.job, "{m}");
        match self.attempt(conns, prev, groups, permits).await? {
            Step::Unknown(m) => Err(Error::transient(m)),
            other => Ok(other),
        }
    }

    /// One batch under its own target-write permits: one per connection, taken together
    /// (all or none, [`admission::Admission::acquire_writes`]) so N connections writing at
    /// once count as N target writes (DESIGN §8).
    async fn attempt(
        &self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        groups: &[ReplayGroup],
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Step> {
        let Some(p) = permits else {
            return self.attempt_unadmitted(conns, prev, groups).await;
        };
        let held = match p
            .admission
            .acquire_writes(&p.owner, conns.streams, p.deadline, p.cancel)
            .await
        {
            Ok(held) => held,
            Err(_) if p.cancel.is_cancelled() => return Ok(Step::Stopped),
            Err(e) if e.is_definite() => {
                return Err(Error::definite(
                    DefiniteCode::Usage,
                    format!("{}: {e}", p.owner),
                ))
            }
            Err(e) => return Ok(Step::NoPermit(no_permit(&p.owner, &e))),
        };
        let c = match conns.get().await {
            Ok(c) => c,
            Err(e) => {
                // Nothing was sent on connections that never opened.
                held.into_iter()
                    .for_each(admission::Permit::release_confirmed);
                return Err(e);
            }
        };
        let work = apply_on(c, self.ctx, prev, groups, self.cfg.limits());
        let (outcome, reason) = match tokio::time::timeout(p.write_deadline, work).await {
            Ok(Ok(_)) => {
                held.into_iter()
                    .for_each(admission::Permit::release_confirmed);
                return Ok(Step::Done);
            }
            Ok(Err(ApplyError::Failed(e))) => {
                let r = format!("replay batch failed: {e}");
                (Err(e), r)
            }
            Ok(Err(ApplyError::Unknown(m))) => (Ok(Step::Unknown(m.clone())), m),
            Err(_) => {
                let m = format!(
                    "job {} {}: a replay batch got no answer within {:?} (client deadline)",
                    self.scope.job, self.scope.generation, p.write_deadline
                );
                (Err(Error::transient(m.clone())), m)
            }
        };
        // A statement may still run on any connection: each permit is released only once
        // the server shows its connection gone; an unconfirmed one stays a hold naming it.
        let killed = conns.kill_all().await;
        for (permit, (id, r)) in held.into_iter().zip(&killed) {
            match r {
                Ok(()) => permit.release_confirmed(),
                Err(_) => {
                    permit.mark_release_unknown(format!("target connection {id}: {reason}"));
                }
            }
        }
        unconfirmed(&killed)?;
        outcome
    }

    /// For runs under a coarse permit (or none): no per-batch permit; a transient failure or
    /// an unknown COMMIT is KILL-confirmed on every connection (a definite
    /// `release_unconfirmed` naming the ids if it cannot be, which
    /// [`crate::table::activation::under_write_permits`] turns into holds).
    async fn attempt_unadmitted(
        &self,
        conns: &mut Conns<'_>,
        prev: Option<&GroupEnd>,
        groups: &[ReplayGroup],
    ) -> Result<Step> {
        let r = {
            let c = conns.get().await?;
            apply_on(c, self.ctx, prev, groups, self.cfg.limits()).await
        };
        let outcome = match r {
            Ok(_) => return Ok(Step::Done),
            // Answered by the server: the connections stay usable.
            Err(ApplyError::Failed(e)) if !e.is_transient() => return Err(e),
            Err(ApplyError::Failed(e)) => Err(e),
            Err(ApplyError::Unknown(m)) => Ok(Step::Unknown(m)),
        };
        // A lost or unanswered connection: its statement may still run, and the caller's
        // coarse permits are released on our word, so every end is confirmed by KILL first.
        let killed = conns.kill_all().await;
        unconfirmed(&killed)?;
        outcome
    }

    /// The next complete groups after L seq `after`.
    async fn read(&self, after: u64, upto: u64) -> Result<Batch> {
        next_groups(
            self.pool,
            self.scope,
            after,
            upto,
            self.cfg.batch_groups,
            self.cfg.batch_rows.saturating_mul(2),
            self.cfg.read_page,
        )
        .await
    }

    /// T's main cursor (the only one "replay reached", status and restarts read).
    async fn cursor(&self, conns: &mut Conns<'_>) -> Result<Option<ReplayCursor>> {
        let r = {
            let c = conns.first().await?;
            target::replay_cursor(c, self.ctx, false).await
        };
        if r.is_err() {
            conns.close().await;
        }
        r
    }

    /// Replays from B (L seq `b_seq`) until `until`. See the module doc for why any crash
    /// or restart with another configuration converges.
    pub async fn run(&self, b_seq: u64, until: Until) -> Result<Outcome> {
        self.run_with(b_seq, until, None).await
    }

    /// As [`Replayer::run`], each batch under its own target-write permits when `permits`.
    pub async fn run_with(
        &self,
        b_seq: u64,
        until: Until,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Outcome> {
        let mut conns = Conns::new(self.target, self.cfg.apply_streams);
        let r = self.run_on(&mut conns, b_seq, until, permits).await;
        conns.close().await;
        r
    }

    async fn run_on(
        &self,
        conn: &mut Conns<'_>,
        b_seq: u64,
        until: Until,
        permits: Option<&WritePermits<'_>>,
    ) -> Result<Outcome> {
        let mut cursor = self.cursor(conn).await?;
        let (mut after, mut prev, mut total) =
            start_point(self.pool, self.scope, b_seq, cursor.as_ref()).await?;
        let mut out = Outcome::default();
        let mut retries = 0u32;
        // Permit waits that timed out in a row (nothing sent).
        let mut waits = 0u32;
        let mut caught_up_at = Instant::now();
        let mut last_status: Option<Instant> = None;
        // The next batch, read from L while the current one applies.
        let mut ahead: Option<Result<Batch>> = None;
        let (upto, cancel, phase) = match &until {
            Until::Fence { f_seq, .. } => (*f_seq, None, "REPLAYING"),
            Until::Follow { cancel } => (u64::MAX, Some(cancel), "STREAMING"),
            Until::CatchUp { upto } => (*upto, None, "STREAMING"),
        };
        loop {
            if cancel.is_some_and(|c| c.is_cancelled()) {
                break;
            }
            let step = match ahead.take() {
                Some(s) => s,
                None => self.read(after, upto).await,
            };
            let (found, next) = match step {
                Ok(x) => x,
                Err(e)
                    if e.is_transient() && cancel.is_some() && retries < self.cfg.max_retries =>
                {
                    retries += 1;
                    tracing::warn!(job = %self.scope.job, error = %e, retries, "replay read failed; retrying");
                    tokio::time::sleep(self.cfg.idle_wait).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            if found.is_empty() {
                // Caught up with L (up to F, or L's tail while following).
                caught_up_at = Instant::now();
                out.lag = Lag {
                    behind_bytes: Some(0),
                    behind_ms: 0,
                };
                let Some(cancel) = cancel else {
                    // The hint for the next run: it would otherwise re-read every group
                    // since the last periodic save (all held by T).
                    if let Some(end) = &prev {
                        self.save(after, end, total, &out.lag, phase).await?;
                    }
                    break;
                };
                if let Some(end) = &prev {
                    if last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
                        self.save(after, end, total, &out.lag, phase).await?;
                        last_status = Some(Instant::now());
                    }
                }
                wait_for_tail(
                    self.pool,
                    &self.scope.stream,
                    after,
                    self.cfg.idle_wait,
                    cancel,
                )
                .await?;
                continue;
            }
            let mut batch: Vec<ReplayGroup> = Vec::new();
            let mut batch_prev = prev.clone();
            for (g, _) in found {
                match coverage(cursor.as_ref(), &g.end).map_err(Error::Definite)? {
                    Coverage::Held if batch.is_empty() => {
                        out.groups_held += 1;
                        batch_prev = Some(g.end.clone());
                    }
                    Coverage::Held => {
                        return Err(Error::definite(
                            DefiniteCode::EvidenceConflict,
                            format!(
                            "job {} {}: T's cursor lies inside a run of groups it does not hold",
                            self.scope.job, self.scope.generation
                        ),
                        ))
                    }
                    Coverage::Apply => batch.push(g),
                }
            }
            if !batch.is_empty() {
                let (applied, read) = tokio::join!(
                    self.apply(conn, batch_prev.as_ref(), &batch, permits),
                    self.read(next, upto)
                );
                match applied {
                    // `apply` turns a second unknown into an error; never here.
                    Ok(Step::Unknown(m)) => return Err(Error::transient(m)),
                    Ok(Step::Done) => {
                        retries = 0;
                        waits = 0;
                        ahead = Some(read);
                    }
                    // Cancelled while waiting for a write permit: nothing was sent.
                    Ok(Step::Stopped) => break,
                    // Nothing was sent: not a failed batch (never a release_unconfirmed
                    // pause). Retried here a few times, then a plain transient error:
                    // serve restarts the task later (the permit's holders are in status).
                    Ok(Step::NoPermit(m)) => {
                        waits += 1;
                        if cancel.is_none() || waits > self.cfg.max_retries {
                            return Err(Error::transient(m));
                        }
                        tracing::warn!(job = %self.scope.job, waits, "{m}; retrying");
                        tokio::time::sleep(self.cfg.idle_wait).await;
                        continue;
                    }
                    Err(e)
                        if e.is_transient()
                            && cancel.is_some()
                            && retries < self.cfg.max_retries =>
                    {
                        retries += 1;
                        tracing::warn!(job = %self.scope.job, error = %e, retries, "replay apply failed; retrying from T");
                        tokio::time::sleep(self.cfg.idle_wait).await;
                        cursor = self.cursor(conn).await?;
                        continue;
                    }
                    // DESIGN §8: while STREAMING at most `max_retries` in a row (reset by
                    // each confirmed commit), then the table pauses: a restarted task
                    // would otherwise retry forever.
                    Err(e) if e.is_transient() && cancel.is_some() => {
                        return Err(Error::definite(
                            DefiniteCode::ReleaseUnconfirmed,
                            format!(
                                "job {} {}: {} target batches in a row failed or ended \
                                 uncertain while STREAMING (last: {e}); check the target, \
                                 then `backfill resume {}`",
                                self.scope.job,
                                self.scope.generation,
                                retries + 1,
                                self.scope.job
                            ),
                        ))
                    }
                    Err(e) => return Err(e),
                }
                out.batches += 1;
                out.groups_applied += batch.len() as u64;
                total += batch.len() as u64;
                match &until {
                    Until::Fence { .. } => {
                        failpoint::hit(crate::table::faults::REPLAY_AFTER_BATCH_T)
                    }
                    Until::Follow { .. } | Until::CatchUp { .. } => {
                        failpoint::hit(crate::table::faults::STREAM_AFTER_BATCH)
                    }
                }
                let last = &batch[batch.len() - 1];
                cursor = Some(ReplayCursor {
                    end: last.end.clone(),
                    rows_done: 0,
                    group_digest: last.digest(),
                });
                batch_prev = Some(last.end.clone());
            }
            prev = batch_prev;
            after = next;
            out.lag = Lag {
                behind_bytes: self.behind(prev.as_ref()).await,
                behind_ms: millis(caught_up_at.elapsed()),
            };
            let fence = matches!(until, Until::Fence { .. });
            if let Some(end) = &prev {
                if fence || last_status.is_none_or(|t| t.elapsed() >= STATUS_EVERY) {
                    self.save(after, end, total, &out.lag, phase).await?;
                    last_status = Some(Instant::now());
                }
            }
            if let Until::Fence {
                failpoint_mid: true,
                ..
            } = until
            {
                failpoint::hit(crate::table::faults::REPLAY_MID);
            }
        }
        out.cursor = self.cursor(conn).await?;
        out.l_seq = after;
        Ok(out)
    }

    async fn save(
        &self,
        l_seq: u64,
        end: &GroupEnd,
        total: u64,
        lag: &Lag,
        phase: &str,
    ) -> Result<()> {
        save_progress(
            self.pool,
            self.scope,
            &Progress {
                l_seq,
                end: end.pos.clone(),
                groups_applied: total,
                lag: lag.clone(),
                phase: phase.into(),
            },
        )
        .await
    }

    /// Binlog bytes from the cursor to D (the capture's restart position); None across files.
    async fn behind(&self, cursor: Option<&GroupEnd>) -> Option<u64> {
        let d = log::load_position(self.pool, &self.scope.stream)
            .await
            .ok()??;
        behind_bytes(cursor, Some(&d.restart))
    }
}

/// How often the progress row is refreshed while following.
const STATUS_EVERY: Duration = Duration::from_millis(500);

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Waits (at most `bound`) until L's tail is past `after` or `cancel` fires.
async fn wait_for_tail(
    pool: &MySqlPool,
    stream: &str,
    after: u64,
    bound: Duration,
    cancel: &CancellationToken,
) -> Result<()> {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(d) = log::load_position(pool, stream).await? {
            if d.tail.seq > after {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Ok(());
        }
        tokio::select! {
            _ = cancel.cancelled() => return Ok(()),
            _ = tokio::time::sleep(log::WAIT_POLL.max(Duration::from_millis(20))) => {}
        }
    }
}

/// Replays every group of the table in (B, F] (L seqs `b_seq`, `f_seq`) and returns
/// once T's cursor is at or past the last of them (DESIGN §6 "replay reached F").
pub async fn replay_to(r: &Replayer<'_>, b_seq: u64, f_seq: u64) -> Result<Outcome> {
    r.run(
        b_seq,
        Until::Fence {
            f_seq,
            failpoint_mid: true,
        },
    )
    .await
}

/// Replays after activation up to L's tail as it is now, then returns (a caught-up
/// stream: tests, `serve --exit-when-idle`).
pub async fn catch_up(r: &Replayer<'_>, b_seq: u64) -> Result<Outcome> {
    let tail = log::load_position(r.pool, &r.scope.stream)
        .await?
        .map_or(0, |d| d.tail.seq);
    r.run(b_seq, Until::CatchUp { upto: tail }).await
}

/// Follows L after activation until `cancel` (continuous replay, DESIGN §6/§7). Starts
/// after the later of F and T's cursor: every group at or before the cursor is held.
pub async fn follow(r: &Replayer<'_>, b_seq: u64, cancel: CancellationToken) -> Result<Outcome> {
    r.run(b_seq, Until::Follow { cancel }).await
}

/// As [`follow`], each batch under its own target-write permit (STREAMING in `serve`).
pub async fn follow_admitted(
    r: &Replayer<'_>,
    b_seq: u64,
    cancel: CancellationToken,
    permits: &WritePermits<'_>,
) -> Result<Outcome> {
    r.run_with(b_seq, Until::Follow { cancel }, Some(permits))
        .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kernel::change::{ChangeId, Op};
    use kernel::ids::Digest;
    use kernel::log::{GroupChunk, LogRecord, PauseSeen};
    use kernel::value::SqlValue;

    fn scope() -> Scope {
        Scope {
            job: JobId(1),
            generation: Generation(1),
            stream: "s".into(),
            source_db: "db".into(),
            source_table: "t".into(),
        }
    }

    fn ch(table: &str, pos: u64, id: i64) -> Change {
        Change {
            id: ChangeId {
                lineage: Digest([1; 32]),
                schema: "db".into(),
                table: table.into(),
                file: "b.000001".into(),
                event_pos: pos,
                row: 0,
                op: Op::Insert,
            },
            before: None,
            after: Some(vec![SqlValue::Int(id)]),
        }
    }

    fn rec(
        seq: u64,
        start: u64,
        chunk: u32,
        end: Option<u64>,
        changes: Vec<Change>,
    ) -> StoredRecord {
        StoredRecord {
            seq,
            prev_chain: Digest([0; 32]),
            chain: Digest([0; 32]),
            body_digest: Digest([0; 32]),
            record: LogRecord {
                start: BinlogPos::new("b.000001", start),
                chunk,
                gtid: None,
                end: end.map(|p| GroupEnd {
                    pos: BinlogPos::new("b.000001", p),
                    gtid: None,
                }),
                body: RecordBody::Chunk(GroupChunk {
                    changes,
                    ..GroupChunk::default()
                }),
            },
        }
    }

    #[test]
    fn a_group_is_built_from_its_chunks_and_filtered_to_the_table() {
        let s = scope();
        let chunks = vec![
            rec(5, 100, 0, None, vec![ch("t", 110, 1), ch("u", 120, 2)]),
            rec(6, 100, 1, None, vec![ch("u", 130, 3)]),
            rec(7, 100, 2, Some(200), vec![ch("t", 140, 4)]),
        ];
        let Built::Complete { group, last_seq } = build_group(&s, &chunks).unwrap() else {
            panic!("complete expected")
        };
        assert_eq!(last_seq, 7);
        assert_eq!(group.changes.len(), 2);
        assert_eq!(group.end.pos.pos, 200);
        assert_eq!(build_group(&s, &chunks[..2]).unwrap(), Built::Open);
        // A gap in seqs or another start is corrupt evidence, never a silently short group.
        let mut bad = chunks.clone();
        bad[1].seq = 9;
        assert!(build_group(&s, &bad).is_err());
        let mut bad = chunks;
        bad[2].record.start = BinlogPos::new("b.000001", 101);
        assert!(build_group(&s, &bad).is_err());
    }

    #[test]
    fn pauses_and_raw_rows_of_the_table_stop_replay() {
        let s = scope();
        let mut r = rec(1, 4, 0, Some(50), vec![]);
        if let RecordBody::Chunk(c) = &mut r.record.body {
            c.pauses.push(PauseSeen {
                job: JobId(1),
                generation: Generation(1),
                schema: "db".into(),
                table: "t".into(),
                at: BinlogPos::new("b.000001", 10),
                error: Definite {
                    code: DefiniteCode::SchemaChanged,
                    message: "ALTER".into(),
                },
            });
        }
        let e = table_part(&s, &r).unwrap_err();
        assert_eq!(e.code, DefiniteCode::SchemaChanged);
        assert!(e.message.contains("b.000001:10"), "{}", e.message);
    }

    #[test]
    fn coverage_follows_t_cursor_only() {
        let end = |p| GroupEnd {
            pos: BinlogPos::new("b.000001", p),
            gtid: None,
        };
        let c = |p, r| ReplayCursor {
            end: end(p),
            rows_done: r,
            group_digest: Digest([0; 32]),
        };
        assert_eq!(coverage(None, &end(5)).unwrap(), Coverage::Apply);
        assert_eq!(coverage(Some(&c(9, 0)), &end(5)).unwrap(), Coverage::Held);
        assert_eq!(coverage(Some(&c(9, 0)), &end(9)).unwrap(), Coverage::Held);
        // Inside a chunked group: the group is applied from the sub-cursor.
        assert_eq!(coverage(Some(&c(9, 3)), &end(9)).unwrap(), Coverage::Apply);
        assert_eq!(coverage(Some(&c(9, 0)), &end(10)).unwrap(), Coverage::Apply);
        let other = GroupEnd {
            pos: BinlogPos::new("x.000001", 5),
            gtid: None,
        };
        assert_eq!(
            coverage(Some(&c(9, 0)), &other).unwrap_err().code,
            DefiniteCode::LineageChanged
        );
    }

    #[test]
    fn a_permit_wait_timeout_says_how_long_it_waited_not_unconfirmed() {
        let e = admission::AdmissionError::Timeout {
            pool: admission::PoolKind::TargetWrite,
            waited: Duration::from_millis(2_400),
            holders: vec![admission::Holder {
                owner: "job 2 g1 streaming replay batch".into(),
                release_unknown: None,
            }],
        };
        let m = no_permit("job 1 g1 streaming replay batch", &e);
        assert!(
            m.starts_with("job 1 g1 streaming replay batch: waited 2 s for a target-write permit"),
            "{m}"
        );
        assert!(m.contains("held by: job 2 g1"), "{m}");
        assert!(!m.contains("unconfirmed"), "{m}");
    }

    #[test]
    fn lag_bytes_only_within_one_file() {
        let e = |f: &str, p| GroupEnd {
            pos: BinlogPos::new(f, p),
            gtid: None,
        };
        assert_eq!(
            behind_bytes(Some(&e("b.1", 10)), Some(&e("b.1", 50))),
            Some(40)
        );
        assert_eq!(behind_bytes(Some(&e("b.1", 10)), Some(&e("b.2", 50))), None);
        assert_eq!(behind_bytes(None, None), Some(0));
    }
}
