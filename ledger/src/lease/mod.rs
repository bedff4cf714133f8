//! The owner lease of a job and its fencing token (issue 4, DESIGN §4).
//!
//! One process owns a job at a time. Acquiring the lease always increments the token, even
//! for the same owner name, so every earlier incarnation is fenced. Every J write checks
//! the token inside its state-store transaction ([`check_in`]) and every T write checks the
//! token recorded in the target's owner row ([`crate::target::claim`]), so a stale process
//! that wakes up late cannot write either. The expiry only decides when another owner may
//! take over; safety comes from the token alone.
//!
//! Galera (DESIGN §18): every statement here is correct when the state store is a
//! multi-node cluster, where row locks hold on the local node only and a conflicting
//! commit through another node fails certification (ERROR 1213, transient) instead:
//! * [`acquire`] reads the row `FOR UPDATE` and then writes that same row (a new token)
//!   or inserts it (primary key): the row is in its write set, so two takeovers through
//!   two nodes conflict and only one commits; the other retries and sees the new token.
//! * [`renew`] and [`release`] are single conditional UPDATEs (`WHERE token = mine`).
//! * [`check_in`] writes the lease row (it used to read it `LOCK IN SHARE MODE`, which
//!   Galera does not certify: a takeover through another node did not conflict with it).
use crate::util::sq;
use admission::{retry, CancellationToken, RetryError, RetryPolicy};
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::{Error, Result};
use sqlx::mysql::MySqlPool;
use sqlx::{MySqlConnection, Row as _};
use std::time::Duration;

/// A held lease: the job, who holds it and the fencing token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub job: JobId,
    pub owner: String,
    pub token: u64,
}

fn fenced(job: JobId, mine: u64, now: Option<u64>) -> Error {
    Error::definite(
        DefiniteCode::Fenced,
        match now {
            Some(t) => format!(
                "job {job}: fencing token {mine} is stale (current token {t}): another process owns this job; this process must stop writing"
            ),
            None => format!("job {job}: no lease row exists; acquire the lease before writing"),
        },
    )
}

/// Fault point: a renewal of [`keep`] committed (hit once per renewal).
pub const AFTER_RENEWED: &str = "job.after_lease_renewed";

/// Takes the lease of `job` for `owner` when it is free, expired or already ours, and
/// returns it with a new, larger fencing token. Refuses (definite, `fenced`) while another
/// owner holds a live lease.
pub async fn acquire(pool: &MySqlPool, job: JobId, owner: &str, ttl: Duration) -> Result<Lease> {
    let what = format!("acquiring the lease of job {job}");
    let what = what.as_str();
    let tries = retry(
        |_| take(pool, job, owner, ttl, what),
        |e: &Take| matches!(e, Take::Failed(_)),
        &INSERT_RACES,
        &CancellationToken::new(),
    )
    .await;
    match tries.map_err(RetryError::into_last) {
        Ok(lease) => Ok(lease),
        Err(Some(Take::Failed(e))) => Err(e),
        Err(_) => Err(Error::transient(format!(
            "{what}: lost the insert race three times"
        ))),
    }
}

/// Attempts at most when a first lease row's insert races another process's.
const INSERT_RACES: RetryPolicy = RetryPolicy::immediate(3);

/// Why one attempt of [`acquire`] did not take the lease.
#[derive(Debug)]
enum Take {
    /// No lease row when read, but another process inserted one first: read it again.
    LostRace,
    Failed(Error),
}

impl From<Error> for Take {
    fn from(e: Error) -> Take {
        Take::Failed(e)
    }
}

/// One attempt of [`acquire`], in one state-store transaction.
async fn take(
    pool: &MySqlPool,
    job: JobId,
    owner: &str,
    ttl: Duration,
    what: &str,
) -> Result<Lease, Take> {
    let mut tx = pool.begin().await.map_err(sq(what))?;
    let row = sqlx::query(
        "SELECT owner, token, expires_at > NOW(6) AS live FROM ledger_lease WHERE job_id = ? FOR UPDATE",
    )
    .bind(job.0)
    .fetch_optional(&mut *tx)
    .await
    .map_err(sq(what))?;
    let micros = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
    let token = match row {
        None => {
            let r = sqlx::query(
                "INSERT INTO ledger_lease (job_id, owner, token, expires_at) VALUES (?, ?, 1, NOW(6) + INTERVAL ? MICROSECOND)",
            )
            .bind(job.0)
            .bind(owner)
            .bind(micros)
            .execute(&mut *tx)
            .await;
            match r {
                Ok(_) => 1,
                Err(e) if crate::util::sqlx_is_dup(&e) => return Err(Take::LostRace),
                Err(e) => return Err(sq(what)(e).into()),
            }
        }
        Some(r) => {
            let holder: String = r.try_get("owner").map_err(sq(what))?;
            let token: u64 = r.try_get("token").map_err(sq(what))?;
            let live: bool = r.try_get::<i64, _>("live").map_err(sq(what))? != 0;
            if live && holder != owner {
                return Err(Error::definite(
                    DefiniteCode::Fenced,
                    format!("job {job} is owned by `{holder}` until its lease expires; stop that process or wait for the lease to expire"),
                )
                .into());
            }
            sqlx::query(
                "UPDATE ledger_lease SET owner = ?, token = token + 1, expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE job_id = ?",
            )
            .bind(owner)
            .bind(micros)
            .bind(job.0)
            .execute(&mut *tx)
            .await
            .map_err(sq(what))?;
            token + 1
        }
    };
    tx.commit().await.map_err(sq(what))?;
    Ok(Lease {
        job,
        owner: owner.to_string(),
        token,
    })
}

/// Extends a held lease. A lease whose token moved on is refused (`fenced`).
pub async fn renew(pool: &MySqlPool, lease: &Lease, ttl: Duration) -> Result<()> {
    let what = format!("renewing the lease of job {}", lease.job);
    let micros = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
    let n = sqlx::query(
        "UPDATE ledger_lease SET expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE job_id = ? AND token = ?",
    )
    .bind(micros)
    .bind(lease.job.0)
    .bind(lease.token)
    .execute(pool)
    .await
    .map_err(sq(&what))?
    .rows_affected();
    if n == 0 {
        return Err(fenced(
            lease.job,
            lease.token,
            current(pool, lease.job).await?,
        ));
    }
    Ok(())
}

/// Gives the lease up (expires it now) if it is still ours; the token stays.
pub async fn release(pool: &MySqlPool, lease: &Lease) -> Result<()> {
    sqlx::query("UPDATE ledger_lease SET expires_at = NOW(6) WHERE job_id = ? AND token = ?")
        .bind(lease.job.0)
        .bind(lease.token)
        .execute(pool)
        .await
        .map_err(sq("releasing a lease"))?;
    Ok(())
}

/// The current token of a job, if a lease row exists.
pub async fn current(pool: &MySqlPool, job: JobId) -> Result<Option<u64>> {
    sqlx::query_scalar("SELECT token FROM ledger_lease WHERE job_id = ?")
        .bind(job.0)
        .fetch_optional(pool)
        .await
        .map_err(sq("reading a lease token"))
}

/// Inside a state-store transaction: refuses unless `lease` still holds the current
/// token. The check is a write (`fence_checks + 1` on the lease row, migration 0105), so
/// the lease row is in this transaction's write set: on one server its exclusive row lock
/// keeps a new owner from taking over until this transaction ends; on Galera, where a
/// lock holds on one node only and reads are not certified, a takeover committed through
/// another node conflicts with this transaction at certification and one of the two
/// fails with ERROR 1213 (transient, retried): a stale owner's write can never commit
/// after a takeover.
pub async fn check_in(conn: &mut MySqlConnection, lease: &Lease) -> Result<()> {
    let n = sqlx::query(
        "UPDATE ledger_lease SET fence_checks = fence_checks + 1 WHERE job_id = ? AND token = ?",
    )
    .bind(lease.job.0)
    .bind(lease.token)
    .execute(&mut *conn)
    .await
    .map_err(sq("checking the fencing token"))?
    .rows_affected();
    if n == 1 {
        return Ok(());
    }
    let now: Option<u64> = sqlx::query_scalar("SELECT token FROM ledger_lease WHERE job_id = ?")
        .bind(lease.job.0)
        .fetch_optional(&mut *conn)
        .await
        .map_err(sq("checking the fencing token"))?;
    Err(fenced(lease.job, lease.token, now))
}

mod keep;
pub use keep::keep;
