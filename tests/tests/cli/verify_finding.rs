//! `backfill verify` on a STREAMING table (issue 15 item 4) against real MariaDB: a
//! difference it finds is recorded in the state store and `backfill status` shows it
//! (text and JSON: the key, the column, values as hex, when) and `backfill audit` fails on
//! it, until a later clean verify clears it. `audit` and `status` also show the activation
//! audit's own field check (rows checked, seed).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn verify(c: &Case) -> Run {
    let job = c.job.0.to_string();
    Run::of(
        backfill_tests::command()
            .args(["verify", &job, "--state", &c.state_url()])
            .args(["--source", &c.source.url(), "--target", &c.target.url()])
            .env("RUST_LOG", "warn"),
    )
}

fn status_json(c: &Case) -> serde_json::Value {
    let job = c.job.0.to_string();
    let s = status_cli(&["--state", &c.state_url(), &job, "--format", "json"]);
    serde_json::from_str(s.trim()).unwrap()
}

fn audit(c: &Case) -> Run {
    let job = c.job.0.to_string();
    let data = c.data.path().to_string_lossy().into_owned();
    backfill(&[
        "audit",
        "--state",
        &c.state_url(),
        "--data-dir",
        &data,
        "--target",
        &c.target.url(),
        &job,
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verify_records_a_difference_on_a_streaming_table_until_a_clean_verify() {
    let _serial = in_process().await;
    let c = Case::new("vfind", 400, 200, 100).await;
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(bf::table::replay::ReplayConfig::default());
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        backfill_tests::serving::serve(cfg, CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.get(&c.job).unwrap(), "beyond windows: Streaming");
    let job = c.job.0.to_string();

    // The activation audit's own field check is shown; nothing from verify yet.
    let v = status_json(&c);
    assert_eq!(v["audit_fields"]["rows_checked"], 400, "{v}");
    assert_eq!(v["audit_fields"]["differing_rows"], 0, "{v}");
    assert_eq!(v["audit_fields"]["mode"], "full", "{v}");
    assert!(v["verify"].is_null(), "{v}");
    let a = audit(&c);
    assert_eq!(a.code, 0, "{}", a.all());
    assert!(
        a.stdout
            .contains("fields (recorded): activation field check: no difference"),
        "{}",
        a.all()
    );

    // A difference made by hand on the target of the STREAMING table.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'tampered' WHERE id = 17");
    let r = verify(&c);
    assert_eq!(r.code, 4, "{}", r.all());
    let text = status_cli(&["--state", &c.state_url(), &job]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("verify "))
        .unwrap_or_else(|| panic!("no verify line: {text}"));
    assert!(
        line.contains("verify: 1 differing row at ")
            && line.contains("UTC (quiescent verify, 400 rows checked")
            && line.contains("key id=17 column v: source 0x763137 target 0x74616d7065726564"),
        "{line}"
    );
    let v = status_json(&c);
    assert_eq!(v["verify"]["differing_rows"], 1, "{v}");
    assert_eq!(v["verify"]["rows_checked"], 400, "{v}");
    assert!(
        v["verify"]["summary"]
            .as_str()
            .unwrap()
            .contains("key id=17 column v"),
        "{v}"
    );
    assert!(v["verify"]["checked_at"].as_str().unwrap().ends_with("UTC"));
    // A standing verified difference is no PASS for `backfill audit` either.
    let a = audit(&c);
    assert_eq!(a.code, 4, "{}", a.all());
    assert!(
        a.stdout
            .contains("[Fields] recorded verify: verify: 1 differing row"),
        "{}",
        a.all()
    );

    // Repaired: a clean verify clears the finding.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'v17' WHERE id = 17");
    let r = verify(&c);
    assert_eq!(r.code, 0, "{}", r.all());
    let v = status_json(&c);
    assert!(v["verify"].is_null(), "{v}");
    let text = status_cli(&["--state", &c.state_url(), &job]);
    assert!(!text.contains("differing row"), "{text}");
    assert_eq!(audit(&c).code, 0);
}
