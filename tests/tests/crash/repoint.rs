//! Source failover by GTID (DESIGN §18, issue 18 item 4) with real servers and real
//! `backfill` processes: a private MariaDB primary with a GTID replica
//! (`log_slave_updates`); a table copied to STREAMING from the primary, changes captured;
//! the primary is stopped, the replica promoted and `backfill repoint` moves the stream
//! to it at D's GTID. Writes on the new primary reach the target, source and target
//! agree by CHECKSUM TABLE and by `backfill verify` against the new source, the audit
//! passes, the exactly-once oracle holds for both tables over the primary's binlog up to
//! the repoint's GTID and the new primary's after it, no window was read again and T's
//! page credentials are unchanged. A repoint to a replica that stopped before D's GTID
//! (as a server restored from an older backup) is refused naming that GTID, and changes
//! nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::oracle::{self, parse::Group, Mark, Subject};
use backfill_tests::*;
use harness::{Server, ServerOpts};
use kernel::ids::{Generation, JobId};
use ledger::record::Phase;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// `backfill serve --exit-when-idle` with `extra` flags; returns its exit code.
fn serve_idle(c: &Case, extra: &[&str]) -> Option<i32> {
    let child = backfill_tests::bin::command()
        .arg("serve")
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .args(["--owner", "repoint-test", "--exit-when-idle"])
        .args(extra)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve");
    wait(child, None)
}

/// Changes of every kind on `s`.
fn writes(s: &Server, db: &str, from: i64, n: i64) {
    let mut sql = String::new();
    for i in from..from + n {
        sql.push_str(&format!(
            "INSERT INTO t VALUES ({i}, {i}, 'new'); UPDATE t SET k = k + 1 WHERE id = {}; \
             DELETE FROM t WHERE id = {}; ",
            i % 997 + 1,
            i % 1499 + 2
        ));
    }
    s.sql_in(db, &format!("BEGIN; {sql} COMMIT"));
}

async fn d_of(c: &Case) -> (String, String, u64) {
    sqlx::query_as("SELECT restart_gtid, restart_file, restart_pos FROM capture_position")
        .fetch_one(&c.pool)
        .await
        .unwrap()
}

fn page_credentials(c: &Case) -> String {
    c.target.sql(&format!(
        "SELECT job_id, window_id, page_no, attempt, HEX(digest), row_count FROM `{}`.`{}` \
         WHERE job_id = {} ORDER BY window_id, page_no",
        c.tdb,
        ledger::target::PAGES,
        c.job.0
    ))
}

fn repoint(c: &Case, old: &Server, to: &Server) -> (i32, String, String) {
    let (state, from) = (c.state_url(), format!("127.0.0.1:{}", old.port()));
    backfill(&[
        "repoint",
        "--state",
        &state,
        "--source-server",
        &from,
        "--to",
        &to.url(),
        "--format",
        "json",
    ])
    .parts()
}

/// A second table `t2` (rows of `t` up to `rows`) in small windows, started, with audit
/// triggers.
async fn start_t2(c: &Case, rows: u64) -> (JobId, Generation) {
    let mut req = c.second_table(rows);
    req.window_rows = 300;
    req.page_rows = 150;
    let done = backfill_tests::bf::install::install(&req).await.unwrap();
    backfill_tests::bf::store::commands::start(&c.pool, done.job_id)
        .await
        .unwrap();
    // The oracle sees every application of t2's changes, also one that changed nothing.
    add_audit_triggers_of(c.target, &c.tdb, "t2");
    (done.job_id, done.generation)
}

async fn head_of(c: &Case, job: JobId, g: Generation) -> Option<ledger::record::JournalRecord> {
    c.journal().head(job, g).await.unwrap().map(|h| h.record)
}

/// A serve reading slowly until `t2` has sealed and applied `windows` windows, then
/// SIGKILLed (its leases expire after 3 s, its heartbeat goes stale after 10 s).
async fn t2_mid_windows(c: &Case, t2: (JobId, Generation), windows: u32) {
    let mut child = backfill_tests::bin::command()
        .arg("serve")
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .args(["--owner", "repoint-slow", "--lease-ttl-secs", "3"])
        .args(["--read-rows-per-sec", "500"])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve");
    let until = Instant::now() + Duration::from_secs(120);
    loop {
        let h = head_of(c, t2.0, t2.1).await;
        if let Some(h) = &h {
            assert!(h.paused.is_none(), "t2 paused: {:?}", h.paused);
            if h.phase == Phase::Windows && h.completed >= windows {
                break;
            }
        }
        assert!(Instant::now() < until, "t2 not mid windows: {h:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

async fn seals_of(c: &Case, job: JobId) -> Vec<(u32, u32, Vec<u8>)> {
    sqlx::query_as(
        "SELECT window_id, attempt, manifest_hash FROM window_seals WHERE job_id = ? \
         ORDER BY window_id, attempt",
    )
    .bind(job.0)
    .fetch_all(&c.pool)
    .await
    .unwrap()
}

/// `verify JOB` against the job's (new) source: 0 missing, 0 extra, 0 differing.
fn verify_clean(c: &Case, job: JobId) {
    let (state, job) = (c.state_url(), job.0.to_string());
    let (code, out, err) =
        backfill(&["verify", "--state", &state, &job, "--format", "json"]).parts();
    assert_eq!(
        code, 0,
        "verify job {job} against the new source: {out} {err}"
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in ["missing", "extra", "differing_fields"] {
        assert_eq!(v["cursor"]["tally"][k]["count"], 0, "{k}: {out}");
    }
    eprintln!("repoint: verify job {job}: {out}");
}

/// Primary, its replica (positions shifted by a local group in another GTID domain, so
/// the two binlogs differ) and a replica left behind; table `t` on the primary; where the
/// replica's binlog stood before the case's tables existed (for the oracle).
async fn servers(n: i64) -> (&'static Server, Server, Server, Case, Mark) {
    let primary: &'static Server = Box::leak(Box::new(Server::start(ServerOpts::source())));
    let replica = Server::start_replica_of(primary, 3);
    replica.sql("SET SESSION gtid_domain_id = 9; CREATE DATABASE rp_local_only");
    let behind = Server::start_replica_of(primary, 4);
    let mark = Mark::now(&replica);
    let c = Case::on(primary, "rp_s", n, 1_000, 500).await;
    behind.wait_replicated(primary, Duration::from_secs(60));
    behind.stop_replication();
    (primary, replica, behind, c, mark)
}

/// The subjects of the oracle, `t` and `t2`, and their history in the primary's binlog,
/// read before the primary stops.
fn before_failover(c: &Case, t2: (JobId, Generation)) -> Vec<(Subject, Vec<Group>)> {
    [("t", c.job, c.generation), ("t2", t2.0, t2.1)]
        .into_iter()
        .map(|(table, job, g)| {
            let s = c.subject(table, job, g);
            let old = oracle::read_source(c.source, &c.marks.0, &s);
            (s, old)
        })
        .collect()
}

/// The exactly-once oracle of each job across the failover: the primary's history up to
/// D's GTID at the repoint, then the new primary's after it (a replica with
/// `log_slave_updates` logs the primary's transactions under their GTIDs), in lineage
/// epoch 1 as T's cursors after the repoint name it ([`oracle::switched`]).
fn exactly_once_across(
    c: &Case,
    new: (&Server, &Mark),
    gtid: &str,
    old: Vec<(Subject, Vec<Group>)>,
) {
    for (s, old) in old {
        let later = oracle::read_source(new.0, new.1, &s);
        let history = oracle::switched(old, later, gtid, 1);
        c.oracle_over(&history, &s).assert_exactly_once();
    }
}

/// Repoints to `behind` (refused naming D's GTID, D unchanged), then to `replica`.
async fn repoint_refused_then_done(c: &Case, primary: &Server, behind: &Server, replica: &Server) {
    let (gtid, d_file, d_pos) = d_of(c).await;
    let (code, out, err) = repoint(c, primary, behind);
    assert_eq!(
        code, 3,
        "repoint to a server behind D is refused: {out} {err}"
    );
    assert!(
        err.contains(&gtid),
        "the refusal names D's GTID {gtid}: {err}"
    );
    eprintln!("repoint: refused: {err}");
    assert_eq!(
        d_of(c).await,
        (gtid.clone(), d_file.clone(), d_pos),
        "D unchanged"
    );

    let (code, out, err) = repoint(c, primary, replica);
    assert_eq!(code, 0, "repoint: {out} {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["switch"]["gtid"], gtid.as_str(), "{out}");
    let (g2, file2, pos2) = d_of(c).await;
    assert_eq!(g2, gtid);
    assert!(file2.starts_with("1/"), "D is in lineage epoch 1: {file2}");
    assert_ne!(
        pos2, d_pos,
        "the new binlog's position differs from the old one's"
    );
    eprintln!("repoint: {out}");
    // Running it again changes nothing more (D already on the new server).
    let (code, out, err) = repoint(c, replica, replica);
    assert_eq!(code, 0, "repeated repoint: {out} {err}");
    assert!(out.contains("\"switch\":null"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_and_mid_windows_tables_follow_a_promoted_replica() {
    let n = 3_000;
    let (primary, replica, behind, c, replica_mark) = servers(n).await;
    assert_eq!(serve_idle(&c, &[]), Some(0), "serve to STREAMING");
    assert_eq!(c.head().await.phase, Phase::Streaming);
    let t2 = start_t2(&c, n as u64).await;
    t2_mid_windows(&c, t2, 2).await;
    writes(primary, &c.sdb, n + 1, 200);
    primary.sql_in(
        &c.sdb,
        "UPDATE t2 SET k = k + 7 WHERE id % 5 = 0; DELETE FROM t2 WHERE id % 11 = 0",
    );
    replica.wait_replicated(primary, Duration::from_secs(60));
    let creds = page_credentials(&c);
    let attempts = c.last_attempts().await;
    let t2_seals = seals_of(&c, t2.0).await;
    assert!(!creds.is_empty() && t2_seals.len() >= 2, "{t2_seals:?}");
    assert_eq!(head_of(&c, t2.0, t2.1).await.unwrap().phase, Phase::Windows);

    let old = before_failover(&c, t2);
    primary.stop();
    replica.promote();
    // The killed serve's heartbeat goes stale (10 s) and its leases expire (3 s).
    tokio::time::sleep(Duration::from_secs(11)).await;
    let gtid = d_of(&c).await.0;
    repoint_refused_then_done(&c, primary, &behind, &replica).await;

    writes(&replica, &c.sdb, n + 10_000, 300);
    replica.sql_in(&c.sdb, "UPDATE t2 SET v = 'after' WHERE id % 7 = 0");
    let src = replica.url();
    // Small replay transactions: the groups from both servers are applied in chunks under
    // the sub-cursor, each naming a position of the new lineage.
    let small = ["--replay-batch-rows", "100"];
    assert_eq!(
        serve_idle(&c, &[&["--source", &src][..], &small].concat()),
        Some(0),
        "serve on the new source"
    );
    c.wait_streaming(&[t2]).await;
    assert!(c.head().await.paused.is_none());
    for t in ["t", "t2"] {
        assert_eq!(
            checksum(&replica, &c.sdb, t),
            checksum(c.target, &c.tdb, t),
            "{t}"
        );
    }
    verify_clean(&c, c.job);
    verify_clean(&c, t2.0);
    exactly_once_across(&c, (&replica, &replica_mark), &gtid, old);
    let (state, data) = (c.state_url(), c.data.path().to_str().unwrap().to_string());
    for job in [c.job, t2.0] {
        let job = job.0.to_string();
        let (code, out, err) =
            backfill(&["audit", "--state", &state, "--data-dir", &data, &job]).parts();
        assert_eq!(code, 0, "audit job {job}: {out} {err}");
    }
    assert_eq!(
        page_credentials(&c),
        creds,
        "T's page credentials of t unchanged"
    );
    assert_eq!(
        c.last_attempts().await,
        attempts,
        "no window of t read again"
    );
    let after = seals_of(&c, t2.0).await;
    for s in &t2_seals {
        assert!(
            after.contains(s),
            "t2's seal of w{} attempt {} kept",
            s.0,
            s.1
        );
    }
    eprintln!(
        "repoint: t2 had {} sealed windows before the failover, {} seals after",
        t2_seals.len(),
        after.len()
    );
}
