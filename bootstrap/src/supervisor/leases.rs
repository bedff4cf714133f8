//! Job leases of one serve: renewed while the task runs (a lost lease stops the task,
//! and every J and T write checks the fencing token anyway), released once the task has
//! ended so another process need not wait for the expiry.
use super::telemetry::Telemetry;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{Generation, JobId};
use kernel::{Error, Result};
use ledger::journal::Journal;
use ledger::record::JournalRecord;
use sqlx::MySqlPool;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Gives up a job's lease once its task has ended, so another process (a restarted serve
/// with another owner name, a pinned verify) need not wait for it to expire.
pub(super) async fn release_lease(pool: &MySqlPool, lease: &ledger::lease::Lease) {
    if let Err(e) = ledger::lease::release(pool, lease).await {
        tracing::warn!(job = %lease.job, error = %e, "releasing the job lease (it expires by itself)");
    }
}

/// Stops a job's lease renewal: told to stop, then awaited, so a renewal in flight ends at
/// its statement's answer instead of being dropped mid-statement (a state-store connection
/// dropped so is given back through sqlx's unbounded ping, `kernel::state`); past
/// [`super::STOP_STEP`] it is aborted (the step named in a warning).
pub(super) async fn stop_renewal(cancel: &CancellationToken, mut renew: JoinHandle<()>) {
    cancel.cancel();
    if super::stop_step("stopping a job's lease renewal", &mut renew)
        .await
        .is_none()
    {
        renew.abort();
    }
}

pub(super) fn is_fenced(e: &Error) -> bool {
    e.as_definite()
        .is_some_and(|d| d.code == DefiniteCode::Fenced)
}

/// The job was refused because every execution session of this serve is in use.
pub(super) fn is_session_limit(e: &Error) -> bool {
    e.as_definite()
        .is_some_and(|d| d.code == DefiniteCode::CapacityExhausted)
}

/// Keeps the task's lease alive ([`ledger::lease::keep`]): a lease that is taken over or
/// cannot be renewed within its bounds cancels the task before another process may take
/// the job.
pub(super) fn spawn_renewal(
    telemetry: Telemetry,
    pool: MySqlPool,
    lease: ledger::lease::Lease,
    ttl: Duration,
    cancel: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let on_retry = |e: &Error| {
            telemetry.count_retry("lease_renewal");
            tracing::warn!(job = %lease.job, error = %e, retry = "lease_renewal", "lease renewal failed; retrying");
        };
        if let Some(e) = ledger::lease::keep(&pool, &lease, ttl, &cancel, on_retry).await {
            tracing::error!(job = %lease.job, error = %e, "lease lost: stopping the job task");
            cancel.cancel();
        }
    })
}

/// Records a pause of `job` in J when no task of it runs (it could not be started): takes
/// the job's lease for the one write (J is created INSTALLED first if the job never ran),
/// then gives it up.
pub(super) async fn pause_outside_task(
    pool: &MySqlPool,
    (job, g): (JobId, Generation),
    owner: &str,
    ttl: Duration,
    reason: Definite,
) -> Result<Definite> {
    let lease = ledger::lease::acquire(pool, job, owner, ttl).await?;
    let r = async {
        let journal = Journal::new(pool.clone());
        let head = match journal.head(job, g).await? {
            Some(h) => h,
            None => {
                journal
                    .create(&lease, JournalRecord::installed(job, g))
                    .await?
            }
        };
        let mut next = head.record.clone();
        next.paused = Some(reason.clone());
        journal.append(&lease, &head, next).await?;
        kernel::failpoint::hit(crate::table::faults::PAUSE_AFTER_J_PAUSED);
        Ok::<_, Error>(reason)
    }
    .await;
    release_lease(pool, &lease).await;
    r
}

/// The reason a job pauses with once its transient failures used up `budget`.
pub(super) fn exhausted(job: JobId, failures: u32, last: &Error) -> Definite {
    Definite {
        code: DefiniteCode::RetriesExhausted,
        message: format!(
            "job {job}: {failures} transient failures in a row, the last: {last}; fix the \
             cause (a server down, a network problem, a full disk), then `backfill resume \
             {job}`"
        ),
    }
}
