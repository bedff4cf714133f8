//! Typed names for pools, permits and holds.

use std::fmt;

use serde::Serialize;

/// One of the three permit pools of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolKind {
    /// A read window: one consistent-snapshot read of the source.
    ReadWindow,
    /// A target write: one target transaction (page apply, group apply, audit).
    TargetWrite,
    /// An execution session: a running table, including a continuous tail.
    Session,
}

impl PoolKind {
    /// Every pool, in snapshot order.
    pub const ALL: [PoolKind; 3] = [Self::ReadWindow, Self::TargetWrite, Self::Session];

    /// Stable, low-cardinality name (used in messages and telemetry).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadWindow => "read-window",
            Self::TargetWrite => "target-write",
            Self::Session => "session",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Self::ReadWindow => 0,
            Self::TargetWrite => 1,
            Self::Session => 2,
        }
    }
}

impl fmt::Display for PoolKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Identity of one granted permit; unique within an [`crate::Admission`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct PermitId {
    pool: PoolKind,
    seq: u64,
}

impl PermitId {
    pub(crate) fn new(pool: PoolKind, seq: u64) -> Self {
        Self { pool, seq }
    }

    /// The pool this permit counts against.
    pub fn pool(self) -> PoolKind {
        self.pool
    }
}

impl fmt::Display for PermitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.pool, self.seq)
    }
}

/// Identity of a hold: a permit whose release is unknown. It is the id of the
/// permit it came from, so a caller can learn it before the permit is lost
/// ([`crate::Permit::hold_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct HoldId(PermitId);

impl HoldId {
    /// The pool whose capacity this hold keeps.
    pub fn pool(self) -> PoolKind {
        self.0.pool
    }

    /// The permit this hold came from.
    pub fn permit(self) -> PermitId {
        self.0
    }
}

impl From<PermitId> for HoldId {
    fn from(permit: PermitId) -> Self {
        Self(permit)
    }
}

impl fmt::Display for HoldId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hold {}", self.0)
    }
}
