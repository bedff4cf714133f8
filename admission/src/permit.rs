//! A granted permit. It returns to its pool only through
//! [`Permit::release_confirmed`]; every other end makes it a hold.

use std::sync::Arc;

use crate::admission::Shared;
use crate::ids::{HoldId, PermitId, PoolKind};

/// Reason recorded for a permit dropped without a confirmed release.
pub const DROPPED_UNCONFIRMED: &str = "permit dropped without confirmed release";

/// One unit of a pool's capacity, owned by `owner`.
///
/// Releasing a permit says only that the operation under it has ended (the
/// read-view connection is closed, the target operation is finished). It never
/// means that a window is done or that another owner may take over its work.
#[must_use = "release it with release_confirmed() or mark_release_unknown(); dropping it leaves a hold"]
#[derive(Debug)]
pub struct Permit {
    shared: Arc<Shared>,
    id: PermitId,
    owner: String,
    settled: bool,
}

impl Permit {
    pub(crate) fn new(shared: Arc<Shared>, id: PermitId, owner: &str) -> Self {
        Self {
            shared,
            id,
            owner: owner.to_owned(),
            settled: false,
        }
    }

    pub fn id(&self) -> PermitId {
        self.id
    }

    pub fn pool(&self) -> PoolKind {
        self.id.pool()
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The hold this permit becomes if it is dropped unconfirmed; record it
    /// before sending a statement whose end may have to be confirmed later.
    pub fn hold_id(&self) -> HoldId {
        HoldId::from(self.id)
    }

    /// Call only once the server confirmed the operation ended (connection
    /// closed, or the target operation finished). Returns the capacity.
    pub fn release_confirmed(mut self) {
        self.settled = true;
        self.shared.release(self.id);
    }

    /// The operation may still run on the server (e.g. a timed-out future
    /// whose SQL was sent). The capacity stays occupied by a hold until
    /// [`crate::Admission::confirm_hold`].
    pub fn mark_release_unknown(mut self, reason: impl Into<String>) -> HoldId {
        self.settled = true;
        self.shared.hold(self.id, &self.owner, reason.into())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.settled {
            self.shared
                .hold(self.id, &self.owner, DROPPED_UNCONFIRMED.to_owned());
        }
    }
}
