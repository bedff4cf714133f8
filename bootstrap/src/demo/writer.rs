//! The demo's concurrent writer: one connection to the source, a steady rate of inserts,
//! updates, deletes, primary-key changes and multi-statement transactions, so the copy
//! runs against a table that keeps changing inside and across windows. A statement the
//! source refuses (a key changed onto one that exists) is counted and logs nothing.
use super::TABLE;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What the writer did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub statements: u64,
    pub refused: u64,
}

#[derive(Default)]
struct Counters {
    statements: AtomicU64,
    refused: AtomicU64,
}

pub struct Writer {
    cancel: CancellationToken,
    counters: Arc<Counters>,
    task: Option<JoinHandle<()>>,
}

/// The statement of step `i` over a table that was loaded with ids 1..=n.
pub fn step(n: u64, i: u64) -> String {
    // A multiplicative walk over the loaded keys: spread over every window.
    let k = |m: u64| (i.wrapping_mul(m) % n.max(1)) + 1;
    match i % 6 {
        0 => format!(
            "INSERT INTO {TABLE} VALUES ({}, {}, 'new', {}.25, 'EUR', 'inserted by the demo writer', NOW(6), NULL)",
            n + 1 + i,
            1 + i % 50_000,
            i % 1000
        ),
        1 => format!(
            "UPDATE {TABLE} SET status = 'paid', amount = amount + 1, updated_at = NOW(6) WHERE id = {}",
            k(7919)
        ),
        2 => format!("DELETE FROM {TABLE} WHERE id = {}", k(104_729)),
        3 => format!(
            "UPDATE {TABLE} SET id = {} WHERE id = {}",
            n + 10_000_000 + i,
            k(15_485_863)
        ),
        4 => format!(
            "UPDATE {TABLE} SET note = NULL, updated_at = NOW(6) WHERE id BETWEEN {a} AND {b}",
            a = k(32_452_843),
            b = k(32_452_843) + 20
        ),
        _ => format!(
            "BEGIN; UPDATE {TABLE} SET status = 'shipped' WHERE id = {}; \
             INSERT INTO {TABLE} VALUES ({}, 7, 'new', 9.99, 'USD', NULL, NOW(6), NULL); COMMIT",
            k(49_979_687),
            n + 20_000_000 + i
        ),
    }
}

impl Writer {
    /// Starts writing `per_sec` statements a second (0: a writer that does nothing).
    pub fn start(opts: mysql_async::Opts, rows: u64, per_sec: u32) -> Writer {
        let cancel = CancellationToken::new();
        let counters = Arc::new(Counters::default());
        let task = (per_sec > 0).then(|| {
            let (cancel, counters) = (cancel.clone(), counters.clone());
            tokio::spawn(async move {
                let Ok(mut c) = mysql_async::Conn::new(opts).await else {
                    tracing::warn!("demo writer: cannot connect to the source");
                    return;
                };
                // Ticks of 10 ms, each with its share of the rate.
                let per_tick = (u64::from(per_sec) / 100).max(1);
                let tick = Duration::from_millis(if per_sec >= 100 {
                    10
                } else {
                    1000 / u64::from(per_sec)
                });
                let mut every = tokio::time::interval(tick);
                let mut i = 0u64;
                while !cancel.is_cancelled() {
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = every.tick() => {}
                    }
                    for _ in 0..per_tick {
                        if c.query_drop(step(rows, i)).await.is_err() {
                            counters.refused.fetch_add(1, Ordering::Relaxed);
                            // Close an open transaction of a failed multi-statement step.
                            let _ = c.query_drop("ROLLBACK").await;
                        }
                        counters.statements.fetch_add(1, Ordering::Relaxed);
                        i += 1;
                    }
                }
                let _ = c.disconnect().await;
            })
        });
        Writer {
            cancel,
            counters,
            task,
        }
    }

    pub fn tally(&self) -> Tally {
        Tally {
            statements: self.counters.statements.load(Ordering::Relaxed),
            refused: self.counters.refused.load(Ordering::Relaxed),
        }
    }

    /// Stops writing; returns once the connection is closed.
    pub async fn stop(mut self) -> Tally {
        self.cancel.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.tally()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_cover_every_kind_of_change() {
        let s: Vec<String> = (0..6).map(|i| step(1000, i)).collect();
        assert!(s[0].starts_with("INSERT"));
        assert!(s[2].starts_with("DELETE"));
        assert!(s[3].contains("SET id ="));
        assert!(s[5].starts_with("BEGIN"));
    }
}
