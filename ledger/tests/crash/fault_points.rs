//! The process dies hard at the ledger's fault points (STYLE §7, I2/I4): right before and
//! right after the target COMMIT of a page and of a replay batch. Each test runs itself
//! again in a child copy of this test binary (`common::run_child`), where it only runs the
//! apply (`common::as_child`) with `BACKFILL_FAILPOINTS` set and exits with status 86 at the
//! point, like a kill -9 between two statements (in particular between the target COMMIT
//! and the J write). The parent then restarts the work: T decides, the effect exists
//! exactly once, and a re-apply after the crash runs no business DML. The replay groups
//! insert, update, delete, reinsert and change keys, and the target is compared value by
//! value (`dump`, as the server prints it) with a model computed from the groups in the
//! test (a map of key to row, no `ledger` code), not by counts.
use crate::common::*;
use kernel::change::{Change, Op};
use kernel::codec;
use ledger::apply::{self, Applied, Limits, ReplayGroup, Resolution};
use std::collections::BTreeMap;

/// One change of a replay group: (op, before (id, name), after (id, name)).
type Step = (Op, Option<(i64, &'static str)>, Option<(i64, &'static str)>);

const INS: Op = Op::Insert;
const UPD: Op = Op::Update;
const DEL: Op = Op::Delete;

/// Three replay groups of 10 changes each (one replay transaction each with
/// `txn_rows: 10`): inserts; then updates, deletes, a key change and inserts; then
/// updates of updated rows, deletes (of the changed key too), a reinsert of a deleted key,
/// another key change and inserts.
fn steps() -> [Vec<Step>; 3] {
    let ins = |id, n| (INS, None, Some((id, n)));
    let upd = |id, from, to| (UPD, Some((id, from)), Some((id, to)));
    let del = |id, n| (DEL, Some((id, n)), None);
    [
        (1..=10).map(|id| ins(id, "c")).collect(),
        vec![
            upd(1, "c", "u1"),
            upd(2, "c", "u1"),
            upd(3, "c", "u1"),
            upd(4, "c", "u1"),
            del(5, "c"),
            del(6, "c"),
            del(7, "c"),
            (UPD, Some((8, "c")), Some((108, "k"))),
            ins(11, "c"),
            ins(12, "c"),
        ],
        vec![
            upd(1, "u1", "u2"),
            upd(2, "u1", "u2"),
            del(3, "u1"),
            del(108, "k"),
            ins(5, "r"),
            (UPD, Some((11, "c")), Some((111, "k"))),
            ins(13, "c"),
            ins(14, "c"),
            ins(15, "c"),
            ins(16, "c"),
        ],
    ]
}

fn groups() -> Vec<ReplayGroup> {
    steps()
        .iter()
        .zip(0u64..)
        .map(|(changes, g)| ReplayGroup {
            end: group_end("mysql-bin.000003", 100 * (g + 1), None),
            changes: changes
                .iter()
                .zip(0u32..)
                .map(|((op, before, after), i)| Change {
                    id: change_id(3, "s", "mysql-bin.000003", 100 * g + 10, i, *op),
                    before: before.map(|(id, n)| row(id, n)),
                    after: after.map(|(id, n)| row(id, n)),
                })
                .collect(),
        })
        .collect()
}

/// The target the first `n` groups make, computed here from the steps alone (no
/// `ledger` code): key -> the row as `dump` prints it, in key order.
fn model(n: usize) -> String {
    let mut rows = BTreeMap::new();
    for (_, before, after) in steps().iter().take(n).flatten() {
        if let Some((id, _)) = before {
            assert!(
                rows.remove(id).is_some(),
                "the model changes key {id} it holds"
            );
        }
        if let Some((id, name)) = after {
            assert!(rows.insert(*id, *name).is_none(), "key {id} inserted twice");
        }
    }
    render(&rows)
}

/// Rows `key -> name` of [`row`] as `dump` prints them.
fn render(rows: &BTreeMap<i64, &str>) -> String {
    rows.iter()
        .map(|(id, name)| {
            format!(
                "{id}\t{name}\t{id}.125\t2026-10-18 01:02:03.654321\t\
                 2024-02-29 12:34:56.789012\t0001FF00"
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rows of [`page_bytes`] as `dump` prints them.
fn page_model() -> String {
    render(&(1..=30).map(|i| (i, "p")).collect())
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
    assert_eq!(
        dump(s, &db),
        page_model(),
        "the page, committed before the exit"
    );
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
    assert_eq!(dump(s, &db), page_model(), "the page, once");
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
    assert_eq!(dump(s, &db), model(2), "the first two groups, exactly");
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
    assert_eq!(dump(s, &db), model(3), "every group, once");
    let dml = dml_count(s, &db);
    assert_eq!(
        apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
            .await
            .unwrap(),
        Applied::AlreadyCommitted
    );
    assert_eq!(dump(s, &db), model(3));
    assert_eq!(dml_count(s, &db), dml, "the re-apply ran no business DML");
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
    assert_eq!(dump(s, &db), model(0), "nothing of the dead transaction");
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    let g = groups();
    // The locking read waits until the server has rolled the dead session back.
    assert_eq!(
        apply::resolve_groups(&mut c, &ctx, None, &g).await.unwrap(),
        Resolution::NotCommitted
    );
    assert_eq!(dump(s, &db), model(0));
    assert_eq!(
        apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
            .await
            .unwrap(),
        Applied::Committed
    );
    assert_eq!(dump(s, &db), model(3), "every group, once");
}
