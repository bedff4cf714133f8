//! The reader's retry bound ([`super::sessions`]) over scripted sessions in paused time:
//! `max_failures` failures in a row without progress end it with the last error, a
//! session that stored something starts the count (and the backoff) over, a definite
//! error ends it at once, and a cancel during a backoff ends it cleanly.
use super::sessions;
use crate::error::{DefiniteCode, Error, Result};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Runs [`sessions`] over `script` (each session's result and whether it stored
/// something); returns its result and when each session started (ms after the call).
async fn run(
    max_failures: u32,
    script: Vec<(Result<()>, bool)>,
    cancel: &CancellationToken,
) -> (Result<()>, Vec<u128>) {
    let script = Mutex::new(VecDeque::from(script));
    let starts = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let session = || async {
        starts.lock().unwrap().push(t0.elapsed().as_millis());
        script
            .lock()
            .unwrap()
            .pop_front()
            .expect("a session past the end of the script")
    };
    let r = sessions("s", max_failures, cancel, &session).await;
    (r, starts.into_inner().unwrap())
}

fn lost(n: u32) -> Result<()> {
    Err(Error::transient(format!("connection lost {n}")))
}

#[tokio::test(start_paused = true)]
async fn failures_in_a_row_end_with_the_last_error_after_the_budget() {
    let script = vec![(lost(1), false), (lost(2), false), (lost(3), false)];
    let (r, starts) = run(3, script, &CancellationToken::new()).await;
    assert_eq!(r.unwrap_err().to_string(), "transient: connection lost 3");
    assert_eq!(starts, vec![0, 50, 150], "50 ms doubling between sessions");
}

#[tokio::test(start_paused = true)]
async fn a_session_that_stored_something_starts_the_count_over() {
    // It is the first failure of the next streak: two more without progress end it, and
    // the backoff starts again at 50 ms.
    let script = vec![
        (lost(1), false),
        (lost(2), false),
        (lost(3), true),
        (lost(4), false),
        (lost(5), false),
    ];
    let (r, starts) = run(3, script, &CancellationToken::new()).await;
    assert_eq!(r.unwrap_err().to_string(), "transient: connection lost 5");
    assert_eq!(starts, vec![0, 50, 150, 200, 300]);
}

#[tokio::test(start_paused = true)]
async fn progress_with_a_budget_of_one_ends_with_that_failure() {
    let script = vec![(lost(1), true)];
    let (r, starts) = run(1, script, &CancellationToken::new()).await;
    assert_eq!(r.unwrap_err().to_string(), "transient: connection lost 1");
    assert_eq!(starts, vec![0]);
}

#[tokio::test(start_paused = true)]
async fn a_definite_error_or_a_clean_end_stops_at_once() {
    let refused = Err(Error::definite(DefiniteCode::Usage, "refused"));
    let (r, starts) = run(
        5,
        vec![(lost(1), false), (refused, false)],
        &CancellationToken::new(),
    )
    .await;
    assert!(!r.unwrap_err().is_transient());
    assert_eq!(starts, vec![0, 50]);
    let (r, starts) = run(
        5,
        vec![(lost(1), true), (Ok(()), false)],
        &CancellationToken::new(),
    )
    .await;
    assert!(r.is_ok());
    assert_eq!(starts, vec![0, 50]);
}

#[tokio::test(start_paused = true)]
async fn a_cancel_during_the_backoff_ends_cleanly() {
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(10)).await;
        c.cancel();
    });
    let (r, starts) = run(5, vec![(lost(1), false)], &cancel).await;
    assert!(r.is_ok());
    assert_eq!(starts, vec![0]);
}
