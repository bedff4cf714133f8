//! The CI run of `backfill demo` at a small size (issue 8 acceptance): the real binary
//! starts its own throwaway MariaDB servers, copies 20 000 rows under a concurrent writer
//! to STREAMING, audits, verifies, prints its summary and removes everything.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::process::Command;
use std::time::Instant;

#[test]
fn demo_reaches_streaming_with_a_clean_verify_and_prints_its_summary() {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_backfill"))
        .args(["demo", "--rows", "20000", "--writes-per-sec", "300"])
        .env_remove("BACKFILL_FORMAT")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for line in [
        "backfill demo summary",
        "state:    STREAMING",
        "copied:   20000 rows in ",
        "audit:    PASS - ",
        "activation credential present",
        "verify:   0 missing / 0 extra / 0 differing fields over ",
        "demo: removing the servers and their directories",
    ] {
        assert!(
            stdout.contains(line),
            "missing `{line}` in:\n{stdout}\n{stderr}"
        );
    }
    // stdout is not a terminal here: plain progress lines, no bar escapes.
    assert!(stdout.contains("demo: windows "), "{stdout}");
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    eprintln!("demo --rows 20000: {:?}\n{stdout}", started.elapsed());
}

#[test]
fn demo_json_summary_names_the_evidence() {
    let out = Command::new(env!("CARGO_BIN_EXE_backfill"))
        .args([
            "demo",
            "--rows",
            "3000",
            "--format",
            "json",
            "--stream-secs",
            "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["state"], "STREAMING");
    assert_eq!(v["audit"]["passed"], true);
    assert_eq!(v["verify"]["clean"], true);
    assert_eq!(v["verify"]["missing"], 0);
    assert_eq!(v["rows"], 3000);
}
