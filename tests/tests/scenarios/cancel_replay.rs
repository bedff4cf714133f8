//! A cancel recorded while (B, F] is replayed in a running serve (issue 7, DESIGN §8)
//! against real MariaDB: the table is never published. The finish is held after replay,
//! before activation (test seam), while it holds a target-write permit (replay and
//! activation count against --target-writes like FINAL pages); the cancel is recorded
//! then. The table becomes CANCELLED(K) with no activation credential in T, the target
//! does not move after K, no permit is left, and a re-add under a new generation works.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use ledger::record::Phase;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn job_state(c: &Case) -> String {
    c.target.sql_in(
        &c.state_db,
        &format!("SELECT state FROM jobs WHERE job_id = {}", c.job.0),
    )
}

async fn serve_idle(c: &Case) -> String {
    c.serve_tuned(Duration::from_secs(300), |cfg| {
        cfg.finish = Some(ReplayConfig::default());
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_during_replay_is_never_activated_and_ends_cancelled_at_k() {
    let _serial = in_process().await;
    let c = Case::new("cancel_replay", 600, 200, 100).await;
    // hits() counts over the whole process: earlier tests of this binary count too.
    let hits = bf::seams::activation_gate::hits();
    let gate = bf::seams::activation_gate::arm(c.job);
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(ReplayConfig::default());
    let task = tokio::spawn(serve::serve(cfg, CancellationToken::new()));
    // Changes while the table is bootstrapped (windows or (B, F]).
    c.source.sql_in(
        &c.sdb,
        "UPDATE t SET v = 'during' WHERE id BETWEEN 1 AND 30; DELETE FROM t WHERE id = 40;",
    );
    let until = Instant::now() + Duration::from_secs(120);
    while bf::seams::activation_gate::hits() == hits {
        assert!(
            Instant::now() < until,
            "the finish never reached activation"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Replay and activation hold a target-write permit, counted like a FINAL page write.
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    let w = snap.pool(admission::PoolKind::TargetWrite);
    let mine = format!("job {} ", c.job);
    let held: Vec<&str> = w
        .in_use
        .iter()
        .map(|u| u.owner.as_str())
        .filter(|o| {
            o.starts_with(&mine) && o.contains("replay up to the final fence (F) and activation")
        })
        .collect();
    assert_eq!(
        held.len(),
        1,
        "replay/activation holds one write permit: {w:?}"
    );
    assert_eq!(w.available, w.capacity - 1, "{w:?}");

    // The cancel is recorded while the finish is in replay, before activation.
    bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
    gate.add_permits(1);
    let out = tokio::time::timeout(Duration::from_secs(300), task)
        .await
        .expect("serve did not become idle")
        .unwrap()
        .unwrap_or_else(|e| panic!("serve: {e}"));
    assert_eq!(out.get(&c.job).map(String::as_str), Some("cancelled"));

    let head = c.head().await;
    assert_eq!(head.phase, Phase::Cancelled, "J: {head:?}");
    assert!(head.k.is_some() && head.paused.is_none(), "J: {head:?}");
    assert_eq!(job_state(&c), "CANCELLED");
    let mut tc = c.target_conn().await;
    let credential = ledger::target::read_activation(&mut tc, &c.tctx().await)
        .await
        .unwrap();
    tc.disconnect().await.unwrap();
    assert!(
        credential.is_none(),
        "a CANCELING table was published: {credential:?}"
    );
    assert_no_permit_left();

    // The target stays as it was at K: later source writes never reach it.
    let before = checksum(c.target, &c.tdb, "t");
    c.source.sql_in(
        &c.sdb,
        "INSERT INTO t VALUES (900001, 1, 'after-k'); UPDATE t SET v = 'after-k' WHERE id = 2;",
    );
    assert_eq!(serve_idle(&c).await, "", "a cancelled job is not run again");
    assert_eq!(
        checksum(c.target, &c.tdb, "t"),
        before,
        "target changed after K"
    );
    assert_no_permit_left();

    // Re-adding needs a new generation and a new empty target.
    let tdb2 = c.target.fresh_db("cancel_replay_t2");
    c.target.sql_in(&tdb2, DDL);
    let mut req = InstallRequest::new(
        c.state_url(),
        c.source.url(),
        TableName::new(&c.sdb, "t"),
        c.target.url(),
        TableName::new(&tdb2, "t"),
    );
    req.control_schema = c.ctl.clone();
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("re-add: {e}"));
    assert!(done.generation > c.generation, "a new generation");
}
