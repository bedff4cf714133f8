//! Which tables a bulk `backfill install` means (DESIGN §17): `--source-table` patterns
//! (`shop.*`, `shop.order_*`, repeated), a file of names (`--source-tables-from`), and the
//! `--target-table` mapping (`shop_copy.*`: the same table name in another database).
//!
//! Pure but for [`expand`], which lists a database's base tables on the source. The rules:
//! * A pattern globs the table name only (`*` any run of characters, `?` one character);
//!   the database is always literal, and a backtick-quoted table name is literal too.
//! * A literal `db.table` is passed through unlisted, so the single-table checks name it
//!   when it is missing or is a view; a pattern matches base tables only.
//! * A pattern that matches nothing is an error naming it, never an empty success.
//! * A table named twice (two patterns, or a pattern and a line of the file) is one job.
//! * A target pattern holds one `*`, replaced by the source table's name: `copy.*` keeps the
//!   name, `copy.old_*` prefixes it. A literal target names one table, so it needs exactly
//!   one source table. Two sources mapped to one target are refused before anything is
//!   installed (one target belongs to one job).
use super::{ident_prefix, TableName};
use kernel::error::{from_mysql, DefiniteCode};
use kernel::schema::quote_ident;
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// One `--source-table` value or line of `--source-tables-from`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TablePattern {
    pub db: String,
    /// The table name, or a glob of it when `glob` is set.
    pub table: String,
    pub glob: bool,
}

impl TablePattern {
    /// True when `name` (a table name) matches.
    pub fn matches(&self, name: &str) -> bool {
        if self.glob {
            glob_match(&self.table, name)
        } else {
            self.table == name
        }
    }

    /// The one table a literal pattern names.
    pub fn literal(&self) -> Option<TableName> {
        (!self.glob).then(|| TableName::new(&self.db, &self.table))
    }
}

impl FromStr for TablePattern {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<TablePattern, String> {
        let bad = || {
            format!(
                "`{s}` is not db.table or db.pattern (`*` and `?` glob the table name, e.g. \
                 shop.* or shop.order_*)"
            )
        };
        let s = s.trim();
        let (db, rest) = ident_prefix(s).ok_or_else(bad)?;
        let rest = rest.strip_prefix('.').ok_or_else(bad)?;
        if db.is_empty() || rest.is_empty() {
            return Err(bad());
        }
        if !s.starts_with('`') && (db.contains('*') || db.contains('?')) {
            return Err(format!(
                "`{s}`: the database part cannot be a pattern; give one --source-table per \
                 database (e.g. shop.* and shop2.*)"
            ));
        }
        if rest.starts_with('`') {
            let (table, tail) = ident_prefix(rest).ok_or_else(bad)?;
            if !tail.is_empty() || table.is_empty() {
                return Err(bad());
            }
            return Ok(TablePattern {
                db,
                table,
                glob: false,
            });
        }
        if rest.contains('.') || rest.contains('`') {
            return Err(bad());
        }
        Ok(TablePattern {
            db,
            glob: rest.contains('*') || rest.contains('?'),
            table: rest.to_string(),
        })
    }
}

impl fmt::Display for TablePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.glob {
            write!(f, "{}.{}", quote_ident(&self.db), self.table)
        } else {
            write!(f, "{}", TableName::new(&self.db, &self.table))
        }
    }
}

/// `*` matches any run of characters (also none), `?` exactly one; everything else itself
/// (case-sensitive, as table names are on Linux servers by default).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The patterns of a `--source-tables-from` file: one per line; blank lines and lines
/// whose first non-blank character is `#` are skipped. `file` names the file in errors.
pub fn parse_list(file: &str, text: &str) -> std::result::Result<Vec<TablePattern>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let p = line
            .parse::<TablePattern>()
            .map_err(|e| format!("{file} line {}: {e}", n + 1))?;
        out.push(p);
    }
    if out.is_empty() {
        return Err(format!(
            "{file} names no table: give one db.table or db.pattern a line (# starts a comment)"
        ));
    }
    Ok(out)
}

/// `--target-table`: one table, or a database and a name with one `*` for the source name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TargetMap {
    One(TableName),
    Pattern {
        db: String,
        prefix: String,
        suffix: String,
    },
}

impl FromStr for TargetMap {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<TargetMap, String> {
        if let Ok(t) = s.parse::<TableName>() {
            if s.trim_end().ends_with('`') || !t.table.contains('*') && !t.table.contains('?') {
                return Ok(TargetMap::One(t));
            }
            let stars = t.table.matches('*').count();
            if stars != 1 || t.table.contains('?') {
                return Err(format!(
                    "`{s}`: a target pattern holds exactly one `*` (the source table's name) \
                     and no `?`, e.g. shop_copy.* or shop_copy.old_*"
                ));
            }
            let (prefix, suffix) = t.table.split_once('*').unwrap_or_default();
            return Ok(TargetMap::Pattern {
                db: t.db,
                prefix: prefix.to_string(),
                suffix: suffix.to_string(),
            });
        }
        Err(format!(
            "`{s}` is not a target table: give db.table for one table or db.* (the same \
             names in database db) for several"
        ))
    }
}

impl TargetMap {
    /// The target of each source, in order. Refuses a literal target for several sources
    /// and two sources mapped onto one target.
    pub fn map(&self, sources: &[TableName]) -> Result<Vec<(TableName, TableName)>> {
        let usage = |m: String| Error::definite(DefiniteCode::Usage, m);
        let pairs: Vec<(TableName, TableName)> = match self {
            TargetMap::One(t) if sources.len() == 1 => vec![(sources[0].clone(), t.clone())],
            TargetMap::One(t) => {
                return Err(usage(format!(
                    "--target-table {t} names one table but {} source tables were selected; \
                     give a pattern such as {}.* (each source table's name in that database)",
                    sources.len(),
                    quote_ident(&t.db)
                )))
            }
            TargetMap::Pattern { db, prefix, suffix } => sources
                .iter()
                .map(|s| {
                    let t = TableName::new(db, format!("{prefix}{}{suffix}", s.table));
                    (s.clone(), t)
                })
                .collect(),
        };
        let mut seen: BTreeMap<(String, String), &TableName> = BTreeMap::new();
        for (s, t) in &pairs {
            if let Some(first) = seen.insert((t.db.clone(), t.table.clone()), s) {
                return Err(usage(format!(
                    "source tables {first} and {s} would both be copied into target {t}; a \
                     target belongs to one job: install them with separate --target-table \
                     patterns"
                )));
            }
        }
        Ok(pairs)
    }
}

/// The tables `patterns` name on the source, in the order given, each once. A pattern
/// lists the base tables of its database; one that matches nothing is a usage error
/// naming it and the server (`server`: a label without the password).
pub async fn expand(
    conn: &mut mysql_async::Conn,
    server: &str,
    patterns: &[TablePattern],
) -> Result<Vec<TableName>> {
    let mut out: Vec<TableName> = Vec::new();
    let mut listed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in patterns {
        let found: Vec<TableName> = match p.literal() {
            Some(t) => vec![t],
            None => {
                if !listed.contains_key(&p.db) {
                    let names = base_tables(conn, &p.db).await?;
                    listed.insert(p.db.clone(), names);
                }
                listed[&p.db]
                    .iter()
                    .filter(|n| p.matches(n))
                    .map(|n| TableName::new(&p.db, n))
                    .collect()
            }
        };
        if found.is_empty() {
            return Err(Error::definite(
                DefiniteCode::Usage,
                format!(
                    "--source-table {p} matches no base table of database {} on source \
                     {server}; check the pattern (`*` and `?` glob the table name, \
                     case-sensitive) and the database",
                    quote_ident(&p.db)
                ),
            ));
        }
        for t in found {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

async fn base_tables(conn: &mut mysql_async::Conn, db: &str) -> Result<Vec<String>> {
    conn.exec(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? \
         AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
        (db,),
    )
    .await
    .map_err(|e| from_mysql(&format!("listing the tables of {}", quote_ident(db)), &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pat(s: &str) -> TablePattern {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn globs_match_table_names() {
        assert!(glob_match("*", "orders"));
        assert!(glob_match("*", ""));
        assert!(glob_match("order_*", "order_items"));
        assert!(glob_match("order_*", "order_"));
        assert!(!glob_match("order_*", "orders"));
        assert!(glob_match("*_log", "audit_log"));
        assert!(!glob_match("*_log", "audit_logs"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("t?", "t1"));
        assert!(!glob_match("t?", "t12"));
        assert!(!glob_match("Orders", "orders"));
        assert!(glob_match("é*", "éclair"));
    }

    #[test]
    fn patterns_parse() {
        assert_eq!(
            pat("shop.*"),
            TablePattern {
                db: "shop".into(),
                table: "*".into(),
                glob: true
            }
        );
        assert!(pat("shop.order_*").matches("order_items"));
        assert!(!pat("shop.order_*").matches("orders"));
        let lit = pat("shop.orders");
        assert_eq!(lit.literal(), Some(TableName::new("shop", "orders")));
        assert!(lit.matches("orders") && !lit.matches("orders2"));
        // Quoted names are literal, even with a `*` in them.
        let q = pat("`my db`.`a*b`");
        assert_eq!(q.literal(), Some(TableName::new("my db", "a*b")));
        assert_eq!(pat("`my.db`.t_*").db, "my.db");
        for bad in ["shop", "*.t", "sh*p.t", ".t", "shop.", "a.b.c", "shop.`t`x"] {
            assert!(bad.parse::<TablePattern>().is_err(), "{bad}");
        }
        let e = "sh*p.t".parse::<TablePattern>().unwrap_err();
        assert!(e.contains("database part cannot be a pattern"), "{e}");
    }

    #[test]
    fn lists_parse_with_comments_and_name_the_line() {
        let text = "# the shop\nshop.orders\n\n   # more\n  shop.item_*  \n";
        let l = parse_list("tables.txt", text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l, vec![pat("shop.orders"), pat("shop.item_*")]);
        let e = parse_list("tables.txt", "shop.a\nnodot\n").unwrap_err();
        assert!(e.starts_with("tables.txt line 2: `nodot`"), "{e}");
        let e = parse_list("empty.txt", "# nothing\n\n").unwrap_err();
        assert!(e.contains("empty.txt names no table"), "{e}");
    }

    #[test]
    fn targets_map_by_pattern() {
        let src = vec![TableName::new("shop", "a"), TableName::new("shop", "b")];
        let m: TargetMap = "shop_copy.*".parse().unwrap_or_else(|e| panic!("{e}"));
        let pairs = m.map(&src).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pairs[0].1, TableName::new("shop_copy", "a"));
        assert_eq!(pairs[1].1, TableName::new("shop_copy", "b"));
        let m: TargetMap = "copy.old_*_v2".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            m.map(&src).unwrap_or_else(|e| panic!("{e}"))[1].1,
            TableName::new("copy", "old_b_v2")
        );
        let one: TargetMap = "copy.t".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(one, TargetMap::One(TableName::new("copy", "t")));
        assert_eq!(
            one.map(&src[..1]).unwrap_or_else(|e| panic!("{e}"))[0],
            (src[0].clone(), TableName::new("copy", "t"))
        );
        let e = one.map(&src).unwrap_err().to_string();
        assert!(e.contains("names one table but 2 source tables"), "{e}");
        // A quoted `*` is a literal name.
        let q: TargetMap = "copy.`a*`".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(q, TargetMap::One(TableName::new("copy", "a*")));
        assert!("copy.**".parse::<TargetMap>().is_err());
        assert!("copy.a?".parse::<TargetMap>().is_err());
        assert!("nodot".parse::<TargetMap>().is_err());
    }

    #[test]
    fn two_sources_onto_one_target_are_refused() {
        let src = vec![TableName::new("s1", "t"), TableName::new("s2", "t")];
        let m: TargetMap = "copy.*".parse().unwrap_or_else(|e| panic!("{e}"));
        let e = m.map(&src).unwrap_err().to_string();
        assert!(
            e.contains("`s1`.`t` and `s2`.`t`") && e.contains("`copy`.`t`"),
            "{e}"
        );
    }
}
