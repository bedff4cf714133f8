//! A crash between the chunk transactions of a material in the state store
//! (`ledger.material.after_chunks`): the child has committed the first
//! `CHUNKS_PER_TX` chunks and no head row when it exits; the material is then absent
//! (never taken as present, never read as a short material), and a put after the restart
//! stores it whole.
use crate::common::*;
use kernel::ids::Digest;
use ledger::material::chunks::{CHUNKS_PER_TX, CHUNK_BYTES};
use ledger::material::{MaterialStore, StateStore};

/// Bytes no frame shrinks, so they take `CHUNKS_PER_TX + 2` chunks as they are.
fn material() -> Vec<u8> {
    let mut out = vec![0u8; (CHUNKS_PER_TX + 1) * CHUNK_BYTES + 3];
    blake3::Hasher::new()
        .update(b"material_partial")
        .finalize_xof()
        .fill(&mut out);
    out
}

async fn child(spec: Vec<String>, port: u16) {
    let url = format!("mysql://root@127.0.0.1:{port}/{}", spec[0]);
    let pool = kernel::state::open(&url, &Default::default())
        .await
        .unwrap();
    StateStore::new(pool, None).put(&material()).await.unwrap();
}

#[tokio::test]
async fn crash_between_chunk_transactions_leaves_no_material() {
    as_child(child).await;
    let (pool, db) = state_db("mat_partial").await;
    run_child(&db, "ledger.material.after_chunks");
    let m = material();
    let d = Digest::of(&m);
    let count = |t: &str| {
        shared_target().sql_in(
            &db,
            &format!(
                "SELECT COUNT(*) FROM {t} WHERE digest = UNHEX('{}')",
                d.to_hex()
            ),
        )
    };
    assert_eq!(
        count("material_blobs"),
        CHUNKS_PER_TX.to_string(),
        "the first transaction's chunks"
    );
    assert_eq!(count("material_blob_heads"), "0");
    let s = StateStore::new(pool, None);
    assert!(!s.contains(&d).await.unwrap());
    assert_eq!(s.get(&d).await.unwrap(), None);
    assert_eq!(s.put(&m).await.unwrap(), d);
    assert_eq!(s.get(&d).await.unwrap().unwrap(), m);
    assert_eq!(count("material_blobs"), (CHUNKS_PER_TX + 2).to_string());
}
