//! `backfill verify` on a STREAMING table whose target definition differs from the
//! source's (issue 34 item 5), as a user runs it, against real MariaDB: an index only on
//! the source (the `ALTER TABLE t ADD INDEX` a user makes on the source), a different
//! column default, a column attribute (INVISIBLE) and a uniqueness only on the target
//! each make verify exit 4 and name the object and the difference in plain words, in text
//! and in JSON; once the definitions are equal again verify is clean (exit 0). The tests'
//! own comparator (`backfill_tests::compare`, no code shared with verify) sees each of
//! them too.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn verify(c: &Case, json: bool) -> Run {
    let job = c.job.0.to_string();
    let mut cmd = backfill_tests::command();
    cmd.args(["verify", &job, "--state", &c.state_url()])
        .args(["--source", &c.source.url(), "--target", &c.target.url()])
        .env("RUST_LOG", "warn");
    if json {
        cmd.args(["--format", "json"]);
    }
    Run::of(&mut cmd)
}

/// The comparator of the tests on the same two tables.
fn compared(c: &Case) -> compare::Diff {
    compare::compare(c.source, &c.sdb, c.target, &c.tdb, "t", &["id"])
}

/// verify is not clean, names `difference` in its text and in its JSON, and the tests'
/// comparator sees a definition that differs.
fn differs(c: &Case, difference: &str) {
    let r = verify(c, false);
    assert_eq!(r.code, 4, "{}", r.all());
    assert!(
        r.stdout
            .contains(&format!("definition differs: {difference}")),
        "{}",
        r.all()
    );
    assert!(r.all().contains("1 definition differences"), "{}", r.all());
    let j = verify(c, true);
    assert_eq!(j.code, 4, "{}", j.all());
    let v: serde_json::Value = serde_json::from_str(j.stdout.trim()).unwrap();
    assert_eq!(
        v["schema_differences"],
        serde_json::json!([difference]),
        "{v}"
    );
    assert_eq!(v["cursor"]["tally"]["differing_rows"], 0, "{v}");
    let d = compared(c);
    assert!(d.definition_differs, "the comparator missed it: {d}");
}

/// verify exits 0 with no definition difference, and the comparator is clean.
fn clean(c: &Case) {
    let r = verify(c, false);
    assert_eq!(r.code, 0, "{}", r.all());
    assert!(!r.stdout.contains("definition differs"), "{}", r.all());
    let d = compared(c);
    assert!(d.is_clean(), "{d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verify_reports_a_target_definition_that_differs_on_a_streaming_table() {
    let _serial = in_process().await;
    let c = Case::new("vdef", 300, 200, 100).await;
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
    clean(&c);

    // The measured case: an index added on the source only.
    c.source.sql_in(&c.sdb, "ALTER TABLE t ADD INDEX ia (k)");
    differs(&c, "index `ia` (k) is on the source, not on the target");
    c.target.sql_in(&c.tdb, "ALTER TABLE t ADD INDEX ia (k)");
    clean(&c);

    // A uniqueness only on the target.
    c.target.sql_in(
        &c.tdb,
        "ALTER TABLE t DROP INDEX ia, ADD UNIQUE INDEX ia (k)",
    );
    differs(
        &c,
        "index `ia` (k) is unique on the target, not on the source",
    );
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t DROP INDEX ia, ADD INDEX ia (k)");
    clean(&c);

    // A different default.
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t ALTER COLUMN v SET DEFAULT 'dflt'");
    differs(
        &c,
        "column `v`: default NULL on the source, 'dflt' on the target",
    );
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t ALTER COLUMN v SET DEFAULT NULL");
    clean(&c);

    // Another column attribute, of the same type, nullability and collation.
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t MODIFY v VARCHAR(64) NULL INVISIBLE");
    differs(
        &c,
        "column `v`: attributes none on the source, `invisible` on the target",
    );
    c.target
        .sql_in(&c.tdb, "ALTER TABLE t MODIFY v VARCHAR(64) NULL");
    clean(&c);
}
