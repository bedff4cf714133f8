//! In-process wake-ups of the bounded waits on L (a marker, a position, a stream's tail):
//! every append this process commits ([`super::append`]) is announced, and a waiter looks
//! at L again at once instead of at its next poll.
//!
//! # Why it changes when a wait looks, never what it finds
//! The announcement is only a hint: every wait still decides from what L durably holds (a
//! state-store read after the commit it was told of), and still polls every
//! [`super::WAIT_POLL`], because the reader of a stream may be another process, whose
//! appends are not announced here. A waiter subscribes BEFORE its read of L, so an append
//! committed after that read is never missed (it marks the subscription changed); an
//! append it was told of but had already seen costs one more read. A lost announcement
//! (none exists: a watch keeps the last value) would only delay the look to the poll.
use std::sync::LazyLock;
use std::time::Duration;
use tokio::sync::watch;

static APPENDS: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

/// The shortest gap between two looks of one waiter woken by appends: a burst of appends
/// (a busy capture) costs a waiter at most one read per gap.
pub const MIN_GAP: Duration = Duration::from_millis(2);

/// Announces a committed append (called after the commit, never before).
pub(super) fn appended() {
    APPENDS.send_modify(|n| *n = n.wrapping_add(1));
}

/// A subscription to this process's appends; take it before reading L.
pub fn subscribe() -> watch::Receiver<u64> {
    APPENDS.subscribe()
}

/// Sleeps until `poll` has passed or this process committed an append since `rx` was
/// taken or last woke (then at least [`MIN_GAP`] after the previous look).
pub async fn pause(rx: &mut watch::Receiver<u64>, poll: Duration) {
    let started = tokio::time::Instant::now();
    tokio::select! {
        _ = rx.changed() => {
            rx.borrow_and_update();
            tokio::time::sleep_until(started + MIN_GAP).await;
        }
        _ = tokio::time::sleep(poll) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_append_after_the_subscription_wakes_the_waiter_before_its_poll() {
        let mut rx = subscribe();
        let t0 = tokio::time::Instant::now();
        appended();
        pause(&mut rx, Duration::from_secs(3600)).await;
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
        assert!(t0.elapsed() >= MIN_GAP);
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_append_the_waiter_sleeps_its_poll() {
        let mut rx = subscribe();
        let t0 = tokio::time::Instant::now();
        pause(&mut rx, Duration::from_millis(20)).await;
        assert_eq!(t0.elapsed(), Duration::from_millis(20));
    }
}
