//! The activation audit compares fields (issue 15 item 4) against real MariaDB: a target
//! row changed by hand, which no evidence (manifests, page hashes, T's credentials, L's
//! chain) can see, fails the audit with the `Fields` check, naming the key and both values
//! as hex; the table pauses and is never published. The same holds for the re-audit on
//! restart of a STREAMING table; once repaired and resumed, the table streams again and
//! the recorded field check shows no difference.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use ledger::record::Phase;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

async fn serve_idle(c: &Case) -> String {
    c.serve_tuned(Duration::from_secs(300), |cfg| {
        cfg.finish = Some(ReplayConfig::default());
    })
    .await
}

/// The recorded activation field check: (rows checked, differing rows, summary).
fn recorded_audit(c: &Case) -> (u64, u64, String) {
    let row = c.target.sql_in(
        &c.state_db,
        &format!(
            "SELECT CONCAT_WS('|', rows_checked, differing_rows, summary) FROM field_checks \
             WHERE job_id = {} AND origin = 'audit'",
            c.job.0
        ),
    );
    let mut p = row.splitn(3, '|');
    let n = p.next().unwrap().parse().unwrap();
    let d = p.next().unwrap().parse().unwrap();
    (n, d, p.next().unwrap_or_default().to_string())
}

async fn activation_credential(c: &Case) -> Option<ledger::target::Activation> {
    let mut tc = c.target_conn().await;
    let a = ledger::target::read_activation(&mut tc, &c.tctx().await)
        .await
        .unwrap();
    tc.disconnect().await.unwrap();
    a
}

/// The pause J holds: its message, checked to be the audit's `Fields` finding.
async fn fields_pause(c: &Case) -> String {
    let head = c.head().await;
    let p = head
        .paused
        .clone()
        .unwrap_or_else(|| panic!("not paused: {head:?}"));
    assert_eq!(p.code.as_str(), "evidence_corrupt", "{p:?}");
    assert!(p.message.contains("[Fields] key id="), "{}", p.message);
    p.message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_row_changed_before_activation_fails_the_audit_and_pauses() {
    let _serial = in_process().await;
    let c = Case::new("afields", 300, 100, 50).await;
    let hits = bf::seams::activation_gate::hits();
    let gate = bf::seams::activation_gate::arm(c.job);
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(ReplayConfig::default());
    let task = tokio::spawn(serve::serve(cfg, CancellationToken::new()));
    let until = Instant::now() + Duration::from_secs(120);
    while bf::seams::activation_gate::hits() == hits {
        assert!(
            Instant::now() < until,
            "the finish never reached activation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every window is applied and (B, F] replayed; the source keeps changing elsewhere.
    // A target row changed by hand: T's credentials and every page hash stay intact.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'v24' WHERE id = 42");
    c.source.sql_in(
        &c.sdb,
        "UPDATE t SET k = k + 1 WHERE id BETWEEN 100 AND 120",
    );
    gate.close(); // opens the gate for good (the resumed run below passes it too)
    let out = tokio::time::timeout(Duration::from_secs(300), task)
        .await
        .expect("serve did not become idle")
        .unwrap()
        .unwrap_or_else(|e| panic!("serve: {e}"));
    let outcome = out.get(&c.job).cloned().unwrap_or_default();
    assert!(outcome.contains("paused"), "{outcome}");

    let msg = fields_pause(&c).await;
    assert!(
        msg.contains("key id=42 column v: source 0x763432 target 0x763234"),
        "{msg}"
    );
    assert!(!msg.contains("key id=10"), "only the changed row: {msg}");
    let head = c.head().await;
    assert_ne!(head.phase, Phase::Streaming, "{head:?}");
    assert!(
        activation_credential(&c).await.is_none(),
        "a table whose fields differ was published"
    );
    let (checked, differing, summary) = recorded_audit(&c);
    assert_eq!((checked, differing), (300, 1), "{summary}");
    assert!(summary.contains("key id=42 column v"), "{summary}");

    // Repaired and resumed: the audit compares again, passes, and the table streams.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'v42' WHERE id = 42");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    assert_eq!(serve_idle(&c).await, "beyond windows: Streaming");
    assert!(activation_credential(&c).await.is_some());
    let (checked, differing, _) = recorded_audit(&c);
    assert_eq!((checked, differing), (300, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_re_audit_on_restart_finds_a_target_row_changed_while_streaming() {
    let _serial = in_process().await;
    let c = Case::new("afields_re", 300, 100, 50).await;
    assert_eq!(serve_idle(&c).await, "beyond windows: Streaming");
    let (checked, differing, _) = recorded_audit(&c);
    assert_eq!(
        (checked, differing),
        (300, 0),
        "the activation audit compared every row"
    );

    // Changed by hand while no serve runs; the source keeps changing other rows.
    c.target.sql_in(&c.tdb, "DELETE FROM t WHERE id = 8");
    c.source
        .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id = 9");
    let outcome = serve_idle(&c).await;
    assert!(outcome.contains("paused"), "{outcome}");
    let msg = fields_pause(&c).await;
    assert!(msg.contains("key id=8: missing on the target"), "{msg}");
    assert!(
        !msg.contains("id=9"),
        "a replayed change is no difference: {msg}"
    );
    let (_, differing, _) = recorded_audit(&c);
    assert_eq!(differing, 1);

    c.target.sql_in(&c.tdb, "INSERT INTO t VALUES (8, 8, 'v8')");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    assert_eq!(serve_idle(&c).await, "beyond windows: Streaming");
    assert!(c.head().await.paused.is_none());
    let (checked, differing, _) = recorded_audit(&c);
    assert_eq!((checked, differing), (300, 0));
}

/// A definition difference fails the activation audit as a differing row does (issue 34
/// item 5, decided: the target must be the source's definition, indexes included, when
/// it is published; DESIGN §9 refuses a target whose definition differs and §16 applies
/// every index DDL in replay order, so at P the two agree unless someone changed one of
/// them by hand). Here an index added by hand on the installed, still empty target: the
/// table pauses, named, and is never published; with the index dropped and the table
/// resumed it streams.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_index_only_on_the_target_fails_the_activation_audit_and_pauses() {
    let _serial = in_process().await;
    let c = Case::new("afields_ix", 300, 100, 50).await;
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t ADD INDEX only_t (k)");
    let outcome = serve_idle(&c).await;
    assert!(outcome.contains("paused"), "{outcome}");
    let head = c.head().await;
    let p = head
        .paused
        .clone()
        .unwrap_or_else(|| panic!("not paused: {head:?}"));
    assert_eq!(p.code.as_str(), "evidence_corrupt", "{p:?}");
    assert!(
        p.message.starts_with("activation audit of job")
            && p.message.contains("[Fields] key (definition)")
            && p.message.contains(
                "definitions differ: index `only_t` (k) is on the target, not on the source"
            ),
        "{}",
        p.message
    );
    assert_ne!(head.phase, Phase::Streaming, "{head:?}");
    assert!(
        activation_credential(&c).await.is_none(),
        "a table whose definition differs was published"
    );

    c.target.sql_in(&c.tdb, "ALTER TABLE t DROP INDEX only_t");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    assert_eq!(serve_idle(&c).await, "beyond windows: Streaming");
    assert!(activation_credential(&c).await.is_some());
    let (checked, differing, _) = recorded_audit(&c);
    assert_eq!((checked, differing), (300, 0));
}
