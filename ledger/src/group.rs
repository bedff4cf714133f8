//! A replayed source transaction ([`ReplayGroup`]) and the row steps its changes become
//! (DESIGN §6: by primary key and full image only). Pure: [`crate::apply`] and
//! [`crate::parts`] run the steps, [`crate::parts_plan`] splits them by key partition.
use crate::plan::{check_row, normalize_row, GroupSummary, Step};
use kernel::change::{Change, GroupEnd, Op};
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::key::{KeyError, Keyer, SortKey};
use kernel::schema::SealedSchema;
use kernel::value::{Row, SqlValue};
use kernel::{Error, Result};
use serde::{Deserialize, Serialize};

/// One complete source transaction's changes of this table, in binlog order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayGroup {
    pub end: GroupEnd,
    pub changes: Vec<Change>,
}

impl ReplayGroup {
    /// Digest of the group's identity and changes (stable under any regrouping: a group
    /// is a source transaction, never a reader batch).
    pub fn digest(&self) -> Digest {
        // Hashed as it is encoded: a group of a large transaction is never encoded whole.
        kernel::codec::digest_canonical(b"backfill-group-v1", &(&self.end, &self.changes))
    }

    /// The planner's view of the group.
    pub fn summary(&self) -> GroupSummary {
        GroupSummary {
            end: self.end.clone(),
            len: self.changes.len(),
            digest: self.digest(),
        }
    }
}

/// The replay steps of one change (every key kept).
pub(crate) fn steps(
    schema: &SealedSchema,
    keyer: &Keyer,
    ch: &Change,
    out: &mut Vec<Step>,
) -> Result<()> {
    steps_where(schema, keyer, ch, &|_, _| true, out)
}

/// The replay steps of one change under `ctx`: every key, or only the keys of
/// [`crate::target::TargetCtx::within`].
pub(crate) fn ctx_steps(
    ctx: &crate::target::TargetCtx,
    ch: &Change,
    out: &mut Vec<Step>,
) -> Result<()> {
    match &ctx.within {
        None => steps(&ctx.schema, &ctx.keyer, ch, out),
        Some(r) => steps_where(&ctx.schema, &ctx.keyer, ch, &|k, _| r.contains(k), out),
    }
}

/// A key filter: the sort key and the key values of a step.
pub(crate) type Keep<'a> = &'a dyn Fn(&SortKey, &[SqlValue]) -> bool;

/// The replay steps of one change whose key `keep` accepts (a key-changing update's
/// delete is judged by the old key, its upsert by the new one); every image is checked
/// whatever `keep` says. An update whose images have equal sort keys (a change that only
/// alters case or trailing spaces under a _ci or PAD SPACE collation) is one upsert of
/// the new image: same key, new bytes.
pub(crate) fn steps_where(
    schema: &SealedSchema,
    keyer: &Keyer,
    ch: &Change,
    keep: Keep<'_>,
    out: &mut Vec<Step>,
) -> Result<()> {
    let bad = |m: &str| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "change at {}:{} row {} of {}: {m}",
                ch.id.file,
                ch.id.event_pos,
                ch.id.row,
                schema.qualified()
            ),
        )
    };
    let key = |r: &Row| key_of(schema, keyer, ch, r);
    fn image(r: &Option<Row>, bad: impl Fn(&str) -> Error) -> Result<&Row> {
        r.as_ref()
            .ok_or_else(|| bad("a change without the image its op needs"))
    }
    match ch.id.op {
        Op::Insert => {
            let a = image(&ch.after, bad)?;
            check_row(schema, a, "replay")?;
            let (ka, va) = key(a)?;
            if keep(&ka, &va) {
                out.push(upsert(schema, ka, a));
            }
        }
        Op::Update => {
            let b = image(&ch.before, bad)?;
            let a = image(&ch.after, bad)?;
            check_row(schema, a, "replay")?;
            let ((kb, vb), (ka, va)) = (key(b)?, key(a)?);
            if kb != ka && keep(&kb, &vb) {
                out.push(Step::Delete {
                    key: kb,
                    values: vb,
                });
            }
            if keep(&ka, &va) {
                out.push(upsert(schema, ka, a));
            }
        }
        Op::Delete => {
            let b = image(&ch.before, bad)?;
            let (kb, vb) = key(b)?;
            if keep(&kb, &vb) {
                out.push(Step::Delete {
                    key: kb,
                    values: vb,
                });
            }
        }
    }
    Ok(())
}

fn upsert(schema: &SealedSchema, key: SortKey, row: &Row) -> Step {
    Step::Upsert {
        key,
        row: normalize_row(schema, row.clone()),
    }
}

/// The sort key and key values of an image; a key without one is corrupt evidence, a
/// weight not asked before is a bug (never a guess). A BINARY(n) key value shorter than
/// n (its trailing 0x00 lost) is padded back: the sort key already calls it the padded
/// key, and the server stores it padded but compares `WHERE k IN (..)` byte for byte,
/// so a delete by the short value would match no row.
fn key_of(
    schema: &SealedSchema,
    keyer: &Keyer,
    ch: &Change,
    r: &Row,
) -> Result<(SortKey, Vec<SqlValue>)> {
    let err = |e: KeyError| {
        let code = match e {
            KeyError::NoWeight { .. } => DefiniteCode::Internal,
            _ => DefiniteCode::EvidenceCorrupt,
        };
        Error::definite(
            code,
            format!(
                "change at {}:{} row {} of {}: {e}",
                ch.id.file,
                ch.id.event_pos,
                ch.id.row,
                schema.qualified()
            ),
        )
    };
    // The values a DELETE binds: normalised as upserts are (a TIMESTAMP's binlog epoch
    // text becomes its UTC calendar value for the +00:00 target session), an ENUM as its
    // index and a SET as its bits (compared as numbers, never as text), a short BINARY(n)
    // padded back.
    let mut values = keyer
        .values(&normalize_row(schema, r.clone()))
        .map_err(err)?;
    for (v, &c) in values.iter_mut().zip(&schema.key) {
        if let (Some(n), SqlValue::Bytes(b)) = (schema.columns[c].fixed_binary_len(), v) {
            if b.len() < n {
                b.resize(n, 0);
            }
        }
    }
    let values = keyer.predicate_values(&values);
    Ok((keyer.sort_key(r).map_err(err)?, values))
}
