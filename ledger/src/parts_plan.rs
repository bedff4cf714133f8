//! The pure planner of key-partitioned replay ([`crate::parts`], STYLE §4): given T's
//! main cursor and part rows, the configured number of partitions and a batch of groups,
//! it says for every replay transaction of the main plan and every part what to do. No
//! I/O; property-tested against a model with crashes in `tests/parts_plan.rs`.
//!
//! Points: a position in the batch is `(group index, changes of it applied)`; the start of
//! the batch is `(-1, 0)` and a complete group `k` is `(k, len k)`. Main's point is where
//! part 0 (and, by the commit order, every partition) is. A part row's point means
//! something only when it is after main's: that partition holds its keys through it.
use crate::group::{steps_where, ReplayGroup};
use crate::partition::{partition_of, MAX_PARTS};
use crate::plan::{plan_replay, GroupSummary, Piece, Plan, Step, TxnPlan};
use crate::target::{PartRow, ReplayCursor};
use kernel::change::{Change, GroupEnd, Op};
use kernel::error::{Definite, DefiniteCode};
use kernel::key::{Keyer, SortKey};
use kernel::range::KeyRange;
use kernel::schema::SealedSchema;
use kernel::value::Row;
use kernel::Result;
use std::cmp::Ordering;

/// What a part does in one replay transaction. (At most MAX_PARTS per transaction, so
/// the size of the skip variants does not matter.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartStep {
    /// The part row is at or after the transaction's end: its partition holds it already.
    Ahead,
    /// No change of the transaction (after the part's start) touches this partition.
    Empty,
    /// Write `next` over `expect` (insert when None) first, then the steps of this
    /// partition in `pieces`.
    Apply {
        expect: Option<PartRow>,
        next: PartRow,
        pieces: Vec<Piece>,
    },
}

/// One replay transaction split over the partitions of scheme `parts`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartsTxn {
    /// Part 0: the main cursor CAS and the steps of partition 0 in `main.pieces`.
    pub main: TxnPlan,
    /// The scheme (number of partitions) this transaction is split by.
    pub parts: usize,
    /// Parts 1..parts, in order (`others[p - 1]` is part p).
    pub others: Vec<PartStep>,
}

/// What a batch needs given T.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartsPlan {
    AlreadyCommitted,
    Apply(Vec<PartsTxn>),
}

/// Everything the planner reads.
#[derive(Clone, Copy, Debug)]
pub struct PartsInput<'a> {
    pub main: Option<&'a ReplayCursor>,
    pub rows: &'a [PartRow],
    /// The configured number of partitions (connections), 1..=MAX_PARTS.
    pub configured: usize,
    pub prev: Option<&'a GroupEnd>,
    pub groups: &'a [GroupSummary],
    pub txn_rows: usize,
}

type Point = (i64, usize);
const START: Point = (-1, 0);
const BEYOND: Point = (i64::MAX, usize::MAX);

fn conflict(message: String) -> Definite {
    Definite {
        code: DefiniteCode::EvidenceConflict,
        message,
    }
}

/// Where a part row's cursor lies against the batch.
fn locate(
    c: &ReplayCursor,
    prev: Option<&GroupEnd>,
    groups: &[GroupSummary],
    what: &str,
) -> Result<Point, Definite> {
    if let Some(k) = groups.iter().position(|g| g.end == c.end) {
        let g = &groups[k];
        if g.digest != c.group_digest {
            return Err(conflict(format!(
                "{what} names group {} with hash {} but the change log's group there hashes to {}: same key, different bytes",
                c.end.pos, c.group_digest, g.digest
            )));
        }
        return match c.rows_done as usize {
            0 => Ok((k as i64, g.len)),
            r if r < g.len => Ok((k as i64, r)),
            r => Err(conflict(format!(
                "{what} says {r} changes of group {} applied but it has {}",
                c.end.pos, g.len
            ))),
        };
    }
    if prev == Some(&c.end) && c.rows_done == 0 {
        return Ok(START);
    }
    let (Some(first), Some(last)) = (groups.first(), groups.last()) else {
        return Ok(START);
    };
    let cmp = |g: &GroupSummary| {
        c.end
            .pos
            .try_cmp(&g.end.pos)
            .map_err(|e| conflict(format!("{what}: {e}")))
    };
    if cmp(last)? == Ordering::Greater {
        return Ok(BEYOND);
    }
    if cmp(first)? == Ordering::Less {
        // Before the batch, hence at or before `prev`: behind main, meaningless.
        return Ok(START);
    }
    Err(conflict(format!(
        "{what} {} (sub-cursor {}) is not at a group boundary of this batch",
        c.end.pos, c.rows_done
    )))
}

fn check_row_shape(r: &PartRow) -> Result<(), Definite> {
    let (p, n) = (r.part as usize, r.parts as usize);
    if p == 0 || p >= n || n > MAX_PARTS {
        return Err(Definite {
            code: DefiniteCode::EvidenceCorrupt,
            message: format!(
                "target ledger part row {p} of {n} partitions is impossible (parts 1..{n} of at most {MAX_PARTS})"
            ),
        });
    }
    Ok(())
}

/// The pieces of `pieces` after point `from`.
fn trim(pieces: &[Piece], from: Point) -> Vec<Piece> {
    pieces
        .iter()
        .filter_map(|p| {
            let g = p.group as i64;
            let start = match g.cmp(&from.0) {
                Ordering::Less => return None,
                Ordering::Equal => p.from.max(from.1),
                Ordering::Greater => p.from,
            };
            (start < p.to).then_some(Piece {
                group: p.group,
                from: start,
                to: p.to,
            })
        })
        .collect()
}

/// Plans the batch. `touches(group, change, parts)` is the bit set of the partitions the
/// steps of that change fall in under `parts` partitions ([`change_parts`]).
pub fn plan_parts(
    input: PartsInput<'_>,
    touches: impl Fn(usize, usize, usize) -> u32,
) -> Result<PartsPlan, Definite> {
    let PartsInput {
        main,
        rows,
        configured,
        prev,
        groups,
        txn_rows,
    } = input;
    if configured == 0 || configured > MAX_PARTS {
        return Err(Definite {
            code: DefiniteCode::Usage,
            message: format!("replay over {configured} key partitions: use 1..={MAX_PARTS}"),
        });
    }
    let txns = match plan_replay(main, prev, groups, txn_rows)? {
        Plan::AlreadyCommitted => return Ok(PartsPlan::AlreadyCommitted),
        Plan::Apply(t) => t,
    };
    let main_at = match main {
        None => START,
        Some(c) => locate(c, prev, groups, "the target ledger's cursor")?,
    };
    let mut at = read_rows(rows, prev, groups, main_at)?;
    let ahead_max = at.ahead.iter().flatten().max().copied().unwrap_or(START);
    let mut out = Vec::with_capacity(txns.len());
    let mut e_at = main_at;
    for t in txns {
        let last = t.pieces.last().copied().unwrap_or(Piece {
            group: 0,
            from: 0,
            to: 0,
        });
        let n_at: Point = (last.group as i64, last.to);
        let parts = match at.scheme {
            Some(s) if ahead_max > e_at => s,
            _ => configured,
        };
        let others = at.split(&t, parts, (e_at, n_at), &touches);
        e_at = n_at;
        out.push(PartsTxn {
            main: t,
            parts,
            others,
        });
    }
    Ok(PartsPlan::Apply(out))
}

/// Where each part stands while the batch is planned, indexed by part number.
struct PartsAt {
    /// The part row T holds (or the plan has written so far).
    cur: Vec<Option<PartRow>>,
    /// The point of the part when it is ahead of main.
    ahead: Vec<Option<Point>>,
    /// The scheme of the rows ahead of main (at most one: else an evidence conflict).
    scheme: Option<usize>,
}

/// Reads T's part rows against the batch, main being at `main_at`.
fn read_rows(
    rows: &[PartRow],
    prev: Option<&GroupEnd>,
    groups: &[GroupSummary],
    main_at: Point,
) -> Result<PartsAt, Definite> {
    let mut at = PartsAt {
        cur: vec![None; MAX_PARTS],
        ahead: vec![None; MAX_PARTS],
        scheme: None,
    };
    for r in rows {
        check_row_shape(r)?;
        let p = r.part as usize;
        let here = locate(
            &r.cursor,
            prev,
            groups,
            &format!("target ledger part row {p}"),
        )?;
        if here > main_at {
            match at.scheme {
                Some(s) if s != r.parts as usize => {
                    return Err(conflict(format!(
                        "target ledger part rows ahead of the main cursor were written by {s} and by {} partitions: which partitions hold which keys is ambiguous",
                        r.parts
                    )))
                }
                _ => at.scheme = Some(r.parts as usize),
            }
            at.ahead[p] = Some(here);
        }
        at.cur[p] = Some(r.clone());
    }
    Ok(at)
}

impl PartsAt {
    /// Parts 1..parts of main transaction `t`, which moves main from `e_at` to `n_at`;
    /// records where each applying part will be.
    fn split(
        &mut self,
        t: &TxnPlan,
        parts: usize,
        (e_at, n_at): (Point, Point),
        touches: &impl Fn(usize, usize, usize) -> u32,
    ) -> Vec<PartStep> {
        let mut others = Vec::with_capacity(parts.saturating_sub(1));
        for p in 1..parts {
            let start = self.ahead[p].map_or(e_at, |a| a.max(e_at));
            if start >= n_at {
                others.push(PartStep::Ahead);
                continue;
            }
            let pieces = trim(&t.pieces, start);
            let bit = 1u32 << p;
            let any = pieces
                .iter()
                .any(|pc| (pc.from..pc.to).any(|i| touches(pc.group, i, parts) & bit != 0));
            if !any {
                others.push(PartStep::Empty);
                continue;
            }
            let next = PartRow {
                part: p as u32,
                parts: parts as u32,
                cursor: t.next.clone(),
            };
            others.push(PartStep::Apply {
                expect: self.cur[p].replace(next.clone()),
                next,
                pieces,
            });
            self.ahead[p] = Some(n_at);
        }
        others
    }
}

/// The bit set of the partitions (of `parts`) that the steps of `ch` fall in: the
/// after-image's key for inserts and updates, the before-image's key for deletes and for
/// the delete of a key-changing update. A change without the images its op needs
/// touches every partition (the part that applies it reports the error).
pub fn change_parts(keyer: &Keyer, ch: &Change, parts: usize) -> u32 {
    let key = |r: &Option<Row>| {
        let r = r.as_ref()?;
        Some((keyer.sort_key(r).ok()?, keyer.values(r).ok()?))
    };
    let bit = |k: &(SortKey, Vec<kernel::value::SqlValue>)| {
        1u32 << partition_of(keyer, &k.0, &k.1, parts)
    };
    let all = u32::MAX;
    match ch.id.op {
        Op::Insert => key(&ch.after).map_or(all, |k| bit(&k)),
        Op::Delete => key(&ch.before).map_or(all, |k| bit(&k)),
        Op::Update => match (key(&ch.before), key(&ch.after)) {
            (Some(b), Some(a)) if a.0 == b.0 => bit(&a),
            (Some(b), Some(a)) => bit(&a) | bit(&b),
            _ => all,
        },
    }
}

/// The replay steps of partition `part` (of `parts`) in `pieces`, in binlog order.
pub fn part_steps(
    schema: &SealedSchema,
    keyer: &Keyer,
    groups: &[ReplayGroup],
    pieces: &[Piece],
    parts: usize,
    part: usize,
) -> Result<Vec<Step>> {
    part_steps_within(schema, keyer, groups, pieces, (parts, part), None)
}

/// [`part_steps`] of the keys in `within` only (None: every key; see
/// [`crate::target::TargetCtx::within`]).
pub fn part_steps_within(
    schema: &SealedSchema,
    keyer: &Keyer,
    groups: &[ReplayGroup],
    pieces: &[Piece],
    (parts, part): (usize, usize),
    within: Option<&KeyRange>,
) -> Result<Vec<Step>> {
    let keep = |k: &SortKey, v: &[kernel::value::SqlValue]| {
        partition_of(keyer, k, v, parts) == part && within.is_none_or(|r| r.contains(k))
    };
    let mut out = Vec::new();
    for p in pieces {
        for ch in &groups[p.group].changes[p.from..p.to] {
            steps_where(schema, keyer, ch, &keep, &mut out)?;
        }
    }
    Ok(out)
}
