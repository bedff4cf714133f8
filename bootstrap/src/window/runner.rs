//! The window loop: every turn re-reads J, gathers the evidence about the window J names,
//! asks the pure [`crate::restart::decide`] and executes its decision. The same path runs a
//! fresh window and recovers one after a crash, so recovery is never a special case
//! (see the module docs of [`crate::window`] for the safety argument).
use crate::job::{self, JobCtx, Reached};
use crate::restart::{self, Credential, Decision, Evidence};
use crate::window::{apply, fp, progress, read, seal};
use kernel::control::{Intent, IntentKind};
use kernel::error::DefiniteCode;
use kernel::failpoint;
use kernel::ids::{Attempt, Digest, PageNo, WindowId};
use kernel::{Error, Result};
use ledger::journal::Head;
use ledger::manifest::{self, Expect, WindowManifest};
use ledger::record::CurrentWindow;
use std::time::Duration;
use tracing::Instrument;

/// Runs windows in plan order until every one is applied and recorded in J, or the table
/// pauses. Transient failures start a new attempt (the evidence decides); after
/// `max_attempts` consecutive ones the error goes back to the caller.
pub async fn run_windows(ctx: &JobCtx, _head: Head) -> Result<Reached> {
    let n = u32::try_from(ctx.plan.len()).unwrap_or(u32::MAX);
    let mut failures = 0u32;
    loop {
        let head = current_head(ctx).await?;
        if let Some(p) = &head.record.paused {
            return Ok(Reached::Paused(p.clone()));
        }
        if head.record.completed >= n {
            return Ok(Reached::WindowsDone(Box::new(head)));
        }
        if ctx.cancel.is_cancelled() {
            return Err(Error::transient("the job task was asked to stop"));
        }
        let w = WindowId(head.record.completed);
        let span = tracing::info_span!("window", job = %ctx.id(), window = %w);
        match turn(ctx, &head, w).instrument(span).await {
            Ok(()) => failures = 0,
            Err(e) if e.is_transient() => {
                failures += 1;
                tracing::warn!(job = %ctx.id(), %w, failures, error = %e, "window turn failed; a new attempt follows");
                if failures >= ctx.cfg.max_attempts.max(1) {
                    return Err(e);
                }
                tokio::time::sleep(Duration::from_millis(100 * u64::from(failures))).await;
            }
            Err(e) => {
                let head = current_head(ctx).await?;
                return job::pause_on_definite(ctx, &head, e).await;
            }
        }
    }
}

async fn current_head(ctx: &JobCtx) -> Result<Head> {
    ctx.journal
        .head(ctx.id(), ctx.generation())
        .await?
        .ok_or_else(|| Error::transient(format!("J of job {} vanished", ctx.id())))
}

/// What a sealed window's verified materials hold.
struct Loaded {
    hash: Digest,
    pages: Vec<Vec<u8>>,
    final_rows: u64,
}

/// One step of window `w`, decided from evidence.
async fn turn(ctx: &JobCtx, head: &Head, w: WindowId) -> Result<()> {
    let (evidence, loaded) = gather(ctx, head, w).await?;
    let decision = restart::decide(&evidence);
    tracing::debug!(?decision, "window decision");
    match decision {
        Decision::NewAttempt(a) => attempt(ctx, head, w, a).await,
        Decision::Apply { attempt, pages } => {
            let l = loaded.ok_or_else(|| Error::transient("sealed pages not loaded"))?;
            let todo: Vec<(PageNo, Vec<u8>)> = pages
                .iter()
                .filter_map(|p| l.pages.get(p.0 as usize).map(|b| (*p, b.clone())))
                .collect();
            apply::apply_pages(ctx, w, attempt, &todo, l.final_rows).await?;
            failpoint::hit(fp::AFTER_T_BEFORE_J);
            advance(ctx, head, w, attempt, &l).await
        }
        Decision::Advance { attempt } => {
            let l = loaded.ok_or_else(|| Error::transient("sealed pages not loaded"))?;
            advance(ctx, head, w, attempt, &l).await
        }
        Decision::Pause(msg) => Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!("job {} {w}: {msg}", ctx.id()),
        )),
    }
}

async fn advance(ctx: &JobCtx, head: &Head, w: WindowId, a: Attempt, l: &Loaded) -> Result<()> {
    apply::complete(ctx, head, w, a, l.hash).await?;
    let rows = (0, l.final_rows, l.final_rows);
    let _ = progress::record(
        &ctx.pool,
        ctx.id(),
        ctx.generation(),
        w,
        a,
        progress::Step::Done,
        rows,
    )
    .await;
    tracing::info!(job = %ctx.id(), %w, %a, rows = l.final_rows, "window applied and recorded in J");
    Ok(())
}

/// Reads what J, the seal row, the materials and T say about window `w`.
async fn gather(ctx: &JobCtx, head: &Head, w: WindowId) -> Result<(Evidence, Option<Loaded>)> {
    let Some(cur) = head.record.current.filter(|c| c.window == w) else {
        return Ok((Evidence::Unsealed { last_attempt: None }, None));
    };
    let Some(hash) = seal::sealed_hash(ctx, w, cur.attempt).await? else {
        let last = Some(cur.attempt);
        return Ok((Evidence::Unsealed { last_attempt: last }, None));
    };
    let creds = apply::credentials(ctx, w).await?;
    let loaded = match ledger::seal::load_final_pages(ctx.store.as_ref(), &hash) {
        Ok((m, pages)) if manifest_ok(ctx, w, &m) => Some((m, pages)),
        Ok(_) => None,
        Err(Error::Definite(d)) if d.code == DefiniteCode::EvidenceCorrupt => {
            tracing::error!(%w, error = %d, "sealed materials fail verification");
            None
        }
        Err(e) => return Err(e),
    };
    let Some((m, pages)) = loaded else {
        let credentials = creds
            .iter()
            .map(|c| Credential::Present(c.digest))
            .collect();
        let ev = Evidence::Sealed {
            attempt: cur.attempt,
            materials_ok: false,
            final_pages: Vec::new(),
            credentials,
        };
        return Ok((ev, None));
    };
    let final_pages: Vec<Digest> = m.final_pages.iter().map(|p| p.digest).collect();
    let mut credentials: Vec<Credential> = final_pages
        .iter()
        .enumerate()
        .map(|(i, _)| {
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
        pages,
        final_rows: m.final_rows(),
    };
    let ev = Evidence::Sealed {
        attempt: cur.attempt,
        materials_ok: true,
        final_pages,
        credentials,
    };
    Ok((ev, Some(l)))
}

fn manifest_ok(ctx: &JobCtx, w: WindowId, m: &WindowManifest) -> bool {
    let expect = Expect {
        job: ctx.id(),
        generation: ctx.generation(),
        window: w,
        range: ctx.plan[w.0 as usize],
        schema_fingerprint: ctx.schema.fingerprint(),
    };
    let findings = manifest::verify(m, &expect);
    for f in &findings {
        tracing::error!(%w, finding = %f, "sealed manifest inconsistent");
    }
    findings.is_empty()
}

/// A new attempt of window `w`: J records it, then steps 1-7 up to the seal row.
async fn attempt(ctx: &JobCtx, head: &Head, w: WindowId, a: Attempt) -> Result<()> {
    let range = ctx.plan[w.0 as usize];
    tracing::info!(job = %ctx.id(), %w, %a, %range, "window attempt starts");
    let mut next = head.record.clone();
    next.current = Some(CurrentWindow {
        window: w,
        attempt: a,
    });
    ctx.journal.append(&ctx.lease, head, next).await?;
    let (id, g) = (ctx.id(), ctx.generation());
    progress::record(&ctx.pool, id, g, w, a, progress::Step::Reading, (0, 0, 0)).await?;
    let low = Intent::new(id, g, IntentKind::Low, Some(w), Some(a));
    let low = job::write_and_await(ctx, &low, fp::AFTER_LOW_WRITTEN).await?;
    failpoint::hit(fp::AFTER_LOW_IN_L);
    seal::check_capture_pause(ctx, low.seq).await?;
    ctx.hooks.after_low(id, w, a).await;
    let t0 = std::time::Instant::now();
    let view = read::read_window(ctx, w, a, range).await?;
    let rows_read = view.rows.len() as u64;
    tracing::info!(%w, %a, rows_read, ms = t0.elapsed().as_millis() as u64, snapshot = ?view.snapshot, "read view closed");
    failpoint::hit(fp::AFTER_READ_CLOSED);
    ctx.hooks.after_read_closed(id, w, a).await;
    let high = Intent::new(id, g, IntentKind::High, Some(w), Some(a));
    let high = job::write_and_await(ctx, &high, fp::AFTER_HIGH_WRITTEN).await?;
    failpoint::hit(fp::AFTER_HIGH);
    seal::check_capture_pause(ctx, high.seq).await?;
    seal::check_snapshot(&low, &high, &view)?;
    let sealed = seal::seal(ctx, w, a, range, &low, &high, view).await?;
    let fin = sealed.manifest.final_rows();
    tracing::info!(%w, %a, final_rows = fin, folded = sealed.manifest.folded_changes, ms = t0.elapsed().as_millis() as u64, manifest = %sealed.manifest_hash, "window sealed");
    progress::record(
        &ctx.pool,
        id,
        g,
        w,
        a,
        progress::Step::Sealed,
        (rows_read, fin, 0),
    )
    .await?;
    failpoint::hit(fp::AFTER_FINAL_SEALED);
    Ok(())
}
