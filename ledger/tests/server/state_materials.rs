//! Materials in the state store (`ledger::material::StateStore`, DESIGN §18) against a
//! real server: put, get, contains and remove of empty, small and multi-transaction
//! materials; a second store with its own (empty) cache reads what the first wrote (the
//! host-loss case); a corrupt, lost or extra chunk is `evidence_corrupt`; headless chunks
//! (what a crash between chunk transactions leaves, see the crash binary) are absent.
use crate::common::*;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use ledger::material::chunks::{CHUNKS_PER_TX, CHUNK_BYTES};
use ledger::material::{LocalDirStore, MaterialStore, StateStore};

/// Bytes no frame shrinks (stored as they are, layout 1: the chunk counts below are
/// the material's own).
fn bytes(len: usize, salt: u8) -> Vec<u8> {
    let mut out = vec![0u8; len];
    blake3::Hasher::new()
        .update(&[salt])
        .finalize_xof()
        .fill(&mut out);
    out
}

fn hex(d: &Digest) -> String {
    d.to_hex()
}

#[tokio::test]
async fn put_get_contains_remove_across_two_caches() {
    let (pool, db) = state_db("mat_state").await;
    let dir = tempfile::tempdir().unwrap();
    let a = StateStore::new(pool.clone(), Some(LocalDirStore::open(dir.path()).unwrap()));
    let big = bytes((CHUNKS_PER_TX + 1) * CHUNK_BYTES + 17, 1);
    for m in [Vec::new(), b"RAWP small".to_vec(), big.clone()] {
        let d = a.put(&m).await.unwrap();
        assert_eq!(d, Digest::of(&m));
        assert_eq!(a.put(&m).await.unwrap(), d, "put is idempotent");
        assert!(a.contains(&d).await.unwrap());
        assert_eq!(a.get(&d).await.unwrap().unwrap(), m);
    }
    let d = Digest::of(&big);
    let chunks = shared_target().sql_in(
        &db,
        &format!(
            "SELECT COUNT(*) FROM material_blobs WHERE digest = UNHEX('{}')",
            hex(&d)
        ),
    );
    assert_eq!(chunks, (CHUNKS_PER_TX + 2).to_string());
    // Another host: an empty cache of its own reads every material from the state store.
    let other = tempfile::tempdir().unwrap();
    let b = StateStore::new(
        pool.clone(),
        Some(LocalDirStore::open(other.path()).unwrap()),
    );
    assert_eq!(b.get(&d).await.unwrap().unwrap(), big);
    assert!(
        LocalDirStore::open(other.path())
            .unwrap()
            .contains(&d)
            .unwrap(),
        "read through into the cache"
    );
    // remove takes it from the state store and from the remover's cache.
    b.remove(&d).await.unwrap();
    assert!(!b.contains(&d).await.unwrap());
    assert_eq!(b.get(&d).await.unwrap(), None);
    assert!(!LocalDirStore::open(other.path())
        .unwrap()
        .contains(&d)
        .unwrap());
    let no_cache = StateStore::new(pool.clone(), None);
    assert_eq!(no_cache.get(&d).await.unwrap(), None);
    a.remove(&d).await.unwrap();
    // A registered material only in a data directory (an older build, --materials local)
    // is read from there, verified, and copied into the state store for every other host.
    let legacy = b"WMAN sealed by an older build".to_vec();
    let ld = LocalDirStore::open(dir.path())
        .unwrap()
        .put(&legacy)
        .unwrap();
    assert!(no_cache.get(&ld).await.unwrap().is_none());
    // Not registered (released by retention, or never accounted): absent, whatever the
    // cache holds, and the stale cached copy goes.
    assert_eq!(
        a.get(&ld).await.unwrap(),
        None,
        "a released material is not brought back"
    );
    assert!(!LocalDirStore::open(dir.path())
        .unwrap()
        .contains(&ld)
        .unwrap());
    let ld = LocalDirStore::open(dir.path())
        .unwrap()
        .put(&legacy)
        .unwrap();
    shared_target().sql_in(
        &db,
        &format!(
            "INSERT INTO ledger_material (job_id, generation, digest, kind, bytes) \
             VALUES (1, 1, UNHEX('{}'), 'WMAN', {})",
            hex(&ld),
            legacy.len()
        ),
    );
    assert_eq!(a.get(&ld).await.unwrap().unwrap(), legacy);
    assert_eq!(
        no_cache.get(&ld).await.unwrap().unwrap(),
        legacy,
        "adopted into the state store"
    );
    let left = shared_target().sql_in(
        &db,
        &format!(
            "SELECT COUNT(*) FROM material_blobs WHERE digest = UNHEX('{}')",
            hex(&d)
        ),
    );
    assert_eq!(left, "0");
}

fn corrupt_code(r: kernel::Result<Option<Vec<u8>>>) -> Option<DefiniteCode> {
    code(&r.unwrap_err())
}

#[tokio::test]
async fn corrupt_lost_and_extra_chunks_are_evidence_corrupt() {
    let (pool, db) = state_db("mat_corrupt").await;
    let s = StateStore::new(pool.clone(), None);
    let m = bytes(2 * CHUNK_BYTES + 5, 7);
    let d = s.put(&m).await.unwrap();
    let h = hex(&d);
    let sql = |q: String| shared_target().sql_in(&db, &q);
    sql(format!(
        "UPDATE material_blobs SET bytes = CONCAT(LEFT(bytes, 10), 'X', SUBSTRING(bytes, 12)) \
         WHERE digest = UNHEX('{h}') AND chunk_no = 1"
    ));
    let e = s.get(&d).await;
    assert_eq!(corrupt_code(e), Some(DefiniteCode::EvidenceCorrupt));
    // Repaired by a put of the same bytes (the chunks are rewritten only when absent).
    sql(format!(
        "DELETE FROM material_blob_heads WHERE digest = UNHEX('{h}')"
    ));
    s.put(&m).await.unwrap();
    assert_eq!(s.get(&d).await.unwrap().unwrap(), m);
    sql(format!(
        "DELETE FROM material_blobs WHERE digest = UNHEX('{h}') AND chunk_no = 2"
    ));
    let e = s.get(&d).await.unwrap_err();
    assert_eq!(code(&e), Some(DefiniteCode::EvidenceCorrupt));
    assert!(
        e.to_string().contains(&h),
        "the error names the material: {e}"
    );
    sql(format!(
        "INSERT INTO material_blobs (digest, chunk_no, bytes) VALUES (UNHEX('{h}'), 2, 'x'), (UNHEX('{h}'), 3, 'y')"
    ));
    assert_eq!(
        corrupt_code(s.get(&d).await),
        Some(DefiniteCode::EvidenceCorrupt)
    );
}

#[tokio::test]
async fn headless_chunks_are_never_present() {
    let (pool, db) = state_db("mat_headless").await;
    let s = StateStore::new(pool.clone(), None);
    let m = bytes(CHUNK_BYTES + 1, 3);
    let d = Digest::of(&m);
    // What a crash after the first chunk transaction leaves: chunks, no head.
    shared_target().sql_in(
        &db,
        &format!(
            "INSERT INTO material_blobs (digest, chunk_no, bytes) VALUES (UNHEX('{}'), 0, REPEAT('a', {CHUNK_BYTES}))",
            hex(&d)
        ),
    );
    assert!(!s.contains(&d).await.unwrap());
    assert_eq!(s.get(&d).await.unwrap(), None);
    // A later put completes it with the right bytes (the stale chunk is overwritten).
    s.put(&m).await.unwrap();
    assert_eq!(s.get(&d).await.unwrap().unwrap(), m);
}

#[tokio::test]
async fn the_audit_read_sees_a_corrupt_shared_copy_behind_a_good_cache() {
    let (pool, db) = state_db("mat_shared").await;
    let dir = tempfile::tempdir().unwrap();
    let s = StateStore::new(pool.clone(), Some(LocalDirStore::open(dir.path()).unwrap()));
    let m = bytes(CHUNK_BYTES + 9, 5);
    let d = s.put(&m).await.unwrap();
    assert_eq!(s.get_shared(&d).await.unwrap().unwrap(), m);
    shared_target().sql_in(
        &db,
        &format!(
            "UPDATE material_blobs SET bytes = CONCAT('Z', SUBSTRING(bytes, 2)) \
             WHERE digest = UNHEX('{}') AND chunk_no = 0",
            hex(&d)
        ),
    );
    // This host's cache still holds good bytes: `get` serves them...
    assert_eq!(s.get(&d).await.unwrap().unwrap(), m);
    // ...but what another owner would read is corrupt, and the audit's read says so.
    assert_eq!(
        corrupt_code(s.get_shared(&d).await),
        Some(DefiniteCode::EvidenceCorrupt)
    );
    // A store without a cache: the same.
    let bare = StateStore::new(pool.clone(), None);
    assert_eq!(
        corrupt_code(bare.get_shared(&d).await),
        Some(DefiniteCode::EvidenceCorrupt)
    );
}

/// The cache is not fsynced: a cached file a crash cut (or anything that damaged it) is
/// dropped on its next read, and the state store's copy is read and cached again.
#[tokio::test]
async fn a_cut_cached_copy_is_replaced_from_the_state_store() {
    let (pool, _db) = state_db("mat_cut").await;
    let dir = tempfile::tempdir().unwrap();
    let cache = LocalDirStore::open(dir.path()).unwrap();
    let s = StateStore::new(pool.clone(), Some(cache.clone()));
    let m = bytes(CHUNK_BYTES + 3, 9);
    let d = s.put(&m).await.unwrap();
    let file = cache.path_of(&d);
    assert_eq!(std::fs::read(&file).unwrap(), m, "put caches a copy");
    for cut in [Vec::new(), m[..100].to_vec()] {
        std::fs::write(&file, &cut).unwrap();
        assert_eq!(s.get(&d).await.unwrap().unwrap(), m);
        assert_eq!(std::fs::read(&file).unwrap(), m, "cached again");
    }
}

/// Pages of rows are stored as one zstd frame (layout 2): fewer chunks than the material's
/// own bytes would take, read back exactly by a store with another (empty) cache, and a
/// damaged frame is `evidence_corrupt`.
#[tokio::test]
async fn compressible_materials_are_stored_as_a_frame() {
    let (pool, db) = state_db("mat_frame").await;
    let page: Vec<u8> = (0..40_000)
        .flat_map(|i| format!("({i},'customer-{i:010}-abcdefghijklmnopqrstuvwxyz'),").into_bytes())
        .collect();
    assert!(page.len() > 3 * CHUNK_BYTES);
    let a = StateStore::new(pool.clone(), None);
    let sql = |q: String| shared_target().sql_in(&db, &q);
    let h = hex(&Digest::of(&page));
    // Headless chunks of an earlier write of the same material under layout 1 (a crash
    // before its head, then an upgrade): more chunks than the frame takes.
    sql(format!(
        "INSERT INTO material_blobs (digest, chunk_no, bytes) VALUES \
         (UNHEX('{h}'), 0, 'a'), (UNHEX('{h}'), 1, 'b'), (UNHEX('{h}'), 2, 'c')"
    ));
    let d = a.put(&page).await.unwrap();
    let head = sql(format!(
        "SELECT CONCAT(layout, ' ', size, ' ', chunks) FROM material_blob_heads WHERE digest = UNHEX('{h}')"
    ));
    assert_eq!(
        head,
        format!("2 {} 1", page.len()),
        "one chunk holds the frame"
    );
    assert_eq!(
        a.get_shared(&d).await.unwrap().unwrap(),
        page,
        "stale chunks are gone"
    );
    let stored: usize = sql(format!(
        "SELECT SUM(LENGTH(bytes)) FROM material_blobs WHERE digest = UNHEX('{h}')"
    ))
    .parse()
    .unwrap();
    assert!(
        stored * 4 < page.len(),
        "{stored} bytes stored for {}",
        page.len()
    );
    let dir = tempfile::tempdir().unwrap();
    let b = StateStore::new(pool.clone(), Some(LocalDirStore::open(dir.path()).unwrap()));
    assert_eq!(b.get(&d).await.unwrap().unwrap(), page);
    assert_eq!(b.get_shared(&d).await.unwrap().unwrap(), page);
    sql(format!(
        "UPDATE material_blobs SET bytes = CONCAT(LEFT(bytes, 40), 'X', SUBSTRING(bytes, 42)) \
         WHERE digest = UNHEX('{h}') AND chunk_no = 0"
    ));
    let e = a.get_shared(&d).await.unwrap_err();
    assert_eq!(code(&e), Some(DefiniteCode::EvidenceCorrupt), "{e}");
    assert!(
        e.to_string().contains(&h),
        "the error names the material: {e}"
    );
}
