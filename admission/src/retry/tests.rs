//! Paused-time tests of [`super::retry`] and [`super::retry_with`].
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Failure {
    Transient,
    Permanent,
}

fn policy(max_attempts: u32, deadline_secs: u64) -> RetryPolicy {
    RetryPolicy::exponential(max_attempts, Duration::from_secs(1), Duration::from_secs(4))
        .with_deadline(Duration::from_secs(deadline_secs))
}

fn is_permanent(e: &Failure) -> bool {
    *e == Failure::Permanent
}

async fn always(calls: &AtomicU32, failure: Failure) -> Result<(), Failure> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err(failure)
}

#[test]
fn budget_counts_and_resets() {
    let mut budget = RetryBudget::new(3, 1);
    assert_eq!(budget.try_consume(), Ok(2));
    assert_eq!(budget.try_consume(), Ok(3));
    assert_eq!(
        budget.try_consume(),
        Err(BudgetExhausted { max: 3, used: 3 })
    );
    assert_eq!(budget.used(), 3);
    budget.reset();
    assert_eq!((budget.used(), budget.remaining()), (0, 3));
    assert!(RetryBudget::new(3, 7).try_consume().is_err());
}

#[test]
fn backoff_doubles_and_caps() {
    let delays: Vec<u64> = (1..=5)
        .map(|n| policy(9, 99).delay_before_retry(n).as_secs())
        .collect();
    assert_eq!(delays, [1, 2, 4, 4, 4]);
    assert_eq!(
        policy(9, 99).delay_before_retry(u32::MAX),
        Duration::from_secs(4)
    );
}

#[test]
fn linear_and_immediate_backoff() {
    let ms = Duration::from_millis;
    let linear = RetryPolicy::linear(4, ms(20), ms(50));
    let delays: Vec<Duration> = (1..=4).map(|n| linear.delay_before_retry(n)).collect();
    assert_eq!(delays, [ms(20), ms(40), ms(50), ms(50)]);
    assert_eq!(linear.delay_before_retry(u32::MAX), ms(50));
    let now = RetryPolicy::immediate(3);
    assert_eq!(now.delay_before_retry(1), Duration::ZERO);
    assert_eq!((now.max_attempts.get(), now.deadline), (3, None));
    assert_eq!(RetryPolicy::immediate(0).max_attempts.get(), 1);
}

#[tokio::test(start_paused = true)]
async fn succeeds_after_transient_failures() {
    let calls = AtomicU32::new(0);
    let op = |attempt: u32| {
        calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if attempt < 3 {
                Err(Failure::Transient)
            } else {
                Ok(attempt)
            }
        }
    };
    let start = Instant::now();
    let got = retry(op, is_permanent, &policy(5, 60), &CancellationToken::new()).await;
    assert_eq!(got, Ok(3));
    assert_eq!(start.elapsed(), Duration::from_secs(1 + 2));
}

#[tokio::test(start_paused = true)]
async fn stops_at_max_attempts() {
    let calls = AtomicU32::new(0);
    let op = |_| always(&calls, Failure::Transient);
    let got = retry(op, is_permanent, &policy(3, 60), &CancellationToken::new()).await;
    assert_eq!(
        got,
        Err(RetryError::Exhausted {
            attempts: 3,
            last: Failure::Transient
        })
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn never_retries_a_permanent_error() {
    let calls = AtomicU32::new(0);
    let op = |_| always(&calls, Failure::Permanent);
    let got = retry(op, is_permanent, &policy(5, 60), &CancellationToken::new()).await;
    assert_eq!(
        got,
        Err(RetryError::Permanent {
            attempts: 1,
            error: Failure::Permanent
        })
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn never_sleeps_past_the_deadline() {
    let calls = AtomicU32::new(0);
    let op = |_| always(&calls, Failure::Transient);
    let start = Instant::now();
    // Attempts at 0 s, 1 s, 3 s; the next delay (4 s) would end at 7 s > 5 s.
    let got = retry(op, is_permanent, &policy(10, 5), &CancellationToken::new()).await;
    let expected = RetryError::DeadlineExceeded {
        attempts: 3,
        last: Some(Failure::Transient),
    };
    assert_eq!(got, Err(expected));
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_the_deadline_does_not_start() {
    let calls = AtomicU32::new(0);
    // The first attempt itself takes 10 s: no retry starts after the 5 s deadline.
    let op = async |_| {
        tokio::time::sleep(Duration::from_secs(10)).await;
        always(&calls, Failure::Transient).await
    };
    let got = retry(op, is_permanent, &policy(10, 5), &CancellationToken::new()).await;
    let expected = RetryError::DeadlineExceeded {
        attempts: 1,
        last: Some(Failure::Transient),
    };
    assert_eq!(got, Err(expected));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_during_backoff() {
    let calls = AtomicU32::new(0);
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        canceller.cancel();
    });
    let op = |_| always(&calls, Failure::Transient);
    let start = Instant::now();
    let got = retry(op, is_permanent, &policy(10, 60), &cancel).await;
    let expected = RetryError::Cancelled {
        attempts: 2,
        last: Some(Failure::Transient),
    };
    assert_eq!(got, Err(expected));
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_token_runs_nothing() {
    let calls = AtomicU32::new(0);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let op = |_| always(&calls, Failure::Transient);
    let got = retry(op, is_permanent, &policy(3, 60), &cancel).await;
    assert_eq!(
        got,
        Err(RetryError::Cancelled {
            attempts: 0,
            last: None
        })
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn linear_waits_add_up() {
    let calls = AtomicU32::new(0);
    let op = |_| always(&calls, Failure::Transient);
    let ms = Duration::from_millis;
    let start = Instant::now();
    let linear = RetryPolicy::linear(4, ms(20), ms(1000));
    let got = retry(op, is_permanent, &linear, &CancellationToken::new()).await;
    assert_eq!(got.map_err(|e| e.attempts()), Err(4));
    assert_eq!(start.elapsed(), ms(20 + 40 + 60));
}

#[tokio::test(start_paused = true)]
async fn immediate_retries_take_no_time_and_no_deadline() {
    let calls = AtomicU32::new(0);
    let op = |_| always(&calls, Failure::Transient);
    let start = Instant::now();
    let got = retry(
        op,
        is_permanent,
        &RetryPolicy::immediate(3),
        &CancellationToken::new(),
    )
    .await;
    let expected = RetryError::Exhausted {
        attempts: 3,
        last: Failure::Transient,
    };
    assert_eq!(got, Err(expected));
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// Each attempt may borrow the lent state mutably (a connection, a flag that
/// outlives the attempts) and shared locals, and the whole call runs inside a
/// spawned (`Send + 'static`) task.
#[tokio::test(start_paused = true)]
async fn attempts_borrow_state_mutably_inside_a_spawned_task() {
    struct Conn {
        log: Vec<u32>,
    }
    impl Conn {
        async fn query(&mut self, attempt: u32, what: &str) -> Result<String, Failure> {
            self.log.push(attempt);
            tokio::task::yield_now().await;
            if attempt < 3 {
                Err(Failure::Transient)
            } else {
                Ok(format!("{what} after {}", self.log.len()))
            }
        }
    }
    let task = tokio::spawn(async move {
        let mut conn = Conn { log: Vec::new() };
        let mut touched = 0;
        let what = String::from("rows");
        let what = what.as_str();
        let cancel = CancellationToken::new();
        let got = {
            retry_with(
                &mut (&mut conn, &mut touched),
                |(conn, touched), attempt| {
                    Box::pin(async move {
                        **touched += 1;
                        conn.query(attempt, what).await
                    })
                },
                is_permanent,
                &policy(5, 60),
                &cancel,
            )
            .await
        };
        (got, touched, conn.log)
    });
    let (got, touched, log) = task.await.expect("joined");
    assert_eq!(got.as_deref(), Ok("rows after 3"));
    assert_eq!((touched, log), (3, vec![1, 2, 3]));
}

#[tokio::test(start_paused = true)]
async fn retry_with_has_the_same_bounds() {
    let mut calls = 0u32;
    let got = retry_with(
        &mut calls,
        |calls, _| {
            Box::pin(async move {
                **calls += 1;
                Err::<(), _>(Failure::Transient)
            })
        },
        is_permanent,
        &policy(10, 5),
        &CancellationToken::new(),
    )
    .await;
    let expected = RetryError::DeadlineExceeded {
        attempts: 3,
        last: Some(Failure::Transient),
    };
    assert_eq!((got, calls), (Err(expected), 3));
}
