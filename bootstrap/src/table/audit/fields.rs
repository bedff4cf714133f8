//! The audit's field check (issue 15 item 4): the source's actual bytes against the
//! target's, so that a verified difference can never coexist with a PASS.
//!
//! # Why the rest of the audit cannot see what this sees
//!
//! Every other check reads evidence the pipeline produced: manifests, page hashes, T's
//! credentials, L's chain. A value the pipeline decoded wrongly (a non-utf8 string
//! re-encoded, source 0xf2e9eee2 written as 0xf2e2eee9) is sealed, credited and chained
//! as faithfully as a right one, and a row changed on the target by hand leaves every
//! credential intact. Only a comparison that does not share the pipeline's decoding sees
//! either: `verify`'s comparator (each server hashes its own bytes, DESIGN §11 I1), which
//! lives one layer up (`crate::verify`, L2) and reaches this layer as a [`FieldComparer`]
//! carried in the job context (`JobCtx::fields`), never as an import.
//!
//! # Why the comparison is at a consistent point
//!
//! The source keeps taking writes during activation. The comparer pins the source in a
//! consistent snapshot whose binlog position P the server reports, waits until L holds P,
//! replays the table's groups up to exactly P into the target with the job's own replayer
//! (under the job's lease, so T's cursor and fencing hold; the replay after F is the one
//! continuous replay would run anyway, and T's cursor past F is what §6 allows), and
//! compares the target's snapshot with the source's: both sides show the table at P
//! (`crate::verify::pinned`, the same argument). A difference found there is a real one,
//! never a write in flight.
//!
//! The comparison's source snapshot is a read view like a window's: it runs under a
//! read-window permit (`crate::table::activation`, `Finish::compare_fields`), so
//! `--read-windows` bounds it too (a many-tables test saw a third read view without it).
//!
//! # Full by default, sampled when asked; the cost
//!
//! The default compares every row (`FieldConfig::sample_every == 1`): the claim
//! "no verified difference coexists with a PASS" then holds outright at activation and at
//! every re-audit on restart. Its cost is one pinned verify of the table: both servers
//! hash every row once (chunks of `chunk_rows` keys, memory bounded by two chunks), which
//! bootstrap/BENCH.md measures ("Activation audit field check": 4.35 s for 1M rows,
//! +51% to STREAMING; 0.94 s sampled 1/10). For a table
//! too large for that at every restart, `serve --audit-sample-every N` compares a seeded
//! sample of about one chunk in N ([`crate::verify`]'s sampling: chunk `i` is compared iff
//! a blake3 of (seed, i) is 0 mod N; a skipped chunk costs only an index read of its keys
//! on the source). The seed is random per audit and recorded with the result, so a sample
//! can be repeated and successive restarts check different chunks. A sample can miss a
//! difference; the record says `sampled 1/N`, never `full`.
//!
//! # What a difference does
//!
//! The result is recorded (`crate::store::field_checks`, origin `audit`) before it is
//! judged, so `status` and `audit` show the rows checked, the seed and the first
//! differing keys with their values as hex even when the table is paused. A difference,
//! or a walk that did not reach the end of the key space, is a `Check::Fields` finding (`super::checks::field_findings`):
//! the audit FAILs, activation writes neither the credential nor J's STREAMING, and the
//! job pauses with the finding as its reason (`evidence_corrupt`, `[Fields] ...`). On a
//! table already STREAMING (the re-audit on restart) the same finding pauses it.
use crate::table::replay::Replayer;
use kernel::log::LSeq;
use kernel::Result;
use serde::Serialize;
use std::future::Future;
use std::pin::Pin;

/// How the activation audit compares fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldConfig {
    /// Compare about one chunk in this many (1: every row, the default).
    pub sample_every: u32,
    /// Keys per chunk.
    pub chunk_rows: usize,
}

impl Default for FieldConfig {
    fn default() -> FieldConfig {
        FieldConfig {
            sample_every: 1,
            chunk_rows: 10_000,
        }
    }
}

impl FieldConfig {
    /// `full` or `sampled 1/N chunks of K keys`.
    pub fn mode(&self) -> String {
        match self.sample_every {
            0 | 1 => "full".to_string(),
            n => format!("sampled 1/{n} chunks of {} keys", self.chunk_rows),
        }
    }
}

/// What the comparer is asked: compare the job's source and target at a pinned point,
/// replaying the target there with `replayer` (from L's record `b_seq`, the B marker).
pub struct FieldRequest<'a> {
    pub replayer: &'a Replayer<'a>,
    pub b_seq: LSeq,
    /// The table's key columns in index order.
    pub key: Vec<String>,
    pub config: FieldConfig,
    /// The sampling seed (recorded with the result).
    pub seed: u64,
}

/// One difference, readable: the key as verify prints it, the column, values as hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldDifference {
    /// `missing` (source only), `extra` (target only) or `field`.
    pub kind: String,
    pub key: String,
    pub column: Option<String>,
    pub source_hex: Option<String>,
    pub target_hex: Option<String>,
}

impl FieldDifference {
    /// `key id=5 column v: source 0xf2e9 target 0xf2e2`.
    pub fn text(&self) -> String {
        let hex = |h: &Option<String>| match h {
            Some(h) => format!("0x{h}"),
            None => "NULL".to_string(),
        };
        match self.kind.as_str() {
            "missing" => format!("key {}: missing on the target", self.key),
            "schema" => format!(
                "definitions differ: {}",
                self.column.as_deref().unwrap_or("?")
            ),
            "extra" => format!("key {}: extra on the target", self.key),
            _ => format!(
                "key {} column {}: source {} target {}",
                self.key,
                self.column.as_deref().unwrap_or("?"),
                hex(&self.source_hex),
                hex(&self.target_hex)
            ),
        }
    }
}

/// The result of one field comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldSample {
    pub mode: String,
    pub seed: u64,
    /// The binlog position P both sides were compared at.
    pub position: Option<String>,
    pub rows_checked: u64,
    pub chunks_compared: u64,
    pub chunks_skipped: u64,
    pub missing: u64,
    pub extra: u64,
    pub differing_rows: u64,
    /// The first differences (at most a few of each kind).
    pub examples: Vec<FieldDifference>,
    /// The walk reached the end of the key space.
    pub complete: bool,
    pub elapsed_ms: u64,
}

impl FieldSample {
    /// Rows that differ in any way (missing, extra or a differing field).
    pub fn differences(&self) -> u64 {
        self.missing + self.extra + self.differing_rows
    }

    /// The first differences, `; `-joined.
    pub fn summary(&self) -> String {
        self.examples
            .iter()
            .map(FieldDifference::text)
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// One report line.
    pub fn text(&self) -> String {
        format!(
            "fields: {} at {}: {} rows checked ({} chunks compared, {} skipped), seed {:#018x}, {} differing rows, {} ms",
            self.mode,
            self.position.as_deref().unwrap_or("?"),
            self.rows_checked,
            self.chunks_compared,
            self.chunks_skipped,
            self.seed,
            self.differences(),
            self.elapsed_ms
        )
    }

    /// As the state store records it.
    pub fn record(&self) -> crate::store::field_checks::FieldCheck {
        crate::store::field_checks::FieldCheck {
            origin: crate::store::field_checks::AUDIT.to_string(),
            checked_at: String::new(),
            mode: self.mode.clone(),
            seed: self.seed,
            position: self.position.clone(),
            rows_checked: self.rows_checked,
            differing_rows: self.differences(),
            summary: self.summary(),
        }
    }
}

/// A boxed comparison future.
pub type CompareFuture<'a> = Pin<Box<dyn Future<Output = Result<FieldSample>> + Send + 'a>>;

/// Compares a job's source and target fields at a pinned point (implemented by
/// `crate::verify::activation::Comparer`; the supervisor puts it in the job context).
pub trait FieldComparer: Send + Sync {
    fn compare<'a>(&'a self, req: FieldRequest<'a>) -> CompareFuture<'a>;
}
