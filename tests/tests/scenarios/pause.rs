//! PAUSED(reason, context) and `backfill resume` (issue 7, DESIGN §8) against real
//! MariaDB: a definite source error pauses the table in J with its reason, serve restarts
//! keep it paused, status names the reason and its runbook; after the operator fixes the
//! cause, `resume` (recorded with serve down) continues from the persisted context and the
//! table completes its windows with exact rows.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::case::*;
use backfill_tests::*;
use kernel::error::DefiniteCode;
use ledger::record::Phase;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn schema_change_pauses_with_reason_and_an_unfixed_resume_pauses_again() {
    let _serial = in_process().await;
    let c = Case::new("pause_ddl", 300, 100, 50).await;
    // A DDL between install and B: the re-check after B pauses the table.
    c.source
        .sql_in(&c.sdb, "ALTER TABLE t ADD COLUMN extra INT NULL");
    let out = c.serve(None).await;
    assert!(out.starts_with("paused"), "paused: {out}");
    let head = c.head().await;
    let reason = head.paused.clone().expect("J records the pause");
    assert_eq!(reason.code, DefiniteCode::SchemaChanged);
    assert_eq!(head.phase, Phase::Installed, "the phase stays");
    // A restart without resume keeps it paused.
    let out = c.serve(None).await;
    assert!(out.starts_with("paused"), "still paused: {out}");
    let state = c.state_url();
    let job = c.job.0.to_string();
    let (code, text, err) = backfill(&["status", "--state", &state, &job]).parts();
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("PAUSED"), "{text}");
    assert!(
        text.contains("runbooks/"),
        "status names the runbook: {text}"
    );
    // Resume without fixing the cause: the same definite error pauses it again.
    let (code, text, err) = backfill(&["resume", "--state", &state, &job]).parts();
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("resume recorded"), "{text}");
    let out = c.serve(None).await;
    assert!(
        out.starts_with("paused: schema_changed"),
        "paused again: {out}"
    );
    assert_eq!(c.target_count(), 0);
    let n = c.target.sql_in(
        &c.state_db,
        "SELECT COUNT(*) FROM job_commands WHERE command = 'resume'",
    );
    assert_eq!(n, "0", "the resume was consumed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fixed_cause_resumes_from_the_persisted_context_with_exact_rows() {
    let _serial = in_process().await;
    // XA RECOVER is server-wide: a private source keeps the other tests out of it.
    let src: &'static harness::Server = Box::leak(Box::new(harness::Server::start_private(
        harness::ServerOpts::source(),
    )));
    let c = Case::on(src, "pause_xa", 500, 100, 50).await;
    c.source.sql_in(
        &c.sdb,
        "CREATE TABLE other (id INT PRIMARY KEY) ENGINE=InnoDB;
         XA START 'px'; INSERT INTO other VALUES (1); XA END 'px'; XA PREPARE 'px';",
    );
    let out = c.serve(None).await;
    assert!(out.starts_with("paused: precondition"), "{out}");
    // The operator fixes the cause, then resumes with serve down.
    c.source.sql("XA ROLLBACK 'px'");
    let state = c.state_url();
    let (code, _, err) = backfill(&["resume", "--state", &state, &c.job.0.to_string()]).parts();
    assert_eq!(code, 0, "{err}");
    let out = c.serve(None).await;
    assert_eq!(out, "windows_done");
    let head = c.head().await;
    assert!(head.paused.is_none());
    assert_eq!(head.completed as usize, c.plan().await.len());
    c.assert_target_equals_source();
    assert_target_is_finals(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resume_and_cancel_commands_refuse_unknown_and_cancelled_jobs() {
    let _serial = in_process().await;
    let c = Case::unstarted("pause_cmds", 10, 100, 50).await;
    let state = c.state_url();
    let (code, _, _) = backfill(&["resume", "--state", &state, "999999"]).parts();
    assert_eq!(code, 2, "unknown job is a usage error");
    let (code, text, err) = backfill(&["cancel", "--state", &state, &c.job.0.to_string()]).parts();
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("CANCELING"), "{text}");
    let out = c.serve(None).await;
    assert_eq!(out, "cancelled");
    let (code, _, _) = backfill(&["resume", "--state", &state, &c.job.0.to_string()]).parts();
    assert_eq!(code, 2, "a cancelled job cannot be resumed");
    let (code, text, _) = backfill(&[
        "cancel",
        "--state",
        &state,
        &c.job.0.to_string(),
        "--format",
        "json",
    ])
    .parts();
    assert_eq!(code, 0);
    assert!(text.contains("\"already_cancelled\":true"), "{text}");
}

/// A job whose task keeps failing transiently (its target host refuses connections) is
/// not restarted forever: after `task_retries` failures in a row J records a pause with
/// `retries_exhausted` naming the last error, a restarted serve keeps it paused, and once
/// the target is reachable again a resume continues the job to every window applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_failing_transiently_past_its_budget_pauses_with_the_last_error() {
    let _serial = in_process().await;
    let c = Case::new("pause_budget", 300, 100, 50).await;
    let (recorded,): (String,) = sqlx::query_as("SELECT target_url FROM jobs WHERE job_id = ?")
        .bind(c.job.0)
        .fetch_one(&c.pool)
        .await
        .unwrap();
    // Nothing listens on port 1: every connection to the target is refused (transient).
    sqlx::query("UPDATE jobs SET target_url = 'mysql://root@127.0.0.1:1/x' WHERE job_id = ?")
        .bind(c.job.0)
        .execute(&c.pool)
        .await
        .unwrap();
    let out = c
        .serve_tuned(Duration::from_secs(120), |cfg| cfg.task_retries = 2)
        .await;
    assert!(out.starts_with("paused: retries_exhausted"), "{out}");
    let p = c.head().await.paused.expect("J records the pause");
    assert_eq!(p.code, DefiniteCode::RetriesExhausted);
    assert!(
        p.message.contains("2 transient failures in a row"),
        "{}",
        p.message
    );
    assert!(
        p.message.contains("Connection refused"),
        "names the last error: {}",
        p.message
    );
    let again = c
        .serve_tuned(Duration::from_secs(60), |cfg| cfg.task_retries = 2)
        .await;
    assert!(again.starts_with("paused: retries_exhausted"), "{again}");
    // The target is back: the operator resumes and the job completes its windows.
    sqlx::query("UPDATE jobs SET target_url = ? WHERE job_id = ?")
        .bind(&recorded)
        .bind(c.job.0)
        .execute(&c.pool)
        .await
        .unwrap();
    backfill_tests::bf::store::commands::resume(&c.pool, c.job)
        .await
        .unwrap();
    let done = c
        .serve_tuned(Duration::from_secs(120), |cfg| cfg.task_retries = 2)
        .await;
    assert_eq!(done, "windows_done");
    assert_eq!(c.target_count(), 300);
}
