//! The lease's fencing check on a real three-node Galera cluster (DESIGN §18): a J write
//! in flight through node 1 whose owner is taken over through node 2 cannot commit. Row
//! locks hold on one node only; what fences the stale owner across nodes is that its
//! fencing check writes the lease row (`check_in`), so the takeover's write of that row
//! fails the stale transaction (brute-force abort or certification, ERROR 1213, a
//! transient error) instead of letting it commit after the takeover.
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use ledger::journal::Journal;
use ledger::lease;
use ledger::record::JournalRecord;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_through_another_node_fails_a_stale_j_write_in_flight() {
    let cluster = tokio::task::spawn_blocking(harness::Cluster::start)
        .await
        .unwrap();
    let db = cluster.node(0).fresh_db("lease_galera");
    let open = |i: usize| {
        let url = cluster.node(i).url_db(&db);
        async move {
            kernel::state::open(&url, &Default::default())
                .await
                .unwrap()
        }
    };
    let (n1, n2) = (open(0).await, open(1).await);
    let job = JobId(7);
    // Expired at once: another owner may take it over.
    let a = lease::acquire(&n1, job, "proc-a", Duration::ZERO)
        .await
        .unwrap();
    let j1 = Journal::new(n1.clone());
    // A's J write in flight through node 1: its fencing check passed, not committed yet.
    let mut tx = n1.begin().await.unwrap();
    lease::check_in(&mut tx, &a).await.unwrap();
    // The takeover through node 2 commits (it never waits for node 1's row lock).
    let b = lease::acquire(&n2, job, "proc-b", Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(b.token > a.token);
    let e = tx
        .commit()
        .await
        .expect_err("a stale owner's transaction committed after a takeover");
    assert_eq!(kernel::error::sqlx_server_code(&e), Some(1213), "{e}");
    assert!(kernel::error::from_sqlx("commit", &e).is_transient());
    // Retried, the stale owner is fenced (read through node 1, which waits for the
    // takeover to be applied: wsrep_sync_wait).
    let rec = JournalRecord::installed(job, Generation(1));
    let e = j1.create(&a, rec.clone()).await.unwrap_err();
    assert_eq!(
        e.as_definite().map(|d| d.code),
        Some(DefiniteCode::Fenced),
        "{e}"
    );
    Journal::new(n2.clone()).create(&b, rec).await.unwrap();
    let checks: u64 = sqlx::query_scalar("SELECT fence_checks FROM ledger_lease WHERE job_id = 7")
        .fetch_one(&n1)
        .await
        .unwrap();
    assert!(checks >= 1, "the fencing check writes the lease row");
    let wait: String = sqlx::query_scalar("SELECT CAST(@@session.wsrep_sync_wait AS CHAR)")
        .fetch_one(&n1)
        .await
        .unwrap();
    assert_eq!(
        wait, "7",
        "state-store sessions on Galera read their writes"
    );
}
