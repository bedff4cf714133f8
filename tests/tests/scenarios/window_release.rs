//! DESIGN §8: a read permit is released only when the read-view connection is confirmed
//! closed. The source freezes (SIGSTOP) inside a read view: the read times out, neither
//! the close nor a KILL can be confirmed, so the permit stays held (release unknown) and
//! the table pauses with `release_unconfirmed`. Window 1, read beside it, meets the frozen
//! source after its LOW: its attempts fail (a write with no answer ends at
//! `marker_timeout`) and stop once window 0's failure stops the pipeline, so the pause is
//! recorded (it once never was: a LOW write on a reused control connection waited forever
//! and the producer waited for it). Alone in its test binary: it reads the admission state
//! of the process's last serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::hooks::HookFuture;
use backfill_tests::bf::table::window::WindowHooks;
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, JobId, WindowId};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Freezes the (private) source server with SIGSTOP inside window 0's read view, after
/// its first page: the read times out and neither the close nor a KILL can be confirmed.
struct FreezeSource {
    pid: u32,
    frozen: AtomicU32,
}

impl WindowHooks for FreezeSource {
    /// Window 1 goes on only once the source is frozen: its next statements (the read
    /// view's connect, then a new attempt's LOW write on a reused control connection)
    /// meet a source that does not answer. Bounded: window 0 freezes it after one page.
    fn after_low(&self, _: JobId, w: WindowId, a: Attempt) -> HookFuture<'_> {
        Box::pin(async move {
            if w == WindowId(1) && a == Attempt(1) {
                let t0 = std::time::Instant::now();
                while self.frozen.load(Ordering::SeqCst) == 0 && t0.elapsed().as_secs() < 60 {
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
            }
        })
    }

    fn mid_read(&self, _: JobId, w: WindowId, a: Attempt, _: u32) -> HookFuture<'_> {
        Box::pin(async move {
            if w == WindowId(0)
                && a == Attempt(1)
                && self.frozen.fetch_add(1, Ordering::SeqCst) == 0
            {
                signal(self.pid, "-STOP");
            }
        })
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unconfirmed_read_close_keeps_the_permit_and_pauses() {
    let _serial = in_process().await;
    // The source is frozen: a private server keeps the other tests off it.
    let src: &'static harness::Server = Box::leak(Box::new(harness::Server::start_private(
        harness::ServerOpts::source(),
    )));
    let c = Case::on(src, "wfu", 3_000, 1_000, 100).await;
    let hooks = Arc::new(FreezeSource {
        pid: src.pid().expect("the private source runs"),
        frozen: AtomicU32::new(0),
    });
    let mut cfg = c.serve_cfg();
    cfg.run.read_view_timeout = std::time::Duration::from_secs(2);
    // Window 1, read at the same time, waits for markers the frozen source cannot give.
    cfg.run.marker_timeout = std::time::Duration::from_secs(5);
    cfg.hooks = Some(hooks.clone());
    let serve = tokio::spawn(backfill_tests::serving::serve(
        cfg,
        tokio_util::sync::CancellationToken::new(),
    ));
    let t0 = std::time::Instant::now();
    let paused = loop {
        if let Some(p) = c.head_opt().await.and_then(|h| h.paused) {
            break p;
        }
        // A deadline for the pause, not a measure: on a loaded 2-core machine the read's
        // timeout, the failed close and the unconfirmed KILL took over 90 s once.
        assert!(t0.elapsed().as_secs() < 240, "the table did not pause");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    // Checked while the source is still frozen: the read permit is held, not released.
    let snap = backfill_tests::serving::admission_snapshot().expect("serve registered admission");
    signal(src.pid().unwrap(), "-CONT");
    assert_eq!(hooks.frozen.load(Ordering::SeqCst), 1);
    assert_eq!(
        paused.code,
        DefiniteCode::ReleaseUnconfirmed,
        "{}",
        paused.message
    );
    assert!(
        paused.message.contains("could not be confirmed"),
        "{}",
        paused.message
    );
    assert!(
        paused.message.contains("w0"),
        "names the window: {}",
        paused.message
    );
    assert!(
        !snap.read_windows.holds.is_empty(),
        "the read permit stays held (release unknown): {snap:?}"
    );
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), serve)
        .await
        .expect("serve ends once the source answers again")
        .unwrap()
        .unwrap();
    let out = out.get(&c.job).cloned().unwrap_or_default();
    assert!(out.starts_with("paused: release_unconfirmed"), "{out}");
    assert_eq!(c.head().await.completed, 0);
    assert_eq!(
        c.target_count(),
        0,
        "nothing of the frozen window was applied"
    );
}
