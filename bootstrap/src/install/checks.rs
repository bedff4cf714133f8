//! The install preconditions of DESIGN §9 as pure decisions over facts read from the
//! servers (`kernel::introspect`). Each failed check is a [`Refusal`] that names the object
//! and the fix; install collects every refusal it can find before it gives up, so an
//! operator fixes everything in one round instead of one problem per attempt.
//!
//! Why each check exists:
//! * binlog on, ROW, FULL image, FULL metadata: the reader decodes full after-images by
//!   column name and signedness; anything less loses or misreads data (notes/mariadb.md).
//! * `binlog_order_commits=ON` (MySQL): visibility order must equal binlog order (§3.8).
//! * `binlog_transaction_compression=OFF` (MySQL 8.0.20+): a compressed transaction
//!   payload cannot be decoded by the reader; refused here rather than pausing the capture
//!   at the first compressed transaction.
//! * binlog filters: a filtered schema never reaches the binlog, so its changes (or the
//!   control table's fences) would be missing without any error.
//! * InnoDB base table: the read view and the binlog position must agree (§5).
//! * a single signed integer primary key: windows are integer ranges compared by the
//!   server (STYLE §9).
//! * child of a cascading foreign key: InnoDB applies cascades inside the engine and they
//!   never appear in the binlog as row events, so the copy would silently diverge.
//! * target empty, no triggers, no foreign keys, no extra unique keys, same definition:
//!   replay upserts full images by primary key into an exclusive table (§6); a trigger or a
//!   foreign key would run effects twice or block, a second unique key can reject a row
//!   that is valid in the source's order of events.
use kernel::introspect::{BinlogStatus, ServerFacts, TableFacts};
use kernel::position::Flavor;
use kernel::schema::{quote_ident, SealedSchema};

pub use crate::store::refusal::Refusal;

/// The source server's binlog configuration (pure). `status` is `SHOW MASTER STATUS`
/// (None when the binlog is off or the user could not read it; the latter is reported by
/// the privilege checks). `schemas` are the table's and the control table's schemas.
pub fn check_binlog(
    server: &str,
    f: &ServerFacts,
    status: Option<&BinlogStatus>,
    schemas: &[&str],
) -> Vec<Refusal> {
    let mut out = Vec::new();
    let var = |name: &str| format!("source server {server}: variable {name}");
    let restart = "set it in the server configuration ([mariadbd] or [mysqld] section) and \
                   restart, or SET GLOBAL (sessions already open keep their old value)";
    if !f.log_bin {
        out.push(Refusal::new(
            var("log_bin"),
            "the binary log is OFF",
            "start the server with log_bin=<basename> (with binlog_format=ROW, \
             binlog_row_image=FULL, binlog_row_metadata=FULL)",
        ));
        return out;
    }
    let want = |name: &str, have: Option<&String>, want: &str, out: &mut Vec<Refusal>| match have {
        Some(v) if v.eq_ignore_ascii_case(want) => {}
        Some(v) => out.push(Refusal::new(
            var(name),
            format!("is {v}, must be {want}"),
            format!("{name}={want}: {restart}"),
        )),
        None => out.push(Refusal::new(
            var(name),
            "does not exist on this server version",
            format!("upgrade to MariaDB 10.5+ or MySQL 8.0.14+ and set {name}={want}"),
        )),
    };
    want("binlog_format", f.binlog_format.as_ref(), "ROW", &mut out);
    want(
        "binlog_row_image",
        f.binlog_row_image.as_ref(),
        "FULL",
        &mut out,
    );
    want(
        "binlog_row_metadata",
        f.binlog_row_metadata.as_ref(),
        "FULL",
        &mut out,
    );
    if f.log_bin_compress {
        out.push(Refusal::new(
            var("log_bin_compress"),
            "is ON: compressed binlog events cannot be decoded by the reader",
            format!("log_bin_compress=OFF: {restart}"),
        ));
    }
    if f.flavor == Flavor::Mysql && f.binlog_order_commits == Some(false) {
        out.push(Refusal::new(
            var("binlog_order_commits"),
            "is OFF: transactions may become visible in another order than the binlog's",
            format!("binlog_order_commits=ON: {restart}"),
        ));
    }
    if f.flavor == Flavor::Mysql {
        let value = f.binlog_transaction_compression.as_deref();
        out.extend(check_transaction_compression(server, value));
    }
    if let Some(st) = status {
        for schema in schemas {
            if st.drops_schema(schema) {
                out.push(Refusal::new(
                    format!("source server {server}: binlog filter"),
                    format!(
                        "binlog_do_db=[{}] binlog_ignore_db=[{}] leaves schema {} out of the \
                         binlog",
                        st.do_db.join(","),
                        st.ignore_db.join(","),
                        quote_ident(schema)
                    ),
                    format!(
                        "remove binlog_do_db/binlog_ignore_db from the server configuration \
                         (or make them include {}) and restart",
                        quote_ident(schema)
                    ),
                ));
            }
        }
    }
    out
}

/// MySQL's `binlog_transaction_compression` as read from a MySQL source (pure; `None`: the
/// server has no such variable, as before 8.0.20; MariaDB has none and is not asked).
/// ON writes whole transactions as one compressed payload the reader cannot decode.
pub fn check_transaction_compression(server: &str, value: Option<&str>) -> Option<Refusal> {
    let v = value?;
    if !matches!(v.to_ascii_uppercase().as_str(), "ON" | "1" | "TRUE" | "YES") {
        return None;
    }
    Some(Refusal::new(
        format!("source server {server}: variable binlog_transaction_compression"),
        format!("is {v}: compressed transaction payloads cannot be decoded by the reader"),
        "SET PERSIST binlog_transaction_compression=OFF (or set it OFF in the [mysqld] \
         section and restart); sessions already open keep their old value, and no writer \
         session may SET SESSION binlog_transaction_compression=ON",
    ))
}

/// The source table (pure): a sealed schema or every reason it cannot be installed.
pub fn check_source_table(t: &TableFacts) -> Result<SealedSchema, Vec<Refusal>> {
    let name = format!("source table {}", t.qualified());
    let mut out = Vec::new();
    if !t.table_type.eq_ignore_ascii_case("BASE TABLE") {
        out.push(Refusal::new(
            &name,
            format!("is a {}, not a base table", t.table_type),
            "install the underlying InnoDB base table",
        ));
    }
    match t.engine.as_deref() {
        Some(e) if e.eq_ignore_ascii_case("InnoDB") => {}
        other => out.push(Refusal::new(
            &name,
            format!("uses engine {}, not InnoDB", other.unwrap_or("(none)")),
            format!("ALTER TABLE {} ENGINE=InnoDB", t.qualified()),
        )),
    }
    for fk in t.child_foreign_keys() {
        if fk.acts_on_child() {
            out.push(Refusal::new(
                &name,
                format!(
                    "foreign key {} (ON UPDATE {} ON DELETE {}) changes this table inside \
                     InnoDB, and such cascaded changes are not written to the binlog",
                    fk.qualified(),
                    fk.update_rule,
                    fk.delete_rule
                ),
                format!(
                    "make the constraint RESTRICT/NO ACTION (ALTER TABLE {} DROP FOREIGN KEY \
                     {}, then add it back without CASCADE/SET NULL)",
                    t.qualified(),
                    quote_ident(&fk.name)
                ),
            ));
        }
    }
    let sealed = kernel::introspect::seal(t).map_err(|problems| {
        problems
            .into_iter()
            .map(|p| {
                let s = p.to_string();
                let (problem, fix) = s
                    .split_once("; fix: ")
                    .unwrap_or((&s, "see runbooks/install.md"));
                Refusal::new(&name, problem, fix)
            })
            .collect::<Vec<_>>()
    });
    match sealed {
        Ok(s) if out.is_empty() => Ok(s),
        Ok(_) => Err(out),
        Err(mut more) => {
            out.append(&mut more);
            Err(out)
        }
    }
}

/// The target table (pure), against the sealed source definition (None when the source
/// could not be sealed: then the definitions are not compared).
pub fn check_target_table(
    t: &TableFacts,
    empty: bool,
    source: Option<&SealedSchema>,
) -> Vec<Refusal> {
    let name = format!("target table {}", t.qualified());
    let mut out = Vec::new();
    if !t.table_type.eq_ignore_ascii_case("BASE TABLE") {
        out.push(Refusal::new(
            &name,
            format!("is a {}, not a base table", t.table_type),
            "create an InnoDB base table with the source definition",
        ));
    }
    match t.engine.as_deref() {
        Some(e) if e.eq_ignore_ascii_case("InnoDB") => {}
        other => out.push(Refusal::new(
            &name,
            format!(
                "uses engine {}, not InnoDB (rows and ledger must commit in one transaction)",
                other.unwrap_or("(none)")
            ),
            format!("ALTER TABLE {} ENGINE=InnoDB", t.qualified()),
        )),
    }
    if !empty {
        out.push(Refusal::new(
            &name,
            "is not empty",
            "give an exclusive, empty target table (create a new one; a target is never \
             truncated by backfill)",
        ));
    }
    if !t.triggers.is_empty() {
        let names: Vec<String> = t.triggers.iter().map(|n| quote_ident(n)).collect();
        out.push(Refusal::new(
            &name,
            format!("has triggers {}", names.join(", ")),
            format!(
                "drop them: {}",
                names
                    .iter()
                    .map(|n| format!("DROP TRIGGER {}.{n}", quote_ident(&t.database)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ));
    }
    for fk in &t.foreign_keys {
        out.push(Refusal::new(
            &name,
            format!(
                "has foreign key {} ({}.{} -> {}.{})",
                fk.qualified(),
                quote_ident(&fk.child_db),
                quote_ident(&fk.child_table),
                quote_ident(&fk.parent_db),
                quote_ident(&fk.parent_table)
            ),
            format!(
                "ALTER TABLE {}.{} DROP FOREIGN KEY {}",
                quote_ident(&fk.child_db),
                quote_ident(&fk.child_table),
                quote_ident(&fk.name)
            ),
        ));
    }
    for ix in t.extra_unique_keys() {
        out.push(Refusal::new(
            &name,
            format!(
                "has unique key {} ({}) beyond the key it is copied by",
                quote_ident(&ix.name),
                ix.columns.join(", ")
            ),
            format!(
                "ALTER TABLE {} DROP INDEX {} (or make it non-unique)",
                t.qualified(),
                quote_ident(&ix.name)
            ),
        ));
    }
    if let Some(source) = source {
        out.extend(compare_definition(&name, t, source));
    }
    out
}

fn compare_definition(name: &str, t: &TableFacts, source: &SealedSchema) -> Option<Refusal> {
    let fix = format!(
        "recreate the target with the source's definition (SHOW CREATE TABLE {} on the \
         source; same column names, types, lengths, signedness, nullability, collation and \
         primary key)",
        source.qualified()
    );
    match kernel::introspect::seal(t) {
        Ok(target) if target.fingerprint() == source.fingerprint() => None,
        Ok(target) => Some(Refusal::new(
            name,
            format!(
                "definition differs from source {} (source fingerprint {}, target {}): {}",
                source.qualified(),
                short(&source.fingerprint().to_hex()),
                short(&target.fingerprint().to_hex()),
                source.differences(&target).join("; ")
            ),
            fix,
        )),
        Err(problems) => Some(Refusal::new(
            name,
            format!(
                "definition differs from source {}: {}",
                source.qualified(),
                problems
                    .iter()
                    .map(|p| p
                        .to_string()
                        .split("; fix: ")
                        .next()
                        .unwrap_or("")
                        .to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            fix,
        )),
    }
}

fn short(hex: &str) -> &str {
    &hex[..hex.len().min(12)]
}

/// Window and page sizes (pure): both > 0, page <= window, and bounded.
pub fn check_sizes(window_rows: u64, page_rows: u64) -> Result<(), String> {
    if window_rows == 0 || page_rows == 0 {
        return Err(format!(
            "--window-rows ({window_rows}) and --page-rows ({page_rows}) must be greater than 0"
        ));
    }
    if page_rows > window_rows {
        return Err(format!(
            "--page-rows ({page_rows}) must not exceed --window-rows ({window_rows})"
        ));
    }
    if window_rows > MAX_WINDOW_ROWS || page_rows > MAX_PAGE_ROWS {
        return Err(format!(
            "--window-rows may be at most {MAX_WINDOW_ROWS} and --page-rows at most \
             {MAX_PAGE_ROWS} (a window is read under one short read view)"
        ));
    }
    Ok(())
}

/// Upper bound of `--window-rows`: a window is one short read view (DESIGN §5).
pub const MAX_WINDOW_ROWS: u64 = 10_000_000;
/// Upper bound of `--page-rows`: one page is one material and one target transaction.
pub const MAX_PAGE_ROWS: u64 = 1_000_000;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(in crate::install) mod tests {
    use super::*;
    use kernel::introspect::{ForeignKey, IndexDef, RawColumn};
    use std::collections::BTreeMap;

    fn mariadb(vars: &[(&str, &str)]) -> ServerFacts {
        let mut m: BTreeMap<String, String> = [
            ("version", "10.11.6-MariaDB"),
            ("server_id", "1"),
            ("server_uid", "x"),
            ("log_bin", "ON"),
            ("binlog_format", "ROW"),
            ("binlog_row_image", "FULL"),
            ("binlog_row_metadata", "FULL"),
        ]
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        for (k, v) in vars {
            m.insert(k.to_string(), v.to_string());
        }
        ServerFacts::from_vars(&m)
    }

    /// A NOT NULL column (create's tests use it too).
    pub(in crate::install) fn col(name: &str, dt: &str, ct: &str) -> RawColumn {
        RawColumn {
            name: name.into(),
            data_type: dt.into(),
            column_type: ct.into(),
            nullable: false,
            char_len: None,
            numeric_precision: None,
            numeric_scale: None,
            datetime_precision: None,
            charset: None,
            collation: None,
            extra: String::new(),
            generation: None,
            default: None,
        }
    }

    /// `db`.`t` (id BIGINT PRIMARY KEY, v INT), InnoDB.
    pub(in crate::install) fn table(db: &str) -> TableFacts {
        TableFacts {
            database: db.into(),
            table: "t".into(),
            table_type: "BASE TABLE".into(),
            engine: Some("InnoDB".into()),
            estimated_rows: 0,
            columns: vec![
                col("id", "bigint", "bigint(20)"),
                col("v", "int", "int(11)"),
            ],
            indexes: vec![IndexDef {
                name: "PRIMARY".into(),
                unique: true,
                columns: vec!["id".into()],
                sub_parts: vec![None],
            }],
            triggers: vec![],
            foreign_keys: vec![],
        }
    }

    #[test]
    fn a_good_server_passes_and_each_variable_is_named() {
        assert!(check_binlog("s", &mariadb(&[]), None, &["d"]).is_empty());
        for (var, bad) in [
            ("binlog_format", "STATEMENT"),
            ("binlog_row_image", "MINIMAL"),
            ("binlog_row_metadata", "NO_LOG"),
            ("log_bin_compress", "ON"),
        ] {
            let r = check_binlog("s", &mariadb(&[(var, bad)]), None, &["d"]);
            assert_eq!(r.len(), 1, "{var}");
            assert!(r[0].to_string().contains(var) && r[0].to_string().contains(bad));
        }
        let off = check_binlog("s", &mariadb(&[("log_bin", "OFF")]), None, &["d"]);
        assert!(off[0].to_string().contains("log_bin"));
        let mysql = mariadb(&[
            ("version", "8.0.36"),
            ("server_uuid", "u"),
            ("binlog_order_commits", "OFF"),
        ]);
        assert!(check_binlog("s", &mysql, None, &["d"])[0]
            .to_string()
            .contains("binlog_order_commits"));
        let mut old = mariadb(&[]);
        old.binlog_row_metadata = None;
        assert!(check_binlog("s", &old, None, &["d"])[0]
            .to_string()
            .contains("upgrade"));
    }

    #[test]
    fn mysql_transaction_compression_is_refused_up_front() {
        let on = check_transaction_compression("s", Some("ON")).expect("refused");
        let text = on.to_string();
        assert!(text.contains("binlog_transaction_compression"), "{text}");
        assert!(text.contains("is ON"), "{text}");
        assert!(
            text.contains("binlog_transaction_compression=OFF"),
            "fix: {text}"
        );
        assert!(check_transaction_compression("s", Some("OFF")).is_none());
        assert!(check_transaction_compression("s", Some("0")).is_none());
        assert!(check_transaction_compression("s", None).is_none(), "absent");
        // Through the install checks: refused on a MySQL source only.
        let mysql = |v: Option<&str>| {
            let mut vars = vec![("version", "8.0.36"), ("server_uuid", "u")];
            vars.extend(v.map(|v| ("binlog_transaction_compression", v)));
            check_binlog("s", &mariadb(&vars), None, &["d"])
        };
        let r = mysql(Some("ON"));
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].object.contains("binlog_transaction_compression"));
        assert!(mysql(Some("OFF")).is_empty());
        assert!(mysql(None).is_empty(), "MySQL before 8.0.20");
        // MariaDB has no such variable; a value would not be read as MySQL's.
        let maria = mariadb(&[("binlog_transaction_compression", "ON")]);
        assert!(check_binlog("s", &maria, None, &["d"]).is_empty());
    }

    #[test]
    fn binlog_filters_name_the_schema() {
        let st = BinlogStatus {
            position: kernel::position::BinlogPos::new("b.000001", 4),
            do_db: vec!["other".into()],
            ignore_db: vec![],
        };
        let r = check_binlog("s", &mariadb(&[]), Some(&st), &["d", "backfill_control"]);
        assert_eq!(r.len(), 2);
        assert!(r[0].to_string().contains("`d`"));
        assert!(r[1].to_string().contains("`backfill_control`"));
    }

    #[test]
    fn source_table_refusals() {
        assert!(check_source_table(&table("d")).is_ok());
        let mut t = table("d");
        t.engine = Some("MyISAM".into());
        let r = check_source_table(&t).unwrap_err();
        assert!(r[0].to_string().contains("MyISAM") && r[0].fix.contains("ENGINE=InnoDB"));
        let mut t = table("d");
        t.foreign_keys.push(ForeignKey {
            name: "fk".into(),
            child_db: "d".into(),
            child_table: "t".into(),
            parent_db: "d".into(),
            parent_table: "p".into(),
            update_rule: "RESTRICT".into(),
            delete_rule: "CASCADE".into(),
        });
        assert!(check_source_table(&t).unwrap_err()[0]
            .to_string()
            .contains("`fk`"));
        let mut t = table("d");
        // MariaDB 11.7+ VECTOR: not a type this service knows.
        t.columns.push(col("g", "vector", "vector(4)"));
        let r = check_source_table(&t).unwrap_err();
        assert!(r[0].problem.contains("`g`") && r[0].fix.contains("supported types"));
    }

    #[test]
    fn target_refusals() {
        let src = check_source_table(&table("d")).unwrap();
        assert!(check_target_table(&table("x"), true, Some(&src)).is_empty());
        assert!(check_target_table(&table("x"), false, Some(&src))[0]
            .problem
            .contains("not empty"));
        let mut t = table("x");
        t.triggers.push("tr".into());
        t.indexes.push(IndexDef {
            name: "u".into(),
            unique: true,
            columns: vec!["v".into()],
            sub_parts: vec![None],
        });
        let r = check_target_table(&t, true, Some(&src));
        assert_eq!(r.len(), 2);
        assert!(r[0].fix.contains("DROP TRIGGER `x`.`tr`"));
        assert!(r[1].to_string().contains("`u`"));
        let mut t = table("x");
        t.columns[1] = col("v", "bigint", "bigint(20)");
        let r = check_target_table(&t, true, Some(&src));
        assert!(r[0].problem.contains("`v`") && r[0].problem.contains("fingerprint"));
        let mut t = table("x");
        t.indexes.clear();
        assert!(check_target_table(&t, true, Some(&src))[0]
            .problem
            .contains("no primary key"));
    }

    #[test]
    fn sizes() {
        assert!(check_sizes(50_000, 5_000).is_ok());
        assert!(check_sizes(0, 1).is_err());
        assert!(check_sizes(10, 0).is_err());
        assert!(check_sizes(10, 11).unwrap_err().contains("--page-rows"));
        assert!(check_sizes(MAX_WINDOW_ROWS + 1, 1).is_err());
    }
}
