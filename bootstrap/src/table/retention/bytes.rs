//! The only calls of the material store in retention: removing released bytes (from the
//! state store's blobs or the local directory, whichever `--materials` chose; the local
//! cache of a state store is emptied with it).
use crate::table::faults::gc as fp;
use kernel::ids::Digest;
use kernel::Result;
use ledger::material::MaterialStore;

/// Removes every material of `digests` that is not in `keep` (still needed by another job
/// or generation). Removing an absent material is fine, so a release interrupted here is
/// redone from the start. Returns how many were removed now or before.
pub async fn remove_all(
    store: &dyn MaterialStore,
    digests: &[Digest],
    keep: &[Digest],
) -> Result<u64> {
    let mut n = 0;
    for d in digests {
        if keep.contains(d) {
            continue;
        }
        store.remove(d).await?;
        n += 1;
        kernel::failpoint::hit(fp::MID_REMOVE);
    }
    Ok(n)
}
