//! The key partition function of key-partitioned replay ([`crate::parts`]): pure and
//! fixed forever, because part rows in T persist its meaning ("partition p of P holds its
//! keys through here"); pinned by the golden test in `tests/parts_plan.rs`.
//!
//! Why it is safe for every key: a partition is a function of the sort key (DESIGN §14),
//! so keys the server calls equal ('a' and 'A ' under a _ci collation) always share a
//! partition, and a key-changing update touches exactly the partitions of its two keys.
use kernel::key::{Encoding, Keyer, SortKey};
use kernel::value::SqlValue;

/// The most key partitions (connections) one replay may use.
pub const MAX_PARTS: usize = 16;

/// The partition of an integer key among `parts` (stable forever: part rows persist its
/// meaning). SplitMix64's finaliser spreads consecutive and strided keys evenly.
pub fn partition_of_int(key: i64, parts: usize) -> usize {
    if parts <= 1 {
        return 0;
    }
    mix(key as u64, parts)
}

fn mix(x: u64, parts: usize) -> usize {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z % parts as u64) as usize
}

/// Stable forever (its meaning is persisted by part rows): the partition of a key. A key
/// of one signed integer column keeps the integer function it had before composite keys
/// ([`partition_of_int`]; `Int(5)`, `UInt(5)` and text `"5"` are the same key); every other
/// key is partitioned by the blake3 of its sort key.
pub fn partition_of(keyer: &Keyer, key: &SortKey, values: &[SqlValue], parts: usize) -> usize {
    if parts <= 1 {
        return 0;
    }
    if let ([c], [v]) = (keyer.def.columns.as_slice(), values) {
        if c.encoding == Encoding::Signed {
            if let Some(k) = v.as_key() {
                return partition_of_int(k, parts);
            }
        }
    }
    let h = blake3::hash(&key.0);
    let mut first = [0u8; 8];
    first.copy_from_slice(&h.as_bytes()[..8]);
    mix(u64::from_le_bytes(first), parts)
}
