//! The checks of DESIGN §7, pure: each takes the gathered [`Evidence`] (and what an earlier
//! check recomputed from it) and returns its [`Finding`]s, empty when the evidence is
//! intact. [`audit`] runs them in a fixed order; the order is the report's order.
use super::evidence::{Evidence, Snapshot, Stored};
use super::fields::FieldSample;
pub use super::release_checks::{log_chain, released_record};
use super::report::{AuditReport, Check, Finding};
use kernel::change::GroupEnd;
use kernel::ids::Digest;
use kernel::position::BinlogPos;
use ledger::chain::ChainEntry;
use ledger::manifest::{Expect, WindowManifest};
use ledger::page::PageRef;
use ledger::record::JournalRecord;
use ledger::registry::{Entry, Kind, Usage};
use ledger::target::{Activation, ReplayCursor};
use std::collections::BTreeMap;

/// Whether the activation credential must already be in T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Require {
    /// Before activation: a credential, if present, must equal the recomputed one.
    Gate,
    /// After activation (J STREAMING): the credential must be present and equal.
    Activated,
}

/// The activation audit of DESIGN §7 over gathered evidence (pure): every check, in order.
pub fn audit(e: &Evidence, require: Require) -> AuditReport {
    let head = journal_head(e);
    let (manifests, window_findings) = windows(e);
    let expected = recompute_activation(e, head.as_ref());
    let mut out = journal(e, head.as_ref());
    out.extend(range_chain(e, head.as_ref()));
    out.extend(materials(e));
    out.extend(window_findings);
    out.extend(credentials(e, &manifests));
    out.extend(log(e));
    out.extend(markers(e, head.as_ref()));
    out.extend(cursor(e, require));
    out.extend(activation(e, expected.as_ref(), require));
    out.extend(field_findings(e.fields.as_ref()));
    let (released, released_bad) = released_findings(e);
    out.extend(released_bad);
    out.extend(match &e.schema {
        Ok(f) => super::schema::findings(f),
        Err(m) => named(
            Check::Schema,
            "schema",
            vec![format!("the schema chain cannot be read: {m}")],
        ),
    });
    AuditReport {
        job: e.job.0,
        generation: e.generation.0,
        phase: head.as_ref().map(|h| format!("{:?}", h.phase)),
        windows: chain(e).len(),
        final_pages: manifests.iter().map(|m| m.final_pages.len()).sum(),
        l_records: e.log.as_ref().map_or(0, |l| l.links.len()),
        expected,
        activation_present: matches!(e.activation, Ok(Some(_))),
        fields: e.fields.clone(),
        recorded_fields: Vec::new(),
        released,
        findings: out,
    }
}

/// Findings of `check` about `subject`, one per message.
fn named(check: Check, subject: &str, messages: Vec<String>) -> Vec<Finding> {
    messages
        .into_iter()
        .map(|message| Finding {
            check,
            subject: subject.to_string(),
            message,
        })
        .collect()
}

/// J's head: its last record, decoded (None when J is empty or the record does not decode).
pub fn journal_head(e: &Evidence) -> Option<JournalRecord> {
    e.journal
        .last()
        .and_then(|r| JournalRecord::decode(&r.bytes).ok())
}

/// The stored range chain, empty when it could not be read (that is [`range_chain`]'s
/// finding).
fn chain(e: &Evidence) -> &[(ChainEntry, Digest)] {
    e.chain.as_deref().unwrap_or(&[])
}

/// The registered materials, none when the registry could not be read (that is
/// [`materials`]'s finding).
fn entries(e: &Evidence) -> &[Entry] {
    e.registry.as_ref().map_or(&[], |r| r.0.as_slice())
}

/// J: its hash links, seqs, records and transitions, and a readable head.
pub fn journal(e: &Evidence, head: Option<&JournalRecord>) -> Vec<Finding> {
    let (job, g) = (e.job, e.generation);
    let mut out = named(
        Check::Journal,
        "journal",
        ledger::check::journal(job, g, &e.journal),
    );
    if head.is_none() {
        out.extend(named(
            Check::Journal,
            "journal",
            vec![format!("job {job} {g} has no readable journal head")],
        ));
    }
    out
}

/// The range chain: readable, equal to the plan, covering it, and its recomputed root
/// equal to J's (checked only with a readable J head).
pub fn range_chain(e: &Evidence, head: Option<&JournalRecord>) -> Vec<Finding> {
    let mut out = match &e.chain {
        Ok(_) => Vec::new(),
        Err(m) => named(Check::RangeChain, "range chain", vec![m.clone()]),
    };
    if let Some(h) = head {
        out.extend(named(
            Check::RangeChain,
            "range chain",
            ledger::check::range_chain(e.job, e.generation, &e.plan, chain(e), h, true),
        ));
    }
    out
}

/// The registry and the materials: readable, every registered material present, intact,
/// of its size and kind, and the usage row accounting their sum.
pub fn materials(e: &Evidence) -> Vec<Finding> {
    let (usage, sum) = match &e.registry {
        Ok((_, usage, sum)) => (*usage, *sum),
        Err(_) => (None, 0),
    };
    let mut out = match &e.registry {
        Ok(_) => Vec::new(),
        Err(m) => named(Check::Material, "registry", vec![m.clone()]),
    };
    let present: Vec<Entry> = entries(e)
        .iter()
        .filter(|x| !is_released(e, &x.digest))
        .cloned()
        .collect();
    out.extend(named(
        Check::Material,
        "materials",
        e.materials.materials(&present, usage),
    ));
    if let Some(u) = usage.filter(|u| u.bytes != sum) {
        out.extend(named(
            Check::Material,
            "registry",
            vec![format!(
                "usage row accounts {} bytes but the registered materials sum to {sum}",
                u.bytes
            )],
        ));
    }
    out
}

/// Every window of the range chain that the plan knows: its manifest and pages (see
/// [`Snapshot::window`]). Returns the manifests that decoded, for [`credentials`].
pub fn windows(e: &Evidence) -> (Vec<WindowManifest>, Vec<Finding>) {
    if let Some(r) = released_record(e) {
        return (
            Vec::new(),
            super::release_checks::window_findings(r, chain(e)),
        );
    }
    let registered: BTreeMap<Digest, Entry> =
        entries(e).iter().map(|x| (x.digest, x.clone())).collect();
    let (mut manifests, mut out) = (Vec::new(), Vec::new());
    // A window read after a schema change carries the version in force at its LOW
    // (DESIGN §16); the chain unread leaves version 1 only, so such a window is a finding.
    let later = e
        .schema
        .as_ref()
        .map_or_else(|_| Vec::new(), |f| crate::table::schema::later(&f.versions));
    for (entry, _) in chain(e) {
        let Some(range) = e.plan.get(entry.window.0 as usize) else {
            continue;
        };
        let expect = Expect {
            job: e.job,
            generation: e.generation,
            window: entry.window,
            range: range.clone(),
            schema_fingerprint: e.schema_fingerprint,
            later: later.clone(),
        };
        let (m, f) = e.materials.window(&registered, entry, &expect);
        out.extend(named(Check::Window, &entry.window.to_string(), f));
        manifests.extend(m);
    }
    (manifests, out)
}

/// T's page credentials: readable, exactly one per FINAL page of the sealed manifests.
pub fn credentials(e: &Evidence, manifests: &[WindowManifest]) -> Vec<Finding> {
    let messages = match (&e.credentials, released_record(e)) {
        (Ok(c), Some(r)) => super::release_checks::credential_findings(r, c),
        (Ok(c), None) => ledger::check::t_credentials(c, manifests),
        (Err(m), _) => vec![m.clone()],
    };
    named(Check::Credential, "target ledger", messages)
}

/// True when `d` was released by the recorded release and is absent from the store.
fn is_released(e: &Evidence, d: &Digest) -> bool {
    released_record(e).is_some_and(|r| r.names(d))
        && matches!(e.materials.answers.get(d), Some(Stored::Missing) | None)
}

/// The released evidence, one line each (what was checked before release), and a
/// finding for a release record that does not decode.
pub fn released_findings(e: &Evidence) -> (Vec<String>, Vec<Finding>) {
    let Some(r) = &e.released else {
        return (Vec::new(), Vec::new());
    };
    match &r.record {
        Ok(rec) => (
            super::release_checks::lines(rec, r.done, &r.at, e.horizon.as_ref()),
            Vec::new(),
        ),
        Err(m) => (
            Vec::new(),
            named(Check::Material, "release record", vec![m.clone()]),
        ),
    }
}

/// L from B to F: readable, every record verified, both markers found and the hash chain
/// whole between them.
pub fn log(e: &Evidence) -> Vec<Finding> {
    let (job, g) = (e.job, e.generation);
    let l = match &e.log {
        Ok(l) => l,
        Err(m) => return named(Check::Log, "change log", vec![m.clone()]),
    };
    let mut out = named(Check::Log, "change log", l.read_errors.clone());
    let messages = match (&l.b, &l.f) {
        (Some(b), Some(f)) => super::release_checks::log_findings(e, &l.links, b.seq, f.seq),
        (None, _) => vec![format!(
            "the change log holds no start marker (B) of job {job} {g} where the journal records the \
             start position (B)"
        )],
        (_, None) => vec![format!(
            "the change log holds no final fence marker (F) of job {job} {g} where the journal \
             records the final fence (F) (not taken yet?)"
        )],
    };
    out.extend(named(Check::Log, "change log", messages));
    out
}

/// J's B and F against where L's markers end (checked when L, both markers and J's head
/// were read).
pub fn markers(e: &Evidence, head: Option<&JournalRecord>) -> Vec<Finding> {
    let (Ok(l), Some(h)) = (&e.log, head) else {
        return Vec::new();
    };
    let (Some(b), Some(f)) = (&l.b, &l.f) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, kind, j, marker) in [
        (
            "the start position (B)",
            "start marker (B)",
            &h.b,
            &b.end.pos,
        ),
        (
            "the final fence (F)",
            "final fence marker (F)",
            &h.f,
            &f.end.pos,
        ),
    ] {
        if j.as_ref() != Some(marker) {
            out.push(format!(
                "the journal records {name} at {} but the change log's {kind} ends at {marker}",
                j.as_ref()
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "none".into()),
            ));
        }
    }
    named(Check::Journal, "journal", out)
}

/// T's replay cursor against L's last group of the table at or before F (checked when L
/// was read; see [`cursor_findings`]).
pub fn cursor(e: &Evidence, require: Require) -> Vec<Finding> {
    let Ok(l) = &e.log else {
        return Vec::new();
    };
    let cut = e
        .horizon
        .is_some_and(|h| l.b.as_ref().is_some_and(|b| h.below > b.seq));
    let messages = match (&e.cursor, released_record(e)) {
        // L before the horizon is gone: the cursor is checked against the one the audit
        // accepted before the release.
        (Ok(c), Some(r)) if cut => super::release_checks::cursor_findings(r, c.as_ref()),
        (Ok(c), _) => cursor_findings(
            c.as_ref(),
            l.last_group.as_ref().map(|(g, d)| (g, *d)),
            l.f.as_ref().map(|f| &f.end.pos),
            require,
        ),
        (Err(m), _) => vec![m.clone()],
    };
    named(Check::Replay, "target ledger cursor", messages)
}

/// T's replay cursor against L (DESIGN §6). After activation, continuous replay moves the
/// cursor past F even when (B, F] held no change of the table ("continuous replay then
/// resumes after the later of F and T's cursor"), and before activation the audit's own
/// field check replays the table to its pinned position P after F (`super::fields`): such
/// a cursor is accepted when it is at or past F, in both modes. A cursor before F with no
/// change of the table up to F is invented.
pub fn cursor_findings(
    cursor: Option<&ReplayCursor>,
    last_before_f: Option<(&GroupEnd, Digest)>,
    f: Option<&BinlogPos>,
    require: Require,
) -> Vec<String> {
    match (cursor, last_before_f, f, require) {
        (Some(c), None, Some(f), Require::Activated | Require::Gate) => {
            match c.end.pos.try_cmp(f) {
                Ok(std::cmp::Ordering::Less) => vec![format!(
                    "the target ledger's cursor {} is before the final fence (F) {f} although the change log has \
                     no change of the table up to the final fence (F)",
                    c.end.pos
                )],
                Ok(_) => vec![],
                Err(e) => vec![format!("the target ledger's cursor {} against the final fence (F) {f}: {e}", c.end.pos)],
            }
        }
        _ => ledger::check::replay_reached(cursor, last_before_f),
    }
}

/// The activation credential the evidence recomputes to: generation, B and F where L's
/// markers end, J's range-chain root and L's chain digest at F. None when L, a marker,
/// J's head or L's record at F is missing.
pub fn recompute_activation(e: &Evidence, head: Option<&JournalRecord>) -> Option<Activation> {
    let (Ok(l), Some(h)) = (&e.log, head) else {
        return None;
    };
    let (Some(b), Some(f)) = (&l.b, &l.f) else {
        return None;
    };
    let l_digest = match l.links.iter().find(|k| k.seq == f.seq) {
        Some(k) => k.chain,
        // L at F was deleted by GC: its digest is what the release recorded.
        None => {
            released_record(e)
                .filter(|_| e.horizon.is_some_and(|h| h.below > f.seq))?
                .l_digest
        }
    };
    Some(Activation {
        job: e.job,
        generation: e.generation,
        b: b.end.pos.clone(),
        f: f.end.pos.clone(),
        chain_root: h.chain_root,
        l_digest,
    })
}

/// T's activation credential: readable, equal to the recomputed one when present, present
/// when [`Require::Activated`], and absent when nothing recomputes one.
pub fn activation(e: &Evidence, expected: Option<&Activation>, require: Require) -> Vec<Finding> {
    let (present, mut out) = match &e.activation {
        Ok(a) => (a.as_ref(), Vec::new()),
        Err(m) => (None, vec![m.clone()]),
    };
    match (present, expected) {
        (Some(a), Some(x)) => out.extend(ledger::check::activation(Some(a), x)),
        (None, Some(x)) if require == Require::Activated => {
            out.extend(ledger::check::activation(None, x))
        }
        (Some(_), None) => out.push(
            "the target ledger holds an activation credential but the evidence does not recompute one".into(),
        ),
        _ => {}
    }
    named(Check::Activation, "target ledger activation", out)
}

// ---------------------------------------------------------------------------------------
// Materials and windows against the material store's answers
// ---------------------------------------------------------------------------------------

impl Snapshot {
    /// Size and kind tag of a present material, or the finding that it is not usable.
    fn sized(&self, e: &Entry) -> std::result::Result<(u64, &[u8]), String> {
        match self.answers.get(&e.digest) {
            Some(Stored::Manifest(b)) => Ok((b.len() as u64, &b[..b.len().min(4)])),
            Some(Stored::Facts(f)) => Ok((f.bytes, &f.tag)),
            Some(Stored::Bad(m)) => Err(format!("material {}: {m}", e.digest)),
            Some(Stored::Missing) | None => Err(format!(
                "material {} ({}) is registered but missing from the store",
                e.digest,
                e.kind.code()
            )),
        }
    }

    /// One registered material: present, intact, of its size and kind.
    pub fn material(&self, e: &Entry) -> Vec<String> {
        let (len, tag) = match self.sized(e) {
            Ok(x) => x,
            Err(m) => return vec![m],
        };
        let mut out = Vec::new();
        if len != e.bytes {
            out.push(format!(
                "material {}: {len} bytes, registry says {}",
                e.digest, e.bytes
            ));
        }
        if tag != e.kind.code().as_bytes() {
            out.push(format!(
                "material {}: not a {} record",
                e.digest,
                e.kind.code()
            ));
        }
        out
    }

    /// Every registered material of a table-generation, and the usage row's existence.
    pub fn materials(&self, entries: &[Entry], usage: Option<Usage>) -> Vec<String> {
        let mut out: Vec<String> = entries.iter().flat_map(|e| self.material(e)).collect();
        if usage.is_none() && !entries.is_empty() {
            out.push("materials are registered but the table has no usage row".into());
        }
        out
    }

    /// One window: its manifest decodes, hashes to the chain's value and verifies against
    /// the plan; every page it names is registered and intact and names this window,
    /// attempt, page number and row count.
    pub fn window(
        &self,
        registered: &BTreeMap<Digest, Entry>,
        entry: &ChainEntry,
        expect: &Expect,
    ) -> (Option<WindowManifest>, Vec<String>) {
        let w = format!("{}", entry.window);
        let m = match self.answers.get(&entry.manifest_hash) {
            Some(Stored::Manifest(b)) => match WindowManifest::decode(b) {
                Ok(m) => m,
                Err(e) => return (None, vec![format!("manifest of {w}: {e}")]),
            },
            Some(Stored::Bad(e)) => return (None, vec![format!("manifest of {w}: {e}")]),
            Some(Stored::Facts(_)) => {
                return (None, vec![format!("manifest of {w}: registered as a page")])
            }
            Some(Stored::Missing) | None => {
                return (
                    None,
                    vec![format!(
                        "manifest of {w} ({}) is missing",
                        entry.manifest_hash
                    )],
                )
            }
        };
        let mut out = ledger::manifest::verify(&m, expect);
        if m.attempt != entry.attempt {
            out.push(format!(
                "manifest of {w}: attempt {} but the range chain says {}",
                m.attempt, entry.attempt
            ));
        }
        if !registered.contains_key(&entry.manifest_hash) {
            out.push(format!("manifest of {w} is not in the material registry"));
        }
        let pages = m.raw_pages.iter().map(|p| (p, Kind::Raw));
        for (p, kind) in pages.chain(m.final_pages.iter().map(|p| (p, Kind::Final))) {
            out.extend(self.page(registered, &m, &w, p, kind));
        }
        (Some(m), out)
    }

    fn page(
        &self,
        registered: &BTreeMap<Digest, Entry>,
        m: &WindowManifest,
        w: &str,
        p: &PageRef,
        kind: Kind,
    ) -> Vec<String> {
        let Some(e) = registered.get(&p.digest) else {
            return vec![format!(
                "{w}: {} page {} ({}) is not registered",
                kind.code(),
                p.page,
                p.digest
            )];
        };
        let mut out = self.material(e);
        if e.bytes != p.bytes {
            out.push(format!(
                "{w}: page {} has {} bytes, manifest says {}",
                p.page, e.bytes, p.bytes
            ));
        }
        if let Some(Stored::Facts(f)) = self.answers.get(&p.digest) {
            match &f.page {
                Ok(x)
                    if x.window == m.window
                        && x.attempt == m.attempt
                        && x.page == p.page
                        && x.rows == u64::from(p.rows) => {}
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
}

/// The [`Check::Fields`] findings of recorded comparisons (`backfill audit`, read-only,
/// shows what the last activation audit and a standing verify finding recorded rather than
/// replaying the target): a recorded difference is a verified one and is no PASS until a
/// later audit or clean verify replaces it.
pub fn recorded_findings(checks: &[crate::store::field_checks::FieldCheck]) -> Vec<Finding> {
    checks
        .iter()
        .filter(|c| c.differing_rows > 0)
        .map(|c| Finding {
            check: Check::Fields,
            subject: format!("recorded {}", c.origin),
            message: c.line(),
        })
        .collect()
}

/// The [`Check::Fields`] findings of a comparison (none when it was not run: a library
/// caller without a comparer; such an audit says so in its report, `fields: not run`).
pub fn field_findings(sample: Option<&FieldSample>) -> Vec<Finding> {
    let Some(s) = sample else {
        return Vec::new();
    };
    let mut out: Vec<Finding> = s
        .examples
        .iter()
        .map(|d| Finding {
            check: Check::Fields,
            subject: format!("key {}", d.key),
            message: format!(
                "the target differs from the source at {} ({}): {}",
                s.position.as_deref().unwrap_or("?"),
                s.mode,
                d.text()
            ),
        })
        .collect();
    let shown = out.len() as u64;
    if s.differences() > shown {
        out.push(Finding {
            check: Check::Fields,
            subject: "fields".to_string(),
            message: format!(
                "{} differing rows in all ({} missing, {} extra, {} with differing fields); \
                 run `backfill verify --pinned` for the full list",
                s.differences(),
                s.missing,
                s.extra,
                s.differing_rows
            ),
        });
    }
    if !s.complete {
        out.push(Finding {
            check: Check::Fields,
            subject: "fields".to_string(),
            message: format!(
                "the field comparison stopped after {} rows before the end of the key space",
                s.rows_checked
            ),
        });
    }
    out
}
