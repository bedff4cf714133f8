//! The target-write permits a bounded stretch of an activation's writes runs under
//! (DESIGN §8): see [`under_write_permits`].
use crate::table::ctx::JobCtx;
use kernel::{Error, Result};
use tokio_util::sync::CancellationToken;

/// Runs `work`, a bounded stretch of target write transactions of the job (replay of
/// (B, F] with the activation credential, a catch-up, the drain to K), under target-write
/// permits, so replay and activation count against `--target-writes` like FINAL pages
/// (DESIGN §8).
///
/// Runs `work` under `n` target-write permits taken together (all or none, FIFO:
/// [`admission::Admission::acquire_writes`]): a replay run on `n` apply streams
/// (`--apply-streams`) writes on `n` connections at once, so it counts as `n` target
/// writes (DESIGN §8), and taking them together means two tables can never each hold
/// part of what they need. The permits are released when `work` has returned: its callee
/// closed every target connection it used (replay statements have no client deadline: a
/// hung one keeps the permits). On success every statement was answered; after a replay
/// batch lost a connection or ended uncertain, `crate::table::replay` KILLs every connection and
/// confirms each gone, and if it cannot, `work` fails with `release_unconfirmed` naming the
/// connection ids and ALL `n` permits stay holds (release unknown; conservative: the
/// error does not say how many of the `n` are unconfirmed), as they do when `work` is
/// dropped unfinished (task aborted). Continuous replay (STREAMING, unbounded) is not run
/// under this: it takes its permits per batch ([`Finish::stream_admitted`],
/// KILL-confirmed per connection on failure).
pub(crate) async fn under_write_permits<T>(
    ctx: &JobCtx,
    what: &str,
    n: usize,
    cancel: &CancellationToken,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    let owner = format!("job {} {} {what}", ctx.id(), ctx.generation());
    let permits = ctx
        .admission
        .acquire_writes(&owner, n.max(1), ctx.cfg.permit_timeout, cancel)
        .await
        .map_err(|e| Error::transient(format!("{owner}: {e}")))?;
    let r = work.await;
    for permit in permits {
        crate::io::bounded::settle(permit, &r);
    }
    r
}
