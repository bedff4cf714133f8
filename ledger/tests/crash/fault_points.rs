//! The process dies hard at the ledger's fault points (STYLE §7, I2/I4): right before and
//! right after the target COMMIT of a page and of a replay batch. Each test runs itself
//! again in a child copy of this test binary (`common::run_child`), where it only runs the
//! apply (`common::as_child`) with `BACKFILL_FAILPOINTS` set and exits with status 86 at the
//! point, like a kill -9 between two statements (in particular between the target COMMIT
//! and the J write). The parent then restarts the work: T decides, the effect exists
//! exactly once, and a re-apply after the crash runs no business DML.
use crate::common::*;
use kernel::change::{Change, Op};
use kernel::codec;
use ledger::apply::{self, Applied, Limits, ReplayGroup, Resolution};

fn groups() -> Vec<ReplayGroup> {
    (0..3u64)
        .map(|g| ReplayGroup {
            end: group_end("mysql-bin.000003", 100 * (g + 1), None),
            changes: (0..10u32)
                .map(|i| Change {
                    id: change_id(3, "s", "mysql-bin.000003", 100 * g + 10, i, Op::Insert),
                    before: None,
                    after: Some(row((g * 10 + u64::from(i) + 1) as i64, "c")),
                })
                .collect(),
        })
        .collect()
}

fn page_bytes(job: u64) -> Vec<u8> {
    codec::encode(&page(job, 0, 0, (1..=30).map(|i| row(i, "p")).collect()))
}

/// The work that the fault point interrupts, in the child: `page` or `groups`, the
/// database and the job.
async fn child(spec: Vec<String>, port: u16) {
    let (what, db, job) = (&spec[0], &spec[1], spec[2].parse::<u64>().unwrap());
    let ctx = ctx(db, job, 1);
    let mut c = apply::connect(&opts_at(port, db)).await.unwrap();
    if what == "page" {
        apply::apply_page(&mut c, &ctx, &page_bytes(job), Limits::default())
            .await
            .unwrap();
    } else {
        let limits = Limits {
            txn_rows: 10,
            ..Limits::default()
        };
        apply::apply_groups(&mut c, &ctx, None, &groups(), limits)
            .await
            .unwrap();
    }
}

fn run_child_at(what: &str, db: &str, job: u64, point: &str) {
    run_child(&format!("{what},{db},{job}"), point);
}

#[tokio::test]
async fn crash_after_page_commit_then_reapply_runs_no_dml() {
    as_child(child).await;
    let s = shared_target();
    let db = fresh_target(s, "lc_page_after");
    let ctx = ctx(&db, 61, 1);
    claimed(s, &db, &ctx).await;
    run_child_at("page", &db, 61, "ledger.page.after_commit");
    assert_eq!(dml_count(s, &db), 30);
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    assert_eq!(
        apply::resolve_page(&mut c, &ctx, &page_bytes(61))
            .await
            .unwrap(),
        Resolution::Committed
    );
    assert_eq!(
        apply::apply_page(&mut c, &ctx, &page_bytes(61), Limits::default())
            .await
            .unwrap(),
        Applied::AlreadyCommitted
    );
    assert_eq!(dml_count(s, &db), 30);
}

#[tokio::test]
async fn crash_before_page_commit_leaves_nothing_and_reapply_commits_once() {
    as_child(child).await;
    let s = shared_target();
    let db = fresh_target(s, "lc_page_before");
    let ctx = ctx(&db, 62, 1);
    claimed(s, &db, &ctx).await;
    run_child_at("page", &db, 62, "ledger.page.before_commit");
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    // The locking read waits until the server has rolled the dead session back.
    assert_eq!(
        apply::resolve_page(&mut c, &ctx, &page_bytes(62))
            .await
            .unwrap(),
        Resolution::NotCommitted
    );
    assert_eq!(
        apply::apply_page(&mut c, &ctx, &page_bytes(62), Limits::default())
            .await
            .unwrap(),
        Applied::Committed
    );
    assert_eq!(s.sql_in(&db, "SELECT COUNT(*) FROM t"), "30");
    assert_eq!(dml_count(s, &db), 30);
}

#[tokio::test]
async fn crash_between_replay_commits_resumes_from_t_cursor() {
    as_child(child).await;
    let s = shared_target();
    let db = fresh_target(s, "lc_groups");
    let ctx = ctx(&db, 63, 1);
    claimed(s, &db, &ctx).await;
    // Exit right after the second of three replay transactions committed.
    run_child_at("groups", &db, 63, "ledger.groups.after_commit@2");
    assert_eq!(dml_count(s, &db), 20);
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    let g = groups();
    assert_eq!(
        apply::resolve_groups(&mut c, &ctx, None, &g).await.unwrap(),
        Resolution::NotCommitted
    );
    // The restart batches differently: one transaction for everything.
    assert_eq!(
        apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
            .await
            .unwrap(),
        Applied::Committed
    );
    assert_eq!(dml_count(s, &db), 30);
    assert_eq!(
        apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
            .await
            .unwrap(),
        Applied::AlreadyCommitted
    );
    assert_eq!(dml_count(s, &db), 30);
}

#[tokio::test]
async fn crash_before_the_first_replay_commit_leaves_nothing_and_reapply_commits_once() {
    as_child(child).await;
    let s = shared_target();
    let db = fresh_target(s, "lc_groups_before");
    let ctx = ctx(&db, 64, 1);
    claimed(s, &db, &ctx).await;
    // Exit right before the first of three replay transactions commits.
    run_child_at("groups", &db, 64, "ledger.groups.before_commit");
    assert_eq!(dml_count(s, &db), 0);
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    let g = groups();
    // The locking read waits until the server has rolled the dead session back.
    assert_eq!(
        apply::resolve_groups(&mut c, &ctx, None, &g).await.unwrap(),
        Resolution::NotCommitted
    );
    assert_eq!(
        apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
            .await
            .unwrap(),
        Applied::Committed
    );
    assert_eq!(s.sql_in(&db, "SELECT COUNT(*) FROM t"), "30");
    assert_eq!(dml_count(s, &db), 30);
}
