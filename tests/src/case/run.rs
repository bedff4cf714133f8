//! Running serve for the window/serve test world: the serve child process, the writers,
//! in-process serve until idle, permits left, the status command.
use super::{Case, DDL};
use crate::serving::{self as serve, ServeConfig};
use kernel::ids::{Generation, JobId};
use ledger::registry::Registry;
use mysql_async::prelude::Queryable;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `backfill serve --exit-when-idle --windows-only` of this case as a child PROCESS (fault
/// points compiled in: `failpoints` is `name@n` or empty; `hook` is a `SQL_ENV` value).
pub fn serve_cmd(
    c: &Case,
    page_rows: u64,
    read_windows: u32,
    failpoints: &str,
    hook: &str,
) -> std::process::Child {
    serve_command(c, page_rows, read_windows, failpoints, hook)
        .spawn()
        .expect("spawn backfill serve")
}

/// The command [`serve_cmd`] spawns (a test may add to it before spawning it).
pub fn serve_command(
    c: &Case,
    page_rows: u64,
    read_windows: u32,
    failpoints: &str,
    hook: &str,
) -> std::process::Command {
    use std::process::Stdio;
    let mut cmd = crate::bin::command();
    cmd.args([
        "serve",
        "--exit-when-idle",
        "--windows-only",
        "--owner",
        "crash-test",
    ])
    .arg("--state")
    .arg(c.state_url())
    .arg("--data-dir")
    .arg(c.data.path())
    .arg("--page-rows")
    .arg(page_rows.to_string())
    .arg("--read-windows")
    .arg(read_windows.to_string())
    .env(kernel::failpoint::ENV, failpoints)
    .env(crate::bf::table::hooks::SQL_ENV, hook)
    .env("RUST_LOG", "error")
    .stdout(Stdio::null())
    .stderr(Stdio::inherit());
    cmd
}

/// Waits for the child; kills it (SIGKILL) after `kill_after` if given. Returns the exit
/// code (None when killed).
pub fn wait(mut child: std::process::Child, kill_after: Option<Duration>) -> Option<i32> {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if kill_after.is_some_and(|d| t0.elapsed() >= d) {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return None;
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "serve stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Case {
    /// Waits at most `limit` until J records a pause; its reason (`what` names the wait).
    pub async fn paused_within(&self, what: &str, limit: Duration) -> kernel::error::Definite {
        let until = std::time::Instant::now() + limit;
        loop {
            if let Some(p) = self.head().await.paused {
                return p;
            }
            assert!(std::time::Instant::now() < until, "{what}: never paused");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Holds `LOCK TABLES t WRITE` on the target table: every page apply waits, J stays
    /// (windows are read and sealed ahead of it). Dropping the connection releases it.
    pub async fn lock_target(&self) -> mysql_async::Conn {
        let mut conn = self.target_conn().await;
        let sql = format!("LOCK TABLES `{}`.t WRITE", self.tdb);
        conn.query_drop(sql).await.unwrap();
        conn
    }

    /// (window, attempt, manifest hash) of every seal row, in window then attempt order.
    pub async fn seals(&self) -> Vec<(u32, u32, Vec<u8>)> {
        self.seals_of(self.job, self.generation).await
    }

    /// [`Case::seals`] of another job of this state store.
    pub async fn seals_of(&self, job: JobId, generation: Generation) -> Vec<(u32, u32, Vec<u8>)> {
        sqlx::query_as(
            "SELECT window_id, attempt, manifest_hash FROM window_seals WHERE job_id = ? \
             AND generation = ? ORDER BY window_id, attempt",
        )
        .bind(job.0)
        .bind(generation.0)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }

    /// The last attempt recorded for each window, in window order.
    pub async fn last_attempts(&self) -> Vec<(u32, u32)> {
        self.last_attempts_of(self.job, self.generation).await
    }

    /// [`Case::last_attempts`] of another job of this state store.
    pub async fn last_attempts_of(&self, job: JobId, generation: Generation) -> Vec<(u32, u32)> {
        sqlx::query_as(
            "SELECT window_id, MAX(attempt) FROM window_attempts WHERE job_id = ? \
             AND generation = ? GROUP BY window_id ORDER BY window_id",
        )
        .bind(job.0)
        .bind(generation.0)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }

    /// Registered materials of (window, attempt).
    pub async fn materials_of(&self, window: u32, attempt: u32) -> i64 {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM ledger_material WHERE job_id = ? AND generation = ? \
             AND window_id = ? AND attempt = ?",
        )
        .bind(self.job.0)
        .bind(self.generation.0)
        .bind(window)
        .bind(attempt)
        .fetch_one(&self.pool)
        .await
        .unwrap()
    }

    /// Every file of the material store (besides its temporary directory).
    pub fn material_files(&self) -> usize {
        let root = self.data.path().join("materials");
        std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|d| d.file_name() != "tmp" && d.path().is_dir())
            .map(|d| std::fs::read_dir(d.path()).unwrap().count())
            .sum()
    }

    /// Garbage bytes not yet released (materials of attempts other than the sealed one).
    pub async fn garbage_bytes(&self) -> u64 {
        Registry::new(self.pool.clone())
            .garbage_bytes(self.job, self.generation)
            .await
            .unwrap()
    }

    /// Every window that has a seal row has no later attempt (sealed windows are never
    /// re-read), whether J is at it or behind it.
    pub async fn assert_sealed_windows_not_reread(&self) {
        let last = self.last_attempts().await;
        for (w, a, _) in self.seals().await {
            let l = last.iter().find(|(lw, _)| *lw == w).map(|(_, la)| *la);
            assert_eq!(
                l,
                Some(a),
                "window {w} sealed by attempt {a} was attempted again"
            );
        }
    }
}

/// A concurrent writer on the source: random inserts, updates, deletes and key changes
/// (into and out of ranges) on ids 1..=max_id until `stop`, never on a key of `reserved`
/// (keys a test's own statements keep for themselves, so those always find their row).
/// Returns the writes done.
pub async fn writer(
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    max_id: i64,
    reserved: &[i64],
) -> u64 {
    use rand::Rng;
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let (op, a, b): (u8, i64, i64) = {
            let mut r = rand::rng();
            (
                r.random_range(0..4),
                r.random_range(1..=max_id),
                r.random_range(1..=max_id),
            )
        };
        if reserved.contains(&a) || reserved.contains(&b) {
            continue;
        }
        let sql = match op {
            0 => format!("INSERT IGNORE INTO t VALUES ({a}, 0, 'new')"),
            1 => format!("UPDATE t SET k = k + 1 WHERE id = {a}"),
            2 => format!("DELETE FROM t WHERE id = {a}"),
            _ => format!("UPDATE IGNORE t SET id = {b} WHERE id = {a}"),
        };
        c.query_drop(sql).await.unwrap();
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n
}

/// The target-write pool of the admission snapshot of the serve running in this process.
pub fn write_pool() -> admission::PoolSnapshot {
    let snap = crate::serving::admission_snapshot().expect("serve registered admission");
    snap.pool(admission::PoolKind::TargetWrite).clone()
}

impl Case {
    /// A second table `t2` of the same shape on the source (its first `rows` rows of `t`)
    /// and an empty one on the target; returns its install request (control schema set).
    pub fn second_table(&self, rows: u64) -> crate::bf::install::InstallRequest {
        let ddl = DDL.replace("TABLE t ", "TABLE t2 ");
        self.source.sql_in(&self.sdb, &ddl);
        self.source.sql_in(
            &self.sdb,
            &format!("INSERT INTO t2 SELECT * FROM t WHERE id <= {rows}"),
        );
        self.target.sql_in(&self.tdb, &ddl);
        let mut req = crate::bf::install::InstallRequest::new(
            self.state_url(),
            self.source.url(),
            crate::bf::install::TableName::new(&self.sdb, "t2"),
            self.target.url(),
            crate::bf::install::TableName::new(&self.tdb, "t2"),
        );
        req.control_schema = self.ctl.clone();
        req
    }
}

/// Runs serve in-process with `cfg` until it is idle, for at most `limit`; returns every
/// job's outcome (the in-process serve of the serve-level tests).
pub async fn serve_until_idle(cfg: ServeConfig, limit: Duration) -> serve::Outcomes {
    tokio::time::timeout(limit, serve::serve(cfg, CancellationToken::new()))
        .await
        .expect("serve did not become idle")
        .unwrap_or_else(|e| panic!("serve: {e}"))
}

/// Asserts that the last serve of this process left no permit in use, held or waited for.
pub fn assert_no_permit_left() {
    let snap = crate::serving::admission_snapshot().expect("serve registered admission");
    for kind in admission::PoolKind::ALL {
        let p = snap.pool(kind);
        assert_eq!(p.available, p.capacity, "{kind}: {p:?}");
        assert!(p.in_use.is_empty() && p.holds.is_empty() && p.waiting.is_empty());
    }
}

impl Case {
    /// [`serve_until_idle`] with this case's configuration, changed by `tune`; returns this
    /// job's outcome ("" when serve did not run it).
    pub async fn serve_tuned(
        &self,
        limit: Duration,
        tune: impl FnOnce(&mut ServeConfig),
    ) -> String {
        let mut cfg = self.serve_cfg();
        tune(&mut cfg);
        let out = serve_until_idle(cfg, limit).await;
        out.get(&self.job).cloned().unwrap_or_default()
    }
}

/// `backfill status ARGS` run by the real binary; asserts it exits 0, returns its stdout.
pub fn status_cli(args: &[&str]) -> String {
    let out = crate::bin::command()
        .arg("status")
        .args(args)
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{s}{err}");
    s
}
