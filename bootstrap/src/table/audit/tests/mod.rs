//! Unit tests of the activation audit: each check on good evidence and on the
//! corruptions it targets ([`checks`]), and the whole audit over the same evidence (here).
mod checks;
mod released;

use super::checks::cursor_findings;
use super::*;
use crate::table::replay::MarkerAt;
use kernel::change::GroupEnd;
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::log::LSeq;
use kernel::position::BinlogPos;
use kernel::range::KeyRange;
use ledger::chain::ChainEntry;
use ledger::journal::StoredRow;
use ledger::manifest::{Expect, WindowManifest};
use ledger::page::PageRef;
use ledger::record::{JournalRecord, Phase};
use ledger::registry::Usage;
use ledger::registry::{Entry, Kind};
use ledger::target::{Activation, PageCredential, ReplayCursor};
use std::collections::BTreeMap;

fn d(n: u8) -> Digest {
    Digest([n; 32])
}

fn links(from: u64, to: u64) -> Vec<Link> {
    (from..=to)
        .map(|s| Link {
            seq: LSeq(s),
            prev: d(s as u8),
            chain: d(s as u8 + 1),
        })
        .collect()
}

#[test]
fn l_chain_must_be_whole_and_linked_from_b_to_f() {
    assert!(log_chain(&links(5, 9), LSeq(5), LSeq(9)).is_empty());
    let mut hole = links(5, 9);
    hole.remove(2);
    assert!(!log_chain(&hole, LSeq(5), LSeq(9)).is_empty());
    let mut relinked = links(5, 9);
    relinked[3].prev = d(99);
    let f = log_chain(&relinked, LSeq(5), LSeq(9));
    assert!(
        f.iter().any(|m| m.contains("between records 7 and 8")),
        "{f:?}"
    );
    assert!(!log_chain(&links(6, 9), LSeq(5), LSeq(9)).is_empty());
}

fn empty_evidence() -> Evidence {
    Evidence {
        released: None,
        horizon: None,
        schema: Ok(crate::table::audit::schema::SchemaFacts::unchanged()),
        job: JobId(1),
        generation: Generation(1),
        plan: vec![KeyRange::ALL],
        schema_fingerprint: d(0),
        journal: Vec::new(),
        chain: Ok(Vec::new()),
        registry: Ok((Vec::new(), None, 0)),
        materials: Snapshot::default(),
        credentials: Ok(Vec::new()),
        cursor: Ok(None),
        activation: Ok(None),
        log: Ok(LogFacts::default()),
        fields: None,
    }
}

#[test]
fn missing_evidence_is_named_per_check() {
    let r = audit(&empty_evidence(), Require::Gate);
    assert!(!r.passed());
    let checks: Vec<Check> = r.findings.iter().map(|f| f.check).collect();
    assert!(checks.contains(&Check::Journal), "{}", r.text());
    assert!(checks.contains(&Check::Log), "{}", r.text());
    assert!(r.expected.is_none());
    let mut e = empty_evidence();
    e.credentials = Err("target ledger unreachable".into());
    e.activation = Ok(Some(Activation {
        job: JobId(1),
        generation: Generation(1),
        b: BinlogPos::new("b.000001", 4),
        f: BinlogPos::new("b.000001", 9),
        chain_root: d(1),
        l_digest: d(2),
    }));
    let r = audit(&e, Require::Gate);
    assert!(r
        .findings
        .iter()
        .any(|f| f.check == Check::Credential && f.message == "target ledger unreachable"));
    assert!(r
        .findings
        .iter()
        .any(|f| f.check == Check::Activation && f.subject == "target ledger activation"));
}

#[test]
fn a_streaming_cursor_past_f_is_accepted_without_changes_up_to_f() {
    let f = BinlogPos::new("mysql-bin.000001", 500);
    let at = |pos| ReplayCursor {
        end: kernel::change::GroupEnd {
            pos: BinlogPos::new("mysql-bin.000001", pos),
            gtid: None,
        },
        rows_done: 0,
        group_digest: kernel::ids::Digest::of(b"g"),
    };
    let (past, before) = (at(900), at(400));
    assert!(cursor_findings(Some(&past), None, Some(&f), Require::Activated).is_empty());
    let m = cursor_findings(Some(&before), None, Some(&f), Require::Activated);
    assert!(m[0].contains("before the final fence (F)"), "{m:?}");
    // Before activation too: the audit's field check replays to its pinned P after F
    // first; a cursor before F with no change up to F is still invented.
    assert!(cursor_findings(Some(&past), None, Some(&f), Require::Gate).is_empty());
    assert_eq!(
        cursor_findings(Some(&before), None, Some(&f), Require::Gate).len(),
        1
    );
    assert!(cursor_findings(None, None, Some(&f), Require::Activated).is_empty());
}

fn page_bytes(window: u32, page: u32, rows: usize) -> Vec<u8> {
    let p = ledger::page::FinalPage {
        key: ledger::page::PageKey {
            job: JobId(1),
            generation: Generation(1),
            window: WindowId(window),
            attempt: Attempt(1),
            page: PageNo(page),
        },
        rows: vec![Vec::new(); rows],
    };
    ledger::page::seal(&p).bytes
}

#[test]
fn materials_are_checked_from_their_facts() {
    let good = page_bytes(0, 0, 3);
    let e = Entry {
        digest: Digest::of(&good),
        kind: Kind::Final,
        bytes: good.len() as u64,
    };
    let mut s = Snapshot::default();
    s.answers
        .insert(e.digest, Stored::Facts(Facts::of(Kind::Final, &good)));
    assert!(s.material(&e).is_empty());
    let f = s.materials(std::slice::from_ref(&e), None);
    assert!(f[0].contains("no usage row"), "{f:?}");
    // Registry accounts other bytes, or another kind.
    let other = Entry {
        bytes: 1,
        kind: Kind::Raw,
        ..e.clone()
    };
    let f = s.material(&other);
    assert_eq!(f.len(), 2, "{f:?}");
    // Missing and refused by the store.
    s.answers.insert(e.digest, Stored::Missing);
    assert!(s.material(&e)[0].contains("missing from the store"));
    s.answers.insert(
        e.digest,
        Stored::Bad("bytes do not hash to their name".into()),
    );
    assert!(s.material(&e)[0].contains("do not hash"));
    // Facts keep only a few bytes of a page, whatever its size.
    let big = Facts::of(Kind::Final, &page_bytes(0, 0, 10_000));
    assert_eq!((big.tag.len(), big.page.map(|p| p.rows)), (4, Ok(10_000)));
    let junk = Facts::of(Kind::Final, b"FI");
    assert!(junk.page.is_err());
}

#[test]
fn a_window_is_checked_from_its_manifest_and_page_facts() {
    let page = page_bytes(0, 0, 3);
    let pref = PageRef {
        page: PageNo(0),
        digest: Digest::of(&page),
        rows: 3,
        bytes: page.len() as u64,
    };
    let m = WindowManifest {
        job: JobId(1),
        generation: Generation(1),
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        low: BinlogPos::new("b.000001", 4),
        high: BinlogPos::new("b.000001", 9),
        snapshot: None,
        schema_fingerprint: d(0),
        raw_pages: Vec::new(),
        folded_digest: d(0),
        folded_changes: 0,
        final_pages: vec![pref],
    };
    let sealed = m.seal();
    let entry = ChainEntry {
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        manifest_hash: sealed.digest,
    };
    let expect = Expect {
        job: JobId(1),
        generation: Generation(1),
        window: WindowId(0),
        range: KeyRange::ALL,
        schema_fingerprint: d(0),
        later: Vec::new(),
    };
    let reg = |kind, b: &[u8]| Entry {
        digest: Digest::of(b),
        kind,
        bytes: b.len() as u64,
    };
    let registered: BTreeMap<Digest, Entry> =
        [reg(Kind::Manifest, &sealed.bytes), reg(Kind::Final, &page)]
            .into_iter()
            .map(|e| (e.digest, e))
            .collect();
    let mut s = Snapshot::default();
    s.answers
        .insert(sealed.digest, Stored::Manifest(sealed.bytes.clone()));
    s.answers
        .insert(pref.digest, Stored::Facts(Facts::of(Kind::Final, &page)));
    let (got, f) = s.window(&registered, &entry, &expect);
    assert!(got.is_some() && f.is_empty(), "{f:?}");
    // A page that names another window (bytes of another place under this digest).
    s.answers.insert(
        pref.digest,
        Stored::Facts(Facts::of(Kind::Final, &page_bytes(1, 0, 3))),
    );
    let (_, f) = s.window(&registered, &entry, &expect);
    assert!(f.iter().any(|m| m.contains("names another place")), "{f:?}");
    // A missing manifest is named.
    s.answers.remove(&sealed.digest);
    let (got, f) = s.window(&registered, &entry, &expect);
    assert!(got.is_none() && f[0].contains("is missing"), "{f:?}");
}

// ---------------------------------------------------------------------------------------
// Good evidence: one window, one FINAL page, L from B (seq 5) to F (seq 9), one group of
// the table at seq 7, T's cursor at that group and the recomputed credential in T.
// ---------------------------------------------------------------------------------------

fn pos(p: u64) -> BinlogPos {
    BinlogPos::new("b.000001", p)
}

fn end(p: u64) -> GroupEnd {
    GroupEnd {
        pos: pos(p),
        gtid: None,
    }
}

/// The sealed manifest of window 0 naming one FINAL page (its bytes).
fn good_window() -> (WindowManifest, Vec<u8>, Vec<u8>) {
    let page = page_bytes(0, 0, 3);
    let m = WindowManifest {
        job: JobId(1),
        generation: Generation(1),
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        low: pos(4),
        high: pos(9),
        snapshot: None,
        schema_fingerprint: d(0),
        raw_pages: Vec::new(),
        folded_digest: d(0),
        folded_changes: 0,
        final_pages: vec![PageRef {
            page: PageNo(0),
            digest: Digest::of(&page),
            rows: 3,
            bytes: page.len() as u64,
        }],
    };
    let sealed = m.seal().bytes;
    (m, sealed, page)
}

fn j_row(seq: u64, prev: Digest, rec: &JournalRecord) -> StoredRow {
    let bytes = kernel::codec::encode(rec);
    StoredRow {
        seq,
        digest: ledger::journal::link(prev, &bytes),
        prev,
        bytes,
        token: 0,
    }
}

/// L's links from B to F (each linked to the one before).
fn l_links() -> Vec<Link> {
    (5..=9u64)
        .map(|s| Link {
            seq: LSeq(s),
            prev: d(s as u8),
            chain: d(s as u8 + 1),
        })
        .collect()
}

pub(super) fn good_evidence() -> Evidence {
    let (job, g) = (JobId(1), Generation(1));
    let (m, sealed, page) = good_window();
    let entry = ChainEntry {
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        manifest_hash: Digest::of(&sealed),
    };
    let root = ledger::chain::extend(ledger::chain::genesis(job, g), &entry);
    let head = JournalRecord {
        phase: Phase::Replaying,
        completed: 1,
        chain_root: root,
        b: Some(pos(4)),
        f: Some(pos(9)),
        ..JournalRecord::installed(job, g)
    };
    let reg = |kind, b: &[u8]| Entry {
        digest: Digest::of(b),
        kind,
        bytes: b.len() as u64,
    };
    let entries = vec![reg(Kind::Manifest, &sealed), reg(Kind::Final, &page)];
    let sum = entries.iter().map(|e| e.bytes).sum();
    let mut materials = Snapshot::default();
    materials
        .answers
        .insert(entries[0].digest, Stored::Manifest(sealed.clone()));
    materials.answers.insert(
        entries[1].digest,
        Stored::Facts(Facts::of(Kind::Final, &page)),
    );
    let group = Digest::of(b"group at 7");
    Evidence {
        released: None,
        horizon: None,
        schema: Ok(crate::table::audit::schema::SchemaFacts::unchanged()),
        job,
        generation: g,
        plan: vec![KeyRange::ALL],
        schema_fingerprint: d(0),
        journal: vec![j_row(1, ledger::journal::journal_genesis(job, g), &head)],
        chain: Ok(vec![(entry, root)]),
        registry: Ok((
            entries,
            Some(Usage {
                bytes: sum,
                quota: None,
            }),
            sum,
        )),
        materials,
        credentials: Ok(vec![PageCredential {
            window: WindowId(0),
            page: PageNo(0),
            attempt: Attempt(1),
            digest: m.final_pages[0].digest,
            rows: 3,
        }]),
        cursor: Ok(Some(ReplayCursor {
            end: end(7),
            rows_done: 0,
            group_digest: group,
        })),
        activation: Ok(Some(good_activation())),
        log: Ok(LogFacts {
            b: Some(MarkerAt {
                seq: LSeq(5),
                end: end(4),
            }),
            f: Some(MarkerAt {
                seq: LSeq(9),
                end: end(9),
            }),
            links: l_links(),
            read_errors: Vec::new(),
            last_group: Some((end(7), group)),
        }),
        fields: None,
    }
}

/// The credential `good_evidence` recomputes to.
fn good_activation() -> Activation {
    let (job, g) = (JobId(1), Generation(1));
    let (_, sealed, _) = good_window();
    let entry = ChainEntry {
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        manifest_hash: Digest::of(&sealed),
    };
    Activation {
        job,
        generation: g,
        b: pos(4),
        f: pos(9),
        chain_root: ledger::chain::extend(ledger::chain::genesis(job, g), &entry),
        l_digest: d(10),
    }
}

#[test]
fn good_evidence_passes_the_whole_audit() {
    for require in [Require::Gate, Require::Activated] {
        let r = audit(&good_evidence(), require);
        assert_eq!(r.findings, vec![], "{}", r.text());
        assert_eq!(r.expected, Some(good_activation()));
        assert_eq!(
            (r.windows, r.final_pages, r.l_records, r.activation_present),
            (1, 1, 5, true)
        );
        assert_eq!(r.phase.as_deref(), Some("Replaying"));
    }
    // Before activation T need not hold the credential yet.
    let mut e = good_evidence();
    e.activation = Ok(None);
    assert_eq!(audit(&e, Require::Gate).findings, vec![]);
}

fn sample(examples: Vec<fields::FieldDifference>, complete: bool) -> FieldSample {
    FieldSample {
        mode: "full".into(),
        seed: 0x5eed,
        position: Some("mysql-bin.000001:1234".into()),
        rows_checked: 10,
        chunks_compared: 1,
        chunks_skipped: 0,
        missing: 0,
        extra: 0,
        differing_rows: examples.len() as u64,
        examples,
        complete,
        elapsed_ms: 3,
    }
}

/// Evidence that is intact everywhere still fails when the field comparison found a
/// difference the evidence cannot see (issue 15 item 4): the named check is `Fields`, the
/// key and both values (hex) are in the finding, and every other check still passes.
#[test]
fn a_field_difference_fails_an_otherwise_intact_audit() {
    let mut e = good_evidence();
    e.fields = Some(sample(Vec::new(), true));
    for require in [Require::Gate, Require::Activated] {
        let r = audit(&e, require);
        assert!(r.passed(), "{}", r.text());
        assert!(r.text().contains("fields: full"), "{}", r.text());
    }
    e.fields = Some(sample(
        vec![fields::FieldDifference {
            kind: "field".into(),
            key: "id=5".into(),
            column: Some("v".into()),
            source_hex: Some("f2e9eee2".into()),
            target_hex: Some("f2e2eee9".into()),
        }],
        true,
    ));
    for require in [Require::Gate, Require::Activated] {
        let r = audit(&e, require);
        assert_eq!(r.findings.len(), 1, "{}", r.text());
        let f = &r.findings[0];
        assert_eq!((f.check, f.subject.as_str()), (Check::Fields, "key id=5"));
        assert!(
            f.message
                .contains("column v: source 0xf2e9eee2 target 0xf2e2eee9"),
            "{}",
            f.message
        );
        let err = r.into_result().expect_err("a difference is no PASS");
        assert!(err.to_string().contains("[Fields] key id=5"), "{err}");
    }
    // A walk that stopped early is no PASS either.
    e.fields = Some(sample(Vec::new(), false));
    let r = audit(&e, Require::Gate);
    assert_eq!(r.findings.len(), 1, "{}", r.text());
    assert_eq!(r.findings[0].check, Check::Fields);
}

/// The whole audit over evidence corrupted in every store at once: every finding, in the
/// order the checks run (this pins the order of the report).
#[test]
fn every_corruption_is_reported_in_check_order() {
    let mut e = good_evidence();
    e.journal[0].token = 7; // not checked
    e.journal[0].prev = d(42);
    if let Ok(c) = &mut e.chain {
        c[0].1 = d(43);
    }
    if let Ok((_, Some(u), _)) = &mut e.registry {
        u.bytes += 1;
    }
    let page = match &e.registry {
        Ok((entries, _, _)) => entries[1].digest,
        Err(_) => unreachable!(),
    };
    e.materials.answers.insert(page, Stored::Missing);
    if let Ok(c) = &mut e.credentials {
        c[0].rows = 4;
    }
    if let Ok(l) = &mut e.log {
        l.read_errors.push("record 6: body digest differs".into());
        l.links[2].prev = d(99);
        l.b = Some(MarkerAt {
            seq: LSeq(5),
            end: end(3),
        });
    }
    if let Ok(Some(c)) = &mut e.cursor {
        c.end = end(6);
    }
    if let Ok(Some(a)) = &mut e.activation {
        a.l_digest = d(77);
    }
    let r = audit(&e, Require::Activated);
    let got: Vec<String> = r
        .findings
        .iter()
        .map(|f| format!("{:?}|{}|{}", f.check, f.subject, f.message))
        .collect();
    let stored = Activation {
        l_digest: d(77),
        ..good_activation()
    };
    let recomputed = Activation {
        b: pos(3),
        ..good_activation()
    };
    let missing = format!("material {page} (FINP) is registered but missing from the store");
    let want = vec![
        "Journal|journal|journal record 1 of job 1 g1: its link to the previous record is broken".to_string(),
        "Journal|journal|journal record 1 of job 1 g1: its bytes do not hash to its digest (tampered)".into(),
        "RangeChain|range chain|range chain row of w0: stored root differs from the recomputed one"
            .into(),
        format!("Material|materials|{missing}"),
        "Material|registry|usage row accounts 151 bytes but the registered materials sum to 150"
            .into(),
        format!("Window|w0|{missing}"),
        format!(
            "Credential|target ledger|target ledger credential w0p0 (attempt 1, 4 rows, {page}) differs from the \
             manifest (attempt 1, 3 rows, {page})"
        ),
        "Log|change log|record 6: body digest differs".into(),
        "Log|change log|change log hash chain broken between records 6 and 7".into(),
        "Journal|journal|the journal records the start position (B) at b.000001:4 but the change log's start marker (B) ends at b.000001:3".into(),
        "Replay|target ledger cursor|the target ledger's cursor b.000001:6 has not reached b.000001:7".into(),
        format!(
            "Activation|target ledger activation|the target ledger's activation credential {stored:?} differs from the \
             recomputed {recomputed:?}"
        ),
    ];
    assert_eq!(got, want, "{got:#?}");
    assert_eq!(r.expected, Some(recomputed));
}

/// Without L the cursor is not checked and no credential is recomputed; one in T is then
/// a finding, and the store errors are reported as they came.
#[test]
fn store_errors_are_reported_and_skip_what_depends_on_them() {
    let mut e = good_evidence();
    e.chain = Err("chain unreadable".into());
    e.registry = Err("registry unreadable".into());
    e.log = Err("change log unreachable".into());
    e.cursor = Err("cursor unreadable".into());
    let r = audit(&e, Require::Activated);
    let got: Vec<String> = r
        .findings
        .iter()
        .map(|f| format!("{:?}|{}|{}", f.check, f.subject, f.message))
        .collect();
    let (empty, root) = (
        ledger::chain::genesis(JobId(1), Generation(1)),
        good_activation().chain_root,
    );
    let want = vec![
        "RangeChain|range chain|chain unreadable".to_string(),
        "RangeChain|range chain|range chain covers 0 of 1 planned windows".into(),
        format!(
            "RangeChain|range chain|range chain root recomputes to {empty} but the journal records {root}"
        ),
        "RangeChain|range chain|the journal counts 1 completed windows but the range chain holds 0".into(),
        "Material|registry|registry unreadable".into(),
        "Credential|target ledger|the target ledger holds a credential for w0p0 that no sealed manifest names".into(),
        "Log|change log|change log unreachable".into(),
        "Activation|target ledger activation|the target ledger holds an activation credential but the evidence does not \
         recompute one"
            .into(),
    ];
    assert_eq!(got, want, "{got:#?}");
}
