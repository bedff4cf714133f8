//! `serve --verify-every` (issue 17 item 6) against real MariaDB: two tables STREAMING under
//! the real `backfill serve --verify-every 1s`. Both are verified in turn (their
//! `periodic_verifies` counts grow, the metrics count them). A row changed by hand on one
//! target is found: that table pauses with `verify_failed` naming the key, `status` and the
//! fleet view show it, while the clean table stays STREAMING and keeps being verified.
//! After the operator restores the row, `resume` re-verifies the table first (clean: the
//! finding is cleared) and it streams on, replaying a later source change.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::{status_cli, Case};
use backfill_tests::keyed::{self, Serving};
use backfill_tests::scrape::{free_addr, scrape, value};
use backfill_tests::{backfill, wait_for, wait_for_async};
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use ledger::record::{JournalRecord, Phase};

async fn head(c: &Case, job: JobId, g: Generation) -> Option<JournalRecord> {
    c.journal().head(job, g).await.unwrap().map(|h| h.record)
}

/// (verifies, last differing rows) of a job's periodic verifies, (0, 0) before the first.
fn verifies(c: &Case, job: JobId) -> (u64, u64) {
    let out = c.target.sql_in(
        &c.state_db,
        &format!(
            "SELECT verifies, last_differing FROM periodic_verifies WHERE job_id = {}",
            job.0
        ),
    );
    let mut it = out.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_changed_on_the_target_pauses_its_table_with_verify_failed_and_resume_re_verifies() {
    let _serial = backfill_tests::in_process().await;
    let c = Case::new("pverify", 300, 100, 50).await;
    let (clean, clean_g) = c.start_second_table(200).await;
    let (dirty, dirty_g) = (c.job, c.generation);
    let addr = free_addr();
    let args = ["--verify-every", "1s", "--metrics-addr", &addr];
    let mut serve = Serving(keyed::serve_child(&c, &args, ""));
    keyed::wait_streaming(&c, &mut serve.0).await;
    wait_for_async("the second table STREAMING", async || {
        head(&c, clean, clean_g)
            .await
            .is_some_and(|h| h.phase == Phase::Streaming)
    })
    .await;
    // Both are verified in turn, clean.
    wait_for("both tables verified", || {
        verifies(&c, dirty).0 >= 1 && verifies(&c, clean).0 >= 1
    })
    .await;
    assert_eq!(verifies(&c, dirty).1, 0, "clean so far");

    // An operator changes a row on the target by hand.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'by hand' WHERE id = 7");
    wait_for_async("the changed table paused", async || {
        head(&c, dirty, dirty_g).await.unwrap().paused.is_some()
    })
    .await;
    let h = head(&c, dirty, dirty_g).await.unwrap();
    let p = h.paused.clone().unwrap();
    assert_eq!(p.code, DefiniteCode::VerifyFailed, "{p:?}");
    assert!(p.message.contains("id=7"), "names the key: {p:?}");
    assert!(p.message.contains("column v"), "names the column: {p:?}");
    assert_eq!(h.phase, Phase::Streaming, "paused in STREAMING");
    assert_eq!(verifies(&c, dirty).1, 1, "one differing row recorded");

    // status shows the finding and the periodic verifies; the fleet view the pause.
    let state = c.state_url();
    status_and_the_fleet_view_show_the_pause(&state, dirty);

    // The clean table stays STREAMING and keeps being verified.
    let before = verifies(&c, clean).0;
    wait_for("the clean table verified again", || {
        verifies(&c, clean).0 >= before + 2
    })
    .await;
    let h = head(&c, clean, clean_g).await.unwrap();
    assert!(h.paused.is_none() && h.phase == Phase::Streaming, "{h:?}");
    assert_eq!(verifies(&c, clean).1, 0);
    let last = c.target.sql_in(
        &c.state_db,
        &format!(
            "SELECT last_rows, last_ms FROM periodic_verifies WHERE job_id = {}",
            clean.0
        ),
    );
    eprintln!("periodic verify of the clean table (rows, ms): {last}");
    the_metrics_count_the_verifies_and_the_failure(&addr, before);

    // The operator restores the row and resumes: re-verified first, then it streams on.
    c.target
        .sql_in(&c.tdb, "UPDATE t SET v = 'v7' WHERE id = 7");
    let job = dirty.0.to_string();
    let (code, out, err) = backfill(&["resume", "--state", &state, &job]).parts();
    assert_eq!(code, 0, "{out}{err}");
    let failed_at = verifies(&c, dirty).0;
    wait_for("the resumed table re-verified clean", || {
        let (n, differing) = verifies(&c, dirty);
        n > failed_at && differing == 0
    })
    .await;
    let h = head(&c, dirty, dirty_g).await.unwrap();
    assert!(h.paused.is_none() && h.phase == Phase::Streaming, "{h:?}");
    let finding = c.target.sql_in(
        &c.state_db,
        &format!("SELECT COUNT(*) FROM field_checks WHERE job_id = {job} AND origin = 'verify'"),
    );
    assert_eq!(finding.trim(), "0", "a clean verify clears the finding");
    c.source
        .sql_in(&c.sdb, "UPDATE t SET v = 'later' WHERE id = 9");
    wait_for("a later change replayed", || {
        c.target
            .sql_in(&c.tdb, "SELECT v FROM t WHERE id = 9")
            .trim()
            == "later"
    })
    .await;
    let d = keyed::wait_clean(&c, &["id"], std::time::Duration::from_secs(60)).await;
    assert!(d.is_clean(), "{d}");
}

fn status_and_the_fleet_view_show_the_pause(state: &str, dirty: JobId) {
    let text = status_cli(&["--state", state, &dirty.0.to_string()]);
    assert!(text.contains("PAUSED(STREAMING)"), "{text}");
    assert!(text.contains("verify_failed"), "{text}");
    assert!(text.contains("periodic verify"), "{text}");
    assert!(text.contains("id=7"), "{text}");
    let fleet = status_cli(&["--state", state, "--in-state", "PAUSED"]);
    // The serve line is followed by one line per server it holds connections to.
    let lines: Vec<&str> = fleet
        .lines()
        .filter(|l| !l.starts_with("  connections to the "))
        .collect();
    assert_eq!(
        lines.len(),
        1 + 1 + 1 + 1,
        "header, one job, summary, serve: {fleet}"
    );
    assert!(fleet.contains("  connections to the source "), "{fleet}");
    assert!(
        lines[1].trim_start().starts_with(&format!("{} ", dirty.0)),
        "{fleet}"
    );
    assert!(lines[1].contains("verify_failed"), "{fleet}");
    assert!(lines[2].starts_with("1 of 2 jobs: 1 PAUSED"), "{fleet}");
}

fn the_metrics_count_the_verifies_and_the_failure(addr: &str, before: u64) {
    let body = scrape(addr).expect("metrics answer");
    let total = value(&body, "backfill_verifies_total").expect("backfill_verifies_total");
    assert!(total >= (before + 2 + 2) as f64, "{total}: {body}");
    assert_eq!(value(&body, "backfill_verify_failures_total"), Some(1.0));
    assert_eq!(
        value(&body, "backfill_verify_differing_rows_total"),
        Some(1.0)
    );
    assert_eq!(
        value(&body, "backfill_pauses_total{reason=\"verify_failed\"}"),
        Some(1.0)
    );
}
