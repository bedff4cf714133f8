//! `install --create-target` (DESIGN §17): the target table is created from the source's
//! sealed definition instead of by hand.
//!
//! What it holds, and why: every column with the source's COLUMN_TYPE (display widths
//! included, so the definitions read back the same), character set, collation and
//! nullability; generated columns as generated, with the source's expression (the target
//! computes them, DESIGN §15); the key the table is copied by (PRIMARY, or the NOT NULL
//! UNIQUE key standing in for one) and every other index as a non-unique index with its
//! prefix lengths. Never a foreign key, a trigger or a second unique key: replay upserts
//! full images in the source's order into an exclusive table (§6), where a foreign key or
//! trigger would run effects twice or block, and an extra unique key could reject a row that
//! is valid at its point in the source's history. Every column keeps the source's DEFAULT,
//! `ON UPDATE` and `AUTO_INCREMENT`, and an INVISIBLE column stays INVISIBLE: the target
//! is the source's definition (`verify` reports any attribute that differs), and none of
//! them changes what backfill writes, because every write names every stored column with
//! its value (an explicit value overrides a default and `ON UPDATE`, and the target
//! sessions run with NO_AUTO_VALUE_ON_ZERO, so a 0 in an AUTO_INCREMENT column stays 0).
//!
//! Safe because it only ever creates a table that the probe found missing (`CREATE TABLE`
//! without `IF NOT EXISTS`, so a table created meanwhile by someone else is an error, never
//! adopted), and install then reads the created table back and runs the same target checks
//! as for a hand-made one (empty, same fingerprint) before it records the job. A created
//! table left by a later refusal is empty with the right definition: the next install uses
//! it as it would a hand-made one.
use super::checks::Refusal;
use super::TableName;
use kernel::error::mysql_server_code;
use kernel::introspect::{RawColumn, TableFacts};
use kernel::schema::{quote_ident, SealedSchema};
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;

/// ER_BAD_DB_ERROR: the target database does not exist.
const ER_BAD_DB: u16 = 1049;
/// ER_TABLE_EXISTS_ERROR.
const ER_TABLE_EXISTS: u16 = 1050;

/// The `CREATE TABLE` of `target` from the source's facts and their sealed form (pure).
pub fn create_table_sql(target: &TableName, facts: &TableFacts, sealed: &SealedSchema) -> String {
    let mut parts: Vec<String> = facts
        .columns
        .iter()
        .zip(&sealed.columns)
        .map(|(raw, col)| {
            let mut d = format!("{} {}", quote_ident(&raw.name), raw.column_type);
            if let (Some(cs), Some(co)) = (&col.charset, &col.collation) {
                d.push_str(&format!(" CHARACTER SET {cs} COLLATE {co}"));
            }
            match &col.generated {
                Some(g) => d.push_str(&format!(
                    " GENERATED ALWAYS AS ({}) {}",
                    g.expression,
                    if g.stored { "STORED" } else { "VIRTUAL" }
                )),
                None => d.push_str(if col.nullable { " NULL" } else { " NOT NULL" }),
            }
            if col.generated.is_none() {
                d.push_str(&attributes(raw));
            }
            if raw.is_invisible() {
                d.push_str(" INVISIBLE");
            }
            d
        })
        .collect();
    let key_cols = sealed.key_names_quoted().join(", ");
    if sealed.key_is_primary() {
        parts.push(format!("PRIMARY KEY ({key_cols})"));
    } else {
        parts.push(format!(
            "UNIQUE KEY {} ({key_cols})",
            quote_ident(&sealed.key_name)
        ));
    }
    for ix in &facts.indexes {
        // The key itself, and MySQL's functional index parts (no column to name).
        if ix.name == sealed.key_name || ix.columns.iter().any(|c| c.starts_with('(')) {
            continue;
        }
        let cols: Vec<String> = ix
            .columns
            .iter()
            .zip(ix.sub_parts.iter().chain(std::iter::repeat(&None)))
            .map(|(c, len)| match len {
                Some(n) => format!("{}({n})", quote_ident(c)),
                None => quote_ident(c),
            })
            .collect();
        parts.push(format!(
            "KEY {} ({})",
            quote_ident(&ix.name),
            cols.join(", ")
        ));
    }
    format!(
        "CREATE TABLE {target} (\n  {}\n) ENGINE=InnoDB",
        parts.join(",\n  ")
    )
}

/// A column's DEFAULT, ON UPDATE and AUTO_INCREMENT clauses from what
/// `information_schema.COLUMNS` says (MariaDB prints COLUMN_DEFAULT as an SQL expression,
/// which `DEFAULT (...)` takes whatever it is). Empty for a column without any.
fn attributes(raw: &RawColumn) -> String {
    let mut d = String::new();
    if let Some(def) = &raw.default {
        d.push_str(&format!(" DEFAULT ({def})"));
    }
    let extra = raw.extra.to_ascii_lowercase();
    if let Some(at) = extra.find("on update ") {
        let expr = extra[at + "on update ".len()..]
            .split_whitespace()
            .next()
            .unwrap_or_default();
        d.push_str(&format!(" ON UPDATE {expr}"));
    }
    if extra.contains("auto_increment") {
        d.push_str(" AUTO_INCREMENT");
    }
    d
}

/// Creates the target table; a refusal (naming the grant or the database to create) when
/// the server says no, an error only when the server could not be asked.
pub async fn create(
    conn: &mut mysql_async::Conn,
    target: &TableName,
    facts: &TableFacts,
    sealed: &SealedSchema,
) -> Result<Option<Refusal>> {
    let sql = create_table_sql(target, facts, sealed);
    let Err(e) = conn.query_drop(&sql).await else {
        tracing::info!(table = %target, "target table created (--create-target)");
        return Ok(None);
    };
    let object = format!("target table {target}");
    let Some(code) = mysql_server_code(&e) else {
        return Err(kernel::error::from_mysql(&format!("creating {target}"), &e));
    };
    let said = kernel::redact::redact_text(&e.to_string());
    Ok(Some(match code {
        ER_BAD_DB => Refusal::new(
            object,
            format!(
                "cannot be created: database {} does not exist on the target",
                quote_ident(&target.db)
            ),
            format!(
                "CREATE DATABASE {} on the target (or map --target-table to an existing one)",
                quote_ident(&target.db)
            ),
        ),
        ER_TABLE_EXISTS => Refusal::new(
            object,
            "was created by someone else while install ran",
            "run install again: an empty table with the source's definition is used",
        ),
        c if kernel::introspect::deny_codes::is_denied(c) => Refusal::new(
            object,
            format!("cannot be created by the target user ({said})"),
            format!(
                "GRANT CREATE, SELECT, INSERT, UPDATE, DELETE ON {}.* TO the target user \
                 (--create-target needs CREATE on the target database), or create the table \
                 by hand and install without --create-target",
                quote_ident(&target.db)
            ),
        ),
        _ => Refusal::new(
            object,
            format!("cannot be created from the source's definition ({said})"),
            format!(
                "create it by hand (SHOW CREATE TABLE {} on the source, without foreign \
                 keys, triggers or extra unique keys) and install without --create-target",
                sealed.qualified()
            ),
        ),
    }))
}

/// Creating `target` failed outright: the error, naming the table.
pub fn failed(target: &TableName, e: Error) -> Error {
    Error::definite(
        kernel::error::DefiniteCode::Preparation,
        format!("creating target table {target}: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::super::checks::tests::{col, table};
    use super::*;
    use kernel::introspect::IndexDef;

    fn index(name: &str, unique: bool, cols: &[(&str, Option<u64>)]) -> IndexDef {
        IndexDef {
            name: name.into(),
            unique,
            columns: cols.iter().map(|c| c.0.to_string()).collect(),
            sub_parts: cols.iter().map(|c| c.1).collect(),
        }
    }

    #[test]
    fn the_ddl_keeps_columns_key_and_plain_indexes() {
        let mut name = col("name", "varchar", "varchar(40)");
        name.nullable = true;
        name.charset = Some("utf8mb4".into());
        name.collation = Some("utf8mb4_bin".into());
        let mut g = col("twice", "bigint", "bigint(20)");
        g.extra = "STORED GENERATED".into();
        g.generation = Some("`id` * 2".into());
        let mut f = table("shop");
        f.columns = vec![col("id", "int", "int(11)"), name, g];
        f.indexes
            .push(index("by_name", false, &[("name", Some(8))]));
        f.indexes.push(index("u_name", true, &[("name", None)]));
        let sealed = kernel::introspect::seal(&f).unwrap_or_else(|p| panic!("{p:?}"));
        let sql = create_table_sql(&TableName::new("copy", "t"), &f, &sealed);
        assert_eq!(
            sql,
            "CREATE TABLE `copy`.`t` (\n  `id` int(11) NOT NULL,\n  `name` varchar(40) \
             CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,\n  `twice` bigint(20) GENERATED \
             ALWAYS AS (`id` * 2) STORED,\n  PRIMARY KEY (`id`),\n  KEY `by_name` \
             (`name`(8)),\n  KEY `u_name` (`name`)\n) ENGINE=InnoDB"
        );
    }

    #[test]
    fn defaults_on_update_and_auto_increment_are_copied() {
        let mut id = col("id", "int", "int(11)");
        id.extra = "auto_increment".into();
        let mut at = col("at", "timestamp", "timestamp(6)");
        at.default = Some("current_timestamp(6)".into());
        at.extra = "on update current_timestamp(6)".into();
        let mut name = col("name", "varchar", "varchar(9)");
        name.default = Some("'x''y'".into());
        name.extra = "INVISIBLE".into();
        let mut g = col("g", "int", "int(11)");
        g.extra = "VIRTUAL GENERATED".into();
        g.generation = Some("`id` + 1".into());
        g.default = Some("NULL".into());
        let mut f = table("shop");
        f.columns = vec![id, at, name, g];
        let sealed = kernel::introspect::seal(&f).unwrap_or_else(|p| panic!("{p:?}"));
        let sql = create_table_sql(&TableName::new("c", "t"), &f, &sealed);
        assert!(
            sql.contains("`id` int(11) NOT NULL AUTO_INCREMENT,"),
            "{sql}"
        );
        assert!(
            sql.contains(
                "`at` timestamp(6) NOT NULL DEFAULT (current_timestamp(6)) ON UPDATE \
                 current_timestamp(6),"
            ),
            "{sql}"
        );
        assert!(
            sql.contains("`name` varchar(9) NOT NULL DEFAULT ('x''y') INVISIBLE,"),
            "{sql}"
        );
        assert!(
            sql.contains("`g` int(11) GENERATED ALWAYS AS (`id` + 1) VIRTUAL,"),
            "{sql}"
        );
    }

    #[test]
    fn a_unique_key_standing_in_for_the_primary_stays_unique() {
        let mut f = table("shop");
        f.columns = vec![col("a", "int", "int(11)"), col("b", "int", "int(11)")];
        f.indexes = vec![index("u_ab", true, &[("a", None), ("b", None)])];
        let sealed = kernel::introspect::seal(&f).unwrap_or_else(|p| panic!("{p:?}"));
        let sql = create_table_sql(&TableName::new("c", "t"), &f, &sealed);
        assert!(sql.contains("UNIQUE KEY `u_ab` (`a`, `b`)"), "{sql}");
        assert!(!sql.contains("PRIMARY"), "{sql}");
    }
}
