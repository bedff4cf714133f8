//! The kernel of `backfill`: everything that names a place in the source's history and
//! everything that is shared by the ledger, the admission control and the bootstrap.
//!
//! * [`ids`] and [`position`]: typed identities. A binlog position only compares with
//!   another position of the same lineage (DESIGN §3.4); a generation, window or attempt is
//!   never a bare integer.
//! * [`value`] and [`schema`]: row values exactly as the server gave them (DESIGN §10) and
//!   the sealed schema they are decoded against.
//! * [`codec`]: the versioned envelope every persisted payload is written in (STYLE §5).
//! * [`error`]: the definite/transient split (STYLE §2).
//! * [`state`]: the state-store connection and its embedded migrations.
//! * [`failpoint`]: named fault points for crash tests (STYLE §7).
//! * [`capture`], [`log`] and [`lineage`]: the shared binlog reader, the raw log L with its
//!   restart position D (one state-store transaction), and the lineage checks that refuse a
//!   purged, reset or swapped source.
//! * [`names`]: `SET NAMES binary` on every data-plane session, so strings keep their
//!   column's charset end to end.
pub mod capture;
pub mod change;
pub mod codec;
pub mod control;
pub mod error;
pub mod failpoint;
pub mod ids;
pub mod introspect;
pub mod key;
pub mod lineage;
pub mod log;
pub mod names;
pub mod position;
pub mod range;
pub mod redact;
pub mod repoint;
pub mod schema;
pub mod schema_change;
pub mod state;
pub mod tls;
pub mod value;

pub use error::{Definite, Error, Result};
