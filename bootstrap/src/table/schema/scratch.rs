//! The definition right after a DDL when the live one is already later (DESIGN §16): the
//! source ran several DDLs of the table before the service sealed the first, so reading the
//! source's definition now gives the last one's result, not this one's.
//!
//! # Why it is safe
//!
//! The server itself computes the definition: a scratch table with exactly the version in
//! force before the DDL (every column's type, charset, collation, nullability and
//! generation, and the key) is created on the TARGET server (the service may create tables
//! there; the source account need not), the DDL's own clauses run on it as they run on the
//! target table ([`kernel::schema_change::target_statement`]), and the result is read back
//! as install reads a definition. It is only a candidate: [`super::seal`] then requires
//! the same proof as for a live definition, the clauses agreeing with the definitions
//! before and after ([`kernel::schema_change::check_after`]) and every raw rows event up
//! to the next DDL decoding against it (the binlog's table maps, with FULL metadata, name
//! and type every column), and the last DDL of such a run is still sealed from the live
//! definition. A server that renders a type otherwise than the source (another version)
//! fails those checks: the table pauses, nothing is guessed. The scratch table is dropped
//! after reading and before each creation, so a crash leaves at most one empty scratch
//! table of the job, replaced at the next try.
use crate::io::pool::{ConnPool, Use};
use kernel::schema::{quote_ident, ColumnDef, SealedSchema};
use kernel::Result;
use mysql_async::prelude::Queryable;

/// Where the scratch table may be created: the target server, the target's database.
#[derive(Clone, Copy)]
pub struct Scratch<'a> {
    pub target: &'a ConnPool,
    pub db: &'a str,
}

/// The scratch table's name for a job (one at a time per job).
fn scratch_name(job: kernel::ids::JobId) -> String {
    format!("_backfill_schema_scratch_{}", job.0)
}

/// One column as `CREATE TABLE` writes it (pure).
fn column_sql(c: &ColumnDef) -> String {
    let mut d = format!("{} {}", quote_ident(&c.name), c.column_type);
    if let (Some(cs), Some(co)) = (&c.charset, &c.collation) {
        d.push_str(&format!(" CHARACTER SET {cs} COLLATE {co}"));
    }
    match &c.generated {
        Some(g) => d.push_str(&format!(
            " GENERATED ALWAYS AS ({}) {}",
            g.expression,
            if g.stored { "STORED" } else { "VIRTUAL" }
        )),
        None => d.push_str(if c.nullable { " NULL" } else { " NOT NULL" }),
    }
    d
}

/// `CREATE TABLE quoted` with `schema`'s columns and key (pure).
pub fn create_sql(schema: &SealedSchema, quoted: &str) -> String {
    let mut parts: Vec<String> = schema.columns.iter().map(column_sql).collect();
    let key = schema.key_names_quoted().join(", ");
    parts.push(if schema.key_is_primary() {
        format!("PRIMARY KEY ({key})")
    } else {
        format!("UNIQUE KEY {} ({key})", quote_ident(&schema.key_name))
    });
    format!("CREATE TABLE {quoted} ({}) ENGINE=InnoDB", parts.join(", "))
}

/// The definition `before` takes after `sql`'s clauses, by the target server, with
/// `before`'s database and table names; Err(why) when it cannot be derived.
pub async fn derive(
    s: Scratch<'_>,
    job: kernel::ids::JobId,
    before: &SealedSchema,
    sql: &str,
) -> Result<std::result::Result<SealedSchema, String>> {
    let mut c = s.target.connect(Use::Control, "(schema scratch)").await?;
    let r = derive_on(&mut c, s.db, job, before, sql).await;
    c.close().await;
    r
}

async fn run(c: &mut mysql_async::Conn, q: &str) -> Result<()> {
    c.query_drop(q)
        .await
        .map_err(|e| kernel::error::from_target_write(&format!("schema scratch (`{q}`)"), &e))
}

async fn derive_on(
    c: &mut mysql_async::Conn,
    db: &str,
    job: kernel::ids::JobId,
    before: &SealedSchema,
    sql: &str,
) -> Result<std::result::Result<SealedSchema, String>> {
    let name = scratch_name(job);
    let quoted = format!("{}.{}", quote_ident(db), quote_ident(&name));
    let stmt = match kernel::schema_change::target_statement(sql, before, &quoted) {
        Ok(s) => s,
        Err(i) => return Ok(Err(format!("not compatible: {i}"))),
    };
    let drop = format!("DROP TABLE IF EXISTS {quoted}");
    run(c, &drop).await?;
    run(c, &create_sql(before, &quoted)).await?;
    if let Some(alter) = stmt {
        if let Err(e) = run(c, &alter).await {
            run(c, &drop).await?;
            return Ok(Err(format!(
                "the DDL does not run on the version before it: {e}"
            )));
        }
    }
    let facts = kernel::introspect::read_table(c, db, &name).await;
    run(c, &drop).await?;
    let Some(facts) = facts? else {
        return Ok(Err("the scratch table could not be read back".into()));
    };
    Ok(match kernel::introspect::seal(&facts) {
        Ok(mut after) => {
            after.database = before.database.clone();
            after.table = before.table.clone();
            Ok(after)
        }
        Err(p) => {
            let p: Vec<String> = p.iter().map(ToString::to_string).collect();
            Err(format!(
                "the derived definition cannot be sealed: {}",
                p.join("; ")
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_table_has_the_columns_and_the_key() {
        let s = crate::table::schema::fixtures::schema(2);
        let sql = create_sql(&s, "`d`.`x`");
        assert_eq!(
            sql,
            "CREATE TABLE `d`.`x` (`c0` int(11) NOT NULL, `c1` int(11) NOT NULL, \
             PRIMARY KEY (`c0`)) ENGINE=InnoDB"
        );
        assert_eq!(
            scratch_name(kernel::ids::JobId(4)),
            "_backfill_schema_scratch_4"
        );
    }
}
