//! Cancelling one table while another table of the same source keeps streaming (issue 7,
//! DESIGN §8) against real MariaDB, in one running serve: the cancelled table drains to K
//! and freezes; a LOW of its generation that reaches the binlog after K is recorded in L
//! as obsolete, revives nothing, and does not disturb the shared capture reader: the other
//! table follows every later change.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::install;
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use kernel::control::{Intent, IntentKind};
use kernel::ids::{Attempt, WindowId};
use ledger::record::Phase;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn install_generation(c: &Case, job: u64) -> kernel::ids::Generation {
    let g = c.target.sql_in(
        &c.state_db,
        &format!("SELECT generation FROM jobs WHERE job_id = {job}"),
    );
    kernel::ids::Generation(g.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_low_after_k_is_obsolete_and_the_other_table_keeps_streaming() {
    let _serial = in_process().await;
    let c = Case::new("cancel_two", 300, 100, 50).await;
    let req = c.second_table(200);
    let other = install(&req).await.unwrap().job_id;
    bf::store::commands::start(&c.pool, other).await.unwrap();

    let mut cfg = c.serve_cfg();
    cfg.exit_when_idle = false;
    cfg.finish = Some(ReplayConfig::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, stop.clone()));
    let (src, tgt) = (c.source, c.target);
    let (sdb, tdb) = (c.sdb.clone(), c.tdb.clone());
    let in_sync = |t: &str| checksum(src, &sdb, t) == checksum(tgt, &tdb, t);
    let j = c.journal();
    let other_g = install_generation(&c, other.0);
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let a = j
            .head(c.job, c.generation)
            .await
            .unwrap()
            .map(|h| h.record.phase);
        let b = j
            .head(other, other_g)
            .await
            .unwrap()
            .map(|h| h.record.phase);
        if a == Some(Phase::Streaming) && b == Some(Phase::Streaming) {
            break;
        }
        assert!(Instant::now() < until, "not both STREAMING: {a:?} {b:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Cancel the first table while serve runs; a change made just before is drained.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'before-k' WHERE id = 5");
    bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    let state = |job: u64| {
        tgt.sql_in(
            &c.state_db,
            &format!("SELECT state FROM jobs WHERE job_id = {job}"),
        )
    };
    wait_for("CANCELLED", || state(c.job.0) == "CANCELLED").await;
    assert_eq!(c.head().await.phase, Phase::Cancelled);
    assert!(in_sync("t"), "drained up to K");
    let frozen = checksum(c.target, &c.tdb, "t");

    // A LOW of the cancelled generation reaches the binlog after K.
    let mut conn = c.source_conn().await;
    let low = Intent::new(
        c.job,
        c.generation,
        IntentKind::Low,
        Some(WindowId(0)),
        Some(Attempt(9)),
    );
    kernel::control::write_intent(&mut conn, &c.ctl, &low)
        .await
        .unwrap();
    conn.disconnect().await.unwrap();
    c.source.sql_in(
        &c.sdb,
        "UPDATE t SET v = 'after-k'; INSERT INTO t2 VALUES (700001, 1, 'after');
         UPDATE t2 SET k = k + 1 WHERE id <= 50; DELETE FROM t2 WHERE id = 7;",
    );
    let obsolete = || {
        tgt.sql_in(
            &c.state_db,
            &format!(
                "SELECT COUNT(*) FROM capture_marker WHERE job_id = {} AND nonce = {} AND obsolete = 1",
                c.job.0, low.nonce.0
            ),
        ) == "1"
    };
    wait_for("the late LOW recorded as obsolete", obsolete).await;
    wait_for("the other table caught up", || in_sync("t2")).await;
    assert_eq!(
        checksum(c.target, &c.tdb, "t"),
        frozen,
        "target untouched after K"
    );
    assert_eq!(state(other.0), "INSTALLED", "the other job is live");
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    assert_eq!(out.get(&c.job).map(String::as_str), Some("cancelled"));
    assert!(!out.contains_key(&other) || !out[&other].starts_with("paused"));
    // No permit leaked: every pool is back to its capacity, nothing held or waiting.
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    for kind in admission::PoolKind::ALL {
        let p = snap.pool(kind);
        assert_eq!(p.available, p.capacity, "{kind}: {p:?}");
        assert!(p.in_use.is_empty() && p.holds.is_empty() && p.waiting.is_empty());
    }
}
