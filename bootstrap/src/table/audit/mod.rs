//! The activation audit (DESIGN §7) and activation: the gate in front of STREAMING.
//!
//! # Why it is safe
//!
//! * It reads the evidence, not J's word (I5). [`gather`] reads every store once into an
//!   [`Evidence`] value: J's raw rows, the range chain, the registry, per registered
//!   material what the material store answered (it recomputes each blake3 as it reads),
//!   T's page credentials, cursor and activation credential, and L's records from B to
//!   F. Memory stays bounded by one page: pages are read one at a time and only their
//!   [`Facts`] are kept (size, kind tag, place, row count); manifests are kept whole.
//!   [`audit`] is a pure function of that value. Each check recomputes what it compares:
//!   J's hash links, the range-chain root, the manifests' page lists against the page
//!   facts and T's credentials, L's hash chain, and the replay cursor against L's last
//!   group of the table at or before F. A tampered material, manifest, credential, J
//!   record or L record changes a recomputed value and is reported as a named [`Finding`].
//! * Activation writes the deterministic credential (generation, B, F, range-chain root,
//!   L's chain digest at F; no timestamp) in T, and only then moves J to STREAMING. A
//!   crash between the two (fault point `activate.after_credential_before_j`) is recovered
//!   by auditing again: the same evidence recomputes the same credential, writing it again
//!   is AlreadyCommitted, and J moves on. A credential that differs from the recomputed one
//!   is a finding, never overwritten.
//! * After activation, every restart re-audits with the credential required
//!   ([`Require::Activated`]): the credential must equal the recomputed one and T's cursor
//!   must still be at or past F's last group (the accepted cursor never moves back).
//!
//! B and F are the markers of the table-generation in L whose groups end where J records
//! `b` and `f` (a restart may leave orphan B or F markers; they are no barrier).
pub mod offline;

use crate::table::replay::{self, MarkerAt, Scope};
use kernel::change::GroupEnd;
use kernel::control::IntentKind;
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::range::KeyRange;
use kernel::{failpoint, log, Error, Result};
use ledger::chain::ChainEntry;
use ledger::journal::{Journal, StoredRow};
use ledger::manifest::{Expect, WindowManifest};
use ledger::material::MaterialStore;
use ledger::page::{FinalPage, PageRef, RawPage};
use ledger::record::{JournalRecord, Phase};
use ledger::registry::{Entry, Kind, Registry, Usage};
use ledger::target::{self, Activation, PageCredential, ReplayCursor, TargetCtx};
use serde::Serialize;
use sqlx::mysql::MySqlPool;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------
// Evidence
// ---------------------------------------------------------------------------------------

/// What a store answered for one material (the store's own verification included).
///
/// Bounded memory: [`gather`] reads one material at a time; a page's bytes are hashed (by
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
            Kind::Raw => RawPage::decode(b).map(|x| (x.key, x.rows.len())),
            _ => FinalPage::decode(b).map(|x| (x.key, x.rows.len())),
        };
        Facts {
            bytes: b.len() as u64,
            tag: b[..b.len().min(4)].to_vec(),
            page: page
                .map(|(k, n)| PageFacts {
                    window: k.window,
                    attempt: k.attempt,
                    page: k.page,
                    rows: n as u64,
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

/// One L record's place in the hash chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub seq: u64,
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
}

// ---------------------------------------------------------------------------------------
// The pure audit
// ---------------------------------------------------------------------------------------

/// Which check a finding comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Journal,
    RangeChain,
    Window,
    Material,
    Credential,
    Replay,
    Log,
    Activation,
}

/// One failed check, naming its object (window, page, hash, credential, record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub check: Check,
    /// The object: `J`, `w3`, `T`, `L`, a digest.
    pub subject: String,
    pub message: String,
}

/// Whether the activation credential must already be in T.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Require {
    /// Before activation: a credential, if present, must equal the recomputed one.
    Gate,
    /// After activation (J STREAMING): the credential must be present and equal.
    Activated,
}

/// T's replay cursor against L (DESIGN §6). After activation, continuous replay moves the
/// cursor past F even when (B, F] held no change of the table ("continuous replay then
/// resumes after the later of F and T's cursor"): such a cursor is accepted when it is at
/// or past F. Before activation a cursor with no change up to F would be invented.
fn cursor_findings(
    cursor: Option<&ReplayCursor>,
    last_before_f: Option<(&kernel::change::GroupEnd, kernel::ids::Digest)>,
    f: Option<&kernel::position::BinlogPos>,
    require: Require,
) -> Vec<String> {
    match (cursor, last_before_f, f, require) {
        (Some(c), None, Some(f), Require::Activated) => match c.end.pos.try_cmp(f) {
            Ok(std::cmp::Ordering::Less) => vec![format!(
                "T's cursor {} is before F {f} although L has no change of the table up to F",
                c.end.pos
            )],
            Ok(_) => vec![],
            Err(e) => vec![format!("T's cursor {} against F {f}: {e}", c.end.pos)],
        },
        _ => ledger::check::replay_reached(cursor, last_before_f),
    }
}

/// The audit's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditReport {
    pub job: u64,
    pub generation: u64,
    pub phase: Option<String>,
    pub windows: usize,
    pub final_pages: usize,
    pub l_records: usize,
    /// The activation credential the evidence recomputes to (None if B, F or J is missing).
    #[serde(skip)]
    pub expected: Option<Activation>,
    pub activation_present: bool,
    pub findings: Vec<Finding>,
}

impl AuditReport {
    /// True when every check passed.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    /// One line per finding.
    pub fn text(&self) -> String {
        let mut s = format!(
            "audit of job {} g{}: {} ({} windows, {} FINAL pages, {} L records B..F, phase {})\n",
            self.job,
            self.generation,
            if self.passed() { "PASS" } else { "FAIL" },
            self.windows,
            self.final_pages,
            self.l_records,
            self.phase.as_deref().unwrap_or("?")
        );
        for f in &self.findings {
            s.push_str(&format!(
                "  - [{:?}] {}: {}\n",
                f.check, f.subject, f.message
            ));
        }
        s
    }

    /// The findings as one definite error (Ok when there are none).
    pub fn into_result(self) -> Result<AuditReport> {
        if self.passed() {
            return Ok(self);
        }
        Err(Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!(
                "activation audit of job {} g{} failed: {}",
                self.job,
                self.generation,
                self.findings
                    .iter()
                    .map(|f| format!("[{:?}] {}: {}", f.check, f.subject, f.message))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        ))
    }
}

fn push(out: &mut Vec<Finding>, check: Check, subject: &str, messages: Vec<String>) {
    out.extend(messages.into_iter().map(|message| Finding {
        check,
        subject: subject.to_string(),
        message,
    }));
}

/// L's chain from B to F: contiguous seqs, each record linked to the one before.
pub fn log_chain(links: &[Link], b_seq: u64, f_seq: u64) -> Vec<String> {
    let mut out = Vec::new();
    let want = f_seq.saturating_sub(b_seq) + 1;
    if links.len() as u64 != want {
        out.push(format!(
            "L holds {} records from B (seq {b_seq}) to F (seq {f_seq}), expected {want}",
            links.len()
        ));
    }
    if let Some(first) = links.first() {
        if first.seq != b_seq {
            out.push(format!(
                "L's range starts at seq {} instead of B's {b_seq}",
                first.seq
            ));
        }
    }
    for w in links.windows(2) {
        if w[1].seq != w[0].seq + 1 || w[1].prev != w[0].chain {
            out.push(format!(
                "L hash chain broken between records {} and {}",
                w[0].seq, w[1].seq
            ));
        }
    }
    out
}

/// The activation audit of DESIGN §7 over gathered evidence (pure).
pub fn audit(e: &Evidence, require: Require) -> AuditReport {
    let mut out = Vec::new();
    let (job, g) = (e.job, e.generation);
    // J.
    push(
        &mut out,
        Check::Journal,
        "J",
        ledger::check::journal(job, g, &e.journal),
    );
    let head = e
        .journal
        .last()
        .and_then(|r| JournalRecord::decode(&r.bytes).ok());
    if head.is_none() {
        push(
            &mut out,
            Check::Journal,
            "J",
            vec![format!("job {job} {g} has no readable J head")],
        );
    }
    // Range chain.
    let stored = match &e.chain {
        Ok(s) => s.clone(),
        Err(m) => {
            push(&mut out, Check::RangeChain, "range chain", vec![m.clone()]);
            Vec::new()
        }
    };
    if let Some(h) = &head {
        push(
            &mut out,
            Check::RangeChain,
            "range chain",
            ledger::check::range_chain(job, g, &e.plan, &stored, h, true),
        );
    }
    // Registry and materials.
    let (entries, usage, sum) = match &e.registry {
        Ok(r) => r.clone(),
        Err(m) => {
            push(&mut out, Check::Material, "registry", vec![m.clone()]);
            (Vec::new(), None, 0)
        }
    };
    push(
        &mut out,
        Check::Material,
        "materials",
        e.materials.materials(&entries, usage),
    );
    if let Some(u) = usage {
        if u.bytes != sum {
            push(
                &mut out,
                Check::Material,
                "registry",
                vec![format!(
                    "usage row accounts {} bytes but the registered materials sum to {sum}",
                    u.bytes
                )],
            );
        }
    }
    // Windows: manifest, pages, registry.
    let registered: BTreeMap<Digest, Entry> =
        entries.iter().map(|x| (x.digest, x.clone())).collect();
    let mut manifests: Vec<WindowManifest> = Vec::new();
    for (entry, _) in &stored {
        let Some(range) = e.plan.get(entry.window.0 as usize) else {
            continue;
        };
        let expect = Expect {
            job,
            generation: g,
            window: entry.window,
            range: *range,
            schema_fingerprint: e.schema_fingerprint,
        };
        let (m, f) = e.materials.window(&registered, entry, &expect);
        push(&mut out, Check::Window, &entry.window.to_string(), f);
        manifests.extend(m);
    }
    // T credentials.
    match &e.credentials {
        Ok(c) => push(
            &mut out,
            Check::Credential,
            "T",
            ledger::check::t_credentials(c, &manifests),
        ),
        Err(m) => push(&mut out, Check::Credential, "T", vec![m.clone()]),
    }
    // L from B to F, and the replay cursor.
    let mut expected = None;
    let mut l_records = 0;
    match &e.log {
        Err(m) => push(&mut out, Check::Log, "L", vec![m.clone()]),
        Ok(l) => {
            l_records = l.links.len();
            push(&mut out, Check::Log, "L", l.read_errors.clone());
            match (&l.b, &l.f) {
                (Some(b), Some(f)) => {
                    push(&mut out, Check::Log, "L", log_chain(&l.links, b.seq, f.seq));
                    if let Some(h) = &head {
                        if h.b.as_ref() != Some(&b.end.pos) {
                            push(
                                &mut out,
                                Check::Journal,
                                "J",
                                vec![format!(
                                    "J records B at {} but L's B marker ends at {}",
                                    h.b.as_ref()
                                        .map(|p| p.to_string())
                                        .unwrap_or_else(|| "none".into()),
                                    b.end.pos
                                )],
                            );
                        }
                        if h.f.as_ref() != Some(&f.end.pos) {
                            push(
                                &mut out,
                                Check::Journal,
                                "J",
                                vec![format!(
                                    "J records F at {} but L's F marker ends at {}",
                                    h.f.as_ref()
                                        .map(|p| p.to_string())
                                        .unwrap_or_else(|| "none".into()),
                                    f.end.pos
                                )],
                            );
                        }
                        let at_f = l.links.iter().find(|k| k.seq == f.seq).map(|k| k.chain);
                        if let Some(l_digest) = at_f {
                            expected = Some(Activation {
                                job,
                                generation: g,
                                b: b.end.pos.clone(),
                                f: f.end.pos.clone(),
                                chain_root: h.chain_root,
                                l_digest,
                            });
                        }
                    }
                }
                (None, _) => push(
                    &mut out,
                    Check::Log,
                    "L",
                    vec![format!(
                        "L holds no B marker of job {job} {g} where J records B"
                    )],
                ),
                (_, None) => push(
                    &mut out,
                    Check::Log,
                    "L",
                    vec![format!(
                        "L holds no F marker of job {job} {g} where J records F (F not taken yet?)"
                    )],
                ),
            }
            match &e.cursor {
                Ok(c) => push(
                    &mut out,
                    Check::Replay,
                    "T cursor",
                    cursor_findings(
                        c.as_ref(),
                        l.last_group.as_ref().map(|(g, d)| (g, *d)),
                        l.f.as_ref().map(|f| &f.end.pos),
                        require,
                    ),
                ),
                Err(m) => push(&mut out, Check::Replay, "T cursor", vec![m.clone()]),
            }
        }
    }
    // Activation credential.
    let present = match &e.activation {
        Ok(a) => a.clone(),
        Err(m) => {
            push(&mut out, Check::Activation, "T activation", vec![m.clone()]);
            None
        }
    };
    match (&present, &expected) {
        (Some(a), Some(x)) => push(
            &mut out,
            Check::Activation,
            "T activation",
            ledger::check::activation(Some(a), x),
        ),
        (None, Some(x)) if require == Require::Activated => push(
            &mut out,
            Check::Activation,
            "T activation",
            ledger::check::activation(None, x),
        ),
        (Some(_), None) => push(
            &mut out,
            Check::Activation,
            "T activation",
            vec!["T holds an activation credential but the evidence does not recompute one".into()],
        ),
        _ => {}
    }
    AuditReport {
        job: job.0,
        generation: g.0,
        phase: head.as_ref().map(|h| format!("{:?}", h.phase)),
        windows: stored.len(),
        final_pages: manifests.iter().map(|m| m.final_pages.len()).sum(),
        l_records,
        expected,
        activation_present: present.is_some(),
        findings: out,
    }
}

// ---------------------------------------------------------------------------------------
// Gathering (I/O)
// ---------------------------------------------------------------------------------------

/// Where the audit reads from.
pub struct Sources<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    pub store: &'a dyn MaterialStore,
    pub target: &'a mut mysql_async::Conn,
    pub ctx: &'a TargetCtx,
    pub plan: &'a [KeyRange],
    pub schema_fingerprint: Digest,
}

fn err_text<T>(r: Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// One material read, verified and reduced to what the checks need; its page bytes are
/// dropped before the next one is read.
fn snap(store: &dyn MaterialStore, d: &Digest, kind: Kind) -> Stored {
    match store.get(d) {
        Ok(Some(b)) if kind == Kind::Manifest => Stored::Manifest(b),
        Ok(Some(b)) => Stored::Facts(Facts::of(kind, &b)),
        Ok(None) => Stored::Missing,
        Err(e) => Stored::Bad(e.to_string()),
    }
}

/// Reads L from B to F: links, record errors, and the table's last group at or before F.
async fn read_log(
    pool: &MySqlPool,
    scope: &Scope,
    journal_b: Option<&kernel::position::BinlogPos>,
    journal_f: Option<&kernel::position::BinlogPos>,
) -> Result<LogFacts> {
    let mut facts = LogFacts {
        b: match journal_b {
            Some(b) => replay::find_marker(pool, scope, IntentKind::B, Some(b)).await?,
            None => None,
        },
        f: match journal_f {
            Some(f) => replay::find_marker(pool, scope, IntentKind::F, Some(f)).await?,
            None => None,
        },
        ..LogFacts::default()
    };
    let (Some(b), Some(f)) = (facts.b.clone(), facts.f.clone()) else {
        return Ok(facts);
    };
    let mut after = b.seq.saturating_sub(1);
    let mut open: Vec<log::StoredRecord> = Vec::new();
    while after < f.seq {
        let page = match log::read_range(pool, &scope.stream, after, f.seq, 500).await {
            Ok(p) => p,
            Err(e) if e.is_transient() => return Err(e),
            Err(e) => {
                facts.read_errors.push(e.to_string());
                // Step over the bad record one at a time so later ones are still checked.
                after += 1;
                continue;
            }
        };
        let Some(last) = page.last() else { break };
        after = last.seq;
        for r in page {
            facts.links.push(Link {
                seq: r.seq,
                prev: r.prev_chain,
                chain: r.chain,
            });
            // Group assembly for the table: chunks of one group are consecutive records.
            let touches = !replay::table_part(scope, &r)
                .map(|c| c.is_empty())
                .unwrap_or(false);
            let continues = open
                .last()
                .is_some_and(|o| o.record.end.is_none() && o.record.start == r.record.start);
            if continues || touches {
                if !continues {
                    open.clear();
                }
                let done = r.record.end.is_some();
                open.push(r);
                if done {
                    match replay::build_group(scope, &open) {
                        Ok(replay::Built::Complete { group, .. }) if !group.changes.is_empty() => {
                            facts.last_group = Some((group.end.clone(), group.digest()));
                        }
                        Ok(_) => {}
                        Err(d) => facts.read_errors.push(d.message),
                    }
                    open.clear();
                }
            } else {
                open.clear();
            }
        }
    }
    Ok(facts)
}

/// Gathers every piece of evidence the audit checks.
pub async fn gather(s: &mut Sources<'_>) -> Result<Evidence> {
    let (job, g) = (s.scope.job, s.scope.generation);
    let journal = Journal::new(s.pool.clone());
    let rows = journal.rows(job, g).await?;
    let head = rows
        .last()
        .and_then(|r| JournalRecord::decode(&r.bytes).ok());
    let chain = err_text(journal.chain(job, g).await);
    let reg = Registry::new(s.pool.clone());
    let registry = err_text(
        async {
            let entries = reg.entries(job, g).await?;
            let usage = reg.usage(job).await?;
            let sum = reg.registered_bytes(job).await?;
            Ok((entries, usage, sum))
        }
        .await,
    );
    let mut materials = Snapshot::default();
    if let Ok((entries, _, _)) = &registry {
        for e in entries {
            materials
                .answers
                .insert(e.digest, snap(s.store, &e.digest, e.kind));
        }
    }
    if let Ok(c) = &chain {
        for (e, _) in c {
            materials
                .answers
                .entry(e.manifest_hash)
                .or_insert_with(|| snap(s.store, &e.manifest_hash, Kind::Manifest));
        }
    }
    let credentials = err_text(target::page_credentials(s.target, s.ctx).await);
    let cursor = err_text(target::replay_cursor(s.target, s.ctx, false).await);
    let activation = err_text(target::read_activation(s.target, s.ctx).await);
    let log = err_text(
        read_log(
            s.pool,
            s.scope,
            head.as_ref().and_then(|h| h.b.as_ref()),
            head.as_ref().and_then(|h| h.f.as_ref()),
        )
        .await,
    );
    Ok(Evidence {
        job,
        generation: g,
        plan: s.plan.to_vec(),
        schema_fingerprint: s.schema_fingerprint,
        journal: rows,
        chain,
        registry,
        materials,
        credentials,
        cursor,
        activation,
        log,
    })
}

// ---------------------------------------------------------------------------------------
// Activation
// ---------------------------------------------------------------------------------------

/// The result of [`activate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Activated {
    pub credential: Activation,
    /// False when T already held the credential (a re-run after a crash).
    pub written: bool,
    pub report: AuditReport,
}

fn rank(p: Phase) -> u8 {
    p as u8
}

/// Moves J forward through `phases` up to `to` (each step one J record).
pub async fn advance_j(
    journal: &Journal,
    lease: &ledger::lease::Lease,
    job: JobId,
    g: Generation,
    to: Phase,
) -> Result<ledger::journal::Head> {
    let mut head = journal.head(job, g).await?.ok_or_else(|| {
        Error::definite(
            DefiniteCode::Preparation,
            format!("job {job} {g} has no J record"),
        )
    })?;
    for phase in [
        Phase::Fenced,
        Phase::Replaying,
        Phase::Audited,
        Phase::Streaming,
    ] {
        if rank(head.record.phase) < rank(phase) && rank(phase) <= rank(to) {
            let mut next = head.record.clone();
            next.phase = phase;
            head = journal.append(lease, &head, next).await?;
        }
    }
    Ok(head)
}

/// Audits and, only if every check passes, writes the activation credential in T and
/// then moves J to STREAMING. Re-running after a crash at any step converges (module
/// doc); on a table already STREAMING it re-checks the credential and the accepted cursor.
/// A failed audit is a definite `evidence_corrupt` error naming every finding; neither T
/// nor J is written.
pub async fn activate(
    s: &mut Sources<'_>,
    journal: &Journal,
    lease: &ledger::lease::Lease,
) -> Result<Activated> {
    let (job, g) = (s.scope.job, s.scope.generation);
    let head = journal.head(job, g).await?.ok_or_else(|| {
        Error::definite(
            DefiniteCode::Preparation,
            format!("job {job} {g} has no J record"),
        )
    })?;
    if head.record.paused.is_some()
        || !matches!(
            head.record.phase,
            Phase::Fenced | Phase::Replaying | Phase::Audited | Phase::Streaming
        )
    {
        return Err(Error::definite(
            DefiniteCode::Preparation,
            format!(
                "job {job} {g}: activation needs F and replay first and no pause; J is in {:?}{}",
                head.record.phase,
                if head.record.paused.is_some() {
                    " (paused)"
                } else {
                    ""
                }
            ),
        ));
    }
    let require = if head.record.phase == Phase::Streaming {
        Require::Activated
    } else {
        Require::Gate
    };
    let report = audit(&gather(s).await?, require).into_result()?;
    let credential = report.expected.clone().ok_or_else(|| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            "the audit recomputed no activation credential",
        )
    })?;
    if head.record.phase == Phase::Streaming {
        return Ok(Activated {
            credential,
            written: false,
            report,
        });
    }
    advance_j(journal, lease, job, g, Phase::Audited).await?;
    let written = target::write_activation(s.target, s.ctx, &credential).await?;
    failpoint::hit(crate::table::faults::ACTIVATE_AFTER_CREDENTIAL_BEFORE_J);
    advance_j(journal, lease, job, g, Phase::Streaming).await?;
    Ok(Activated {
        credential,
        written,
        report,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
