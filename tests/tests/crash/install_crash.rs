//! `backfill install` killed at each of its durable writes (issue 34: install was no fault
//! point of any test). The real binary exits at every point of
//! `faults::install::ALL` (the control schema on the source, the target created by
//! `--create-target`, the job's rows in the state store); the same command is run again:
//! before the job's rows it installs (the control schema and an empty target it created
//! are taken as they are), after them it refuses by name (the table has a live job) and
//! the operator starts that job. Then the table is copied under a writer to STREAMING and
//! checked: the comparison with the source, the exactly-once oracle, `backfill audit`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults;
use backfill_tests::case::*;
use backfill_tests::oracle::Mark;
use backfill_tests::workload::Workload;
use backfill_tests::*;
use kernel::ids::{Generation, JobId};
use std::process::Output;

const ROWS: i64 = 900;

fn install(args: &[String], failpoints: &str) -> Output {
    backfill_tests::command()
        .args(args)
        .env(kernel::failpoint::ENV, failpoints)
        .env("RUST_LOG", "error")
        .output()
        .expect("run backfill install")
}

/// Installs `sdb.t` into the not yet existing `tdb.t` with the binary killed at `point`,
/// installs again, starts the job; the case of that job.
async fn killed_install(n: usize, point: &str) -> Case {
    let (source, target) = (harness::shared_source(), harness::shared_target());
    let marks = (Mark::now(source), Mark::now(target));
    let sdb = source.fresh_db(&format!("icr{n}_s"));
    let ctl = source.fresh_db(&format!("icr{n}_c"));
    let tdb = target.fresh_db(&format!("icr{n}_t"));
    source.sql_in(&sdb, DDL);
    fill(source, &sdb, ROWS);
    let state_db = format!("{tdb}_state");
    let args: Vec<String> = [
        "install",
        "--state",
        &target.url_db(&state_db),
        "--source",
        &source.url(),
        "--source-table",
        &format!("{sdb}.t"),
        "--target",
        &target.url(),
        "--target-table",
        &format!("{tdb}.t"),
        "--create-target",
        "--control-schema",
        &ctl,
        "--window-rows",
        "300",
        "--page-rows",
        "120",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = install(&args, &format!("{point}@1"));
    assert_eq!(
        out.status.code(),
        Some(kernel::failpoint::EXIT_CODE),
        "{point}: install did not exit at the point: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = install(&args, "");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&again.stdout),
        String::from_utf8_lossy(&again.stderr),
    );
    let job = if point == faults::install::AFTER_RECORDED {
        // The killed install had recorded the job: the same command now names it.
        assert_eq!(again.status.code(), Some(3), "{point}: {stdout} {stderr}");
        assert!(
            stderr.contains("already has live generation g1"),
            "{point}: {stderr}"
        );
        JobId(1)
    } else {
        assert_eq!(again.status.code(), Some(0), "{point}: {stderr}");
        JobId(stdout.trim().parse().expect("a job id on stdout"))
    };
    add_audit_triggers(target, &tdb);
    let pool = kernel::state::open(&target.url_db(&state_db), &Default::default())
        .await
        .unwrap();
    bf::store::commands::start(&pool, job).await.unwrap();
    Case {
        source,
        target,
        sdb,
        tdb,
        ctl,
        state_db,
        data: tempfile::tempdir().unwrap(),
        job,
        generation: Generation(1),
        pool,
        marks,
    }
}

async fn converges(n: usize, point: &'static str) {
    let c = killed_install(n, point).await;
    let w = Workload::start(c.source.url_db(&c.sdb), ROWS, 40 + n as u64);
    let mut s = keyed::serve_child(&c, &[], "");
    keyed::wait_streaming(&c, &mut s).await;
    let writes = w.stop().await;
    keyed::wait_clean(&c, &["id"], std::time::Duration::from_secs(90)).await;
    let _ = s.kill();
    let _ = s.wait();
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean(), "{point}: {d}");
    let r = c.oracle();
    r.assert_exactly_once();
    keyed::assert_audit_passes(&c);
    eprintln!(
        "install killed at {point}: installed again, {} writes, {} rows, oracle: {r}",
        writes.total(),
        d.rows
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn install_killed_at_each_durable_write_installs_again_or_names_the_job_and_converges() {
    let points = faults::install::ALL;
    assert_eq!(points.len(), 3);
    let [a, b, c] = points;
    tokio::join!(converges(0, a), converges(1, b), converges(2, c));
}
