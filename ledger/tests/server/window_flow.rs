//! One window end to end through the ledger, in the order of DESIGN §5 steps 7-9: seal
//! (bytes, registry, manifest), apply to T, complete in J + range chain; then every audit
//! check passes, a re-apply after "crash between T and J" runs no DML, and tampering with
//! a FINAL page stops the re-apply.
use crate::common::*;
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use kernel::position::BinlogPos;
use ledger::apply::{self, Applied, Limits};
use ledger::chain::{self, ChainEntry};
use ledger::check;
use ledger::journal::{Head, Journal};
use ledger::manifest::Expect;
use ledger::material::LocalDirStore;
use ledger::page::{self, PageKey, RawPage};
use ledger::range::KeyRange;
use ledger::record::{JournalRecord, Phase};
use ledger::registry::{Kind, Registry};
use ledger::seal::{self, SealedWindow, WindowFacts};
use ledger::target;
use std::collections::BTreeMap;
use std::time::Duration;

#[tokio::test]
async fn a_window_is_sealed_applied_recorded_and_audited() {
    let s = shared_target();
    let (pool, _) = state_db("lw_state").await;
    let tdb = fresh_target(s, "lw_target");
    let dir = tempfile::tempdir().unwrap();
    let store = LocalDirStore::open(dir.path()).unwrap();
    let reg = Registry::new(pool.clone());
    let j = Journal::new(pool.clone());
    let (job, g) = (JobId(41), Generation(1));
    let (lease, h) = windows_phase(&pool, &j, &reg, (job, g)).await;
    let sch = schema(&tdb);
    let sealed = seal_first_window(&store, &reg, (job, g), sch.fingerprint()).await;
    assert_eq!(sealed.manifest.final_pages.len(), 3);
    // T: apply the saved FINAL bytes.
    let ctx = target::TargetCtx {
        job,
        generation: g,
        schema: sch.clone(),
        keyer: kernel::key::Keyer::of(&sch).unwrap(),
        token: lease.token,
        within: None,
    };
    let mut c = claimed(s, &tdb, &ctx).await;
    let (m, pages) = seal::load_final_pages(&store, &sealed.manifest_hash)
        .await
        .unwrap();
    for b in &pages {
        assert_eq!(
            apply::apply_page(&mut c, &ctx, b, Limits::default())
                .await
                .unwrap(),
            Applied::Committed
        );
    }
    // Crash between T and J: the restart re-applies the saved bytes, T says AlreadyCommitted.
    let n = dml_count(s, &tdb);
    assert_eq!(n, 25);
    for b in &pages {
        assert_eq!(
            apply::apply_page(&mut c, &ctx, b, Limits::default())
                .await
                .unwrap(),
            Applied::AlreadyCommitted
        );
    }
    assert_eq!(dml_count(s, &tdb), n);
    // J + range chain.
    let e = ChainEntry {
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        manifest_hash: sealed.manifest_hash,
    };
    let mut next = h.record.clone();
    next.completed = 1;
    next.chain_root = chain::extend(next.chain_root, &e);
    j.complete_window(&lease, &h, e.clone(), next)
        .await
        .unwrap();
    // The audit's checks all pass.
    let plan = [KeyRange::ALL];
    assert_eq!(
        check::journal_and_chain_in(&j, job, g, &plan, true)
            .await
            .unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(
        check::materials_in(&reg, &store, job, g).await.unwrap(),
        Vec::<String>::new()
    );
    let registered: BTreeMap<_, _> = reg
        .entries(job, g)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.digest, e))
        .collect();
    let expect = Expect {
        job,
        generation: g,
        window: WindowId(0),
        range: KeyRange::ALL,
        schema_fingerprint: sch.fingerprint(),
        later: Vec::new(),
    };
    let (wm, f) = check::window(&store, &registered, &e, &expect).await;
    assert_eq!(f, Vec::<String>::new());
    assert_eq!(wm.as_ref(), Some(&m));
    let creds = target::page_credentials(&mut c, &ctx).await.unwrap();
    assert_eq!(
        check::t_credentials(&creds, std::slice::from_ref(&m)),
        Vec::<String>::new()
    );
    // Tampering with a FINAL page: the re-apply path refuses before touching the target.
    let p1 = store.path_of(&m.final_pages[1].digest);
    let mut b = std::fs::read(&p1).unwrap();
    b[10] ^= 0x40;
    std::fs::write(&p1, &b).unwrap();
    let err = seal::load_final_pages(&store, &sealed.manifest_hash)
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(DefiniteCode::EvidenceCorrupt), "{err}");
    assert!(!check::window(&store, &registered, &e, &expect)
        .await
        .1
        .is_empty());
    assert_eq!(dml_count(s, &tdb), n);
}

/// J of `job` created under a fresh lease and moved to the windows phase (its table open
/// in the registry).
async fn windows_phase(
    pool: &sqlx::MySqlPool,
    j: &Journal,
    reg: &Registry,
    (job, g): (JobId, Generation),
) -> (ledger::lease::Lease, Head) {
    let lease = ledger::lease::acquire(pool, job, "w", Duration::from_secs(60))
        .await
        .unwrap();
    reg.open_table(job, Some(10 << 20)).await.unwrap();
    let mut h = j
        .create(&lease, JournalRecord::installed(job, g))
        .await
        .unwrap();
    for p in [Phase::Capturing, Phase::Windows] {
        let mut n = h.record.clone();
        n.phase = p;
        h = j.append(&lease, &h, n).await.unwrap();
    }
    (lease, h)
}

/// Window 0 sealed as DESIGN §5 step 7 does: its RAW page of the read view persisted
/// before HIGH, then 25 FINAL rows cut into pages of 10 and the manifest.
async fn seal_first_window(
    store: &LocalDirStore,
    reg: &Registry,
    (job, g): (JobId, Generation),
    fingerprint: Digest,
) -> SealedWindow {
    // RAW page of the read view, persisted before HIGH.
    let raw = RawPage {
        key: PageKey {
            job,
            generation: g,
            window: WindowId(0),
            attempt: Attempt(1),
            page: kernel::ids::PageNo(0),
        },
        rows: (1..=25).map(|i| row(i, "raw")).collect(),
    };
    let rs = page::seal(&raw);
    seal::persist(store, reg, job, g, Kind::Raw, &rs.bytes)
        .await
        .unwrap();
    let facts = WindowFacts {
        job,
        generation: g,
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        low: BinlogPos::new("mysql-bin.000001", 100),
        high: BinlogPos::new("mysql-bin.000001", 500),
        snapshot: Some(BinlogPos::new("mysql-bin.000001", 120)),
        schema_fingerprint: fingerprint,
        raw_pages: vec![raw.page_ref_for(&rs)],
        folded_digest: Digest::of(b"no changes"),
        folded_changes: 0,
    };
    seal::seal_window(
        store,
        reg,
        facts,
        (1..=25).map(|i| row(i, "final")).collect(),
        10,
    )
    .await
    .unwrap()
}
