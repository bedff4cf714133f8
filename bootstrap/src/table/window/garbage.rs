//! Releasing the materials of abandoned window attempts (DESIGN §5: "its old RAW pages
//! are garbage"; §8: the registry accounts bytes against quotas).
//!
//! Why it is safe: every material of a window attempt is registered with its owner
//! (window, attempt) in the registration's own transaction (`ledger::registry::Owner`).
//! Once a later attempt's manifest is sealed (seal row written after its bytes, registry
//! rows and manifest are durable), no protocol step ever reads an older attempt's
//! materials again: a sealed window is never re-read, and its evidence is the sealed
//! attempt's manifest only. Each garbage material is unregistered first and its bytes
//! removed second, so a crash in between leaves bytes without a registry row, never a
//! registry row without bytes; a restart releases what is left (idempotent). Materials
//! of different attempts never share bytes: every page and manifest names its attempt.
use crate::table::ctx::JobCtx;
use kernel::ids::{Attempt, WindowId};
use kernel::Result;

/// Releases every registered material of window `w` that `sealed` does not own. Returns
/// (materials, bytes) released.
pub async fn release(ctx: &JobCtx, w: WindowId, sealed: Attempt) -> Result<(usize, u64)> {
    let garbage = ctx
        .registry
        .garbage(ctx.id(), ctx.generation(), w, sealed)
        .await?;
    let mut bytes = 0;
    for e in &garbage {
        ctx.registry
            .unregister(ctx.id(), ctx.generation(), e.digest)
            .await?;
        ctx.store.remove(&e.digest).await?;
        bytes += e.bytes;
    }
    if !garbage.is_empty() {
        tracing::info!(job = %ctx.id(), %w, %sealed, materials = garbage.len(), bytes, "released the materials of abandoned attempts");
    }
    Ok((garbage.len(), bytes))
}
