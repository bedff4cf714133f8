//! Tables of every key shape (DESIGN §14, issue 14) for the end-to-end suites: a [`Shape`]
//! names a table `t` by its key columns and the SQL literals of its i-th key, a
//! [`writer`] changes it the way applications do (inserts, updates, deletes, a delete and
//! a reinsert of one key in one transaction, key changes across windows, case-only and
//! trailing-space-only key changes under a `_ci` PAD SPACE collation), and [`end_to_end`] drives
//! the real `backfill serve` program to STREAMING and checks the audit and the
//! independent comparison ([`crate::compare`]).
//!
//! Debugging aids (environment): `KEYS_SHAPES=a,b` runs only those shapes (a name that
//! is no shape, or a filter that selects none of a test's shapes, fails that test),
//! `KEYS_SERVE_LOG` is the serve child's RUST_LOG (default `error`), `KEYS_DEBUG_LOCKS=1`
//! prints the target's InnoDB transactions and locks while it has not caught up, and
//! `KEYS_EXPLAIN=1` turns the target's general log on and prints every DELETE the
//! pipeline ran that the server reads by a full scan.
use crate::case::Case;
use crate::compare::{self, Diff};
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keys of a shape: i in 0..SPACE; the even ones are filled before install.
pub const SPACE: u32 = 800;

/// One key shape of table `t`: key columns, then `n INT NOT NULL, v VARCHAR(40) NULL`.
#[derive(Clone, Copy)]
pub struct Shape {
    pub name: &'static str,
    /// Definitions of the key columns (and of any other column put before them).
    pub columns: &'static str,
    /// The key clause, e.g. `PRIMARY KEY (a, b)`.
    pub key_clause: &'static str,
    /// The key columns, in key order.
    pub key: &'static [&'static str],
    /// Keys i in 0..space (the even ones are filled before install).
    pub space: u32,
    /// SQL literals of the key columns of key i, in key order; distinct keys under the
    /// columns' collations for distinct i.
    pub lits: fn(u32) -> Vec<String>,
    /// A character key column whose case a writer flips (and, when true, whose trailing
    /// space it adds or removes: VARCHAR under PAD SPACE), keeping the key the same.
    pub case_col: Option<(&'static str, bool)>,
}

impl Shape {
    pub fn ddl(&self) -> String {
        format!(
            "CREATE TABLE t ({}, n INT NOT NULL, v VARCHAR(40) NULL, {}) ENGINE=InnoDB",
            self.columns, self.key_clause
        )
    }

    fn cols(&self) -> String {
        self.key
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `k1 = l1 AND k2 = l2` for key i.
    pub fn where_key(&self, i: u32) -> String {
        self.pairs(i, " AND ")
    }

    fn pairs(&self, i: u32, sep: &str) -> String {
        self.key
            .iter()
            .zip((self.lits)(i))
            .map(|(c, l)| format!("`{c}` = {l}"))
            .collect::<Vec<_>>()
            .join(sep)
    }

    /// `(l1, l2, n, v)` of key i.
    fn values(&self, i: u32, n: i64, v: &str) -> String {
        format!("({}, {n}, '{v}')", (self.lits)(i).join(", "))
    }

    /// `values` of key i for a reinsert: every other time with the case-flip column in
    /// upper case.
    fn reinsert(&self, i: u32, n: u64) -> String {
        let mut lits = (self.lits)(i);
        if let Some((c, _)) = self.case_col.filter(|_| n % 2 == 1) {
            let at = self.key.iter().position(|k| *k == c).expect("a key column");
            lits[at] = format!("UPPER({})", lits[at]);
        }
        format!("({}, -1, 're{n}')", lits.join(", "))
    }

    /// The fill: every even key, 500 rows a statement (each one argument of the client).
    pub fn fill(&self) -> Vec<String> {
        let rows: Vec<String> = (0..self.space)
            .step_by(2)
            .map(|i| self.values(i, i64::from(i), &format!("f{i}")))
            .collect();
        rows.chunks(500)
            .map(|c| {
                format!(
                    "INSERT INTO t ({}, n, v) VALUES {}",
                    self.cols(),
                    c.join(", ")
                )
            })
            .collect()
    }

    /// The statements of one writer step (op chosen by `op`, keys `a` and `b`).
    pub fn step(&self, op: u32, a: u32, b: u32, n: u64) -> Vec<String> {
        let (cols, wa) = (self.cols(), self.where_key(a));
        match op % 6 {
            0 => vec![format!(
                "INSERT IGNORE INTO t ({cols}, n, v) VALUES {}",
                self.values(a, 0, "ins")
            )],
            1 => vec![format!("UPDATE t SET n = n + 1, v = 'upd{n}' WHERE {wa}")],
            2 => vec![format!("DELETE FROM t WHERE {wa}")],
            // The reinsert flips the case of a character key column now and then: the
            // same key (under `_ci`) with other bytes, in the same transaction.
            3 => vec![
                "BEGIN".into(),
                format!("DELETE FROM t WHERE {wa}"),
                format!(
                    "INSERT IGNORE INTO t ({cols}, n, v) VALUES {}",
                    self.reinsert(a, n)
                ),
                "COMMIT".into(),
            ],
            // Key changes far away: across windows.
            4 => vec![format!(
                "UPDATE IGNORE t SET {} WHERE {wa}",
                self.pairs((a + self.space / 2 + b % 16) % self.space, ", ")
            )],
            _ => match self.case_col {
                Some((c, varchar)) if varchar && n.is_multiple_of(2) => vec![format!(
                    "UPDATE t SET `{c}` = IF(`{c}` LIKE '% ', RTRIM(`{c}`), CONCAT(`{c}`, ' ')) \
                     WHERE {wa}"
                )],
                Some((c, _)) => vec![format!(
                    "UPDATE t SET `{c}` = IF(BINARY `{c}` = BINARY UPPER(`{c}`), LOWER(`{c}`), \
                     UPPER(`{c}`)) WHERE {wa}"
                )],
                None => vec![format!("UPDATE t SET v = NULL WHERE {wa}")],
            },
        }
    }
}

/// Changes the source table with [`Shape::step`]s until `stop`; returns the steps done.
pub async fn writer(url: String, shape: Shape, stop: Arc<AtomicBool>) -> u64 {
    use rand::Rng;
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let (op, a, b) = {
            let mut r = rand::rng();
            (
                r.random_range(0..6),
                r.random_range(0..shape.space),
                r.random_range(0..shape.space),
            )
        };
        for sql in shape.step(op, a, b, n) {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("writer of {}: {e}\n{sql}", shape.name));
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    c.disconnect().await.unwrap();
    n
}

/// A writer running on its own task.
pub struct Writing {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Writing {
    pub fn start(c: &Case, shape: Shape) -> Writing {
        let url = c.source.url_db(&c.sdb);
        Writing::spawn(|stop| writer(url, shape, stop))
    }

    /// Runs `writer` (given the stop flag; it returns the steps it did) on its own task:
    /// every suite's writer runs and stops this way.
    pub fn spawn<F>(writer: impl FnOnce(Arc<AtomicBool>) -> F) -> Writing
    where
        F: std::future::Future<Output = u64> + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(writer(stop.clone()));
        Writing { stop, task }
    }

    /// Stops it; returns the steps it did.
    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the writer panicked")
    }
}

/// One `backfill serve --exit-when-idle` run of this case (fault points from `failpoint`,
/// SIGKILLed after `kill_after` if given); its exit code, None when killed.
pub fn run_to_end(
    c: &Case,
    args: &[&str],
    failpoint: &str,
    kill_after: Option<Duration>,
) -> Option<i32> {
    let mut a = vec!["--exit-when-idle"];
    a.extend_from_slice(args);
    crate::case::wait(serve_child(c, &a, failpoint), kill_after)
}

/// A SIGKILL at an arbitrary instant that must land: `backfill serve` (never idle-exiting)
/// is killed `after` its start, and fails the test if it ended by itself before then.
pub fn sigkill_after(c: &Case, args: &[&str], after: Duration) {
    let code = crate::case::wait(serve_child(c, args, ""), Some(after));
    assert_eq!(
        code, None,
        "serve ended by itself before the SIGKILL at {after:?}"
    );
}

/// `backfill serve` of this case as a child process (not idle-exiting unless
/// `--exit-when-idle` is in `args`), fault points from `failpoints` (`name@n` or "").
pub fn serve_child(c: &Case, args: &[&str], failpoints: &str) -> Child {
    serve_command(c, args, failpoints)
        .spawn()
        .expect("spawn backfill serve")
}

/// The command [`serve_child`] spawns (a test may redirect its log before spawning it).
pub fn serve_command(c: &Case, args: &[&str], failpoints: &str) -> std::process::Command {
    let mut cmd = crate::bin::command();
    cmd.arg("serve")
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .args(["--owner", "keys-test"])
        .args(args)
        .env(kernel::failpoint::ENV, failpoints)
        .env(
            "RUST_LOG",
            std::env::var("KEYS_SERVE_LOG").unwrap_or_else(|_| "error".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    cmd
}

/// Waits until J says STREAMING; fails on a pause or on the child's exit.
pub async fn wait_streaming(c: &Case, child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(180);
    loop {
        if let Some(h) = c.head_opt().await {
            assert!(h.paused.is_none(), "job paused: {:?}", h.paused);
            if h.phase == Phase::Streaming {
                return;
            }
        }
        if let Some(s) = child.try_wait().unwrap() {
            panic!(
                "serve exited with {s} before STREAMING: {:?}",
                c.head_opt().await
            );
        }
        assert!(
            Instant::now() < until,
            "not STREAMING: {:?}",
            c.head_opt().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A child serve that is SIGKILLed when dropped (also when a test fails while it runs).
pub struct Serving(pub Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The comparison of this case's source and target, keyed by `key`.
pub fn diff(c: &Case, key: &[&str]) -> Diff {
    compare::compare(c.source, &c.sdb, c.target, &c.tdb, "t", key)
}

/// Waits until the comparison is clean (a running serve catching up); fails with the last
/// difference after `limit`.
pub async fn wait_clean(c: &Case, key: &[&str], limit: Duration) -> Diff {
    let until = Instant::now() + limit;
    loop {
        let d = diff(c, key);
        if d.is_clean() {
            return d;
        }
        if std::env::var("KEYS_DEBUG_LOCKS").is_ok() && until - Instant::now() < limit / 2 {
            let t = c.target.sql("SELECT trx_id, trx_state, trx_isolation_level, trx_rows_locked, trx_query FROM information_schema.INNODB_TRX");
            let w = c
                .target
                .sql("SELECT * FROM information_schema.INNODB_LOCKS");
            eprintln!("LOCKS trx:\n{t}\nlocks:\n{w}");
        }
        assert!(Instant::now() < until, "target never equalled source: {d}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `backfill audit JOB --format json` by the real program: asserts exit 0 and `passed`.
pub fn assert_audit_passes(c: &Case) {
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let data = c.data.path().to_str().unwrap().to_string();
    let (code, out, err) = crate::backfill(&[
        "audit",
        "--state",
        &state,
        "--data-dir",
        &data,
        &job,
        "--format",
        "json",
    ])
    .parts();
    assert_eq!(code, 0, "audit: {out} {err}");
    let a: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(a["passed"], true, "{out}");
}

/// Debugging aid (KEYS_EXPLAIN=1, with the target's general log on as a table): every
/// DELETE the pipeline ran on this case's target, EXPLAINed; prints those read by a full
/// scan.
fn explain_deletes(c: &Case) {
    let out = c.target.sql(&format!(
        "SELECT DISTINCT REPLACE(REPLACE(argument, '\n', ' '), '\t', ' ') FROM mysql.general_log \
         WHERE argument LIKE 'DELETE FROM `{}`.`t`%' LIMIT 300",
        c.tdb
    ));
    let mut full = 0;
    for stmt in out.lines() {
        let e = c
            .target
            .try_sql(&format!("EXPLAIN {stmt}"))
            .unwrap_or_default();
        if e.split('\t').nth(3) == Some("ALL") {
            full += 1;
            eprintln!("FULL SCAN: {stmt}");
        }
    }
    eprintln!(
        "explained {} deletes, {full} full scans",
        out.lines().count()
    );
}

/// `backfill verify JOB --format json` (the product's own comparison) exits 0 with
/// 0 missing, 0 extra, 0 differing fields.
pub fn assert_verify_clean(c: &Case) {
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let (code, out, err) =
        crate::backfill(&["verify", "--state", &state, &job, "--format", "json"]).parts();
    assert_eq!(code, 0, "verify: {out} {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let t = &v["cursor"]["tally"];
    for k in ["missing", "extra", "differing_fields"] {
        assert_eq!(t[k]["count"], 0, "verify {k}: {out}");
    }
}

/// `backfill status JOB` (text and JSON) of a keyed table: exit 0, STREAMING.
pub fn assert_status_shows(c: &Case) {
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let text = crate::case::status_cli(&["--state", &state, &job]);
    assert!(text.contains("STREAMING"), "{text}");
    let json = crate::case::status_cli(&["--state", &state, &job, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(v["job_id"], c.job.0, "{json}");
}

/// The comparison is not blind: a field changed in the target is one differing row, a
/// key whose bytes changed (case only, where the key is a string) one missing and one
/// extra. Leaves the target changed.
/// (A case-only change: the same key under `_ci`, other bytes.)
pub fn assert_comparator_sees_a_change(c: &Case, shape: Shape) {
    c.target
        .sql_in(&c.tdb, "UPDATE t SET n = n + 1000000 ORDER BY n LIMIT 1");
    let d = diff(c, shape.key);
    assert_eq!((d.missing, d.extra, d.differing), (0, 0, 1), "{d}");
    if let Some((col, _)) = shape.case_col {
        c.target.sql_in(
            &c.tdb,
            &format!(
                "UPDATE t SET `{col}` = UPPER(`{col}`) WHERE n < 1000000 \
                 AND BINARY `{col}` <> BINARY UPPER(`{col}`) ORDER BY n LIMIT 1"
            ),
        );
        let d = diff(c, shape.key);
        assert_eq!((d.missing, d.extra, d.differing), (1, 1, 1), "{d}");
    }
}

/// What one shape's run saw.
#[derive(Debug)]
pub struct Seen {
    pub windows: usize,
    pub writes: u64,
    pub rows: usize,
    pub took: Duration,
}

/// One shape end to end: install (window_rows 50, page_rows 10) and start under a
/// writer; serve to STREAMING; writer stopped: the target catches up, 0/0/0, audit PASS;
/// a writer while STREAMING; stopped: caught up and 0/0/0 again.
pub async fn end_to_end(prefix: &str, shape: Shape) -> Seen {
    let serve = ["--replay-batch-rows", "40", "--apply-streams", "2"];
    end_to_end_sized(prefix, shape, 50, 10, &serve, &[]).await
}

/// [`end_to_end`] with these window and page sizes and serve flags; `bulk` statements run
/// on the source once while the windows run and once while STREAMING (large
/// transactions).
pub async fn end_to_end_sized(
    prefix: &str,
    shape: Shape,
    window_rows: u64,
    page_rows: u64,
    serve_args: &[&str],
    bulk: &[&str],
) -> Seen {
    let t0 = Instant::now();
    let fill = shape.fill();
    let c = Case::of_table(prefix, &shape.ddl(), &fill, window_rows, page_rows).await;
    if std::env::var("KEYS_EXPLAIN").is_ok() {
        c.target
            .sql("SET GLOBAL log_output = 'TABLE'; SET GLOBAL general_log = 1");
    }
    let windows = c.plan().await.len();
    assert!(windows >= 3, "{}: {windows} windows", shape.name);
    let w = Writing::start(&c, shape);
    let mut serve = Serving(serve_child(&c, serve_args, ""));
    for sql in bulk {
        c.source.sql_in(&c.sdb, sql);
    }
    wait_streaming(&c, &mut serve.0).await;
    let mut writes = w.stop().await;
    wait_clean(&c, shape.key, Duration::from_secs(60)).await;
    assert_audit_passes(&c);
    let w = Writing::start(&c, shape);
    for sql in bulk {
        c.source.sql_in(&c.sdb, sql);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    writes += w.stop().await;
    let d = wait_clean(&c, shape.key, Duration::from_secs(60)).await;
    drop(serve);
    if std::env::var("KEYS_EXPLAIN").is_ok() {
        explain_deletes(&c);
    }
    assert_status_shows(&c);
    assert_verify_clean(&c);
    assert_comparator_sees_a_change(&c, shape);
    Seen {
        windows,
        writes,
        rows: d.rows,
        took: t0.elapsed(),
    }
}

/// Runs `end_to_end` for each shape in turn (each on its own task, so one failing shape
/// does not hide the others); prints a line per shape and fails naming every shape that
/// failed.
pub async fn each_shape(group: &str, shapes: &[Shape]) {
    let mut failed = Vec::new();
    // KEYS_SHAPES=name,name runs only those (while debugging one shape).
    let only = std::env::var("KEYS_SHAPES").ok();
    let run = select(shapes, only.as_deref()).unwrap_or_else(|e| panic!("{group}: {e}"));
    for s in shapes
        .iter()
        .filter(|s| !run.iter().any(|r| r.name == s.name))
    {
        eprintln!("key shape {}: not run (KEYS_SHAPES={only:?})", s.name);
    }
    for s in &run {
        let prefix = format!("k{group}{}", s.name.len());
        let shape = *s;
        let r = tokio::spawn(async move { end_to_end(&prefix, shape).await }).await;
        match r {
            Ok(seen) => eprintln!("key shape {}: PASS {seen:?}", s.name),
            Err(e) => {
                eprintln!("key shape {}: FAIL", s.name);
                failed.push(format!("{}: {e}", s.name));
            }
        }
    }
    assert!(
        failed.is_empty(),
        "failed key shapes:\n{}",
        failed.join("\n")
    );
}

/// The shapes of a group that `only` (`KEYS_SHAPES`: names, comma-separated) selects;
/// all of them without a filter. A name that is no shape of [`shapes::ALL`] (a typo) or a
/// filter that selects none of the group's shapes is an error: a run that copies no
/// table must fail, not pass.
pub fn select(shapes: &[Shape], only: Option<&str>) -> Result<Vec<Shape>, String> {
    let Some(only) = only else {
        return Ok(shapes.to_vec());
    };
    let names: Vec<&str> = only
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let known = |n: &str| shapes::ALL.iter().chain(shapes).any(|s| s.name == n);
    let unknown: Vec<&str> = names.iter().copied().filter(|n| !known(n)).collect();
    let group: Vec<&str> = shapes.iter().map(|s| s.name).collect();
    if !unknown.is_empty() {
        return Err(format!(
            "KEYS_SHAPES={only:?} names no key shape {unknown:?}; this group has {group:?}"
        ));
    }
    let run: Vec<Shape> = shapes
        .iter()
        .filter(|s| names.contains(&s.name))
        .copied()
        .collect();
    if run.is_empty() {
        return Err(format!(
            "KEYS_SHAPES={only:?} selects none of this group's shapes {group:?}: nothing \
             would run"
        ));
    }
    Ok(run)
}

fn q(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The shapes of issue 14's acceptance list, and a few more.
pub mod shapes;

#[cfg(test)]
mod tests {
    use super::select;
    use super::shapes::{INT_INT, INT_VARCHAR50_DATE, SMALLINT_UNSIGNED};

    fn names(only: Option<&str>) -> Result<Vec<&'static str>, String> {
        let group = [SMALLINT_UNSIGNED, INT_INT];
        select(&group, only).map(|v| v.iter().map(|s| s.name).collect())
    }

    #[test]
    fn keys_shapes_selects_named_shapes_and_fails_when_it_selects_none() {
        assert_eq!(names(None), Ok(vec!["smallint_unsigned", "int_int"]));
        assert_eq!(names(Some("int_int")), Ok(vec!["int_int"]));
        assert_eq!(
            names(Some(" int_int , smallint_unsigned")).unwrap().len(),
            2
        );
        // A shape of another group: this group runs none of it.
        let e = names(Some(INT_VARCHAR50_DATE.name)).unwrap_err();
        assert!(e.contains("selects none"), "{e}");
        // A typo, alone or beside a real name.
        for typo in ["int_itn", "int_int,int_itn"] {
            let e = names(Some(typo)).unwrap_err();
            assert!(e.contains("names no key shape [\"int_itn\"]"), "{e}");
        }
        for empty in ["", ","] {
            let e = names(Some(empty)).unwrap_err();
            assert!(e.contains("selects none"), "{e}");
        }
    }
}
