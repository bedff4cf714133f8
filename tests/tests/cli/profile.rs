//! `BACKFILL_PROFILE=FILE` (issue 35 item 1): the real `backfill serve` writes one JSON
//! line per protocol step as it ends (phase, job, window, milliseconds), every step of a
//! bootstrap to STREAMING among them, each window's steps once per window.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::keyed;
use std::collections::{BTreeMap, BTreeSet};

/// Steps of every window, and of the table once.
const WINDOW: [&str; 9] = [
    "window.low",
    "window.read",
    "window.page_read",
    "window.raw_persist",
    "window.high",
    "window.seal",
    "window.fold",
    "window.final_seal",
    "window.apply_page",
];
const TABLE: [&str; 4] = ["fence", "replay", "audit.fields", "audit.activate"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_profiles_every_step_of_a_bootstrap_per_window() {
    let c = Case::new("prof", 1_200, 400, 150).await;
    let windows = c.plan().await.len();
    let file = c.data.path().join("profile.jsonl");
    let out = keyed::serve_command(&c, &["--exit-when-idle"], "")
        .env("BACKFILL_PROFILE", &file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.head().await.phase, ledger::record::Phase::Streaming);
    let text = std::fs::read_to_string(&file).unwrap();
    let mut seen: BTreeMap<String, BTreeSet<Option<u64>>> = BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(v["job"], c.job.0, "{line}");
        assert!(v["ms"].as_f64().is_some_and(|ms| ms >= 0.0), "{line}");
        let phase = v["phase"].as_str().unwrap().to_string();
        seen.entry(phase).or_default().insert(v["w"].as_u64());
    }
    for p in WINDOW.iter().chain(&["window.j"]) {
        let ws = seen.get(*p).unwrap_or_else(|| panic!("no {p} in {seen:?}"));
        assert_eq!(ws.len(), windows, "{p}: one per window: {ws:?}");
    }
    for p in TABLE {
        assert_eq!(seen.get(p).map(BTreeSet::len), Some(1), "{p}: {seen:?}");
    }
    // Without the variable: no file, nothing else changes.
    let other = c.data.path().join("none.jsonl");
    let out = keyed::serve_command(&c, &["--exit-when-idle"], "")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!other.exists());
    eprintln!(
        "profile: {} lines, {} phases",
        text.lines().count(),
        seen.len()
    );
}
