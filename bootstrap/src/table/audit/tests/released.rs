//! The audit after retention released evidence (DESIGN §17): released materials and L are
//! reported from the release record, checked against it, and anything missing without a
//! record is still a finding.
use super::good_evidence;
use crate::table::audit::released::{credentials_digest, ReleaseRecord, Released};
use crate::table::audit::*;
use kernel::log::{Horizon, LSeq};

/// The record a release of `e` writes (every registered material, T's credentials, the
/// activation credential).
fn record_of(e: &Evidence) -> ReleaseRecord {
    let x = audit(e, Require::Activated).expected.unwrap();
    let mut materials: Vec<Released> = e
        .registry
        .as_ref()
        .unwrap()
        .0
        .iter()
        .map(|m| Released {
            digest: m.digest,
            kind: m.kind.code().into(),
            bytes: m.bytes,
        })
        .collect();
    materials.sort_by_key(|m| m.digest.0);
    let creds = e.credentials.as_ref().unwrap();
    ReleaseRecord {
        job: e.job,
        generation: e.generation,
        materials,
        windows: 1,
        final_pages: 1,
        l_records: 5,
        credentials: creds.len() as u32,
        credentials_digest: credentials_digest(creds),
        b: x.b,
        f: x.f,
        chain_root: x.chain_root,
        l_digest: x.l_digest,
        cursor: e
            .cursor
            .as_ref()
            .unwrap()
            .as_ref()
            .map(|c| c.end.pos.clone()),
    }
}

/// `e` after the release: bytes gone, registry rows and usage gone, record done.
fn released(mut e: Evidence) -> Evidence {
    let rec = record_of(&e);
    for a in e.materials.answers.values_mut() {
        *a = Stored::Missing;
    }
    e.registry = Ok((
        Vec::new(),
        Some(ledger::registry::Usage {
            bytes: 0,
            quota: None,
        }),
        0,
    ));
    e.released = Some(ReleasedEvidence {
        done: true,
        at: "2026-12-02 14:00:00 UTC".into(),
        record: Ok(rec),
    });
    e
}

#[test]
fn a_released_table_passes_with_released_lines() {
    let r = audit(&released(good_evidence()), Require::Activated);
    assert_eq!(r.findings, vec![], "{}", r.text());
    assert_eq!(r.released.len(), 1, "{}", r.text());
    assert!(r.text().contains("released: 2 materials"), "{}", r.text());
}

#[test]
fn a_material_missing_without_a_release_record_is_a_finding() {
    let mut e = good_evidence();
    for a in e.materials.answers.values_mut() {
        *a = Stored::Missing;
    }
    let r = audit(&e, Require::Activated);
    assert!(
        r.findings.iter().any(|f| f.check == Check::Material),
        "{}",
        r.text()
    );
    assert!(r.released.is_empty());
    assert!(r.into_result().is_err());
}

#[test]
fn after_a_release_t_credentials_and_the_chain_are_checked_against_the_record() {
    let mut e = released(good_evidence());
    e.credentials.as_mut().unwrap()[0].rows += 1;
    let r = audit(&e, Require::Activated);
    assert!(
        r.findings.iter().any(|f| f.check == Check::Credential),
        "{}",
        r.text()
    );
    let mut e = released(good_evidence());
    if let Ok(c) = e.chain.as_mut() {
        c[0].0.manifest_hash = kernel::ids::Digest([9; 32]);
    }
    let r = audit(&e, Require::Activated);
    assert!(
        r.findings.iter().any(|f| f.check == Check::Window),
        "{}",
        r.text()
    );
}

#[test]
fn l_below_the_horizon_is_released_only_with_a_release_record() {
    // L from B (5) to F (9) deleted up to 7: the rest links to the horizon's digest.
    let cut = |mut e: Evidence| {
        if let Ok(l) = e.log.as_mut() {
            l.links.retain(|k| k.seq >= LSeq(7));
        }
        e.horizon = Some(Horizon {
            below: LSeq(7),
            below_chain: super::d(7),
            deleted: 6,
        });
        e
    };
    let r = audit(&cut(released(good_evidence())), Require::Activated);
    assert_eq!(r.findings, vec![], "{}", r.text());
    assert!(
        r.released.iter().any(|l| l.contains("below seq 7")),
        "{}",
        r.text()
    );
    let r = audit(&cut(good_evidence()), Require::Activated);
    assert!(
        r.findings
            .iter()
            .any(|f| f.check == Check::Log && f.message.contains("no release")),
        "{}",
        r.text()
    );
    // L deleted past F: the credential is recomputed with the recorded digest at F.
    let mut e = released(good_evidence());
    if let Ok(l) = e.log.as_mut() {
        l.links.clear();
        l.last_group = None;
    }
    e.horizon = Some(Horizon {
        below: LSeq(20),
        below_chain: super::d(20),
        deleted: 19,
    });
    let r = audit(&e, Require::Activated);
    assert_eq!(r.findings, vec![], "{}", r.text());
    // ...and T's cursor against the one accepted at the release: it never moves back.
    if let Ok(Some(c)) = e.cursor.as_mut() {
        c.end = super::end(6);
    }
    let r = audit(&e, Require::Activated);
    assert!(
        r.findings
            .iter()
            .any(|f| f.check == Check::Replay && f.message.contains("release")),
        "{}",
        r.text()
    );
}
