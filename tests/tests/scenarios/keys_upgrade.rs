//! An integer-key job installed before issue 14 keeps running after the upgrade (issue 14
//! acceptance, DESIGN §14 "the old version still decodes"). What such a job has stored:
//! its sealed schema as SCHM v1 (one primary-key column), its plan as BIGINT bounds in
//! `plan_windows` (no typed bound), its window manifests WMAN v1 and range-chain entries
//! RCHE v1. The tests start from those bytes (the SCHM record replaced by v1 bytes of the
//! same schema, or by the pinned golden v1 fixture of `kernel/src/schema.rs`), run windows
//! with this build, check that every record it wrote for the job is still the v1 form, and
//! that a restarted serve reaches STREAMING, the audit passes and the target equals the
//! source (independent comparison, and `backfill verify`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults::window;
use backfill_tests::case::{wait, writer, Case};
use backfill_tests::keyed;
use kernel::schema::{SealedSchema, SealedSchemaV1};
use ledger::material::LocalDirStore;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// SCHM v1 of `d`.`t` (id BIGINT NOT NULL PRIMARY KEY), pinned by kernel/src/schema.rs.
const GOLDEN_SCHM_V1: &str = "5343484d010001640174010269640406626967696e740000000113010000000000";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn version(bytes: &[u8]) -> (String, u16) {
    (
        String::from_utf8_lossy(&bytes[..4]).into_owned(),
        u16::from_le_bytes([bytes[4], bytes[5]]),
    )
}

async fn schema_bytes(c: &Case) -> Vec<u8> {
    sqlx::query_scalar("SELECT schema_bytes FROM sealed_schemas WHERE job_id = ?")
        .bind(c.job.0)
        .fetch_one(&c.pool)
        .await
        .unwrap()
}

async fn replace_schema(c: &Case, bytes: &[u8]) {
    let n = sqlx::query("UPDATE sealed_schemas SET schema_bytes = ? WHERE job_id = ?")
        .bind(bytes)
        .bind(c.job.0)
        .execute(&c.pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(n, 1);
}

/// The stored records of the job are the forms written before composite keys: SCHM v1
/// (`schm`, as given), plan rows with BIGINT bounds only, RCHE v1 chain entries and WMAN
/// v1 manifests (at least `windows` of them).
async fn assert_v1_records(c: &Case, schm: &[u8], windows: usize) {
    assert_eq!(
        schema_bytes(c).await,
        schm,
        "the stored SCHM record was rewritten"
    );
    type WindowRow = (
        u32,
        Option<i64>,
        Option<i64>,
        Option<Vec<u8>>,
        Option<Vec<u8>>,
    );
    let plan: Vec<WindowRow> = sqlx::query_as(
        "SELECT window_id, lower_key, upper_key, lower_bound, upper_bound FROM plan_windows \
             WHERE job_id = ? ORDER BY window_id",
    )
    .bind(c.job.0)
    .fetch_all(&c.pool)
    .await
    .unwrap();
    let last = plan.len() - 1;
    for (w, lk, uk, lb, ub) in &plan {
        assert!(lb.is_none() && ub.is_none(), "window {w}: a typed bound");
        assert_eq!(lk.is_none(), *w == 0, "window {w}: lower BIGINT bound");
        assert_eq!(
            uk.is_none(),
            *w as usize == last,
            "window {w}: upper BIGINT bound"
        );
    }
    let chain: Vec<(u32, Vec<u8>, Vec<u8>)> = sqlx::query_as(
        "SELECT window_id, entry, manifest_hash FROM ledger_range_chain WHERE job_id = ? \
         ORDER BY window_id",
    )
    .bind(c.job.0)
    .fetch_all(&c.pool)
    .await
    .unwrap();
    assert!(chain.len() >= windows, "{} chain entries", chain.len());
    let store = LocalDirStore::open(c.data.path()).unwrap();
    for (w, entry, hash) in chain {
        assert_eq!(
            version(&entry),
            ("RCHE".into(), 1),
            "chain entry of window {w}"
        );
        let hash = kernel::ids::Digest(hash.try_into().unwrap());
        let m = store.get(&hash).unwrap().expect("the manifest's bytes");
        assert_eq!(version(&m), ("WMAN".into(), 1), "manifest of window {w}");
    }
}

/// Serve, windows only, until it exits at the 3rd `window.after_j`: some windows done.
fn some_windows(c: &Case) {
    let t0 = std::time::Instant::now();
    // The same lease owner as the next serve: it takes over at once.
    let args = ["--exit-when-idle", "--windows-only", "--page-rows", "40"];
    let fp = format!("{}@3", window::AFTER_J);
    let code = wait(keyed::serve_child(c, &args, &fp), None);
    assert_eq!(code, Some(kernel::failpoint::EXIT_CODE));
    eprintln!("some windows: {:?}", t0.elapsed());
}

/// Serve (everything) until idle; asserts exit 0 and STREAMING.
async fn to_streaming(c: &Case, page_rows: &str) {
    let t0 = std::time::Instant::now();
    let child = keyed::serve_child(c, &["--exit-when-idle", "--page-rows", page_rows], "");
    assert_eq!(wait(child, None), Some(0));
    assert_eq!(c.head().await.phase, ledger::record::Phase::Streaming);
    eprintln!("to streaming: {:?}", t0.elapsed());
}

fn verify_clean(c: &Case) {
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let (code, out, err) = backfill_tests::backfill(&["verify", "--state", &state, &job]).parts();
    assert_eq!(code, 0, "verify: {out} {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_upgrade_an_integer_key_job_with_v1_records_keeps_them_and_streams() {
    let _serial = backfill_tests::in_process().await;
    let c = Case::unstarted("kupg", 3_000, 300, 50).await;
    // The job as installed before: its sealed schema stored as SCHM v1.
    let schema = backfill_tests::bf::store::jobs::load_schema(&c.pool, c.job)
        .await
        .unwrap();
    let v1 = SealedSchemaV1 {
        database: schema.database.clone(),
        table: schema.table.clone(),
        columns: schema.columns.iter().map(|c| c.to_v2().unwrap()).collect(),
        pk: schema.key[0],
    };
    let old = kernel::codec::encode_version(*b"SCHM", 1, &v1);
    assert_eq!(
        SealedSchema::decode(&old).unwrap().fingerprint(),
        schema.fingerprint()
    );
    replace_schema(&c, &old).await;
    backfill_tests::bf::store::commands::start(&c.pool, c.job)
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let w = tokio::spawn(writer(c.source.url_db(&c.sdb), stop.clone(), 3_500, &[]));
    some_windows(&c);
    assert_v1_records(&c, &old, 3).await;
    to_streaming(&c, "77").await;
    stop.store(true, Ordering::SeqCst);
    let writes = w.await.unwrap();
    to_streaming(&c, "77").await;
    assert_v1_records(&c, &old, c.plan().await.len()).await;
    keyed::assert_audit_passes(&c);
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean(), "{d}");
    verify_clean(&c);
    eprintln!("upgrade: {writes} writes, {d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_upgrade_a_job_whose_schema_is_the_golden_v1_bytes_still_runs() {
    let _serial = backfill_tests::in_process().await;
    let fill = vec!["INSERT INTO t SELECT seq FROM seq_1_to_1000".to_string()];
    let ddl = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB";
    // The fixture names its table `d`.`t`; the sealed name is the one capture matches.
    let c = Case::of_table_unstarted("=d", ddl, &fill, 100, 10).await;
    let golden = unhex(GOLDEN_SCHM_V1);
    let fixture = SealedSchema::decode(&golden).unwrap();
    let sealed = backfill_tests::bf::store::jobs::load_schema(&c.pool, c.job)
        .await
        .unwrap();
    assert_eq!(
        fixture.fingerprint(),
        sealed.fingerprint(),
        "the table is the fixture's"
    );
    replace_schema(&c, &golden).await;
    backfill_tests::bf::store::commands::start(&c.pool, c.job)
        .await
        .unwrap();
    let sql = |s: &str| c.source.sql_in(&c.sdb, s);
    sql("INSERT INTO t SELECT 5000 + seq FROM seq_1_to_50");
    some_windows(&c);
    sql("DELETE FROM t WHERE id BETWEEN 10 AND 20; UPDATE t SET id = id + 100000 WHERE id BETWEEN 500 AND 510");
    sql("BEGIN; DELETE FROM t WHERE id = 900; INSERT INTO t VALUES (900); COMMIT");
    to_streaming(&c, "33").await;
    sql("UPDATE t SET id = id - 100000 WHERE id > 100000; INSERT INTO t VALUES (10)");
    to_streaming(&c, "33").await;
    assert_v1_records(&c, &golden, c.plan().await.len()).await;
    keyed::assert_audit_passes(&c);
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean(), "{d}");
    verify_clean(&c);
}
