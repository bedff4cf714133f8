//! A primary killed with -9 holding writes its replica never got, then `backfill repoint`
//! (issue 34 item 4; the failover test of `repoint.rs` stops the primary cleanly). Two
//! cases, each a named outcome with nothing lost or invented:
//! - the lost write had been captured and applied to the target: the promoted replica's
//!   history does not contain D's GTID, so `repoint` refuses naming it and changes
//!   nothing (the target holds a change the new primary never had: re-install, never
//!   follow a history that forgot it);
//! - the lost write had not been captured: D's GTID is in the replica's history, the
//!   repoint is accepted, and the table follows the new primary: the target equals it
//!   field by field and never holds the lost write.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::compare::compare;
use backfill_tests::*;
use harness::{Server, ServerOpts};
use ledger::record::Phase;
use std::process::Stdio;
use std::time::Duration;

/// `backfill serve --exit-when-idle` (to STREAMING and caught up), on `source` when given.
fn serve_idle(c: &Case, source: Option<&Server>) -> Option<i32> {
    let mut cmd = backfill_tests::bin::command();
    cmd.arg("serve")
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .args(["--owner", "failover-kill", "--exit-when-idle"]);
    if let Some(s) = source {
        cmd.arg("--source").arg(s.url());
    }
    let child = cmd
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve");
    wait(child, None)
}

/// D's GTID (the capture's restart position).
async fn d_gtid(c: &Case) -> String {
    sqlx::query_scalar("SELECT restart_gtid FROM capture_position")
        .fetch_one(&c.pool)
        .await
        .unwrap()
}

/// `backfill repoint` of the killed primary's jobs to `to`: (exit code, stdout, stderr).
fn repoint(c: &Case, old: &Server, to: &Server) -> (i32, String, String) {
    let from = format!("127.0.0.1:{}", old.port());
    backfill(&[
        "repoint",
        "--state",
        &c.state_url(),
        "--source-server",
        &from,
        "--to",
        &to.url(),
    ])
    .parts()
}

/// A primary with a GTID replica, a table copied to STREAMING from it, the replica
/// caught up and then stopped: what the primary takes next, the replica never gets.
async fn streaming_with_a_stopped_replica(
    prefix: &str,
    id: u32,
) -> (&'static Server, Server, Case) {
    let primary: &'static Server = Box::leak(Box::new(Server::start(ServerOpts::source())));
    let replica = Server::start_replica_of(primary, id);
    let c = Case::on(primary, prefix, 2_000, 700, 300).await;
    assert_eq!(serve_idle(&c, None), Some(0), "serve to STREAMING");
    assert_eq!(c.head().await.phase, Phase::Streaming);
    primary.sql_in(&c.sdb, "UPDATE t SET v = 'both' WHERE id <= 50");
    replica.wait_replicated(primary, Duration::from_secs(60));
    replica.stop_replication();
    (primary, replica, c)
}

fn count(s: &Server, db: &str, v: &str) -> String {
    s.sql_in(db, &format!("SELECT COUNT(*) FROM t WHERE v = '{v}'"))
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primarys_captured_write_the_replica_lacks_refuses_the_repoint_by_gtid() {
    let (primary, replica, c) = streaming_with_a_stopped_replica("fk1_s", 6).await;
    primary.sql_in(&c.sdb, "UPDATE t SET v = 'primary only' WHERE id <= 5");
    assert_eq!(
        serve_idle(&c, None),
        Some(0),
        "the write captured and applied"
    );
    assert_eq!(count(c.target, &c.tdb, "primary only"), "5");
    let d = d_gtid(&c).await;
    c.assert_exactly_once();
    primary.kill9();
    replica.promote();
    // The exited serve's heartbeat goes stale (10 s) before repoint may act.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (code, out, err) = repoint(&c, primary, &replica);
    assert_eq!(code, 3, "refused: {out} {err}");
    assert!(err.contains(&d), "the refusal names D's GTID {d}: {err}");
    assert_eq!(d_gtid(&c).await, d, "D unchanged");
    assert_eq!(count(c.target, &c.tdb, "primary only"), "5");
    eprintln!("primary -9, captured write lost on the replica: repoint refused: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primarys_uncaptured_write_is_not_invented_and_the_table_follows_the_replica() {
    let (primary, replica, c) = streaming_with_a_stopped_replica("fk2_s", 7).await;
    assert_eq!(serve_idle(&c, None), Some(0), "caught up with 'both'");
    // No serve runs: this write is never captured, and the replica never gets it.
    primary.sql_in(
        &c.sdb,
        "UPDATE t SET v = 'lost with the primary' WHERE id <= 5",
    );
    primary.kill9();
    replica.promote();
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (code, out, err) = repoint(&c, primary, &replica);
    assert_eq!(code, 0, "repoint: {out} {err}");
    replica.sql_in(
        &c.sdb,
        "UPDATE t SET v = 'new primary' WHERE id BETWEEN 6 AND 10",
    );
    assert_eq!(
        serve_idle(&c, Some(&replica)),
        Some(0),
        "serve on the new source"
    );
    assert_eq!(c.head().await.paused, None);
    let d = compare(&replica, &c.sdb, c.target, &c.tdb, "t", &["id"]);
    assert!(d.is_clean(), "target vs the new primary: {d}");
    assert_eq!(count(c.target, &c.tdb, "lost with the primary"), "0");
    assert_eq!(count(c.target, &c.tdb, "new primary"), "5");
    eprintln!("primary -9, uncaptured write: repoint accepted ({out}), target equals the new primary: {} rows", d.rows);
}
