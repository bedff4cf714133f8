//! The definition half of the decision: the definition after the DDL, as the server
//! rendered it, must be exactly what the compatible clauses describe.
use super::{Alteration, Incompatible};
use crate::schema::{ColumnDef, ColumnKind, SealedSchema};

/// A column of the definition before, followed through the clauses.
struct Tracked {
    before: Option<usize>,
    name: String,
    modified: bool,
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn refuse(why: String) -> Incompatible {
    Incompatible {
        clause: "the definition after the DDL".into(),
        why,
    }
}

/// Checks `after` against `before` and the clauses of a compatible DDL (see the module
/// doc of [`super`]): the columns are the ones the clauses name, unnamed columns are
/// unchanged, modified ones only widened, and the key is the same.
pub fn check_after(
    before: &SealedSchema,
    clauses: &[Alteration],
    after: &SealedSchema,
) -> Result<(), Incompatible> {
    let tracked = follow(before, clauses)?;
    let mut want: Vec<String> = tracked.iter().map(|t| t.name.to_lowercase()).collect();
    let mut have: Vec<String> = after
        .columns
        .iter()
        .map(|c| c.name.to_lowercase())
        .collect();
    want.sort();
    have.sort();
    if want != have {
        return Err(refuse(format!(
            "its columns are ({}), the DDL describes ({})",
            have.join(", "),
            want.join(", ")
        )));
    }
    for t in &tracked {
        let Some(a) = after.columns.iter().find(|c| same(&c.name, &t.name)) else {
            continue;
        };
        match t.before {
            None if a.generated.is_some() => {
                return Err(refuse(format!("added column `{}` is generated", a.name)))
            }
            None => {}
            Some(i) if t.modified => widened(&before.columns[i], a).map_err(refuse)?,
            Some(i) => unchanged(&before.columns[i], a).map_err(refuse)?,
        }
    }
    same_key(before, &tracked, after)
}

/// Applies the clauses, in order, to the column list of `before`.
fn follow(before: &SealedSchema, clauses: &[Alteration]) -> Result<Vec<Tracked>, Incompatible> {
    let mut cols: Vec<Tracked> = before
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| Tracked {
            before: Some(i),
            name: c.name.clone(),
            modified: false,
        })
        .collect();
    let find = |cols: &[Tracked], n: &str| {
        cols.iter().position(|t| same(&t.name, n)).ok_or_else(|| {
            refuse(format!(
                "the DDL names column `{n}`, which the table does not have"
            ))
        })
    };
    for a in clauses {
        match a {
            Alteration::AddColumn { name } => cols.push(Tracked {
                before: None,
                name: name.clone(),
                modified: true,
            }),
            Alteration::DropColumn { name } => {
                let i = find(&cols, name)?;
                cols.remove(i);
            }
            Alteration::RenameColumn { from, to } => {
                let i = find(&cols, from)?;
                cols[i].name = to.clone();
            }
            Alteration::ChangeColumn { from, to } => {
                let i = find(&cols, from)?;
                cols[i].name = to.clone();
                cols[i].modified = true;
            }
            Alteration::ModifyColumn { name } => {
                let i = find(&cols, name)?;
                cols[i].modified = true;
            }
            _ => {}
        }
    }
    Ok(cols)
}

/// `b` and `a` are the same column but for its name.
fn unchanged(b: &ColumnDef, a: &ColumnDef) -> Result<(), String> {
    let mut b2 = b.clone();
    b2.name = a.name.clone();
    if &b2 == a {
        return Ok(());
    }
    Err(format!(
        "column `{}` changed ({} to {}) although the DDL does not modify it",
        b.name,
        describe(b),
        describe(a)
    ))
}

fn describe(c: &ColumnDef) -> String {
    let null = if c.nullable { "NULL" } else { "NOT NULL" };
    match &c.collation {
        Some(col) => format!("{} {col} {null}", c.column_type),
        None => format!("{} {null}", c.column_type),
    }
}

fn int_rank(k: ColumnKind) -> Option<u8> {
    Some(match k {
        ColumnKind::TinyInt => 1,
        ColumnKind::SmallInt => 2,
        ColumnKind::MediumInt => 3,
        ColumnKind::Int => 4,
        ColumnKind::BigInt => 5,
        _ => return None,
    })
}

/// `a` holds every value `b` holds, exactly (or is `b`).
fn widened(b: &ColumnDef, a: &ColumnDef) -> Result<(), String> {
    let not_null_again = b.nullable && !a.nullable;
    let mut b2 = b.clone();
    b2.name = a.name.clone();
    b2.nullable = a.nullable;
    let narrow = || {
        Err(format!(
            "column `{}`: {} to {} is not a widening (longer VARCHAR/VARBINARY, larger \
             integer, wider DECIMAL, NOT NULL to NULL)",
            b.name,
            describe(b),
            describe(a)
        ))
    };
    if not_null_again {
        return narrow();
    }
    if &b2 == a {
        return Ok(());
    }
    if b.generated.is_some() || a.generated.is_some() {
        return narrow();
    }
    let ok = match (b.kind, a.kind) {
        (ColumnKind::Varchar, ColumnKind::Varchar)
        | (ColumnKind::Varbinary, ColumnKind::Varbinary) => {
            a.char_len >= b.char_len && a.charset == b.charset && a.collation == b.collation
        }
        (ColumnKind::Decimal, ColumnKind::Decimal) => {
            let digits = |c: &ColumnDef| {
                let (p, s) = (
                    c.numeric_precision.unwrap_or(0),
                    c.numeric_scale.unwrap_or(0),
                );
                (p.saturating_sub(s), s)
            };
            let ((bi, bs), (ai, as_)) = (digits(b), digits(a));
            ai >= bi && as_ >= bs && (a.unsigned == b.unsigned || !a.unsigned)
        }
        (x, y) => match (int_rank(x), int_rank(y)) {
            (Some(rb), Some(ra)) => {
                (a.unsigned == b.unsigned && ra >= rb) || (b.unsigned && !a.unsigned && ra > rb)
            }
            _ => false,
        },
    };
    if ok {
        Ok(())
    } else {
        narrow()
    }
}

/// The key is the same index over the same columns (renames followed), unchanged.
fn same_key(
    before: &SealedSchema,
    tracked: &[Tracked],
    after: &SealedSchema,
) -> Result<(), Incompatible> {
    if !same(&before.key_name, &after.key_name) {
        return Err(refuse(format!(
            "the table's key is `{}`, it was `{}`",
            after.key_name, before.key_name
        )));
    }
    let want: Vec<&str> = before
        .key
        .iter()
        .filter_map(|&i| tracked.iter().find(|t| t.before == Some(i)))
        .map(|t| t.name.as_str())
        .collect();
    let have: Vec<&str> = after
        .key
        .iter()
        .map(|&i| after.columns[i].name.as_str())
        .collect();
    let equal = want.len() == have.len() && want.iter().zip(&have).all(|(w, h)| same(w, h));
    if !equal {
        return Err(refuse(format!(
            "the key's columns are ({}), they were ({})",
            have.join(", "),
            want.join(", ")
        )));
    }
    for (&bi, &ai) in before.key.iter().zip(&after.key) {
        unchanged(&before.columns[bi], &after.columns[ai])
            .map_err(|e| refuse(format!("a key column: {e}")))?;
    }
    Ok(())
}
