//! Behaviour of [`Admission`] through its public API, in paused time.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{Admission, AdmissionError, Holder, Limits, Permit, PoolKind, DROPPED_UNCONFIRMED};

const LONG: Duration = Duration::from_secs(3600);

fn admission(read_windows: u32, sessions: u32) -> Admission {
    let limits = Limits {
        read_windows,
        target_writes: 2,
        sessions,
    };
    Admission::new(limits).expect("valid limits")
}

async fn read(adm: &Admission, owner: &str) -> Permit {
    let cancel = CancellationToken::new();
    adm.acquire_read(owner, LONG, &cancel)
        .await
        .expect("granted")
}

fn spawn_read(
    adm: &Admission,
    owner: &str,
    deadline: Duration,
) -> JoinHandle<Result<Permit, AdmissionError>> {
    let (adm, owner) = (adm.clone(), owner.to_owned());
    tokio::spawn(async move {
        let cancel = CancellationToken::new();
        adm.acquire_read(&owner, deadline, &cancel).await
    })
}

/// Lets spawned tasks run up to their next await point.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn waiting(adm: &Admission, pool: PoolKind) -> Vec<String> {
    let snap = adm.snapshot();
    snap.pool(pool)
        .waiting
        .iter()
        .map(|w| w.owner.clone())
        .collect()
}

#[test]
fn defaults_follow_the_design() {
    let limits = Limits::default();
    assert_eq!(
        (limits.read_windows, limits.target_writes, limits.sessions),
        (2, 2, 8)
    );
    let zero = Limits {
        sessions: 0,
        ..Limits::default()
    };
    let err = Admission::new(zero).expect_err("zero sessions");
    assert_eq!(err, AdmissionError::InvalidLimit { field: "sessions" });
}

#[tokio::test(start_paused = true)]
async fn timeout_names_the_holders() {
    let adm = admission(2, 8);
    let a = read(&adm, "orders/w3").await;
    let b = read(&adm, "users/w1").await;
    let hold = b.mark_release_unknown("statement timed out");
    let cancel = CancellationToken::new();
    let err = adm
        .acquire_read("items/w0", Duration::from_secs(5), &cancel)
        .await
        .expect_err("pool is full");
    let AdmissionError::Timeout {
        pool,
        waited,
        holders,
    } = &err
    else {
        panic!("expected a timeout, got {err:?}");
    };
    assert_eq!(*pool, PoolKind::ReadWindow);
    assert_eq!(*waited, Duration::from_secs(5));
    let expected = [
        Holder {
            owner: "orders/w3".into(),
            release_unknown: None,
        },
        Holder {
            owner: "users/w1".into(),
            release_unknown: Some("statement timed out".into()),
        },
    ];
    assert_eq!(holders, &expected);
    let message = err.to_string();
    assert!(
        message.contains("orders/w3") && message.contains("users/w1"),
        "{message}"
    );
    assert!(
        waiting(&adm, PoolKind::ReadWindow).is_empty(),
        "a timed-out waiter leaves the queue"
    );
    a.release_confirmed();
    adm.confirm_hold(hold).expect("known hold");
    assert_eq!(adm.snapshot().read_windows.available, 2);
}

#[tokio::test(start_paused = true)]
async fn waiters_are_served_in_fifo_order() {
    let adm = admission(1, 8);
    let first = read(&adm, "holder").await;
    let owners = ["w1", "w2", "w3"];
    let mut tasks = Vec::new();
    for owner in owners {
        tasks.push(spawn_read(&adm, owner, LONG));
        settle().await;
    }
    assert_eq!(waiting(&adm, PoolKind::ReadWindow), owners);
    first.release_confirmed();
    for (task, owner) in tasks.into_iter().zip(owners) {
        let permit = task.await.expect("joined").expect("granted");
        assert_eq!(permit.owner(), owner);
        permit.release_confirmed();
    }
}

#[tokio::test(start_paused = true)]
async fn a_dropped_permit_stays_held_until_confirmed() {
    let adm = admission(1, 8);
    let permit = read(&adm, "orders/w7").await;
    let hold = permit.hold_id();
    drop(permit); // e.g. the future timed out while its SQL may still run
    let waiter = spawn_read(&adm, "users/w2", LONG);
    tokio::time::sleep(Duration::from_secs(60)).await;
    let snap = adm.snapshot();
    let held = &snap.read_windows.holds;
    assert_eq!((held.len(), held[0].owner.as_str()), (1, "orders/w7"));
    assert_eq!(held[0].reason, DROPPED_UNCONFIRMED);
    assert_eq!(held[0].age, Duration::from_secs(60));
    assert!(snap.read_windows.waiting[0].blocked_by_holds);
    assert!(!waiter.is_finished());

    adm.confirm_hold(hold).expect("known hold");
    let permit = waiter
        .await
        .expect("joined")
        .expect("granted after confirmation");
    assert_eq!(permit.owner(), "users/w2");
    assert_eq!(
        adm.confirm_hold(hold),
        Err(AdmissionError::UnknownHold(hold))
    );
    permit.release_confirmed();
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_a_waiter() {
    let adm = admission(1, 8);
    let holder = read(&adm, "holder").await;
    let cancel = CancellationToken::new();
    let task = {
        let (adm, cancel) = (adm.clone(), cancel.clone());
        tokio::spawn(async move { adm.acquire_read("w", LONG, &cancel).await })
    };
    settle().await;
    assert_eq!(waiting(&adm, PoolKind::ReadWindow), ["w"]);
    cancel.cancel();
    let err = task.await.expect("joined").expect_err("cancelled");
    assert_eq!(
        err,
        AdmissionError::Cancelled {
            pool: PoolKind::ReadWindow,
            owner: "w".into()
        }
    );
    assert!(waiting(&adm, PoolKind::ReadWindow).is_empty());
    holder.release_confirmed();
    assert_eq!(adm.snapshot().read_windows.available, 1);
}

#[tokio::test(start_paused = true)]
async fn an_aborted_waiter_leaves_the_queue() {
    let adm = admission(1, 8);
    let holder = read(&adm, "holder").await;
    let task = spawn_read(&adm, "aborted", LONG);
    settle().await;
    task.abort();
    settle().await;
    assert!(waiting(&adm, PoolKind::ReadWindow).is_empty());
    holder.release_confirmed();
    assert_eq!(adm.snapshot().read_windows.available, 1);
}

#[test]
fn session_refusal_says_how_to_raise_the_limit() {
    let adm = admission(2, 2);
    let a = adm.try_acquire_session("tail:orders").expect("free");
    let _b = adm.try_acquire_session("tail:users").expect("free");
    let err = adm.try_acquire_session("start:items").expect_err("full");
    assert!(err.is_definite());
    let message = err.to_string();
    for expected in [
        "session limit 2 reached",
        "tail:orders",
        "tail:users",
        "--max-sessions",
        "BACKFILL_MAX_SESSIONS",
    ] {
        assert!(
            message.contains(expected),
            "{expected:?} missing from {message:?}"
        );
    }
    a.release_confirmed();
    let c = adm.try_acquire_session("start:items").expect("freed");
    c.release_confirmed();
}

#[tokio::test(start_paused = true)]
async fn write_permits_are_a_separate_pool() {
    let adm = admission(1, 8);
    let cancel = CancellationToken::new();
    let r = read(&adm, "reader").await;
    let w1 = adm.acquire_write("t1", LONG, &cancel).await.expect("free");
    let w2 = adm.acquire_write("t2", LONG, &cancel).await.expect("free");
    let err = adm
        .acquire_write("t3", Duration::ZERO, &cancel)
        .await
        .expect_err("full");
    assert!(matches!(
        err,
        AdmissionError::Timeout {
            pool: PoolKind::TargetWrite,
            ..
        }
    ));
    for p in [r, w1, w2] {
        p.release_confirmed();
    }
}

#[tokio::test(start_paused = true)]
async fn snapshot_serializes_for_status() {
    let adm = admission(1, 8);
    let p = read(&adm, "orders/w1").await;
    let _hold = p.mark_release_unknown("connection lost during COMMIT");
    let json = serde_json::to_value(adm.snapshot()).expect("serializable");
    let hold = &json["read_windows"]["holds"][0];
    assert_eq!(hold["owner"], "orders/w1");
    assert_eq!(hold["reason"], "connection lost during COMMIT");
    assert_eq!(hold["age_ms"], 0);
    assert_eq!(json["read_windows"]["pool"], "read-window");
}

#[tokio::test(start_paused = true)]
async fn write_permits_are_taken_together_or_not_at_all() {
    let adm = admission(1, 8);
    let cancel = CancellationToken::new();
    // More than the pool holds could never be granted: refused at once, naming the flag.
    let e = adm
        .acquire_writes("streams", 3, LONG, &cancel)
        .await
        .expect_err("beyond capacity");
    assert!(e.is_definite());
    assert!(e.to_string().contains("--target-writes"), "{e}");
    let one = adm
        .acquire_write("page", LONG, &cancel)
        .await
        .expect("granted");
    // 1 of 2 free: the request waits holding nothing, then times out holding nothing.
    let e = adm
        .acquire_writes("streams", 2, Duration::from_secs(5), &cancel)
        .await
        .expect_err("timed out");
    assert!(matches!(e, AdmissionError::Timeout { .. }), "{e}");
    let snap = adm.snapshot();
    assert_eq!(snap.pool(PoolKind::TargetWrite).available, 1);
    // Queued behind the page; released, both permits come together.
    let (a2, c2) = (adm.clone(), cancel.clone());
    let waiter = tokio::spawn(async move { a2.acquire_writes("streams", 2, LONG, &c2).await });
    settle().await;
    assert_eq!(waiting(&adm, PoolKind::TargetWrite), ["streams"]);
    one.release_confirmed();
    let got = waiter.await.expect("joined").expect("granted");
    assert_eq!(got.len(), 2);
    assert_eq!(adm.snapshot().pool(PoolKind::TargetWrite).available, 0);
    for p in got {
        p.release_confirmed();
    }
    assert_eq!(adm.snapshot().pool(PoolKind::TargetWrite).available, 2);
}
