//! Pure: what one L record holds for the table, complete groups from its chunk records,
//! and what T's cursor says about a group. No I/O; the readers ([`super::source`]) and
//! the driver decide nothing about the data without these functions.
//!
//! # Why it is safe
//!
//! * I3 regrouping. A group is one source transaction, named by its end position, GTID
//!   and digest ([`ReplayGroup::digest`]); it is built from the chunk records of that
//!   transaction alone, so how many groups or rows a batch holds never changes a group.
//! * I6 no silent loss. A pause of this table-generation or raw rows of the table in a
//!   record ([`table_part`]), chunks that do not chain ([`build_group`]) and a group T
//!   holds after one it does not ([`plan`]) are definite errors naming the position; a
//!   position of another binlog series never compares ([`cmp_end`]).
//! * §16 schema chain. After a DDL the capture keeps the table's rows raw; they are taken
//!   only when the chain holds a version sealed at that DDL, and decoded with the version
//!   in force at their record, by the capture's own decoder and checks.
//! * I2 skipping. [`coverage`] skips a group only when T's cursor is at or past its end.
use super::Scope;
use crate::table::schema::Chain;
use kernel::capture::raw::decode_raw;
use kernel::change::{Change, GroupEnd};
use kernel::error::{Definite, DefiniteCode};
use kernel::log::RawRows;
use kernel::log::{LSeq, RecordBody, StoredRecord};
use ledger::apply::ReplayGroup;
use ledger::target::ReplayCursor;
use std::cmp::Ordering;

fn definite(code: DefiniteCode, message: String) -> Definite {
    Definite { code, message }
}

/// The changes of the table in one L record, in binlog order. A pause of this
/// table-generation or rows kept raw for it are a definite stop: replay never skips them,
/// except what the schema chain (DESIGN §16) accounts for: the pause at a DDL whose
/// version is sealed at this record (the DDL's group, applied by the driver), and raw rows
/// after such a DDL, decoded here against the version in force
/// ([`kernel::capture::raw::decode_raw`]). Without a chain nothing after a DDL is taken.
pub fn table_part(
    scope: &Scope,
    chain: Option<&Chain>,
    rec: &StoredRecord,
) -> Result<Vec<Change>, Definite> {
    let RecordBody::Chunk(c) = &rec.record.body else {
        return Ok(Vec::new());
    };
    let decoded: Vec<Change> = c
        .changes
        .iter()
        .filter(|ch| scope.is_table(&ch.id.schema, &ch.id.table))
        .cloned()
        .collect();
    Ok(raw_part(scope, chain, rec, !decoded.is_empty())?.unwrap_or(decoded))
}

/// [`table_part`] of a record that is not kept: its changes are moved, never copied (a
/// group of a large transaction holds as many bytes as its images, once).
pub fn table_part_owned(
    scope: &Scope,
    chain: Option<&Chain>,
    mut rec: StoredRecord,
) -> Result<Vec<Change>, Definite> {
    let RecordBody::Chunk(c) = &mut rec.record.body else {
        return Ok(Vec::new());
    };
    let mut decoded = std::mem::take(&mut c.changes);
    decoded.retain(|ch| scope.is_table(&ch.id.schema, &ch.id.table));
    Ok(raw_part(scope, chain, &rec, !decoded.is_empty())?.unwrap_or(decoded))
}

/// The checks of [`table_part`] on `rec` (`decoded`: the record holds decoded changes of
/// the table): a pause of the table stops replay; raw rows of it are its changes (Some)
/// when the schema chain decodes them and nothing of the table is decoded beside them, and
/// stop replay otherwise; None: the decoded changes stand.
fn raw_part(
    scope: &Scope,
    chain: Option<&Chain>,
    rec: &StoredRecord,
    decoded: bool,
) -> Result<Option<Vec<Change>>, Definite> {
    let RecordBody::Chunk(c) = &rec.record.body else {
        return Ok(None);
    };
    let mine = |s: &str, t: &str| scope.is_table(s, t);
    for p in c.pauses.iter().filter(|p| {
        (p.job == scope.job && p.generation == scope.generation) || mine(&p.schema, &p.table)
    }) {
        let sealed = chain.and_then(|ch| ch.sealed_at(rec.seq));
        if sealed.is_some_and(|v| v.at == p.at) && ddl_point(scope, c, p) {
            continue;
        }
        return Err(definite(
            p.error.code,
            format!(
                "job {} {}: the reader paused `{}`.`{}` at {} (change log record {}): {}; replay stops there",
                scope.job, scope.generation, p.schema, p.table, p.at, rec.seq, p.error.message
            ),
        ));
    }
    let raw: Vec<&RawRows> = c.raw.iter().filter(|r| mine(&r.schema, &r.table)).collect();
    let Some(first) = raw.first() else {
        return Ok(None);
    };
    match chain.filter(|ch| ch.changed_before(rec.seq)) {
        Some(ch) if !decoded => raw_changes(scope, ch, rec, &raw).map(Some),
        _ => Err(definite(
            DefiniteCode::Uncapturable,
            format!(
                "job {} {}: change log record {} keeps rows of `{}`.`{}` at {}:{} raw (not decodable against the sealed schema); replay stops there",
                scope.job, scope.generation, rec.seq, first.schema, first.table, rec.record.start.file, first.event_pos
            ),
        )),
    }
}

/// True when the record holds decoded changes of the table (nothing is copied).
fn has_decoded(scope: &Scope, rec: &StoredRecord) -> bool {
    matches!(&rec.record.body, RecordBody::Chunk(c)
        if c.changes.iter().any(|ch| scope.is_table(&ch.id.schema, &ch.id.table)))
}

/// True when pause `p` is the capture's stop at a DDL statement of the table (the
/// statement is in the same chunk at the same position).
fn ddl_point(scope: &Scope, c: &kernel::log::GroupChunk, p: &kernel::log::PauseSeen) -> bool {
    p.error.code == DefiniteCode::SchemaChanged
        && c.statements.iter().any(|s| {
            s.at == p.at
                && kernel::capture::events::ddl_changes_table(
                    &s.sql,
                    &s.default_schema,
                    &scope.source_db,
                    &scope.source_table,
                )
        })
}

/// Raw rows of the table in record `rec`, decoded against the version in force there.
fn raw_changes(
    scope: &Scope,
    chain: &Chain,
    rec: &StoredRecord,
    raw: &[&RawRows],
) -> Result<Vec<Change>, Definite> {
    let (version, schema) = chain.in_force_after(rec.seq);
    let mut out = Vec::new();
    for r in raw {
        let (op, rows) = decode_raw(r, schema).map_err(|e| {
            definite(
                DefiniteCode::SchemaChanged,
                format!(
                    "job {} {}: change log record {} keeps rows of `{}`.`{}` at {}:{} that do not decode against schema version {version}: {e}; replay stops there",
                    scope.job, scope.generation, rec.seq, r.schema, r.table, rec.record.start.file, r.event_pos
                ),
            )
        })?;
        for (i, (before, after)) in rows.into_iter().enumerate() {
            out.push(Change {
                id: kernel::change::ChangeId {
                    lineage: chain.lineage,
                    schema: r.schema.clone(),
                    table: r.table.clone(),
                    file: rec.record.start.file.clone(),
                    event_pos: r.event_pos,
                    row: u32::try_from(i).unwrap_or(u32::MAX),
                    op,
                },
                before,
                after,
            });
        }
    }
    Ok(out)
}

/// A group of the table built from its chunk records.
#[derive(Clone, Debug, PartialEq)]
pub enum Built {
    /// The group is complete in L; `last_seq` is the L seq of its last chunk.
    Complete { group: ReplayGroup, last_seq: LSeq },
    /// L does not hold the group's end yet (it is still being captured).
    Open,
}

/// Builds one group from consecutive chunk records of the same group (the first given
/// chunk need not be chunk 0: earlier chunks without this table's changes add nothing).
/// Chunks must have consecutive seqs, one start and consecutive chunk numbers, and only
/// the last may carry the end.
pub fn build_group(
    scope: &Scope,
    chain: Option<&Chain>,
    chunks: Vec<StoredRecord>,
) -> Result<Built, Definite> {
    let Some(first) = chunks.first() else {
        return Ok(Built::Open);
    };
    for (i, r) in chunks.iter().enumerate() {
        if i > 0 {
            let p = &chunks[i - 1];
            if r.seq != p.seq.next()
                || r.record.start != first.record.start
                || r.record.chunk != p.record.chunk + 1
                || p.record.end.is_some()
            {
                return Err(definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!(
                        "change log records {} and {} do not chain as chunks of the group starting at {}",
                        p.seq, r.seq, first.record.start
                    ),
                ));
            }
        }
    }
    let last = &chunks[chunks.len() - 1];
    let (Some(end), last_seq) = (last.record.end.clone(), last.seq) else {
        // Still checked: a pause or raw rows of the table stop replay before the group ends.
        for r in &chunks {
            raw_part(scope, chain, r, has_decoded(scope, r))?;
        }
        return Ok(Built::Open);
    };
    let mut changes = Vec::new();
    for r in chunks {
        changes.extend(table_part_owned(scope, chain, r)?);
    }
    Ok(Built::Complete {
        group: ReplayGroup { end, changes },
        last_seq,
    })
}

/// Orders two group ends; positions of another binlog series are a definite lineage
/// error, never "not before".
pub fn cmp_end(a: &GroupEnd, b: &GroupEnd) -> Result<Ordering, Definite> {
    a.pos
        .try_cmp(&b.pos)
        .map_err(|e| definite(DefiniteCode::LineageChanged, e.to_string()))
}

/// What to do with a group given T's cursor: skip it (T holds all of it), or apply it
/// (from the start, or from the sub-cursor when T holds part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    Held,
    Apply,
}

/// Decides [`Coverage`] for a group ending at `end`.
pub fn coverage(cursor: Option<&ReplayCursor>, end: &GroupEnd) -> Result<Coverage, Definite> {
    let Some(c) = cursor else {
        return Ok(Coverage::Apply);
    };
    Ok(match cmp_end(end, &c.end)? {
        Ordering::Less => Coverage::Held,
        Ordering::Equal if c.rows_done == 0 => Coverage::Held,
        _ => Coverage::Apply,
    })
}

/// True when `r` is the L record right after `last` in the same group.
pub(super) fn continues(last: &StoredRecord, r: &StoredRecord) -> bool {
    last.record.end.is_none() && r.seq == last.seq.next() && r.record.start == last.record.start
}

/// A batch as T's cursor decides it: the groups to apply and the end of the group before
/// the first of them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Plan {
    /// The groups T does not hold (the first may be applied from its sub-cursor).
    pub(super) apply: Vec<ReplayGroup>,
    /// The end of the group before `apply` (the last held one skipped, else `prev`).
    pub(super) prev: Option<GroupEnd>,
    /// Groups in front that T holds, skipped.
    pub(super) held: u64,
}

/// Splits the groups read (in L order, after the group ending at `prev`) into the ones T
/// holds in front, skipped, and the rest. A group T holds after one it does not means T's
/// cursor lies inside a run of groups it does not hold: definite `evidence_conflict`.
pub(super) fn plan(
    scope: &Scope,
    cursor: Option<&ReplayCursor>,
    prev: Option<GroupEnd>,
    found: Vec<(ReplayGroup, LSeq)>,
) -> Result<Plan, Definite> {
    let mut out = Plan {
        apply: Vec::new(),
        prev,
        held: 0,
    };
    for (g, _) in found {
        match coverage(cursor, &g.end)? {
            Coverage::Held if out.apply.is_empty() => {
                out.held += 1;
                out.prev = Some(g.end.clone());
            }
            Coverage::Held => {
                return Err(definite(
                    DefiniteCode::EvidenceConflict,
                    format!(
                        "job {} {}: the target ledger's cursor lies inside a run of groups it does not hold",
                        scope.job, scope.generation
                    ),
                ))
            }
            Coverage::Apply => out.apply.push(g),
        }
    }
    Ok(out)
}
