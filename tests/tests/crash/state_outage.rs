//! serve rides out a state-store outage (issue 18 item 3): the real `backfill serve` runs
//! with its state store on a private server, which is SIGKILLed while the table is
//! STREAMING and kept down until serve's log shows its main loop retrying the state store
//! ("cannot read the state store; retrying"), then restarted. serve does not end, the table does not
//! pause, and the changes written meanwhile reach the target (independent comparison).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::install::{install, InstallRequest, TableName};
use backfill_tests::case::{fill, DDL};
use backfill_tests::compare::compare;
use backfill_tests::*;
use harness::{Server, ServerOpts};
use ledger::journal::Journal;
use ledger::record::Phase;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_waits_for_a_state_store_that_comes_back_instead_of_ending() {
    init_tracing();
    let state = Server::start_private(ServerOpts::target().server_id(77));
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let (sdb, ctl, tdb) = (
        source.fresh_db("outage_s"),
        source.fresh_db("outage_c"),
        target.fresh_db("outage_t"),
    );
    source.sql_in(&sdb, DDL);
    target.sql_in(&tdb, DDL);
    fill(source, &sdb, 2_000);
    let url = state.url_db("outage_state");
    let mut req = InstallRequest::new(
        url.clone(),
        source.url(),
        TableName::new(&sdb, "t"),
        target.url(),
        TableName::new(&tdb, "t"),
    );
    (req.window_rows, req.page_rows, req.control_schema) = (500, 250, ctl);
    let done = install(&req)
        .await
        .unwrap_or_else(|e| panic!("install: {e}"));
    let pool = kernel::state::open(&url, &Default::default())
        .await
        .unwrap();
    backfill_tests::bf::store::commands::start(&pool, done.job_id)
        .await
        .unwrap();
    let dirs = tempfile::tempdir().unwrap();
    let log = dirs.path().join("serve.log");
    let mut serve = backfill_tests::command()
        .args(["serve", "--owner", "outage-test", "--state", &url])
        .arg("--data-dir")
        .arg(dirs.path().join("data"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("spawn backfill serve");
    let j = Journal::new(pool.clone());
    let phase = || async {
        j.head(done.job_id, done.generation)
            .await
            .ok()
            .flatten()
            .map(|h| (h.record.phase, h.record.paused.is_some()))
    };
    wait_for_async("STREAMING", async || {
        phase().await == Some((Phase::Streaming, false))
    })
    .await;
    pool.close().await;

    let t = Instant::now();
    state.kill9();
    let retried = "cannot read the state store; retrying";
    wait_for("serve's main loop retrying the state store", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains(retried))
    })
    .await;
    assert!(
        serve.try_wait().unwrap().is_none(),
        "serve ended in the outage"
    );
    source.sql_in(&sdb, "UPDATE t SET v = 'in the outage' WHERE id <= 100");
    state.restart();
    let pool = kernel::state::open(&url, &Default::default())
        .await
        .unwrap();
    let j = Journal::new(pool.clone());
    let until = Instant::now() + WAIT_LIMIT;
    let diff = loop {
        let d = compare(source, &sdb, target, &tdb, "t", &["id"]);
        if d.is_clean() || Instant::now() > until {
            break d;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        diff.is_clean(),
        "the outage's changes did not reach the target: {diff}"
    );
    let head = j.head(done.job_id, done.generation).await.unwrap().unwrap();
    assert_eq!(head.record.phase, Phase::Streaming);
    assert!(head.record.paused.is_none(), "{:?}", head.record.paused);
    assert!(serve.try_wait().unwrap().is_none(), "serve ended");
    serve.kill().unwrap();
    serve.wait().unwrap();
    pool.close().await;
    eprintln!(
        "state store down and back: serve caught up {:?} after the kill",
        t.elapsed()
    );
}
