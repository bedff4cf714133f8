//! Who runs the capture reader of a stream (DESIGN §18): one process per source stream
//! across every serve sharing the state store, under a lease with a fencing token
//! (`capture_streams`, migration 0101), and the list of tables that reader captures
//! (`capture_members`).
//!
//! Why two readers never both write L for one stream: a process starts a stream's reader
//! only with a freshly acquired lease (the token grows on every acquire), and every L
//! append ([`crate::log::append_fenced`]) updates the lease row `WHERE token = mine` in
//! its own transaction: after a takeover zero rows match and the append rolls back
//! (`fenced`). The update is a write, so under Galera a takeover committed on another node
//! conflicts at certification instead of being missed by a read lock.
//!
//! Why no captured change is lost when jobs and the reader run in different processes: a
//! table's changes are captured from its B on only if the table is in the reader's capture
//! set when the reader meets B. The reader's owner adds every started job of the source to
//! the set before starting the reader, and later-started jobs before listing them as
//! members under its token ([`list_member`]); a job writes B only after [`is_member`]
//! confirms its table is listed with the stream's current token. A new owner builds its
//! set from every started job before its reader reads anything, so a takeover keeps every
//! table whose B it will meet.
use crate::error::{from_sqlx, DefiniteCode, Error, Result};
use crate::ids::{Generation, JobId};
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;
use std::time::Duration;

/// A held stream lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamLease {
    pub stream: String,
    pub owner: String,
    pub token: u64,
}

fn st(what: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| from_sqlx(what, &e)
}

fn micros(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX)
}

/// Takes the lease of `stream` for `owner` when it is free, expired or already `owner`'s,
/// with a new, larger token. While another owner's lease is live: `Ok(None)`.
pub async fn acquire(
    pool: &MySqlPool,
    stream: &str,
    owner: &str,
    ttl: Duration,
) -> Result<Option<StreamLease>> {
    let what = format!("acquiring the capture lease of stream `{stream}`");
    // The row exists before anyone locks it (no gap lock on an empty range).
    sqlx::query(
        "INSERT IGNORE INTO capture_streams (stream, owner, token, expires_at) \
         VALUES (?, '', 0, NOW(6))",
    )
    .bind(stream)
    .execute(pool)
    .await
    .map_err(st(&what))?;
    let mut tx = pool.begin().await.map_err(st(&what))?;
    let r = sqlx::query(
        "SELECT owner, token, expires_at > NOW(6) AS live FROM capture_streams \
         WHERE stream = ? FOR UPDATE",
    )
    .bind(stream)
    .fetch_one(&mut *tx)
    .await
    .map_err(st(&what))?;
    let holder: String = r.try_get("owner").map_err(st(&what))?;
    let token: u64 = r.try_get("token").map_err(st(&what))?;
    let live = r.try_get::<i64, _>("live").map_err(st(&what))? != 0;
    if live && holder != owner && !holder.is_empty() {
        return Ok(None);
    }
    sqlx::query(
        "UPDATE capture_streams SET owner = ?, token = ?, \
         expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE stream = ? AND token = ?",
    )
    .bind(owner)
    .bind(token + 1)
    .bind(micros(ttl))
    .bind(stream)
    .bind(token)
    .execute(&mut *tx)
    .await
    .map_err(st(&what))?;
    tx.commit().await.map_err(st(&what))?;
    Ok(Some(StreamLease {
        stream: stream.to_string(),
        owner: owner.to_string(),
        token: token + 1,
    }))
}

fn fenced(stream: &str, token: u64) -> Error {
    Error::definite(
        DefiniteCode::Fenced,
        format!(
            "stream `{stream}`: capture lease token {token} is stale: another serve runs this \
             stream's reader now; this reader must stop"
        ),
    )
}

/// Extends a held lease; `fenced` once its token moved on.
pub async fn renew(pool: &MySqlPool, lease: &StreamLease, ttl: Duration) -> Result<()> {
    let what = format!("renewing the capture lease of stream `{}`", lease.stream);
    let n = sqlx::query(
        "UPDATE capture_streams SET expires_at = NOW(6) + INTERVAL ? MICROSECOND \
         WHERE stream = ? AND token = ?",
    )
    .bind(micros(ttl))
    .bind(&lease.stream)
    .bind(lease.token)
    .execute(pool)
    .await
    .map_err(st(&what))?;
    if n.rows_affected() == 1 {
        Ok(())
    } else {
        Err(fenced(&lease.stream, lease.token))
    }
}

/// Gives a lease up (expires it now) so another process need not wait; a moved token is
/// left alone.
pub async fn release(pool: &MySqlPool, lease: &StreamLease) -> Result<()> {
    sqlx::query("UPDATE capture_streams SET expires_at = NOW(6) WHERE stream = ? AND token = ?")
        .bind(&lease.stream)
        .bind(lease.token)
        .execute(pool)
        .await
        .map_err(st("releasing a capture lease"))?;
    Ok(())
}

/// The fence of one L append, inside its transaction: writes the lease row only while
/// `token` is current. Zero rows: `fenced`.
pub async fn check_in(tx: &mut sqlx::MySqlConnection, stream: &str, token: u64) -> Result<()> {
    let n = sqlx::query(
        "UPDATE capture_streams SET appends = appends + 1 WHERE stream = ? AND token = ?",
    )
    .bind(stream)
    .bind(token)
    .execute(&mut *tx)
    .await
    .map_err(st("checking the capture lease"))?;
    if n.rows_affected() == 1 {
        Ok(())
    } else {
        Err(fenced(stream, token))
    }
}

/// Lists `(job, g)` as captured by the reader of `lease` (call after adding it to the
/// reader's set). Written only while `lease` is current (the row is taken from the lease
/// row with its token, and a listing is never moved back to an older token): a process
/// that lost the lease while it stalled cannot overwrite the new holder's listing, which
/// would leave the job waiting before its B. Zero rows: `fenced`.
pub async fn list_member(
    pool: &MySqlPool,
    lease: &StreamLease,
    job: JobId,
    g: Generation,
) -> Result<()> {
    let n = sqlx::query(
        "INSERT INTO capture_members (stream, job_id, generation, token) \
         SELECT stream, ?, ?, token FROM capture_streams WHERE stream = ? AND token = ? \
         ON DUPLICATE KEY UPDATE token = GREATEST(capture_members.token, VALUES(token))",
    )
    .bind(job.0)
    .bind(g.0)
    .bind(&lease.stream)
    .bind(lease.token)
    .execute(pool)
    .await
    .map_err(st("listing a captured table"))?;
    // Zero rows: not written because the lease moved on, or already listed as it is
    // (an earlier try that committed without its answer).
    if n.rows_affected() > 0 {
        return Ok(());
    }
    let current: Option<u64> =
        sqlx::query_scalar("SELECT token FROM capture_streams WHERE stream = ?")
            .bind(&lease.stream)
            .fetch_optional(pool)
            .await
            .map_err(st("listing a captured table"))?;
    if current == Some(lease.token) && is_member(pool, &lease.stream, job, g).await? {
        Ok(())
    } else {
        Err(fenced(&lease.stream, lease.token))
    }
}

/// True when `(job, g)` is listed under the stream's current lease token.
pub async fn is_member(pool: &MySqlPool, stream: &str, job: JobId, g: Generation) -> Result<bool> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM capture_members m JOIN capture_streams s \
         ON s.stream = m.stream AND s.token = m.token \
         WHERE m.stream = ? AND m.job_id = ? AND m.generation = ?",
    )
    .bind(stream)
    .bind(job.0)
    .bind(g.0)
    .fetch_one(pool)
    .await
    .map_err(st("reading the captured tables"))?;
    Ok(n > 0)
}

/// The owner and liveness of a stream's lease (status).
pub async fn holder(pool: &MySqlPool, stream: &str) -> Result<Option<(String, bool)>> {
    let r = sqlx::query(
        "SELECT owner, expires_at > NOW(6) AS live FROM capture_streams WHERE stream = ?",
    )
    .bind(stream)
    .fetch_optional(pool)
    .await
    .map_err(st("reading a capture lease"))?;
    r.map(|r| {
        Ok((
            r.try_get("owner").map_err(st("reading a capture lease"))?,
            r.try_get::<i64, _>("live")
                .map_err(st("reading a capture lease"))?
                != 0,
        ))
    })
    .transpose()
}
