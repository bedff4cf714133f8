//! The release record (`RELS`, versioned postcard, golden bytes below): what a release
//! removes and the audit facts that summarise it, recorded BEFORE any byte is removed.
//! After the release the audit reports these facts as `released:` lines and checks what
//! it still can against them (T's page credentials against their digest, the range
//! chain's manifests against the released list, T's activation credential against the
//! recorded one); the activation credential in T and the range-chain root stay forever.
use kernel::codec::{self, DecodeError, Versioned};
use kernel::ids::{Digest, Generation, JobId};
use kernel::position::BinlogPos;
use ledger::target::{Activation, PageCredential};
use serde::{Deserialize, Serialize};

/// One material the release removes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    pub digest: Digest,
    /// The registry's kind code (`RAWP`, `FINP`, `WMAN`).
    pub kind: String,
    pub bytes: u64,
}

/// The release of one table-generation's materials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRecord {
    pub job: JobId,
    pub generation: Generation,
    /// Every registered material at the intent, in digest order.
    pub materials: Vec<Released>,
    /// What the audit that passed right before the intent counted.
    pub windows: u32,
    pub final_pages: u32,
    pub l_records: u64,
    /// T's page credentials at the intent: how many, and [`credentials_digest`] of them.
    pub credentials: u32,
    pub credentials_digest: Digest,
    /// The activation credential the audit recomputed (B, F, range-chain root, L's digest
    /// at F).
    pub b: BinlogPos,
    pub f: BinlogPos,
    pub chain_root: Digest,
    pub l_digest: Digest,
    /// Where T's replay cursor was when the audit accepted it (None: no cursor): once L
    /// below it is gone, the cursor is checked against this (it never moves back).
    pub cursor: Option<BinlogPos>,
}

impl Versioned for ReleaseRecord {
    const KIND: [u8; 4] = *b"RELS";
    const VERSION: u16 = 1;
}

impl ReleaseRecord {
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<ReleaseRecord, DecodeError> {
        codec::decode(bytes)
    }

    /// Total bytes released.
    pub fn bytes(&self) -> u64 {
        self.materials.iter().map(|m| m.bytes).sum()
    }

    /// True when `d` is among the released materials.
    pub fn names(&self, d: &Digest) -> bool {
        self.materials
            .binary_search_by(|m| m.digest.0.cmp(&d.0))
            .is_ok()
    }

    /// The activation credential this record says the audit recomputed.
    pub fn activation(&self) -> Activation {
        Activation {
            job: self.job,
            generation: self.generation,
            b: self.b.clone(),
            f: self.f.clone(),
            chain_root: self.chain_root,
            l_digest: self.l_digest,
        }
    }
}

/// blake3 over T's page credentials in (window, page) order: window, page, attempt, rows
/// (u32 LE each) and the page digest.
pub fn credentials_digest(creds: &[PageCredential]) -> Digest {
    let mut c: Vec<&PageCredential> = creds.iter().collect();
    c.sort_by_key(|x| (x.window.0, x.page.0));
    let mut h = blake3::Hasher::new();
    for x in c {
        h.update(&x.window.0.to_le_bytes());
        h.update(&x.page.0.to_le_bytes());
        h.update(&x.attempt.0.to_le_bytes());
        h.update(&x.rows.to_le_bytes());
        h.update(&x.digest.0);
    }
    Digest(*h.finalize().as_bytes())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sample() -> ReleaseRecord {
        ReleaseRecord {
            job: JobId(7),
            generation: Generation(2),
            materials: vec![Released {
                digest: Digest([1; 32]),
                kind: "FINP".into(),
                bytes: 4096,
            }],
            windows: 3,
            final_pages: 5,
            l_records: 42,
            credentials: 5,
            credentials_digest: Digest([2; 32]),
            b: BinlogPos::new("mysql-bin.000001", 400),
            f: BinlogPos::new("mysql-bin.000002", 900),
            chain_root: Digest([3; 32]),
            l_digest: Digest([4; 32]),
            cursor: Some(BinlogPos::new("mysql-bin.000002", 1200)),
        }
    }

    /// Golden bytes of version 1: an old release record must keep decoding.
    const GOLDEN_V1: &str = include_str!("golden_rels_v1.hex");

    #[test]
    fn release_record_v1_golden_bytes() {
        let hex: String = GOLDEN_V1.split_whitespace().collect();
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>();
        if std::env::var_os("BLESS").is_some() {
            let out: String = sample()
                .encode()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            std::fs::write(
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/src/table/audit/golden_rels_v1.hex"
                ),
                out + "\n",
            )
            .unwrap();
            return;
        }
        assert_eq!(sample().encode(), bytes);
        assert_eq!(ReleaseRecord::decode(&bytes).unwrap(), sample());
        assert!(sample().names(&Digest([1; 32])));
        assert!(!sample().names(&Digest([9; 32])));
    }
}
