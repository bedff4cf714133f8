//! Replay of (B, F] and activation count against `--target-writes` (issue 7, DESIGN §8)
//! against real MariaDB: with one target-write permit, while one table's finish holds it
//! (held before activation by a test seam), another table's FINAL page writes wait in the
//! admission queue and its target stays empty; once the finish is done both tables reach
//! STREAMING with their targets equal to the source and no permit left.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod window_support;
use bootstrap::install::install;
use bootstrap::replay::ReplayConfig;
use bootstrap::serve;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use window_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn page_writes_wait_while_replay_and_activation_hold_the_only_write_permit() {
    let c = Case::new("replay_permit", 300, 100, 50).await;
    let mut req = c.second_table(200);
    req.window_rows = 100;
    req.page_rows = 50;
    let other = install(&req).await.unwrap().job_id;

    let gate = bootstrap::finish::activation_seam::arm(c.job);
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(ReplayConfig::default());
    cfg.limits.target_writes = 1;
    let task = tokio::spawn(serve::serve(cfg, CancellationToken::new()));
    wait_for("the finish of the first table at activation", || {
        bootstrap::finish::activation_seam::hits() > 0
    })
    .await;
    let w = write_pool();
    assert_eq!((w.capacity, w.available), (1, 0), "{w:?}");
    let mine = format!("job {} ", c.job);
    assert!(
        w.in_use.len() == 1
            && w.in_use[0].owner.starts_with(&mine)
            && w.in_use[0]
                .owner
                .contains("replay of (B, F] and activation"),
        "the replay/activation holds the permit: {w:?}"
    );

    // The second table starts: its FINAL pages queue behind the replay's permit.
    bootstrap::commands::start(&c.pool, other).await.unwrap();
    let theirs = format!("job {other} ");
    wait_for("a page write of the second table waiting", || {
        write_pool()
            .waiting
            .iter()
            .any(|q| q.owner.starts_with(&theirs))
    })
    .await;
    let rows = c.target.sql_in(&c.tdb, "SELECT COUNT(*) FROM t2");
    assert_eq!(rows, "0", "no page of the second table was written");
    let w = write_pool();
    assert!(w.in_use.len() <= 1 && w.available == 0, "{w:?}");

    gate.close();
    let out = tokio::time::timeout(Duration::from_secs(300), task)
        .await
        .expect("serve did not become idle")
        .unwrap()
        .unwrap_or_else(|e| panic!("serve: {e}"));
    for job in [c.job, other] {
        let o = out.get(&job).cloned().unwrap_or_default();
        assert!(o.contains("Streaming"), "job {job}: {o}");
    }
    for t in ["t", "t2"] {
        assert_eq!(
            checksum(c.source, &c.sdb, t),
            checksum(c.target, &c.tdb, t),
            "{t}"
        );
    }
    let w = write_pool();
    assert!(
        w.available == w.capacity && w.in_use.is_empty() && w.holds.is_empty(),
        "{w:?}"
    );
}
