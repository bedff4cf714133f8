//! The DDL's own step of replay: the target takes the version, then T records it with the
//! cursor past the DDL's group (see the module doc of [`super`] for why it is safe).
use crate::store::schema_versions::SchemaVersion;
use crate::table::faults;
use kernel::error::DefiniteCode;
use kernel::schema::SealedSchema;
use kernel::schema_change::{classify, target_statement, Alteration, Classified};
use kernel::{failpoint, Error, Result};
use ledger::apply::ReplayGroup;
use ledger::target::{ReplayCursor, TargetCtx};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use std::collections::BTreeSet;

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
    let (before, next) = (ddl.before, ddl.next);
    let want = next.schema.fingerprint();
    let have = target_definition(conn, ctx).await?;
    if have.fingerprint() != want {
        if have.fingerprint() != before.fingerprint() {
            return Err(differs(ctx, "the target's definition is neither the version before the DDL nor the one after it", before, &have));
        }
        run_on_target(conn, ctx, &ddl).await?;
    } else if before.fingerprint() == want && indexes_pending(conn, ctx, &ddl).await? {
        // An index-only DDL: the fingerprint (columns and key) is the same before and
        // after it, so only the target's indexes tell whether it ran.
        run_on_target(conn, ctx, &ddl).await?;
    }
    if !ledger::schema::record_version(conn, ctx, expect, group, next.version, &want).await? {
        return Err(Error::transient(format!(
            "{}: the target ledger's cursor moved while schema version {} was recorded; re-reading the target ledger",
            ctx.who(),
            next.version
        )));
    }
    failpoint::hit(faults::SCHEMA_AFTER_T);
    Ok(())
}

/// The target table's index names, lower case (index names are not case-sensitive).
async fn target_indexes(conn: &mut Conn, ctx: &TargetCtx) -> Result<BTreeSet<String>> {
    let (db, t) = (&ctx.schema.database, &ctx.schema.table);
    let names: Vec<String> = conn
        .exec(
            "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
            (db, t),
        )
        .await
        .map_err(|e| kernel::error::from_mysql("reading the target table's indexes", &e))?;
    Ok(names.into_iter().map(|n| n.to_lowercase()).collect())
}

/// Whether a clause of the DDL about an index is not reflected by the target's indexes
/// yet: an ADD of a name it lacks, a DROP of a name it has, a RENAME whose old name it has
/// and new name it lacks. An ADD INDEX without a name always runs (the server names it
/// after its first column: a kill between the target's DDL and T's record can leave a
/// second copy, which the suites' comparison reports; runbooks/schema-change.md).
pub fn index_clause_pending(alts: &[Alteration], have: &BTreeSet<String>) -> bool {
    let has = |n: &str| have.contains(&n.to_lowercase());
    alts.iter().any(|a| match a {
        Alteration::AddIndex { name: Some(n) } => !has(n),
        Alteration::AddIndex { name: None } => true,
        Alteration::DropIndex { name } => has(name),
        Alteration::RenameIndex { from, to } => has(from) && !has(to),
        _ => false,
    })
}

/// The DDL's alterations (none unless it classifies compatible, which replay has checked).
fn alterations(ddl: &Ddl<'_>) -> Vec<Alteration> {
    match classify(&ddl.next.ddl, ddl.before) {
        Classified::Compatible(alts) => alts,
        Classified::Incompatible(_) => Vec::new(),
    }
}

async fn indexes_pending(conn: &mut Conn, ctx: &TargetCtx, ddl: &Ddl<'_>) -> Result<bool> {
    let alts = alterations(ddl);
    Ok(index_clause_pending(
        &alts,
        &target_indexes(conn, ctx).await?,
    ))
}

/// Runs the DDL's statement for the target table, then checks the target's definition
/// is the version's and no index clause is left undone.
async fn run_on_target(conn: &mut Conn, ctx: &TargetCtx, ddl: &Ddl<'_>) -> Result<()> {
    let Ddl {
        before,
        next,
        lock_wait,
    } = *ddl;
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
    if after.fingerprint() != next.schema.fingerprint() {
        return Err(differs(
            ctx,
            "after the DDL the target's definition is not the source's",
            &next.schema,
            &after,
        ));
    }
    check_indexes_after(conn, ctx, ddl).await
}

/// The index clauses that name their index: only those can be checked by the target's
/// index names after the DDL (an unnamed ADD INDEX gets the server's name). A DDL that
/// adds a column and an unnamed index is not an index clause left undone.
fn named_index_clauses(alts: Vec<Alteration>) -> Vec<Alteration> {
    alts.into_iter()
        .filter(|a| match a {
            Alteration::AddIndex { name } => name.is_some(),
            Alteration::DropIndex { .. } | Alteration::RenameIndex { .. } => true,
            _ => false,
        })
        .collect()
}

/// After the DDL ran, every index clause that names its index is reflected by the target.
async fn check_indexes_after(conn: &mut Conn, ctx: &TargetCtx, ddl: &Ddl<'_>) -> Result<()> {
    let named = named_index_clauses(alterations(ddl));
    if !named.is_empty() && index_clause_pending(&named, &target_indexes(conn, ctx).await?) {
        return Err(Error::definite(
            DefiniteCode::TargetRejected,
            format!(
                "{}: after `{}` the target's indexes do not have what it adds, drops \
                 or renames; fix: make the target's indexes the source's (SHOW CREATE \
                 TABLE on both), then `backfill resume`",
                ctx.who(),
                ddl.next.ddl
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| s.to_lowercase()).collect()
    }

    #[test]
    fn an_index_clause_is_pending_until_the_target_reflects_it() {
        let add = |n: &str| Alteration::AddIndex {
            name: Some(n.into()),
        };
        let drop = |n: &str| Alteration::DropIndex { name: n.into() };
        let have = names(&["PRIMARY", "i_qty"]);
        assert!(index_clause_pending(&[add("i_name")], &have));
        assert!(
            !index_clause_pending(&[add("I_QTY")], &have),
            "names are not case-sensitive"
        );
        assert!(index_clause_pending(&[drop("i_qty")], &have));
        assert!(!index_clause_pending(&[drop("i_name")], &have));
        let rename = |f: &str, t: &str| Alteration::RenameIndex {
            from: f.into(),
            to: t.into(),
        };
        assert!(index_clause_pending(&[rename("i_qty", "i_q")], &have));
        assert!(!index_clause_pending(&[rename("i_x", "i_qty")], &have));
        assert!(index_clause_pending(
            &[Alteration::AddIndex { name: None }],
            &have
        ));
        let col = Alteration::AddColumn { name: "c".into() };
        assert!(
            !index_clause_pending(std::slice::from_ref(&col), &have),
            "no index clause"
        );
        // After `ADD COLUMN c, ADD INDEX (c)` ran: nothing named is left to check.
        let unnamed = Alteration::AddIndex { name: None };
        let named = named_index_clauses(vec![col, unnamed, add("i_name")]);
        assert_eq!(named, vec![add("i_name")]);
    }
}
