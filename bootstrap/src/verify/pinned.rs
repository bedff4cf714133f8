//! `backfill verify JOB --pinned` (DESIGN §13, issue 6 item 5): compare source and target
//! at one known binlog position P while the source keeps taking writes.
//!
//! # Why the comparison is exact at P
//!
//! 1. The source side is a consistent snapshot whose binlog position P the server reports
//!    (MariaDB `binlog_snapshot_file/position`, [`super::pin_source`]): it shows exactly
//!    the transactions before P.
//! 2. The target is brought to exactly P by the pipeline's own [`Replayer`]: the reader
//!    captures the binlog into L until D is at or past P, then every group of the table in
//!    L up to the last one ending at or before P is replayed (catch-up, whole groups, each
//!    with its cursor in T), and nothing after it. T's cursor is checked not to be past P
//!    first. Groups end at transaction boundaries and P is a transaction boundary, so the
//!    target then holds exactly the table's state at P, and its own snapshot is compared.
//! 3. A DDL of the table between T's cursor and P (DESIGN §16) is sealed first, as serve
//!    seals it (the same proof), and the replay applies it to the target at its place in
//!    binlog order, as serve's replay does; each run then goes on with the version in
//!    force at T's cursor. A DDL that cannot be taken stops the replay before P, named.
//!
//! # Why it never races `serve`
//!
//! Replaying and capturing are `serve`'s work; two of them would interleave T writes and
//! L appends. So the command refuses (exit 3, the message says how to proceed) while any
//! serve's heartbeat is live (`crate::store::processes`), and it takes the job's lease (a
//! fresh fencing token, renewed while it runs): every T write of the replay checks that
//! token, so a serve that took the job after all (lease expired) fences this run out,
//! never the other way around. The lease is given up at the end, so the next serve takes
//! the job at once. The capture reader it runs captures every started table of the
//! source (the capture set serve would build), under a replica id distinct from serve's.
//!
//! # Resuming
//!
//! A walk split with `--max-chunks` (or interrupted) stores its [`VerifyCursor`] in the
//! state store (`verify_cursors`, migration 0071, `VCUR` bytes: v2, v1 still read);
//! `--resume` continues after its last key. Each run pins its own P: the chunks of one run are compared at
//! that run's P, which is what a resumed VDiff does too.
use super::{pin_source, Endpoint, Report, VerifyCursor, VerifyOptions};
use crate::io::pool::{ConnPool, Side, Use};
use crate::store::jobs::{self, JobRecord};
use crate::table::replay::{self, ReplayConfig, Replayer, Scope, Until};
use crate::table::schema;
use kernel::capture::{CaptureSet, CaptureTable, Reader, ReaderConfig};
use kernel::control::IntentKind;
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::JobId;
use kernel::log::LSeq;
use kernel::position::BinlogPos;
use kernel::{Error, Result};
use ledger::journal::Journal;
use ledger::lease::Lease;
use ledger::record::Phase;
use ledger::target::TargetCtx;
use sqlx::MySqlPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Lease time of a pinned run; renewed every third of it.
const LEASE_TTL: Duration = Duration::from_secs(30);
/// Longest wait for the lease of a stopped process to expire (serve's default TTL is 30 s).
const MAX_LEASE_WAIT: Duration = Duration::from_secs(65);
/// Bound on waiting for L to hold P.
const CAPTURE_WAIT: Duration = Duration::from_secs(300);

/// What a pinned run needs besides the state store.
pub struct PinnedRequest<'a> {
    pub job: JobId,
    /// Full URLs (with passwords) of the job's source and target.
    pub source_url: &'a str,
    pub target_url: &'a str,
    pub options: VerifyOptions,
}

/// Refuses a pinned run on a job that is not STREAMING or is paused.
pub fn check_phase(job: JobId, phase: Option<Phase>, paused: bool) -> Result<()> {
    let refuse = |why: String| Err(Error::definite(DefiniteCode::Precondition, why));
    match phase {
        _ if paused => refuse(format!(
            "job {job} is paused: a pinned verify replays the table and would meet the same \
             cause; fix it and `backfill resume {job}` first (`backfill status {job}` names it)"
        )),
        Some(Phase::Streaming) => Ok(()),
        other => refuse(format!(
            "job {job} is {}: a pinned verify needs a STREAMING table (the replay up to P \
             continues the stream); before that run `backfill verify` at a quiescent point",
            other.map_or_else(|| "not started".to_string(), |p| format!("{p:?}"))
        )),
    }
}

/// Refuses while any serve is live.
async fn check_no_serve(pool: &MySqlPool, job: JobId) -> Result<()> {
    let live: Vec<String> = crate::store::processes::live(pool)
        .await?
        .into_iter()
        .map(|r| format!("`{}` (pid {})", r.owner, r.pid))
        .collect();
    if live.is_empty() {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::Precondition,
        format!(
            "serve {} is running: a pinned verify captures and replays job {job} itself and \
             must not race it. Stop serve (SIGTERM or Ctrl-C), run `backfill verify {job} \
             --pinned`, then start serve again; or run `backfill verify {job}` without \
             --pinned while serve keeps the target streaming",
            live.join(", ")
        ),
    ))
}

/// How long the job's lease still runs, when another owner holds it.
async fn lease_left(pool: &MySqlPool, job: JobId) -> Result<Option<(String, Duration)>> {
    let row: Option<(String, i64)> = sqlx::query_as(
        "SELECT owner, TIMESTAMPDIFF(MICROSECOND, NOW(6), expires_at) FROM ledger_lease \
         WHERE job_id = ?",
    )
    .bind(job.0)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("reading the job's lease", &e))?;
    Ok(row
        .filter(|(_, us)| *us > 0)
        .map(|(o, us)| (o, Duration::from_micros(us.unsigned_abs()))))
}

/// Takes the job's lease. No serve is live (checked before), so a live lease belongs to a
/// process that stopped without giving it up: wait for it to expire (bounded), once.
async fn take_lease(pool: &MySqlPool, job: JobId) -> Result<Lease> {
    if let Some((owner, left)) = lease_left(pool, job).await? {
        if left <= MAX_LEASE_WAIT {
            tracing::info!(%job, %owner, secs = left.as_secs_f64(), "waiting for the lease of a stopped process to expire");
            tokio::time::sleep(left + Duration::from_millis(100)).await;
        }
    }
    let owner = format!("verify-pinned@{}", std::process::id());
    ledger::lease::acquire(pool, job, &owner, LEASE_TTL)
        .await
        .map_err(|e| match e.as_definite() {
            Some(d) if d.code == DefiniteCode::Fenced => Error::definite(
                DefiniteCode::Precondition,
                format!(
                    "{}. A pinned verify needs the job to itself: stop that serve (or wait \
                     {} s after it stopped) and run it again",
                    d.message,
                    LEASE_TTL.as_secs()
                ),
            ),
            _ => e,
        })
}

fn spawn_renewal(
    pool: MySqlPool,
    lease: Lease,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let on_retry = |e: &kernel::Error| tracing::warn!(job = %lease.job, error = %e, "pinned verify: lease renewal failed; retrying");
        if let Some(e) = ledger::lease::keep(&pool, &lease, LEASE_TTL, &stop, on_retry).await {
            tracing::error!(job = %lease.job, error = %e, "pinned verify lost its lease: its target writes are fenced out from now on");
            stop.cancel();
        }
    })
}

/// The capture set serve would build for the job's source: every started, live job of
/// that source server.
async fn capture_set(pool: &MySqlPool, rec: &JobRecord) -> Result<CaptureSet> {
    let mut set = CaptureSet::default();
    for (job, generation) in crate::store::commands::started(pool).await? {
        let other = jobs::load_job(pool, job).await?;
        if other.source.identity != rec.source.identity || other.generation != generation {
            continue;
        }
        set.add(CaptureTable {
            job,
            generation,
            sealed: jobs::load_schema(pool, job).await?,
        });
    }
    Ok(set)
}

/// A replica server id for the pinned run's reader, in a range serve never uses, distinct
/// per stream and state store (two readers with one id on one source kick each other).
fn replica_id(stream: &str, state_url: &str) -> u32 {
    let d = kernel::ids::Digest::of(format!("verify-pinned\n{stream}\n{state_url}").as_bytes());
    0x5000_0000 | (u32::from_le_bytes([d.0[0], d.0[1], d.0[2], d.0[3]]) & 0x0fff_ffff)
}

/// L's last record of the stream whose group ends at or before `p`.
async fn l_seq_at(pool: &MySqlPool, stream: &str, p: &BinlogPos) -> Result<LSeq> {
    kernel::log::seq_at_or_before(pool, stream, p).await
}

/// Runs a pinned verify of `req.job`, continuing `cursor`.
pub async fn run(
    pool: &MySqlPool,
    req: &PinnedRequest<'_>,
    cursor: &mut VerifyCursor,
) -> Result<Report> {
    let rec = jobs::load_job(pool, req.job).await?;
    let head = Journal::new(pool.clone())
        .head(req.job, rec.generation)
        .await?;
    let b = head.as_ref().and_then(|h| h.record.b.clone());
    check_phase(
        req.job,
        head.as_ref().map(|h| h.record.phase),
        head.as_ref().is_some_and(|h| h.record.paused.is_some()),
    )?;
    check_no_serve(pool, req.job).await?;
    let lease = take_lease(pool, req.job).await?;
    let stop = req.options.cancel.child_token();
    let renew = spawn_renewal(pool.clone(), lease.clone(), stop.clone());
    let r = with_lease(pool, req, &rec, b, &lease, cursor).await;
    stop.cancel();
    let _ = renew.await;
    if let Err(e) = ledger::lease::release(pool, &lease).await {
        tracing::warn!(job = %req.job, error = %e, "cannot give the lease up; it expires by itself");
    }
    r
}

async fn with_lease(
    pool: &MySqlPool,
    req: &PinnedRequest<'_>,
    rec: &JobRecord,
    b: Option<BinlogPos>,
    lease: &Lease,
    cursor: &mut VerifyCursor,
) -> Result<Report> {
    let schema = jobs::load_schema(pool, req.job).await?;
    let stream = replay::stream_of(pool, req.job, rec.generation)
        .await?
        .ok_or_else(|| {
            Error::definite(
                DefiniteCode::Precondition,
                format!(
                    "job {}: no capture stream recorded: no start marker (B) yet",
                    req.job
                ),
            )
        })?;
    let scope = Scope::of(rec, stream.clone());
    let mut tschema = schema.clone();
    tschema.database = rec.target.db.clone();
    tschema.table = rec.target.table.clone();
    let ctx = TargetCtx {
        job: req.job,
        generation: rec.generation,
        keyer: crate::store::jobs::keyer(&tschema)?,
        schema: tschema,
        token: lease.token,
        within: None,
    };
    let topts = ledger::target::target_opts(req.target_url)?;
    claim_target(&topts, &ctx).await?;
    let b_seq = replay::find_marker(pool, &scope, IntentKind::B, b.as_ref())
        .await?
        .ok_or_else(|| {
            Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!("job {}: the journal records the start position (B) but the change log holds no start marker (B)", req.job),
            )
        })?
        .seq;
    let o = pool.connect_options();
    let state = format!(
        "{}:{}/{}",
        o.get_host(),
        o.get_port(),
        o.get_database().unwrap_or_default()
    );
    let mut rcfg = ReaderConfig::new(&stream, req.source_url, replica_id(&stream, &state));
    rcfg.control_schema = rec.control_schema.clone();
    // The one reader of the stream (DESIGN §18): under the stream's capture lease.
    let stream_lease = capture_lease(pool, &stream).await?;
    rcfg.fence = Some(stream_lease.token);
    let reader = Reader::start(pool.clone(), rcfg, capture_set(pool, rec).await?.shared());
    let out = compare_at_p(pool, req, rec, &scope, &topts, &ctx, b_seq, cursor).await;
    if let Err(e) = reader.stop().await {
        tracing::warn!(job = %req.job, error = %e, "the pinned verify's capture reader ended with an error");
    }
    if let Err(e) = kernel::capture::owner::release(pool, &stream_lease).await {
        tracing::warn!(%stream, error = %e, "releasing the capture lease (it expires by itself)");
    }
    out
}

/// The capture lease of `stream` for this run, or a refusal naming the serve that reads
/// the stream (a pinned verify runs with serve stopped).
async fn capture_lease(
    pool: &MySqlPool,
    stream: &str,
) -> Result<kernel::capture::owner::StreamLease> {
    let me = format!("verify-pinned-{}", std::process::id());
    match kernel::capture::owner::acquire(pool, stream, &me, Duration::from_secs(600)).await? {
        Some(l) => Ok(l),
        None => {
            let who = kernel::capture::owner::holder(pool, stream)
                .await?
                .map(|(o, _)| o)
                .unwrap_or_default();
            Err(Error::definite(
                DefiniteCode::Fenced,
                format!(
                    "stream `{stream}` is read by `{who}`: a pinned verify reads the binlog itself; \
                     stop that serve (or wait for its capture lease to expire), then run the verify again"
                ),
            ))
        }
    }
}

/// T's ledger tables exist and this run's fencing token is the target's claim.
async fn claim_target(topts: &mysql_async::Opts, ctx: &TargetCtx) -> Result<()> {
    let mut conn = ledger::apply::connect(topts).await?;
    let r = async {
        ledger::target::ensure_ledger_tables(&mut conn, &ctx.schema.database).await?;
        ledger::target::claim(&mut conn, ctx).await
    }
    .await;
    crate::io::connect::close(conn).await;
    r
}

#[allow(clippy::too_many_arguments)]
async fn compare_at_p(
    pool: &MySqlPool,
    req: &PinnedRequest<'_>,
    rec: &JobRecord,
    scope: &Scope,
    topts: &mysql_async::Opts,
    ctx: &TargetCtx,
    b_seq: LSeq,
    cursor: &mut VerifyCursor,
) -> Result<Report> {
    let install = jobs::load_schema(pool, req.job).await?;
    let key = jobs::key_columns(&install);
    let key: Vec<&str> = key.iter().map(String::as_str).collect();
    let src = Endpoint::from_url(req.source_url, &rec.source.db, &rec.source.table)?;
    let tgt = Endpoint::from_url(req.target_url, &rec.target.db, &rec.target.table)?;
    let cfg = ReplayConfig::default();
    let sopts = crate::io::connect::opts(req.source_url, "source")?;
    let (source, target) = pools(sopts, topts.clone(), &cfg);
    let mut chain = schema::load(pool, req.job, rec.generation, &install, &scope.stream).await?;
    let pools = (&source, &target);
    // Each run ends at a DDL the target takes on the way to P, or stops at a DDL not
    // sealed yet (L holds it only once this run's reader captured it): then it is sealed
    // and the run goes on. Every turn seals or applies a version, so the loop ends.
    loop {
        let (before, vctx) = schema::in_force(&target, ctx, &chain).await?;
        let replayer = Replayer {
            pool,
            scope,
            source: &source,
            target: &target,
            ctx: &vctx,
            cfg: &cfg,
            chain: Some(&chain),
        };
        let r = replay_and_compare(&replayer, b_seq, &src, &tgt, &key, &req.options, cursor).await;
        let again = match &r {
            Err(e) if e.is_transient() => schema::in_force(&target, ctx, &chain).await?.0 != before,
            Err(Error::Definite(d)) if d.code == DefiniteCode::SchemaChanged => {
                let n = chain.versions.len();
                seal_ddls(pool, (scope, rec), pools, &mut chain, b_seq).await?;
                chain.versions.len() > n
            }
            _ => false,
        };
        if !again {
            let _ = src.pool.disconnect().await;
            let _ = tgt.pool.disconnect().await;
            return r;
        }
    }
}

/// Seals the table's DDLs that L holds and the chain does not, as serve would (the proof
/// of `crate::table::schema::seal`; serve is stopped, this run reads the stream). A DDL
/// that cannot be taken is only logged here: the replay stops at it, naming it, if it
/// lies before P, and a later one does not concern this comparison.
async fn seal_ddls(
    pool: &MySqlPool,
    (scope, rec): (&Scope, &JobRecord),
    (source, target): (&ConnPool, &ConnPool),
    chain: &mut schema::Chain,
    b_seq: LSeq,
) -> Result<()> {
    let env = schema::seal::SealEnv {
        pool,
        scope: scope.seal_table(),
        source,
        wait: CAPTURE_WAIT,
        scratch: Some(schema::scratch::Scratch {
            target,
            db: &rec.target.db,
        }),
    };
    if let Some(refused) = schema::seal_more(&env, chain, b_seq).await? {
        tracing::warn!(job = %scope.job, reason = %refused, "pinned verify: a DDL of the table is not sealed");
    }
    Ok(())
}

/// `verify` pinned at a known point while the source keeps taking writes, for a caller in
/// the middle of a job's finish (tests): opens the source's consistent snapshot at binlog
/// position P (MariaDB reports it), waits until L holds P, replays up to exactly P (T's
/// cursor must not be past P: the caller has paused the continuous replay of this table)
/// and compares the target with the source's snapshot. The continuous replay resumes
/// afterwards from T's cursor.
pub async fn verify_finish(
    finish: &crate::table::activation::Finish<'_>,
    b_seq: LSeq,
    source: &Endpoint,
    target: &Endpoint,
    key: &[&str],
    opts: &VerifyOptions,
) -> Result<Report> {
    let mut vc = VerifyCursor::start();
    let r = finish.replayer();
    replay_and_compare(&r, b_seq, source, target, key, opts, &mut vc).await
}

/// The comparison at P for a caller that owns the job (its lease is in `replayer.ctx`) and
/// runs the capture reader of its stream: pins the source's snapshot at P, waits (bounded)
/// until L holds P, checks T's cursor is not past P, replays the table up to exactly P
/// with `replayer` and compares the target with the snapshot, continuing `cursor`. Used by
/// `backfill verify --pinned` and by [`verify_finish`].
pub async fn replay_and_compare(
    replayer: &Replayer<'_>,
    b_seq: LSeq,
    src: &Endpoint,
    tgt: &Endpoint,
    key: &[&str],
    options: &VerifyOptions,
    cursor: &mut VerifyCursor,
) -> Result<Report> {
    let (pool, scope) = (replayer.pool, replayer.scope);
    let started = std::time::Instant::now();
    let mut pinned = pin_source(src, key, options).await?;
    pinned.place_in_stream(pool, &scope.stream).await?;
    let p = pinned.snapshot_position().cloned().ok_or_else(|| {
        Error::definite(
            DefiniteCode::Usage,
            "the source reports no read-view binlog position (MySQL): a pinned verify needs MariaDB",
        )
    })?;
    let deadline = tokio::time::Instant::now() + CAPTURE_WAIT;
    let pinned_at = started.elapsed();
    kernel::log::wait_for_position(pool, &scope.stream, &p, deadline).await?;
    let reached_at = started.elapsed();
    let upto = l_seq_at(pool, &scope.stream, &p).await?;
    check_cursor_not_past(replayer.target, replayer.ctx, &p).await?;
    let done = replayer.run(b_seq, Until::CatchUp { upto }).await?;
    if let Some(v) = done.schema_applied {
        // The run ended at the DDL's step, before P: comparing now would be at another
        // point. The caller's next try starts with that version's target context.
        return Err(Error::transient(format!(
            "job {}: schema version {v} was applied to the target on the way to P; the \
             comparison runs again",
            scope.job
        )));
    }
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    tracing::info!(
        job = %scope.job,
        %p,
        groups = done.groups_applied,
        pin_ms = ms(pinned_at),
        wait_ms = ms(reached_at.saturating_sub(pinned_at)),
        replay_ms = ms(started.elapsed().saturating_sub(reached_at)),
        "target replayed to the source snapshot P"
    );
    pinned.compare(tgt, cursor).await
}

/// This command's own connection pools (its replay applies on `apply_streams`
/// connections, under no admission of a serve).
fn pools(
    source: mysql_async::Opts,
    target: mysql_async::Opts,
    cfg: &ReplayConfig,
) -> (ConnPool, ConnPool) {
    let streams = u32::try_from(cfg.apply_streams).unwrap_or(u32::MAX);
    (
        ConnPool::of_opts(Side::Source, source, 1),
        ConnPool::of_opts(Side::Target, target, streams),
    )
}

async fn check_cursor_not_past(target: &ConnPool, ctx: &TargetCtx, p: &BinlogPos) -> Result<()> {
    let mut tc = target.connect(Use::Control, "(verify cursor)").await?;
    let cursor = ledger::target::replay_cursor(&mut tc, ctx, false).await;
    tc.close().await;
    let Some(c) = cursor? else { return Ok(()) };
    let at_p = kernel::change::GroupEnd {
        pos: p.clone(),
        gtid: None,
    };
    if replay::cmp_end(&c.end, &at_p).map_err(Error::Definite)? == std::cmp::Ordering::Greater {
        return Err(Error::definite(
            DefiniteCode::Precondition,
            format!(
                "the target ledger's cursor {} is past the source snapshot {p}: the table was replayed \
                 past P meanwhile (another process, or a continuous replay not paused); \
                 run the pinned verify again",
                c.end.pos
            ),
        ));
    }
    Ok(())
}

/// The stored cursor of an interrupted verify of the job's live generation.
pub async fn load_cursor(
    pool: &MySqlPool,
    rec: &JobRecord,
    mode: &str,
) -> Result<Option<VerifyCursor>> {
    let bytes: Option<Vec<u8>> = sqlx::query_scalar(
        "SELECT cursor_bytes FROM verify_cursors WHERE job_id = ? AND generation = ? AND mode = ?",
    )
    .bind(rec.job_id.0)
    .bind(rec.generation.0)
    .bind(mode)
    .fetch_optional(pool)
    .await
    .map_err(|e| from_sqlx("reading verify_cursors", &e))?;
    bytes
        .map(|b| {
            VerifyCursor::decode(&b).map_err(|e| {
                Error::definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!("verify cursor of job {}: {e}", rec.job_id),
                )
            })
        })
        .transpose()
}

/// Stores `cursor` (an incomplete walk) or deletes it (a finished one).
pub async fn store_cursor(
    pool: &MySqlPool,
    rec: &JobRecord,
    mode: &str,
    cursor: &VerifyCursor,
) -> Result<()> {
    let q = if cursor.finished {
        sqlx::query("DELETE FROM verify_cursors WHERE job_id = ? AND generation = ? AND mode = ?")
            .bind(rec.job_id.0)
            .bind(rec.generation.0)
            .bind(mode)
    } else {
        sqlx::query(
            "INSERT INTO verify_cursors (job_id, generation, mode, cursor_bytes) VALUES (?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE cursor_bytes = VALUES(cursor_bytes)",
        )
        .bind(rec.job_id.0)
        .bind(rec.generation.0)
        .bind(mode)
        .bind(cursor.encode())
    };
    q.execute(pool)
        .await
        .map_err(|e| from_sqlx("writing verify_cursors", &e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_streaming_unpaused_table_is_verified_pinned() {
        let j = JobId(4);
        assert!(check_phase(j, Some(Phase::Streaming), false).is_ok());
        for (phase, paused) in [
            (Some(Phase::Streaming), true),
            (Some(Phase::Windows), false),
            (None, false),
        ] {
            let e = check_phase(j, phase, paused).expect_err("refused");
            assert_eq!(
                e.as_definite().map(|d| d.code),
                Some(DefiniteCode::Precondition),
                "{e}"
            );
            assert!(e.to_string().contains("job 4"), "{e}");
        }
        assert_ne!(replica_id("s", "h:1/a") & 0xf000_0000, 0x4000_0000);
        assert_ne!(replica_id("s", "h:1/a"), replica_id("s", "h:1/b"));
    }
}
