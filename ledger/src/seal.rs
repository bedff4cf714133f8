//! Sealing a window (DESIGN §5 step 7) in the prescribed order of writes: FINAL page bytes
//! fsynced into the material store, then registered, then the manifest stored and
//! registered. T comes next ([`crate::apply::apply_page`]), then J and the range chain in
//! one state-store transaction ([`crate::journal::Journal::complete_window`]).
//!
//! A crash between any two of these writes leaves at worst unreferenced materials (bytes
//! without registry, or registered pages without a manifest): garbage of an attempt that
//! restarts, never a manifest naming bytes that are not durable.
use crate::manifest::WindowManifest;
use crate::material::MaterialStore;
use crate::page::{self, FinalPage, PageRef};
use crate::range::KeyRange;
use crate::registry::{Kind, Owner, Registry};
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use kernel::position::BinlogPos;
use kernel::value::Row;
use kernel::{Error, Result};

/// Stores `bytes` durably, then accounts them in the registry. Returns their digest.
pub async fn persist(
    store: &dyn MaterialStore,
    reg: &Registry,
    job: JobId,
    generation: Generation,
    kind: Kind,
    bytes: &[u8],
) -> Result<Digest> {
    persist_owned(store, reg, job, generation, kind, bytes, None).await
}

/// [`persist`] naming the window attempt the material belongs to (garbage accounting).
pub async fn persist_owned(
    store: &dyn MaterialStore,
    reg: &Registry,
    job: JobId,
    generation: Generation,
    kind: Kind,
    bytes: &[u8],
    owner: Option<Owner>,
) -> Result<Digest> {
    let d = store.put(bytes).await?;
    kernel::failpoint::hit(MATERIAL_AFTER_BYTES);
    reg.register_owned(job, generation, kind, d, bytes.len() as u64, owner)
        .await?;
    Ok(d)
}

/// Fault point: a material's bytes are durable in the store, its registry row not yet
/// written (hit once per RAW page, FINAL page and manifest).
pub const MATERIAL_AFTER_BYTES: &str = "material.after_bytes_before_registry";
/// Fault point: every FINAL page of a window persisted and registered, its manifest not.
pub const SEAL_AFTER_FINAL_PAGES: &str = "seal.after_final_pages";

/// Everything a manifest says besides its FINAL pages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowFacts {
    pub job: JobId,
    pub generation: Generation,
    pub window: WindowId,
    pub range: KeyRange,
    pub attempt: Attempt,
    pub low: BinlogPos,
    pub high: BinlogPos,
    pub snapshot: Option<BinlogPos>,
    pub schema_fingerprint: Digest,
    pub raw_pages: Vec<PageRef>,
    pub folded_digest: Digest,
    pub folded_changes: u64,
}

/// A sealed window: its manifest, the manifest hash and the FINAL page bytes in order
/// (exactly the bytes stored and hashed in the manifest, ready to apply).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedWindow {
    pub manifest: WindowManifest,
    pub manifest_hash: Digest,
    pub final_bytes: Vec<Vec<u8>>,
}

/// Cuts the reconciled rows (in the fold's order) into FINAL pages, persists them, then
/// builds, persists and returns the manifest.
pub async fn seal_window(
    store: &dyn MaterialStore,
    reg: &Registry,
    facts: WindowFacts,
    final_rows: Vec<Row>,
    page_rows: usize,
) -> Result<SealedWindow> {
    let pages = page::cut_final_pages(
        facts.job,
        facts.generation,
        facts.window,
        facts.attempt,
        final_rows,
        page_rows,
    );
    let owner = Some(Owner {
        window: facts.window,
        attempt: facts.attempt,
    });
    let mut refs = Vec::with_capacity(pages.len());
    let mut final_bytes = Vec::with_capacity(pages.len());
    for p in &pages {
        let sealed = page::seal(p);
        persist_owned(
            store,
            reg,
            facts.job,
            facts.generation,
            Kind::Final,
            &sealed.bytes,
            owner,
        )
        .await?;
        refs.push(p.page_ref(&sealed));
        final_bytes.push(sealed.bytes);
    }
    kernel::failpoint::hit(SEAL_AFTER_FINAL_PAGES);
    let manifest = WindowManifest {
        job: facts.job,
        generation: facts.generation,
        window: facts.window,
        range: facts.range,
        attempt: facts.attempt,
        low: facts.low,
        high: facts.high,
        snapshot: facts.snapshot,
        schema_fingerprint: facts.schema_fingerprint,
        raw_pages: facts.raw_pages,
        folded_digest: facts.folded_digest,
        folded_changes: facts.folded_changes,
        final_pages: refs,
    };
    let sealed = manifest.seal();
    let manifest_hash = persist_owned(
        store,
        reg,
        facts.job,
        facts.generation,
        Kind::Manifest,
        &sealed.bytes,
        owner,
    )
    .await?;
    Ok(SealedWindow {
        manifest,
        manifest_hash,
        final_bytes,
    })
}

/// Loads a sealed window's manifest and FINAL page bytes for (re-)apply, verifying each
/// against its hash. A missing or altered material is a definite `evidence_corrupt` error.
pub async fn load_final_pages(
    store: &dyn MaterialStore,
    manifest_hash: &Digest,
) -> Result<(WindowManifest, Vec<Vec<u8>>)> {
    let corrupt = |m: String| Error::definite(DefiniteCode::EvidenceCorrupt, m);
    let bytes = store.get(manifest_hash).await?.ok_or_else(|| {
        corrupt(format!(
            "manifest {manifest_hash} is missing from the material store"
        ))
    })?;
    let m = WindowManifest::decode(&bytes)
        .map_err(|e| corrupt(format!("manifest {manifest_hash}: {e}")))?;
    let mut out = Vec::with_capacity(m.final_pages.len());
    for p in &m.final_pages {
        let b = store.get(&p.digest).await?.ok_or_else(|| {
            corrupt(format!(
                "FINAL page {} of {} ({}) is missing",
                p.page, m.window, p.digest
            ))
        })?;
        let fp = FinalPage::decode(&b)
            .map_err(|e| corrupt(format!("FINAL page {} of {}: {e}", p.page, m.window)))?;
        if (fp.key.window, fp.key.attempt, fp.key.page) != (m.window, m.attempt, p.page) {
            return Err(corrupt(format!(
                "FINAL page {} of {} names another place",
                p.page, m.window
            )));
        }
        out.push(b);
    }
    Ok((m, out))
}
