//! The audit's checks of evidence released by retention (DESIGN §17), pure: what the
//! audit still checks against the release record once materials or L records are gone
//! (the range chain's manifests among the released ones, T's credentials against their
//! recorded digest, L from the GC horizon on), and the report's `released:` lines. A
//! material or L record missing without a release record stays `evidence_corrupt`.
use super::evidence::{Evidence, Link};
use super::released::{credentials_digest, ReleaseRecord};
use super::report::{Check, Finding};
use kernel::ids::Digest;
use kernel::log::LSeq;
use ledger::target::PageCredential;

/// The release record, when one is recorded and decodes (a record that does not decode
/// is [`released_findings`]' finding, and then nothing counts as released).
pub fn released_record(e: &Evidence) -> Option<&super::released::ReleaseRecord> {
    e.released.as_ref().and_then(|r| r.record.as_ref().ok())
}

/// L's chain from B to F: contiguous seqs, each record linked to the one before.
pub fn log_chain(links: &[Link], b_seq: LSeq, f_seq: LSeq) -> Vec<String> {
    let mut out = Vec::new();
    let want = f_seq.0.saturating_sub(b_seq.0) + 1;
    if links.len() as u64 != want {
        out.push(format!(
            "the change log holds {} records from the start position (B) (seq {b_seq}) to the \
             final fence (F) (seq {f_seq}), expected {want}",
            links.len()
        ));
    }
    if let Some(first) = links.first() {
        if first.seq != b_seq {
            out.push(format!(
                "the change log's range starts at seq {} instead of the start position's (B) \
                 {b_seq}",
                first.seq
            ));
        }
    }
    for w in links.windows(2) {
        if w[1].seq != w[0].seq.next() || w[1].prev != w[0].chain {
            out.push(format!(
                "change log hash chain broken between records {} and {}",
                w[0].seq, w[1].seq
            ));
        }
    }
    out
}

/// The range chain against a release: every window's manifest must be one the release
/// names (its bytes were checked by the audit before the release, and are gone now).
pub fn window_findings(
    r: &ReleaseRecord,
    chain: &[(ledger::chain::ChainEntry, Digest)],
) -> Vec<Finding> {
    chain
        .iter()
        .filter(|(e, _)| !r.names(&e.manifest_hash))
        .map(|(e, _)| Finding {
            check: Check::Window,
            subject: e.window.to_string(),
            message: format!(
                "the range chain names manifest {} of {} but the release record does not: \
                 the chain changed after the release",
                e.manifest_hash, e.window
            ),
        })
        .collect()
}

/// T's page credentials against the ones the audit checked before the release.
pub fn credential_findings(r: &ReleaseRecord, creds: &[PageCredential]) -> Vec<String> {
    let d = credentials_digest(creds);
    if creds.len() as u32 == r.credentials && d == r.credentials_digest {
        return Vec::new();
    }
    vec![format!(
        "the target ledger holds {} page credentials (digest {d}) but the release recorded {} (digest {}): \
         the target ledger's credentials changed after the release",
        creds.len(),
        r.credentials,
        r.credentials_digest
    )]
}

/// L from B to F when GC may have deleted its start: the records below the stream's
/// horizon are released (allowed only once this table's release is recorded); the rest
/// must chain on from the horizon's digest.
pub fn log_findings(e: &Evidence, links: &[Link], b: LSeq, f: LSeq) -> Vec<String> {
    let Some(h) = e.horizon.filter(|h| h.below > b) else {
        return log_chain(links, b, f);
    };
    if released_record(e).is_none() {
        return vec![format!(
            "change log records from the start position (B) (seq {b}) to {} were deleted but no release of this table is \
             recorded: evidence_corrupt",
            h.below.0 - 1
        )];
    }
    let kept: Vec<Link> = links.iter().filter(|l| l.seq >= h.below).copied().collect();
    if h.below > f {
        return Vec::new();
    }
    let mut out = log_chain(&kept, h.below, f);
    if let Some(first) = kept.first() {
        if first.prev != h.below_chain {
            out.push(format!(
                "change log record {} does not link to the GC horizon's digest",
                first.seq
            ));
        }
    }
    out
}

/// The `released:` lines of the audit report.
pub fn lines(
    r: &ReleaseRecord,
    done: bool,
    at: &str,
    h: Option<&kernel::log::Horizon>,
) -> Vec<String> {
    let count = |k: &str| r.materials.iter().filter(|m| m.kind == k).count();
    let mut out = vec![format!(
        "{} materials ({} bytes: {} RAW pages, {} FINAL pages, {} manifests) of {} windows {} at {at}; \
         checked before release: {} FINAL pages with {} target ledger credentials (digest {}), range-chain \
         root {}, the change log's digest at the final fence (F) {}",
        r.materials.len(),
        r.bytes(),
        count("RAWP"),
        count("FINP"),
        count("WMAN"),
        r.windows,
        if done { "released" } else { "being released (intent recorded)" },
        r.final_pages,
        r.credentials,
        r.credentials_digest,
        r.chain_root,
        r.l_digest,
    )];
    if let Some(h) = h.filter(|h| h.deleted > 0) {
        out.push(format!(
            "change log records of the stream below seq {} deleted by GC ({} records; {} of them from the start position (B) to the final fence (F) were \
             checked before release)",
            h.below, h.deleted, r.l_records
        ));
    }
    out
}

/// T's replay cursor against the one the audit accepted before the release (L before the
/// GC horizon is gone, so the table's last group at or before F cannot be read again):
/// present if it was, and never before it.
pub fn cursor_findings(
    r: &ReleaseRecord,
    cursor: Option<&ledger::target::ReplayCursor>,
) -> Vec<String> {
    match (&r.cursor, cursor) {
        (None, _) => Vec::new(),
        (Some(was), None) => vec![format!(
            "the target ledger holds no replay cursor but the release recorded it at {was}"
        )],
        (Some(was), Some(c)) => match c.end.pos.try_cmp(was) {
            Ok(std::cmp::Ordering::Less) => vec![format!(
                "the target ledger's cursor {} is before {was}, where the release recorded it: it moved back",
                c.end.pos
            )],
            Ok(_) => Vec::new(),
            Err(e) => vec![format!(
                "the target ledger's cursor {} against the release's {was}: {e}",
                c.end.pos
            )],
        },
    }
}
