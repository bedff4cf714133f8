//! Retention and GC after activation (DESIGN §17, issue 17 item 4): a STREAMING table's
//! RAW/FINAL pages and manifests are released once the retention allows it, and L
//! records below every consumer's cursor are deleted in bounded batches.
//!
//! # Why it is safe (kill -9 at any instant)
//!
//! Materials, per table-generation, in the table's own task (after its activation audit;
//! beside its continuous replay and periodic verify, which read no material: a verify
//! compares the source with the target), as a persisted protocol on
//! `retention_releases`:
//! 1. Retained: [`policy::decide`] keeps the materials while the retention runs, while a
//!    cancel or an unfinished verify walk is recorded, while a recorded verify or field
//!    check found differing rows, or (`--retention-until-verify`) until a periodic verify
//!    passed after activation.
//! 2. Intent: the activation audit runs on the evidence as it stands (credential
//!    required); only if it passes is the [`ReleaseRecord`] written: every
//!    registered material (digest, kind, bytes) and the facts the audit checked (windows,
//!    FINAL pages, T's credentials digest, the recomputed activation credential). Nothing
//!    is removed before this is durable (`gc.after_release_intent`).
//! 3. Remove: each listed material not registered by another job or generation is
//!    removed from the store ([`bytes`], `gc.mid_remove`, `gc.after_bytes_removed`);
//!    removing an absent one is fine, so a restart redoes this step from the start.
//! 4. Done: one state-store transaction removes the registry rows and their bytes from
//!    the usage and marks the release done: registry and accounting can never disagree.
//!
//! The audit reads the release record AFTER the materials and L, so a material it found
//! missing was either released (the record names it: a `released:` line) or is
//! evidence_corrupt; a concurrent `backfill audit` cannot mistake a release in progress
//! for corruption.
//!
//! L, per stream: [`horizon::horizon`] is the minimum over D's record and every job with
//! a B marker in the stream (a job not activated, or activated but not yet released,
//! holds L from its B: its audit re-reads B..F). `kernel::log::prune_batch` deletes below
//! it in bounded transactions that move the stream's horizon with the delete
//! (`gc.after_l_batch`). Every input of the horizon only moves forward, so a horizon
//! computed from older values is merely smaller: two tasks pruning the same stream at
//! once cannot delete what a consumer needs.
pub mod bytes;
pub mod horizon;
pub mod policy;

use crate::store::retention as rows;
use crate::table::audit::released::{self as record, ReleaseRecord, Released};
use crate::table::audit::{self, Sources};
use crate::table::faults::gc as fp;
use crate::table::replay::Scope;
use kernel::ids::Digest;
use kernel::range::KeyRange;
use kernel::{Error, Result};
use ledger::material::MaterialStore;
use ledger::target::TargetCtx;
use policy::{Decision, Facts, Policy};
use sqlx::mysql::MySqlPool;
use tokio_util::sync::CancellationToken;

/// Everything GC of one table needs (its task builds it from the activation's context).
pub struct GcEnv<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    pub store: &'a dyn MaterialStore,
    pub target: &'a crate::io::pool::ConnPool,
    pub ctx: &'a TargetCtx,
    pub plan: &'a [KeyRange],
    pub schema_fingerprint: Digest,
    pub chain: Option<&'a crate::table::schema::Chain>,
    pub policy: Policy,
}

/// What one GC pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pass {
    /// Why the materials are kept (None: released now or before).
    pub kept: Option<String>,
    pub released_materials: u64,
    pub released_bytes: u64,
    pub l_deleted: u64,
    /// Milliseconds spent: the audit and intent, removing bytes and accounting, L.
    pub intent_ms: u64,
    pub release_ms: u64,
    pub l_ms: u64,
}

/// Upper bound of L batches per pass (the next pass goes on).
const MAX_BATCHES: u32 = 10_000;

/// Runs `work` (the table's continuous replay) with a GC pass every `--gc-every` beside
/// it, in the table's own task: GC never runs beside the table's own audit (that runs
/// before) and needs no replay batch boundary (it writes no target row, and L's horizon
/// stays behind the replay's hint). Returns `work`'s result once the pass running then has
/// reached a statement boundary: a pass is told to stop, never dropped in the middle of a
/// statement (sqlx's state-store statements are not cancel-safe: a connection dropped
/// mid-statement is given back through an unbounded ping, and one such ping that never
/// came back held serve's stop forever, `kernel::state`).
pub async fn beside<T>(env: &GcEnv<'_>, work: impl std::future::Future<Output = T>) -> T {
    let stop = CancellationToken::new();
    let gc = async {
        while !stop.is_cancelled() {
            pass_until(env, &stop).await;
            tokio::select! {
                _ = tokio::time::sleep(env.policy.every) => {}
                _ = stop.cancelled() => {}
            }
        }
    };
    let work = async {
        let r = work.await;
        stop.cancel();
        r
    };
    let (r, ()) = tokio::join!(Box::pin(work), Box::pin(gc));
    r
}

/// One GC pass; a failure is logged and the next pass retries (the protocol resumes
/// where it stopped). Nothing of the table's streaming depends on it.
pub async fn pass(env: &GcEnv<'_>) {
    pass_until(env, &CancellationToken::new()).await
}

/// [`pass`], ending early at a statement boundary once `stop` fires.
async fn pass_until(env: &GcEnv<'_>, stop: &CancellationToken) {
    // Boxed: the audit it runs is a large future, kept off the table task's stack.
    match Box::pin(run_until(env, stop)).await {
        Ok(p) if p.released_bytes > 0 || p.l_deleted > 0 => tracing::info!(
            job = %env.scope.job,
            materials = p.released_materials,
            bytes = p.released_bytes,
            l_deleted = p.l_deleted,
            intent_ms = p.intent_ms,
            release_ms = p.release_ms,
            l_ms = p.l_ms,
            "retention pass"
        ),
        Ok(p) => tracing::debug!(job = %env.scope.job, ?p, "retention pass"),
        Err(e) => {
            tracing::warn!(job = %env.scope.job, "retention pass failed (retried at the next pass): {e}")
        }
    }
}

/// One GC pass of the table: the material protocol as far as it may go, then L, ending at
/// the next step boundary once `stop` fires (what is done stays done: each step is its own
/// durable state, and the next pass resumes from it).
async fn run_until(env: &GcEnv<'_>, stop: &CancellationToken) -> Result<Pass> {
    let mut pass = Pass::default();
    let (job, g) = (env.scope.job, env.scope.generation);
    let mut row = rows::ensure(env.pool, job, g).await?;
    let t = std::time::Instant::now();
    if row.state == rows::RETAINED {
        match decide(env, &row).await? {
            Decision::Keep(why) => pass.kept = Some(why),
            Decision::Release => {
                if let Err(why) = intent(env).await? {
                    pass.kept = Some(why);
                } else {
                    kernel::failpoint::hit(fp::AFTER_RELEASE_INTENT);
                }
            }
        }
        row = rows::ensure(env.pool, job, g).await?;
    }
    pass.intent_ms = t.elapsed().as_millis() as u64;
    if stop.is_cancelled() {
        return Ok(pass);
    }
    let t = std::time::Instant::now();
    if row.state == rows::INTENT {
        let rec = decode(&row, job, g)?;
        let digests: Vec<Digest> = rec.materials.iter().map(|m| m.digest).collect();
        let mut c = env
            .pool
            .acquire()
            .await
            .map_err(|e| kernel::error::from_sqlx("GC", &e))?;
        let keep = ledger::release::shared_digests(&mut c, job, g).await?;
        drop(c);
        bytes::remove_all(env.store, &digests, &keep).await?;
        kernel::failpoint::hit(fp::AFTER_BYTES_REMOVED);
        let (n, b) = rows::mark_done(env.pool, job, g).await?;
        tracing::info!(%job, materials = n, bytes = b, "retention: materials released");
        (pass.released_materials, pass.released_bytes) = (n, b);
    }
    pass.release_ms = t.elapsed().as_millis() as u64;
    if stop.is_cancelled() {
        return Ok(pass);
    }
    let t = std::time::Instant::now();
    pass.l_deleted = prune_l(env, stop).await?;
    pass.l_ms = t.elapsed().as_millis() as u64;
    Ok(pass)
}

fn decode(
    row: &rows::ReleaseRow,
    job: kernel::ids::JobId,
    g: kernel::ids::Generation,
) -> Result<ReleaseRecord> {
    let bytes = row.record.as_deref().unwrap_or_default();
    ReleaseRecord::decode(bytes).map_err(|e| {
        Error::definite(
            kernel::error::DefiniteCode::EvidenceCorrupt,
            format!("the release record of job {job} {g} does not decode ({e}); restore retention_releases from a backup"),
        )
    })
}

/// The policy's decision, with what else still needs the materials.
async fn decide(env: &GcEnv<'_>, row: &rows::ReleaseRow) -> Result<Decision> {
    let (job, g) = (env.scope.job, env.scope.generation);
    let mut needed_by = Vec::new();
    if crate::store::commands::has(env.pool, job, g, crate::store::commands::CANCEL).await? {
        needed_by.push(format!(
            "the cancel of job {job} {g}, which drains up to the cancel point (K)"
        ));
    }
    if rows::verify_walks(env.pool, job, g).await? > 0 {
        needed_by.push(format!("an unfinished `backfill verify` walk of job {job}"));
    }
    // A table its last periodic verify, a `backfill verify` or a field check found
    // different from its source keeps the evidence of its bootstrap until a verify
    // passes again (a clean whole walk clears the finding).
    let differing = rows::last_verify_differing(env.pool, job, g).await?;
    if differing > 0 {
        needed_by.push(format!(
            "the last periodic verify of job {job}, which found {differing} differing row(s)"
        ));
    }
    for c in crate::store::field_checks::read(env.pool, job, g).await? {
        if c.differing_rows > 0 {
            needed_by.push(format!(
                "job {job}'s recorded {} finding of {} differing row(s) ({})",
                c.origin, c.differing_rows, c.checked_at
            ));
        }
    }
    let facts = Facts {
        now: row.now,
        streaming_since: row.streaming_since,
        last_clean_verify: rows::last_clean_verify(env.pool, job, g).await?,
        needed_by,
    };
    Ok(policy::decide(&env.policy, &facts))
}

/// Audits the table and records the release intent; Err(reason) when the audit fails
/// (nothing is released, the materials are the evidence of the failure).
async fn intent(env: &GcEnv<'_>) -> Result<std::result::Result<(), String>> {
    let (job, g) = (env.scope.job, env.scope.generation);
    let mut tc = env
        .target
        .connect(crate::io::pool::Use::Control, "(target)")
        .await?;
    let ev = audit::gather(&mut Sources {
        pool: env.pool,
        scope: env.scope,
        store: env.store,
        target: &mut tc,
        ctx: env.ctx,
        plan: env.plan,
        schema_fingerprint: env.schema_fingerprint,
        chain: env.chain,
    })
    .await;
    tc.close().await;
    let ev = ev?;
    if ev.released.is_some() {
        return Ok(Err("a release is already recorded".into()));
    }
    let report = audit::audit(&ev, audit::Require::Activated);
    let (Some(x), true) = (report.expected.clone(), report.passed()) else {
        let why = format!("the audit before release failed: {}", report.text().trim());
        tracing::warn!(%job, "retention: {why}");
        return Ok(Err(why));
    };
    let mut materials: Vec<Released> = ev
        .registry
        .as_ref()
        .map(|r| {
            r.0.iter()
                .map(|e| Released {
                    digest: e.digest,
                    kind: e.kind.code().into(),
                    bytes: e.bytes,
                })
                .collect()
        })
        .unwrap_or_default();
    materials.sort_by_key(|a| a.digest.0);
    let creds = ev.credentials.as_deref().unwrap_or(&[]);
    let rec = ReleaseRecord {
        job,
        generation: g,
        windows: report.windows as u32,
        final_pages: report.final_pages as u32,
        l_records: report.l_records as u64,
        credentials: creds.len() as u32,
        credentials_digest: record::credentials_digest(creds),
        b: x.b,
        f: x.f,
        chain_root: x.chain_root,
        l_digest: x.l_digest,
        cursor: ev
            .cursor
            .as_ref()
            .ok()
            .and_then(|c| c.as_ref().map(|c| c.end.pos.clone())),
        materials,
    };
    let (n, bytes) = (rec.materials.len() as u64, rec.bytes());
    rows::record_intent(env.pool, job, g, &rec.encode(), n, bytes).await?;
    tracing::info!(%job, materials = n, bytes, "retention: release intent recorded");
    Ok(Ok(()))
}

/// Deletes L below the stream's horizon in bounded batches.
async fn prune_l(env: &GcEnv<'_>, stop: &CancellationToken) -> Result<u64> {
    let stream = &env.scope.stream;
    let Some(d) = rows::restart_seq(env.pool, stream).await? else {
        return Ok(0);
    };
    let needs: Vec<horizon::JobNeed> = rows::needs(env.pool, stream)
        .await?
        .into_iter()
        .map(
            |(job, cancelled, rel, b, hint, paused_at)| horizon::JobNeed {
                job,
                stage: match (cancelled, rel) {
                    (true, _) => horizon::Stage::Cancelled,
                    (false, Some(rows::DONE)) => horizon::Stage::Released,
                    _ => horizon::Stage::NeedsFromB,
                },
                b: Some(b),
                hint,
                paused_at,
            },
        )
        .collect();
    let (below, _) = horizon::horizon(d, &needs);
    let mut total = 0;
    for _ in 0..MAX_BATCHES {
        if stop.is_cancelled() {
            break;
        }
        let n = kernel::log::prune_batch(env.pool, stream, below, env.policy.batch).await?;
        if n == 0 {
            break;
        }
        total += n;
        kernel::failpoint::hit(fp::AFTER_L_BATCH);
    }
    if total > 0 {
        tracing::info!(stream = %stream, deleted = total, below = %below, "retention: change log records deleted");
    }
    Ok(total)
}
