//! The CI run of `backfill demo` at a small size (issue 8 acceptance): the real binary
//! starts its own throwaway MariaDB servers, copies 20 000 rows under a concurrent writer
//! to STREAMING, audits, verifies, prints its summary and removes everything. Its source
//! and target are also compared from outside, by their servers, while it is stopped after
//! the catch-up (`backfill_tests::demo`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::process::Command;
use std::time::Instant;

#[test]
fn demo_reaches_streaming_with_a_clean_verify_and_prints_its_summary() {
    let started = Instant::now();
    let d = backfill_tests::demo::run(&["--rows", "20000", "--writes-per-sec", "300"]);
    let (stdout, stderr) = (&d.run.stdout, &d.run.stderr);
    assert_eq!(d.run.code, 0, "{stdout}\n{stderr}");
    // Not the demo's word for it: its source and target compared by their servers.
    assert_independently_equal(&d);
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
    // Its verify compared every row of the source.
    let (rows, _) = d.sides.0.digest.split_once('\t').unwrap();
    assert!(
        stdout.contains(&format!("differing fields over {rows} rows compared")),
        "{rows} rows: {stdout}"
    );
    // stdout is not a terminal here: plain progress lines, no bar escapes.
    assert!(stdout.contains("demo: windows "), "{stdout}");
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    eprintln!("demo --rows 20000: {:?}\n{stdout}", started.elapsed());
}

/// The source and target tables the demo left, compared by their servers while it was
/// stopped after the catch-up: same rows (count and per-row HEX digest) and checksum.
fn assert_independently_equal(d: &backfill_tests::demo::Demo) {
    let (source, target) = &d.sides;
    assert_eq!(source, target, "source vs target as the servers see them");
    let (rows, digest) = source.digest.split_once('\t').unwrap();
    assert!(
        rows.parse::<u64>().unwrap() > 0 && digest != "-",
        "{source:?}"
    );
    assert!(!source.checksum.is_empty(), "{source:?}");
}

#[test]
fn demo_json_summary_names_the_evidence() {
    let d =
        backfill_tests::demo::run(&["--rows", "3000", "--format", "json", "--stream-secs", "1"]);
    let (stdout, stderr) = (&d.run.stdout, &d.run.stderr);
    assert_eq!(d.run.code, 0, "{stdout}\n{stderr}");
    assert_independently_equal(&d);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["state"], "STREAMING");
    assert_eq!(v["audit"]["passed"], true);
    assert_eq!(v["verify"]["clean"], true);
    assert_eq!(v["verify"]["missing"], 0);
    assert_eq!(v["rows"], 3000);
    let (rows, _) = d.sides.0.digest.split_once('\t').unwrap();
    assert_eq!(v["verify"]["rows_compared"].to_string(), rows, "{stdout}");
}

#[test]
fn ctrl_c_stops_the_demo_and_removes_its_servers() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = backfill_tests::command()
        .args(["demo", "--rows", "50000"])
        .env_remove("BACKFILL_FORMAT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Interrupt while the copy runs: after install, before STREAMING.
    for l in lines.by_ref() {
        if l.unwrap().contains("installed job") {
            break;
        }
    }
    let root = std::env::temp_dir().join("backfill-harness");
    let ours = || {
        std::fs::read_dir(&root)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .starts_with(&format!("{pid}-"))
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(ours(), 2, "two server directories while the demo runs");
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_ne!(
        status.code(),
        Some(0),
        "an interrupted demo is not a success"
    );
    assert!(
        rest.iter().any(|l| l.contains("removing the servers")),
        "{rest:?}"
    );
    assert_eq!(ours(), 0, "the servers' directories are removed");
}
