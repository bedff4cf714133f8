//! Schema changes while STREAMING (issue 16, DESIGN §16) against real MariaDB, with the
//! real `backfill serve` as a child process.
//!
//! * Under a writer, the DDLs of issue 16's acceptance run on the source one after the
//!   other (ADD COLUMN at the end, in the middle and with a default, MODIFY to a wider
//!   VARCHAR and INT to BIGINT, ADD INDEX, DROP INDEX, RENAME COLUMN, DROP COLUMN), each
//!   followed by writes of the new shape; after each, the independent comparison (its
//!   column lists included) finds 0/0/0 and the same definition, and the table stays
//!   STREAMING. serve is SIGKILLed right after one DDL and exits at both fault points of
//!   the DDL's step (the DDL run on the target, T not written; T written); each restart
//!   goes on without running a DDL twice.
//!   A cancel then drains up to K across one more DDL.
//! * The same DDLs in the replay of (B, F] (every window applied, then DDLs, then F) and
//!   after F before the activation (met by the activation field check's replay to its
//!   pin), with serve stopped right after one DDL's target step: STREAMING, 0/0/0.
//! * A DDL that is not compatible (TRUNCATE, ADD UNIQUE KEY, a narrowing) pauses the
//!   table with the DDL named, and nothing after it reaches the target.
//! * `backfill refresh-schema` (the binary) after a narrowing: refused while the target
//!   does not match, then, once the operator narrowed the target too, the table resumes
//!   without a re-copy (T's page credentials unchanged) and compares clean; refused when
//!   a later DDL of the table is already in the capture log, and after a TRUNCATE;
//!   refused for a live definition the binlog does not describe (an unlogged ALTER), a
//!   new key, and `--apply` of a DDL that is not compatible.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults;
use backfill_tests::case::Case;
use backfill_tests::keyed::{self, Serving, Writing};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) const DDL: &str = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, \
     name VARCHAR(20) NULL, qty INT NOT NULL DEFAULT 0, note VARCHAR(10) NULL, \
     KEY i_qty (qty)) ENGINE=InnoDB";

pub(crate) fn fill() -> Vec<String> {
    let rows: Vec<String> = (1..=60)
        .map(|i| format!("({i}, {i}, 'n{i}', {}, NULL)", i % 7))
        .collect();
    vec![format!("INSERT INTO t VALUES {}", rows.join(", "))]
}

/// Writes only the key and `v` (which no DDL touches), so it runs across every version;
/// holds off while `hold` is set (a comparison of a moving source could never be equal
/// on a slow machine).
pub(crate) async fn writer(url: String, stop: Arc<AtomicBool>, hold: Arc<AtomicBool>) -> u64 {
    use mysql_async::prelude::Queryable;
    use rand::Rng;
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        if hold.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        let (id, op) = {
            let mut r = rand::rng();
            (r.random_range(1..120u32), r.random_range(0..4u32))
        };
        let sql = match op {
            0 => format!("DELETE FROM t WHERE id = {id}"),
            _ => format!(
                "INSERT INTO t (id, v) VALUES ({id}, {n}) ON DUPLICATE KEY UPDATE v = v + 1"
            ),
        };
        c.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("writer: {e}\n{sql}"));
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n
}

/// (the DDL, the writes of the new shape after it).
fn steps() -> Vec<(&'static str, &'static str)> {
    vec![
        ("ALTER TABLE t ADD COLUMN e1 INT NULL", "UPDATE t SET e1 = id * 2 WHERE id % 3 = 0"),
        (
            "ALTER TABLE t ADD COLUMN m1 VARCHAR(8) NOT NULL DEFAULT 'd' AFTER v",
            "UPDATE t SET m1 = CONCAT('m', id) WHERE id % 4 = 0",
        ),
        (
            "ALTER TABLE t ADD COLUMN d1 DECIMAL(6,2) NOT NULL DEFAULT 1.25 FIRST",
            "INSERT INTO t (id, v, d1, m1) VALUES (500, 1, 9.5, 'x') ON DUPLICATE KEY UPDATE d1 = 9.5",
        ),
        (
            "ALTER TABLE t MODIFY name VARCHAR(64) NULL",
            "UPDATE t SET name = REPEAT('w', 40) WHERE id % 5 = 0",
        ),
        ("ALTER TABLE t MODIFY qty BIGINT NOT NULL DEFAULT 0", "UPDATE t SET qty = 5000000000 WHERE id % 6 = 0"),
        ("ALTER TABLE t ADD INDEX i_name (name)", "UPDATE t SET name = 'idx' WHERE id % 7 = 0"),
        ("ALTER TABLE t DROP INDEX i_qty", "UPDATE t SET qty = qty + 1 WHERE id % 8 = 0"),
        (
            "ALTER TABLE t RENAME COLUMN note TO remark",
            "UPDATE t SET remark = 'r' WHERE id % 2 = 0",
        ),
        ("ALTER TABLE t DROP COLUMN e1", "UPDATE t SET m1 = 'dropped' WHERE id % 9 = 0"),
    ]
}

fn serve(c: &Case, failpoint: &str) -> Serving {
    Serving(keyed::serve_child(
        c,
        &["--replay-batch-rows", "7"],
        failpoint,
    ))
}

/// Waits for serve to exit at a fault point (exit code 86).
pub(crate) fn exited_at(s: &mut Serving, fp: &str) {
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(st) = s.0.try_wait().unwrap() {
            assert_eq!(
                st.code(),
                Some(kernel::failpoint::EXIT_CODE),
                "serve did not stop at {fp}: {st}"
            );
            return;
        }
        assert!(Instant::now() < until, "serve never reached {fp}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatible_ddl_while_streaming_is_applied_in_binlog_order_through_kills() {
    let t0 = Instant::now();
    let c = Case::of_table("ddl_stream", DDL, &fill(), 25, 10).await;
    let mut s = serve(&c, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    let url = c.source.url_db(&c.sdb);
    let hold = Arc::new(AtomicBool::new(false));
    let h = hold.clone();
    let w = Writing::spawn(|stop| writer(url, stop, h));
    for (i, (ddl, after)) in steps().into_iter().enumerate() {
        c.source.sql_in(&c.sdb, ddl);
        match i {
            // SIGKILL right after the DDL reached the binlog.
            1 => {
                drop(s);
                s = serve(&c, "");
            }
            // The step stops after the DDL ran on the target, then after T recorded it.
            3 | 5 => {
                drop(s);
                let fp = if i == 3 {
                    faults::SCHEMA_AFTER_TARGET_DDL
                } else {
                    faults::SCHEMA_AFTER_T
                };
                let mut f = serve(&c, &format!("{fp}@1"));
                exited_at(&mut f, fp);
                s = serve(&c, "");
            }
            _ => {}
        }
        c.source.sql_in(&c.sdb, after);
        hold.store(true, Ordering::SeqCst);
        let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
        hold.store(false, Ordering::SeqCst);
        assert!(d.rows > 40, "{ddl}: {d}");
        let head = c.head().await;
        assert_eq!(head.paused, None, "paused after {ddl}");
        assert_eq!(head.phase, ledger::record::Phase::Streaming);
    }
    let writes = w.stop().await;
    let clean = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(clean.rows > 40, "{clean}");
    drop(s);
    let versions =
        backfill_tests::bf::store::schema_versions::versions(&c.pool, c.job, c.generation)
            .await
            .unwrap();
    assert_eq!(versions.len(), steps().len(), "one version per DDL");
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let (code, out, err) =
        backfill_tests::backfill(&["status", "--state", &state, &job, "--format", "json"]).parts();
    assert_eq!(code, 0, "status: {out} {err}");
    let st: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(st["schema"]["version"], steps().len() + 1, "{out}");
    assert!(
        st["schema"]["last_ddl"]
            .as_str()
            .unwrap()
            .contains("DROP COLUMN e1"),
        "{out}"
    );
    keyed::assert_audit_passes(&c);
    // A cancel drains up to K across the versions: a last DDL and change, then cancel.
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t ADD COLUMN z INT NOT NULL DEFAULT 3");
    c.source.sql_in(&c.sdb, "UPDATE t SET z = 4 WHERE id = 1");
    backfill_tests::bf::store::commands::cancel(&c.pool, c.job)
        .await
        .unwrap();
    let code = keyed::run_to_end(&c, &[], "", None);
    assert_eq!(code, Some(0), "the cancelling serve");
    assert_eq!(c.head().await.phase, ledger::record::Phase::Cancelled);
    let d = keyed::diff(&c, &["id"]);
    assert!(
        d.is_clean(),
        "the drain to K took the last DDL and change: {d}"
    );
    eprintln!(
        "schema changes: {} DDLs, {writes} writes, {} rows, {:?}",
        versions.len(),
        d.rows,
        t0.elapsed()
    );
}

/// The first `n` DDLs of [`steps`], each between writes of the old and of the new shape.
fn ddls_with_writes(c: &Case, steps: &[(&str, &str)]) {
    for (ddl, after) in steps {
        c.source
            .sql_in(&c.sdb, "UPDATE t SET v = v + 1 WHERE id % 2 = 1");
        c.source.sql_in(&c.sdb, ddl);
        c.source.sql_in(&c.sdb, after);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compatible_ddl_in_the_replay_of_b_f_and_before_activation_is_applied_in_binlog_order() {
    let c = Case::of_table("ddl_fence", DDL, &fill(), 25, 10).await;
    // Every window applied at version 1; no F yet.
    assert_eq!(
        keyed::run_to_end(&c, &["--windows-only"], "", None),
        Some(0)
    );
    assert_eq!(c.head().await.phase, ledger::record::Phase::Windows);
    let steps = steps();
    // Four DDLs before F: F is written after them, so they are in (B, F].
    ddls_with_writes(&c, &steps[..4]);
    // F in J, the first batch of (B, F] in T, then a stop.
    let fp = faults::REPLAY_AFTER_BATCH_T;
    let mut s = serve(&c, &format!("{fp}@1"));
    exited_at(&mut s, fp);
    assert_eq!(c.head().await.phase, ledger::record::Phase::Replaying);
    // Two more after F, before the activation: the field check's replay to its pin meets
    // them.
    ddls_with_writes(&c, &steps[4..6]);
    // The replay of (B, F] stops once right after its second DDL ran on the target.
    let fp = faults::SCHEMA_AFTER_TARGET_DDL;
    let mut s = serve(&c, &format!("{fp}@2"));
    exited_at(&mut s, fp);
    let mut s = serve(&c, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    let versions =
        backfill_tests::bf::store::schema_versions::versions(&c.pool, c.job, c.generation)
            .await
            .unwrap();
    assert_eq!(versions.len(), 6, "one version per DDL: {versions:?}");
    // Every DDL but the last was followed by another before serve saw it: their versions
    // are derived on a scratch table; the last one is the live definition.
    let how: Vec<&str> = versions.iter().map(|v| v.how.as_str()).collect();
    assert_eq!(
        how,
        [
            "derived",
            "derived",
            "derived",
            "derived",
            "derived",
            "automatic"
        ]
    );
    assert_eq!(c.head().await.paused, None);
    // Going on while STREAMING with the versions of the activation.
    ddls_with_writes(&c, &steps[6..]);
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    drop(s);
    keyed::assert_audit_passes(&c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_that_is_not_compatible_pauses_with_the_ddl_named_and_nothing_after_it_applied() {
    for (n, (ddl, named)) in [
        ("TRUNCATE TABLE t", "TRUNCATE"),
        ("ALTER TABLE t ADD UNIQUE KEY u (name)", "UNIQUE"),
        (
            "ALTER TABLE t MODIFY name VARCHAR(10) NULL",
            "not a widening",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let c = Case::of_table(&format!("ddl_pause{n}"), DDL, &fill(), 30, 10).await;
        let mut s = serve(&c, "");
        keyed::wait_streaming(&c, &mut s.0).await;
        c.source
            .sql_in(&c.sdb, "UPDATE t SET v = 1000 WHERE id = 1");
        keyed::wait_clean(&c, &["id"], Duration::from_secs(60)).await;
        c.source.sql_in(&c.sdb, ddl);
        c.source
            .sql_in(&c.sdb, "UPDATE t SET v = 2000 WHERE id = 2");
        let until = Instant::now() + Duration::from_secs(60);
        let paused = loop {
            if let Some(p) = c.head().await.paused {
                break p;
            }
            assert!(Instant::now() < until, "{ddl}: never paused");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            paused.code,
            kernel::error::DefiniteCode::SchemaChanged,
            "{ddl}: {paused:?}"
        );
        assert!(paused.message.contains(named), "{ddl}: {}", paused.message);
        let v2 = c.target.sql_in(&c.tdb, "SELECT v FROM t WHERE id = 2");
        assert_eq!(
            v2.trim(),
            "2",
            "{ddl}: a change after the DDL reached the target"
        );
        drop(s);
    }
}

/// Waits until the job is paused; its reason.
async fn paused(c: &Case, what: &str) -> kernel::error::Definite {
    c.paused_within(what, Duration::from_secs(60)).await
}

/// `backfill refresh-schema JOB` by the real program: (exit code, stdout, stderr).
fn refresh(c: &Case) -> (i32, String, String) {
    refresh_with(c, &[])
}

/// `backfill refresh-schema JOB` with `extra` flags.
fn refresh_with(c: &Case, extra: &[&str]) -> (i32, String, String) {
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let (src, tgt) = (c.source.url(), c.target.url());
    let mut args = vec![
        "refresh-schema",
        "--state",
        &state,
        &job,
        "--source",
        &src,
        "--target",
        &tgt,
    ];
    args.extend_from_slice(extra);
    backfill_tests::backfill(&args).parts()
}

fn page_credentials(c: &Case) -> String {
    c.target.sql_in(
        &c.tdb,
        "SELECT COUNT(*), GROUP_CONCAT(HEX(digest) ORDER BY window_id, page_no) \
         FROM _backfill_ledger_pages",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_schema_resumes_without_a_re_copy_once_the_target_matches() {
    let c = Case::of_table("ddl_refresh", DDL, &fill(), 30, 10).await;
    let mut s = serve(&c, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    let pages = page_credentials(&c);
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t MODIFY name VARCHAR(10) NULL");
    c.source
        .sql_in(&c.sdb, "UPDATE t SET name = 'short' WHERE id = 3");
    let p = paused(&c, "narrowing").await;
    assert!(p.message.contains("not a widening"), "{}", p.message);
    let (code, out, err) = refresh(&c);
    assert_ne!(
        code, 0,
        "refresh-schema with a target that does not match: {out}"
    );
    assert!(
        err.contains("target's definition is not the source's"),
        "{err}"
    );
    assert!(
        c.head().await.paused.is_some(),
        "still paused after a refused refresh"
    );
    // The operator makes the target match.
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t MODIFY name VARCHAR(10) NULL");
    let (code, out, err) = refresh(&c);
    assert_eq!(code, 0, "refresh-schema: {out} {err}");
    assert!(
        out.contains("schema version 2") && out.contains("resume recorded"),
        "{out}"
    );
    c.source
        .sql_in(&c.sdb, "UPDATE t SET name = 'after' WHERE id = 4");
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows >= 60, "{d}");
    let head = c.head().await;
    assert_eq!(
        (head.paused, head.phase),
        (None, ledger::record::Phase::Streaming)
    );
    assert_eq!(
        page_credentials(&c),
        pages,
        "no re-copy: T's page credentials are unchanged"
    );
    // Refused: a later DDL of the table is already in the capture log.
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t ADD UNIQUE KEY u (v)");
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t ADD COLUMN w INT NULL");
    paused(&c, "unique key").await;
    let (code, _, err) = refresh(&c);
    assert_ne!(code, 0);
    assert!(
        err.contains("a later DDL of the table is already in the capture log"),
        "{err}"
    );
    drop(s);
    // Refused after a TRUNCATE, whatever the target holds.
    let c = Case::of_table("ddl_refresh_tr", DDL, &fill(), 30, 10).await;
    let mut s = serve(&c, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    c.source.sql_in(&c.sdb, "TRUNCATE TABLE t");
    paused(&c, "truncate").await;
    let (code, _, err) = refresh(&c);
    assert_ne!(code, 0);
    assert!(err.contains("removed rows without row events"), "{err}");
    drop(s);
}

/// The refusals of `refresh-schema` that the operator's fix cannot cure, each through the
/// real program with the table left paused and the target as it was:
/// * `--apply` for a DDL that is not compatible (a narrowing): it names the DDL's class
///   and says to make the target match by hand; the target's column stays wide;
/// * a live definition the binlog does not describe: after the narrowing and a row
///   written in its shape, an ALTER run on the source with `sql_log_bin=0` (so no DDL of
///   it reaches L) adds a column; the rows after the DDL do not decode against the live
///   definition: refused as differing from the binlog's, even once the target matches;
/// * a changed key (`DROP PRIMARY KEY, ADD PRIMARY KEY (id, v)`): refused naming both keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_schema_refuses_a_live_definition_the_binlog_does_not_describe_and_a_new_key() {
    let c = Case::of_table("ddl_refresh_live", DDL, &fill(), 30, 10).await;
    let mut s = serve(&c, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t MODIFY name VARCHAR(10) NULL");
    c.source
        .sql_in(&c.sdb, "UPDATE t SET name = 'short' WHERE id = 3");
    paused(&c, "narrowing").await;
    let width = "SELECT CHARACTER_MAXIMUM_LENGTH FROM information_schema.COLUMNS \
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 't' AND COLUMN_NAME = 'name'";
    let (code, out, err) = refresh_with(&c, &["--apply"]);
    assert_ne!(code, 0, "--apply of a narrowing: {out}");
    assert!(
        err.contains("--apply runs only a compatible DDL") && err.contains("by hand"),
        "{err}"
    );
    assert_eq!(
        c.target.sql_in(&c.tdb, width).trim(),
        "20",
        "--apply changed the target"
    );
    c.source.sql_in(
        &c.sdb,
        "SET SESSION sql_log_bin = 0; ALTER TABLE t ADD COLUMN hidden INT NULL",
    );
    c.target.sql_in(
        &c.tdb,
        "ALTER TABLE t MODIFY name VARCHAR(10) NULL, ADD COLUMN hidden INT NULL",
    );
    let (code, out, err) = refresh(&c);
    assert_ne!(
        code, 0,
        "refresh-schema with an unlogged DDL on the source: {out}"
    );
    assert!(
        err.contains("the live definition differs from the binlog's"),
        "{err}"
    );
    assert!(c.head().await.paused.is_some(), "still paused");
    assert_eq!(
        c.target
            .sql_in(&c.tdb, "SELECT name FROM t WHERE id = 3")
            .trim(),
        "n3",
        "a row after the DDL reached the target"
    );
    drop(s);
    let c = Case::of_table("ddl_refresh_key", DDL, &fill(), 30, 10).await;
    let mut s = serve(&c, "");
    keyed::wait_streaming(&c, &mut s.0).await;
    c.source.sql_in(
        &c.sdb,
        "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, v)",
    );
    paused(&c, "new key").await;
    let (code, out, err) = refresh(&c);
    assert_ne!(code, 0, "refresh-schema across a new key: {out}");
    assert!(err.contains("the table's key changed"), "{err}");
    assert!(c.head().await.paused.is_some(), "still paused");
    drop(s);
}

/// A DDL whose target table is held by another target session (an open transaction that
/// read the table holds its metadata lock) waits `--schema-lock-wait`, fails naming the
/// lock and is tried again; once the session ends it goes through: STREAMING, 0/0/0.
/// Without the bound the target's ALTER waited for the server's lock_wait_timeout (a day)
/// and every later reader of the table queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_ddl_held_by_a_metadata_lock_waits_its_bound_and_is_tried_again() {
    use mysql_async::prelude::Queryable;
    let c = Case::of_table("ddl_mdl", DDL, &fill(), 25, 10).await;
    let log = c.data.path().join("serve.log");
    let child = keyed::serve_command(&c, &["--schema-lock-wait", "2s"], "")
        .env("RUST_LOG", "warn")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn backfill serve");
    let mut s = Serving(child);
    keyed::wait_streaming(&c, &mut s.0).await;
    let opts = mysql_async::Opts::from_url(&c.target.url_db(&c.tdb)).unwrap();
    let mut holder = mysql_async::Conn::new(opts).await.unwrap();
    holder.query_drop("START TRANSACTION").await.unwrap();
    let n: Option<u64> = holder.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert!(n.unwrap() > 40);
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t ADD COLUMN e1 INT NULL");
    c.source
        .sql_in(&c.sdb, "UPDATE t SET e1 = id * 3 WHERE id <= 10");
    let said = "waited 2 s for the target table's metadata lock";
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(said) {
            assert!(
                text.contains("--schema-lock-wait"),
                "the fix is named: {text}"
            );
            break;
        }
        assert!(
            Instant::now() < until,
            "the held DDL never said it waited for the lock: {text}"
        );
        assert!(s.0.try_wait().unwrap().is_none(), "serve exited: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    holder.query_drop("COMMIT").await.unwrap();
    drop(holder);
    let d = keyed::wait_clean(&c, &["id"], Duration::from_secs(120)).await;
    assert!(d.rows > 40, "{d}");
    let head = c.head().await;
    assert_eq!(head.paused, None);
    assert_eq!(head.phase, ledger::record::Phase::Streaming);
}
