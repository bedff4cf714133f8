//! XA transactions on captured tables (DESIGN §3.8): a prepared group is held in L, takes
//! effect at its XA COMMIT's position with the changes' original identities, is dropped
//! at its XA ROLLBACK; batch sizes and restarts do not change L. (Killed between the
//! prepare and the commit: crash/xa.rs.)
use crate::support::xa::{assert_xa_semantics, finish_workload, prepare_big, T};
use crate::support::*;
use kernel::control::IntentKind;
use kernel::log;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_groups_take_effect_at_commit_and_are_dropped_at_rollback() {
    let e = env("cap_xa").await;
    e.src.sql_in(&e.db, T);
    e.src
        .sql_in(&e.db, "CREATE TABLE other (x INT PRIMARY KEY)");
    let streams = ["b1", "b7", "b1000", "b1_restarts", "b7_restarts"];
    for s in streams {
        e.init_stream_named(&e.pool, s, 100).await;
    }
    let set = e.set_for(&[(1, "t")]).await;
    e.intent(1, IntentKind::B).await;
    prepare_big(&e, "w_");
    finish_workload(&e, "w_");
    let f = e.intent(1, IntentKind::F).await;
    let mut reference: Option<Vec<String>> = None;
    for s in streams {
        let batch = s
            .trim_start_matches('b')
            .split('_')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let sessions = run_until(&e, s, &set, batch, s.ends_with("restarts"), f.nonce).await;
        let recs = all_records(&e.pool, s).await;
        log::verify_chain(&e.pool, s).await.unwrap();
        eprintln!("{s}: {sessions} sessions, {} records", recs.len());
        assert_xa_semantics(&e, &recs, "w_");
        assert!(log::holds(&e.pool, s).await.unwrap().is_empty());
        assert!(log::pauses(&e.pool, s).await.unwrap().is_empty());
        let ids = chunk_identities(&recs);
        match &reference {
            None => reference = Some(ids),
            Some(r) => assert_eq!(&ids, r, "stream {s} ({sessions} sessions) differs"),
        }
    }
}
