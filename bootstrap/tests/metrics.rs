//! The metrics endpoint during a real run (issue 8): `backfill demo --metrics-addr` is
//! scraped while it copies; the exposition names rows, windows, replay, phase and the
//! admission pools in Prometheus text format. The same run logs JSON lines
//! (`--log-format json`): every stderr line parses as a JSON object.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scrape(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn metrics_are_scraped_during_a_demo_run_and_logs_are_json_lines() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_backfill"))
        .args(["--log-format", "json", "demo", "--rows", "20000"])
        .args(["--metrics-addr", &addr, "--stream-secs", "2"])
        .env("RUST_LOG", "info")
        .env_remove("BACKFILL_FORMAT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut seen: Option<String> = None;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        let Some(body) = scrape(&addr) else { continue };
        if value(&body, "backfill_rows_applied_total{job=\"1\"}").is_some_and(|v| v > 0.0)
            && body.contains("backfill_admission_capacity{pool=")
        {
            seen = Some(body);
            break;
        }
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let body = seen.expect("no scrape with applied rows and admission pools during the run");
    assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
    for want in [
        "# TYPE backfill_rows_applied_total counter",
        "backfill_rows_read_total{job=\"1\"}",
        "backfill_rows_known{job=\"1\"}",
        "backfill_windows_planned{job=\"1\"}",
        "backfill_windows_completed_total{job=\"1\"}",
        "backfill_job_phase{job=\"1\",phase=",
        "backfill_job_paused{job=\"1\",code=\"\"} 0",
        "backfill_state_store_up 1",
        "backfill_admission_holds{pool=",
        "# TYPE backfill_log_events_total counter",
    ] {
        assert!(body.contains(want), "missing `{want}` in\n{body}");
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no log lines at info level");
    for l in lines {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["level"].is_string(), "{l}");
    }
}
