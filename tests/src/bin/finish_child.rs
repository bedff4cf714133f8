//! The child process of the finish crash tests (`tests/tests/crash/finish.rs`): runs the
//! steps after the windows (fence, replay, activation, streaming for a while) on the world
//! given on its command line, with `BACKFILL_FAILPOINTS` from its environment; a fault
//! point exits it with status 86, like a kill -9 between two statements. Exits 0 when no
//! fault point fired.
//!
//! Usage: `finish-child WORLD ROWS WINDOWS BATCH_ROWS STREAM_SECS` (WORLD as
//! `World::encode` gives it).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::world::{cfg, finish_steps, World};
use std::time::Duration;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    assert_eq!(
        a.len(),
        5,
        "usage: finish-child WORLD ROWS WINDOWS BATCH_ROWS STREAM_SECS"
    );
    let w = World::decode(&a[0]);
    let n: u64 = a[1].parse().unwrap();
    let windows: u32 = a[2].parse().unwrap();
    let batch: usize = a[3].parse().unwrap();
    let stream_secs: u64 = a[4].parse().unwrap();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(finish_steps(
            &w,
            n,
            windows,
            cfg(batch, 4),
            Duration::from_secs(stream_secs),
        ));
    // The fault point did not fire.
    std::process::exit(0);
}
