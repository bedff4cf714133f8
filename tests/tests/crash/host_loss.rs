//! Losing a serve host (DESIGN §18, issue 18 item 2) with real `backfill serve`
//! processes: two serves with their own `--owner` and data directory share one state
//! store (materials in the state store, the default); one table copies under a writer.
//! The host owning the job is killed (SIGKILL) and its data directory deleted, mid
//! windows, in the replay of (B, F] or while STREAMING. The survivor takes the job and the capture stream over
//! within the lease TTL plus a few seconds, continues from the evidence (a window sealed
//! before the loss keeps its attempt and manifest: it is not read again), reaches
//! STREAMING, and source and target agree by CHECKSUM TABLE and by `backfill verify`;
//! `backfill audit` passes with the survivor's data directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::workload::{Counts, Workload};
use backfill_tests::*;
use ledger::record::Phase;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub(super) const TTL_SECS: u64 = 6;

/// `backfill serve` as host `owner` with its own data directory.
pub(super) fn serve_as(c: &Case, owner: &str, data: &std::path::Path, extra: &[&str]) -> Child {
    serve_at(c, owner, data, extra, "")
}

/// [`serve_as`] with fault points armed (`name@n`): the process dies there, holding its
/// leases until they expire, as a lost host does.
pub(super) fn serve_at(
    c: &Case,
    owner: &str,
    data: &std::path::Path,
    extra: &[&str],
    failpoints: &str,
) -> Child {
    backfill_tests::bin::command()
        .env(kernel::failpoint::ENV, failpoints)
        .arg("serve")
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(data)
        .args(["--owner", owner, "--lease-ttl-secs", &TTL_SECS.to_string()])
        .args(extra)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve")
}

/// A writer on the source's `t` until stopped ([`Workload`]: every statement must
/// succeed, commits are counted).
fn writer(c: &Case, n: i64) -> Workload {
    Workload::start(c.source.url_db(&c.sdb), n, 18)
}

/// A [`Workload`] on each of `tables` (ids 1..=n of each at the start), together at
/// about the pace of one.
pub(super) fn writers_on(c: &Case, tables: &[&str], n: i64) -> Vec<Workload> {
    let pause = Duration::from_millis(8 * tables.len() as u64);
    let url = c.source.url_db(&c.sdb);
    let seeds = 180..;
    tables
        .iter()
        .zip(seeds)
        .map(|(t, seed)| Workload::on(url.clone(), t, n, seed, pause))
        .collect()
}

/// The owner of the job's lease, by the state store.
async fn lease_owner(c: &Case) -> Option<String> {
    lease_owner_of(c, c.job).await
}

/// The owner of `job`'s lease (live or not), by the state store.
pub(super) async fn lease_owner_of(c: &Case, job: kernel::ids::JobId) -> Option<String> {
    sqlx::query_scalar("SELECT owner FROM ledger_lease WHERE job_id = ?")
        .bind(job.0)
        .fetch_optional(&c.pool)
        .await
        .unwrap()
}

pub(super) async fn stream_owner(c: &Case) -> Option<String> {
    sqlx::query_scalar("SELECT owner FROM capture_streams LIMIT 1")
        .fetch_optional(&c.pool)
        .await
        .unwrap()
}

/// Waits until `ok` holds for J, failing on a pause.
async fn wait_journal(c: &Case, what: &str, ok: impl Fn(&ledger::record::JournalRecord) -> bool) {
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        if let Some(h) = c.head_opt().await {
            assert!(h.paused.is_none(), "{what}: job paused: {:?}", h.paused);
            if ok(&h) {
                return;
            }
        }
        assert!(
            Instant::now() < until,
            "timed out waiting for {what}: {:?}",
            c.head_opt().await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Kills host A hard, deletes its data directory and returns how long host B took to
/// own the job's lease and the capture stream.
async fn lose_host_a(c: &Case, a: &mut Child, a_dir: tempfile::TempDir) -> Duration {
    a.kill().unwrap(); // SIGKILL
    a.wait().unwrap();
    host_a_gone(c, Instant::now(), a_dir).await
}

/// Host A died at `killed`: deletes its data directory and returns how long host B took
/// to own the job's lease and the capture stream.
async fn host_a_gone(c: &Case, killed: Instant, a_dir: tempfile::TempDir) -> Duration {
    taken_over(c, &[c.job], killed, a_dir).await
}

/// Host A, owner of `jobs`, died at `killed`: deletes its data directory and returns how
/// long host B took to own the lease of every one of `jobs` and the capture stream.
pub(super) async fn taken_over(
    c: &Case,
    jobs: &[kernel::ids::JobId],
    killed: Instant,
    a_dir: tempfile::TempDir,
) -> Duration {
    let path = a_dir.path().to_path_buf();
    drop(a_dir);
    assert!(!path.exists(), "host A's data directory is gone");
    let until = killed + Duration::from_secs(TTL_SECS + 20);
    loop {
        let mut owners = Vec::new();
        for job in jobs {
            owners.push(lease_owner_of(c, *job).await);
        }
        let stream = stream_owner(c).await;
        let b = |o: &Option<String>| o.as_deref() == Some("host-b");
        if owners.iter().all(b) && b(&stream) {
            return killed.elapsed();
        }
        assert!(
            Instant::now() < until,
            "no takeover: jobs {jobs:?} owned by {owners:?}, stream {stream:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The writer stopped: a last `serve --exit-when-idle` of host B catches up, then source
/// and target are compared independently, the audit runs on B's data directory and the
/// exactly-once oracle reads both binlogs.
fn converge_and_compare(c: &Case, b_dir: &std::path::Path) {
    catch_up(c, b_dir);
    compare_job(c, "t", c.job, b_dir);
    c.assert_exactly_once();
}

/// A last `serve --exit-when-idle` of host B (the writer stopped) catches every job up.
pub(super) fn catch_up(c: &Case, b_dir: &std::path::Path) {
    let last = serve_as(c, "host-b", b_dir, &["--exit-when-idle"]);
    assert_eq!(wait(last, None), Some(0), "the catch-up serve");
}

/// `job` copies `table` (same name on both sides): source and target agree by CHECKSUM
/// TABLE and by a row digest computed by each server, `backfill verify` finds 0 missing,
/// 0 extra, 0 differing, and `backfill audit` passes with B's data directory.
pub(super) fn compare_job(c: &Case, table: &str, job: kernel::ids::JobId, b_dir: &std::path::Path) {
    assert_eq!(
        checksum(c.source, &c.sdb, table),
        checksum(c.target, &c.tdb, table),
        "CHECKSUM TABLE {table}"
    );
    let cols = ["id", "k", "v"];
    assert_eq!(
        table_digest(c.source, &c.sdb, table, "id", &cols),
        table_digest(c.target, &c.tdb, table, "id", &cols),
        "row digest of {table}"
    );
    let (state, job) = (c.state_url(), job.0.to_string());
    let (code, out, err) =
        backfill(&["verify", "--state", &state, &job, "--format", "json"]).parts();
    assert_eq!(code, 0, "verify {table}: {out} {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in ["missing", "extra", "differing_fields"] {
        assert_eq!(v["cursor"]["tally"][k]["count"], 0, "{table} {k}: {out}");
    }
    let data = b_dir.to_str().unwrap();
    let (code, out, err) =
        backfill(&["audit", "--state", &state, "--data-dir", data, &job]).parts();
    assert_eq!(code, 0, "audit {table}: {out} {err}");
    assert!(out.contains(": PASS ("), "audit {table}: {out}");
}

/// Host B runs until STREAMING and caught up (`--exit-when-idle`), then the writer stops;
/// returns what it committed.
async fn survivor_streams(c: &Case, b: Child, w: Workload) -> Counts {
    let b_exit = tokio::task::spawn_blocking(move || wait_long(b))
        .await
        .unwrap();
    assert_eq!(b_exit, Some(0), "host B's serve");
    assert_eq!(c.head().await.phase, Phase::Streaming);
    w.stop().await
}

/// [`wait`] without its 90 s bound (the survivor copies the rest of the table).
pub(super) fn wait_long(mut child: Child) -> Option<i32> {
    let until = Instant::now() + Duration::from_secs(300);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > until {
            child.kill().unwrap();
            panic!("serve did not become idle");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// After a loss `what` that host B took over in `took`: B streams and catches up, no
/// window was read again (every window's last attempt is as before the loss), and the
/// copy compares clean.
async fn no_window_read_again(
    c: &Case,
    what: &str,
    took: Duration,
    (b, b_dir): (Child, &std::path::Path),
    w: Workload,
    attempts_before: Vec<(u32, u32)>,
) {
    eprintln!("host loss {what}: takeover after {took:?} at lease TTL {TTL_SECS} s");
    assert!(
        took <= Duration::from_secs(TTL_SECS + 5),
        "takeover took {took:?}"
    );
    let writes = survivor_streams(c, b, w).await;
    eprintln!("host loss {what}: writer committed {writes:?}");
    assert_eq!(
        c.last_attempts().await,
        attempts_before,
        "no window read again"
    );
    converge_and_compare(c, b_dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_lost_mid_windows_is_taken_over_from_evidence() {
    let n = 20_000;
    let c = Case::new("hloss_w", n, 2_000, 500).await;
    let w = writer(&c, n);
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Host A reads slowly so that the loss comes mid windows.
    let mut a = serve_as(&c, "host-a", a_dir.path(), &["--read-rows-per-sec", "3000"]);
    wait_journal(&c, "host A sealing windows", |h| {
        h.phase == Phase::Windows && h.completed >= 3
    })
    .await;
    assert_eq!(lease_owner(&c).await.as_deref(), Some("host-a"));
    let b = serve_as(&c, "host-b", b_dir.path(), &["--exit-when-idle"]);
    let sealed_before = c.seals().await;
    let attempts_before = c.last_attempts().await;
    assert!(sealed_before.len() >= 3, "{sealed_before:?}");
    let took = lose_host_a(&c, &mut a, a_dir).await;
    eprintln!("host loss mid windows: takeover after {took:?} at lease TTL {TTL_SECS} s");
    assert!(
        took <= Duration::from_secs(TTL_SECS + 5),
        "takeover took {took:?}"
    );
    let writes = survivor_streams(&c, b, w).await;
    let sealed_after = c.seals().await;
    let attempts_after: std::collections::BTreeMap<u32, u32> =
        c.last_attempts().await.into_iter().collect();
    for (win, attempt, hash) in &sealed_before {
        assert!(
            sealed_after.contains(&(*win, *attempt, hash.clone())),
            "w{win} attempt {attempt}: its seal is kept"
        );
        assert_eq!(
            attempts_after.get(win),
            Some(attempt),
            "w{win} was not read again"
        );
    }
    let reopened = attempts_before
        .iter()
        .filter(|(wi, a)| attempts_after.get(wi) != Some(a))
        .count();
    eprintln!("host loss mid windows: {} windows sealed before the loss, {reopened} windows of A's unsealed attempts read again, writer committed {writes:?}", sealed_before.len());
    converge_and_compare(&c, b_dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_lost_while_streaming_is_taken_over() {
    let n = 5_000;
    let c = Case::new("hloss_s", n, 1_000, 500).await;
    let w = writer(&c, n);
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = serve_as(&c, "host-a", a_dir.path(), &[]);
    wait_journal(&c, "host A STREAMING", |h| h.phase == Phase::Streaming).await;
    let attempts_before = c.last_attempts().await;
    let b = serve_as(&c, "host-b", b_dir.path(), &["--exit-when-idle"]);
    // Changes while A streams, then A is lost.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let took = lose_host_a(&c, &mut a, a_dir).await;
    let b_run = (b, b_dir.path());
    no_window_read_again(&c, "while STREAMING", took, b_run, w, attempts_before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_lost_in_the_replay_of_b_f_is_taken_over() {
    use backfill_tests::bf::table::faults;
    let n = 5_000;
    let c = Case::new("hloss_r", n, 1_000, 500).await;
    let w = writer(&c, n);
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Host A dies right after its first replay batch of (B, F] committed in T (before
    // activation): the writer keeps (B, F] non-empty.
    let at = format!("{}@1", faults::REPLAY_AFTER_BATCH_T);
    let a = serve_at(&c, "host-a", a_dir.path(), &[], &at);
    let a_exit = tokio::task::spawn_blocking(move || wait_long(a))
        .await
        .unwrap();
    let died = Instant::now();
    assert_eq!(
        a_exit,
        Some(kernel::failpoint::EXIT_CODE),
        "host A died at {at}"
    );
    let head = c.head().await;
    assert!(
        matches!(head.phase, Phase::Fenced | Phase::Replaying),
        "host A died in the replay of (B, F], not at {:?}",
        head.phase
    );
    assert_eq!(lease_owner(&c).await.as_deref(), Some("host-a"));
    let attempts_before = c.last_attempts().await;
    let b = serve_as(&c, "host-b", b_dir.path(), &["--exit-when-idle"]);
    let took = host_a_gone(&c, died, a_dir).await;
    let b_run = (b, b_dir.path());
    let what = "in the replay of (B, F]";
    no_window_read_again(&c, what, took, b_run, w, attempts_before).await;
}
