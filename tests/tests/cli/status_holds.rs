//! `status` shows the admission state of a running serve (DESIGN §8: "Permits held by
//! unconfirmed releases are shown in status, and the tables waiting on them say so").
//!
//! serve runs in-process with one read-window permit. The test takes that permit under
//! the job's name and marks its release unknown, as the window code does for a statement
//! whose end the server has not confirmed. `backfill status` (the real binary, another
//! process reading the state store) must then show the hold, and the job waiting for a
//! read-window permit blocked by it; once the hold is confirmed the job finishes its
//! windows, and the serve row says it stopped. The metrics count the hold and the blocked
//! waiter.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn status_json(state: &str, job: &str) -> serde_json::Value {
    serde_json::from_str(status_cli(&["--state", state, job, "--format", "json"]).trim()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_shows_a_release_unknown_hold_and_the_job_blocked_by_it() {
    let _serial = in_process().await;
    let c = Case::new("sthold", 3000, 1000, 500).await;
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let mut cfg = c.serve_cfg();
    cfg.limits.read_windows = 1;
    let owner = cfg.owner.clone();
    insert_a_process_silent_for_two_days(&c.pool).await;
    let serve = tokio::spawn(backfill_tests::serving::serve(
        cfg,
        CancellationToken::new(),
    ));
    // The admission slot is process-wide and may still hold an earlier test's serve: this
    // serve's is there once its process row is published (it registers before publishing).
    wait_for_async("this serve's process row", async || {
        bf::store::processes::read(&c.pool)
            .await
            .unwrap()
            .iter()
            .any(|r| r.owner == owner)
    })
    .await;
    let adm = backfill_tests::serving::observed_admission().expect("serve registered admission");
    let permit = adm
        .acquire_read(
            &format!("job {job} w2 a9 read"),
            Duration::from_secs(120),
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    let hold = permit.mark_release_unknown("statement timed out; KILL not yet confirmed");

    // Another process sees the hold and the job waiting behind it.
    shows_the_hold_and_the_job_blocked_by_it(&state, &job, &owner).await;

    // The metrics of the serve process count the hold and the waiter blocked by it.
    let m = backfill_tests::serving::render_metrics(&c.pool).await;
    for want in [
        "backfill_admission_holds{pool=\"read-window\"} 1",
        "backfill_admission_waiting_blocked_by_holds{pool=\"read-window\"} 1",
    ] {
        assert!(m.contains(want), "missing `{want}` in\n{m}");
    }

    // Confirmed: the capacity returns, the job finishes its windows, serve stops.
    adm.confirm_hold(hold).unwrap();
    let out = tokio::time::timeout(Duration::from_secs(300), serve)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(out.contains_key(&c.job), "{out:?}");
    assert_eq!(c.target_count(), 3000);
    let v = status_json(&state, &job);
    assert_eq!(v["serve"][0]["state"], "stopped", "{v}");
    let text = status_cli(&["--state", &state, &job]);
    assert!(text.contains("STOPPED"), "{text}");
    assert!(text.contains("no serve running"), "{text}");
}

async fn insert_a_process_silent_for_two_days(pool: &sqlx::MySqlPool) {
    // A row of a process silent for two days is forgotten when a serve starts.
    let old = "serve@decommissioned-host";
    sqlx::query(
        "INSERT INTO serve_processes (owner, pid, admission, heartbeat_at) \
         VALUES (?, 1, ?, CURRENT_TIMESTAMP(6) - INTERVAL 2 DAY)",
    )
    .bind(old)
    .bind(kernel::codec::encode(&bf::store::processes::Persisted {
        pools: Vec::new(),
        connections: Vec::new(),
    }))
    .execute(pool)
    .await
    .unwrap();
}

async fn shows_the_hold_and_the_job_blocked_by_it(state: &str, job: &str, owner: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let v = loop {
        let v = status_json(state, job);
        let waits = v["admission"][0]["waiting"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if waits.iter().any(|w| w["blocked_by_holds"] == true) {
            break v;
        }
        assert!(Instant::now() < deadline, "never saw the job blocked: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let a = &v["admission"][0];
    assert_eq!(a["serve"], owner, "{v}");
    assert_eq!(a["serve_state"], "running", "{v}");
    assert_eq!(a["holds"][0]["pool"], "read-window", "{v}");
    assert_eq!(a["holds"][0]["release"], "unknown", "{v}");
    let w = &a["waiting"][0];
    assert_eq!(w["pool"], "read-window", "{v}");
    assert_eq!(
        w["holds"][0]["reason"], "statement timed out; KILL not yet confirmed",
        "{v}"
    );
    assert_eq!(v["serve"].as_array().unwrap().len(), 1, "{v}");
    let s = &v["serve"][0];
    assert_eq!(s["state"], "running", "{v}");
    assert_eq!(s["stale"], false, "{v}");
    assert_eq!(s["pools"][0]["capacity"], 1, "{v}");
    assert_eq!(s["pools"][0]["holds"].as_array().unwrap().len(), 1, "{v}");
    let text = status_cli(&["--state", state, job]);
    for want in [
        "read-window permit HELD, release unknown, by `job ",
        "waiting for a read-window permit for ",
        "blocked by 1 hold(s) with release unknown",
        "RUNNING",
        "read-window      0/1 in use, 1 held (release unknown)",
    ] {
        assert!(text.contains(want), "missing `{want}` in\n{text}");
    }
}
