//! `backfill verify JOB --pinned` against real MariaDB (issue 6 item 5): the target of a
//! STREAMING job is tampered with (a row deleted, a row added, a field changed) while a
//! writer keeps changing the source; the pinned verify (the real binary, serve stopped)
//! replays the target to the source snapshot's position P and reports exactly the three
//! tampered keys, none of the writer's changes. Split with --max-chunks and continued with
//! --resume, the counts accumulate. While a serve runs, the command refuses (exit 3).
//! Interrupted by Ctrl-C, a walk stores its cursor and --resume finishes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use mysql_async::prelude::Queryable;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn verify(c: &Case, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let job = c.job.0.to_string();
    let o = backfill_tests::command()
        .args(["verify", &job, "--state", &c.state_url()])
        .args(["--source", &c.source.url(), "--target", &c.target.url()])
        .args(["--format", "json"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_str(out.trim()).unwrap_or(serde_json::Value::Null);
    (o.status.code().unwrap_or(-1), v, format!("{out}{err}"))
}

/// Writes to the source until `stop`: updates and inserts of keys the test never tampers.
async fn writer(mut conn: mysql_async::Conn, stop: Arc<AtomicBool>) -> u64 {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) && n < 100_000 {
        let id = 1000 + (n % 2000);
        conn.query_drop(format!("UPDATE t SET k = k + 1 WHERE id = {id}"))
            .await
            .unwrap();
        conn.query_drop(format!("INSERT INTO t VALUES ({}, 1, 'new')", 500_000 + n))
            .await
            .unwrap();
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    conn.disconnect().await.unwrap();
    n
}

fn keys(v: &serde_json::Value, what: &str) -> Vec<i64> {
    v["cursor"]["tally"][what]["examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["values"][0]["Int"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pinned_verify_finds_tampering_while_the_source_writes() {
    let _serial = in_process().await;
    let c = Case::new("vpin", 5000, 1000, 500).await;
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(bf::table::replay::ReplayConfig::default());
    cfg.lease_ttl = Duration::from_secs(2);
    let out = backfill_tests::serving::serve(cfg.clone(), CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.get(&c.job).unwrap(), "beyond windows: Streaming");

    // A running serve: refused, naming it.
    let mut running = cfg.clone();
    running.exit_when_idle = false;
    let stop_serve = CancellationToken::new();
    let serve = tokio::spawn(backfill_tests::serving::serve(running, stop_serve.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (code, _, msg) = verify(&c, &["--pinned"]);
    assert_eq!(code, 3, "{msg}");
    assert!(
        msg.contains("is running") && msg.contains(&cfg.owner),
        "{msg}"
    );
    stop_serve.cancel();
    serve.await.unwrap().unwrap();
    // The stopped serve's lease (ttl 2 s) is waited out by the pinned verify itself.

    c.target.sql_in(
        &c.tdb,
        "DELETE FROM t WHERE id = 5; INSERT INTO t VALUES (999999, 9, 'extra'); \
         UPDATE t SET v = 'tampered' WHERE id = 7",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let w = tokio::spawn(writer(c.source_conn().await, stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Two chunks of 1000 keys, then the rest after --resume; the writer never stops.
    let (code, first, msg) = verify(
        &c,
        &["--pinned", "--chunk-size", "1000", "--max-chunks", "2"],
    );
    assert_eq!(code, 4, "{msg}");
    assert_eq!(first["complete"], false, "{msg}");
    assert_eq!(keys(&first, "missing"), [5], "{msg}");
    assert!(keys(&first, "extra").is_empty(), "{msg}");
    let (code, v, msg) = verify(&c, &["--pinned", "--chunk-size", "1000", "--resume"]);
    stop.store(true, Ordering::Relaxed);
    let written = w.await.unwrap();
    assert!(written > 0);
    assert_eq!(code, 4, "{msg}");
    assert_eq!(v["complete"], true, "{msg}");
    let t = &v["cursor"]["tally"];
    assert_eq!(keys(&v, "missing"), [5], "{msg}");
    assert_eq!(keys(&v, "extra"), [999_999], "{msg}");
    assert_eq!(t["missing"]["count"], 1, "{msg}");
    assert_eq!(t["extra"]["count"], 1, "{msg}");
    assert_eq!(t["differing_rows"], 1, "{msg}");
    assert_eq!(t["differing_fields"]["count"], 1, "{msg}");
    let f = &t["differing_fields"]["examples"][0];
    assert_eq!(
        (f["key"]["values"][0]["Int"].as_i64(), f["column"].as_str()),
        (Some(7), Some("v")),
        "{msg}"
    );
    assert!(t["chunks"].as_u64().unwrap() > 2, "{msg}");
    assert!(
        v["source_snapshot"].is_object() || v["source_snapshot"].is_string(),
        "{msg}"
    );
    // The walk finished: nothing is left to resume.
    let (code, _, msg) = verify(&c, &["--pinned", "--resume"]);
    assert_eq!(code, 2, "{msg}");

    // Repaired, and after serve caught up with the writer, a quiescent verify is clean.
    c.target.sql_in(
        &c.tdb,
        "DELETE FROM t WHERE id = 999999; UPDATE t SET v = 'v7' WHERE id = 7; \
         INSERT INTO t SELECT * FROM (SELECT 5 AS id, 5 AS k, 'v5' AS v) x",
    );
    let out = backfill_tests::serving::serve(cfg, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.get(&c.job).unwrap(), "beyond windows: Streaming");
    let (code, v, msg) = verify(&c, &[]);
    assert_eq!(code, 0, "{msg}");
    assert_eq!(v["cursor"]["tally"]["source_rows"], 5000 + written, "{msg}");
}

/// Ctrl-C stops a walk between chunks and stores its cursor; --resume finishes it with the
/// totals of one uninterrupted walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_walk_is_resumed() {
    let _serial = in_process().await;
    let c = Case::new("vint", 5000, 1000, 500).await;
    let mut cfg = c.serve_cfg();
    cfg.finish = Some(bf::table::replay::ReplayConfig::default());
    let out = backfill_tests::serving::serve(cfg, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(out.get(&c.job).unwrap(), "beyond windows: Streaming");
    let job = c.job.0.to_string();
    let child = backfill_tests::command()
        .args(["verify", &job, "--state", &c.state_url()])
        .args(["--source", &c.source.url(), "--target", &c.target.url()])
        .args(["--format", "json", "--chunk-size", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let o = child.wait_with_output().unwrap();
    let msg = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(0), "{msg}");
    let first: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        first["complete"], false,
        "the walk ended before the interrupt: {msg}"
    );
    let done_before = first["cursor"]["tally"]["source_rows"].as_u64().unwrap();
    assert!(done_before < 5000, "{msg}");
    let (code, v, msg) = verify(&c, &["--resume", "--chunk-size", "1000"]);
    assert_eq!(code, 0, "{msg}");
    assert_eq!(v["complete"], true, "{msg}");
    assert_eq!(v["cursor"]["tally"]["source_rows"], 5000, "{msg}");
    assert_eq!(v["cursor"]["tally"]["rows_compared"], 5000, "{msg}");
}
