//! `backfill status` against a real job (issue 8): before serve (installed, nothing read),
//! then after serve took it to STREAMING: windows done/total, rows known/read/applied, the
//! capture position, the replay cursor and lag, in text and JSON, and `--watch` redraws.
//! Commands recorded but not yet carried out (`start`, `resume`) are listed until serve
//! consumes them; the serve row says it stopped.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_shows_windows_rows_capture_and_replay() {
    let _serial = in_process().await;
    let c = Case::new("stat", 3000, 1000, 500).await;
    let state = c.state_url();
    let job = c.job.0.to_string();
    let before: serde_json::Value =
        serde_json::from_str(status_cli(&["--state", &state, &job, "--format", "json"]).trim())
            .unwrap();
    assert_eq!(before["windows_done"], 0);
    assert_eq!(before["rows"]["applied"], 0);
    assert!(before["replay"].is_null());
    // Recorded commands that no serve carried out yet are listed.
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    let pending: serde_json::Value =
        serde_json::from_str(status_cli(&["--state", &state, &job, "--format", "json"]).trim())
            .unwrap();
    let cmds: Vec<&str> = pending["pending_commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["command"].as_str().unwrap())
        .collect();
    assert_eq!(cmds, ["start", "resume"], "{pending}");
    let text = status_cli(&["--state", &state, &job]);
    assert!(
        text.contains("pending          start recorded ")
            && text.contains("resume recorded ")
            && text.contains("no serve running"),
        "{text}"
    );
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(bf::table::replay::ReplayConfig::default());
    let out = tokio::time::timeout(
        Duration::from_secs(300),
        backfill_tests::serving::serve(cfg, CancellationToken::new()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(out.get(&c.job).unwrap(), "beyond windows: Streaming");
    // A change after activation gives the replay a cursor.
    c.source
        .sql_in(&c.sdb, "UPDATE t SET k = k + 1 WHERE id = 5");
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(bf::table::replay::ReplayConfig::default());
    backfill_tests::serving::serve(cfg, CancellationToken::new())
        .await
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(status_cli(&["--state", &state, &job, "--format", "json"]).trim())
            .unwrap();
    assert_eq!(v["state"], "STREAMING", "{v}");
    let n = v["windows"].as_u64().unwrap();
    assert!(n >= 3, "{v}");
    assert_eq!(v["windows_done"].as_u64().unwrap(), n, "{v}");
    assert_eq!(v["rows"]["read"], 3000, "{v}");
    assert_eq!(v["rows"]["applied"], 3000, "{v}");
    assert!(v["capture"]["restart"].is_string(), "{v}");
    assert!(v["replay"]["cursor"].is_string(), "{v}");
    assert!(v["replay"]["groups_applied"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["paused"].is_null(), "{v}");
    assert_eq!(v["pending_commands"], serde_json::json!([]), "{v}");
    assert_eq!(v["serve"][0]["state"], "stopped", "{v}");
    let all: serde_json::Value =
        serde_json::from_str(status_cli(&["--state", &state, "--format", "json"]).trim()).unwrap();
    assert!(!all["jobs"].as_array().unwrap().is_empty());
    let text = status_cli(&["--state", &state, &job]);
    for want in &[
        &format!("job {job}  STREAMING  generation g1"),
        &format!("windows          {n}/{n} done"),
        "read 3000, sealed 3000, applied 3000",
        "replay           cursor ",
        "lag ",
    ] {
        assert!(text.contains(want), "missing `{want}` in\n{text}");
    }
    // --watch redraws until interrupted.
    let child = backfill_tests::command()
        .args(["status", "--state", &state, &job, "--watch", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.matches(&format!("windows          {n}/{n} done")).count() >= 2,
        "{s}"
    );
    assert_eq!(out.status.code(), Some(0));
}
