//! T's record of the schema versions applied to the target (DESIGN §16): one row per
//! version after the install's, written in the transaction that moves T's cursor past the
//! DDL's group.
//!
//! # Why it is safe
//!
//! A DDL cannot share a transaction with T (the server commits implicitly around it), so
//! the order is: the DDL on the target first, then this transaction. It moves the cursor
//! by the same compare-and-set as every replay transaction, after the same owner check
//! (a stale owner is fenced), so it runs at most once per position; a crash between the
//! DDL and it leaves the cursor before the DDL's group, and the caller, finding the
//! target's definition already at the new version, does not run the DDL again. The
//! cursor past the DDL's group therefore always means: the target has the version.
use crate::apply::write_cursor;
use crate::group::ReplayGroup;
use crate::target::{check_owner, ReplayCursor, TargetCtx, SCHEMA};
use crate::util::my;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, TxOpts};

/// Moves T's cursor from `expect` past `group` (the DDL's group, no changes of the table)
/// and records `version` with its fingerprint, in one transaction. False when the cursor
/// was not at `expect` (T moved: nothing written).
pub async fn record_version(
    conn: &mut Conn,
    ctx: &TargetCtx,
    expect: Option<&ReplayCursor>,
    group: &ReplayGroup,
    version: u32,
    fingerprint: &Digest,
) -> Result<bool> {
    let what = format!(
        "{} recording schema version {version} in the target ledger",
        ctx.who()
    );
    let mut tx = conn
        .start_transaction(TxOpts::default())
        .await
        .map_err(my(&what))?;
    check_owner(&mut tx, ctx).await?;
    let next = ReplayCursor {
        end: group.end.clone(),
        rows_done: 0,
        group_digest: group.digest(),
    };
    if !write_cursor(&mut tx, ctx, expect, &next).await? {
        let _ = tx.rollback().await;
        return Ok(false);
    }
    let r = tx
        .exec_drop(
            format!(
                "INSERT INTO {} (job_id, generation, version, fingerprint, file, pos, token) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
                ctx.t(SCHEMA)
            ),
            (
                ctx.job.0,
                ctx.generation.0,
                version,
                &fingerprint.0[..],
                &group.end.pos.file,
                group.end.pos.pos,
                ctx.token,
            ),
        )
        .await;
    if let Err(e) = r {
        let _ = tx.rollback().await;
        if crate::util::my_is_dup(&e) {
            return Err(Error::definite(
                DefiniteCode::EvidenceConflict,
                format!("{what}: the target ledger already records version {version} before its DDL's group"),
            ));
        }
        return Err(my(&what)(e));
    }
    tx.commit().await.map_err(my(&what))?;
    Ok(true)
}

/// The versions T records as applied, in version order, with their fingerprints.
pub async fn recorded_versions(conn: &mut Conn, ctx: &TargetCtx) -> Result<Vec<(u32, Digest)>> {
    let r: std::result::Result<Vec<(u32, Vec<u8>)>, _> = conn
        .exec(
            format!(
                "SELECT version, fingerprint FROM {} WHERE job_id = ? AND generation = ? \
                 ORDER BY version",
                ctx.t(SCHEMA)
            ),
            (ctx.job.0, ctx.generation.0),
        )
        .await;
    let rows = match r {
        // A target prepared by a build before schema versions (the table is created with
        // the other T tables when serve next runs the job) records none.
        Err(mysql_async::Error::Server(e)) if e.code == 1146 => Vec::new(),
        r => r.map_err(my("reading the target ledger's schema versions"))?,
    };
    rows.into_iter()
        .map(|(v, d)| {
            let a: [u8; 32] = d.try_into().map_err(|_| {
                Error::definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!(
                        "{}: the target ledger's schema version {v} has a malformed fingerprint",
                        ctx.who()
                    ),
                )
            })?;
            Ok((v, Digest(a)))
        })
        .collect()
}
