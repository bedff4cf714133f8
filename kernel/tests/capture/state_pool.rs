//! The state store's pool against a real server behind a proxy: a connection given back
//! while an answer is still owed to it is closed within `RELEASE_SETTLE` instead of
//! keeping its pool slot forever (`kernel::state`'s release check; sqlx 0.9's own release
//! ping has no bound).
use harness::Proxy;
use kernel::state::{StateOptions, RELEASE_SETTLE};
use std::time::Duration;

/// A statement dropped while its answer is held back on the way (a `select!` that lost, a
/// task aborted at serve's stop): the connection goes back owing that answer. Without
/// the release check sqlx's ping on release waits for it forever and keeps the pool's
/// only slot: the next acquire times out, and `Pool::close` would wait forever (serve's
/// stop hung so, 23 minutes). With it, the connection is closed within `RELEASE_SETTLE`
/// and the next acquire opens a new one (not held: the hold covers the old connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_given_back_owing_an_answer_does_not_hold_the_pool() {
    let server = harness::shared_target();
    let db = server.fresh_db("state_release");
    let proxy = Proxy::start(vec![server.port()]);
    let opts = StateOptions {
        max_connections: 1,
        ..StateOptions::default()
    };
    let pool = kernel::state::open(&proxy.url_db(&db), &opts)
        .await
        .unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let one: i64 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(one, 1, "the connection works before the hold");
    proxy.hold_answers(true);
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        sqlx::query_scalar::<_, i64>("SELECT 2").fetch_one(&mut *conn),
    )
    .await;
    assert!(dropped.is_err(), "the answer was held back: {dropped:?}");
    drop(conn);
    assert!(
        opts.connect_timeout > RELEASE_SETTLE,
        "the acquire below waits longer than the settle bound"
    );
    let next = pool.acquire().await;
    proxy.hold_answers(false);
    let mut next = next.unwrap_or_else(|e| {
        panic!(
            "the pool's only slot is still held by the connection given back owing an answer: {e}"
        )
    });
    let three: i64 = sqlx::query_scalar("SELECT 3")
        .fetch_one(&mut *next)
        .await
        .unwrap();
    assert_eq!(three, 3);
    drop(next);
    let bound = RELEASE_SETTLE + Duration::from_secs(10);
    let closed = tokio::time::timeout(bound, pool.close()).await;
    assert!(closed.is_ok(), "the pool's close ends within {bound:?}");
}
