//! Jobs installed by the build before issue 15 (its read views returned text re-encoded
//! as utf8mb4; migration 0073 records them with `page_text = 'utf8mb4'`): one stopped
//! inside its windows pauses `precondition` naming its latin1 column and the fix, before
//! any old page could be written as the column's own bytes; one not started yet copies as
//! any other job (its pages are all read by this build) and is marked `stored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::bf::table::faults::window;
use backfill_tests::case::Case;
use backfill_tests::keyed::{self, Serving};
use kernel::error::DefiniteCode;
use ledger::record::Phase;

const DDL: &str = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, \
                   v VARCHAR(20) CHARACTER SET latin1 NOT NULL) ENGINE=InnoDB";

fn fill() -> Vec<String> {
    let rows: Vec<String> = (1..=40).map(|i| format!("({i}, 'Ærø-{i}')")).collect();
    vec![format!(
        "SET NAMES utf8mb4; INSERT INTO t (id, v) VALUES {}",
        rows.join(", ")
    )]
}

async fn mark_old(c: &Case) {
    sqlx::query("UPDATE jobs SET page_text = 'utf8mb4' WHERE job_id = ?")
        .bind(c.job.0)
        .execute(&c.pool)
        .await
        .unwrap();
}

async fn page_text(c: &Case) -> String {
    sqlx::query_scalar("SELECT page_text FROM jobs WHERE job_id = ?")
        .bind(c.job.0)
        .fetch_one(&c.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_job_inside_its_windows_pauses_before_writing_an_old_page() {
    let _serial = backfill_tests::in_process().await;
    let c = Case::of_table("legacy_w", DDL, &fill(), 10, 3).await;
    assert_eq!(
        page_text(&c).await,
        "stored",
        "a new install reads stored bytes"
    );
    let fp = format!("{}@2", window::MID_PAGES);
    let code = backfill_tests::case::wait(keyed::serve_child(&c, &[], &fp), None);
    assert_eq!(code, Some(kernel::failpoint::EXIT_CODE));
    assert_eq!(c.head().await.phase, Phase::Windows);
    let applied_before = c.target_count();
    mark_old(&c).await;
    let code = backfill_tests::case::wait(keyed::serve_child(&c, &["--exit-when-idle"], ""), None);
    assert_eq!(code, Some(0), "serve goes idle on the paused job");
    let p = c.head().await.paused.expect("paused");
    assert_eq!(p.code, DefiniteCode::Precondition, "{p:?}");
    assert!(p.message.contains("`v` (latin1)"), "{p:?}");
    assert!(p.message.contains("re-add"), "{p:?}");
    assert_eq!(
        c.target_count(),
        applied_before,
        "no page was applied after"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_job_not_started_copies_exactly_and_is_marked_stored() {
    let _serial = backfill_tests::in_process().await;
    let c = Case::of_table("legacy_i", DDL, &fill(), 10, 3).await;
    mark_old(&c).await;
    let mut serve = Serving(keyed::serve_child(&c, &[], ""));
    keyed::wait_streaming(&c, &mut serve.0).await;
    drop(serve);
    assert_eq!(page_text(&c).await, "stored");
    let d = keyed::diff(&c, &["id"]);
    assert!(d.is_clean() && d.rows == 40, "{d}");
}
