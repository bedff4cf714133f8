//! Step B (DESIGN §4): write B, await it in L, re-check the live definition and the XA
//! state, record CAPTURING(B).
//!
//! Why B is safe: the table is in the reader's capture set before B is written: the job
//! waits until `capture_members` lists it under the stream's current capture lease
//! ([`await_member`]; the reader may run in another serve, `crate::supervisor`), and
//! capture starts at B's binlog position, decided by the reader from the stream itself. The job waits until L durably holds B, then compares the
//! live source definition with the sealed one: a DDL between install and B would otherwise
//! never be seen (from B on, every DDL is in L and pauses the table there), and checks that
//! no XA transaction is prepared (DESIGN §3.8). Only then does J record CAPTURING(B). A
//! crash before that writes a new B with a new nonce on restart; an extra B of an already
//! captured table changes nothing in the reader.
use crate::table::ctx::JobCtx;
use crate::table::faults::window as fp;
use crate::table::markers::write_and_await;
use crate::table::pause::pause;
use kernel::control::{Intent, IntentKind};
use kernel::error::{Definite, DefiniteCode};
use kernel::failpoint;
use kernel::Result;
use ledger::journal::Head;
use ledger::record::Phase;

/// Step B: write B, await it in L, re-check the live definition, record CAPTURING(B).
/// The inner error is a definite pause already recorded in J.
pub async fn capture(ctx: &JobCtx, head: Head) -> Result<std::result::Result<Head, Definite>> {
    await_member(ctx).await?;
    let b = Intent::new(ctx.id(), ctx.generation(), IntentKind::B, None, None);
    let seen = write_and_await(ctx, &b, fp::AFTER_B_WRITTEN).await?;
    if let Some(d) = schema_drift(ctx).await? {
        return Ok(Err(pause(ctx, &head, d).await?));
    }
    if let Some(d) = xa_prepared(ctx).await? {
        return Ok(Err(pause(ctx, &head, d).await?));
    }
    let mut next = head.record.clone();
    next.phase = Phase::Capturing;
    next.b = Some(seen.end.pos.clone());
    let h = ctx.journal.append(&ctx.lease, &head, next).await?;
    tracing::info!(job = %ctx.id(), b = %seen.end.pos, "capture effective from the start position (B)");
    failpoint::hit(fp::AFTER_CAPTURING);
    Ok(Ok(h))
}

/// Waits (within the marker timeout) until the stream's current reader lists the table
/// as captured. A timeout is transient: no serve runs the stream's reader (none can
/// reach the source, or the lease holder is gone and its lease not yet expired).
async fn await_member(ctx: &JobCtx) -> Result<()> {
    let deadline = tokio::time::Instant::now() + ctx.cfg.marker_timeout;
    loop {
        let listed =
            kernel::capture::owner::is_member(&ctx.pool, &ctx.stream, ctx.id(), ctx.generation())
                .await?;
        if listed {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(kernel::Error::transient(format!(
                "job {}: no capture reader lists the table on stream `{}` yet (no serve holds \
                 the stream's capture lease, or it cannot reach the source); the start marker \
                 (B) is written once one does",
                ctx.id(),
                ctx.stream
            )));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Compares the live source definition with the sealed one (after B is durable).
async fn schema_drift(ctx: &JobCtx) -> Result<Option<Definite>> {
    let mut conn = ctx
        .source
        .connect(crate::io::pool::Use::Control, "(job source)")
        .await?;
    let facts =
        kernel::introspect::read_table(&mut conn, &ctx.schema.database, &ctx.schema.table).await;
    conn.close().await;
    let what = ctx.schema.qualified();
    let Some(facts) = facts? else {
        return Ok(Some(Definite {
            code: DefiniteCode::SchemaChanged,
            message: format!("source table {what} is gone (dropped or renamed) since install"),
        }));
    };
    let live = match kernel::introspect::seal(&facts) {
        Ok(s) => s,
        Err(problems) => {
            let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            return Ok(Some(changed(&what, &list)));
        }
    };
    let diff = ctx.schema.differences(&live);
    Ok((!diff.is_empty()).then(|| changed(&what, &diff)))
}

/// DESIGN §3.8: `XA RECOVER` must be empty when B becomes durable. A transaction prepared
/// before B commits later at a position the reader cannot tie to its PREPARE.
async fn xa_prepared(ctx: &JobCtx) -> Result<Option<Definite>> {
    use mysql_async::prelude::Queryable;
    let mut conn = ctx
        .source
        .connect(crate::io::pool::Use::Control, "(job source)")
        .await?;
    let rows: std::result::Result<Vec<mysql_async::Row>, _> = conn.query("XA RECOVER").await;
    conn.close().await;
    let rows = rows.map_err(|e| kernel::error::from_mysql("XA RECOVER on the source", &e))?;
    Ok((!rows.is_empty()).then(|| Definite {
        code: DefiniteCode::Precondition,
        message: format!(
            "{} prepared XA transaction(s) on the source when the start marker (B) became durable (XA RECOVER): \
             commit or roll them back (XA COMMIT/XA ROLLBACK), then resume the job",
            rows.len()
        ),
    }))
}

fn changed(what: &str, diff: &[String]) -> Definite {
    Definite {
        code: DefiniteCode::SchemaChanged,
        message: format!(
            "source table {what} changed between install and the start position (B) ({}): the sealed \
             schema no longer describes it; cancel and re-install the table",
            diff.join("; ")
        ),
    }
}
