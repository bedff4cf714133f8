//! Keeping a held lease alive while its holder works (DESIGN §4).
//!
//! # Why it is safe
//!
//! The fencing token, not the expiry, keeps a stale holder from writing: every J and T
//! write checks it. The expiry only decides when another process may take the job over,
//! so a holder that cannot renew must stop BEFORE its lease expires rather than find out
//! at its next write. [`keep`] renews every `ttl / 3`; a renewal that fails transiently is
//! retried through the one bounded helper ([`admission::retry`]) for at most another
//! `ttl / 3`, so the holder gives up with at least a third of the TTL left (a renewal that
//! succeeded moves the expiry to `ttl` from its own instant). A definite failure (the
//! token is no longer current: fenced) ends at once. Either way [`keep`] returns the
//! error and the caller stops its task; it never renews forever against a failing store.
use super::{renew, Lease};
use admission::{retry, CancellationToken, RetryError, RetryPolicy};
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use sqlx::mysql::MySqlPool;
use std::future::Future;
use std::time::Duration;

/// Renews `lease` (for `ttl` each time) every `ttl / 3` until `stop` is cancelled (then
/// None). Returns the reason the lease can no longer be trusted: fenced, or transient
/// renewal failures for `ttl / 3` in a row. `on_retry` sees every transient failure.
pub async fn keep(
    pool: &MySqlPool,
    lease: &Lease,
    ttl: Duration,
    stop: &CancellationToken,
    on_retry: impl Fn(&Error),
) -> Option<Error> {
    let lost = keep_with(|| renew(pool, lease, ttl), ttl, stop, on_retry).await?;
    Some(lost_lease(lease, ttl, lost))
}

/// The attempts of one renewal round: every `ttl / 12`, for at most `ttl / 3`.
fn round_policy(ttl: Duration) -> RetryPolicy {
    let step = ttl / 12;
    RetryPolicy::linear(u32::MAX, step, step).with_deadline(ttl / 3)
}

/// [`keep`] over any renewal operation (the unit tests use a scripted one).
async fn keep_with<F, Fut>(
    mut renew_once: F,
    ttl: Duration,
    stop: &CancellationToken,
    on_retry: impl Fn(&Error),
) -> Option<RetryError<Error>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let policy = round_policy(ttl);
    let on_retry = &on_retry;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(ttl / 3) => {}
        }
        let attempt = |_| {
            let r = renew_once();
            async move {
                let r = r.await;
                if let Err(e) = &r {
                    if e.is_transient() {
                        on_retry(e);
                    }
                }
                r
            }
        };
        match retry(attempt, |e: &Error| !e.is_transient(), &policy, stop).await {
            Ok(()) => kernel::failpoint::hit(super::AFTER_RENEWED),
            Err(RetryError::Cancelled { .. }) => return None,
            Err(e) => return Some(e),
        }
    }
}

/// The error a lost lease ends its holder's task with.
fn lost_lease(lease: &Lease, ttl: Duration, e: RetryError<Error>) -> Error {
    match e {
        RetryError::Permanent { error, .. } => error,
        other => {
            let attempts = other.attempts();
            let last = other
                .into_last()
                .map_or_else(|| "none".to_string(), |e| e.to_string());
            Error::definite(
                DefiniteCode::Fenced,
                format!(
                    "job {}: the lease could not be renewed in {attempts} attempts over {} s \
                     (lease TTL {} s), the last error: {last}; the task stops before another \
                     process may take the job over",
                    lease.job,
                    (ttl / 3).as_secs(),
                    ttl.as_secs()
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use tokio::time::Instant;

    const TTL: Duration = Duration::from_secs(12);

    /// A renewal that answers from `script` (true = ok, false = transient failure), then
    /// `rest` forever; records the instant of every call since `t0`.
    fn scripted(
        script: Vec<bool>,
        rest: fn() -> Result<()>,
        calls: &RefCell<Vec<Duration>>,
    ) -> impl FnMut() -> std::future::Ready<Result<()>> + '_ {
        let t0 = Instant::now();
        let mut script = script.into_iter();
        move || {
            calls.borrow_mut().push(t0.elapsed());
            std::future::ready(match script.next() {
                Some(true) => Ok(()),
                Some(false) => Err(Error::transient("state store unreachable")),
                None => rest(),
            })
        }
    }

    fn secs(v: &[Duration]) -> Vec<u64> {
        v.iter().map(|d| d.as_secs()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn renews_every_third_of_the_ttl_until_stopped() {
        let calls = RefCell::new(vec![]);
        let stop = CancellationToken::new();
        let renew = scripted(vec![true; 3], || Ok(()), &calls);
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(13)).await;
            stop.cancel();
        };
        let (out, ()) = tokio::join!(keep_with(renew, TTL, &stop, |_| {}), stopper);
        assert!(out.is_none());
        assert_eq!(secs(&calls.borrow()), [4, 8, 12]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_within_the_round() {
        let calls = RefCell::new(vec![]);
        let retries = RefCell::new(0);
        let stop = CancellationToken::new();
        let renew = scripted(vec![false, false, true, true], || Ok(()), &calls);
        let stopper = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            stop.cancel();
        };
        let count = |_: &Error| *retries.borrow_mut() += 1;
        let (out, ()) = tokio::join!(keep_with(renew, TTL, &stop, count), stopper);
        assert!(out.is_none());
        // Round at 4 s: fails, 1 s later fails, 1 s later succeeds; next round 4 s on.
        assert_eq!(secs(&calls.borrow()), [4, 5, 6, 10]);
        assert_eq!(*retries.borrow(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_a_third_of_the_ttl_after_the_round_began() {
        let calls = RefCell::new(vec![]);
        let stop = CancellationToken::new();
        let renew = scripted(vec![true], || Err(Error::transient("down")), &calls);
        let out = keep_with(renew, TTL, &stop, |_| {}).await;
        assert!(matches!(out, Some(RetryError::DeadlineExceeded { .. })));
        // Last success at 4 s (lease valid to 16 s); the next round starts at 8 s and gives
        // up at 12 s: 4 s of the TTL are left when the holder stops.
        let c = calls.borrow();
        assert_eq!(secs(&c)[..2], [4, 8]);
        assert!(c.last().is_some_and(|t| t.as_secs() < 12));
        let lease = Lease {
            job: kernel::ids::JobId(7),
            owner: "a".into(),
            token: 3,
        };
        let e = lost_lease(&lease, TTL, out.unwrap());
        let text = e.to_string();
        assert!(text.contains("job 7") && text.contains("down"), "{text}");
        assert_eq!(e.as_definite().map(|d| d.code), Some(DefiniteCode::Fenced));
    }

    #[tokio::test(start_paused = true)]
    async fn a_fenced_renewal_ends_at_once() {
        let calls = RefCell::new(vec![]);
        let stop = CancellationToken::new();
        let fenced = || Err(Error::definite(DefiniteCode::Fenced, "token 3 is stale"));
        let renew = scripted(vec![], fenced, &calls);
        let out = keep_with(renew, TTL, &stop, |_| {}).await;
        assert!(matches!(out, Some(RetryError::Permanent { .. })));
        assert_eq!(secs(&calls.borrow()), [4]);
    }
}
