//! Every serve sharing a state store keeps materials in the same place (DESIGN §18): a
//! serve started with `--materials local` beside a live serve that keeps them in the
//! state store is refused, naming the other serve and the flag (a job taken over from a
//! local serve would find its materials missing); once the other one stopped, it starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn serve(c: &Case, owner: &str, materials: &str) -> Command {
    let mut cmd = backfill_tests::command();
    cmd.args(["serve", "--owner", owner, "--materials", materials])
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .env("RUST_LOG", "error")
        .stdout(Stdio::null());
    cmd
}

fn live_rows(c: &Case, owner: &str) -> String {
    c.target.sql_in(
        &c.state_db,
        &format!(
            "SELECT materials FROM serve_processes WHERE owner = '{owner}' AND stopped_at IS NULL"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_keeping_materials_elsewhere_than_a_live_one_is_refused() {
    let c = Case::new("mixmat", 200, 100, 50).await;
    let mut a = serve(&c, "host-a", "state")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while live_rows(&c, "host-a").trim() != "state" {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "serve host-a never recorded itself"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = serve(&c, "host-b", "local")
        .arg("--exit-when-idle")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("serve host-a") && err.contains("--materials state"),
        "the refusal names the other serve and the flag: {err}"
    );
    // host-b wrote nothing of a job: no lease, no material of its own.
    let leases = c.target.sql_in(
        &c.state_db,
        "SELECT COUNT(*) FROM serve_processes WHERE owner = 'host-b' AND materials = 'local'",
    );
    assert_eq!(
        leases.trim(),
        "1",
        "its placement is recorded for the others"
    );
    // Once host-a stopped cleanly, host-b starts with its own placement.
    let pid = a.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let code = a.wait().unwrap();
    assert!(
        live_rows(&c, "host-a").trim().is_empty(),
        "host-a recorded its stop ({code:?})"
    );
    let out = serve(&c, "host-b", "local")
        .arg("--exit-when-idle")
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
