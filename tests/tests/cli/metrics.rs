//! The metrics endpoint during a real run (issue 8): `backfill demo --metrics-addr` is
//! scraped while it copies; the exposition names rows, windows, replay, phase and the
//! admission pools in Prometheus text format. The same run logs JSON lines
//! (`--log-format json`): every stderr line parses as a JSON object. `backfill serve
//! --metrics-addr` is scraped while it copies and replays: the counters move; killed, its
//! admission state is shown stale by `status`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::scrape::{scrape, value};
use backfill_tests::{bf, in_process};
use std::net::TcpListener;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn metrics_are_scraped_during_a_demo_run_and_logs_are_json_lines() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = backfill_tests::command()
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

/// The value of `series` in a scrape, -1 when absent.
fn series_value(body: &str, series: &str) -> f64 {
    value(body, series).unwrap_or(-1.0)
}

fn status_json(state: &str) -> serde_json::Value {
    let out = backfill_tests::command()
        .args(["status", "--state", state, "--format", "json"])
        .env_remove("BACKFILL_FORMAT")
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "status JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `backfill serve --metrics-addr` as the real binary: the counters of the job move while
/// it copies and replays (rows, windows, groups), the admission pools and the retries
/// family are exposed; after `kill -9` status marks the serve's admission state stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_metrics_move_and_a_killed_serve_is_shown_stale() {
    let _serial = in_process().await;
    let c = backfill_tests::case::Case::new("msrv", 20_000, 2_000, 1_000).await;
    let state = c.state_url();
    let job = c.job.0.to_string();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let child = spawn_serve(&c, &state, &addr);
    let applied = format!("backfill_rows_applied_total{{job=\"{job}\"}}");
    let groups = format!("backfill_replay_groups_total{{job=\"{job}\"}}");
    let streaming = format!("backfill_job_phase{{job=\"{job}\",phase=\"STREAMING\"}} 1");
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut seen_applied: Vec<f64> = Vec::new();
    let body = loop {
        assert!(
            Instant::now() < deadline,
            "no STREAMING scrape: {seen_applied:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let Some(body) = scrape(&addr) else { continue };
        let a = series_value(&body, &applied);
        if a >= 0.0 && seen_applied.last() != Some(&a) {
            seen_applied.push(a);
        }
        if body.contains(&streaming) {
            break body;
        }
    };
    assert!(
        seen_applied.windows(2).all(|w| w[0] <= w[1]) && seen_applied.len() >= 2,
        "rows applied did not move monotonically: {seen_applied:?}"
    );
    assert_eq!(seen_applied.last(), Some(&20_000.0), "{body}");
    the_copy_metrics_are_exposed(&body, &job);
    // A source change after activation: the replayed-groups counter moves.
    let before = series_value(&body, &groups).max(0.0);
    c.source
        .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id <= 10");
    loop {
        assert!(Instant::now() < deadline, "replay groups did not move");
        tokio::time::sleep(Duration::from_millis(100)).await;
        match scrape(&addr) {
            Some(b) if series_value(&b, &groups) > before => {
                assert!(b.contains("backfill_replay_lag_seconds{job="), "{b}");
                break;
            }
            _ => {}
        }
    }
    let live = status_json(&state);
    assert_eq!(live["serve"][0]["state"], "running", "{live}");
    a_killed_serve_is_shown_stale(child, &state, &job, deadline).await;
}

fn spawn_serve(c: &backfill_tests::case::Case, state: &str, addr: &str) -> std::process::Child {
    backfill_tests::command()
        .args(["serve", "--state", state, "--data-dir"])
        .arg(c.data.path())
        .args(["--source", &c.source.url(), "--target", &c.target.url()])
        .args(["--read-windows", "1", "--metrics-addr", addr])
        .args(["--read-rows-per-sec", "3000"])
        .args(["--owner", &format!("metrics-test-{}", std::process::id())])
        .env("RUST_LOG", "warn")
        .env_remove("BACKFILL_FORMAT")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn the_copy_metrics_are_exposed(body: &str, job: &str) {
    let windows = format!("backfill_windows_completed_total{{job=\"{job}\"}}");
    let planned = format!("backfill_windows_planned{{job=\"{job}\"}}");
    assert!(series_value(body, &windows) >= 10.0, "{body}");
    assert_eq!(
        series_value(body, &windows),
        series_value(body, &planned),
        "{body}"
    );
    for want in [
        "backfill_admission_capacity{pool=\"read-window\"} 1",
        "backfill_admission_holds{pool=\"read-window\"} 0",
        "backfill_admission_waiting_blocked_by_holds{pool=\"read-window\"} 0",
        "# TYPE backfill_read_throttle_waits_total counter",
        "# TYPE backfill_retries_total counter",
        "backfill_retries_total{kind=\"job_task\"}",
        "backfill_retries_total{kind=\"capture_reader\"}",
        "backfill_job_paused{job=",
    ] {
        assert!(body.contains(want), "missing `{want}` in\n{body}");
    }
    // 20 000 rows under a limit of 3 000 rows/s: page reads waited for it.
    assert!(
        series_value(body, "backfill_read_throttle_waits_total") > 0.0
            && series_value(body, "backfill_read_throttle_calls_total") >= 20.0,
        "{body}"
    );
}

async fn a_killed_serve_is_shown_stale(
    mut child: std::process::Child,
    state: &str,
    job: &str,
    deadline: Instant,
) {
    // kill -9: no stop is recorded; the heartbeat ages until status calls the row stale.
    child.kill().unwrap();
    child.wait().unwrap();
    let stale = loop {
        assert!(
            Instant::now() < deadline,
            "the killed serve never shown stale"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let v = status_json(state);
        if v["serve"][0]["state"] == "stale" {
            break v;
        }
        assert_eq!(v["serve"][0]["state"], "running", "{v}");
    };
    assert_eq!(stale["serve"][0]["stale"], true, "{stale}");
    let text = backfill_tests::command()
        .args(["status", "--state", state, job])
        .env_remove("BACKFILL_FORMAT")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("STALE") && text.contains("as they were then"),
        "{text}"
    );
}

/// `backfill_pauses_total{reason}`: a table that pauses moves the counter of its pause code
/// (here a DDL on the source between install and start: `schema_changed`), and only it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_moves_the_pauses_counter_of_its_code() {
    let _serial = in_process().await;
    let c = backfill_tests::case::Case::new("mpause", 300, 100, 50).await;
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t ADD COLUMN extra INT NULL");
    let before = backfill_tests::serving::render_metrics(&c.pool).await;
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: schema_changed"), "{out}");
    let after = backfill_tests::serving::render_metrics(&c.pool).await;
    assert!(
        after.contains("# TYPE backfill_pauses_total counter"),
        "{after}"
    );
    for code in bf::supervisor::telemetry::PAUSE_CODES {
        let series = format!("backfill_pauses_total{{reason=\"{}\"}}", code.as_str());
        let moved = series_value(&after, &series) - series_value(&before, &series);
        let want = if code.as_str() == "schema_changed" {
            1.0
        } else {
            0.0
        };
        assert_eq!(moved, want, "{series}:\n{after}");
        assert!(series_value(&after, &series) >= 0.0, "{series} listed");
    }
}
