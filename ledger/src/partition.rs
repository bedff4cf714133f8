//! The key partition function of key-partitioned replay ([`crate::parts`]): pure and
//! fixed forever, because part rows in T persist its meaning ("partition p of P holds its
//! keys through here"); pinned by the golden test in `tests/parts_plan.rs`.
use kernel::value::SqlValue;

/// The most key partitions (connections) one replay may use.
pub const MAX_PARTS: usize = 16;

/// The partition of an integer key among `parts` (stable forever: part rows persist its
/// meaning). SplitMix64's finaliser spreads consecutive and strided keys evenly.
pub fn partition_of_int(key: i64, parts: usize) -> usize {
    if parts <= 1 {
        return 0;
    }
    let mut z = (key as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % parts as u64) as usize
}

/// Stable forever (its meaning is persisted by part rows): the partition of a primary-key
/// value. The key is read as the integer it denotes ([`SqlValue::as_key`]: `Int(5)`,
/// `UInt(5)` and text `"5"` are the same key). A value that is no signed 64-bit integer
/// (DESIGN §9 refuses such primary keys; replay refuses such changes) maps to 0.
pub fn partition_of(key: &SqlValue, parts: usize) -> usize {
    match key.as_key() {
        Some(k) => partition_of_int(k, parts),
        None => 0,
    }
}
