//! Every test seam of the program in one place (ARCHITECTURE.md: no seams scattered over
//! the code). Each is effective only with fault points compiled in (feature `failpoints`,
//! `kernel::failpoint::ENABLED`): in a release build every `hit` is a constant `false` or
//! returns at once, so none can change what the product does. Tests arm them in-process;
//! process-level tests use `BACKFILL_FAILPOINTS` and the SQL-file window hooks
//! (`crate::table::hooks`) instead.
//!
//! Layer: L0, imports nothing of this crate, so every layer may call its `hit`s.

/// Test seam (effective only with fault points compiled in): the task of an armed job
/// panics when it enters the window loop, as a bug would, so tests can check that `serve`
/// pauses that table only and never restarts it in a loop.
pub mod task_panic {
    use kernel::ids::JobId;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    static ARMED: AtomicU64 = AtomicU64::new(0);
    static HITS: AtomicU32 = AtomicU32::new(0);

    /// Arms the seam for `job` (0 disarms).
    pub fn arm(job: JobId) {
        ARMED.store(job.0, Ordering::SeqCst);
    }

    /// How many times an armed task panicked.
    pub fn hits() -> u32 {
        HITS.load(Ordering::SeqCst)
    }

    pub(crate) fn hit(job: JobId) {
        if kernel::failpoint::ENABLED && job.0 != 0 && ARMED.load(Ordering::SeqCst) == job.0 {
            HITS.fetch_add(1, Ordering::SeqCst);
            panic!("injected panic in the task of job {job} (test seam)");
        }
    }
}

/// Test seam (effective only with fault points compiled in): the read task of an armed
/// (job, window) panics once it holds its read permit, as a bug would, so tests can check
/// that the table pauses after one attempt.
pub mod read_panic {
    use kernel::ids::{JobId, WindowId};
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    static ARMED: AtomicU64 = AtomicU64::new(0);
    static WINDOW: AtomicU32 = AtomicU32::new(0);
    static HITS: AtomicU32 = AtomicU32::new(0);

    /// Arms the seam for window `w` of `job` (job 0 disarms).
    pub fn arm(job: JobId, w: WindowId) {
        WINDOW.store(w.0, Ordering::SeqCst);
        ARMED.store(job.0, Ordering::SeqCst);
    }

    /// How many times an armed read task panicked.
    pub fn hits() -> u32 {
        HITS.load(Ordering::SeqCst)
    }

    pub(crate) fn hit(job: JobId, w: WindowId) {
        let armed = job.0 != 0 && ARMED.load(Ordering::SeqCst) == job.0;
        if kernel::failpoint::ENABLED && armed && WINDOW.load(Ordering::SeqCst) == w.0 {
            HITS.fetch_add(1, Ordering::SeqCst);
            panic!(
                "injected panic in the read task of job {job} {w} (test seam) while reading \
                 mysql://seam:hunter2@127.0.0.1:1/x"
            );
        }
    }
}

/// Test seam (effective only with fault points compiled in): the finish of an armed job
/// waits, after replay of (B, F] and before the activation check, until the test opens
/// the gate, so a test can record a cancel while the table is in replay.
pub mod activation_gate {
    use kernel::ids::JobId;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};
    use tokio::sync::Semaphore;

    type Slot = Option<(JobId, Arc<Semaphore>)>;
    static SLOT: Mutex<Slot> = Mutex::new(None);
    static REACHED: AtomicU32 = AtomicU32::new(0);

    /// Arms the gate for `job`; add a permit to (or close) the returned semaphore to open.
    pub fn arm(job: JobId) -> Arc<Semaphore> {
        let g = Arc::new(Semaphore::new(0));
        *SLOT.lock().unwrap_or_else(|p| p.into_inner()) = Some((job, g.clone()));
        g
    }

    /// How many times an armed finish reached the gate.
    pub fn hits() -> u32 {
        REACHED.load(Ordering::SeqCst)
    }

    pub(crate) async fn reached(job: JobId) {
        if !kernel::failpoint::ENABLED {
            return;
        }
        let gate = match &*SLOT.lock().unwrap_or_else(|p| p.into_inner()) {
            Some((j, g)) if *j == job => g.clone(),
            _ => return,
        };
        REACHED.fetch_add(1, Ordering::SeqCst);
        if let Ok(p) = gate.acquire().await {
            p.forget();
        };
    }
}

/// Test seams of `crate::io::bounded`: confirmations that fail, and KILLs held at a gate.
pub mod kills {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};

    static FAIL_CONFIRMATIONS: AtomicU32 = AtomicU32::new(0);

    /// Test seam (effective only with fault points compiled in): the next `n` confirmations
    /// fail without KILLing, as when the server keeps listing the connection.
    pub fn fail_confirmations(n: u32) {
        FAIL_CONFIRMATIONS.store(n, Ordering::SeqCst);
    }

    pub(crate) fn injected_failure() -> bool {
        kernel::failpoint::ENABLED
            && FAIL_CONFIRMATIONS
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
    }

    type Gate = Arc<tokio::sync::Semaphore>;

    fn gate_slot() -> &'static Mutex<Option<Gate>> {
        static SLOT: Mutex<Option<Gate>> = Mutex::new(None);
        &SLOT
    }

    /// Test seam (effective only with fault points compiled in): from now on every
    /// [`kill_confirmed`] waits for one permit of the returned semaphore before its KILL, so a
    /// test can watch the hold and the statement still running. [`open_kills`] disarms it.
    pub fn gate_kills() -> Gate {
        let g = Arc::new(tokio::sync::Semaphore::new(0));
        *gate_slot().lock().unwrap_or_else(|p| p.into_inner()) = Some(g.clone());
        g
    }

    /// Disarms [`gate_kills`] (waiting KILLs proceed).
    pub fn open_kills() {
        if let Some(g) = gate_slot().lock().unwrap_or_else(|p| p.into_inner()).take() {
            g.close();
        }
    }

    pub(crate) async fn kill_gate() {
        if !kernel::failpoint::ENABLED {
            return;
        }
        let gate = gate_slot()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(g) = gate {
            // A closed semaphore (open_kills) lets everyone through.
            if let Ok(p) = g.acquire().await {
                p.forget();
            }
        }
    }
}

/// Test seam of `crate::table::target_write`: lost COMMIT answers.
pub mod lost_commits {
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Test seam (compiled in with fault points only): the next N committed pages report
    /// their COMMIT answer as lost, as a connection dropped right after COMMIT reached the
    /// server would. The recovery must then find the page in T.
    static INJECT_LOST_ANSWERS: AtomicU32 = AtomicU32::new(0);

    /// Arms the test seam (no effect without the `failpoints` feature).
    pub fn inject_lost_commit_answers(n: u32) {
        INJECT_LOST_ANSWERS.store(n, Ordering::SeqCst);
    }

    pub(crate) fn injected() -> bool {
        kernel::failpoint::ENABLED
            && INJECT_LOST_ANSWERS
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
    }
}

/// Test builds only: `BACKFILL_TEST_PANIC=message` makes the program panic with that
/// message right after parsing its command line, so a test can see what a panic prints.
pub fn main_panic() {
    if kernel::failpoint::ENABLED {
        if let Ok(m) = std::env::var("BACKFILL_TEST_PANIC") {
            std::panic::panic_any(m);
        }
    }
}
