//! Which QUERY events matter: the statement class (transaction control, XA, DDL, DML),
//! the XA xid a statement names, and whether a statement names a captured table. A
//! statement that might name a captured table is treated as naming it: a false positive
//! pauses a table, a false negative would lose a change.

use super::{ddl_targets, xid_text, Target};

/// What a QUERY event means for grouping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryKind {
    Begin,
    Commit,
    Rollback,
    /// SAVEPOINT / ROLLBACK TO: inside a transaction, no effect on rows events.
    Savepoint,
    /// `XA START xid`: opens an XA transaction (its group is held if it is prepared).
    XaStart,
    /// `XA COMMIT xid`: ends a prepared transaction (its own group), or, with ONE PHASE
    /// (MySQL), the XA transaction it closes.
    XaCommit,
    /// `XA ROLLBACK xid` of a prepared transaction (its own group).
    XaRollback,
    /// XA END (and any other XA statement) inside an XA transaction.
    XaInner,
    /// DML logged as a statement (STATEMENT or MIXED format).
    Dml,
    /// `CREATE ... IF NOT EXISTS`: cannot change an existing table (install logs one for
    /// the control table every time).
    CreateIfNotExists,
    /// Anything else: DDL, TRUNCATE, RENAME, GRANT...
    Ddl,
}

fn first_words(sql: &str, n: usize) -> Vec<String> {
    let mut s = sql.trim_start();
    // Skip leading comments.
    loop {
        if let Some(rest) = s.strip_prefix("/*") {
            match rest.find("*/") {
                Some(i) => s = rest[i + 2..].trim_start(),
                None => return Vec::new(),
            }
        } else if s.starts_with("--") || s.starts_with('#') {
            match s.find('\n') {
                Some(i) => s = s[i + 1..].trim_start(),
                None => return Vec::new(),
            }
        } else {
            break;
        }
    }
    s.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// Classifies a QUERY event's text.
pub fn classify_query(sql: &str) -> QueryKind {
    let w = first_words(sql, 2);
    let w0 = w.first().map(String::as_str).unwrap_or("");
    let w1 = w.get(1).map(String::as_str).unwrap_or("");
    match (w0, w1) {
        ("BEGIN", _) | ("START", "TRANSACTION") => QueryKind::Begin,
        ("COMMIT", _) => QueryKind::Commit,
        ("ROLLBACK", "TO") | ("SAVEPOINT", _) | ("RELEASE", _) => QueryKind::Savepoint,
        ("ROLLBACK", _) => QueryKind::Rollback,
        ("XA", "START") | ("XA", "BEGIN") => QueryKind::XaStart,
        ("XA", "COMMIT") => QueryKind::XaCommit,
        ("XA", "ROLLBACK") => QueryKind::XaRollback,
        ("XA", _) => QueryKind::XaInner,
        ("INSERT", _) | ("UPDATE", _) | ("DELETE", _) | ("REPLACE", _) | ("LOAD", _) => {
            QueryKind::Dml
        }
        ("CREATE", _) if is_create_if_not_exists(sql) => QueryKind::CreateIfNotExists,
        _ => QueryKind::Ddl,
    }
}

/// The xid of an `XA START|COMMIT|ROLLBACK xid [ONE PHASE]` statement as the server logs
/// it (`X'7831',X'',1`), without blanks, so that the XA START of a prepared group and
/// the later XA COMMIT/ROLLBACK give the same key. None when the text has no xid.
pub fn xa_xid(sql: &str) -> Option<String> {
    let s = sql.trim_start();
    let rest = s.get(2..)?.trim_start();
    let verb_end = rest.find(|c: char| c.is_whitespace())?;
    let mut xid = rest[verb_end..].trim();
    let upper = xid.to_ascii_uppercase();
    if upper.ends_with("ONE PHASE") {
        xid = xid[..xid.len() - "ONE PHASE".len()].trim_end();
    }
    let key: String = xid
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| {
            if c.is_ascii_hexdigit() {
                c.to_ascii_lowercase()
            } else {
                c
            }
        })
        .collect();
    (!key.is_empty()).then_some(key)
}

/// Parses an XA_PREPARE event body (MariaDB and MySQL): one_phase u8, formatID i32 LE,
/// gtrid length u32 LE, bqual length u32 LE, the bytes. Returns (one_phase, xid as the
/// server writes it). MySQL logs `XA COMMIT xid ONE PHASE` as an XA group closed by this
/// event with one_phase set; MariaDB logs it as an ordinary transaction.
pub fn parse_xa_prepare(data: &[u8]) -> Option<(bool, String)> {
    let one_phase = *data.first()? != 0;
    let format_id = i32::from_le_bytes(data.get(1..5)?.try_into().ok()?);
    let g = u32::from_le_bytes(data.get(5..9)?.try_into().ok()?) as usize;
    let b = u32::from_le_bytes(data.get(9..13)?.try_into().ok()?) as usize;
    if g > 64 || b > 64 {
        return None;
    }
    let bytes = data.get(13..13 + g + b)?;
    Some((one_phase, xid_text(format_id, &bytes[..g], &bytes[g..])))
}

/// True for `XA COMMIT xid ONE PHASE` (MySQL logs a one-phase XA transaction so).
pub fn xa_one_phase(sql: &str) -> bool {
    let w = first_words(sql, 16);
    w.len() >= 2 && w[w.len() - 2] == "ONE" && w[w.len() - 1] == "PHASE"
}

fn is_create_if_not_exists(sql: &str) -> bool {
    let w = first_words(sql, 8);
    // CREATE [TEMPORARY] TABLE|DATABASE|SCHEMA IF NOT EXISTS, without OR REPLACE / SELECT.
    let head = w
        .iter()
        .skip(1)
        .take(5)
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    (head.starts_with("TABLE IF NOT EXISTS")
        || head.starts_with("TEMPORARY TABLE IF NOT EXISTS")
        || head.starts_with("DATABASE IF NOT EXISTS")
        || head.starts_with("SCHEMA IF NOT EXISTS"))
        && !identifiers(sql)
            .iter()
            .any(|i| i.eq_ignore_ascii_case("select"))
}

/// Identifier tokens of a statement: backquoted names unquoted, bare words as written,
/// string literals skipped.
pub fn identifiers(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '`' => {
                let mut name = String::new();
                while let Some(d) = chars.next() {
                    if d == '`' {
                        if chars.peek() == Some(&'`') {
                            chars.next();
                            name.push('`');
                        } else {
                            break;
                        }
                    } else {
                        name.push(d);
                    }
                }
                out.push(name);
            }
            '\'' | '"' => {
                let q = c;
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == q {
                        if chars.peek() == Some(&q) {
                            chars.next();
                        } else {
                            break;
                        }
                    }
                }
            }
            c if c.is_alphanumeric() || c == '_' || c == '$' => {
                let mut name = String::from(c);
                while let Some(&d) = chars.peek() {
                    if d.is_alphanumeric() || d == '_' || d == '$' {
                        name.push(d);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(name);
            }
            _ => {}
        }
    }
    out
}

/// True when `sql` (run with default schema `default_schema`) may name `schema`.`table`.
/// Conservative: a false positive pauses a table (safe), a false negative would not be.
pub fn names_table(sql: &str, default_schema: &str, schema: &str, table: &str) -> bool {
    let ids = identifiers(sql);
    let has = |n: &str| ids.iter().any(|i| i.eq_ignore_ascii_case(n));
    has(table) && (default_schema.eq_ignore_ascii_case(schema) || has(schema))
}

/// True when the DDL statement `sql` may change `schema`.`table`: its target objects are
/// parsed for the common statement shapes (ALTER/CREATE/DROP TABLE, INDEX, VIEW, TRIGGER,
/// TRUNCATE, DROP DATABASE...), so `CREATE TABLE x LIKE t` or a view selecting from `t`
/// does not pause `t`. A shape it does not know falls back to [`names_table`] (any
/// mention), erring towards pausing. Names compare without case, like `names_table`.
pub fn ddl_changes_table(sql: &str, default_schema: &str, schema: &str, table: &str) -> bool {
    match ddl_targets(sql, default_schema) {
        Some(targets) => targets.iter().any(|t| match t {
            Target::Table(s, n) => s.eq_ignore_ascii_case(schema) && n.eq_ignore_ascii_case(table),
            Target::Schema(s) => s.eq_ignore_ascii_case(schema),
        }),
        None => names_table(sql, default_schema, schema, table),
    }
}
