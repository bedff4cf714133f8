//! The service-level crash matrix (issue 34): for EVERY fault point of the table protocol
//! (`faults::ALL`, protocol order), a fresh table is installed, a concurrent writer
//! ([`backfill_tests::workload`]: inserts, updates, deletes, key changes, multi-statement
//! and rolled-back transactions, one transaction larger than a replay batch) runs, and the
//! real `backfill serve` binary is started with that point armed. It must exit there
//! (status 86: the kill landed; a point not reached within its bound FAILS the matrix).
//! It is restarted with other page, batch and apply-stream sizes and runs to STREAMING
//! (the cancel points: to CANCELLED(K)); the writer stops; a last serve catches up. Then:
//! the independent comparison with the source (`compare`, not for a cancelled table),
//! the exactly-once oracle over both binlogs (`oracle`), `backfill audit` exit 0 (L's
//! chain from B to F among its checks). A table of hits per point is printed.
//!
//! The two schema points (`schema.*`) need a DDL while the table streams; they are run
//! with `ALTER TABLE t ADD COLUMN` by the test, checked by the comparison and the audit;
//! the oracle's row model does not follow a DDL, so it is not run for them. The pause
//! and resume points need a pause: a target trigger refuses one source row ('poison')
//! while STREAMING, the table pauses on it, the test drops the trigger and records
//! `resume` (for `resume.*` while the armed serve runs, for `pause.*` after the kill,
//! where J must still hold the pause). The lease renewal is armed with a 3 s lease.
//! The restart replays over two apply streams (key partitions with their own cursors):
//! the oracle then also counts, per change and key, the part and main transactions that
//! applied it (`Report::keys_twice`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults::{self, window as fp};
use backfill_tests::case::*;
use backfill_tests::compare::compare;
use backfill_tests::workload::Workload;
use backfill_tests::*;
use ledger::record::Phase;
use mysql_async::prelude::Queryable;
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const ROWS: i64 = 1_500;

/// Sizes of one serve run: page rows, read windows, replay batch rows and groups, apply
/// streams.
#[derive(Clone, Copy)]
struct Sizes(u64, u32, u32, u32, u32);

/// The first run (where the point fires), the restart, the last catch-up.
const RUNS: [Sizes; 3] = [
    Sizes(150, 2, 60, 4, 1),
    Sizes(97, 1, 500, 50, 2),
    Sizes(400, 2, 7, 2, 1),
];

/// The n-th hit armed for a point hit more than once (later hits are mid-way).
fn hit_of(point: &str) -> u32 {
    match point {
        fp::MID_PAGES | fp::AFTER_PAGE_APPLIED | faults::REPLAY_AFTER_BATCH_T => 2,
        faults::STREAM_AFTER_BATCH | fp::MATERIAL_AFTER_BYTES => 3,
        _ => 1,
    }
}

/// What happened at one point.
#[derive(Debug, Default)]
struct Row {
    kills: u32,
    /// Of the kills, SIGKILLs at random instants (`MATRIX_RANDOM_KILLS` a round).
    random_kills: u32,
    restarts: u32,
    converged: u32,
    differences: usize,
    duplicates: usize,
    writes: u64,
    oracle: String,
    secs: u64,
}

/// Flags of the first run beyond its sizes: the lease renewal is reached within a second
/// with a 3 s lease (renewed every third of it), not after the default's 10 s.
fn first_flags(point: &str) -> &'static [&'static str] {
    match point {
        faults::LEASE_AFTER_RENEWED => &["--lease-ttl-secs", "3"],
        _ => &[],
    }
}

fn serve(c: &Case, s: Sizes, failpoints: &str, exit_when_idle: bool) -> Child {
    serve_with(c, s, failpoints, exit_when_idle, &[])
}

fn serve_with(c: &Case, s: Sizes, failpoints: &str, exit_when_idle: bool, flags: &[&str]) -> Child {
    let mut cmd = backfill_tests::command();
    cmd.args(["serve", "--owner", "matrix"])
        .args(flags)
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path());
    if exit_when_idle {
        cmd.arg("--exit-when-idle");
    }
    for (flag, v) in [
        ("--page-rows", s.0.to_string()),
        ("--read-windows", s.1.to_string()),
        ("--replay-batch-rows", s.2.to_string()),
        ("--replay-batch-groups", s.3.to_string()),
        ("--apply-streams", s.4.to_string()),
    ] {
        cmd.arg(flag).arg(v);
    }
    cmd.env(kernel::failpoint::ENV, failpoints)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve")
}

/// Waits for `child` at most `limit`; None when it had to be killed.
async fn wait(mut child: Child, limit: Duration) -> Option<i32> {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if t0.elapsed() >= limit {
            child.kill().unwrap();
            child.wait().unwrap();
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn is_cancel(point: &str) -> bool {
    point.starts_with("cancel.")
}

fn is_schema(point: &str) -> bool {
    point.starts_with("schema.")
}

fn is_pause(point: &str) -> bool {
    point.starts_with("pause.") || point.starts_with("resume.")
}

/// The key of the source row the target refuses while [`POISON`] is on its table.
const POISONED: i64 = 90_000_001;

/// A target trigger that refuses a row whose `v` is 'poison': the STREAMING table pauses
/// on a definite target refusal an operator can fix (drop the trigger) and resume.
const POISON: &str = "
DELIMITER //
CREATE TRIGGER t_poison BEFORE INSERT ON t FOR EACH ROW \
     IF NEW.v = 'poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison refused'; END IF //
DELIMITER ;";

/// For the pause and resume points: once STREAMING, the source writes the row the target
/// refuses; the table pauses. For the resume point the test then fixes the target and
/// resumes the still running serve (which exits at the point); for the pause point serve
/// exits at the pause itself and [`fix_and_resume`] follows the kill.
async fn poison_and_pause(c: &Case, point: &str) {
    wait_for_async("STREAMING before the poisoned row", async || {
        c.head_opt()
            .await
            .is_some_and(|h| h.phase == Phase::Streaming)
    })
    .await;
    c.source.sql_in(
        &c.sdb,
        &format!("INSERT INTO t (id, k, v) VALUES ({POISONED}, 0, 'poison')"),
    );
    if point == faults::RESUME_AFTER_J_CLEARED {
        c.paused_within("the poisoned row", Duration::from_secs(120))
            .await;
        fix_and_resume(c).await;
    }
}

/// Drops the refusing trigger and records `backfill resume`.
async fn fix_and_resume(c: &Case) {
    c.target.sql_in(&c.tdb, "DROP TRIGGER t_poison");
    bf::store::commands::resume(&c.pool, c.job).await.unwrap();
}

/// Kills serve at `point` (the first run), restarts and finishes; returns what happened.
async fn run_point(i: usize, point: &'static str) -> Row {
    let t0 = Instant::now();
    let c = Case::new(&format!("mx{i}"), ROWS, 400, 150).await;
    let writer = Workload::start(c.source.url_db(&c.sdb), ROWS, i as u64);
    let mut row = Row::default();
    let lock = if point == fp::AFTER_SEALED_AHEAD {
        Some(c.lock_target().await)
    } else {
        None
    };
    if is_pause(point) {
        c.target.sql_in(&c.tdb, POISON);
    }
    let armed = format!("{point}@{}", hit_of(point));
    let child = serve_with(&c, RUNS[0], &armed, false, first_flags(point));
    let first = async {
        if is_cancel(point) {
            wait_for_async("a window applied before the cancel", async || {
                c.head_opt().await.is_some_and(|h| h.completed >= 1)
            })
            .await;
            bf::store::commands::cancel(&c.pool, c.job).await.unwrap();
        }
        if is_schema(point) {
            wait_for_async("STREAMING before the DDL", async || {
                c.head_opt()
                    .await
                    .is_some_and(|h| h.phase == Phase::Streaming)
            })
            .await;
            c.source
                .sql_in(&c.sdb, "ALTER TABLE t ADD COLUMN extra INT NULL DEFAULT 7");
        }
        if is_pause(point) {
            poison_and_pause(&c, point).await;
        }
    };
    let (code, ()) = tokio::join!(wait(child, Duration::from_secs(120)), first);
    if let Some(mut l) = lock {
        l.query_drop("UNLOCK TABLES").await.unwrap();
    }
    assert_eq!(
        code,
        Some(kernel::failpoint::EXIT_CODE),
        "{point}: serve did not exit at the fault point (never reached, or it failed)"
    );
    row.kills += 1;
    if point == faults::PAUSE_AFTER_J_PAUSED {
        // Killed right after J recorded the pause: the pause survives the restart.
        let p = c
            .head()
            .await
            .paused
            .expect("J keeps the pause across the kill");
        assert!(p.message.contains("poison"), "{point}: {p:?}");
        fix_and_resume(&c).await;
    }
    for _ in 0..env_or("MATRIX_RANDOM_KILLS", 0) {
        // A SIGKILL at a random instant of a serve that never exits by itself: it must land.
        let ms = rand::random_range(50..2_500);
        let code = wait(serve(&c, RUNS[1], "", false), Duration::from_millis(ms)).await;
        assert_eq!(
            code, None,
            "{point}: serve ended by itself before a SIGKILL at {ms} ms"
        );
        row.kills += 1;
        row.random_kills += 1;
        row.restarts += 1;
    }
    // The restart: other sizes, under the writer, to STREAMING (or CANCELLED).
    let code = wait(serve(&c, RUNS[1], "", true), Duration::from_secs(180)).await;
    assert_eq!(code, Some(0), "{point}: the restart did not end cleanly");
    row.restarts += 1;
    row.writes = writer.stop().await.total();
    let code = wait(serve(&c, RUNS[2], "", true), Duration::from_secs(180)).await;
    assert_eq!(code, Some(0), "{point}: the catch-up did not end cleanly");
    row.restarts += 1;
    check(&c, point, &mut row).await;
    row.secs = t0.elapsed().as_secs();
    row
}

/// The comparison with the source, the oracle and the audit of a finished point.
async fn check(c: &Case, point: &str, row: &mut Row) {
    let head = c.head().await;
    assert_eq!(head.paused, None, "{point}: paused");
    let want = if is_cancel(point) {
        Phase::Cancelled
    } else {
        Phase::Streaming
    };
    assert_eq!(head.phase, want, "{point}");
    if !is_cancel(point) {
        let d = compare(c.source, &c.sdb, c.target, &c.tdb, "t", &["id"]);
        row.differences = d.missing + d.extra + d.differing + usize::from(d.definition_differs);
        assert!(d.is_clean(), "{point}: target differs from the source: {d}");
    }
    if is_schema(point) {
        row.oracle = "not run (DDL)".into();
    } else {
        let r = c.oracle();
        row.duplicates = r.duplicates + r.keys_twice;
        row.oracle = format!(
            "{} changes, {} cursor and {} part txns",
            r.source_changes, r.cursor_txns, r.part_txns
        );
        if is_cancel(point) {
            assert!(r.duplicates == 0 && r.wrong == 0, "{point}: oracle: {r}");
        } else {
            r.assert_exactly_once();
        }
    }
    let (state, job) = (c.state_url(), c.job.0.to_string());
    let data = c.data.path().to_str().unwrap().to_string();
    if !is_cancel(point) {
        let (code, out, err) =
            backfill(&["audit", "--state", &state, "--data-dir", &data, &job]).parts();
        assert_eq!(code, 0, "{point}: audit: {out} {err}");
    }
    row.converged += 1;
}

fn env_or(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

impl Row {
    fn add(&mut self, r: Row) {
        self.kills += r.kills;
        self.random_kills += r.random_kills;
        self.restarts += r.restarts;
        self.converged += r.converged;
        self.differences += r.differences;
        self.duplicates += r.duplicates;
        self.writes += r.writes;
        self.secs += r.secs;
        self.oracle = r.oracle;
    }
}

fn print(rows: &BTreeMap<usize, (&str, Row)>) {
    eprintln!("crash matrix: every fault point of faults::ALL, killed under a writer");
    eprintln!(
        "{:<40} {:>5} {:>6} {:>8} {:>9} {:>11} {:>10} {:>6} {:>5}  oracle (last round)",
        "point",
        "kills",
        "random",
        "restarts",
        "converged",
        "differences",
        "duplicates",
        "writes",
        "secs"
    );
    for (p, r) in rows.values() {
        eprintln!(
            "{p:<40} {:>5} {:>6} {:>8} {:>9} {:>11} {:>10} {:>6} {:>5}  {}",
            r.kills,
            r.random_kills,
            r.restarts,
            r.converged,
            r.differences,
            r.duplicates,
            r.writes,
            r.secs,
            r.oracle
        );
    }
    let total: u32 = rows.values().map(|(_, r)| r.kills).sum();
    let dups: usize = rows.values().map(|(_, r)| r.duplicates).sum();
    eprintln!("crash matrix: {total} kills in all, {dups} duplicates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_point_killed_under_writes_converges_exactly_once() {
    let points: Vec<(usize, &'static str)> = match std::env::var("MATRIX_POINTS") {
        Ok(only) => faults::ALL
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, p)| only.split(',').any(|o| p.contains(o)))
            .collect(),
        Err(_) => faults::ALL.iter().copied().enumerate().collect(),
    };
    assert!(!points.is_empty(), "MATRIX_POINTS names no fault point");
    let mut rows: BTreeMap<usize, (&str, Row)> = BTreeMap::new();
    let t0 = Instant::now();
    // Each round kills every point once more on fresh tables (`MATRIX_ROUNDS`, and
    // `scripts/chaos`).
    let rounds = env_or("MATRIX_ROUNDS", 1);
    let work: Vec<(usize, &'static str)> = (0..rounds as usize)
        .flat_map(|r| points.iter().map(move |(i, p)| (r * 1000 + i, *p)))
        .collect();
    let last = points.last().map_or(0, |(i, _)| *i);
    // Two points at a time: each has its own databases and serve processes.
    for pair in work.chunks(2) {
        let done = match pair {
            [(i, p), (j, q)] => {
                let (a, b) = tokio::join!(run_point(*i, p), run_point(*j, q));
                vec![(*i, *p, a), (*j, *q, b)]
            }
            [(i, p)] => vec![(*i, *p, run_point(*i, p).await)],
            _ => unreachable!("chunks of two"),
        };
        let round_done = done.iter().any(|(i, _, _)| i % 1000 == last);
        for (i, p, r) in done {
            rows.entry(i % 1000).or_insert((p, Row::default())).1.add(r);
        }
        if round_done && rounds > 1 {
            // A long run (`scripts/chaos`) shows its totals after every round, so a run
            // stopped early still says what it proved.
            let round = pair.last().map_or(0, |(i, _)| i / 1000) + 1;
            eprintln!(
                "crash matrix: round {round} of {rounds} done in {:?}",
                t0.elapsed()
            );
            print(&rows);
        }
    }
    eprintln!("crash matrix: {rounds} round(s) in {:?}", t0.elapsed());
    print(&rows);
    let missed: Vec<&str> = rows
        .values()
        .filter(|(_, r)| r.kills == 0)
        .map(|(p, _)| *p)
        .collect();
    assert!(missed.is_empty(), "points never killed: {missed:?}");
}
