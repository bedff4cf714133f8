//! Tamper checks the activation audit calls (DESIGN §7, I5). Each returns findings, one
//! sentence per problem naming the object; empty means the evidence is intact. They only
//! read. The pure ones take evidence already read; the `*_in` helpers read it first.
use crate::chain::{self, ChainEntry};
use crate::journal::{journal_genesis, link, Journal, StoredRow};
use crate::manifest::{self, WindowManifest};
use crate::material::MaterialStore;
use crate::page::{FinalPage, PageRef, RawPage};
use crate::range::KeyRange;
use crate::record::{check_transition, JournalRecord};
use crate::registry::{Entry, Kind, Registry, Usage};
use crate::target::PageCredential;
use kernel::error::DefiniteCode;
use kernel::ids::{Digest, Generation, JobId};
use kernel::{Error, Result};
use std::collections::BTreeMap;

/// Turns findings into a definite `evidence_corrupt` error (or Ok when there are none).
pub fn into_result(findings: Vec<String>) -> Result<()> {
    if findings.is_empty() {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::EvidenceCorrupt,
        findings.join("; "),
    ))
}

/// J's stored rows: seq 1.. without gap, each digest = H(prev || bytes), each prev the
/// digest before it, every record decodes, names the table and follows the one before.
pub fn journal(job: JobId, generation: Generation, rows: &[StoredRow]) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev_digest = journal_genesis(job, generation);
    let mut prev_rec: Option<JournalRecord> = None;
    for (i, r) in rows.iter().enumerate() {
        let w = format!("journal record {} of job {job} {generation}", r.seq);
        if r.seq != i as u64 + 1 {
            out.push(format!("{w}: expected seq {}", i + 1));
        }
        if r.prev != prev_digest {
            out.push(format!("{w}: its link to the previous record is broken"));
        }
        if link(r.prev, &r.bytes) != r.digest {
            out.push(format!(
                "{w}: its bytes do not hash to its digest (tampered)"
            ));
        }
        match JournalRecord::decode(&r.bytes) {
            Err(e) => out.push(format!("{w}: {e}")),
            Ok(rec) => {
                if (rec.job, rec.generation) != (job, generation) {
                    out.push(format!("{w}: names job {} {}", rec.job, rec.generation));
                }
                if let Some(p) = &prev_rec {
                    if let Err(d) = check_transition(p, &rec) {
                        out.push(format!("{w}: {}", d.message));
                    }
                }
                prev_rec = Some(rec);
            }
        }
        prev_digest = r.digest;
    }
    out
}

/// The range chain against the plan and J's head: recomputed root equals J's root, each
/// stored `root_after` equals the recomputed prefix root, coverage as [`chain::verify`].
pub fn range_chain(
    job: JobId,
    generation: Generation,
    plan: &[KeyRange],
    stored: &[(ChainEntry, Digest)],
    head: &JournalRecord,
    complete: bool,
) -> Vec<String> {
    let entries: Vec<ChainEntry> = stored.iter().map(|(e, _)| e.clone()).collect();
    let mut out = chain::verify(job, generation, plan, &entries, head.chain_root, complete);
    if entries.len() != head.completed as usize {
        out.push(format!(
            "the journal counts {} completed windows but the range chain holds {}",
            head.completed,
            entries.len()
        ));
    }
    let mut r = chain::genesis(job, generation);
    for (e, stored_root) in stored {
        r = chain::extend(r, e);
        if r != *stored_root {
            out.push(format!(
                "range chain row of {}: stored root differs from the recomputed one",
                e.window
            ));
        }
    }
    out
}

/// One material: present, hashing to its name, of the registered size and kind.
pub async fn material(store: &dyn MaterialStore, e: &Entry) -> Vec<String> {
    match store.get(&e.digest).await {
        Ok(Some(b)) => {
            let mut out = Vec::new();
            if b.len() as u64 != e.bytes {
                out.push(format!(
                    "material {}: {} bytes, registry says {}",
                    e.digest,
                    b.len(),
                    e.bytes
                ));
            }
            if b.len() < 4 || &b[..4] != e.kind.code().as_bytes() {
                out.push(format!(
                    "material {}: not a {} record",
                    e.digest,
                    e.kind.code()
                ));
            }
            out
        }
        Ok(None) => vec![format!(
            "material {} ({}) is registered but missing from the store",
            e.digest,
            e.kind.code()
        )],
        Err(err) => vec![format!("material {}: {err}", e.digest)],
    }
}

/// Every registered material of a table-generation, and the usage row's existence.
pub async fn materials(
    store: &dyn MaterialStore,
    entries: &[Entry],
    usage: Option<Usage>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in entries {
        out.extend(material(store, e).await);
    }
    if usage.is_none() && !entries.is_empty() {
        out.push("materials are registered but the table has no usage row".into());
    }
    out
}

/// One window: its manifest material decodes, hashes to the chain's value and verifies
/// against the plan; every page it names is registered and intact, and FINAL pages name
/// this window and attempt.
pub async fn window(
    store: &dyn MaterialStore,
    registered: &BTreeMap<Digest, Entry>,
    entry: &ChainEntry,
    expect: &manifest::Expect,
) -> (Option<WindowManifest>, Vec<String>) {
    let w = format!("{}", entry.window);
    let bytes = match store.get(&entry.manifest_hash).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return (
                None,
                vec![format!(
                    "manifest of {w} ({}) is missing",
                    entry.manifest_hash
                )],
            )
        }
        Err(e) => return (None, vec![format!("manifest of {w}: {e}")]),
    };
    let m = match WindowManifest::decode(&bytes) {
        Ok(m) => m,
        Err(e) => return (None, vec![format!("manifest of {w}: {e}")]),
    };
    let mut out = manifest::verify(&m, expect);
    if m.attempt != entry.attempt {
        out.push(format!(
            "manifest of {w}: attempt {} but the range chain says {}",
            m.attempt, entry.attempt
        ));
    }
    if !registered.contains_key(&entry.manifest_hash) {
        out.push(format!("manifest of {w} is not in the material registry"));
    }
    for p in &m.raw_pages {
        out.extend(page(store, registered, &m, &w, p, Kind::Raw).await);
    }
    for p in &m.final_pages {
        out.extend(page(store, registered, &m, &w, p, Kind::Final).await);
    }
    (Some(m), out)
}

/// One page a manifest names: registered, intact, of the manifest's size, place and rows.
async fn page(
    store: &dyn MaterialStore,
    registered: &BTreeMap<Digest, Entry>,
    m: &WindowManifest,
    w: &str,
    p: &PageRef,
    kind: Kind,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(e) = registered.get(&p.digest) else {
        out.push(format!(
            "{w}: {} page {} ({}) is not registered",
            kind.code(),
            p.page,
            p.digest
        ));
        return out;
    };
    out.extend(material(store, e).await);
    if e.bytes != p.bytes {
        out.push(format!(
            "{w}: page {} has {} bytes, manifest says {}",
            p.page, e.bytes, p.bytes
        ));
    }
    if let Ok(Some(b)) = store.get(&p.digest).await {
        let key = match kind {
            Kind::Raw => RawPage::decode(&b).map(|x| (x.key, x.rows.len())),
            _ => FinalPage::decode(&b).map(|x| (x.key, x.rows.len())),
        };
        match key {
            Ok((k, n))
                if k.window == m.window
                    && k.attempt == m.attempt
                    && k.page == p.page
                    && n as u64 == u64::from(p.rows) => {}
            Ok(_) => out.push(format!(
                "{w}: {} page {} names another place or row count",
                kind.code(),
                p.page
            )),
            Err(e) => out.push(format!("{w}: page {}: {e}", p.page)),
        }
    }
    out
}

/// T's credentials against the sealed manifests: exactly one credential per FINAL page,
/// with the manifest's attempt, hash and row count, and none for anything else.
pub fn t_credentials(creds: &[PageCredential], manifests: &[WindowManifest]) -> Vec<String> {
    let mut out = Vec::new();
    let mut want: BTreeMap<(u32, u32), PageCredential> = BTreeMap::new();
    for m in manifests {
        for p in &m.final_pages {
            want.insert(
                (m.window.0, p.page.0),
                PageCredential {
                    window: m.window,
                    page: p.page,
                    attempt: m.attempt,
                    digest: p.digest,
                    rows: p.rows,
                },
            );
        }
    }
    let mut seen = BTreeMap::new();
    for c in creds {
        let k = (c.window.0, c.page.0);
        if seen.insert(k, ()).is_some() {
            out.push(format!(
                "the target ledger holds {}{} twice",
                c.window, c.page
            ));
        }
        match want.get(&k) {
            None => out.push(format!("the target ledger holds a credential for {}{} that no sealed manifest names", c.window, c.page)),
            Some(w) if w != c => out.push(format!(
                "target ledger credential {}{} (attempt {}, {} rows, {}) differs from the manifest (attempt {}, {} rows, {})",
                c.window, c.page, c.attempt.0, c.rows, c.digest, w.attempt.0, w.rows, w.digest
            )),
            Some(_) => {}
        }
    }
    for (k, w) in &want {
        if !seen.contains_key(k) {
            out.push(format!(
                "the target ledger has no credential for FINAL page {}{}",
                w.window, w.page
            ));
        }
    }
    out
}

/// Reads and checks J and the range chain of a table-generation.
pub async fn journal_and_chain_in(
    j: &Journal,
    job: JobId,
    generation: Generation,
    plan: &[KeyRange],
    complete: bool,
) -> Result<Vec<String>> {
    let rows = j.rows(job, generation).await?;
    let mut out = journal(job, generation, &rows);
    let Some(last) = rows.last() else {
        out.push(format!("job {job} {generation} has no journal record"));
        return Ok(out);
    };
    let Ok(head) = JournalRecord::decode(&last.bytes) else {
        return Ok(out);
    };
    match j.chain(job, generation).await {
        Ok(stored) => out.extend(range_chain(job, generation, plan, &stored, &head, complete)),
        Err(e) => out.push(e.to_string()),
    }
    Ok(out)
}

/// Reads the registry of a table-generation and checks every material.
pub async fn materials_in(
    reg: &Registry,
    store: &dyn MaterialStore,
    job: JobId,
    generation: Generation,
) -> Result<Vec<String>> {
    let entries = reg.entries(job, generation).await?;
    let usage = reg.usage(job).await?;
    let mut out = materials(store, &entries, usage).await;
    if let Some(u) = usage {
        let sum = reg.registered_bytes(job).await?;
        if sum != u.bytes {
            out.push(format!(
                "job {job}: usage row accounts {} bytes but its registered materials sum to {sum}",
                u.bytes
            ));
        }
    }
    Ok(out)
}

/// The replay cursor against L (DESIGN §6): with no group of the table in (B, F] no cursor
/// is needed (and none may be invented); otherwise T's cursor must be complete and at or
/// past the last such group, and where it names that group its digest must match.
pub fn replay_reached(
    cursor: Option<&crate::target::ReplayCursor>,
    last_before_f: Option<(&kernel::change::GroupEnd, Digest)>,
) -> Vec<String> {
    use std::cmp::Ordering;
    match (cursor, last_before_f) {
        (None, None) => vec![],
        (Some(c), None) => vec![format!(
            "the target ledger holds a replay cursor at {} but the change log has no change of the table up to the final fence (F)",
            c.end.pos
        )],
        (None, Some((g, _))) => vec![format!(
            "the target ledger has no replay cursor; replay must reach {}",
            g.pos
        )],
        (Some(c), Some((g, d))) => match c.end.pos.try_cmp(&g.pos) {
            Ok(Ordering::Less) => vec![format!(
                "the target ledger's cursor {} has not reached {}",
                c.end.pos, g.pos
            )],
            Ok(Ordering::Equal) if c.end != *g || c.group_digest != d => vec![format!(
                "the target ledger's cursor at {} names other content than the change log's group there",
                g.pos
            )],
            Ok(Ordering::Equal) if c.rows_done != 0 => vec![format!(
                "the target ledger's cursor is inside group {} (sub-cursor {})",
                c.end.pos, c.rows_done
            )],
            // Past F, a sub-cursor is a chunked STREAMING transaction in progress: F's
            // groups are all complete behind it.
            Ok(_) => vec![],
            Err(e) => vec![e.to_string()],
        },
    }
}

/// The activation credential in T against the one the audit recomputes.
pub fn activation(
    stored: Option<&crate::target::Activation>,
    expected: &crate::target::Activation,
) -> Vec<String> {
    match stored {
        None => vec![format!(
            "the target ledger holds no activation credential for job {} {}",
            expected.job, expected.generation
        )],
        Some(a) if a == expected => vec![],
        Some(a) => vec![format!(
            "the target ledger's activation credential {a:?} differs from the recomputed {expected:?}"
        )],
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::target::{Activation, ReplayCursor};
    use kernel::change::GroupEnd;
    use kernel::position::BinlogPos;

    fn end(p: u64) -> GroupEnd {
        GroupEnd {
            pos: BinlogPos::new("b.000001", p),
            gtid: None,
        }
    }

    #[test]
    fn replay_reached_rules() {
        let c = |p, r| ReplayCursor {
            end: end(p),
            rows_done: r,
            group_digest: Digest([1; 32]),
        };
        assert!(replay_reached(None, None).is_empty());
        assert!(!replay_reached(Some(&c(5, 0)), None).is_empty());
        assert!(!replay_reached(None, Some((&end(5), Digest([1; 32])))).is_empty());
        assert!(replay_reached(Some(&c(5, 0)), Some((&end(5), Digest([1; 32])))).is_empty());
        assert!(replay_reached(Some(&c(9, 0)), Some((&end(5), Digest([1; 32])))).is_empty());
        assert!(!replay_reached(Some(&c(4, 0)), Some((&end(5), Digest([1; 32])))).is_empty());
        assert!(!replay_reached(Some(&c(5, 3)), Some((&end(5), Digest([1; 32])))).is_empty());
        assert!(!replay_reached(Some(&c(5, 0)), Some((&end(5), Digest([2; 32])))).is_empty());
        // Inside a chunked group after F (a restart mid-way through a big STREAMING
        // transaction): F is reached.
        assert!(replay_reached(Some(&c(9, 3)), Some((&end(5), Digest([1; 32])))).is_empty());
        assert!(!replay_reached(Some(&c(4, 3)), Some((&end(5), Digest([1; 32])))).is_empty());
    }

    #[test]
    fn activation_rules() {
        let a = Activation {
            job: JobId(1),
            generation: Generation(1),
            b: BinlogPos::new("b.000001", 4),
            f: BinlogPos::new("b.000001", 9),
            chain_root: Digest([1; 32]),
            l_digest: Digest([2; 32]),
        };
        assert!(activation(Some(&a), &a).is_empty());
        assert!(!activation(None, &a).is_empty());
        let mut b = a.clone();
        b.l_digest = Digest([3; 32]);
        assert!(!activation(Some(&b), &a).is_empty());
    }

    fn history(n: usize) -> Vec<StoredRow> {
        use crate::record::Phase;
        let (job, g) = (JobId(5), Generation(2));
        let mut rec = JournalRecord::installed(job, g);
        let mut prev = journal_genesis(job, g);
        let mut out = Vec::new();
        for i in 0..n {
            if i > 0 {
                rec.phase = [Phase::Capturing, Phase::Windows][(i - 1).min(1)];
                rec.current = Some(crate::record::CurrentWindow {
                    window: kernel::ids::WindowId(i as u32),
                    attempt: kernel::ids::Attempt(1),
                });
            }
            let bytes = kernel::codec::encode(&rec);
            let digest = link(prev, &bytes);
            out.push(StoredRow {
                seq: i as u64 + 1,
                bytes,
                prev,
                digest,
                token: 1,
            });
            prev = digest;
        }
        out
    }

    proptest::proptest! {
        /// I5: flipping any bit of any stored J record, or dropping or reordering a
        /// record, is detected.
        #[test]
        fn any_flipped_bit_in_j_is_detected(n in 1usize..6, which in 0usize..6, at in 0usize..200, bit in 0u8..8) {
            let rows = history(n);
            proptest::prop_assert!(journal(JobId(5), Generation(2), &rows).is_empty());
            let mut t = rows.clone();
            let r = &mut t[which % n];
            let i = at % r.bytes.len();
            r.bytes[i] ^= 1 << bit;
            proptest::prop_assert!(!journal(JobId(5), Generation(2), &t).is_empty());
            if n > 1 {
                let mut d = rows.clone();
                d.remove(which % (n - 1));
                proptest::prop_assert!(!journal(JobId(5), Generation(2), &d).is_empty());
                let mut s = rows.clone();
                s.swap(0, 1);
                proptest::prop_assert!(!journal(JobId(5), Generation(2), &s).is_empty());
            }
        }
    }
}
