//! J, the lease, the range chain, the registry and the material checks against a real
//! state store (a schema on the shared target server).
use crate::common::{code, shared_target, state_db};
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::position::BinlogPos;
use kernel::value::SqlValue;
use ledger::chain::{self, ChainEntry};
use ledger::check;
use ledger::journal::Journal;
use ledger::lease;
use ledger::manifest::{Expect, WindowManifest};
use ledger::material::LocalDirStore;
use ledger::page::{self, PageKey, RawPage};
use ledger::range::{range, KeyRange};
use ledger::record::{JournalRecord, Phase};
use ledger::registry::{Kind, Registry};
use std::collections::BTreeMap;
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn lease_fences_a_stale_owner_in_j() {
    let (pool, _) = state_db("ls_fence").await;
    let job = JobId(11);
    let a = lease::acquire(&pool, job, "proc-a", Duration::from_millis(1))
        .await
        .unwrap();
    assert_eq!(a.token, 1);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let b = lease::acquire(&pool, job, "proc-b", HOUR).await.unwrap();
    assert_eq!(b.token, 2);
    // A live lease of another owner is refused with a clear message.
    let e = lease::acquire(&pool, job, "proc-c", HOUR)
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DefiniteCode::Fenced));
    assert!(e.to_string().contains("proc-b"), "{e}");
    let j = Journal::new(pool.clone());
    let rec = JournalRecord::installed(job, Generation(1));
    let e = j.create(&a, rec.clone()).await.unwrap_err();
    assert_eq!(code(&e), Some(DefiniteCode::Fenced), "{e}");
    assert!(e.to_string().contains("stale"), "{e}");
    let h = j.create(&b, rec.clone()).await.unwrap();
    let mut next = rec.clone();
    next.phase = Phase::Capturing;
    assert_eq!(
        code(&j.append(&a, &h, next.clone()).await.unwrap_err()),
        Some(DefiniteCode::Fenced)
    );
    assert_eq!(
        code(&lease::renew(&pool, &a, HOUR).await.unwrap_err()),
        Some(DefiniteCode::Fenced)
    );
    lease::renew(&pool, &b, HOUR).await.unwrap();
    j.append(&b, &h, next).await.unwrap();
    // Re-acquiring by the same owner name still fences its older incarnation.
    lease::release(&pool, &b).await.unwrap();
    let b2 = lease::acquire(&pool, job, "proc-b", HOUR).await.unwrap();
    assert_eq!(b2.token, 3);
    let head = j.head(job, Generation(1)).await.unwrap().unwrap();
    let mut w = head.record.clone();
    w.phase = Phase::Windows;
    assert_eq!(
        code(&j.append(&b, &head, w.clone()).await.unwrap_err()),
        Some(DefiniteCode::Fenced)
    );
    j.append(&b2, &head, w).await.unwrap();
    // Each fencing check writes the lease row (its write set carries it on Galera).
    let checks: u64 = sqlx::query_scalar("SELECT fence_checks FROM ledger_lease WHERE job_id = 11")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(checks, 3, "create and two appends by the current owners");
}

fn entry(w: u32, r: KeyRange) -> ChainEntry {
    ChainEntry {
        window: WindowId(w),
        range: r,
        attempt: Attempt(1),
        manifest_hash: Digest::of(&w.to_le_bytes()),
    }
}

#[tokio::test]
async fn journal_cas_window_completion_and_tamper_detection() {
    let (pool, db) = state_db("ls_journal").await;
    let s = shared_target();
    let (job, g) = (JobId(12), Generation(1));
    let l = lease::acquire(&pool, job, "p", HOUR).await.unwrap();
    let j = Journal::new(pool.clone());
    let plan = vec![range(None, Some(100)), range(Some(100), None)];
    let mut h = j
        .create(&l, JournalRecord::installed(job, g))
        .await
        .unwrap();
    // Creating again with the same record is AlreadyCommitted (returns the same head).
    assert_eq!(
        j.create(&l, JournalRecord::installed(job, g))
            .await
            .unwrap(),
        h
    );
    for p in [Phase::Capturing, Phase::Windows] {
        let mut n = h.record.clone();
        n.phase = p;
        h = j.append(&l, &h, n).await.unwrap();
    }
    // An illegal transition is refused before anything is written.
    let mut bad = h.record.clone();
    bad.phase = Phase::Streaming;
    assert!(j.append(&l, &h, bad).await.is_err());
    for (w, r) in plan.iter().enumerate() {
        let e = entry(w as u32, r.clone());
        let mut n = h.record.clone();
        n.completed += 1;
        n.chain_root = chain::extend(n.chain_root, &e);
        let again = h.clone();
        h = j
            .complete_window(&l, &h, e.clone(), n.clone())
            .await
            .unwrap();
        // A retry after a lost commit finds its own write: same head, nothing doubled.
        assert_eq!(j.complete_window(&l, &again, e, n).await.unwrap(), h);
    }
    // A second writer that read an old head cannot move J.
    let old = j.head(job, g).await.unwrap().unwrap();
    let mut n1 = old.record.clone();
    n1.phase = Phase::Fenced;
    j.append(&l, &old, n1).await.unwrap();
    let mut n2 = old.record.clone();
    n2.paused = Some(kernel::Definite {
        code: DefiniteCode::SchemaChanged,
        message: "x".into(),
    });
    assert_eq!(
        code(&j.append(&l, &old, n2).await.unwrap_err()),
        Some(DefiniteCode::EvidenceConflict)
    );
    let head = j.head(job, g).await.unwrap().unwrap();
    assert_eq!(head.record.completed, 2);
    assert!(check::journal_and_chain_in(&j, job, g, &plan, true)
        .await
        .unwrap()
        .is_empty());

    // Tamper with a J record in the middle of the history: detected.
    s.sql_in(&db, "UPDATE ledger_journal SET record = CONCAT(LEFT(record, LENGTH(record) - 1), 'x') WHERE job_id = 12 AND seq = 2");
    let f = check::journal_and_chain_in(&j, job, g, &plan, true)
        .await
        .unwrap();
    assert!(
        f.iter()
            .any(|x| x.contains("record 2") && x.contains("tampered")),
        "{f:?}"
    );
    // Tamper with the head: reading it refuses.
    s.sql_in(&db, "UPDATE ledger_journal SET digest = REPEAT('z', 32) WHERE job_id = 12 ORDER BY seq DESC LIMIT 1");
    assert_eq!(
        code(&j.head(job, g).await.unwrap_err()),
        Some(DefiniteCode::EvidenceCorrupt)
    );
}

#[tokio::test]
async fn range_chain_tampering_and_j_root_mismatch_are_detected() {
    let (pool, db) = state_db("ls_chain").await;
    let s = shared_target();
    let (job, g) = (JobId(13), Generation(1));
    let l = lease::acquire(&pool, job, "p", HOUR).await.unwrap();
    let j = Journal::new(pool.clone());
    let plan = vec![
        range(None, Some(10)),
        range(Some(10), Some(20)),
        range(Some(20), None),
    ];
    let mut h = j
        .create(&l, JournalRecord::installed(job, g))
        .await
        .unwrap();
    for (w, r) in plan.iter().enumerate().take(2) {
        let e = entry(w as u32, r.clone());
        let mut n = h.record.clone();
        n.completed += 1;
        n.chain_root = chain::extend(n.chain_root, &e);
        h = j.complete_window(&l, &h, e, n).await.unwrap();
    }
    // An integer-key job's stored entries are RCHE version 1, byte for byte what builds
    // before composite keys stored (and what the chain root hashes).
    for (w, r) in plan.iter().enumerate().take(2) {
        let stored = s.sql_in(
            &db,
            &format!(
                "SELECT HEX(entry) FROM ledger_range_chain WHERE job_id = 13 AND window_id = {w}"
            ),
        );
        let want = entry(w as u32, r.clone()).encode();
        assert_eq!(stored, hex::encode_upper(&want));
        assert!(stored.starts_with("524348450100"), "{stored}");
    }
    // Partial chain is consistent before the fence, incomplete for the audit.
    assert!(check::journal_and_chain_in(&j, job, g, &plan, false)
        .await
        .unwrap()
        .is_empty());
    assert!(!check::journal_and_chain_in(&j, job, g, &plan, true)
        .await
        .unwrap()
        .is_empty());
    // Out of order completion is refused.
    let e = entry(2, plan[2].clone());
    let mut n = h.record.clone();
    n.completed += 2;
    assert!(j.complete_window(&l, &h, e, n).await.is_err());
    // Alter a manifest hash in the chain (entry and column together): root mismatch.
    let mut t = entry(1, plan[1].clone());
    t.manifest_hash = Digest([0xEE; 32]);
    let hexed = hex::encode(t.encode());
    s.sql_in(
        &db,
        &format!("UPDATE ledger_range_chain SET entry = UNHEX('{hexed}'), manifest_hash = REPEAT(CHAR(238), 32) WHERE job_id = 13 AND window_id = 1"),
    );
    let f = check::journal_and_chain_in(&j, job, g, &plan, false)
        .await
        .unwrap();
    assert!(f.iter().any(|x| x.contains("root")), "{f:?}");
}

#[tokio::test]
async fn registry_quotas_missing_rows_and_concurrent_first_registrations() {
    let (pool, db) = state_db("ls_registry").await;
    let s = shared_target();
    let reg = Registry::new(pool.clone());
    let (job, g) = (JobId(21), Generation(1));
    // No usage row yet: refused, with the fix named.
    let e = reg
        .register(job, g, Kind::Raw, Digest([1; 32]), 10)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("open_table"), "{e}");
    reg.open_table(job, Some(1000)).await.unwrap();
    reg.register(job, g, Kind::Raw, Digest([1; 32]), 600)
        .await
        .unwrap();
    reg.register(job, g, Kind::Raw, Digest([1; 32]), 600)
        .await
        .unwrap(); // idempotent
    let e = reg
        .register(job, g, Kind::Raw, Digest([2; 32]), 600)
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DefiniteCode::CapacityExhausted), "{e}");
    assert!(e.to_string().contains("quota"), "{e}");
    assert_eq!(reg.usage(job).await.unwrap().unwrap().bytes, 600);
    assert_eq!(reg.entries(job, g).await.unwrap().len(), 1);
    // Total quota.
    reg.set_total_quota(Some(
        reg.usage(JobId(0)).await.unwrap().unwrap().bytes + 100,
    ))
    .await
    .unwrap();
    let e = reg
        .register(job, g, Kind::Final, Digest([3; 32]), 200)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("the total"), "{e}");
    reg.set_total_quota(None).await.unwrap();
    // A table with materials but no usage row is refused and never re-created at 0 bytes.
    s.sql_in(&db, "DELETE FROM ledger_material_usage WHERE job_id = 21");
    let e = reg
        .register(job, g, Kind::Raw, Digest([4; 32]), 1)
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(DefiniteCode::EvidenceCorrupt), "{e}");
    assert!(e.to_string().contains("not re-created"), "{e}");
    assert_eq!(
        code(&reg.open_table(job, None).await.unwrap_err()),
        Some(DefiniteCode::EvidenceCorrupt)
    );
    assert_eq!(reg.usage(job).await.unwrap(), None);
    assert_eq!(reg.entries(job, g).await.unwrap().len(), 1, "nothing lost");
    // Many first registrations at once on an empty registry: no deadlock, exact totals.
    let before = reg.usage(JobId(0)).await.unwrap().unwrap().bytes;
    let mut tasks = Vec::new();
    for i in 0..16u64 {
        let reg = reg.clone();
        tasks.push(tokio::spawn(async move {
            let job = JobId(100 + i);
            reg.open_table(job, None).await?;
            for k in 0..4u8 {
                reg.register(job, Generation(1), Kind::Raw, Digest([k; 32]), 10)
                    .await?;
            }
            Ok::<(), kernel::Error>(())
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(
        reg.usage(JobId(0)).await.unwrap().unwrap().bytes,
        before + 16 * 40
    );
}

fn raw(w: u32, p: u32, rows: i64) -> RawPage {
    RawPage {
        key: PageKey {
            job: JobId(31),
            generation: Generation(1),
            window: WindowId(w),
            attempt: Attempt(1),
            page: PageNo(p),
        },
        rows: (0..rows)
            .map(|i| vec![SqlValue::Int(i), SqlValue::Bytes(b"x".to_vec())])
            .collect(),
    }
}

/// One window stored as install would store it: two RAW pages, its FINAL pages and a
/// manifest (bytes, then registry, then manifest), fingerprint `fp`.
struct StoredWindow {
    raw_refs: Vec<page::PageRef>,
    manifest: WindowManifest,
    sealed: page::Sealed,
}

async fn store_window(
    store: &LocalDirStore,
    reg: &Registry,
    (job, g): (JobId, Generation),
    fp: Digest,
) -> StoredWindow {
    // One window: two RAW pages, one FINAL page, a manifest; bytes, then registry, then manifest.
    let mut raw_refs = Vec::new();
    for p in 0..2 {
        let r = raw(0, p, 3);
        let sealed = page::seal(&r);
        store.put(&sealed.bytes).unwrap();
        reg.register(job, g, Kind::Raw, sealed.digest, sealed.bytes.len() as u64)
            .await
            .unwrap();
        raw_refs.push(page::PageRef {
            page: PageNo(p),
            digest: sealed.digest,
            rows: 3,
            bytes: sealed.bytes.len() as u64,
        });
    }
    let finals = page::cut_final_pages(job, g, WindowId(0), Attempt(1), raw(0, 0, 6).rows, 100);
    let mut final_refs = Vec::new();
    for f in &finals {
        let sealed = page::seal(f);
        store.put(&sealed.bytes).unwrap();
        reg.register(
            job,
            g,
            Kind::Final,
            sealed.digest,
            sealed.bytes.len() as u64,
        )
        .await
        .unwrap();
        final_refs.push(f.page_ref(&sealed));
    }
    let m = WindowManifest {
        job,
        generation: g,
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        low: BinlogPos::new("mysql-bin.000001", 100),
        high: BinlogPos::new("mysql-bin.000001", 900),
        snapshot: Some(BinlogPos::new("mysql-bin.000001", 150)),
        schema_fingerprint: fp,
        raw_pages: raw_refs.clone(),
        folded_digest: Digest([0; 32]),
        folded_changes: 0,
        final_pages: final_refs,
    };
    let ms = m.seal();
    store.put(&ms.bytes).unwrap();
    reg.register(job, g, Kind::Manifest, ms.digest, ms.bytes.len() as u64)
        .await
        .unwrap();
    StoredWindow {
        raw_refs,
        manifest: m,
        sealed: ms,
    }
}

/// The registry's entries of `job`, by digest.
async fn registered(
    reg: &Registry,
    job: JobId,
    g: Generation,
) -> BTreeMap<Digest, ledger::registry::Entry> {
    reg.entries(job, g)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.digest, e))
        .collect()
}

/// A RAW page with one byte flipped is named tampered (by the material check and the
/// window check), a deleted one missing; each restored, the check passes again.
async fn tampered_and_deleted_pages_are_found(
    store: &LocalDirStore,
    reg: &Registry,
    (job, g): (JobId, Generation),
    raw_refs: &[page::PageRef],
    (ce, expect): (&ChainEntry, &Expect),
) {
    // Flip one byte of a RAW page.
    let p0 = store.path_of(&raw_refs[0].digest);
    let mut b = std::fs::read(&p0).unwrap();
    let keep = b.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&p0, &b).unwrap();
    let f = check::materials_in(reg, store, job, g).await.unwrap();
    assert!(
        f.iter()
            .any(|x| x.contains(&raw_refs[0].digest.to_hex()) && x.contains("tampered")),
        "{f:?}"
    );
    assert!(
        !check::window(store, &registered(reg, job, g).await, ce, expect)
            .await
            .1
            .is_empty()
    );
    std::fs::write(&p0, &keep).unwrap();
    // Delete one.
    std::fs::remove_file(store.path_of(&raw_refs[1].digest)).unwrap();
    let f = check::materials_in(reg, store, job, g).await.unwrap();
    assert!(f.iter().any(|x| x.contains("missing")), "{f:?}");
    std::fs::write(
        store.path_of(&raw_refs[1].digest),
        page::seal(&raw(0, 1, 3)).bytes,
    )
    .unwrap();
    assert!(check::materials_in(reg, store, job, g)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn tampered_deleted_and_altered_materials_are_detected() {
    let (pool, db) = state_db("ls_material").await;
    let dir = tempfile::tempdir().unwrap();
    let store = LocalDirStore::open(dir.path()).unwrap();
    let reg = Registry::new(pool.clone());
    let (job, g) = (JobId(31), Generation(1));
    reg.open_table(job, None).await.unwrap();
    let fp = Digest([5; 32]);
    let StoredWindow {
        raw_refs,
        manifest: m,
        sealed: ms,
    } = store_window(&store, &reg, (job, g), fp).await;
    let ce = ChainEntry {
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        manifest_hash: ms.digest,
    };
    let expect = Expect {
        job,
        generation: g,
        window: WindowId(0),
        range: KeyRange::ALL,
        schema_fingerprint: fp,
        later: Vec::new(),
    };
    assert!(check::materials_in(&reg, &store, job, g)
        .await
        .unwrap()
        .is_empty());
    // Abandoned material: unregistered (usage follows), then removed; idempotent.
    let junk = store.put(b"RAWP garbage of an abandoned attempt").unwrap();
    reg.register(job, g, Kind::Raw, junk, 36).await.unwrap();
    reg.unregister(job, g, junk).await.unwrap();
    reg.unregister(job, g, junk).await.unwrap();
    store.remove(&junk).unwrap();
    let f = check::materials_in(&reg, &store, job, g).await.unwrap();
    assert!(f.is_empty(), "{f:?}");
    let (mm, f) = check::window(&store, &registered(&reg, job, g).await, &ce, &expect).await;
    assert_eq!(mm, Some(m.clone()));
    assert!(f.is_empty(), "{f:?}");

    tampered_and_deleted_pages_are_found(&store, &reg, (job, g), &raw_refs, (&ce, &expect)).await;
    // An altered usage row is detected.
    let t = shared_target();
    t.sql_in(
        &db,
        "UPDATE ledger_material_usage SET bytes = bytes + 1 WHERE job_id = 31",
    );
    let f = check::materials_in(&reg, &store, job, g).await.unwrap();
    assert!(f.iter().any(|x| x.contains("sum to")), "{f:?}");
    t.sql_in(
        &db,
        "UPDATE ledger_material_usage SET bytes = bytes - 1 WHERE job_id = 31",
    );
    // Alter the manifest (consistently re-hashed and re-stored under its new name: the
    // chain still names the old hash, and the bytes at the old name fail).
    let mut altered = m.clone();
    altered.folded_changes = 99;
    std::fs::write(store.path_of(&ms.digest), altered.seal().bytes).unwrap();
    let f = check::window(&store, &registered(&reg, job, g).await, &ce, &expect)
        .await
        .1;
    assert!(!f.is_empty());
    let f = check::materials_in(&reg, &store, job, g).await.unwrap();
    assert!(f.iter().any(|x| x.contains(&ms.digest.to_hex())), "{f:?}");
    // A manifest that is self-consistent but contradicts the plan.
    let mut other = m.clone();
    other.range = range(Some(5), None);
    let os = other.seal();
    store.put(&os.bytes).unwrap();
    reg.register(job, g, Kind::Manifest, os.digest, os.bytes.len() as u64)
        .await
        .unwrap();
    let ce2 = ChainEntry {
        manifest_hash: os.digest,
        ..ce
    };
    let f = check::window(&store, &registered(&reg, job, g).await, &ce2, &expect)
        .await
        .1;
    assert!(f.iter().any(|x| x.contains("plan says")), "{f:?}");
}
