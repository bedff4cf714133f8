//! STREAMING replay on two apply streams (issue 6, DESIGN §8) against real MariaDB: a
//! batch writes on two target connections at once, so it takes two target-write permits
//! together. With `--target-writes 2`, a batch hung on a locked target table past its
//! client deadline keeps BOTH permits in use while its KILLs are held back (test seam
//! `bounded::gate_kills`); once every connection is KILLed and confirmed gone both come
//! back and the table converges. Then a KILL whose confirmation fails
//! (`bounded::fail_confirmations`) leaves exactly that connection's permit a hold naming
//! its connection id, the other permit is released, and the table pauses with
//! `release_unconfirmed` instead of retrying beside the old statement.
//!
//! And a STREAMING batch whose permit wait times out (nothing sent) is retried, never
//! paused as `release_unconfirmed`: with one permit held by the other table's hung batch
//! for many permit timeouts, the waiting table stays unpaused and converges once the
//! permit is free.
//!
//! One test runs both in turn: the KILL seams are process-wide.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::replay::ReplayConfig;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use ledger::journal::Journal;
use mysql_async::prelude::Queryable;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn waiting_on_lock(c: &Case) -> u64 {
    let q = format!(
        "SELECT COUNT(*) FROM PROCESSLIST WHERE INFO LIKE '%{}%' AND STATE LIKE '%metadata lock%'",
        c.tdb
    );
    c.target.sql_in("information_schema", &q).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streaming_batches_on_two_streams_and_permit_waits() {
    let _serial = in_process().await;
    a_batch_on_two_streams_holds_two_permits_until_both_connections_are_gone().await;
    a_permit_wait_timeout_is_retried_not_a_pause().await;
}

async fn a_batch_on_two_streams_holds_two_permits_until_both_connections_are_gone() {
    let c = Case::new("parts_permit", 200, 100, 50).await;
    let mut cfg = c.serve_cfg();
    cfg.exit_when_idle = false;
    cfg.finish = Some(ReplayConfig {
        apply_streams: 2,
        ..ReplayConfig::default()
    });
    cfg.limits.target_writes = 2;
    cfg.deadlines.target_write = Duration::from_secs(3);
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, stop.clone()));
    let j = c.journal();
    c.wait_streaming(&[]).await;
    let url = c.target.url_db(&c.tdb);
    let mut lock = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mine = format!("job {} ", c.job);

    held_kills_keep_both_permits(&c, &mut lock, &mine).await;
    an_unconfirmed_kill_holds_one_permit(&c, &j, &mut lock, &mine).await;
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    lock.disconnect().await.unwrap();
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    let o = out.get(&c.job).cloned().unwrap_or_default();
    assert!(o.starts_with("paused"), "job {}: {o}", c.job);
}

/// Phase 1: the batch times out with its KILLs held back: both permits stay in use; once
/// the KILLs are confirmed both return and, after the unlock, the table converges.
async fn held_kills_keep_both_permits(c: &Case, lock: &mut mysql_async::Conn, mine: &str) {
    let gate = bf::seams::kills::gate_kills();
    lock.query_drop("LOCK TABLES t WRITE").await.unwrap();
    // Many keys: both partitions have changes, so both connections write.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'held' WHERE id <= 40");
    wait_for("the batch holding both permits", || {
        let w = write_pool();
        w.in_use.len() == 2
            && w.in_use
                .iter()
                .all(|p| p.owner.starts_with(mine) && p.owner.contains("streaming replay"))
    })
    .await;
    wait_for("a replay statement waiting on the lock", || {
        waiting_on_lock(c) > 0
    })
    .await;
    // Past the client deadline: a KILL waits at the gate (it holds a clone of the gate
    // while it waits), not confirmed yet: still both in use, no hold.
    wait_for("a KILL of the timed-out batch waiting at the gate", || {
        std::sync::Arc::strong_count(&gate) > 2
    })
    .await;
    // ... and both permits, as the admission snapshot shows them, held past the deadline
    // by two seconds, the KILL still waiting (as the KILLs were held before they were
    // let through when this waited on a fixed sleep).
    wait_for("both permits held 5 s", || {
        let w = write_pool();
        w.in_use.len() == 2 && w.in_use.iter().all(|p| p.age >= Duration::from_secs(5))
    })
    .await;
    assert!(
        std::sync::Arc::strong_count(&gate) > 2,
        "the KILL still waits"
    );
    let w = write_pool();
    assert!(
        w.available == 0 && w.in_use.len() == 2 && w.holds.is_empty(),
        "{w:?}"
    );
    assert!(waiting_on_lock(c) > 0, "its statement is still running");

    // KILLs confirmed: both permits return; after the unlock the table converges.
    bf::seams::kills::open_kills();
    drop(gate);
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    let (src, tgt, sdb, tdb) = (c.source, c.target, c.sdb.clone(), c.tdb.clone());
    wait_for("the table caught up", || {
        checksum(src, &sdb, "t") == checksum(tgt, &tdb, "t")
    })
    .await;
    wait_for("every permit back", || {
        let w = write_pool();
        w.available == 2 && w.holds.is_empty()
    })
    .await;
}

/// Phase 2: one of the two KILLs cannot be confirmed: exactly one hold, naming its
/// connection, the other permit released, and the table pauses.
async fn an_unconfirmed_kill_holds_one_permit(
    c: &Case,
    j: &Journal,
    lock: &mut mysql_async::Conn,
    mine: &str,
) {
    bf::seams::kills::fail_confirmations(1);
    lock.query_drop("LOCK TABLES t WRITE").await.unwrap();
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'unconfirmed' WHERE id <= 40");
    let until = Instant::now() + Duration::from_secs(120);
    let mut d = None;
    while d.is_none() {
        d = j
            .head(c.job, c.generation)
            .await
            .unwrap()
            .and_then(|h| h.record.paused);
        assert!(Instant::now() < until, "the table did not pause");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d = d.unwrap();
    assert_eq!(
        d.code,
        kernel::error::DefiniteCode::ReleaseUnconfirmed,
        "{d:?}"
    );
    assert!(d.message.contains("target connection"), "{d:?}");
    let w = write_pool();
    assert!(
        w.holds.len() == 1 && w.in_use.is_empty() && w.available == 1,
        "{w:?}"
    );
    let h = &w.holds[0];
    assert!(
        h.owner.starts_with(mine) && h.reason.starts_with("target connection "),
        "{h:?}"
    );
    let id: String = h
        .reason
        .trim_start_matches("target connection ")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(
        d.message.contains(&id),
        "the pause names connection {id}: {d:?}"
    );
}

async fn a_permit_wait_timeout_is_retried_not_a_pause() {
    let c = Case::new("parts_wait", 200, 100, 50).await;
    let (other, other_g) = c.start_second_table(100).await;
    let mut cfg = c.streaming_cfg_one_write();
    cfg.run.permit_timeout = Duration::from_secs(1);
    let stop = CancellationToken::new();
    let task = tokio::spawn(serve::serve(cfg, stop.clone()));
    let j = c.journal();
    c.wait_streaming(&[(other, other_g)]).await;
    // The first table's batch hangs on the locked target table, holding the only permit.
    let url = c.target.url_db(&c.tdb);
    let mut lock = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    lock.query_drop("LOCK TABLES t WRITE").await.unwrap();
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'held' WHERE id = 5");
    let mine = format!("job {} ", c.job);
    wait_for("the first table's batch holding the permit", || {
        let w = write_pool();
        w.in_use.len() == 1 && w.in_use[0].owner.starts_with(&mine)
    })
    .await;
    // The second table's batch waits 1 s at a time, many times over: never a pause.
    c.source
        .sql_in(&c.sdb, "INSERT INTO t2 VALUES (700001, 1, 'waited')");
    let theirs = format!("job {other} ");
    wait_for("the second table waiting for the permit", || {
        write_pool()
            .waiting
            .iter()
            .any(|q| q.owner.starts_with(&theirs))
    })
    .await;
    // Many permit timeouts, each retried (the log says so, with its count): never a pause.
    let mine_waits = format!(" job={other} ");
    wait_for(
        "the second table's batch retried after 3 permit timeouts",
        || {
            logs::count(|e| {
                e.contains(&mine_waits) && e.contains(" waits=") && e.contains("; retrying")
            }) >= 3
        },
    )
    .await;
    let paused = j
        .head(other, other_g)
        .await
        .unwrap()
        .and_then(|h| h.record.paused);
    assert_eq!(paused, None, "a permit wait is no failed batch");
    let w = write_pool();
    assert!(
        w.holds.is_empty(),
        "nothing was sent, nothing is held: {w:?}"
    );
    let queued = "SELECT COUNT(*) FROM t2 WHERE id = 700001";
    assert_eq!(c.target.sql_in(&c.tdb, queued), "0");
    // The permit comes free: both tables converge, nothing left held.
    lock.query_drop("UNLOCK TABLES").await.unwrap();
    lock.disconnect().await.unwrap();
    let (src, tgt, sdb, tdb) = (c.source, c.target, c.sdb.clone(), c.tdb.clone());
    let in_sync = |t: &str| checksum(src, &sdb, t) == checksum(tgt, &tdb, t);
    wait_for("both tables caught up", || in_sync("t") && in_sync("t2")).await;
    stop.cancel();
    let out = task.await.unwrap().unwrap();
    for job in [c.job, other] {
        let o = out.get(&job).cloned().unwrap_or_default();
        assert!(!o.starts_with("paused"), "job {job}: {o}");
    }
    let w = write_pool();
    assert!(w.holds.is_empty() && w.in_use.is_empty(), "{w:?}");
}
