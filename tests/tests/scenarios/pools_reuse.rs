//! The reuse of control connections (`bootstrap/src/io/pool/mod.rs`) against real MariaDB:
//! what a user changed in its session is gone for the next one, and data connections are
//! never reused.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use mysql_async::prelude::Queryable;

type Session = (String, String, String, String, String, u64, u64);

/// What a session carries: @x, sql_mode, time zone, character_set_client, isolation,
/// whether a transaction is open, its id.
async fn state(c: &mut mysql_async::Conn) -> Session {
    let q = "SELECT COALESCE(@x, 'unset'), @@session.sql_mode, @@session.time_zone, \
             @@character_set_client, @@session.tx_isolation, \
             @@in_transaction, CONNECTION_ID()";
    let r: Option<Session> = c.query_first(q).await.unwrap();
    r.unwrap()
}

/// A control connection given back is reused only in a new connection's state: whatever
/// its last user changed (a user variable, session variables, an open transaction holding
/// a row lock, a temporary table) is gone for the next user, and the session setup (SET
/// NAMES binary, the target's time zone and sql_mode) is there again. A data connection
/// is never reused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_control_connection_starts_as_a_new_one() {
    use backfill_tests::bf::io::pool::{ConnPool, Side, Use};
    let target = harness::shared_target();
    let db = target.fresh_db("pools_reuse");
    target.sql_in(
        &db,
        "CREATE TABLE r (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO r VALUES (1)",
    );
    let opts = ledger::target::target_opts(&target.url()).unwrap();
    let pool = ConnPool::of_opts(Side::Target, opts, 1);
    let mut c = pool.connect(Use::Control, "(test)").await.unwrap();
    let fresh = state(&mut c).await;
    c.query_drop(format!(
        "SET @x = 'left over'; SET SESSION sql_mode = ''; SET SESSION time_zone = '+05:00'; \
         SET NAMES utf8mb4; SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE; \
         CREATE TEMPORARY TABLE {db}.tmp (a INT); BEGIN; SELECT * FROM {db}.r FOR UPDATE"
    ))
    .await
    .unwrap();
    let dirty = state(&mut c).await;
    assert_eq!(dirty.0, "left over");
    assert_eq!(
        dirty.5, 1,
        "a transaction is open before the connection is given back"
    );
    let id = fresh.6;
    c.close().await;
    assert_eq!(pool.stats().idle, 1, "the control connection is kept");

    let mut again = pool.connect(Use::Control, "(test)").await.unwrap();
    let reused = state(&mut again).await;
    assert_eq!(reused.6, id, "the same server connection is reused");
    assert_eq!(
        (&reused.0, &reused.1, &reused.2, &reused.3, &reused.4, reused.5),
        (&fresh.0, &fresh.1, &fresh.2, &fresh.3, &fresh.4, 0),
        "the reused connection is in a new connection's state"
    );
    assert_eq!(fresh.3, "binary", "SET NAMES binary is part of the setup");
    let tmp: Result<Vec<u64>, _> = again.query(format!("SELECT a FROM {db}.tmp")).await;
    assert!(tmp.is_err(), "the temporary table is gone");
    // The row lock of the rolled-back transaction is free for another session.
    target.sql_in(
        &db,
        "SET SESSION innodb_lock_wait_timeout = 1; UPDATE r SET id = 2 WHERE id = 1",
    );
    again.close().await;

    // Data connections are closed when given back, never kept.
    let d = pool.connect(Use::Data, "(test)").await.unwrap();
    let data_id = u64::from(d.id());
    d.close().await;
    let mut c = pool.connect(Use::Control, "(test)").await.unwrap();
    assert_ne!(state(&mut c).await.6, data_id);
    assert_eq!(pool.stats().slots[0].in_use, 0);
    c.close().await;
    pool.close_idle().await;
    assert_eq!(pool.stats().idle, 0);
}
