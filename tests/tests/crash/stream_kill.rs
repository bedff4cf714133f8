//! A STREAMING replay batch past its client deadline (issue 7, DESIGN §8 item 5) against
//! real MariaDB, with one target-write permit and two STREAMING tables: the first table's
//! batch hangs on a locked target table past `--target-write`; while its KILL is held back
//! (test seam `bounded::gate_kills`) the statement is still listed in the target's
//! PROCESSLIST and the permit is still in use by that replay, so the other table's batch
//! waits unwritten. Once the KILL is confirmed the permit is released, the other table
//! writes, and after the unlock both converge. Then a KILL whose confirmation fails
//! (`bounded::fail_confirmations`) leaves the permit a hold (release unknown) naming the
//! replay, and the table pauses instead of retrying beside the old statement.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use mysql_async::prelude::Queryable;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn listed(c: &Case) -> u64 {
    let q = format!(
        "SELECT COUNT(*) FROM PROCESSLIST WHERE INFO LIKE '%{}%' AND STATE LIKE '%metadata lock%' \
         AND TIME >= 4",
        c.tdb
    );
    c.target.sql_in("information_schema", &q).parse().unwrap()
}

async fn lock_target(c: &Case) -> mysql_async::Conn {
    let url = c.target.url_db(&c.tdb);
    let mut lock = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    lock.query_drop("LOCK TABLES t WRITE").await.unwrap();
    lock
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_timed_out_streaming_batch_keeps_its_permit_until_the_kill_is_confirmed() {
    let _serial = in_process().await;
    let c = Case::new("stream_kill", 200, 100, 50).await;
    let (other, other_g) = c.start_second_table(100).await;

    let mut cfg = c.streaming_cfg_one_write();
    // The server shows a statement past this (PROCESSLIST TIME >= 4) before we look.
    cfg.deadlines.target_write = Duration::from_secs(3);
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, stop.clone()));
    let j = c.journal();
    c.wait_streaming(&[(other, other_g)]).await;

    // Phase 1: the batch times out; its KILL is held back by the seam.
    let gate = bf::seams::kills::gate_kills();
    let mut lock = lock_target(&c).await;
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'held' WHERE id = 5");
    wait_for("the replay statement running past its deadline", || {
        listed(&c) > 0
    })
    .await;
    c.source
        .sql_in(&c.sdb, "INSERT INTO t2 VALUES (700001, 1, 'queued')");
    let (mine, theirs) = (format!("job {} ", c.job), format!("job {other} "));
    wait_for("the second table waiting for the permit", || {
        write_pool()
            .waiting
            .iter()
            .any(|q| q.owner.starts_with(&theirs))
    })
    .await;
    let w = write_pool();
    assert!(
        w.available == 0 && w.holds.is_empty() && w.in_use.len() == 1,
        "{w:?}"
    );
    assert!(
        w.in_use[0].owner.starts_with(&mine) && w.in_use[0].owner.contains("streaming replay"),
        "the timed-out batch still holds the permit: {w:?}"
    );
    assert!(listed(&c) > 0, "its statement is still running");
    let queued = "SELECT COUNT(*) FROM t2 WHERE id = 700001";
    assert_eq!(c.target.sql_in(&c.tdb, queued), "0");

    // The KILL goes through and is confirmed: the permit is released, the other table
    // writes; after the unlock both converge.
    bf::seams::kills::open_kills();
    drop(gate);
    let (tgt, tdb) = (c.target, c.tdb.clone());
    wait_for("the other table's queued row", || {
        tgt.sql_in(&tdb, queued) == "1"
    })
    .await;
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    let (src, sdb) = (c.source, c.sdb.clone());
    let in_sync = |t: &str| checksum(src, &sdb, t) == checksum(tgt, &tdb, t);
    wait_for("both tables caught up", || in_sync("t") && in_sync("t2")).await;
    let w = write_pool();
    assert!(w.holds.is_empty(), "{w:?}");

    // Phase 2: the next timed-out batch's KILL cannot be confirmed: a hold, and a pause.
    bf::seams::kills::fail_confirmations(1);
    lock.query_drop("LOCK TABLES t WRITE").await.unwrap();
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'unconfirmed' WHERE id = 6");
    wait_for("a hold of the first table's replay", || {
        write_pool()
            .holds
            .iter()
            .any(|h| h.owner.starts_with(&mine))
    })
    .await;
    let w = write_pool();
    assert!(w.available == 0 && w.in_use.is_empty(), "{w:?}");
    let until = Instant::now() + Duration::from_secs(120);
    let mut d = None;
    while d.is_none() {
        d = j
            .head(c.job, c.generation)
            .await
            .unwrap()
            .and_then(|h| h.record.paused);
        assert!(Instant::now() < until, "the first table did not pause");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = d.unwrap();
    assert_eq!(
        d.code,
        kernel::error::DefiniteCode::ReleaseUnconfirmed,
        "{d:?}"
    );
    let w = write_pool();
    assert!(w.holds.iter().any(|h| h.owner.starts_with(&mine)), "{w:?}");
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    lock.disconnect().await.unwrap();
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    let o = out.get(&c.job).cloned().unwrap_or_default();
    assert!(o.starts_with("paused"), "job {}: {o}", c.job);
    let o = out.get(&other).cloned().unwrap_or_default();
    assert!(!o.starts_with("paused"), "job {other}: {o}");
}
