//! The state store on a three-node MariaDB Galera cluster (issue 18 item 3, DESIGN §18):
//! the real `backfill serve` process runs with the multi-host state URL of the three nodes
//! while one table copies under a concurrent writer; node 1 (the one serve uses) is
//! SIGKILLed mid-bootstrap and restarted (it rejoins by state transfer), later node 2 (the
//! one serve moved to) is SIGKILLed while STREAMING and restarted as well. serve never
//! ends and the table never pauses; once the writer stops, the target equals the source
//! (compared by the two servers alone, `compare`), `audit` and `verify` pass, and L's hash
//! chain has no hole and no group stored twice, and the exactly-once oracle over both
//! binlogs passes. The test itself reads the state store through a plain TCP proxy in
//! front of the three nodes (new connections to the first live one), so both ways of
//! reaching a cluster are exercised. It prints how long serve
//! took to write to the state store again after each kill.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::case::{add_audit_triggers, fill, DDL};
use backfill_tests::compare::compare;
use backfill_tests::oracle::{self, primary_key, Mark, Subject};
use backfill_tests::workload::{Counts, Workload};
use backfill_tests::*;
use harness::{Cluster, Proxy, Server};
use ledger::journal::Journal;
use ledger::record::Phase;
use sqlx::MySqlPool;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const ROWS: i64 = 20_000;
const SECRET: &str = "s3cretGalera";

/// The writer on the SOURCE (a plain server; the cluster is only the state store): the
/// error-checked [`Workload`], counting commits.
fn start_writer(source: &'static Server, db: &str) -> Workload {
    Workload::start(source.url_db(db), ROWS, 60)
}

/// (L's tail seq, J's completed windows, J's phase, J's pause) read through the proxy.
async fn progress(
    pool: &MySqlPool,
    stream: &str,
    job: &Journal,
    id: (u64, u64),
) -> Option<Progress> {
    let tail: u64 = sqlx::query_scalar("SELECT tail_seq FROM capture_position WHERE stream = ?")
        .bind(stream)
        .fetch_optional(pool)
        .await
        .ok()??;
    let head = job
        .head(kernel::ids::JobId(id.0), kernel::ids::Generation(id.1))
        .await
        .ok()??;
    Some(Progress {
        tail,
        completed: head.record.completed,
        phase: head.record.phase,
        paused: head.record.paused.map(|d| d.to_string()),
    })
}

#[derive(Clone, Debug)]
struct Progress {
    tail: u64,
    completed: u32,
    phase: Phase,
    paused: Option<String>,
}

struct World {
    pool: MySqlPool,
    stream: String,
    journal: Journal,
    id: (u64, u64),
}

impl World {
    /// Polls until `ok` holds on the progress read through the proxy (transient read
    /// errors while a node fails over are polled again); fails on a pause.
    async fn wait(&self, what: &str, limit: Duration, ok: impl Fn(&Progress) -> bool) -> Progress {
        let until = Instant::now() + limit;
        loop {
            if let Some(p) = progress(&self.pool, &self.stream, &self.journal, self.id).await {
                assert_eq!(p.paused, None, "the table paused while waiting for {what}");
                if ok(&p) {
                    return p;
                }
            }
            assert!(Instant::now() < until, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills node `i` and returns the phase it was killed in and how long serve took to
    /// append to L and (when the table is still copying) complete a window after it.
    async fn kill_and_time(
        &self,
        cluster: &Cluster,
        i: usize,
        serve: &mut Child,
    ) -> (Phase, Duration) {
        let before = self.wait("progress before the kill", LIMIT, |_| true).await;
        let t = Instant::now();
        cluster.kill9(i);
        let after = self
            .wait("serve to write to L again after the kill", LIMIT, |p| {
                p.tail > before.tail
                    && (before.phase == Phase::Streaming || p.completed > before.completed)
            })
            .await;
        let took = t.elapsed();
        assert!(
            serve.try_wait().unwrap().is_none(),
            "serve ended after the kill"
        );
        eprintln!(
            "node {} killed in {:?}: serve continued after {took:?} (L {} -> {}, windows {} -> {})",
            i + 1,
            before.phase,
            before.tail,
            after.tail,
            before.completed,
            after.completed
        );
        (before.phase, took)
    }
}

const LIMIT: Duration = Duration::from_secs(120);

fn spawn_serve(state: &str, data: &std::path::Path, log: &std::path::Path) -> Child {
    backfill_tests::command()
        .args(["serve", "--owner", "galera-test", "--state", state])
        // Small replay transactions: the writer's 400-row groups are applied in chunks
        // under the sub-cursor across the node kills.
        .args(["--replay-batch-rows", "100"])
        .arg("--data-dir")
        .arg(data)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn backfill serve")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_survives_a_state_store_node_kill_mid_bootstrap_and_another_while_streaming() {
    init_tracing();
    let t0 = Instant::now();
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let formed = t0.elapsed();
    let proxy = Proxy::start(cluster.ports());
    let (source, target) = (harness::shared_source(), harness::shared_target());
    // The oracle reads both binlogs from before the tables exist.
    let marks = (Mark::now(source), Mark::now(target));
    let (sdb, ctl, tdb) = (
        source.fresh_db("galera_s"),
        source.fresh_db("galera_c"),
        target.fresh_db("galera_t"),
    );
    source.sql_in(&sdb, DDL);
    target.sql_in(&tdb, DDL);
    fill(source, &sdb, ROWS);
    let state_db = format!("galera_state_{}", std::process::id());
    // serve connects as an account with a password, which must never reach its log.
    cluster.node(0).sql(&format!(
        "CREATE USER bf@'127.0.0.1' IDENTIFIED BY '{SECRET}'; GRANT ALL ON *.* TO bf@'127.0.0.1'"
    ));
    let serve_url = cluster
        .url_db(&state_db)
        .replace("mysql://root@", &format!("mysql://bf:{SECRET}@"));
    let check_url = proxy.url_db(&state_db);
    let mut req = InstallRequest::new(
        serve_url.clone(),
        source.url(),
        TableName::new(&sdb, "t"),
        target.url(),
        TableName::new(&tdb, "t"),
    );
    (req.window_rows, req.page_rows, req.control_schema) = (1_000, 500, ctl.clone());
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    // After install (it refuses a target with triggers): the oracle sees every application.
    add_audit_triggers(target, &tdb);
    let pool = kernel::state::open(&check_url, &Default::default())
        .await
        .unwrap();
    backfill_tests::bf::store::commands::start(&pool, done.job_id)
        .await
        .unwrap();
    let identity = backfill_tests::bf::store::jobs::load_job(&pool, done.job_id)
        .await
        .unwrap()
        .source
        .identity;
    let w = World {
        stream: backfill_tests::bf::store::jobs::stream_name(&identity),
        journal: Journal::new(pool.clone()),
        pool: pool.clone(),
        id: (done.job_id.0, done.generation.0),
    };

    let writer = start_writer(source, &sdb);
    let dirs = tempfile::tempdir().unwrap();
    let (data, log) = (dirs.path().join("data"), dirs.path().join("serve.log"));
    let mut serve = spawn_serve(&serve_url, &data, &log);

    // Mid-bootstrap: a few windows applied, most still to copy.
    w.wait("two windows applied", LIMIT, |p| p.completed >= 2)
        .await;
    let (phase, first) = w.kill_and_time(&cluster, 0, &mut serve).await;
    assert_eq!(phase, Phase::Windows, "the first kill hits the bootstrap");
    tokio::task::block_in_place(|| cluster.restart(0));
    w.wait("STREAMING", LIMIT, |p| p.phase == Phase::Streaming)
        .await;
    let (phase, second) = w.kill_and_time(&cluster, 1, &mut serve).await;
    assert_eq!(phase, Phase::Streaming);
    tokio::task::block_in_place(|| cluster.restart(1));
    w.wait("more L after the rejoin", LIMIT, |_| true).await;

    let writes = stop_and_compare(writer, (&sdb, &tdb), &mut serve, &log).await;

    let p = w.wait("the final state", LIMIT, |_| true).await;
    assert_eq!(p.phase, Phase::Streaming);
    let l = evidence_holds(
        &w,
        &pool,
        p.tail,
        &check_url,
        data.to_str().unwrap(),
        done.job_id.0,
    )
    .await;
    exactly_once(&marks, [sdb, tdb, ctl], (done.job_id.0, done.generation.0));
    pool.close().await;
    eprintln!(
        "galera: cluster formed in {formed:?}; {ROWS} rows + writer committed {writes:?}; \
         serve continued {first:?} after the kill mid-bootstrap and {second:?} after the \
         kill while STREAMING; {l} L records; total {:?}",
        t0.elapsed()
    );
}

/// The exactly-once oracle over the source's and the target's binlogs from `marks`, of
/// `t` copied from `sdb` (control schema `ctl`) to `tdb` by (job, generation).
fn exactly_once(marks: &(Mark, Mark), [sdb, tdb, ctl]: [String; 3], (job, generation): (u64, u64)) {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let subject = Subject {
        key: primary_key(source, &sdb, "t"),
        sdb,
        tdb,
        table: "t".into(),
        ctl,
        job,
        generation,
        applied: Some("audit_log".into()),
    };
    let report = oracle::check(source, &marks.0, target, &marks.1, &subject);
    eprintln!("galera: exactly-once oracle: {report}");
    report.assert_exactly_once();
}

/// After the run: L's chain is whole up to D's tail with no group stored twice, the offline
/// audit passes and `verify` finds 0/0/0. Returns L's length.
async fn evidence_holds(
    w: &World,
    pool: &MySqlPool,
    tail: u64,
    check_url: &str,
    data_s: &str,
    job: u64,
) -> u64 {
    let l = kernel::log::verify_chain(pool, &w.stream).await.unwrap();
    assert_eq!(l, tail, "L's chain runs from 1 to D's tail without a hole");
    let (groups, distinct): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COUNT(DISTINCT end_file, end_pos) FROM capture_log \
         WHERE stream = ? AND end_pos IS NOT NULL",
    )
    .bind(&w.stream)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(groups, distinct, "no group end stored twice in L");

    let job = job.to_string();
    let (code, out, err) = backfill(&[
        "audit",
        "--state",
        check_url,
        "--data-dir",
        data_s,
        &job,
        "--format",
        "json",
    ])
    .parts();
    assert_eq!(code, 0, "audit: {out} {err}");
    let a: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(a["passed"], true, "{out}");
    let (code, out, err) =
        backfill(&["verify", "--state", check_url, &job, "--format", "json"]).parts();
    assert_eq!(code, 0, "verify: {out} {err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    for k in ["missing", "extra", "differing_fields"] {
        assert_eq!(v["cursor"]["tally"][k]["count"], 0, "{k}: {out}");
    }
    l
}

/// Stops the writer, waits until the target equals the source (compared by the servers
/// alone), checks serve still ran, stops it and reads its log: it failed over through its
/// host list and never printed the password. Returns what the writer committed.
async fn stop_and_compare(
    writer: Workload,
    (sdb, tdb): (&str, &str),
    serve: &mut Child,
    log: &std::path::Path,
) -> Counts {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let writes = writer.stop().await;
    let until = Instant::now() + LIMIT;
    let diff = loop {
        let d = compare(source, sdb, target, tdb, "t", &["id"]);
        if d.is_clean() || Instant::now() > until {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(diff.is_clean(), "target differs from source: {diff}");
    assert!(serve.try_wait().unwrap().is_none(), "serve ended");
    serve.kill().unwrap();
    serve.wait().unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    assert!(
        text.contains("state store node lost: new connections go to the next node"),
        "serve did not fail over through its host list:\n{text}"
    );
    assert!(
        !text.contains(SECRET),
        "the state store password is in serve's log"
    );

    writes
}
