//! Losing the serve host that owns two of four jobs (DESIGN §18, issue 18): two real
//! `backfill serve` processes, each with its own `--owner` and data directory, share one
//! state store (materials in the state store, the default); four tables of one source,
//! one job each, copy under a writer each. Host A (`--max-sessions 2`) takes two jobs; host
//! B (`--max-sessions 4`: room for all four) takes the other two and tries A's again
//! every 2 s. A is lost (SIGKILL, or a fault point) mid windows, in the replay of (B, F]
//! or while STREAMING, and its data directory is deleted: B takes A's two jobs and the
//! source's capture stream over, brings all four to STREAMING, no window sealed before
//! the loss is read again, and every table compares clean: CHECKSUM TABLE and a row
//! digest computed by each server, `backfill verify` 0 missing / 0 extra / 0 differing,
//! `backfill audit` PASS.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::host_loss::{
    catch_up, compare_job, lease_owner_of, serve_as, serve_at, stream_owner, taken_over, wait_long,
    writers_on, TTL_SECS,
};
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::case::*;
use backfill_tests::workload::{Counts, Workload};
use kernel::ids::{Generation, JobId};
use ledger::record::{JournalRecord, Phase};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// The four tables, one job each (`t` is the [`Case`]'s own).
const TABLES: [&str; 4] = ["t", "t2", "t3", "t4"];

/// One table's job.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Job {
    table: &'static str,
    id: JobId,
    g: Generation,
}

/// The four tables of `rows` rows each (`t` of the case, `t2`..`t4` copies of its rows),
/// each installed with these sizes, started and given audit triggers, in job order.
async fn four(prefix: &str, rows: i64, window_rows: u64, page_rows: u64) -> (Case, Vec<Job>) {
    let c = Case::new(prefix, rows, window_rows, page_rows).await;
    let mut jobs = vec![Job {
        table: "t",
        id: c.job,
        g: c.generation,
    }];
    for &table in &TABLES[1..] {
        let ddl = DDL.replace("TABLE t ", &format!("TABLE {table} "));
        c.source.sql_in(&c.sdb, &ddl);
        c.source
            .sql_in(&c.sdb, &format!("INSERT INTO {table} SELECT * FROM t"));
        c.target.sql_in(&c.tdb, &ddl);
        let mut req = InstallRequest::new(
            c.state_url(),
            c.source.url(),
            TableName::new(&c.sdb, table),
            c.target.url(),
            TableName::new(&c.tdb, table),
        );
        (req.window_rows, req.page_rows) = (window_rows, page_rows);
        req.control_schema = c.ctl.clone();
        let done = install(&req).await.unwrap();
        backfill_tests::bf::store::commands::start(&c.pool, done.job_id)
            .await
            .unwrap();
        // Like `t`'s: the oracle sees every application, also one that changed nothing.
        add_audit_triggers_of(c.target, &c.tdb, table);
        jobs.push(Job {
            table,
            id: done.job_id,
            g: done.generation,
        });
    }
    (c, jobs)
}

async fn head_of(c: &Case, j: &Job) -> Option<JournalRecord> {
    c.journal().head(j.id, j.g).await.unwrap().map(|h| h.record)
}

/// Waits until `ok` holds for J of every one of `jobs`, failing on a pause.
async fn wait_all(c: &Case, jobs: &[Job], what: &str, ok: impl Fn(&JournalRecord) -> bool) {
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        let mut heads = Vec::new();
        for j in jobs {
            let h = head_of(c, j).await;
            if let Some(h) = &h {
                assert!(h.paused.is_none(), "{what}: {j:?} paused: {:?}", h.paused);
            }
            heads.push(h);
        }
        if heads.iter().all(|h| h.as_ref().is_some_and(&ok)) {
            return;
        }
        assert!(
            Instant::now() < until,
            "timed out waiting for {what}: {heads:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until each of `jobs` is in its windows with at least `n` of them sealed.
async fn sealing(c: &Case, jobs: &[Job], n: usize) {
    let until = Instant::now() + Duration::from_secs(240);
    'poll: loop {
        assert!(
            Instant::now() < until,
            "timed out waiting for {n} windows sealed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        for j in jobs {
            let h = head_of(c, j).await;
            assert!(
                h.as_ref().is_none_or(|h| h.paused.is_none()),
                "{j:?}: {h:?}"
            );
            let phase = h.map(|h| h.phase);
            assert!(
                !past_windows(phase),
                "{j:?} past its windows before the loss"
            );
            if phase != Some(Phase::Windows) || c.seals_of(j.id, j.g).await.len() < n {
                continue 'poll;
            }
        }
        return;
    }
}

/// The jobs whose lease `owner` took (it may have released it since), once there are `n`.
async fn owned_by(c: &Case, jobs: &[Job], owner: &str, n: usize) -> Vec<Job> {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let mut mine = Vec::new();
        for j in jobs {
            if lease_owner_of(c, j.id).await.as_deref() == Some(owner) {
                mine.push(*j);
            }
        }
        if mine.len() >= n {
            assert_eq!(mine.len(), n, "{owner} took more jobs than expected");
            return mine;
        }
        assert!(Instant::now() < until, "{owner} owns only {mine:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The owner `backfill status JOB --format json` shows, and whether its lease is live.
fn status_owner(c: &Case, j: &Job) -> (String, bool) {
    let out = status_cli(&[
        "--state",
        &c.state_url(),
        &j.id.0.to_string(),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let o = &v["owner"];
    let name = o["owner"].as_str().unwrap_or_default().to_string();
    (name, o["live"].as_bool().unwrap_or(false))
}

/// Host A (`--max-sessions 2`, `a_extra`, fault points `fail`) starts first and takes
/// the first two jobs; then host B (`--max-sessions 4 --exit-when-idle`) takes the other
/// two. Returns both processes and A's jobs (as the lease table and status show them).
async fn two_hosts(
    c: &Case,
    jobs: &[Job],
    (a_dir, b_dir): (&Path, &Path),
    a_extra: &[&str],
    fail: &str,
) -> (Child, Child, Vec<Job>) {
    let a_args = [&["--max-sessions", "2"], a_extra].concat();
    let a = serve_at(c, "host-a", a_dir, &a_args, fail);
    let a_jobs = owned_by(c, jobs, "host-a", 2).await;
    // A, first, also reads the source's binlog: the loss takes the capture stream too.
    let until = Instant::now() + Duration::from_secs(30);
    while stream_owner(c).await.as_deref() != Some("host-a") {
        assert!(Instant::now() < until, "{:?}", stream_owner(c).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let b = serve_as(
        c,
        "host-b",
        b_dir,
        &["--max-sessions", "4", "--exit-when-idle"],
    );
    let b_jobs: Vec<Job> = jobs
        .iter()
        .filter(|j| !a_jobs.contains(j))
        .copied()
        .collect();
    assert_eq!(owned_by(c, jobs, "host-b", 2).await, b_jobs);
    for j in &a_jobs {
        assert_eq!(status_owner(c, j), ("host-a".to_string(), true), "{j:?}");
    }
    let tables = |js: &[Job]| js.iter().map(|j| j.table).collect::<Vec<_>>();
    eprintln!(
        "host A owns {:?}, host B owns {:?}",
        tables(&a_jobs),
        tables(&b_jobs)
    );
    (a, b, a_jobs)
}

/// Waits until host A exits, failing if its jobs all reached STREAMING first (its fault
/// point was not reached). Returns A's exit code.
async fn dies_before_streaming(c: &Case, mut a: Child, a_jobs: &[Job]) -> Option<i32> {
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        if let Some(s) = a.try_wait().unwrap() {
            return s.code();
        }
        let mut streaming = true;
        for j in a_jobs {
            streaming &= head_of(c, j)
                .await
                .is_some_and(|h| h.phase == Phase::Streaming);
        }
        if streaming || Instant::now() > until {
            a.kill().unwrap();
            a.wait().unwrap();
            panic!("host A did not die before its jobs streamed (streaming: {streaming})");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What the state store shows of one job before the loss.
struct Before {
    phase: Option<Phase>,
    seals: Vec<(u32, u32, Vec<u8>)>,
    attempts: Vec<(u32, u32)>,
}

async fn before_loss(c: &Case, jobs: &[Job]) -> Vec<Before> {
    let mut out = Vec::new();
    for j in jobs {
        out.push(Before {
            phase: head_of(c, j).await.map(|h| h.phase),
            seals: c.seals_of(j.id, j.g).await,
            attempts: c.last_attempts_of(j.id, j.g).await,
        });
    }
    out
}

/// Kills host A hard (SIGKILL), deletes its data directory and returns how long host B
/// took to own every one of A's jobs and the capture stream.
async fn lose_host_a(
    c: &Case,
    a: &mut Child,
    a_jobs: &[Job],
    a_dir: tempfile::TempDir,
) -> Duration {
    a.kill().unwrap();
    a.wait().unwrap();
    let ids: Vec<JobId> = a_jobs.iter().map(|j| j.id).collect();
    taken_over(c, &ids, Instant::now(), a_dir).await
}

/// After host A's loss `what`, taken over in `took`: host B brings all four jobs to
/// STREAMING and exits idle, the writers stop; every window sealed before the loss keeps
/// its seal and was not attempted again (a job past its windows then has exactly the
/// attempts it had); B catches up, every table compares clean and the exactly-once oracle
/// passes for each job.
async fn survivor_finishes(
    c: &Case,
    what: &str,
    took: Duration,
    (b, b_dir): (Child, &Path),
    w: Vec<Workload>,
    jobs: &[Job],
    before: Vec<Before>,
) {
    eprintln!("host loss {what}: takeover of two jobs after {took:?} at lease TTL {TTL_SECS} s");
    assert!(
        took <= Duration::from_secs(TTL_SECS + 5),
        "takeover took {took:?}"
    );
    let b_exit = tokio::task::spawn_blocking(move || wait_long(b))
        .await
        .unwrap();
    assert_eq!(b_exit, Some(0), "host B's serve");
    for j in jobs {
        let phase = head_of(c, j).await.map(|h| h.phase);
        assert_eq!(phase, Some(Phase::Streaming), "{j:?} after host B");
    }
    let mut writes = Vec::new();
    for w in w {
        writes.push(w.stop().await);
    }
    let mut again = 0;
    for (j, was) in jobs.iter().zip(&before) {
        let seals = c.seals_of(j.id, j.g).await;
        let attempts = c.last_attempts_of(j.id, j.g).await;
        let last: std::collections::BTreeMap<u32, u32> = attempts.iter().copied().collect();
        for (win, attempt, hash) in &was.seals {
            let kept = seals.contains(&(*win, *attempt, hash.clone()));
            assert!(
                kept,
                "{}: w{win} attempt {attempt}: its seal is kept",
                j.table
            );
            let last = last.get(win);
            assert_eq!(last, Some(attempt), "{}: w{win} was read again", j.table);
        }
        if past_windows(was.phase) {
            assert_eq!(attempts, was.attempts, "{}: no window read again", j.table);
        }
        again += was
            .attempts
            .iter()
            .filter(|(w, a)| last.get(w) != Some(a))
            .count();
    }
    let sealed: Vec<_> = jobs
        .iter()
        .zip(&before)
        .map(|(j, b)| (j.table, b.seals.len()))
        .collect();
    eprintln!("host loss {what}: windows sealed before the loss (all kept) {sealed:?}, {again} unsealed attempts of A read again");
    writers_committed(jobs, &writes);
    catch_up(c, b_dir);
    for j in jobs {
        compare_job(c, j.table, j.id, b_dir);
    }
    // Every job's figures first, then the verdicts.
    let reports: Vec<_> = jobs
        .iter()
        .map(|j| c.oracle_of(j.table, j.id, j.g))
        .collect();
    for r in reports {
        r.assert_exactly_once();
    }
}

/// Prints what each table's writer committed (every statement succeeded).
fn writers_committed(jobs: &[Job], writes: &[Counts]) {
    for (j, w) in jobs.iter().zip(writes) {
        eprintln!("writer of {}: committed {w:?}", j.table);
    }
}

/// J is past its windows (every window sealed and applied).
fn past_windows(p: Option<Phase>) -> bool {
    use Phase::*;
    matches!(p, Some(Fenced | Replaying | Audited | Streaming))
}

fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
    (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_owning_two_of_four_lost_mid_windows() {
    let n = 8_000;
    let (c, jobs) = four("hl4_w", n, 1_000, 500).await;
    let w = writers_on(&c, &TABLES, n);
    let (a_dir, b_dir) = dirs();
    // Host A reads slowly (one limit shared by its two jobs): the loss comes mid windows.
    let slow = ["--read-rows-per-sec", "2000"];
    let paths = (a_dir.path(), b_dir.path());
    let (mut a, b, a_jobs) = two_hosts(&c, &jobs, paths, &slow, "").await;
    sealing(&c, &a_jobs, 2).await;
    let before = before_loss(&c, &jobs).await;
    for (j, was) in jobs.iter().zip(&before) {
        if a_jobs.contains(j) {
            let plan = backfill_tests::bf::store::jobs::load_plan(&c.pool, j.id);
            let windows = plan.await.unwrap().ranges.len();
            let sealed = was.seals.len();
            assert!(
                sealed < windows,
                "{}: {sealed} of {windows} sealed",
                j.table
            );
        }
    }
    let took = lose_host_a(&c, &mut a, &a_jobs, a_dir).await;
    let b_run = (b, b_dir.path());
    survivor_finishes(&c, "mid windows", took, b_run, w, &jobs, before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_owning_two_of_four_lost_in_the_replay_of_b_f() {
    use backfill_tests::bf::table::faults;
    let n = 3_000;
    let (c, jobs) = four("hl4_r", n, 1_000, 500).await;
    let w = writers_on(&c, &TABLES, n);
    let (a_dir, b_dir) = dirs();
    // Host A dies right after the second replay batch of (B, F] it committed in T (one
    // group per batch: the writer gives each table's (B, F] more than that).
    let at = format!("{}@2", faults::REPLAY_AFTER_BATCH_T);
    let small = ["--replay-batch-rows", "1", "--replay-batch-groups", "1"];
    let paths = (a_dir.path(), b_dir.path());
    let (a, b, a_jobs) = two_hosts(&c, &jobs, paths, &small, &at).await;
    let a_exit = dies_before_streaming(&c, a, &a_jobs).await;
    let died = Instant::now();
    assert_eq!(
        a_exit,
        Some(kernel::failpoint::EXIT_CODE),
        "host A died at {at}"
    );
    let before = before_loss(&c, &jobs).await;
    let a_phases: Vec<_> = jobs
        .iter()
        .zip(&before)
        .filter(|(j, _)| a_jobs.contains(j))
        .map(|(j, b)| (j.table, b.phase))
        .collect();
    eprintln!("host A died with its jobs at {a_phases:?}");
    let replaying = |p: &Option<Phase>| matches!(p, Some(Phase::Fenced | Phase::Replaying));
    assert!(
        a_phases.iter().any(|(_, p)| replaying(p)),
        "host A died in the replay of (B, F]: {a_phases:?}"
    );
    let ids: Vec<JobId> = a_jobs.iter().map(|j| j.id).collect();
    let took = taken_over(&c, &ids, died, a_dir).await;
    let b_run = (b, b_dir.path());
    survivor_finishes(&c, "in the replay of (B, F]", took, b_run, w, &jobs, before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_owning_two_of_four_lost_while_streaming() {
    let n = 3_000;
    let (c, jobs) = four("hl4_s", n, 1_000, 500).await;
    let w = writers_on(&c, &TABLES, n);
    let (a_dir, b_dir) = dirs();
    let paths = (a_dir.path(), b_dir.path());
    let (mut a, b, a_jobs) = two_hosts(&c, &jobs, paths, &[], "").await;
    wait_all(&c, &a_jobs, "host A STREAMING", |h| {
        h.phase == Phase::Streaming
    })
    .await;
    let before = before_loss(&c, &jobs).await;
    // Changes while A streams, then A is lost.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let took = lose_host_a(&c, &mut a, &a_jobs, a_dir).await;
    let b_run = (b, b_dir.path());
    survivor_finishes(&c, "while STREAMING", took, b_run, w, &jobs, before).await;
}
