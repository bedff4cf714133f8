//! One reader per stream across processes (DESIGN §18, `kernel::capture::owner`) against
//! real MariaDB: a reader whose capture lease was taken over appends nothing to L (its
//! append is `fenced` and it ends), the new holder's reader goes on from D; leases refuse
//! a second live owner; members are listed only under the current token.
use crate::support::*;
use kernel::capture::owner;
use kernel::capture::Reader;
use kernel::control::IntentKind;
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::log;
use std::time::Duration;

const T: &str = "(id INT PRIMARY KEY, n INT NOT NULL, s VARCHAR(16) NOT NULL) ENGINE=InnoDB";

#[tokio::test]
async fn leases_refuse_a_live_owner_and_members_follow_the_token() {
    let e = env("own_lease").await;
    let ttl = Duration::from_secs(30);
    let a = owner::acquire(&e.pool, "s1", "a", ttl)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner::acquire(&e.pool, "s1", "b", ttl).await.unwrap(), None);
    let a2 = owner::acquire(&e.pool, "s1", "a", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(a2.token > a.token, "every acquire takes a new token");
    let code = owner::renew(&e.pool, &a, ttl).await.unwrap_err();
    assert_eq!(code.as_definite().unwrap().code, DefiniteCode::Fenced);
    let stale = owner::list_member(&e.pool, &a, JobId(7), Generation(1))
        .await
        .unwrap_err();
    assert_eq!(
        stale.as_definite().unwrap().code,
        DefiniteCode::Fenced,
        "a stale token lists nothing"
    );
    assert!(
        !owner::is_member(&e.pool, "s1", JobId(7), Generation(1))
            .await
            .unwrap(),
        "listed under a stale token"
    );
    owner::list_member(&e.pool, &a2, JobId(7), Generation(1))
        .await
        .unwrap();
    // Listing again (an answer lost on the wire) is fine; the stale holder still cannot
    // move the listing back to its token.
    owner::list_member(&e.pool, &a2, JobId(7), Generation(1))
        .await
        .unwrap();
    assert!(owner::list_member(&e.pool, &a, JobId(7), Generation(1))
        .await
        .is_err());
    assert!(owner::is_member(&e.pool, "s1", JobId(7), Generation(1))
        .await
        .unwrap());
    owner::release(&e.pool, &a2).await.unwrap();
    let b = owner::acquire(&e.pool, "s1", "b", ttl)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !owner::is_member(&e.pool, "s1", JobId(7), Generation(1))
            .await
            .unwrap(),
        "b has not listed it"
    );
    assert_eq!(
        owner::holder(&e.pool, "s1").await.unwrap(),
        Some(("b".into(), true))
    );
    owner::renew(&e.pool, &b, ttl).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_lease_was_taken_over_appends_nothing() {
    let e = env("own_fence").await;
    e.src.sql_in(&e.db, &format!("CREATE TABLE t {T}"));
    e.init_stream(1000).await;
    let ttl = Duration::from_secs(60);
    let first = owner::acquire(&e.pool, &e.stream, "a", ttl)
        .await
        .unwrap()
        .unwrap();
    let mut cfg = e.cfg();
    cfg.fence = Some(first.token);
    let reader = Reader::start(e.pool.clone(), cfg.clone(), e.set_for(&[(1, "t")]).await);
    let b = e.intent(1, IntentKind::B).await;
    e.wait_marker(&b, 30).await;
    // Another process takes the stream over (here: the lease is released and re-taken).
    owner::release(&e.pool, &first).await.unwrap();
    let second = owner::acquire(&e.pool, &e.stream, "b", ttl)
        .await
        .unwrap()
        .unwrap();
    let tail = log::load_position(&e.pool, &e.stream)
        .await
        .unwrap()
        .unwrap()
        .tail;
    // Its next appends are fenced; the session sees its writer's failure at the batch
    // after (a writer error is noticed on the next send), so keep writing until it ends.
    let mut i = 0;
    while !reader.is_finished() {
        i += 1;
        assert!(i < 150, "the fenced reader did not end");
        e.src
            .sql_in(&e.db, &format!("INSERT INTO t VALUES ({i}, 1, 'late')"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let err = reader.join().await.unwrap_err();
    assert_eq!(
        err.as_definite().map(|d| d.code),
        Some(DefiniteCode::Fenced),
        "{err}"
    );
    assert_eq!(
        log::load_position(&e.pool, &e.stream)
            .await
            .unwrap()
            .unwrap()
            .tail,
        tail,
        "nothing appended after the takeover"
    );
    // The new holder's reader goes on from D and captures the change.
    cfg.fence = Some(second.token);
    let reader = Reader::start(e.pool.clone(), cfg, e.set_for(&[(1, "t")]).await);
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();
    let after = log::load_position(&e.pool, &e.stream)
        .await
        .unwrap()
        .unwrap()
        .tail;
    assert!(after.seq > tail.seq, "the new reader appended");
}
