//! The activation audit (DESIGN §7) and activation: the gate in front of STREAMING.
//!
//! # Why it is safe
//!
//! * It reads the evidence, not J's word (I5). [`gather()`] reads every store once into an
//!   [`Evidence`] value: J's raw rows, the range chain, the registry, per registered
//!   material what the material store answered (it recomputes each blake3 as it reads),
//!   T's page credentials, cursor and activation credential, and L's records from B to
//!   F. Memory stays bounded by one page: pages are read one at a time and only their
//!   [`Facts`] are kept (size, kind tag, place, row count); manifests are kept whole.
//!   [`audit`] is a pure function of that value. Each check recomputes what it compares:
//!   J's hash links, the range-chain root, the manifests' page lists against the page
//!   facts and T's credentials, L's hash chain, and the replay cursor against L's last
//!   group of the table at or before F. A tampered material, manifest, credential, J
//!   record or L record changes a recomputed value and is reported as a named [`Finding`].
//! * Activation writes the deterministic credential (generation, B, F, range-chain root,
//!   L's chain digest at F; no timestamp) in T, and only then moves J to STREAMING. A
//!   crash between the two (fault point `activate.after_credential_before_j`) is recovered
//!   by auditing again: the same evidence recomputes the same credential, writing it again
//!   is AlreadyCommitted, and J moves on. A credential that differs from the recomputed one
//!   is a finding, never overwritten.
//! * It compares the source's bytes with the target's ([`fields`](mod@fields)): evidence
//!   alone cannot see a value the pipeline decoded wrongly or a target row changed by
//!   hand, so the audit also runs `verify`'s independent comparator at a pinned binlog
//!   point (full by default, a recorded seeded sample when asked) and any difference is a
//!   [`Check::Fields`] finding: no PASS, no STREAMING, a pause naming the keys.
//! * After activation, every restart re-audits with the credential required
//!   ([`Require::Activated`]): the credential must equal the recomputed one and T's cursor
//!   must still be at or past F's last group (the accepted cursor never moves back).
//!
//! B and F are the markers of the table-generation in L whose groups end where J records
//! `b` and `f` (a restart may leave orphan B or F markers; they are no barrier).
//!
//! # Layout
//!
//! [`evidence`] holds the gathered values, [`fields`](mod@fields) the field comparison's request, result
//! and findings, [`checks`] the pure checks (one function per
//! check, run in order by [`audit`]), [`gather`](mod@gather) the reads, [`report`] the
//! verdict and its renderings, [`activate`](mod@activate) the recording of the activation,
//! and [`offline`] the stand-alone `backfill audit JOB`; [`released`] is the release record
//! retention writes before removing evidence and [`release_checks`] what the audit checks
//! against it afterwards (DESIGN §17). Imports between them run one
//! way: fields imports no sibling; report and evidence import fields; checks imports
//! evidence, fields, report and release_checks (which imports evidence, released and report); gather imports evidence; activate and offline import checks, gather and report.
pub mod activate;
pub mod checks;
pub mod evidence;
pub mod fields;
pub mod gather;
pub mod offline;
pub mod release_checks;
pub mod released;
pub mod report;
pub mod schema;

pub use activate::{activate, advance_j, Activated};
pub use checks::{audit, log_chain, Require};
pub use evidence::{
    Evidence, Facts, Link, LogFacts, PageFacts, ReleasedEvidence, Snapshot, Stored,
};
pub use fields::{FieldComparer, FieldConfig, FieldRequest, FieldSample};
pub use gather::{gather, prefetch, Prefetched, Sources};
pub use report::{AuditReport, Check, Finding};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
