//! Bootstrap time with materials in the state store versus the local data directory
//! (issue 18 benchmark; goal: state within 1.2x of local). The suite runs it small as a
//! correctness test (both copies complete, the target equal to the source value by value
//! by the independent comparison, `backfill_tests::compare`); the measured size is
//! `BENCH_MATERIALS_ROWS=100000 cargo test -p backfill-tests --test crash materials_bench -- --nocapture`.
//! Each placement copies its own fresh table (windows only) with a `backfill serve
//! --exit-when-idle` process; local and state alternate, BENCH_MATERIALS_RUNS (default 1)
//! times each, and the best of each is compared. The state store lives on the target
//! server (the default placement of the harness), durability as the harness configures.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::compare::compare;
use std::time::{Duration, Instant};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// One bootstrap (windows only) of a fresh `rows`-row table with `--materials at`.
async fn bootstrap(prefix: &str, rows: i64, at: &str) -> Duration {
    let window = (rows as u64 / 10).max(1);
    let c = Case::new(prefix, rows, window, window.min(1_000)).await;
    let t0 = Instant::now();
    let code = backfill_tests::bin::command()
        .arg("serve")
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .args(["--exit-when-idle", "--windows-only", "--owner", "bench"])
        .args(["--materials", at])
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("spawn backfill serve")
        .code();
    let took = t0.elapsed();
    assert_eq!(code, Some(0), "serve --materials {at}");
    // Value by value, rendered by each server (not a count: a page applied with a wrong
    // value, or one row lost and another doubled, would keep the count).
    let d = compare(c.source, &c.sdb, c.target, &c.tdb, "t", &["id"]);
    assert!(
        d.is_clean() && d.rows == rows as usize,
        "target equals source with --materials {at}: {d}"
    );
    let in_state: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM material_blob_heads")
        .fetch_one(&c.pool)
        .await
        .unwrap();
    if at == "state" {
        assert!(in_state > 0, "materials are in the state store");
    } else {
        assert_eq!(
            in_state, 0,
            "--materials local writes none to the state store"
        );
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn materials_bench_state_versus_local() {
    let rows = env("BENCH_MATERIALS_ROWS", 5_000) as i64;
    let runs = env("BENCH_MATERIALS_RUNS", 1);
    let (mut local, mut state) = (Duration::MAX, Duration::MAX);
    for i in 0..runs {
        local = local.min(bootstrap(&format!("mbl{i}"), rows, "local").await);
        state = state.min(bootstrap(&format!("mbs{i}"), rows, "state").await);
    }
    eprintln!(
        "materials bench: {rows} rows, best of {runs}: local {local:?}, state {state:?}, ratio {:.2}",
        state.as_secs_f64() / local.as_secs_f64()
    );
}
