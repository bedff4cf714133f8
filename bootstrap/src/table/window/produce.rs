//! Steps 1-7 of one window, ahead of J (DESIGN §5: "reading and sealing of the next
//! windows may run ahead, within the read permits"): gather the window's evidence, ask
//! the pure [`crate::table::window::restart::decide`], and either run a new attempt up to its seal or
//! load the sealed FINAL bytes T still lacks. The result is a [`Ready`] window for the
//! applier ([`crate::table::window::pipeline`]).
//!
//! Why running ahead is safe: nothing here writes J or T. A window's evidence is its own
//! attempt records (`window_attempts`, written before LOW), its seal row and its verified
//! materials, plus T's credentials; none of it depends on J being at this window. So a
//! crash leaves every window ahead of J either unsealed (a new attempt; old materials are
//! garbage) or sealed (verified, never re-read; only the saved FINAL bytes go to T), the
//! same two cases as the window J is at. Ranges are disjoint, so windows read in any
//! order fold and seal independently.
use crate::table::ctx::JobCtx;
use crate::table::markers;
use crate::table::schema::Chain;
use crate::table::window::restart::{self, Credential, Decision, Evidence};
use crate::table::window::{apply, attempts, fp, garbage, progress, read, seal, versions};
use admission::{retry, RetryError, RetryPolicy};
use kernel::control::{Intent, IntentKind};
use kernel::error::DefiniteCode;
use kernel::failpoint;
use kernel::ids::{Attempt, Digest, PageNo, WindowId};
use kernel::key::Keyer;
use kernel::{Error, Result};
use ledger::manifest::{self, Expect, WindowManifest};
use ledger::record::CurrentWindow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tracing::Instrument;

/// A sealed, verified window and the FINAL pages T does not hold yet (saved bytes).
#[derive(Debug)]
pub struct Ready {
    pub window: WindowId,
    pub attempt: Attempt,
    /// The schema version the window was read and sealed in (1: the install's).
    pub version: u32,
    pub manifest_hash: Digest,
    pub final_rows: u64,
    pub todo: Vec<(PageNo, Vec<u8>)>,
}

/// What the producer shares with the applier: J's completed count (to tell a window
/// sealed ahead of J), J's legacy `current` field (attempts recorded by older builds) and
/// the target's schema version for this run of the pipeline (a window sealed in an older
/// one and not in T yet is read again, `crate::table::window::versions`).
#[derive(Debug)]
pub struct Shared {
    pub completed: AtomicU32,
    pub legacy: Option<CurrentWindow>,
    pub target_version: u32,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            completed: AtomicU32::new(0),
            legacy: None,
            target_version: 1,
        }
    }
}

/// Produces window `w`: transient failures start a new attempt (the evidence decides);
/// after `max_attempts` failures in a row the window's definite error names it and the
/// last error, and the table pauses instead of looping forever (STYLE §6).
pub async fn produce(ctx: &JobCtx, w: WindowId, shared: &Shared) -> Result<Ready> {
    let max = ctx.cfg.max_attempts.max(1);
    let step = Duration::from_millis(100);
    let policy = RetryPolicy::linear(max, step, step.saturating_mul(max));
    let attempt = |n: u32| async move {
        let err = match once(ctx, w, shared).await {
            Err(e) if e.is_transient() && !ctx.cancel.is_cancelled() => e,
            other => return other,
        };
        tracing::warn!(job = %ctx.id(), %w, failures = n, error = %err, "window attempt failed; a new attempt follows");
        if let Ok(Some(a)) = attempts::last(ctx, w).await {
            let _ = attempts::note_failure(ctx, w, a, &err.to_string()).await;
        }
        Err(err)
    };
    let permanent = |e: &Error| !e.is_transient() || ctx.cancel.is_cancelled();
    match retry(attempt, permanent, &policy, &ctx.cancel).await {
        Ok(r) => Ok(r),
        Err(RetryError::Exhausted { attempts, last }) => Err(exhausted(ctx, w, attempts, &last)),
        Err(e) => Err(crate::store::jobs::last_error(e)),
    }
}

/// The pause reason of a window that failed `n` attempts in a row.
pub fn exhausted(ctx: &JobCtx, w: WindowId, n: u32, last: &Error) -> Error {
    Error::definite(
        DefiniteCode::RetriesExhausted,
        format!(
            "job {} {w} of {}: {n} attempts in a row failed (max_attempts); last error: {last}. \
             Fix the cause, then `backfill resume`",
            ctx.id(),
            ctx.schema.qualified()
        ),
    )
}

async fn once(ctx: &JobCtx, w: WindowId, shared: &Shared) -> Result<Ready> {
    let (evidence, loaded) = gather(ctx, w, shared).await?;
    let decision = restart::decide(&evidence);
    tracing::debug!(%w, ?decision, "window decision");
    match decision {
        Decision::NewAttempt(a) => attempt(ctx, w, a, shared).await,
        Decision::Apply { attempt, pages } => {
            let l = loaded.ok_or_else(|| Error::transient("sealed pages not loaded"))?;
            let todo = pages
                .iter()
                .filter_map(|p| l.pages.get(p.0 as usize).map(|b| (*p, b.clone())))
                .collect();
            Ok(l.ready(w, attempt, todo))
        }
        Decision::Advance { attempt } => {
            let l = loaded.ok_or_else(|| Error::transient("sealed pages not loaded"))?;
            Ok(l.ready(w, attempt, Vec::new()))
        }
        Decision::Pause(msg) => Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!("job {} {w}: {msg}", ctx.id()),
        )),
    }
}

/// What a sealed window's verified materials hold.
struct Loaded {
    hash: Digest,
    version: u32,
    pages: Vec<Vec<u8>>,
    final_rows: u64,
}

impl Loaded {
    fn ready(self, w: WindowId, a: Attempt, todo: Vec<(PageNo, Vec<u8>)>) -> Ready {
        Ready {
            window: w,
            attempt: a,
            version: self.version,
            manifest_hash: self.hash,
            final_rows: self.final_rows,
            todo,
        }
    }
}

/// The last attempt of `w`: the attempt table, or J's legacy `current` field.
async fn last_attempt(ctx: &JobCtx, w: WindowId, shared: &Shared) -> Result<Option<Attempt>> {
    let table = attempts::last(ctx, w).await?;
    let legacy = shared.legacy.filter(|c| c.window == w).map(|c| c.attempt);
    Ok(table.max(legacy))
}

/// Reads what the attempt table, the seal row, the materials and T say about window `w`.
async fn gather(ctx: &JobCtx, w: WindowId, shared: &Shared) -> Result<(Evidence, Option<Loaded>)> {
    let Some(a) = last_attempt(ctx, w, shared).await? else {
        return Ok((Evidence::Unsealed { last_attempt: None }, None));
    };
    let Some(hash) = seal::sealed_hash(ctx, w, a).await? else {
        return Ok((
            Evidence::Unsealed {
                last_attempt: Some(a),
            },
            None,
        ));
    };
    let creds = apply::credentials(ctx, w).await?;
    let chain = versions::load(ctx).await?;
    let loaded = match ledger::seal::load_final_pages(ctx.store.as_ref(), &hash).await {
        Ok((m, pages)) if manifest_ok(ctx, &chain, w, &m) => {
            let v = versions::version_at(&chain, &m.low);
            usable(ctx, w, (v, shared.target_version), creds.len())?.then_some((m, pages, v))
        }
        Ok(_) => None,
        Err(Error::Definite(d)) if d.code == DefiniteCode::EvidenceCorrupt => {
            tracing::error!(%w, error = %d, "sealed materials fail verification");
            None
        }
        Err(e) => return Err(e),
    };
    let Some((m, pages, version)) = loaded else {
        let credentials = creds
            .iter()
            .map(|c| Credential::Present(c.digest))
            .collect();
        let ev = Evidence::Sealed {
            attempt: a,
            materials_ok: false,
            final_pages: Vec::new(),
            credentials,
        };
        return Ok((ev, None));
    };
    // Sealed and verified: older attempts' materials are garbage (released idempotently,
    // e.g. after a crash between the seal row and the release).
    garbage::release(ctx, w, a).await?;
    let final_pages: Vec<Digest> = m.final_pages.iter().map(|p| p.digest).collect();
    let mut credentials: Vec<Credential> = (0..final_pages.len())
        .map(|i| {
            creds
                .iter()
                .find(|c| c.page.0 as usize == i)
                .map_or(Credential::Absent, |c| Credential::Present(c.digest))
        })
        .collect();
    // A credential beyond the sealed pages contradicts the manifest: decide() pauses on the
    // length mismatch.
    if creds.iter().any(|c| c.page.0 as usize >= final_pages.len()) {
        credentials.push(Credential::Absent);
    }
    let l = Loaded {
        hash,
        version,
        pages,
        final_rows: m.final_rows(),
    };
    let ev = Evidence::Sealed {
        attempt: a,
        materials_ok: true,
        final_pages,
        credentials,
    };
    Ok((ev, Some(l)))
}

/// Whether a sealed window of schema version `v` may be applied to the target of version
/// `t` (this run's): true when they are one version, or the target is older (the applier
/// catches it up first); false when the target already moved past `v` and T holds none of
/// the window's pages (it is read again, as a new attempt). With pages in T it cannot be
/// either: the table pauses naming it.
fn usable(ctx: &JobCtx, w: WindowId, (v, t): (u32, u32), in_t: usize) -> Result<bool> {
    if v >= t {
        return Ok(true);
    }
    if in_t == 0 {
        tracing::info!(job = %ctx.id(), %w, sealed_in = v, target = t, "a window sealed before a schema change the target has taken: it is read again");
        return Ok(false);
    }
    Err(Error::definite(
        DefiniteCode::EvidenceConflict,
        format!(
            "job {} {w}: sealed in schema version {v}, with {in_t} page(s) in the target, which \
             is at version {t}: its rows missed the changes up to the DDL. Re-add the table \
             (runbooks/cancel-and-readd.md)",
            ctx.id()
        ),
    ))
}

fn manifest_ok(ctx: &JobCtx, chain: &Chain, w: WindowId, m: &WindowManifest) -> bool {
    let expect = Expect {
        job: ctx.id(),
        generation: ctx.generation(),
        window: w,
        range: ctx.plan[w.0 as usize].clone(),
        schema_fingerprint: ctx.schema.fingerprint(),
        later: crate::table::schema::later(&chain.versions),
    };
    let findings = manifest::verify(m, &expect);
    for f in &findings {
        tracing::error!(%w, finding = %f, "sealed manifest inconsistent");
    }
    findings.is_empty()
}

/// A new attempt of window `w`: recorded, then steps 1-7 up to the seal row. Every FINAL
/// page is new (T cannot hold a credential of an attempt that was never sealed).
async fn attempt(ctx: &JobCtx, w: WindowId, a: Attempt, shared: &Shared) -> Result<Ready> {
    let range = ctx.plan[w.0 as usize].clone();
    let mut chain = versions::load(ctx).await?;
    let version = chain.latest().0;
    // The version this attempt reads, folds and seals in (DESIGN §16).
    let vctx = versions::ctx_of(ctx, &chain, version)?;
    // The attempt's own weight cache: filled by the read, used by the fold, then dropped.
    let keyer = Keyer::new(vctx.tctx.keyer.def.clone());
    tracing::info!(job = %ctx.id(), %w, %a, %range, version, "window attempt starts");
    attempts::begin(ctx, w, a).await?;
    let (id, g) = (ctx.id(), ctx.generation());
    progress::record(&ctx.pool, id, g, w, a, progress::Step::Reading, (0, 0, 0)).await?;
    let low = Intent::new(id, g, IntentKind::Low, Some(w), Some(a));
    let low = markers::write_and_await(ctx, &low, fp::AFTER_LOW_WRITTEN)
        .instrument(crate::profile_span!("window.low", id, w))
        .await?;
    failpoint::hit(fp::AFTER_LOW_IN_L);
    versions::check_low(ctx, &mut chain, version, low.seq).await?;
    ctx.hooks.after_low(id, w, a).await;
    let t0 = std::time::Instant::now();
    let read = read::read_window(&vctx, w, a, &range, &keyer);
    let view = match read
        .instrument(crate::profile_span!("window.read", id, w))
        .await
    {
        Ok(v) => v,
        Err(e) => return Err(versions::read_failed(ctx, &mut chain, low.seq, e).await),
    };
    let rows_read = view.raw.len() as u64;
    tracing::info!(%w, %a, rows_read, ms = t0.elapsed().as_millis() as u64, snapshot = ?view.snapshot, "read view closed");
    failpoint::hit(fp::AFTER_READ_CLOSED);
    ctx.hooks.after_read_closed(id, w, a).await;
    let high = Intent::new(id, g, IntentKind::High, Some(w), Some(a));
    let high = markers::write_and_await(ctx, &high, fp::AFTER_HIGH_WRITTEN)
        .instrument(crate::profile_span!("window.high", id, w))
        .await?;
    failpoint::hit(fp::AFTER_HIGH);
    versions::check_high(ctx, &mut chain, low.seq, high.seq).await?;
    seal::check_snapshot(&low, &high, &view)?;
    let marks = (&low, &high);
    let sealed = seal::seal(&vctx, (w, a), (&range, &keyer), marks, view, &chain)
        .instrument(crate::profile_span!("window.seal", id, w))
        .await?;
    let fin = sealed.manifest.final_rows();
    tracing::info!(%w, %a, final_rows = fin, folded = sealed.manifest.folded_changes, ms = t0.elapsed().as_millis() as u64, manifest = %sealed.manifest_hash, "window sealed");
    let rows = (rows_read, fin, 0);
    progress::record(&ctx.pool, id, g, w, a, progress::Step::Sealed, rows).await?;
    failpoint::hit(fp::AFTER_FINAL_SEALED);
    if w.0 > shared.completed.load(Ordering::SeqCst) {
        failpoint::hit(fp::AFTER_SEALED_AHEAD);
    }
    garbage::release(ctx, w, a).await?;
    let todo = sealed
        .final_bytes
        .into_iter()
        .enumerate()
        .map(|(i, b)| (PageNo(i as u32), b))
        .collect();
    Ok(Ready {
        window: w,
        attempt: a,
        version,
        manifest_hash: sealed.manifest_hash,
        final_rows: fin,
        todo,
    })
}
