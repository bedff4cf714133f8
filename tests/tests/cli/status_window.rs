//! `backfill status` of a table in the window phase against real MariaDB: the window J is
//! on, its attempt count, the last attempt's error once it had more than one attempt, and
//! the garbage bytes awaiting release, in the text and the JSON output.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::hooks::HookFuture;
use backfill_tests::bf::table::window::WindowHooks;
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::ids::{Attempt, JobId, WindowId};
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// KILLs the read connection of window 1 in every attempt, after its first RAW page.
struct KillWindow1 {
    url: String,
    kills: AtomicU32,
}

impl WindowHooks for KillWindow1 {
    fn mid_read(&self, _: JobId, w: WindowId, _: Attempt, id: u32) -> HookFuture<'_> {
        Box::pin(async move {
            if w == WindowId(1) {
                let opts = mysql_async::Opts::from_url(&self.url).unwrap();
                let mut c = mysql_async::Conn::new(opts).await.unwrap();
                c.query_drop(format!("KILL CONNECTION {id}")).await.unwrap();
                c.disconnect().await.unwrap();
                self.kills.fetch_add(1, Ordering::SeqCst);
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_shows_the_current_windows_last_error_and_garbage() {
    let _serial = in_process().await;
    let c = Case::new("stwin", 3_000, 1_000, 100).await;
    let state = c.state_url();
    let job = c.job.0.to_string();
    let hooks = Arc::new(KillWindow1 {
        url: c.source.url(),
        kills: AtomicU32::new(0),
    });
    let out = c
        .serve_tuned(Duration::from_secs(120), |cfg| {
            cfg.run.max_attempts = 3;
            cfg.hooks = Some(hooks.clone());
        })
        .await;
    assert!(out.starts_with("paused: retries_exhausted"), "{out}");
    assert_eq!(hooks.kills.load(Ordering::SeqCst), 3);
    assert_eq!(c.head().await.completed, 1, "J is on window 1");
    let kept: String = sqlx::query_scalar(
        "SELECT last_error FROM window_attempts WHERE job_id = ? AND window_id = 1 \
         AND attempt = 3",
    )
    .bind(c.job.0)
    .fetch_one(&c.pool)
    .await
    .unwrap();
    let shown = kernel::redact::redact_text(&kept);
    let garbage = c.garbage_bytes().await;
    // Attempts 1 and 2 of the unsealed window 1 were abandoned after their first RAW page:
    // their registered bytes await release; attempt 3 (the latest) may still seal.
    let abandoned: i64 = sqlx::query_scalar(
        "SELECT CAST(COALESCE(SUM(bytes), 0) AS SIGNED) FROM ledger_material \
         WHERE job_id = ? AND window_id = 1 AND attempt < 3",
    )
    .bind(c.job.0)
    .fetch_one(&c.pool)
    .await
    .unwrap();
    assert!(abandoned > 0, "attempts 1 and 2 registered RAW pages");
    assert_eq!(garbage, abandoned as u64);

    let v: serde_json::Value =
        serde_json::from_str(status_cli(&["--state", &state, &job, "--format", "json"]).trim())
            .unwrap();
    let w = &v["window"];
    assert_eq!(w["window"], 1, "{v}");
    assert_eq!(w["attempts"], 3, "{v}");
    assert_eq!(w["last_error"].as_str(), Some(shown.as_str()), "{v}");
    assert_eq!(w["garbage_bytes"], garbage, "{v}");

    let text = status_cli(&["--state", &state, &job]);
    assert!(
        text.contains(&format!(
            "window now       w1 attempt 3 (last error: {shown})"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "garbage          {garbage} bytes of abandoned attempts awaiting release"
        )),
        "{text}"
    );

    // Past the window phase there is no current window.
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
    assert_eq!(c.serve(None).await, "windows_done");
    let v: serde_json::Value =
        serde_json::from_str(status_cli(&["--state", &state, &job, "--format", "json"]).trim())
            .unwrap();
    assert!(v["window"].is_null(), "{v}");
    assert!(!status_cli(&["--state", &state, &job]).contains("window now"));
}
