//! A purged position, a reset history or another server at D each give their definite
//! error; nothing is skipped or re-interpreted (DESIGN §3.4, §9).
use crate::support::*;
use harness::{Server, ServerOpts};
use kernel::capture::Reader;
use kernel::control::IntentKind;
use kernel::error::DefiniteCode;
use std::time::Duration;

async fn captured_env(prefix: &str) -> Env {
    let src = leak(Server::start_private(ServerOpts::source()));
    let e = env_on(src, harness::shared_target(), prefix).await;
    e.src.sql_in(
        &e.db,
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL)",
    );
    e.init_stream(100).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "t")]).await);
    e.intent(1, IntentKind::B).await;
    e.src.sql_in(
        &e.db,
        "INSERT INTO t VALUES (1, 1), (2, 2); UPDATE t SET n = 3",
    );
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();
    e
}

async fn restart_code(e: &Env) -> DefiniteCode {
    let set = e.set_for(&[(1, "t")]).await;
    let mut cfg = e.cfg();
    cfg.max_failures = 3;
    let reader = Reader::start(e.pool.clone(), cfg, set);
    let r = tokio::time::timeout(Duration::from_secs(30), reader.join())
        .await
        .expect("the reader must stop with a definite error, not retry forever");
    let err = r.expect_err("restart must be refused");
    let d = err.as_definite().expect("definite").clone();
    eprintln!("{d}");
    d.code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_binlog_at_d_is_binlog_purged() {
    let e = captured_env("lin_purge").await;
    e.src.sql("FLUSH BINARY LOGS");
    e.src.sql_in(&e.db, "INSERT INTO t VALUES (3, 3)");
    e.src.sql("FLUSH BINARY LOGS");
    let last = e.src.binlog_files().pop().unwrap();
    // The stopped reader's dump thread ends at its next heartbeat; until then the server
    // keeps its file (PURGE skips files in use).
    let (secs, every) = (Duration::from_secs(20), Duration::from_millis(100));
    wait_for("purge did not happen", secs, every, || async {
        e.src.sql(&format!("PURGE BINARY LOGS TO '{last}'"));
        (e.src.binlog_files() == [last.clone()]).then_some(())
    })
    .await;
    assert_eq!(restart_code(&e).await, DefiniteCode::BinlogPurged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_history_at_d_is_lineage_changed() {
    let e = captured_env("lin_reset").await;
    e.src.sql("RESET MASTER");
    // Re-fill the re-used file name past D's offset with other transactions.
    for i in 0..40 {
        e.src
            .sql_in(&e.db, &format!("INSERT INTO t VALUES ({}, {i})", 100 + i));
    }
    assert_eq!(restart_code(&e).await, DefiniteCode::LineageChanged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_server_at_the_url_is_lineage_changed() {
    let mut e = captured_env("lin_swap").await;
    // Same server_id, same binlog base name, same schema: only the server differs.
    let other = leak(Server::start_private(ServerOpts::source()));
    other.sql(&format!("CREATE DATABASE {}", e.db));
    other.sql_in(
        &e.db,
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL)",
    );
    e.src = other;
    assert_eq!(restart_code(&e).await, DefiniteCode::LineageChanged);
}
