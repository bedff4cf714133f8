//! The range chain (DESIGN §2, §7): an index of completed windows kept apart from J.
//!
//! Each entry names a window's range, the attempt that sealed it and its manifest hash.
//! The root is a hash chain: `root_0 = H("backfill-chain-v1" || job || generation)`,
//! `root_i = H(root_{i-1} || entry_i)` over the canonical entry bytes. J stores only the
//! root, never the list, so J and the chain are independent evidence: the audit recomputes
//! the root from the chain and compares it with J's ([`verify`]), and checks that the chain
//! covers exactly the plan, in order, without gap or overlap.
use crate::range::{KeyRange, KeyRangeV1};
use kernel::codec::{self, DecodeError, Versioned};
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use serde::{Deserialize, Serialize};

/// One completed window.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChainEntry {
    pub window: WindowId,
    pub range: KeyRange,
    pub attempt: Attempt,
    pub manifest_hash: Digest,
}

/// RCHE version 1: bounds of a single signed integer key. Still written for such ranges.
#[derive(Serialize, Deserialize)]
struct ChainEntryV1 {
    window: WindowId,
    range: KeyRangeV1,
    attempt: Attempt,
    manifest_hash: Digest,
}

impl Versioned for ChainEntry {
    const KIND: [u8; 4] = *b"RCHE";
    const VERSION: u16 = 2;
}

impl ChainEntry {
    /// The entry's bytes: version 1 when its range has single signed integer bounds (the
    /// bytes, and so the chain roots, of every job installed before composite keys),
    /// version 2 otherwise.
    pub fn encode(&self) -> Vec<u8> {
        match self.range.as_v1() {
            Some(range) => codec::encode_version(
                Self::KIND,
                1,
                &ChainEntryV1 {
                    window: self.window,
                    range,
                    attempt: self.attempt,
                    manifest_hash: self.manifest_hash,
                },
            ),
            None => codec::encode(self),
        }
    }

    /// Decodes an entry (every version this build has written).
    pub fn decode(bytes: &[u8]) -> Result<ChainEntry, DecodeError> {
        let (version, body) = codec::split::<ChainEntry>(bytes)?;
        if version == 1 {
            let v1: ChainEntryV1 = codec::decode_body(&Self::KIND, 1, body)?;
            return Ok(ChainEntry {
                window: v1.window,
                range: v1.range.into(),
                attempt: v1.attempt,
                manifest_hash: v1.manifest_hash,
            });
        }
        codec::decode_body(&Self::KIND, version, body)
    }
}

/// The root of an empty chain for a table-generation.
pub fn genesis(job: JobId, generation: Generation) -> Digest {
    let mut b = b"backfill-chain-v1".to_vec();
    b.extend_from_slice(&job.0.to_le_bytes());
    b.extend_from_slice(&generation.0.to_le_bytes());
    Digest::of(&b)
}

/// The root after appending `entry` to a chain whose root is `prev`.
pub fn extend(prev: Digest, entry: &ChainEntry) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&prev.0);
    h.update(&entry.encode());
    Digest(*h.finalize().as_bytes())
}

/// The root of a whole chain.
pub fn root(job: JobId, generation: Generation, entries: &[ChainEntry]) -> Digest {
    entries.iter().fold(genesis(job, generation), extend)
}

/// Checks a chain of a table-generation: entries in plan order, one per window, ranges
/// equal to the plan's, the plan contiguous from -inf to +inf when `complete`, and the
/// recomputed root equal to `j_root`. Returns every finding.
pub fn verify(
    job: JobId,
    generation: Generation,
    plan: &[KeyRange],
    entries: &[ChainEntry],
    j_root: Digest,
    complete: bool,
) -> Vec<String> {
    let mut out = plan_findings(plan);
    if entries.len() > plan.len() {
        out.push(format!(
            "range chain has {} entries but the plan has {} windows",
            entries.len(),
            plan.len()
        ));
    }
    if complete && entries.len() != plan.len() {
        out.push(format!(
            "range chain covers {} of {} planned windows",
            entries.len(),
            plan.len()
        ));
    }
    for (i, e) in entries.iter().enumerate() {
        if e.window.0 as usize != i {
            out.push(format!("range chain entry #{i} names window {}", e.window));
        }
        match plan.get(i) {
            Some(r) if *r != e.range => out.push(format!(
                "range chain entry #{i} covers {} but the plan says {r}",
                e.range
            )),
            _ => {}
        }
    }
    let r = root(job, generation, entries);
    if r != j_root {
        out.push(format!(
            "range chain root recomputes to {r} but the journal records {j_root}"
        ));
    }
    out
}

/// Findings about a plan itself: at least one window, open at both ends, contiguous.
pub fn plan_findings(plan: &[KeyRange]) -> Vec<String> {
    let mut out = Vec::new();
    let (Some(first), Some(last)) = (plan.first(), plan.last()) else {
        return vec!["the range plan has no window".into()];
    };
    if first.lower.is_some() {
        out.push(format!("the first planned range {first} is not open below"));
    }
    if last.upper.is_some() {
        out.push(format!("the last planned range {last} is not open above"));
    }
    for (i, w) in plan.windows(2).enumerate() {
        if w[0].upper.is_none() || w[0].upper != w[1].lower {
            out.push(format!(
                "planned ranges #{i} {} and #{} {} are not contiguous",
                w[0],
                i + 1,
                w[1]
            ));
        }
        if crate::range::is_empty(&w[1]) {
            out.push(format!("planned range #{} {} is empty", i + 1, w[1]));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plan(bounds: &[i64]) -> Vec<KeyRange> {
        let mut edges: Vec<Option<i64>> = vec![None];
        edges.extend(bounds.iter().map(|b| Some(*b)));
        edges.push(None);
        edges
            .windows(2)
            .map(|w| crate::range::range(w[0], w[1]))
            .collect()
    }

    fn entries(plan: &[KeyRange]) -> Vec<ChainEntry> {
        plan.iter()
            .enumerate()
            .map(|(i, r)| ChainEntry {
                window: WindowId(i as u32),
                range: r.clone(),
                attempt: Attempt(1),
                manifest_hash: Digest::of(&[i as u8]),
            })
            .collect()
    }

    #[test]
    fn complete_chain_verifies_and_tampering_is_named() {
        let p = plan(&[10, 20]);
        let e = entries(&p);
        let r = root(JobId(1), Generation(1), &e);
        assert!(verify(JobId(1), Generation(1), &p, &e, r, true).is_empty());
        // J's root for another generation does not fit.
        assert!(!verify(JobId(1), Generation(2), &p, &e, r, true).is_empty());
        let mut bad = e.clone();
        bad[1].manifest_hash = Digest([0; 32]);
        assert!(verify(JobId(1), Generation(1), &p, &bad, r, true)[0].contains("root"));
        let mut gap = e.clone();
        gap.remove(1);
        assert!(!verify(
            JobId(1),
            Generation(1),
            &p,
            &gap,
            root(JobId(1), Generation(1), &gap),
            true
        )
        .is_empty());
        // a partial chain is fine before the fence
        assert!(verify(
            JobId(1),
            Generation(1),
            &p,
            &e[..1],
            root(JobId(1), Generation(1), &e[..1]),
            false
        )
        .is_empty());
    }

    #[test]
    fn plan_rules() {
        assert!(plan_findings(&plan(&[])).is_empty());
        assert!(!plan_findings(&[]).is_empty());
        assert!(!plan_findings(&[crate::range::range(Some(1), None)]).is_empty());
        let mut p = plan(&[10, 20]);
        p[1].upper = Some(crate::range::Bound::of_i64(15));
        assert!(!plan_findings(&p).is_empty());
    }

    proptest! {
        #[test]
        fn root_is_order_and_content_sensitive(bounds in proptest::collection::btree_set(-1000i64..1000, 1..8), flip in 0usize..8) {
            let b: Vec<i64> = bounds.into_iter().collect();
            let p = plan(&b);
            let e = entries(&p);
            let r = root(JobId(3), Generation(4), &e);
            prop_assert!(verify(JobId(3), Generation(4), &p, &e, r, true).is_empty());
            let i = flip % e.len();
            let mut t = e.clone();
            t[i].attempt = Attempt(2);
            prop_assert_ne!(root(JobId(3), Generation(4), &t), r);
            if e.len() > 1 {
                let mut s = e.clone();
                s.swap(0, 1);
                prop_assert_ne!(root(JobId(3), Generation(4), &s), r);
            }
        }
    }
}
