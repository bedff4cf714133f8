//! An independent comparison of a source table with its target (DESIGN §11 I1), for tables
//! of any key: each server renders every row itself as the hex of each column's bytes
//! (`HEX(CAST(col AS BINARY))`: the stored bytes of strings, BINARY(n) with its trailing
//! 0x00, the text of numbers, DECIMALs, dates with every fractional digit, ENUM/SET labels;
//! plain `HEX()` of a DECIMAL would be the value rounded to an integer), NULL apart from any
//! value, through the `mariadb` client's text output. A FLOAT is rendered through its exact
//! widening to DOUBLE, whose text the server prints shortest round-trip (measured: FLOAT
//! 1.0000001 and 1.0000002 both print `1`, as DOUBLE `1.0000001192092896` and
//! `1.000000238418579`; DOUBLE prints `1.0000000000000002`, `5e-324`), so two values
//! with other bits never look equal. UUID/INET columns give their 16/4 stored bytes,
//! spatial columns their SRID + WKB bytes, generated and INVISIBLE columns are compared
//! like any other. Rows are keyed by the hex of the
//! key columns the test names (not the pipeline's key choice), so a key whose bytes
//! changed but whose collation key did not (a case-only change under `_ci`) shows as one
//! missing and one extra row. Nothing here decodes a value, uses the sealed schema,
//! the pages, the sort keys or `backfill verify`.
use harness::Server;
use std::collections::BTreeMap;
use std::fmt;

/// What the comparison found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Rows of the source.
    pub rows: usize,
    /// Keys in the source, not in the target.
    pub missing: usize,
    /// Keys in the target, not in the source.
    pub extra: usize,
    /// Keys in both whose columns differ.
    pub differing: usize,
    /// Column lists (name, COLUMN_TYPE, nullability, collation, default, EXTRA, generation
    /// expression) or the indexes (name, uniqueness, columns and prefixes) differ between
    /// the two sides.
    pub definition_differs: bool,
    /// A few of the keys that differ, as (what, key hex, source row, target row).
    pub examples: Vec<String>,
}

impl Diff {
    /// 0 missing, 0 extra, 0 differing and the same definition.
    pub fn is_clean(&self) -> bool {
        self.missing == 0 && self.extra == 0 && self.differing == 0 && !self.definition_differs
    }
}

impl fmt::Display for Diff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} source rows: {} missing, {} extra, {} differing{}",
            self.rows,
            self.missing,
            self.extra,
            self.differing,
            if self.definition_differs {
                ", definitions differ"
            } else {
                ""
            }
        )?;
        for e in &self.examples {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

/// Compares `sdb.table` on `source` with `tdb.table` on `target`, rows keyed by `key`.
pub fn compare(
    source: &Server,
    sdb: &str,
    target: &Server,
    tdb: &str,
    table: &str,
    key: &[&str],
) -> Diff {
    compare_tables(source, (sdb, table), target, (tdb, table), key)
}

/// Compares `sdb.stable` on `source` with `tdb.ttable` on `target` (a target of another
/// name), rows keyed by `key`.
pub fn compare_tables(
    source: &Server,
    (sdb, stable): (&str, &str),
    target: &Server,
    (tdb, ttable): (&str, &str),
    key: &[&str],
) -> Diff {
    let (sdef, tdef) = (columns(source, sdb, stable), columns(target, tdb, ttable));
    let sidx = indexes(source, sdb, stable, key, true);
    let tidx = indexes(target, tdb, ttable, key, false);
    if sidx != tidx {
        // Every row may be equal: a missing index is a definition that differs all the same.
        return Diff {
            definition_differs: true,
            examples: vec![format!("indexes: source {sidx:?} target {tidx:?}")],
            ..Diff::default()
        };
    }
    if sdef != tdef {
        // Rows are read by the source's column names, which the target may lack (a DDL
        // not applied yet): the definitions differ, that is the finding.
        return Diff {
            definition_differs: true,
            examples: vec![format!("definition: source {sdef:?} target {tdef:?}")],
            ..Diff::default()
        };
    }
    let names: Vec<(String, String)> = sdef.iter().map(|c| (c.0.clone(), c.1.clone())).collect();
    let a = rows(source, sdb, stable, key, &names);
    let b = rows(target, tdb, ttable, key, &names);
    let mut d = Diff {
        rows: a.len(),
        definition_differs: sdef != tdef,
        ..Diff::default()
    };
    let note = |d: &mut Diff, what: &str, k: &str| {
        if d.examples.len() < 10 {
            d.examples.push(format!(
                "{what} key {k}: source {:?} target {:?}",
                a.get(k),
                b.get(k)
            ));
        }
    };
    for (k, row) in &a {
        match b.get(k) {
            None => {
                d.missing += 1;
                note(&mut d, "missing", k);
            }
            Some(r) if r != row => {
                d.differing += 1;
                note(&mut d, "differing", k);
            }
            Some(_) => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        d.extra += 1;
        note(&mut d, "extra", k);
    }
    d
}

/// One column as [`columns`] reads it.
type ColumnDef = (String, String, String, String, String);

/// (name, COLUMN_TYPE, IS_NULLABLE, collation, the rest) of each column, in ordinal order;
/// the rest is COLUMN_DEFAULT (`-` for none), EXTRA (auto_increment, on update, INVISIBLE,
/// generated) and GENERATION_EXPRESSION, as the server prints them.
fn columns(server: &Server, db: &str, table: &str) -> Vec<ColumnDef> {
    let out = server.sql(&format!(
        "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, IFNULL(COLLATION_NAME, '-'), \
         CONCAT('default ', IFNULL(COLUMN_DEFAULT, '-'), ' extra ', EXTRA, ' as ', \
         IFNULL(GENERATION_EXPRESSION, '-')) \
         FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {} \
         ORDER BY ORDINAL_POSITION",
        lit(db),
        lit(table)
    ));
    out.lines()
        .map(|l| {
            let v: Vec<&str> = l.split('\t').collect();
            (
                v[0].into(),
                v[1].into(),
                v[2].into(),
                v[3].into(),
                v[4].into(),
            )
        })
        .collect()
}

/// `name [unique] (columns with prefix lengths in index order)` of each index, by name.
/// The target keeps the table's key unique and has every other index as a non-unique one
/// by design (DESIGN §9, §17, `install --create-target`: replay upserts by key only, and a
/// second unique key could reject a row the source holds): so on the source (`source`
/// true) a unique index is shown unique only when it is PRIMARY or exactly the `key`
/// columns the test names; on the target as it is.
fn indexes(server: &Server, db: &str, table: &str, key: &[&str], source: bool) -> Vec<String> {
    let out = server.sql(&format!(
        "SELECT INDEX_NAME, MIN(NON_UNIQUE), \
         GROUP_CONCAT(CONCAT(COLUMN_NAME, IFNULL(CONCAT('(', SUB_PART, ')'), '')) \
         ORDER BY SEQ_IN_INDEX SEPARATOR ', ') FROM information_schema.STATISTICS \
         WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {} \
         GROUP BY INDEX_NAME ORDER BY INDEX_NAME",
        lit(db),
        lit(table)
    ));
    let key = key.join(", ");
    out.lines()
        .map(|l| {
            let v: Vec<&str> = l.split('\t').collect();
            let (name, unique, cols) = (v[0], v[1] == "0", v[2]);
            let shown = unique && (!source || name == "PRIMARY" || cols == key);
            format!("{name}{} ({cols})", if shown { " unique" } else { "" })
        })
        .collect()
}

/// `s` as an SQL string literal (quotes doubled, backslashes escaped): any table name.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// `s` as a quoted identifier (backquotes doubled): any table or column name.
pub fn ident(s: &str) -> String {
    format!("`{}`", s.replace('`', "``"))
}

/// One column's bytes as hex, rendered by the server; `N` for NULL (hex never has it).
pub fn hex_expr(c: &str) -> String {
    format!("IFNULL(HEX(CAST({} AS BINARY)), 'N')", ident(c))
}

/// [`hex_expr`] of a column of `column_type`: a FLOAT through its exact DOUBLE.
pub fn value_expr(c: &str, column_type: &str) -> String {
    if column_type.starts_with("float") {
        return format!(
            "IFNULL(HEX(CAST(CAST({} AS DOUBLE) AS BINARY)), 'N')",
            ident(c)
        );
    }
    hex_expr(c)
}

/// key hex -> row hex, every row of `db.table`.
fn rows(
    server: &Server,
    db: &str,
    table: &str,
    key: &[&str],
    columns: &[(String, String)],
) -> BTreeMap<String, String> {
    let k: Vec<String> = key.iter().map(|c| hex_expr(c)).collect();
    let r: Vec<String> = columns.iter().map(|(c, t)| value_expr(c, t)).collect();
    let out = server.sql_in(
        db,
        &format!(
            "SET time_zone = '+00:00'; SELECT CONCAT_WS('.', {}), CONCAT_WS('.', {}) FROM {}",
            k.join(", "),
            r.join(", "),
            ident(table)
        ),
    );
    let mut map = BTreeMap::new();
    for l in out.lines().filter(|l| !l.is_empty()) {
        let (k, v) = l.split_once('\t').expect("key and row");
        assert!(
            map.insert(k.to_string(), v.to_string()).is_none(),
            "two rows of {db}.{table} with key bytes {k}"
        );
    }
    map
}
