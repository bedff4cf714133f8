//! The statement half of the decision: ALTER TABLE split into its clauses, each matched
//! against the closed list of compatible clauses; CREATE/DROP INDEX, TRUNCATE, RENAME and
//! DROP TABLE by their verb. Anything not on the list is refused with its clause.
use super::{Alteration, Classified, Incompatible};
use crate::capture::events::{tokens, Tok};
use crate::schema::SealedSchema;
use std::ops::Range;

/// Classifies `sql`, a DDL statement the capture found to change `table` (its sealed
/// definition in force before the statement).
pub fn classify(sql: &str, table: &SealedSchema) -> Classified {
    let t = tokens(sql);
    if !sql.is_ascii() {
        return Classified::Incompatible(no(
            &t,
            "non-ASCII text in the statement: its bytes are read in the source session's \
             charset, which the target's session cannot be sure to share",
        ));
    }
    let r = match upper(t.first()).as_str() {
        "ALTER" => alter(&t, table),
        "CREATE" => create(&t),
        "DROP" => drop_stmt(&t, table),
        "TRUNCATE" => Err(no(
            &t,
            "TRUNCATE deletes every row without a row event: the target cannot take it in \
             binlog order",
        )),
        "RENAME" => Err(no(
            &t,
            "RENAME TABLE: the table's later rows are logged under another name",
        )),
        _ => Err(no(
            &t,
            "a statement this version does not recognise as compatible",
        )),
    };
    match r {
        Ok(a) => Classified::Compatible(a),
        Err(i) => Classified::Incompatible(i),
    }
}

pub(super) type Clause<'a> = &'a [Tok];
type Outcome = Result<Alteration, Incompatible>;

fn upper(t: Option<&Tok>) -> String {
    match t {
        Some(Tok::Word(w)) => w.to_ascii_uppercase(),
        _ => String::new(),
    }
}

pub(super) fn word(t: Clause<'_>, i: usize) -> String {
    upper(t.get(i))
}

fn name(t: Option<&Tok>) -> Option<String> {
    match t? {
        Tok::Word(w) | Tok::Quoted(w) => Some(w.clone()),
        Tok::Punct(_) => None,
    }
}

/// The clause as words (string literals shown as `'…'`), for messages.
fn render(t: Clause<'_>) -> String {
    let mut s = String::new();
    for (i, tok) in t.iter().enumerate() {
        let piece = match tok {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(w) => format!("`{w}`"),
            Tok::Punct('\'') => "'…'".into(),
            Tok::Punct(c) => c.to_string(),
        };
        let glue = matches!(tok, Tok::Punct('(' | ')' | ',' | '.' | '='))
            || matches!(t.get(i.wrapping_sub(1)), Some(Tok::Punct('(' | '.' | '=')));
        if i > 0 && !glue {
            s.push(' ');
        }
        s.push_str(&piece);
    }
    s.chars().take(120).collect()
}

fn no(t: Clause<'_>, why: &str) -> Incompatible {
    Incompatible {
        clause: render(t),
        why: why.to_string(),
    }
}

/// Skips `IF EXISTS` / `IF NOT EXISTS` at `i`.
pub(super) fn skip_if(t: Clause<'_>, mut i: usize) -> usize {
    if word(t, i) == "IF" {
        i += 1;
        if word(t, i) == "NOT" {
            i += 1;
        }
        if word(t, i) == "EXISTS" {
            i += 1;
        }
    }
    i
}

/// The token ranges of `t` between commas outside parentheses, from token `from`.
fn clauses(t: Clause<'_>, from: usize) -> Vec<Range<usize>> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, from);
    for (i, tok) in t.iter().enumerate().skip(from) {
        match tok {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') => depth -= 1,
            Tok::Punct(',') if depth == 0 => {
                out.push(start..i);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < t.len() {
        out.push(start..t.len());
    }
    out
}

/// The token ranges of the clauses of an ALTER TABLE statement (none for a bare
/// `ALTER TABLE t`).
pub(super) fn alter_clauses(t: Clause<'_>) -> Result<Vec<Range<usize>>, Incompatible> {
    let mut i = 1;
    while matches!(word(t, i).as_str(), "ONLINE" | "IGNORE") {
        i += 1;
    }
    if word(t, i) != "TABLE" {
        return Err(no(t, "an ALTER of another kind of object"));
    }
    i = skip_if(t, i + 1) + 1;
    if t.get(i) == Some(&Tok::Punct('.')) {
        i += 2;
    }
    if word(t, i) == "NOWAIT" {
        i += 1;
    } else if word(t, i) == "WAIT" {
        i += 2;
    }
    Ok(clauses(t, i.min(t.len())))
}

fn alter(t: Clause<'_>, table: &SealedSchema) -> Result<Vec<Alteration>, Incompatible> {
    let ranges = alter_clauses(t)?;
    if ranges.is_empty() {
        return Ok(vec![Alteration::NoDataChange {
            clause: "ALTER TABLE".into(),
        }]);
    }
    ranges.into_iter().map(|r| clause(&t[r], table)).collect()
}

pub(super) fn clause(c: Clause<'_>, table: &SealedSchema) -> Outcome {
    if c.iter().any(|x| {
        matches!(x, Tok::Word(w) if w.eq_ignore_ascii_case("PARTITION") || w.eq_ignore_ascii_case("PARTITIONING"))
    }) {
        return Err(no(
            c,
            "a partition change (TRUNCATE/DROP PARTITION remove rows without row events)",
        ));
    }
    match word(c, 0).as_str() {
        "ADD" => add(c, table),
        "DROP" => drop_clause(c, table),
        "MODIFY" => modify(c),
        "CHANGE" => change(c),
        "RENAME" => rename(c, table),
        "ALTER" => alter_column(c),
        _ => options(c),
    }
}

const KEY_WORDS: &[&str] = &["INDEX", "KEY", "FULLTEXT", "SPATIAL"];

fn add(c: Clause<'_>, table: &SealedSchema) -> Outcome {
    let w = word(c, 1);
    match w.as_str() {
        "PRIMARY" | "UNIQUE" | "CONSTRAINT" | "FOREIGN" | "CHECK" => Err(no(
            c,
            "a new key, unique key or constraint: the target could refuse rows the source \
             took, or the table's key changes",
        )),
        "PERIOD" | "SYSTEM" => Err(no(c, "system versioning")),
        k if KEY_WORDS.contains(&k) => {
            let mut i = 2;
            while matches!(word(c, i).as_str(), "INDEX" | "KEY") {
                i += 1;
            }
            i = skip_if(c, i);
            let n = match c.get(i) {
                Some(Tok::Punct('(')) => None,
                _ if word(c, i) == "USING" => None,
                t => name(t),
            };
            Ok(Alteration::AddIndex { name: n })
        }
        _ if c.get(1) == Some(&Tok::Punct('('))
            || (w == "COLUMN" && c.get(2) == Some(&Tok::Punct('('))) =>
        {
            Err(no(
                c,
                "ADD COLUMN with a list of columns: add them one per clause",
            ))
        }
        _ => {
            let i = skip_if(c, if w == "COLUMN" { 2 } else { 1 });
            let Some(n) = name(c.get(i)) else {
                return Err(no(c, "an ADD clause this version does not recognise"));
            };
            if table
                .columns
                .iter()
                .any(|x| x.name.eq_ignore_ascii_case(&n))
            {
                return Err(no(c, "ADD COLUMN IF NOT EXISTS of a column the table has"));
            }
            added_definition(c, &c[i + 1..])?;
            Ok(Alteration::AddColumn { name: n })
        }
    }
}

/// The definition of an added column: existing rows get its default, so the default must
/// be a constant the target computes the same way.
fn added_definition(c: Clause<'_>, def: Clause<'_>) -> Result<(), Incompatible> {
    definition(c, def)?;
    let default = def
        .iter()
        .position(|x| matches!(x, Tok::Word(w) if w.eq_ignore_ascii_case("DEFAULT")));
    match default {
        Some(i) if !constant(&def[i + 1..]) => Err(no(
            c,
            "a non-constant DEFAULT: existing rows get values no row event carries, which \
             the target cannot reproduce",
        )),
        Some(i) if word(def, 0) == "TIMESTAMP" && word(def, i + 1) != "NULL" => Err(no(
            c,
            "a TIMESTAMP default is read in the session's time zone, which the target's \
             session cannot be sure to share: existing rows could get other instants",
        )),
        None if word(def, 0) == "TIMESTAMP" && !explicit_null(def) => Err(no(
            c,
            "a TIMESTAMP column without an explicit DEFAULT: the server may fill existing \
             rows with CURRENT_TIMESTAMP, which the target cannot reproduce",
        )),
        _ => Ok(()),
    }
}

fn explicit_null(def: Clause<'_>) -> bool {
    def.iter().enumerate().any(|(i, x)| {
        matches!(x, Tok::Word(w) if w.eq_ignore_ascii_case("NULL"))
            && word(def, i.wrapping_sub(1)) != "NOT"
    })
}

/// Attributes no compatible column definition has.
fn definition(c: Clause<'_>, def: Clause<'_>) -> Result<(), Incompatible> {
    for (i, x) in def.iter().enumerate() {
        let Tok::Word(w) = x else { continue };
        let why = match w.to_ascii_uppercase().as_str() {
            "AS" | "GENERATED" | "PERSISTENT" | "VIRTUAL" | "STORED" => {
                "a generated column: refresh the schema once the target has it"
            }
            "AUTO_INCREMENT" => {
                "AUTO_INCREMENT numbers existing rows with values no row event carries"
            }
            "PRIMARY" | "UNIQUE" | "REFERENCES" | "CHECK" => {
                "a key or constraint in the column definition"
            }
            "INVISIBLE" => "an INVISIBLE column",
            // `CHARACTER SET` of a MODIFY is checked by the definitions; words after a
            // DEFAULT literal are not attributes.
            _ => continue,
        };
        if word(def, i.wrapping_sub(1)) == "DEFAULT" {
            continue;
        }
        return Err(no(c, why));
    }
    Ok(())
}

/// A constant default: a literal, NULL, a number, a typed or introduced string.
fn constant(v: Clause<'_>) -> bool {
    let num = |t: Option<&Tok>| matches!(t, Some(Tok::Word(w)) if w.starts_with(|c: char| c.is_ascii_digit()));
    match v.first() {
        Some(Tok::Punct('\'')) => true,
        Some(Tok::Punct('-' | '+')) => num(v.get(1)),
        Some(Tok::Word(w)) => {
            let u = w.to_ascii_uppercase();
            num(v.first())
                || matches!(u.as_str(), "NULL" | "TRUE" | "FALSE")
                || ((u.starts_with('_')
                    || matches!(u.as_str(), "X" | "B" | "N" | "DATE" | "TIME" | "TIMESTAMP"))
                    && v.get(1) == Some(&Tok::Punct('\'')))
        }
        _ => false,
    }
}

fn key_column(table: &SealedSchema, n: &str) -> bool {
    table.key_columns().any(|k| k.name.eq_ignore_ascii_case(n))
}

fn is_key_index(table: &SealedSchema, n: &str) -> bool {
    n.eq_ignore_ascii_case(&table.key_name) || n.eq_ignore_ascii_case(crate::schema::PRIMARY)
}

fn drop_clause(c: Clause<'_>, table: &SealedSchema) -> Outcome {
    let w = word(c, 1);
    match w.as_str() {
        "PRIMARY" => Err(no(c, "the table's key is dropped")),
        "FOREIGN" => Ok(Alteration::NoDataChange { clause: render(c) }),
        "CONSTRAINT" | "CHECK" | "PERIOD" | "SYSTEM" => Err(no(
            c,
            "a constraint by name (it may be a unique key): this version does not tell",
        )),
        "INDEX" | "KEY" => {
            let Some(n) = name(c.get(skip_if(c, 2))) else {
                return Err(no(c, "a DROP INDEX this version does not recognise"));
            };
            if is_key_index(table, &n) {
                return Err(no(c, "the index is the table's key"));
            }
            Ok(Alteration::DropIndex { name: n })
        }
        _ => {
            let i = skip_if(c, if w == "COLUMN" { 2 } else { 1 });
            let Some(n) = name(c.get(i)) else {
                return Err(no(c, "a DROP clause this version does not recognise"));
            };
            if key_column(table, &n) {
                return Err(no(c, "a column of the table's key"));
            }
            Ok(Alteration::DropColumn { name: n })
        }
    }
}

fn modify(c: Clause<'_>) -> Outcome {
    let i = skip_if(c, if word(c, 1) == "COLUMN" { 2 } else { 1 });
    let Some(n) = name(c.get(i)) else {
        return Err(no(c, "a MODIFY this version does not recognise"));
    };
    definition(c, &c[i + 1..])?;
    Ok(Alteration::ModifyColumn { name: n })
}

fn change(c: Clause<'_>) -> Outcome {
    let i = skip_if(c, if word(c, 1) == "COLUMN" { 2 } else { 1 });
    let (Some(from), Some(to)) = (name(c.get(i)), name(c.get(i + 1))) else {
        return Err(no(c, "a CHANGE this version does not recognise"));
    };
    definition(c, &c[(i + 2).min(c.len())..])?;
    Ok(Alteration::ChangeColumn { from, to })
}

fn rename(c: Clause<'_>, table: &SealedSchema) -> Outcome {
    let w = word(c, 1);
    let pair = |i: usize| match (name(c.get(i)), word(c, i + 1).as_str(), name(c.get(i + 2))) {
        (Some(a), "TO", Some(b)) => Some((a, b)),
        _ => None,
    };
    match w.as_str() {
        "COLUMN" => match pair(2) {
            Some((from, to)) => Ok(Alteration::RenameColumn { from, to }),
            None => Err(no(c, "a RENAME COLUMN this version does not recognise")),
        },
        "INDEX" | "KEY" => match pair(2) {
            Some((from, _)) if is_key_index(table, &from) => {
                Err(no(c, "the index is the table's key"))
            }
            Some((from, to)) => Ok(Alteration::RenameIndex { from, to }),
            None => Err(no(c, "a RENAME INDEX this version does not recognise")),
        },
        _ => Err(no(
            c,
            "RENAME TABLE: the table's later rows are logged under another name",
        )),
    }
}

fn alter_column(c: Clause<'_>) -> Outcome {
    let i = if word(c, 1) == "COLUMN" { 2 } else { 1 };
    if word(c, 1) == "INDEX" || word(c, 1) == "KEY" {
        return Ok(Alteration::NoDataChange { clause: render(c) });
    }
    let i = skip_if(c, i);
    let Some(n) = name(c.get(i)) else {
        return Err(no(c, "an ALTER COLUMN this version does not recognise"));
    };
    match (word(c, i + 1).as_str(), word(c, i + 2).as_str()) {
        ("SET", "DEFAULT") | ("DROP", "DEFAULT") => Ok(Alteration::AlterDefault { name: n }),
        _ => Err(no(c, "an ALTER COLUMN this version does not recognise")),
    }
}

/// Table options and modifiers: allowed when they change no data and no fingerprinted part
/// of the definition. A word is an option name on the list, or the value right after an
/// option name or `=`, or a column name of ORDER BY.
fn options(c: Clause<'_>) -> Outcome {
    const OK: &[&str] = &[
        "COMMENT",
        "ENGINE",
        "ROW_FORMAT",
        "AUTO_INCREMENT",
        "KEY_BLOCK_SIZE",
        "STATS_PERSISTENT",
        "STATS_AUTO_RECALC",
        "STATS_SAMPLE_PAGES",
        "PACK_KEYS",
        "CHECKSUM",
        "TABLE_CHECKSUM",
        "DELAY_KEY_WRITE",
        "PAGE_CHECKSUM",
        "PAGE_COMPRESSED",
        "PAGE_COMPRESSION_LEVEL",
        "TRANSACTIONAL",
        "MIN_ROWS",
        "MAX_ROWS",
        "AVG_ROW_LENGTH",
        "FORCE",
        "ALGORITHM",
        "LOCK",
        "ENABLE",
        "DISABLE",
        "KEYS",
        "ORDER",
        "BY",
        "ASC",
        "DESC",
    ];
    const CHARSET: &[&str] = &["CHARACTER", "CHARSET", "COLLATE", "CONVERT"];
    let order_by = word(c, 0) == "ORDER";
    if (0..c.len()).any(|i| CHARSET.contains(&word(c, i).as_str())) {
        return Err(no(c, "a charset or collation change"));
    }
    for (i, x) in c.iter().enumerate() {
        let Tok::Word(w) = x else { continue };
        let u = w.to_ascii_uppercase();
        if u == "ENGINE" && !engine_is_innodb(c, i) {
            return Err(no(c, "an engine other than InnoDB (not transactional)"));
        }
        let value = i > 0 && (c[i - 1] == Tok::Punct('=') || OK.contains(&word(c, i - 1).as_str()))
            || u.starts_with(|d: char| d.is_ascii_digit());
        if !(OK.contains(&u.as_str()) || value || order_by) {
            return Err(no(
                c,
                "a clause this version does not recognise as compatible",
            ));
        }
    }
    Ok(Alteration::NoDataChange { clause: render(c) })
}

fn engine_is_innodb(c: Clause<'_>, i: usize) -> bool {
    let v = if c.get(i + 1) == Some(&Tok::Punct('=')) {
        i + 2
    } else {
        i + 1
    };
    word(c, v) == "INNODB"
}

fn create(t: Clause<'_>) -> Result<Vec<Alteration>, Incompatible> {
    let mut i = 1;
    if word(t, i) == "OR" {
        i += 2; // OR REPLACE
    }
    match word(t, i).as_str() {
        "INDEX" | "FULLTEXT" | "SPATIAL" => {
            let at = if word(t, i) == "INDEX" { i + 1 } else { i + 2 };
            Ok(vec![Alteration::AddIndex {
                name: name(t.get(skip_if(t, at))),
            }])
        }
        "UNIQUE" => Err(no(
            t,
            "a new unique key: the target could refuse rows the source took",
        )),
        "TRIGGER" | "DEFINER" => Ok(vec![Alteration::NoDataChange {
            clause: "CREATE TRIGGER (its row changes are logged as rows)".into(),
        }]),
        _ => Err(no(
            t,
            "the table is created again: its definition and rows are replaced",
        )),
    }
}

fn drop_stmt(t: Clause<'_>, table: &SealedSchema) -> Result<Vec<Alteration>, Incompatible> {
    match word(t, 1).as_str() {
        "INDEX" => {
            let i = skip_if(t, 2);
            match name(t.get(i)) {
                Some(n) if is_key_index(table, &n) => Err(no(t, "the index is the table's key")),
                Some(n) => Ok(vec![Alteration::DropIndex { name: n }]),
                None => Err(no(t, "a DROP INDEX this version does not recognise")),
            }
        }
        "TRIGGER" => Ok(vec![Alteration::NoDataChange {
            clause: "DROP TRIGGER".into(),
        }]),
        _ => Err(no(t, "the table is dropped")),
    }
}

/// Why `refresh-schema` cannot resume after `sql` whatever the target looks like: the
/// statement removed or replaced rows without row events (TRUNCATE, a dropped or
/// truncated partition, the table dropped, replaced or discarded) or moved the table to
/// another name, so no definition check can show the target holds the source's rows.
pub fn refresh_refusal(sql: &str) -> Option<&'static str> {
    let t = tokens(sql);
    let has = |a: &str, b: &str| (0..t.len()).any(|i| word(&t, i) == a && word(&t, i + 1) == b);
    let verb = word(&t, 0);
    if verb == "TRUNCATE" || has("TRUNCATE", "PARTITION") || has("DROP", "PARTITION") {
        return Some("it removed rows without row events (TRUNCATE or a dropped partition)");
    }
    if verb == "RENAME"
        || (verb == "ALTER"
            && (0..t.len()).any(|i| {
                word(&t, i) == "RENAME" && matches!(word(&t, i + 1).as_str(), "TO" | "AS")
            }))
    {
        return Some("the table moved to another name: its later rows are not this table's");
    }
    if matches!(verb.as_str(), "DROP" | "CREATE") && (0..t.len()).any(|i| word(&t, i) == "TABLE") {
        return Some("the table was dropped or replaced");
    }
    if (0..t.len()).any(|i| word(&t, i) == "DISCARD" || word(&t, i) == "EXCHANGE") {
        return Some("the table's tablespace or partition was swapped or discarded");
    }
    None
}
