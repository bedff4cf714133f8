//! Read-ahead (DESIGN §5): windows are produced (read and sealed, [`produce`]) ahead of J
//! within the read permits, their FINAL pages applied concurrently within the write
//! permits, and J advanced one window at a time in plan order.
//!
//! Why it is safe:
//! * Producing writes neither J nor T (see [`produce`]); at most `read_windows` windows
//!   are produced at once and at most [`AHEAD`] more wait sealed, so memory is bounded
//!   by the window size, never by the table.
//! * Applying a sealed window's pages before J reaches it is the restart rule's own
//!   situation ("T holds the page credentials but J has not advanced"): every page goes
//!   through `ledger::apply` with its credential first, so a page is in T at most once,
//!   and a restart re-applies only the missing saved FINAL bytes. Ranges are disjoint and
//!   the target is exclusive and unpublished, so the order of pages across windows does
//!   not change the result. The table's first page still commits alone
//!   (notes/mariadb.md: the empty InnoDB target deadlock).
//! * J advances for window w only once every page of w is confirmed in T and every
//!   window before w is recorded (`Journal::complete_window` refuses anything else);
//!   only this task writes J while the pipeline runs.
//! * On any error nothing new starts; pages in flight finish (their write permits are
//!   released only on a known outcome), the producers' current attempts end (they run
//!   under the pipeline's stop token: no new attempt, no further permit wait), windows
//!   already complete in T are still recorded in J, then the error is returned.
//! * A panic of a sub-task is a definite error naming the window ([`panics`]): the table
//!   pauses at once instead of retrying a bug up to the attempt cap.
use crate::table::ctx::JobCtx;
use crate::table::schema::Chain;
use crate::table::window::produce::{self, Ready, Shared};
use crate::table::window::{apply, fp, panics, progress, versions};
use admission::PoolKind;
use kernel::failpoint;
use kernel::ids::{Attempt, Digest, PageNo, WindowId};
use kernel::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Sealed windows that may wait for the applier beyond those being produced.
pub const AHEAD: usize = 1;

/// Runs windows `from..n` (J is at `from`) until all are recorded in J or an error;
/// `chain` is the table's schema chain as the target's version was read with it.
/// `Ok(Some(v))`: the next window (in plan order) is of schema version `v`, newer than the
/// target's (`shared.target_version`); every window before it is applied and in J, and
/// the target must take `v` before its pages (`crate::table::window::versions::catch_up`).
pub async fn run(
    ctx: &JobCtx,
    (from, n): (u32, u32),
    shared: Shared,
    chain: &Chain,
) -> Result<Option<u32>> {
    // Pages are written with the definition of the target's version (DESIGN §16).
    let writer = Arc::new(versions::ctx_of(ctx, chain, shared.target_version)?);
    let ctx = Arc::new(ctx.clone());
    let shared = Arc::new(shared);
    shared.completed.store(from, Ordering::SeqCst);
    let stop = ctx.cancel.child_token();
    let (tx, rx) = mpsc::channel(AHEAD);
    let producer = tokio::spawn(produce_all(
        ctx.clone(),
        shared.clone(),
        from,
        n,
        tx,
        stop.clone(),
    ));
    let applied = apply_all(&writer, &shared, rx).await;
    stop.cancel();
    let produced = producer
        .await
        .map_err(|e| panics::task_failed(ctx.id(), "window producer", e));
    match applied {
        // The producer was stopped on purpose: only its definite error counts.
        Ok(Some(v)) => match produced {
            Err(e) if !e.is_transient() => Err(e),
            _ => Ok(Some(v)),
        },
        Ok(None) => first_error(None, produced.err()).map(|()| None),
        Err(e) => first_error(Some(e), produced.err()).map(|()| None),
    }
}

/// A definite error wins over a transient one (it must pause the table, not be retried).
fn first_error(a: Option<Error>, b: Option<Error>) -> Result<()> {
    match (a, b) {
        (None, None) => Ok(()),
        (Some(e), None) | (None, Some(e)) => Err(e),
        (Some(a), Some(b)) => Err(if a.is_transient() && !b.is_transient() {
            b
        } else {
            a
        }),
    }
}

/// Keeps the error that decides the outcome: the first definite one, else the first.
fn keep(failed: &mut Option<Error>, e: Error) {
    if let Err(e) = first_error(failed.take(), Some(e)) {
        *failed = Some(e);
    }
}

fn capacity(ctx: &JobCtx, pool: PoolKind) -> usize {
    ctx.admission.snapshot().pool(pool).capacity.max(1) as usize
}

/// Produces windows in plan order, up to the read-permit capacity at once, and sends
/// them (or the first error) to the applier in plan order.
async fn produce_all(
    ctx: Arc<JobCtx>,
    shared: Arc<Shared>,
    from: u32,
    n: u32,
    tx: mpsc::Sender<Result<Ready>>,
    stop: CancellationToken,
) {
    let width = capacity(&ctx, PoolKind::ReadWindow);
    // The producers stop with the pipeline, not only with the job: once a window failed,
    // the others start no new attempt and stop waiting for permits (a source that stopped
    // answering would otherwise keep them retrying, and the failure unreported).
    let ctx = Arc::new(JobCtx {
        cancel: stop.clone(),
        ..(*ctx).clone()
    });
    let mut inflight = VecDeque::new();
    let mut next = from;
    loop {
        while inflight.len() < width && next < n && !stop.is_cancelled() {
            let (c, s, w) = (ctx.clone(), shared.clone(), WindowId(next));
            let h = tokio::spawn(async move { produce::produce(&c, w, &s).await });
            inflight.push_back((w, h));
            next += 1;
        }
        let Some((w, h)) = inflight.pop_front() else {
            return;
        };
        let r = h
            .await
            .unwrap_or_else(|e| Err(panics::task_failed(ctx.id(), &format!("{w} read-ahead"), e)));
        let failed = r.is_err();
        let gone = tx.send(r).await.is_err();
        if failed || gone {
            stop.cancel();
            for (_, h) in inflight {
                let _ = h.await; // attempts already taken end before the error is reported
            }
            return;
        }
    }
}

/// One FINAL page to apply.
struct PageJob {
    window: WindowId,
    attempt: Attempt,
    page: PageNo,
    bytes: Vec<u8>,
}

/// A window whose pages are being applied.
struct Pending {
    window: WindowId,
    attempt: Attempt,
    hash: Digest,
    final_rows: u64,
    left: usize,
}

/// Applies the pages of ready windows, within the write permits, and advances J in plan
/// order. Returns the first error after draining what is in flight; `Ok(Some(v))` when a
/// window of a newer schema version `v` came (it is not taken: every window before it is
/// applied and recorded first).
async fn apply_all(
    ctx: &Arc<JobCtx>,
    shared: &Shared,
    mut rx: mpsc::Receiver<Result<Ready>>,
) -> Result<Option<u32>> {
    let width = capacity(ctx, PoolKind::TargetWrite);
    let mut windows: VecDeque<Pending> = VecDeque::new();
    let mut queue: VecDeque<PageJob> = VecDeque::new();
    let mut set: JoinSet<(WindowId, Result<u64>)> = JoinSet::new();
    // What each page task applies, to name it if it panics.
    let mut tasks: HashMap<tokio::task::Id, String> = HashMap::new();
    let mut alone = false; // the table's first page is in flight, alone
    let mut open = true;
    let mut failed: Option<Error> = None;
    let mut upstream: Option<Error> = None;
    let mut j_failed = false;
    let mut newer: Option<u32> = None;
    loop {
        // Windows complete in T are recorded in J even after another failure.
        if !j_failed {
            if let Err(e) = advance_done(ctx, shared, &mut windows).await {
                j_failed = true;
                failed.get_or_insert(e);
            }
        }
        if failed.is_none() && ctx.cancel.is_cancelled() {
            failed = Some(Error::transient("the job task was asked to stop"));
        }
        while failed.is_none() && !alone && set.len() < width {
            let Some(job) = queue.front() else { break };
            let first = job.window == WindowId(0) && job.page == PageNo(0);
            if first && !set.is_empty() {
                break;
            }
            let job = queue.pop_front().expect("front exists");
            alone = first;
            let c = ctx.clone();
            let what = format!("{} page {} apply", job.window, job.page);
            let task = set.spawn(async move {
                let r = apply::apply_one(&c, job.window, job.attempt, job.page, &job.bytes).await;
                (job.window, r)
            });
            tasks.insert(task.id(), what);
        }
        let drained = !open && queue.is_empty() && windows.is_empty();
        if set.is_empty() && (failed.is_some() || drained) {
            break;
        }
        let want = open && failed.is_none() && queue.len() < width;
        tokio::select! {
            biased;
            Some(j) = set.join_next_with_id(), if !set.is_empty() => {
                alone = false;
                match j {
                    Ok((id, (w, Ok(_)))) => {
                        tasks.remove(&id);
                        if let Some(p) = windows.iter_mut().find(|p| p.window == w) {
                            p.left -= 1;
                        }
                    }
                    Ok((id, (_, Err(e)))) => {
                        tasks.remove(&id);
                        keep(&mut failed, e);
                    }
                    Err(e) => {
                        let what = tasks.remove(&e.id()).unwrap_or_else(|| "page apply".into());
                        keep(&mut failed, panics::task_failed(ctx.id(), &what, e));
                    }
                }
            }
            m = rx.recv(), if want => match m {
                Some(Ok(r)) if r.version > shared.target_version => {
                    tracing::info!(job = %ctx.id(), window = %r.window, version = r.version, target = shared.target_version, "a window of a newer schema version: the target takes it first");
                    open = false;
                    newer = Some(r.version);
                }
                Some(Ok(r)) if r.version < shared.target_version => {
                    failed.get_or_insert(older(ctx, &r, shared.target_version));
                    open = false;
                }
                Some(Ok(r)) => accept(r, &mut windows, &mut queue),
                Some(Err(e)) => { open = false; upstream = Some(e); }
                None => open = false,
            },
            else => {
                failed.get_or_insert(Error::transient("the window applier has nothing to wait for"));
            }
        }
    }
    drop(rx);
    first_error(failed, upstream).map(|()| newer)
}

/// A window of an older version than the target's reached the applier: the producer
/// reads such a window again (`produce::gather`), so this is a bug, never applied.
fn older(ctx: &JobCtx, r: &Ready, target: u32) -> Error {
    Error::definite(
        kernel::error::DefiniteCode::Internal,
        format!(
            "job {} {}: sealed in schema version {}, the target is at version {target}; this \
             is a bug in backfill",
            ctx.id(),
            r.window,
            r.version
        ),
    )
}

fn accept(r: Ready, windows: &mut VecDeque<Pending>, queue: &mut VecDeque<PageJob>) {
    windows.push_back(Pending {
        window: r.window,
        attempt: r.attempt,
        hash: r.manifest_hash,
        final_rows: r.final_rows,
        left: r.todo.len(),
    });
    for (page, bytes) in r.todo {
        queue.push_back(PageJob {
            window: r.window,
            attempt: r.attempt,
            page,
            bytes,
        });
    }
}

/// Step 9 for every leading window whose pages are all confirmed in T.
async fn advance_done(
    ctx: &JobCtx,
    shared: &Shared,
    windows: &mut VecDeque<Pending>,
) -> Result<()> {
    while windows.front().is_some_and(|p| p.left == 0) {
        let p = windows.pop_front().expect("front exists");
        failpoint::hit(fp::AFTER_T_BEFORE_J);
        let head = ctx.head().await?;
        apply::complete(ctx, &head, p.window, p.attempt, p.hash).await?;
        shared.completed.store(p.window.0 + 1, Ordering::SeqCst);
        let rows = (0, p.final_rows, p.final_rows);
        let (id, g) = (ctx.id(), ctx.generation());
        let _ = progress::record(
            &ctx.pool,
            id,
            g,
            p.window,
            p.attempt,
            progress::Step::Done,
            rows,
        )
        .await;
        tracing::info!(job = %id, window = %p.window, attempt = %p.attempt, rows = p.final_rows, "window applied and recorded in the journal");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::error::DefiniteCode;

    fn definite() -> Error {
        Error::definite(DefiniteCode::SchemaChanged, "ddl")
    }

    #[test]
    fn a_definite_error_is_never_masked_by_a_transient_one() {
        assert!(first_error(None, None).is_ok());
        let e = first_error(Some(Error::transient("lost")), Some(definite())).unwrap_err();
        assert!(!e.is_transient(), "{e}");
        let e = first_error(Some(definite()), Some(Error::transient("lost"))).unwrap_err();
        assert!(!e.is_transient(), "{e}");
        let e = first_error(None, Some(Error::transient("lost"))).unwrap_err();
        assert!(e.is_transient());
        let e = first_error(
            Some(Error::transient("applier side")),
            Some(Error::transient("producer side")),
        )
        .unwrap_err();
        assert!(e.to_string().contains("applier side"), "{e}");
    }
}
