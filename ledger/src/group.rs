//! A replayed source transaction ([`ReplayGroup`]) and the row steps its changes become
//! (DESIGN §6: by primary key and full image only). Pure: [`crate::apply`] and
//! [`crate::parts`] run the steps, [`crate::parts_plan`] splits them by key partition.
use crate::plan::{check_row, normalize_row, GroupSummary, Step};
use kernel::change::{Change, GroupEnd, Op};
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
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
        let mut b = b"backfill-group-v1".to_vec();
        b.extend(kernel::codec::to_canonical(&(&self.end, &self.changes)));
        Digest::of(&b)
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
pub(crate) fn steps(schema: &SealedSchema, ch: &Change, out: &mut Vec<Step>) -> Result<()> {
    steps_where(schema, ch, &|_| true, out)
}

/// The replay steps of one change whose key `keep` accepts (a key-changing update's
/// delete is judged by the old key, its upsert by the new one); every image is checked
/// whatever `keep` says.
pub(crate) fn steps_where(
    schema: &SealedSchema,
    ch: &Change,
    keep: &dyn Fn(&SqlValue) -> bool,
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
    let key = |r: &Row| {
        r.get(schema.pk)
            .cloned()
            .ok_or_else(|| bad("image has no primary key"))
    };
    match ch.id.op {
        Op::Insert => {
            let a = ch
                .after
                .as_ref()
                .ok_or_else(|| bad("insert without after-image"))?;
            check_row(schema, a, "replay")?;
            if keep(&a[schema.pk]) {
                out.push(Step::Upsert(normalize_row(schema, a.clone())));
            }
        }
        Op::Update => {
            let b = ch
                .before
                .as_ref()
                .ok_or_else(|| bad("update without before-image"))?;
            let a = ch
                .after
                .as_ref()
                .ok_or_else(|| bad("update without after-image"))?;
            check_row(schema, a, "replay")?;
            let (kb, ka) = (key(b)?, key(a)?);
            if kb.as_key() != ka.as_key() && keep(&kb) {
                out.push(Step::Delete(kb));
            }
            if keep(&ka) {
                out.push(Step::Upsert(normalize_row(schema, a.clone())));
            }
        }
        Op::Delete => {
            let b = ch
                .before
                .as_ref()
                .ok_or_else(|| bad("delete without before-image"))?;
            let k = key(b)?;
            if k.as_key().is_none() {
                return Err(bad("delete key is not an integer"));
            }
            if keep(&k) {
                out.push(Step::Delete(k));
            }
        }
    }
    Ok(())
}
