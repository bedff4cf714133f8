//! What `status` shows: every pool's capacity, who uses it, who holds it with
//! an unconfirmed release, and who waits, so a leak cannot go unnoticed.

use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::ids::{HoldId, PermitId, PoolKind};

/// All pools of one [`crate::Admission`] at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AdmissionSnapshot {
    pub read_windows: PoolSnapshot,
    pub target_writes: PoolSnapshot,
    pub sessions: PoolSnapshot,
}

impl AdmissionSnapshot {
    /// The snapshot of one pool.
    pub fn pool(&self, kind: PoolKind) -> &PoolSnapshot {
        match kind {
            PoolKind::ReadWindow => &self.read_windows,
            PoolKind::TargetWrite => &self.target_writes,
            PoolKind::Session => &self.sessions,
        }
    }

    /// Every hold in every pool: each one is capacity lost until confirmed.
    pub fn holds(&self) -> impl Iterator<Item = &HoldSnapshot> {
        PoolKind::ALL
            .into_iter()
            .flat_map(move |kind| self.pool(kind).holds.iter())
    }
}

/// One pool. `in_use.len() + holds.len() <= capacity` always holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSnapshot {
    pub pool: PoolKind,
    pub capacity: u32,
    /// Capacity neither in use nor held.
    pub available: u32,
    pub in_use: Vec<InUseSnapshot>,
    /// Permits whose release is unknown; they count against `capacity`.
    pub holds: Vec<HoldSnapshot>,
    /// Queued owners, oldest first (the order in which they will be granted).
    pub waiting: Vec<WaiterSnapshot>,
}

/// A permit in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InUseSnapshot {
    pub permit: PermitId,
    pub owner: String,
    #[serde(rename = "age_ms", serialize_with = "millis")]
    pub age: Duration,
}

/// A permit whose release is unknown, waiting for `Admission::confirm_hold`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HoldSnapshot {
    pub hold: HoldId,
    pub owner: String,
    pub reason: String,
    #[serde(rename = "age_ms", serialize_with = "millis")]
    pub age: Duration,
}

/// An owner waiting for a permit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaiterSnapshot {
    pub owner: String,
    #[serde(rename = "waited_ms", serialize_with = "millis")]
    pub waited: Duration,
    /// True when this waiter would be admitted if the pool's holds were confirmed.
    pub blocked_by_holds: bool,
}

fn millis<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
