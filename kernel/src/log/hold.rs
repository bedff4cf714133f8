//! The XA holds: which L records belong to a prepared group that waits for its
//! `XA COMMIT` or `XA ROLLBACK`. Registered and released only inside [`super::append`]'s
//! transaction, so the holds always match D (DESIGN §3.8).

use super::{corrupt, st, Hold, LSeq};
use crate::error::{from_sqlx, Result};
use sqlx::mysql::MySqlPool;
use sqlx::Row as _;

/// Registers the hold of a prepared XA group whose last held chunk is L record `seq`
/// (chunk number `chunk`: its chunks are the records `seq - chunk ..= seq`).
pub(super) async fn register_hold(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    seq: LSeq,
    chunk: u32,
    xid: &str,
) -> Result<()> {
    sqlx::query(
        "INSERT INTO capture_xa_hold (stream, xid, first_seq, last_seq) VALUES (?, ?, ?, ?)",
    )
    .bind(stream)
    .bind(xid.as_bytes())
    .bind(LSeq(seq.0 - u64::from(chunk)))
    .bind(seq)
    .execute(&mut **tx)
    .await
    .map_err(|e| {
        let dup = crate::error::sqlx_server_code(&e).map(crate::error::classify_server_code)
            == Some(crate::error::ServerClass::Duplicate);
        if dup {
            corrupt(format!(
                "stream `{stream}`: XA {xid} is prepared again at change log record {seq} while the change log \
                 already holds a prepared group of it"
            ))
        } else {
            from_sqlx("registering an XA hold", &e)
        }
    })?;
    Ok(())
}

/// Drops the hold of `xid` (its group was released at XA COMMIT or dropped at XA
/// ROLLBACK). A missing hold means L and the holds disagree: definite.
pub(super) async fn release_hold(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    stream: &str,
    xid: &str,
) -> Result<()> {
    let done = sqlx::query("DELETE FROM capture_xa_hold WHERE stream = ? AND xid = ?")
        .bind(stream)
        .bind(xid.as_bytes())
        .execute(&mut **tx)
        .await
        .map_err(st("releasing an XA hold"))?;
    if done.rows_affected() != 1 {
        return Err(corrupt(format!(
            "stream `{stream}`: the change log holds no prepared group of XA {xid} to release"
        )));
    }
    Ok(())
}

/// The XA holds of `stream` (prepared groups waiting for their XA COMMIT or ROLLBACK).
pub async fn holds(pool: &MySqlPool, stream: &str) -> Result<Vec<Hold>> {
    let rows = sqlx::query(
        "SELECT xid, first_seq, last_seq FROM capture_xa_hold WHERE stream = ? \
         ORDER BY first_seq",
    )
    .bind(stream)
    .fetch_all(pool)
    .await
    .map_err(st("reading XA holds"))?;
    let g = |e| from_sqlx("reading XA holds", &e);
    let mut out = Vec::new();
    for r in rows {
        let xid: Vec<u8> = r.try_get("xid").map_err(g)?;
        out.push(Hold {
            xid: String::from_utf8(xid)
                .map_err(|_| corrupt(format!("stream `{stream}`: an XA hold's xid is not text")))?,
            first_seq: r.try_get("first_seq").map_err(g)?,
            last_seq: r.try_get("last_seq").map_err(g)?,
        });
    }
    Ok(out)
}
