//! The source shutting down or the state store dying mid-capture: the reader resumes from
//! the stored D and L ends up exactly as an uninterrupted capture (DESIGN §3.6). XA
//! transactions: see xa.rs.
use crate::support::*;
use harness::{Server, ServerOpts};
use kernel::capture::Reader;
use kernel::control::IntentKind;
use kernel::log;
use std::collections::BTreeMap;
use std::time::Duration;

const T: &str =
    "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(32) NULL, n INT NOT NULL)";

fn load(e: &Env, from: u64) {
    for i in 0..20 {
        let lo = from + i * 100;
        e.src.sql_in(
            &e.db,
            &format!(
                "INSERT INTO t SELECT seq, 'x', 0 FROM seq_{}_to_{}",
                lo + 1,
                lo + 100
            ),
        );
        e.src
            .sql_in(&e.db, &format!("UPDATE t SET n = n + 1 WHERE id > {lo}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_restart_and_state_store_crash_resume_from_d() {
    let src = leak(Server::start_private(ServerOpts::source()));
    let state = leak(Server::start_private(ServerOpts::target()));
    let e = env_on(src, state, "cap_restart").await;
    e.src.sql_in(&e.db, T);
    e.init_stream(50).await;
    e.init_stream_named(&e.pool, "clean", 50).await;
    let mut cfg = e.cfg();
    cfg.silence_timeout = Duration::from_secs(2);
    let reader = Reader::start(e.pool.clone(), cfg, e.set_for(&[(1, "t")]).await);
    e.intent(1, IntentKind::B).await;
    load(&e, 0);
    // The source shuts down cleanly (the stream ends with Ok(None)) and comes back with a
    // new binlog file.
    e.src.restart();
    load(&e, 10_000);
    // The state store is SIGKILLed under the reader (writes of unknown outcome).
    state.kill9();
    load(&e, 20_000);
    state.restart();
    load(&e, 30_000);
    let f = e.intent(1, IntentKind::F).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let pool = kernel::state::open(&e.state_url, &Default::default())
        .await
        .unwrap();
    log::wait_for_marker(&pool, &e.stream, f.nonce, deadline)
        .await
        .unwrap();
    assert!(!reader.is_finished(), "the reader kept going");
    reader.stop().await.unwrap();

    clean_capture(&e, &pool, "clean", &[(1, "t")], f.nonce, deadline).await;
    log::verify_chain(&pool, &e.stream).await.unwrap();
    let a = all_records(&pool, &e.stream).await;
    let b = all_records(&pool, "clean").await;
    assert_eq!(chunk_identities(&a), chunk_identities(&b));
    let folded = fold(&a, "t", 0, BTreeMap::new());
    assert_eq!(
        as_text(&folded),
        cli_rows(e.src, &e.db, "SELECT id, s, n FROM t")
    );
}
