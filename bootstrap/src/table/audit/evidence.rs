//! The evidence the activation audit checks: every value [`super::gather()`] reads from J,
//! the range chain, the registry, the material store, T and L, held as plain data so the
//! checks are pure functions of it. Owns [`Evidence`] and its parts ([`Snapshot`] of the
//! material store's answers, [`Facts`] of a page, [`LogFacts`] of L from B to F).
use crate::table::replay::MarkerAt;
use kernel::change::GroupEnd;
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::log::LSeq;
use kernel::range::KeyRange;
use ledger::chain::ChainEntry;
use ledger::journal::StoredRow;
use ledger::page::{page_head, FinalPage, RawPage};
use ledger::registry::{Entry, Kind, Usage};
use ledger::target::{Activation, PageCredential, ReplayCursor};
use std::collections::BTreeMap;

/// What a store answered for one material (the store's own verification included).
///
/// Bounded memory: [`gather`](super::gather()) reads one material at a time; a page's bytes are hashed (by
/// the store), measured and decoded as they are read, and only these facts are kept.
/// Manifests, a few hundred bytes per window, are kept whole: the checks decode them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stored {
    /// A manifest's bytes, verified against their digest.
    Manifest(Vec<u8>),
    /// A page (or any material that is not a manifest), verified against its digest.
    Facts(Facts),
    Missing,
    /// The store refused the bytes (they do not hash to their name) or could not read them.
    Bad(String),
}

/// What the checks need of a verified page: its size, its kind tag, and where it says it
/// belongs with its row count (or why it does not decode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Facts {
    pub bytes: u64,
    /// The first four bytes (the envelope's kind tag), fewer for a shorter material.
    pub tag: Vec<u8>,
    pub page: std::result::Result<PageFacts, String>,
}

/// A decoded page's place and row count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageFacts {
    pub window: WindowId,
    pub attempt: Attempt,
    pub page: PageNo,
    pub rows: u64,
}

impl Facts {
    /// The facts of verified bytes of a material of `kind`.
    pub fn of(kind: Kind, b: &[u8]) -> Facts {
        let page = match kind {
            Kind::Raw => page_head::<RawPage>(b),
            _ => page_head::<FinalPage>(b),
        };
        Facts {
            bytes: b.len() as u64,
            tag: b[..b.len().min(4)].to_vec(),
            page: page
                .map(|(k, n)| PageFacts {
                    window: k.window,
                    attempt: k.attempt,
                    page: k.page,
                    rows: n,
                })
                .map_err(|e| e.to_string()),
        }
    }
}

/// The material-store answers the audit's checks run over, without I/O.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub answers: BTreeMap<Digest, Stored>,
}

/// One L record's place in the hash chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub seq: LSeq,
    pub prev: Digest,
    pub chain: Digest,
}

/// What L says between B and F.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogFacts {
    pub b: Option<MarkerAt>,
    pub f: Option<MarkerAt>,
    /// Links of every record with B.seq <= seq <= F.seq, in order as read.
    pub links: Vec<Link>,
    /// Records that failed their own verification (body digest, chain step, decoding).
    pub read_errors: Vec<String>,
    /// The table's last complete group at or before F, with its digest.
    pub last_group: Option<(GroupEnd, Digest)>,
}

/// Everything the audit reads, gathered once.
#[derive(Clone, Debug)]
pub struct Evidence {
    pub job: JobId,
    pub generation: Generation,
    pub plan: Vec<KeyRange>,
    pub schema_fingerprint: Digest,
    pub journal: Vec<StoredRow>,
    pub chain: std::result::Result<Vec<(ChainEntry, Digest)>, String>,
    pub registry: std::result::Result<(Vec<Entry>, Option<Usage>, u64), String>,
    pub materials: Snapshot,
    pub credentials: std::result::Result<Vec<PageCredential>, String>,
    pub cursor: std::result::Result<Option<ReplayCursor>, String>,
    pub activation: std::result::Result<Option<Activation>, String>,
    pub log: std::result::Result<LogFacts, String>,
    /// The field comparison of source and target at a pinned point (None: not run).
    pub fields: Option<super::fields::FieldSample>,
    /// The schema chain's facts (DESIGN §16).
    pub schema: std::result::Result<super::schema::SchemaFacts, String>,
    /// The table-generation's release (retention, DESIGN §17), read AFTER the materials
    /// and L: None when nothing was released.
    pub released: Option<ReleasedEvidence>,
    /// L's GC horizon of the stream, read after L (None: nothing deleted).
    pub horizon: Option<kernel::log::Horizon>,
}

/// A recorded release: its state (intent or done), when, and its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReleasedEvidence {
    pub done: bool,
    pub at: String,
    pub record: std::result::Result<super::released::ReleaseRecord, String>,
}
