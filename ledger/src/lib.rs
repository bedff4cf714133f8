//! The ledger: the evidence a table's execution leaves behind (DESIGN §2, §3.5, §4, §5).
//!
//! Four kinds of evidence are kept apart and never inferred from one another:
//! * T ([`target`], [`apply`], [`parts`]): tables in the TARGET schema, written in the
//!   same target transaction as the business rows they describe: one credential per FINAL
//!   page, a monotonic replay cursor per table-generation (plus one per key partition when
//!   replay runs over several connections), the activation credential, and the
//!   owner row carrying the fencing token. The credential or cursor is written first, as
//!   a unique insert or a conditional update, so a COMMIT lost on the wire that lands
//!   later makes any retry read as AlreadyCommitted: business rows never run twice (I2).
//! * J ([`journal`], records in [`record`]): the hash-chained journal of the table's state
//!   machine in the state store, appended with a compare-and-set, guarded by the owner
//!   [`lease`]'s fencing token.
//! * the range chain ([`chain`]): an index of completed windows whose recomputed root must
//!   equal J's root.
//! * materials ([`material`], [`registry`]): RAW/FINAL pages ([`page`]) and window
//!   manifests ([`manifest`]), content-addressed by blake3, accounted against quotas.
//!
//! The protocol decisions (chain roots, manifest verification, conflict and replay plans,
//! journal transitions) are pure functions; I/O sits at the edges (STYLE §4). [`check`]
//! holds the tamper checks the activation audit calls (I5).
pub mod apply;
pub mod chain;
pub mod check;
mod dml;
mod group;
pub mod journal;
pub mod lease;
mod literal;
pub mod manifest;
pub mod material;
pub mod page;
mod partition;
pub mod parts;
pub mod parts_plan;
pub mod plan;
pub mod range;
pub mod record;
pub mod registry;
pub mod release;
pub mod schema;
pub mod seal;
pub mod target;
mod util;

pub use kernel::{Definite, Error, Result};
