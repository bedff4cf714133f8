//! One test per check of [`crate::table::audit::checks`]: it passes on the good evidence
//! and names exactly what each corruption it targets breaks.
use super::*;
use crate::table::audit::checks;

fn finding(check: Check, subject: &str, message: &str) -> Finding {
    Finding {
        check,
        subject: subject.into(),
        message: message.into(),
    }
}

fn head(e: &Evidence) -> Option<JournalRecord> {
    checks::journal_head(e)
}

/// J's single record replaced by `rec` (linked and hashed correctly).
fn with_head(e: &mut Evidence, rec: &JournalRecord) {
    let genesis = ledger::journal::journal_genesis(e.job, e.generation);
    e.journal = vec![j_row(1, genesis, rec)];
}

fn good_head() -> JournalRecord {
    head(&good_evidence()).unwrap()
}

fn page_digest(e: &Evidence) -> Digest {
    match &e.registry {
        Ok((entries, _, _)) => entries[1].digest,
        Err(_) => unreachable!(),
    }
}

fn manifest_digest(e: &Evidence) -> Digest {
    match &e.chain {
        Ok(c) => c[0].0.manifest_hash,
        Err(_) => unreachable!(),
    }
}

#[test]
fn journal_check_names_broken_links_tampered_bytes_and_a_missing_head() {
    let e = good_evidence();
    assert_eq!(checks::journal(&e, head(&e).as_ref()), vec![]);
    let w = "journal record 1 of job 1 g1";
    // Bytes changed under the same digest.
    let mut e = good_evidence();
    let other = JournalRecord {
        completed: 0,
        ..good_head()
    };
    e.journal[0].bytes = kernel::codec::encode(&other);
    assert_eq!(
        checks::journal(&e, head(&e).as_ref()),
        vec![finding(
            Check::Journal,
            "journal",
            &format!("{w}: its bytes do not hash to its digest (tampered)")
        )]
    );
    // Linked to something else than J's genesis.
    let mut e = good_evidence();
    e.journal[0].prev = d(42);
    assert_eq!(
        checks::journal(&e, head(&e).as_ref()),
        vec![
            finding(
                Check::Journal,
                "journal",
                &format!("{w}: its link to the previous record is broken")
            ),
            finding(
                Check::Journal,
                "journal",
                &format!("{w}: its bytes do not hash to its digest (tampered)")
            ),
        ]
    );
    // No J at all, or a last record that does not decode.
    let mut e = good_evidence();
    e.journal.clear();
    let no_head = finding(
        Check::Journal,
        "journal",
        "job 1 g1 has no readable journal head",
    );
    assert_eq!(checks::journal(&e, None), vec![no_head.clone()]);
    let mut e = good_evidence();
    let genesis = ledger::journal::journal_genesis(e.job, e.generation);
    e.journal = vec![StoredRow {
        seq: 1,
        bytes: b"junk".to_vec(),
        prev: genesis,
        digest: ledger::journal::link(genesis, b"junk"),
        token: 0,
    }];
    assert_eq!(head(&e), None);
    let why = JournalRecord::decode(b"junk").unwrap_err();
    assert_eq!(
        checks::journal(&e, None),
        vec![
            finding(Check::Journal, "journal", &format!("{w}: {why}")),
            no_head
        ]
    );
}

#[test]
fn range_chain_check_names_an_unreadable_chain_and_every_root_that_differs() {
    let e = good_evidence();
    assert_eq!(checks::range_chain(&e, head(&e).as_ref()), vec![]);
    let rc = |m: &str| finding(Check::RangeChain, "range chain", m);
    // Unreadable; without a J head nothing else is compared.
    let mut e = good_evidence();
    e.chain = Err("chain unreadable".into());
    assert_eq!(checks::range_chain(&e, None), vec![rc("chain unreadable")]);
    // A stored prefix root that is not the recomputed one.
    let mut e = good_evidence();
    if let Ok(c) = &mut e.chain {
        c[0].1 = d(43);
    }
    assert_eq!(
        checks::range_chain(&e, head(&e).as_ref()),
        vec![rc(
            "range chain row of w0: stored root differs from the recomputed one"
        )]
    );
    // J records another root.
    let mut e = good_evidence();
    let root = good_head().chain_root;
    with_head(
        &mut e,
        &JournalRecord {
            chain_root: d(5),
            ..good_head()
        },
    );
    assert_eq!(
        checks::range_chain(&e, head(&e).as_ref()),
        vec![rc(&format!(
            "range chain root recomputes to {root} but the journal records {}",
            d(5)
        ))]
    );
}

#[test]
fn materials_check_names_the_registry_a_missing_material_and_the_usage_sum() {
    let e = good_evidence();
    assert_eq!(checks::materials(&e), vec![]);
    let mut e = good_evidence();
    e.registry = Err("registry unreadable".into());
    assert_eq!(
        checks::materials(&e),
        vec![finding(Check::Material, "registry", "registry unreadable")]
    );
    let mut e = good_evidence();
    let page = page_digest(&e);
    e.materials.answers.insert(page, Stored::Missing);
    assert_eq!(
        checks::materials(&e),
        vec![finding(
            Check::Material,
            "materials",
            &format!("material {page} (FINP) is registered but missing from the store")
        )]
    );
    let mut e = good_evidence();
    if let Ok((_, Some(u), _)) = &mut e.registry {
        u.bytes += 1;
    }
    assert_eq!(
        checks::materials(&e),
        vec![finding(
            Check::Material,
            "registry",
            "usage row accounts 151 bytes but the registered materials sum to 150"
        )]
    );
    let mut e = good_evidence();
    if let Ok((_, u, _)) = &mut e.registry {
        *u = None;
    }
    assert_eq!(
        checks::materials(&e),
        vec![finding(
            Check::Material,
            "materials",
            "materials are registered but the table has no usage row"
        )]
    );
}

#[test]
fn windows_check_names_a_missing_or_unregistered_manifest_and_skips_unplanned_windows() {
    let e = good_evidence();
    let (m, _, _) = good_window();
    assert_eq!(checks::windows(&e), (vec![m.clone()], vec![]));
    let manifest = manifest_digest(&e);
    let mut e = good_evidence();
    e.materials.answers.remove(&manifest);
    assert_eq!(
        checks::windows(&e),
        (
            vec![],
            vec![finding(
                Check::Window,
                "w0",
                &format!("manifest of w0 ({manifest}) is missing")
            )]
        )
    );
    let mut e = good_evidence();
    if let Ok((entries, _, _)) = &mut e.registry {
        entries.retain(|x| x.digest != manifest);
    }
    assert_eq!(
        checks::windows(&e),
        (
            vec![m],
            vec![finding(
                Check::Window,
                "w0",
                "manifest of w0 is not in the material registry"
            )]
        )
    );
    // A window the plan does not have is the range-chain check's finding, not this one's.
    let mut e = good_evidence();
    e.plan.clear();
    assert_eq!(checks::windows(&e), (vec![], vec![]));
}

#[test]
fn credentials_check_names_a_missing_a_doubled_and_an_unreadable_credential() {
    let e = good_evidence();
    let (m, _, _) = good_window();
    let ms = std::slice::from_ref(&m);
    assert_eq!(checks::credentials(&e, ms), vec![]);
    let t = |msg: &str| finding(Check::Credential, "target ledger", msg);
    let mut e = good_evidence();
    e.credentials = Err("target ledger unreachable".into());
    assert_eq!(
        checks::credentials(&e, ms),
        vec![t("target ledger unreachable")]
    );
    let mut e = good_evidence();
    e.credentials = Ok(Vec::new());
    assert_eq!(
        checks::credentials(&e, ms),
        vec![t("the target ledger has no credential for FINAL page w0p0")]
    );
    let mut e = good_evidence();
    if let Ok(c) = &mut e.credentials {
        c.push(c[0]);
    }
    assert_eq!(
        checks::credentials(&e, ms),
        vec![t("the target ledger holds w0p0 twice")]
    );
    // A credential no sealed manifest names (the manifest did not decode).
    let e = good_evidence();
    assert_eq!(
        checks::credentials(&e, &[]),
        vec![t(
            "the target ledger holds a credential for w0p0 that no sealed manifest names"
        )]
    );
}

#[test]
fn log_check_names_read_errors_missing_markers_and_a_broken_chain() {
    let e = good_evidence();
    assert_eq!(checks::log(&e), vec![]);
    let l = |m: &str| finding(Check::Log, "change log", m);
    let mut e = good_evidence();
    e.log = Err("change log unreachable".into());
    assert_eq!(checks::log(&e), vec![l("change log unreachable")]);
    let edit = |f: &dyn Fn(&mut LogFacts)| {
        let mut e = good_evidence();
        if let Ok(x) = &mut e.log {
            f(x);
        }
        checks::log(&e)
    };
    assert_eq!(
        edit(&|x| x.read_errors.push("record 6: body digest differs".into())),
        vec![l("record 6: body digest differs")]
    );
    assert_eq!(
        edit(&|x| x.links[2].prev = d(99)),
        vec![l("change log hash chain broken between records 6 and 7")]
    );
    assert_eq!(
        edit(&|x| x.b = None),
        vec![l(
            "the change log holds no start marker (B) of job 1 g1 where the journal records the \
             start position (B)"
        )]
    );
    assert_eq!(
        edit(&|x| x.f = None),
        vec![l(
            "the change log holds no final fence marker (F) of job 1 g1 where the journal \
             records the final fence (F) (not taken yet?)"
        )]
    );
}

#[test]
fn markers_check_compares_j_b_and_f_with_l_markers() {
    let e = good_evidence();
    assert_eq!(checks::markers(&e, head(&e).as_ref()), vec![]);
    let mut e = good_evidence();
    with_head(
        &mut e,
        &JournalRecord {
            b: Some(pos(3)),
            f: None,
            ..good_head()
        },
    );
    assert_eq!(
        checks::markers(&e, head(&e).as_ref()),
        vec![
            finding(
                Check::Journal,
                "journal",
                "the journal records the start position (B) at b.000001:3 but the change log's \
                 start marker (B) ends at b.000001:4"
            ),
            finding(
                Check::Journal,
                "journal",
                "the journal records the final fence (F) at none but the change log's final \
                 fence marker (F) ends at b.000001:9"
            ),
        ]
    );
    // Without J's head, L or a marker there is nothing to compare (other checks say so).
    assert_eq!(checks::markers(&e, None), vec![]);
    let h = head(&e);
    if let Ok(l) = &mut e.log {
        l.f = None;
    }
    assert_eq!(checks::markers(&e, h.as_ref()), vec![]);
}

#[test]
fn cursor_check_names_a_cursor_behind_l_a_missing_and_an_unreadable_cursor() {
    for require in [Require::Gate, Require::Activated] {
        assert_eq!(checks::cursor(&good_evidence(), require), vec![]);
    }
    let c = |m: &str| finding(Check::Replay, "target ledger cursor", m);
    let mut e = good_evidence();
    if let Ok(Some(x)) = &mut e.cursor {
        x.end = end(6);
    }
    assert_eq!(
        checks::cursor(&e, Require::Gate),
        vec![c(
            "the target ledger's cursor b.000001:6 has not reached b.000001:7"
        )]
    );
    let mut e = good_evidence();
    e.cursor = Ok(None);
    assert_eq!(
        checks::cursor(&e, Require::Gate),
        vec![c(
            "the target ledger has no replay cursor; replay must reach b.000001:7"
        )]
    );
    e.cursor = Err("cursor unreadable".into());
    assert_eq!(
        checks::cursor(&e, Require::Gate),
        vec![c("cursor unreadable")]
    );
    // Without L there is nothing to compare the cursor with (the log check says so).
    e.log = Err("change log unreachable".into());
    assert_eq!(checks::cursor(&e, Require::Gate), vec![]);
}

#[test]
fn the_credential_is_recomputed_from_l_markers_j_root_and_l_digest_at_f() {
    let e = good_evidence();
    let h = head(&e);
    assert_eq!(
        checks::recompute_activation(&e, h.as_ref()),
        Some(good_activation())
    );
    assert_eq!(checks::recompute_activation(&e, None), None);
    let edit = |f: &dyn Fn(&mut LogFacts)| {
        let mut e = good_evidence();
        if let Ok(x) = &mut e.log {
            f(x);
        }
        checks::recompute_activation(&e, h.as_ref())
    };
    assert_eq!(edit(&|x| x.links.truncate(4)), None);
    assert_eq!(edit(&|x| x.f = None), None);
    assert_eq!(
        edit(&|x| x.b = Some(MarkerAt {
            seq: LSeq(5),
            end: end(3)
        })),
        Some(Activation {
            b: pos(3),
            ..good_activation()
        })
    );
    let mut e = good_evidence();
    e.log = Err("change log unreachable".into());
    assert_eq!(checks::recompute_activation(&e, h.as_ref()), None);
}

#[test]
fn activation_check_names_a_differing_missing_unreadable_or_unbacked_credential() {
    let good = good_activation();
    let e = good_evidence();
    for require in [Require::Gate, Require::Activated] {
        assert_eq!(checks::activation(&e, Some(&good), require), vec![]);
    }
    let a = |m: &str| finding(Check::Activation, "target ledger activation", m);
    let other = Activation {
        l_digest: d(77),
        ..good.clone()
    };
    let mut e = good_evidence();
    e.activation = Ok(Some(other.clone()));
    assert_eq!(
        checks::activation(&e, Some(&good), Require::Gate),
        vec![a(&format!(
            "the target ledger's activation credential {other:?} differs from the recomputed {good:?}"
        ))]
    );
    // Absent: fine before activation, a finding after.
    e.activation = Ok(None);
    assert_eq!(checks::activation(&e, Some(&good), Require::Gate), vec![]);
    let none = a("the target ledger holds no activation credential for job 1 g1");
    assert_eq!(
        checks::activation(&e, Some(&good), Require::Activated),
        vec![none.clone()]
    );
    e.activation = Err("target ledger unreachable".into());
    assert_eq!(
        checks::activation(&e, Some(&good), Require::Activated),
        vec![a("target ledger unreachable"), none]
    );
    // Present although the evidence recomputes none.
    let e = good_evidence();
    assert_eq!(
        checks::activation(&e, None, Require::Gate),
        vec![a(
            "the target ledger holds an activation credential but the evidence does not recompute one"
        )]
    );
}
