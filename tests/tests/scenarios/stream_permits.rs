//! STREAMING replay batches count against `--target-writes` (issue 7, DESIGN §8) against
//! real MariaDB: with one target-write permit and two STREAMING tables, while one table's
//! replay batch hangs on its target (the target table is locked by another session, which
//! the target's own PROCESSLIST shows), that batch holds the only permit and the other
//! table's batch waits in the admission queue without writing; once the lock is gone both
//! targets converge to the source and no permit is left in use, held or waiting.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use mysql_async::prelude::Queryable;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_streaming_batch_holds_the_only_write_permit_and_the_other_table_waits() {
    let _serial = in_process().await;
    let c = Case::new("stream_permit", 200, 100, 50).await;
    let (other, other_g) = c.start_second_table(100).await;

    let cfg = c.streaming_cfg_one_write();
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, stop.clone()));
    c.wait_streaming(&[(other, other_g)]).await;

    // Another session locks the first target table: its next replay batch hangs there.
    let mut lock =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&c.target.url_db(&c.tdb)).unwrap())
            .await
            .unwrap();
    lock.query_drop("LOCK TABLES t WRITE").await.unwrap();
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'held' WHERE id = 5");
    let mine = format!("job {} ", c.job);
    wait_for("the first table's batch holding the write permit", || {
        let w = write_pool();
        w.in_use.len() == 1
            && w.in_use[0].owner.starts_with(&mine)
            && w.in_use[0].owner.contains("streaming replay batch")
    })
    .await;
    // The server's own view: a statement of the replay waits on the lock.
    let (tgt, tdb) = (c.target, c.tdb.clone());
    wait_for("a replay statement waiting on the table lock", || {
        tgt.sql_in(
            "information_schema",
            &format!(
                "SELECT COUNT(*) FROM PROCESSLIST WHERE INFO LIKE '%{tdb}%' \
                 AND STATE LIKE '%metadata lock%'"
            ),
        ) != "0"
    })
    .await;

    // The second table's change queues behind that permit and is not written.
    c.source.sql_in(
        &c.sdb,
        "INSERT INTO t2 VALUES (700001, 1, 'queued'); UPDATE t2 SET k = k + 1 WHERE id <= 20",
    );
    let theirs = format!("job {other} ");
    wait_for(
        "the second table's batch waiting for a write permit",
        || {
            write_pool()
                .waiting
                .iter()
                .any(|q| q.owner.starts_with(&theirs))
        },
    )
    .await;
    let w = write_pool();
    assert!(
        w.capacity == 1 && w.available == 0 && w.in_use.len() == 1 && w.holds.is_empty(),
        "{w:?}"
    );
    assert!(w.in_use[0].owner.starts_with(&mine), "{w:?}");
    let n = c
        .target
        .sql_in(&c.tdb, "SELECT COUNT(*) FROM t2 WHERE id = 700001");
    assert_eq!(n, "0", "the waiting batch wrote nothing");

    // The lock goes: both tables converge, and every permit comes back.
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    lock.disconnect().await.unwrap();
    let (src, sdb) = (c.source, c.sdb.clone());
    let in_sync = |t: &str| checksum(src, &sdb, t) == checksum(tgt, &tdb, t);
    wait_for("both tables caught up", || in_sync("t") && in_sync("t2")).await;
    let v = c.target.sql_in(&c.tdb, "SELECT v FROM t WHERE id = 5");
    assert_eq!(v, "held");
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    for job in [c.job, other] {
        let o = out.get(&job).cloned().unwrap_or_default();
        assert!(!o.starts_with("paused"), "job {job}: {o}");
    }
    let w = write_pool();
    assert!(
        w.available == w.capacity
            && w.in_use.is_empty()
            && w.holds.is_empty()
            && w.waiting.is_empty(),
        "{w:?}"
    );
}
