//! The pure decisions of the apply path (STYLE §4): credential conflicts, TIMESTAMP
//! normalisation and the replay planner. No I/O; [`crate::apply`] executes the plans.
//!
//! The replay planner locates T's cursor in a batch of complete groups and cuts the rest
//! into transactions. Because a group is a source transaction and the sub-cursor counts
//! changes (not chunks), any restart with other batch or chunk sizes plans exactly the
//! changes T does not hold yet (I3; property-tested in `tests/pure_apply.rs`).
use crate::target::{PageCredential, ReplayCursor};
use kernel::change::GroupEnd;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::Digest;
use kernel::key::SortKey;
use kernel::schema::{ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use std::cmp::Ordering;
/// Compares the credential T holds with the one being written: equal is AlreadyCommitted,
/// anything else is an evidence conflict naming both.
pub fn decide_credential(
    existing: &PageCredential,
    mine: &PageCredential,
    who: &str,
) -> Result<(), Definite> {
    if existing == mine {
        return Ok(());
    }
    Err(Definite {
        code: DefiniteCode::EvidenceConflict,
        message: format!(
            "{who}: the target ledger already holds {}{} from attempt {} with {} rows and hash {}, but this apply has attempt {} with {} rows and hash {}; nothing was overwritten (pause and audit the window's materials)",
            existing.window, existing.page, existing.attempt.0, existing.rows, existing.digest,
            mine.attempt.0, mine.rows, mine.digest
        ),
    })
}

/// Converts a TIMESTAMP value given as binlog epoch text (`"1709210096.789012"`) into a
/// calendar value in UTC, which the `+00:00` target session stores exactly. Other values
/// pass unchanged.
pub fn normalize_row(schema: &SealedSchema, mut row: Row) -> Row {
    for (v, c) in row.iter_mut().zip(schema.columns.iter()) {
        if c.kind != ColumnKind::Timestamp {
            continue;
        }
        if let Some(utc) = match v {
            SqlValue::Bytes(b) => epoch_to_utc(b),
            _ => None,
        } {
            *v = utc;
        }
    }
    row
}

/// Checks a row (a page row or a replayed image) against the table: one value per column
/// and no NULL in a key column; anything else is corrupt evidence. (The key's sort key is
/// checked where it is computed.)
pub(crate) fn check_row(schema: &SealedSchema, row: &Row, what: &str) -> kernel::Result<()> {
    if row.len() != schema.columns.len() {
        return Err(kernel::Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "{what}: a row has {} values but {} has {} columns",
                row.len(),
                schema.qualified(),
                schema.columns.len()
            ),
        ));
    }
    if let Some(c) = schema.key.iter().find(|&&i| row[i].is_null()) {
        return Err(kernel::Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "{what}: a row's key column `{}` is NULL",
                schema.columns[*c].name
            ),
        ));
    }
    Ok(())
}

fn epoch_to_utc(b: &[u8]) -> Option<SqlValue> {
    let s = std::str::from_utf8(b).ok()?;
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    if secs.is_empty()
        || !secs.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
        || frac.len() > 6
    {
        return None;
    }
    let secs: i64 = secs.parse().ok()?;
    let micros: u32 = format!("{frac:0<6}").parse().ok()?;
    if secs == 0 && micros == 0 {
        return Some(SqlValue::Date(0, 0, 0, 0, 0, 0, 0));
    }
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // civil_from_days (H. Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    Some(SqlValue::Date(
        u16::try_from(y).ok()?,
        m as u8,
        d as u8,
        (rem / 3600) as u8,
        ((rem % 3600) / 60) as u8,
        (rem % 60) as u8,
        micros,
    ))
}

/// The shape of one group as the replay planner needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSummary {
    pub end: GroupEnd,
    pub len: usize,
    pub digest: Digest,
}

/// A slice `from..to` of the changes of group `group` of the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub group: usize,
    pub from: usize,
    pub to: usize,
}

/// One replay transaction: the cursor it expects in T, the cursor it writes, its changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnPlan {
    pub expect: Option<ReplayCursor>,
    pub next: ReplayCursor,
    pub pieces: Vec<Piece>,
}

/// What a batch of groups needs given T's cursor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    AlreadyCommitted,
    Apply(Vec<TxnPlan>),
}

fn gap(msg: String) -> Definite {
    Definite {
        code: DefiniteCode::EvidenceConflict,
        message: msg,
    }
}

/// Plans the replay of `groups` (consecutive complete groups of this table in L order,
/// `prev` the end of the group before them in L, None if they start right after B) against
/// T's cursor `current`. Whole groups are packed into transactions of at most `txn_rows`
/// changes; a larger group is applied in chunks with the sub-cursor. A cursor that is
/// neither before, inside nor after the batch, or that names a batch group with another
/// digest, is an evidence conflict.
pub fn plan_replay(
    current: Option<&ReplayCursor>,
    prev: Option<&GroupEnd>,
    groups: &[GroupSummary],
    txn_rows: usize,
) -> Result<Plan, Definite> {
    let txn_rows = txn_rows.max(1);
    let Some((gi, row)) = start_point(current, prev, groups)? else {
        return Ok(Plan::AlreadyCommitted);
    };
    if gi >= groups.len() {
        return Ok(Plan::AlreadyCommitted);
    }
    let mut cut = Cut {
        groups,
        txns: Vec::new(),
        expect: current.cloned(),
        pending: Vec::new(),
        pending_rows: 0,
    };
    cut.cut_from(gi, row, txn_rows);
    Ok(Plan::Apply(cut.txns))
}

/// Where T's cursor `current` puts the first change of the batch T does not hold:
/// `(group index, changes of it applied)`; None when T holds the whole batch. An
/// evidence conflict when the cursor is neither before, inside nor after the batch.
fn start_point(
    current: Option<&ReplayCursor>,
    prev: Option<&GroupEnd>,
    groups: &[GroupSummary],
) -> Result<Option<(usize, usize)>, Definite> {
    Ok(Some(match current {
        None if prev.is_none() => (0, 0),
        None => {
            return Err(gap(format!(
                "the target ledger has no replay cursor but the batch starts after group {}: a group would be skipped",
                prev.map(|p| p.pos.to_string()).unwrap_or_default()
            )))
        }
        Some(c) => match groups.iter().position(|g| g.end == c.end) {
            Some(k) if groups[k].digest != c.group_digest => {
                return Err(gap(format!(
                    "the target ledger's cursor names group {} with hash {} but the change log's group there hashes to {}: same key, different bytes",
                    c.end.pos, c.group_digest, groups[k].digest
                )))
            }
            Some(k) if c.rows_done == 0 => (k + 1, 0),
            Some(k) if (c.rows_done as usize) < groups[k].len => (k, c.rows_done as usize),
            Some(k) => {
                return Err(gap(format!(
                    "the target ledger's sub-cursor says {} changes of group {} applied but it has {}",
                    c.rows_done, c.end.pos, groups[k].len
                )))
            }
            None if prev == Some(&c.end) && c.rows_done == 0 => (0, 0),
            None => match groups.last().map(|l| c.end.pos.try_cmp(&l.end.pos)) {
                None | Some(Ok(Ordering::Greater)) => return Ok(None),
                Some(Ok(_)) => {
                    return Err(gap(format!(
                        "the target ledger's cursor {} (sub-cursor {}) is not at a boundary of this batch: the batch does not start at the target ledger's cursor",
                        c.end.pos, c.rows_done
                    )))
                }
                Some(Err(e)) => return Err(gap(e.to_string())),
            },
        },
    }))
}

/// The transactions [`plan_replay`] cuts, in order; each expects the cursor the one
/// before it writes (the first one T's cursor).
struct Cut<'g> {
    groups: &'g [GroupSummary],
    txns: Vec<TxnPlan>,
    expect: Option<ReplayCursor>,
    /// Whole groups (or a group's rest) packed into the next transaction.
    pending: Vec<Piece>,
    pending_rows: usize,
}

impl Cut<'_> {
    /// Cuts every change from `(gi, row)` on: whole groups packed into transactions of at
    /// most `txn_rows` changes, a larger group alone in chunks.
    fn cut_from(&mut self, mut gi: usize, mut row: usize, txn_rows: usize) {
        let groups = self.groups;
        while gi < groups.len() {
            let g = &groups[gi];
            let remaining = g.len - row;
            if remaining > txn_rows {
                self.flush();
                self.chunks(gi, row, txn_rows);
            } else {
                if self.pending_rows + remaining > txn_rows {
                    self.flush();
                }
                self.pending.push(Piece {
                    group: gi,
                    from: row,
                    to: g.len,
                });
                self.pending_rows += remaining;
            }
            gi += 1;
            row = 0;
        }
        self.flush();
    }

    /// Group `gi` from change `row` on, in transactions of `txn_rows` changes; the
    /// sub-cursor counts the changes applied, 0 once the group is complete.
    fn chunks(&mut self, gi: usize, mut row: usize, txn_rows: usize) {
        let g = &self.groups[gi];
        while row < g.len {
            let to = (row + txn_rows).min(g.len);
            let next = ReplayCursor {
                end: g.end.clone(),
                rows_done: if to == g.len {
                    0
                } else {
                    u32::try_from(to).unwrap_or(u32::MAX)
                },
                group_digest: g.digest,
            };
            self.push(
                next,
                vec![Piece {
                    group: gi,
                    from: row,
                    to,
                }],
            );
            row = to;
        }
    }

    /// Closes the pending pieces into one transaction ending with their last group.
    fn flush(&mut self) {
        if let Some(last) = self.pending.last() {
            let g = &self.groups[last.group];
            let next = ReplayCursor {
                end: g.end.clone(),
                rows_done: 0,
                group_digest: g.digest,
            };
            let pieces = std::mem::take(&mut self.pending);
            self.push(next, pieces);
            self.pending_rows = 0;
        }
    }

    fn push(&mut self, next: ReplayCursor, pieces: Vec<Piece>) {
        self.txns.push(TxnPlan {
            expect: self.expect.replace(next.clone()),
            next,
            pieces,
        });
    }
}

/// One row effect of replay, by key and full image only (DESIGN §6, §14), with the key's
/// sort key: steps of keys the server calls equal are steps of one key.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Make the row with this image's key hold exactly this image.
    Upsert { key: SortKey, row: Row },
    /// Remove the row with this key (its values in key order) if there is one.
    Delete { key: SortKey, values: Vec<SqlValue> },
}

impl Step {
    /// The sort key the step is about.
    pub fn key(&self) -> &SortKey {
        match self {
            Step::Upsert { key, .. } | Step::Delete { key, .. } => key,
        }
    }
}

/// The net effect of a sequence of steps: keys to delete (values in key order), then full
/// images to upsert, each key at most once, in key order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Folded {
    pub deletes: Vec<Vec<SqlValue>>,
    pub upserts: Vec<Row>,
}

/// Folds `steps` (in binlog order) into their net effect per key: the last step of a key
/// (by sort key, so by the server's equality) wins. Applying `deletes` then `upserts`
/// equals applying the steps one by one, because a step's effect on its key ignores what
/// the row held (a full image or a delete by key) and the target has no unique key but
/// the table's key, no trigger and no foreign key (DESIGN §9), so keys do not interact.
/// Property-tested in `tests/fold.rs`.
pub fn fold_steps(steps: Vec<Step>) -> Folded {
    let mut last: std::collections::HashMap<SortKey, Step> =
        std::collections::HashMap::with_capacity(steps.len());
    for s in steps {
        last.insert(s.key().clone(), s);
    }
    let mut keyed: Vec<(SortKey, Step)> = last.into_iter().collect();
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let mut out = Folded::default();
    for (_, s) in keyed {
        match s {
            Step::Upsert { row, .. } => out.upserts.push(row),
            Step::Delete { values, .. } => out.deletes.push(values),
        }
    }
    out
}
