//! A target write that hangs past its client deadline (issue 7, DESIGN §8) against real
//! MariaDB: another session holds `LOCK TABLES t WRITE` on the target, so the page's
//! INSERT waits for the lock. When the deadline passes, the write permit becomes a hold
//! (release unknown) and stays one, visible in the admission snapshot, while the statement
//! is still listed in the target's PROCESSLIST; only after the connection was KILLed and
//! the server shows it gone is the hold confirmed and the capacity returned. Once the lock
//! is released, the job converges: every row exactly once, no permit leaked.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use admission::{AdmissionSnapshot, HoldSnapshot, PoolKind};
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use mysql_async::prelude::Queryable;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn snapshot() -> Option<AdmissionSnapshot> {
    backfill_tests::serving::admission_snapshot()
}

fn write_holds() -> Vec<HoldSnapshot> {
    snapshot()
        .map(|s| s.pool(PoolKind::TargetWrite).holds.clone())
        .unwrap_or_default()
}

/// The target connection id a hold's reason names ("target connection N may ...").
fn connection_of(hold: &HoldSnapshot) -> u32 {
    let rest = hold
        .reason
        .split("target connection ")
        .nth(1)
        .expect("the reason names the connection");
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

fn listed(c: &Case, id: u32) -> bool {
    let n = c.target.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {id}"
    ));
    n == "1"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hung_target_write_keeps_its_permit_held_until_the_statement_is_gone() {
    let _serial = in_process().await;
    let c = Case::new("hang", 200, 100, 50).await;
    let gate = bf::seams::kills::gate_kills();
    let mut locker =
        mysql_async::Conn::new(mysql_async::Opts::from_url(&c.target.url_db(&c.tdb)).unwrap())
            .await
            .unwrap();
    locker.query_drop("LOCK TABLES t WRITE").await.unwrap();

    let mut cfg = c.serve_cfg();
    cfg.deadlines.target_write = Duration::from_secs(2);
    let task = tokio::spawn(serve::serve(cfg, CancellationToken::new()));

    // The first page's write times out: its permit is now a hold, not free capacity.
    let hold = wait_until("a target-write hold", || write_holds().into_iter().next()).await;
    assert!(hold.reason.contains("timed out"), "{}", hold.reason);
    let id = connection_of(&hold);
    assert!(
        listed(&c, id),
        "the statement of connection {id} still runs on the target"
    );
    let state = c.target.sql(&format!(
        "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = {id}"
    ));
    assert!(state.contains("lock"), "waiting for the lock: {state}");
    let snap = snapshot().unwrap();
    let pool = snap.pool(PoolKind::TargetWrite);
    assert!(pool.holds.iter().any(|h| h.hold == hold.hold), "{pool:?}");
    assert!(
        pool.available < pool.capacity,
        "the hold counts against capacity: {pool:?}"
    );

    // Let the KILL through: the hold is confirmed only once the server shows it gone.
    gate.add_permits(1);
    wait_until("the hold confirmed", || {
        (!write_holds().iter().any(|h| h.hold == hold.hold)).then_some(())
    })
    .await;
    assert!(
        !listed(&c, id),
        "hold confirmed while connection {id} is still listed"
    );

    locker.query_drop("UNLOCK TABLES").await.unwrap();
    locker.disconnect().await.unwrap();
    bf::seams::kills::open_kills();
    let out = tokio::time::timeout(Duration::from_secs(180), task)
        .await
        .expect("serve did not become idle")
        .unwrap()
        .unwrap_or_else(|e| panic!("serve: {e}"));
    assert_eq!(
        out.get(&c.job).map(String::as_str),
        Some("windows_done"),
        "{out:?}"
    );
    assert_eq!(c.target_count(), 200);
    assert_eq!(c.audit_count(), 200, "every row inserted exactly once");
    let snap = snapshot().unwrap();
    for kind in PoolKind::ALL {
        let p = snap.pool(kind);
        assert_eq!(p.available, p.capacity, "{kind}: {p:?}");
        assert!(p.holds.is_empty(), "{kind}: {p:?}");
    }
}
