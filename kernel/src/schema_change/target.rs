//! The statement the target runs for a compatible DDL (DESIGN §16): the source's own
//! clause text, on the target table, for the clauses that change its definition.
//!
//! Each clause is copied byte for byte from the source's statement (its literals,
//! charsets and defaults as the source server took them), so the target computes the
//! same definition; the caller checks that the target's definition afterwards has the
//! sealed version's fingerprint before anything is recorded. Index clauses get `IF [NOT]
//! EXISTS` (a target created by hand may lack a secondary index); RENAME INDEX and the
//! clauses that change no definition (COMMENT, ENGINE=InnoDB, FORCE, DROP FOREIGN KEY, a
//! trigger) are not run: they change no row and no fingerprinted part, and a rebuild of
//! a large target (FORCE) is not the replay's to start.
use super::parse::{alter_clauses, clause, word};
use super::{Alteration, Classified, Incompatible};
use crate::capture::events::{spanned, Tok};
use crate::schema::SealedSchema;

/// The target statement for `sql` (a DDL of `table`, which must classify compatible),
/// with `target` (already quoted, e.g. `` `db`.`t` ``) for the table; None when no clause
/// changes the target's definition.
pub fn target_statement(
    sql: &str,
    table: &SealedSchema,
    target: &str,
) -> Result<Option<String>, Incompatible> {
    let spans = spanned(sql);
    let toks: Vec<Tok> = spans.iter().map(|(t, _)| t.clone()).collect();
    match word(&toks, 0).as_str() {
        "ALTER" => alter(sql, &spans, &toks, table, target),
        "CREATE" | "DROP" => index_statement(sql, &spans, &toks, table, target),
        _ => match super::classify(sql, table) {
            Classified::Incompatible(i) => Err(i),
            Classified::Compatible(_) => Ok(None),
        },
    }
}

type Spans = [(Tok, std::ops::Range<usize>)];

fn alter(
    sql: &str,
    spans: &Spans,
    toks: &[Tok],
    table: &SealedSchema,
    target: &str,
) -> Result<Option<String>, Incompatible> {
    let mut parts = Vec::new();
    for r in alter_clauses(toks)? {
        let c = &toks[r.clone()];
        let text = &sql[spans[r.start].1.start..spans[r.end - 1].1.end];
        let part = match clause(c, table)? {
            Alteration::AddIndex { .. } => guarded(text, c, &spans[r.clone()], "IF NOT EXISTS"),
            Alteration::DropIndex { .. } => guarded(text, c, &spans[r.clone()], "IF EXISTS"),
            Alteration::RenameIndex { .. } | Alteration::NoDataChange { .. } => continue,
            _ => text.to_string(),
        };
        parts.push(part);
    }
    if parts.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!("ALTER TABLE {target} {}", parts.join(", "))))
}

/// `text` (an index clause) with `guard` after its INDEX/KEY/FULLTEXT/SPATIAL words,
/// unless it has one.
fn guarded(text: &str, c: &[Tok], spans: &Spans, guard: &str) -> String {
    let mut i = 1;
    while matches!(
        word(c, i).as_str(),
        "INDEX" | "KEY" | "FULLTEXT" | "SPATIAL"
    ) {
        i += 1;
    }
    if word(c, i) == "IF" || i == 1 {
        return text.to_string();
    }
    let base = spans[0].1.start;
    let at = spans[i - 1].1.end - base;
    format!("{} {guard}{}", &text[..at], &text[at..])
}

/// CREATE [FULLTEXT|SPATIAL] INDEX i ON t (...) and DROP INDEX i ON t, on the target.
fn index_statement(
    sql: &str,
    spans: &Spans,
    toks: &[Tok],
    table: &SealedSchema,
    target: &str,
) -> Result<Option<String>, Incompatible> {
    let clauses = match super::classify(sql, table) {
        Classified::Incompatible(i) => return Err(i),
        Classified::Compatible(c) => c,
    };
    if !matches!(
        clauses.as_slice(),
        [Alteration::AddIndex { .. } | Alteration::DropIndex { .. }]
    ) {
        return Ok(None); // a trigger
    }
    let on = (0..toks.len()).find(|&i| word(toks, i) == "ON");
    let Some(on) = on else {
        return Ok(None);
    };
    let name_end = if toks.get(on + 2) == Some(&Tok::Punct('.')) {
        on + 3
    } else {
        on + 1
    };
    let (from, to) = (spans[on + 1].1.start, spans[name_end].1.end);
    let mut out = format!("{}{target}{}", &sql[..from], &sql[to..]);
    let key = (0..on).find(|&i| word(toks, i) == "INDEX").unwrap_or(0);
    if key > 0 && word(toks, key + 1) != "IF" {
        let guard = if word(toks, 0) == "CREATE" {
            "IF NOT EXISTS"
        } else {
            "IF EXISTS"
        };
        let at = spans[key].1.end;
        out = format!("{} {guard}{}", &out[..at], &out[at..]);
    }
    Ok(Some(out))
}
