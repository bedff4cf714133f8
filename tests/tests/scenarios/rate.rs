//! Source read rate limits (issue 7, DESIGN §8) against real MariaDB: window page reads go
//! through the source's governor limiter. Unlimited, no page read waits; with a rows/s or a
//! bytes/s limit below what the copy needs, most page reads wait on the limiter. Counted,
//! never timed: the limiter's own tallies of grants and waits.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use admission::ThrottleStats;
use backfill_tests::case::*;
use backfill_tests::serving as serve;
use backfill_tests::*;
use std::num::NonZeroU32;
use std::time::Duration;

const ROWS: i64 = 400;

/// Runs serve for a fresh table with the given limits; returns what its limiter granted.
async fn copy_with(prefix: &str, rate: admission::RateLimits) -> ThrottleStats {
    let c = Case::new(prefix, ROWS, 200, 50).await;
    let mut cfg = c.serve_cfg();
    cfg.rate = rate;
    let telemetry = cfg.telemetry.clone();
    let out = serve::serve_until_idle(cfg, Duration::from_secs(300)).await;
    assert_eq!(
        out.get(&c.job).map(String::as_str),
        Some("windows_done"),
        "{prefix}"
    );
    assert_eq!(c.target_count(), ROWS as u64, "{prefix}");
    let stats = telemetry.throttle_stats();
    eprintln!("{prefix}: {stats:?}");
    assert!(
        stats.rows >= ROWS as u64,
        "every row read passed the limiter: {stats:?}"
    );
    stats
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_rate_limits_make_window_page_reads_wait_on_the_limiter() {
    let _serial = in_process().await;
    // 2 windows of 200 rows, 4 pages of 50 rows each (plus an empty closing read).
    let free = copy_with("rate_free", Default::default()).await;
    assert_eq!(free.waits, 0, "unlimited: no read waits ({free:?})");
    assert!(free.calls >= 8, "{free:?}");

    // 100 rows/s: the first second's burst covers 2 pages; the later ones must wait.
    let rows = copy_with(
        "rate_rows",
        admission::RateLimits {
            rows_per_sec: NonZeroU32::new(100),
            bytes_per_sec: None,
        },
    )
    .await;
    assert!(
        rows.waits * 2 >= rows.calls.saturating_sub(2),
        "rows/s: most page reads waited ({rows:?})"
    );
    assert!(rows.waits >= 3, "{rows:?}");

    // About 20 bytes a row: 2000 bytes/s is about 100 rows/s again, now counted in bytes.
    let bytes = copy_with(
        "rate_bytes",
        admission::RateLimits {
            rows_per_sec: None,
            bytes_per_sec: NonZeroU32::new(2000),
        },
    )
    .await;
    assert!(
        bytes.bytes >= 20 * ROWS as u64 / 2,
        "bytes were counted: {bytes:?}"
    );
    assert!(bytes.waits >= 3, "bytes/s: page reads waited ({bytes:?})");
}
