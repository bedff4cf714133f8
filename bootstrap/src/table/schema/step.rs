//! The DDL's own step of replay: the target takes the version, then T records it with the
//! cursor past the DDL's group (see the module doc of [`super`] for why it is safe).
use crate::store::schema_versions::SchemaVersion;
use crate::table::faults;
use kernel::error::DefiniteCode;
use kernel::schema::SealedSchema;
use kernel::schema_change::target_statement;
use kernel::{failpoint, Error, Result};
use ledger::apply::ReplayGroup;
use ledger::target::{ReplayCursor, TargetCtx};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// The target table's definition as install seals it.
async fn target_definition(conn: &mut Conn, ctx: &TargetCtx) -> Result<SealedSchema> {
    let (db, t) = (&ctx.schema.database, &ctx.schema.table);
    let facts = kernel::introspect::read_table(conn, db, t)
        .await?
        .ok_or_else(|| {
            Error::definite(
                DefiniteCode::TargetRejected,
                format!("{}: the target table is gone", ctx.who()),
            )
        })?;
    kernel::introspect::seal(&facts).map_err(|problems| {
        let p: Vec<String> = problems.iter().map(ToString::to_string).collect();
        Error::definite(
            DefiniteCode::TargetRejected,
            format!(
                "{}: the target table cannot be read as a definition: {}",
                ctx.who(),
                p.join("; ")
            ),
        )
    })
}

/// The DDL step of one schema version: the version before it, the next one, and how long
/// the target's DDL waits for the table's metadata lock.
pub struct Ddl<'a> {
    pub before: &'a SealedSchema,
    pub next: &'a SchemaVersion,
    pub lock_wait: std::time::Duration,
}

/// Runs the target's DDL under a bounded metadata lock wait. A wait that ends is a
/// transient error naming the cause: the step is tried again, and a table whose target
/// stays held pauses after its retries with that reason, never hangs.
async fn run_ddl(
    conn: &mut Conn,
    what: &str,
    sql: &str,
    lock_wait: std::time::Duration,
) -> Result<()> {
    let secs = lock_wait.as_secs().max(1);
    conn.query_drop(format!("SET SESSION lock_wait_timeout = {secs}"))
        .await
        .map_err(|e| {
            kernel::error::from_mysql(&format!("{what}: setting lock_wait_timeout"), &e)
        })?;
    match conn.query_drop(sql).await {
        Ok(()) => Ok(()),
        Err(mysql_async::Error::Server(s)) if s.code == LOCK_WAIT_TIMEOUT => {
            Err(Error::transient(format!(
            "{what}: waited {secs} s for the target table's metadata lock (server error 1205): \
             another session on the target holds the table (an open transaction or a long \
             query); it is tried again; fix: end that session (SHOW PROCESSLIST shows it \
             `Waiting for table metadata lock` behind it), or raise `serve --schema-lock-wait`"
        )))
        }
        Err(e) => Err(kernel::error::from_target_write(what, &e)),
    }
}

/// ER_LOCK_WAIT_TIMEOUT.
const LOCK_WAIT_TIMEOUT: u16 = 1205;

fn differs(ctx: &TargetCtx, what: &str, want: &SealedSchema, have: &SealedSchema) -> Error {
    Error::definite(
        DefiniteCode::TargetRejected,
        format!(
            "{}: {what} ({}); fix: make the target table's definition the source's (SHOW \
             CREATE TABLE on both), then `backfill resume`",
            ctx.who(),
            want.differences(have).join("; ")
        ),
    )
}

/// Applies `next` (sealed at the DDL of `group`) to the target whose context `ctx` holds
/// the version in force before it (`before`, source names), then records it in T with the
/// cursor moved from `expect` past `group`.
pub async fn apply(
    conn: &mut Conn,
    ctx: &TargetCtx,
    ddl: Ddl<'_>,
    expect: Option<&ReplayCursor>,
    group: &ReplayGroup,
) -> Result<()> {
    let Ddl {
        before,
        next,
        lock_wait,
    } = ddl;
    let want = next.schema.fingerprint();
    let have = target_definition(conn, ctx).await?;
    if have.fingerprint() != want {
        if have.fingerprint() != before.fingerprint() {
            return Err(differs(ctx, "the target's definition is neither the version before the DDL nor the one after it", before, &have));
        }
        let quoted = ctx.schema.qualified();
        let stmt = target_statement(&next.ddl, before, &quoted).map_err(|i| {
            Error::definite(
                DefiniteCode::SchemaChanged,
                format!(
                    "{}: the DDL `{}` is not compatible: {i}",
                    ctx.who(),
                    next.ddl
                ),
            )
        })?;
        if let Some(sql) = stmt {
            let what = format!(
                "{} applying schema version {} (`{sql}`)",
                ctx.who(),
                next.version
            );
            run_ddl(conn, &what, &sql, lock_wait).await?;
            tracing::info!(job = %ctx.job, version = next.version, ddl = %sql, "schema change applied to the target");
        }
        failpoint::hit(faults::SCHEMA_AFTER_TARGET_DDL);
        let after = target_definition(conn, ctx).await?;
        if after.fingerprint() != want {
            return Err(differs(
                ctx,
                "after the DDL the target's definition is not the source's",
                &next.schema,
                &after,
            ));
        }
    }
    if !ledger::schema::record_version(conn, ctx, expect, group, next.version, &want).await? {
        return Err(Error::transient(format!(
            "{}: T's cursor moved while schema version {} was recorded; re-reading T",
            ctx.who(),
            next.version
        )));
    }
    failpoint::hit(faults::SCHEMA_AFTER_T);
    Ok(())
}
