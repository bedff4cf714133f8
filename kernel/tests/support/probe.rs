//! The `capture-probe` process of the crash tests (crash/kill.rs, crash/xa.rs): started on
//! a stream, optionally with a fault point that exits it hard, and ended by itself or by
//! SIGKILL.
use super::{replica_id, Env};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Fails the test unless kernel (and so the capture-probe built with it) has its fault
/// points compiled in: without them no armed point would ever stop the probe.
pub fn require_fault_points() {
    // A constant of the build, not of the test: hence no assert!.
    if !kernel::failpoint::ENABLED {
        panic!("kernel built without the `failpoints` feature: the fault points never fire");
    }
}

/// How a test runs the probe.
pub struct Probe {
    /// Each run reads a random batch size in 1..=max_batch.
    pub max_batch: u32,
    /// Captured tables of the case's schema with their job ids.
    pub tables: &'static [(&'static str, u64)],
    /// Keep the probe's stderr in a pipe instead of the test's stderr.
    pub pipe_stderr: bool,
}

impl Probe {
    /// Starts the probe on `stream`, with `failpoint` (`name@n`) armed if given.
    pub fn spawn(&self, e: &Env, stream: &str, failpoint: Option<String>) -> Child {
        if failpoint.is_some() {
            require_fault_points();
        }
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_capture-probe"));
        cmd.args([
            e.state_url.as_str(),
            &e.src.url(),
            stream,
            &e.ctl,
            &replica_id().to_string(),
            &(1 + rand::random::<u32>() % self.max_batch).to_string(),
        ])
        .args(
            self.tables
                .iter()
                .map(|(t, job)| format!("{}.{t}={job}", e.db)),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(if self.pipe_stderr {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
        if let Some(fp) = failpoint {
            cmd.env(kernel::failpoint::ENV, fp);
        }
        cmd.spawn().unwrap()
    }

    /// Runs the probe on `stream` with no fault point until L holds the marker `nonce`
    /// (at most two minutes), then SIGKILLs it.
    pub async fn catch_up(&self, e: &Env, stream: &str, nonce: kernel::ids::Nonce) {
        let child = self.spawn(e, stream, None);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        kernel::log::wait_for_marker(&e.pool, stream, nonce, deadline)
            .await
            .unwrap();
        end(child, Duration::ZERO);
    }
}

/// Waits up to `within` for the child to exit by itself, else SIGKILLs it. Returns the
/// exit code when it exited by itself.
pub fn end(mut child: Child, within: Duration) -> Option<i32> {
    let t = Instant::now();
    while t.elapsed() < within {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no flush
    child.wait().unwrap();
    None
}

/// How a run armed at one fault point ended: [`end`], and whether the probe's stderr (a
/// pipe: [`Probe::pipe_stderr`]) shows the exit line of `point` (`kernel::failpoint`),
/// i.e. the run died AT that point and not otherwise. Returns (exit code, hit, stderr).
pub fn end_at(mut child: Child, within: Duration, point: &str) -> (Option<i32>, bool, String) {
    let mut pipe = child.stderr.take().expect("the probe's stderr is piped");
    // Read while it runs: a full pipe would otherwise block the probe.
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut pipe, &mut s);
        s
    });
    let code = end(child, within);
    let err = reader.join().expect("the stderr reader");
    let line = format!(
        "failpoint {point}: exiting with status {}",
        kernel::failpoint::EXIT_CODE
    );
    let hit = code == Some(kernel::failpoint::EXIT_CODE) && err.contains(&line);
    (code, hit, err)
}
