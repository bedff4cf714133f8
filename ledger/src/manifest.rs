//! Window manifests (DESIGN §5 step 7): the sealed statement of what one window attempt
//! read, folded and produced. A manifest is itself a material: its hash is the blake3 of
//! its encoded bytes and extends the range-chain root (see [`crate::chain`]).
//!
//! [`verify`] is pure: it checks a decoded manifest against what the plan, the sealed
//! schema and the window's evidence say it must be, and returns every finding.
use crate::page::PageRef;
use crate::range::{KeyRange, KeyRangeV1};
use kernel::codec::{self, DecodeError, Versioned};
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use kernel::position::BinlogPos;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// The manifest of one sealed window attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowManifest {
    pub job: JobId,
    pub generation: Generation,
    pub window: WindowId,
    pub range: KeyRange,
    pub attempt: Attempt,
    /// Where LOW and HIGH of this attempt landed in the binlog.
    pub low: BinlogPos,
    pub high: BinlogPos,
    /// The read view's binlog position, where the server reports it (MariaDB).
    pub snapshot: Option<BinlogPos>,
    pub schema_fingerprint: Digest,
    pub raw_pages: Vec<PageRef>,
    /// Digest of the L changes folded into the RAW rows, and how many there were.
    pub folded_digest: Digest,
    pub folded_changes: u64,
    pub final_pages: Vec<PageRef>,
}

impl Versioned for WindowManifest {
    const KIND: [u8; 4] = *b"WMAN";
    const VERSION: u16 = 2;
}

/// WMAN version 1: the range over a single signed integer key. Still written for such
/// ranges, so manifests (and their hashes) of jobs installed before stay identical.
#[derive(Serialize, Deserialize)]
struct WindowManifestV1 {
    job: JobId,
    generation: Generation,
    window: WindowId,
    range: KeyRangeV1,
    attempt: Attempt,
    low: BinlogPos,
    high: BinlogPos,
    snapshot: Option<BinlogPos>,
    schema_fingerprint: Digest,
    raw_pages: Vec<PageRef>,
    folded_digest: Digest,
    folded_changes: u64,
    final_pages: Vec<PageRef>,
}

impl WindowManifest {
    /// Encoded bytes and their hash (the manifest hash): version 1 when the range has
    /// single signed integer bounds, version 2 otherwise.
    pub fn seal(&self) -> crate::page::Sealed {
        let bytes = match self.range.as_v1() {
            Some(range) => codec::encode_version(Self::KIND, 1, &self.to_v1(range)),
            None => codec::encode(self),
        };
        crate::page::Sealed {
            digest: Digest::of(&bytes),
            bytes,
        }
    }

    fn to_v1(&self, range: KeyRangeV1) -> WindowManifestV1 {
        let m = self.clone();
        WindowManifestV1 {
            job: m.job,
            generation: m.generation,
            window: m.window,
            range,
            attempt: m.attempt,
            low: m.low,
            high: m.high,
            snapshot: m.snapshot,
            schema_fingerprint: m.schema_fingerprint,
            raw_pages: m.raw_pages,
            folded_digest: m.folded_digest,
            folded_changes: m.folded_changes,
            final_pages: m.final_pages,
        }
    }

    /// Decodes manifest bytes (every version this build has written).
    pub fn decode(bytes: &[u8]) -> Result<WindowManifest, DecodeError> {
        let (version, body) = codec::split::<WindowManifest>(bytes)?;
        if version > 1 {
            return codec::decode_body(&Self::KIND, version, body);
        }
        let m: WindowManifestV1 = codec::decode_body(&Self::KIND, 1, body)?;
        Ok(WindowManifest {
            job: m.job,
            generation: m.generation,
            window: m.window,
            range: m.range.into(),
            attempt: m.attempt,
            low: m.low,
            high: m.high,
            snapshot: m.snapshot,
            schema_fingerprint: m.schema_fingerprint,
            raw_pages: m.raw_pages,
            folded_digest: m.folded_digest,
            folded_changes: m.folded_changes,
            final_pages: m.final_pages,
        })
    }

    /// Total rows of the FINAL pages.
    pub fn final_rows(&self) -> u64 {
        self.final_pages.iter().map(|p| u64::from(p.rows)).sum()
    }
}

/// What a manifest must agree with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expect {
    pub job: JobId,
    pub generation: Generation,
    pub window: WindowId,
    pub range: KeyRange,
    /// Version 1's fingerprint (install's seal).
    pub schema_fingerprint: Digest,
    /// The versions sealed after it (DESIGN §16), in order: the position of each one's
    /// DDL and its fingerprint. A window whose LOW is after a version's DDL was read with
    /// that version (or a later one): its manifest carries the fingerprint of the last
    /// version whose DDL precedes its LOW.
    pub later: Vec<(BinlogPos, Digest)>,
}

impl Expect {
    /// The fingerprint a manifest with LOW `low` must carry: the version in force at LOW.
    /// A position that does not compare with a version's (another lineage) takes none
    /// of the later versions, so such a manifest fails the check rather than pass it.
    pub fn fingerprint_at(&self, low: &BinlogPos) -> Digest {
        self.later
            .iter()
            .take_while(|(at, _)| at.try_cmp(low).ok() == Some(Ordering::Less))
            .last()
            .map_or(self.schema_fingerprint, |(_, d)| *d)
    }
}

/// Checks a manifest against the plan and its own internal rules. Returns every finding
/// as a sentence naming the window; empty means it is consistent.
pub fn verify(m: &WindowManifest, e: &Expect) -> Vec<String> {
    let mut out = Vec::new();
    let w = format!("manifest of {} {}{}", e.job, e.generation, e.window);
    if (m.job, m.generation, m.window) != (e.job, e.generation, e.window) {
        out.push(format!(
            "{w}: names job {} {} {} instead",
            m.job, m.generation, m.window
        ));
    }
    if m.range != e.range {
        out.push(format!(
            "{w}: range {} but the plan says {}",
            m.range, e.range
        ));
    }
    let want = e.fingerprint_at(&m.low);
    if m.schema_fingerprint != want {
        out.push(format!(
            "{w}: schema fingerprint {} differs from the sealed {want} (the version in force \
             at its LOW)",
            m.schema_fingerprint
        ));
    }
    match m.low.try_cmp(&m.high) {
        Ok(Ordering::Less) => {}
        Ok(_) => out.push(format!("{w}: LOW {} is not before HIGH {}", m.low, m.high)),
        Err(x) => out.push(format!("{w}: {x}")),
    }
    if let Some(s) = &m.snapshot {
        let ok = matches!(m.low.try_cmp(s), Ok(Ordering::Less | Ordering::Equal))
            && matches!(s.try_cmp(&m.high), Ok(Ordering::Less));
        if !ok {
            out.push(format!(
                "{w}: read view {s} does not lie between LOW {} and HIGH {}",
                m.low, m.high
            ));
        }
    }
    for (what, pages) in [("RAW", &m.raw_pages), ("FINAL", &m.final_pages)] {
        for (i, p) in pages.iter().enumerate() {
            if p.page.0 as usize != i {
                out.push(format!("{w}: {what} page #{i} is numbered {}", p.page));
            }
        }
    }
    if m.final_pages.is_empty() {
        out.push(format!(
            "{w}: has no FINAL page (an empty window seals one empty page)"
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use kernel::ids::PageNo;

    pub(crate) fn sample() -> WindowManifest {
        let page = |n: u32, b: u8| PageRef {
            page: PageNo(n),
            digest: Digest([b; 32]),
            rows: 10,
            bytes: 300,
        };
        WindowManifest {
            job: JobId(7),
            generation: Generation(2),
            window: WindowId(1),
            range: crate::range::range(Some(100), Some(200)),
            attempt: Attempt(1),
            low: BinlogPos::new("mysql-bin.000003", 1000),
            high: BinlogPos::new("mysql-bin.000003", 5000),
            snapshot: Some(BinlogPos::new("mysql-bin.000003", 1200)),
            schema_fingerprint: Digest([9; 32]),
            raw_pages: vec![page(0, 1), page(1, 2)],
            folded_digest: Digest([3; 32]),
            folded_changes: 4,
            final_pages: vec![page(0, 5), page(1, 6)],
        }
    }

    fn expect() -> Expect {
        Expect {
            job: JobId(7),
            generation: Generation(2),
            window: WindowId(1),
            range: crate::range::range(Some(100), Some(200)),
            schema_fingerprint: Digest([9; 32]),
            later: Vec::new(),
        }
    }

    #[test]
    fn a_consistent_manifest_has_no_findings() {
        assert_eq!(verify(&sample(), &expect()), Vec::<String>::new());
        let m = sample();
        assert_eq!(WindowManifest::decode(&m.seal().bytes).unwrap(), m);
        assert_eq!(m.final_rows(), 20);
    }

    #[test]
    fn each_inconsistency_is_named() {
        let mut m = sample();
        m.range = KeyRange::ALL;
        assert!(verify(&m, &expect())[0].contains("plan says"));
        let mut m = sample();
        m.snapshot = Some(BinlogPos::new("mysql-bin.000003", 6000));
        assert!(verify(&m, &expect())[0].contains("read view"));
        let mut m = sample();
        m.high = BinlogPos::new("mysql-bin.000003", 10);
        assert!(!verify(&m, &expect()).is_empty());
        let mut m = sample();
        m.high = BinlogPos::new("other-bin.000003", 9000);
        assert!(!verify(&m, &expect()).is_empty());
        let mut m = sample();
        m.final_pages.remove(0);
        assert!(verify(&m, &expect())[0].contains("numbered"));
        let mut m = sample();
        m.schema_fingerprint = Digest([0; 32]);
        assert!(verify(&m, &expect())[0].contains("fingerprint"));
    }

    /// A window read after a schema change carries the version in force at its LOW
    /// (DESIGN §16): not version 1's fingerprint, not a later version's.
    #[test]
    fn a_window_carries_the_schema_version_in_force_at_its_low() {
        let at = |p| BinlogPos::new("mysql-bin.000003", p);
        let mut e = expect();
        e.later = vec![(at(500), Digest([20; 32])), (at(7000), Digest([30; 32]))];
        let low = sample().low;
        assert!(at(500).try_cmp(&low).ok() == Some(Ordering::Less));
        assert_eq!(e.fingerprint_at(&low), Digest([20; 32]));
        assert_eq!(e.fingerprint_at(&at(400)), Digest([9; 32]));
        assert_eq!(e.fingerprint_at(&at(8000)), Digest([30; 32]));
        // A DDL at LOW itself is not before it.
        assert_eq!(e.fingerprint_at(&at(500)), Digest([9; 32]));
        // Another lineage's position compares with none: version 1 is expected.
        assert_eq!(
            e.fingerprint_at(&BinlogPos::new("other-bin.000001", 9)),
            Digest([9; 32])
        );
        let mut m = sample();
        assert!(
            verify(&m, &e)[0].contains("fingerprint"),
            "version 1's print"
        );
        m.schema_fingerprint = Digest([20; 32]);
        assert_eq!(verify(&m, &e), Vec::<String>::new());
        m.schema_fingerprint = Digest([30; 32]);
        assert!(!verify(&m, &e).is_empty(), "a later version's print");
    }
}
