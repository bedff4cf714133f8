//! A sealed window whose manifest no longer verifies (DESIGN §5 restart rules): with no
//! credential in T it is reopened as a new attempt; with a credential in T the target
//! holds bytes that can no longer be proven, an evidence failure that pauses the table.
//! The `backfill serve` PROCESS exits hard at a fault point, the test corrupts the sealed
//! manifest where it is kept (the state store's copy, and this host's cached copy, which
//! alone would only be dropped and read again), and a restart must take the rule's
//! branch.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::window::fp;
use backfill_tests::case::*;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use ledger::material::LocalDirStore;

/// Flips a byte of the stored manifest of window 0's only seal, in the state store and in
/// the local cache.
async fn corrupt_manifest_of_window_0(c: &Case) {
    let seals = c.seals().await;
    let (_, _, hash) = seals
        .iter()
        .find(|(w, _, _)| *w == 0)
        .expect("window 0 is sealed");
    let digest = Digest::from_slice(hash).unwrap();
    let changed = c.target.sql_in(
        &c.state_db,
        &format!(
            "UPDATE material_blobs SET bytes = CONCAT(LEFT(bytes, LENGTH(bytes) DIV 2), \
             CHAR(ASCII(SUBSTRING(bytes, LENGTH(bytes) DIV 2 + 1, 1)) ^ 90), \
             SUBSTRING(bytes, LENGTH(bytes) DIV 2 + 2)) \
             WHERE digest = UNHEX('{}') AND chunk_no = 0; SELECT ROW_COUNT()",
            digest.to_hex()
        ),
    );
    assert_eq!(changed, "1", "the state store holds the manifest");
    let store = LocalDirStore::open(c.data.path()).unwrap();
    let path = store.path_of(&digest);
    if let Ok(mut bytes) = std::fs::read(&path) {
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x5a;
        std::fs::write(&path, bytes).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_manifest_without_credentials_is_reopened_as_a_new_attempt() {
    let c = Case::new("wec", 2_000, 1_000, 300).await;
    let code = wait(
        serve_cmd(&c, 300, 1, &format!("{}@1", fp::AFTER_FINAL_SEALED), ""),
        None,
    );
    assert_eq!(code, Some(kernel::failpoint::EXIT_CODE));
    assert_eq!(c.audit_count(), 0, "nothing in T yet");
    corrupt_manifest_of_window_0(&c).await;
    assert_eq!(wait(serve_cmd(&c, 300, 2, "", ""), None), Some(0));
    let head = c.head().await;
    assert_eq!(head.paused, None);
    assert_eq!(head.completed as usize, c.plan().await.len());
    let chain = c.chain().await;
    assert_eq!(
        chain[0].1, 2,
        "window 0 was reopened and sealed by attempt 2"
    );
    c.assert_target_equals_source();
    assert_eq!(c.audit_count(), 2_000, "every row applied once");
    // The corrupt attempt's materials were garbage, released once attempt 2 sealed.
    assert_eq!(c.materials_of(0, 1).await, 0);
    assert_eq!(c.garbage_bytes().await, 0);
    c.assert_evidence_agrees().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_manifest_with_a_credential_in_t_pauses() {
    let c = Case::new("wet", 2_000, 1_000, 300).await;
    let code = wait(
        serve_cmd(&c, 300, 1, &format!("{}@1", fp::AFTER_PAGE_APPLIED), ""),
        None,
    );
    assert_eq!(code, Some(kernel::failpoint::EXIT_CODE));
    assert!(c.audit_count() > 0, "window 0's first page is in T");
    corrupt_manifest_of_window_0(&c).await;
    let _ = wait(serve_cmd(&c, 300, 2, "", ""), None);
    let head = c.head().await;
    let p = head
        .paused
        .expect("the table paused on the evidence failure");
    assert_eq!(p.code, DefiniteCode::EvidenceConflict, "{}", p.message);
    assert!(p.message.contains("no longer be proven"), "{}", p.message);
    assert!(p.message.contains("w0"), "names the window: {}", p.message);
    assert_eq!(
        head.completed, 0,
        "J did not advance over unprovable evidence"
    );
    let seals = c.seals().await;
    assert!(
        seals.iter().all(|(w, a, _)| *w != 0 || *a == 1),
        "window 0 was not re-read: {seals:?}"
    );
}
