//! Key-partitioned replay against a real MariaDB target (issue 6): P = 1, 2, 4 give the
//! same rows as `apply_groups`; a process killed after some parts committed (part 0's
//! COMMIT never sent) converges when restarted with another P and txn_rows, with per-key
//! audit-trigger counts equal to a serial replay (no business DML twice); a concurrent
//! stale applier is refused by the part cursors' CAS; a STATEMENT-logging session falls
//! back from READ COMMITTED.
use crate::common::*;
use harness::Server;
use kernel::change::{Change, GroupEnd, Op};
use kernel::codec;
use kernel::value::Row;
use ledger::apply::{self, Applied, Limits, ReplayGroup};
use ledger::parts;
use ledger::target::TargetCtx;
use mysql_async::prelude::Queryable;

/// A target `t` whose audit triggers count business DML per key (one counter row per
/// key, so parallel parts do not contend on one counter row).
fn audited_target(s: &Server, prefix: &str) -> String {
    let db = s.fresh_db(prefix);
    s.sql_in(&db, DDL);
    s.sql_in(
        &db,
        "CREATE TABLE dml_audit_k (id BIGINT NOT NULL PRIMARY KEY, n BIGINT NOT NULL) ENGINE=InnoDB;
         INSERT INTO dml_audit_k VALUES (-1, 0);
         CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW INSERT INTO dml_audit_k VALUES (NEW.id, 1) ON DUPLICATE KEY UPDATE n = n + 1;
         CREATE TRIGGER t_bu BEFORE UPDATE ON t FOR EACH ROW INSERT INTO dml_audit_k VALUES (NEW.id, 1) ON DUPLICATE KEY UPDATE n = n + 1;
         CREATE TRIGGER t_bd BEFORE DELETE ON t FOR EACH ROW INSERT INTO dml_audit_k VALUES (OLD.id, 1) ON DUPLICATE KEY UPDATE n = n + 1;",
    );
    db
}

fn audit(s: &Server, db: &str) -> String {
    s.sql_in(
        db,
        "SELECT id, n FROM dml_audit_k WHERE id <> -1 ORDER BY id",
    )
}

fn end(g: usize) -> GroupEnd {
    group_end(
        "mysql-bin.000009",
        1000 * (g as u64 + 1),
        Some(g as u64 + 1),
    )
}

fn change(g: usize, i: usize, op: Op, before: Option<Row>, after: Option<Row>) -> Change {
    let event_pos = 1000 * g as u64 + 4;
    Change {
        id: change_id(9, "src", "mysql-bin.000009", event_pos, i as u32, op),
        before,
        after,
    }
}

enum W {
    Ins(i64),
    Upd(i64, i64),
    Del(i64),
}

fn groups(spec: &[Vec<W>]) -> Vec<ReplayGroup> {
    spec.iter()
        .enumerate()
        .map(|(g, ws)| ReplayGroup {
            end: end(g),
            changes: ws
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    let name = format!("g{g}c{i}");
                    match *w {
                        W::Ins(k) => change(g, i, Op::Insert, None, Some(row(k, &name))),
                        W::Upd(a, b) => {
                            change(g, i, Op::Update, Some(row(a, "old")), Some(row(b, &name)))
                        }
                        W::Del(k) => change(g, i, Op::Delete, Some(row(k, "old")), None),
                    }
                })
                .collect(),
        })
        .collect()
}

/// Inserts, updates, key changes onto live and absent keys, deletes of absent keys and
/// several changes of one key in one group, from a fixed pseudo-random sequence.
fn rich() -> Vec<ReplayGroup> {
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n) as i64
    };
    let spec: Vec<Vec<W>> = (0..30)
        .map(|_| {
            (0..1 + next(14))
                .map(|_| match next(5) {
                    0 => W::Ins(1 + next(90)),
                    1 | 2 => {
                        let k = 1 + next(90);
                        W::Upd(k, k)
                    }
                    3 => W::Upd(1 + next(90), 1 + next(90)),
                    _ => W::Del(1 + next(90)),
                })
                .collect()
        })
        .collect();
    groups(&spec)
}

/// Every key changed at most once (inserts of new keys, updates and key changes of
/// baseline keys, deletes of baseline keys): per-key DML does not depend on how changes
/// were folded into transactions, so any serial replay counts the same.
fn distinct() -> Vec<ReplayGroup> {
    let spec: Vec<Vec<W>> = (0..12)
        .map(|g| {
            (0..10)
                .map(|i| {
                    let n = (g * 10 + i) as i64;
                    match i % 4 {
                        0 => W::Ins(1000 + n),
                        1 => W::Upd(1 + n, 1 + n),
                        2 => W::Upd(1 + n, 2000 + n),
                        _ => W::Del(1 + n),
                    }
                })
                .collect()
        })
        .collect();
    groups(&spec)
}

/// Applies rows 1..=n as the FINAL page (none when n = 0: an empty target).
async fn baseline(s: &Server, db: &str, ctx: &TargetCtx, n: i64) {
    let mut c = claimed(s, db, ctx).await;
    if n == 0 {
        return;
    }
    let p = page(ctx.job.0, 0, 0, (1..=n).map(|k| row(k, "base")).collect());
    apply::apply_page(&mut c, ctx, &codec::encode(&p), Limits::default())
        .await
        .unwrap();
}

async fn conns(s: &Server, db: &str, n: usize) -> Vec<mysql_async::Conn> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.push(apply::connect(&opts(s, db)).await.unwrap());
    }
    v
}

fn limits(txn_rows: usize) -> Limits {
    Limits {
        txn_rows,
        ..Limits::default()
    }
}

/// Serial reference: `apply_groups` on one connection into a fresh target.
async fn serial(
    s: &Server,
    job: u64,
    g: &[ReplayGroup],
    base: i64,
    txn_rows: usize,
) -> (String, String, String) {
    let db = audited_target(s, "pa_serial");
    let ctx = ctx(&db, job, 1);
    baseline(s, &db, &ctx, base).await;
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    apply::apply_groups(&mut c, &ctx, None, g, limits(txn_rows))
        .await
        .unwrap();
    (dump(s, &db), audit(s, &db), cursor(s, &db))
}

fn cursor(s: &Server, db: &str) -> String {
    s.sql_in(
        db,
        "SELECT file, pos, gtid, rows_done, HEX(group_digest) FROM _backfill_ledger_cursor",
    )
}

#[tokio::test]
async fn one_two_and_four_parts_give_the_rows_of_apply_groups() {
    let s = shared_target();
    let g = rich();
    for (base, job) in [(60i64, 70u64), (0, 71)] {
        let want = serial(s, job, &g, base, 9).await;
        assert!(want.0.lines().count() > 20, "{}", want.0);
        for p in [1usize, 2, 4] {
            let db = audited_target(s, &format!("pa_p{p}"));
            let ctx = ctx(&db, job, 1);
            baseline(s, &db, &ctx, base).await;
            let mut cs = conns(s, &db, p).await;
            let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits(9))
                .await
                .unwrap();
            assert_eq!(r, Applied::Committed);
            // Same rows, same per-key business DML (same transactions, same folding), same
            // main cursor.
            assert_eq!(
                (dump(s, &db), audit(s, &db), cursor(s, &db)),
                want,
                "P = {p}"
            );
            let parts_rows: usize = s
                .sql_in(&db, "SELECT COUNT(*) FROM _backfill_ledger_cursor_parts")
                .parse()
                .unwrap();
            assert!(parts_rows < p, "P = {p}: {parts_rows} part rows");
            if p > 1 {
                assert!(parts_rows > 0, "P = {p}: no part ever wrote its cursor");
            }
            // Again, in other batches and other P: nothing runs.
            for (lo, q) in [(0usize, 2usize), (10, 4), (29, 1)] {
                let prev = lo.checked_sub(1).map(|i| g[i].end.clone());
                let mut cs = conns(s, &db, q).await;
                let r =
                    parts::apply_groups_parts(&mut cs, &ctx, prev.as_ref(), &g[lo..], limits(4))
                        .await
                        .unwrap();
                assert_eq!(r, Applied::AlreadyCommitted);
            }
            assert_eq!(audit(s, &db), want.1);
        }
    }
}

/// In the child: a partitioned apply of `distinct()` that a fault point interrupts (the
/// database, the job, P and txn_rows).
async fn child(spec: Vec<String>, port: u16) {
    let db = &spec[0];
    let (job, p, txn_rows) = (
        spec[1].parse().unwrap(),
        spec[2].parse().unwrap(),
        spec[3].parse().unwrap(),
    );
    let o = opts_at(port, db);
    let mut cs = Vec::new();
    for _ in 0..p {
        cs.push(apply::connect(&o).await.unwrap());
    }
    let ctx = ctx(db, job, 1);
    parts::apply_groups_parts(&mut cs, &ctx, None, &distinct(), limits(txn_rows))
        .await
        .unwrap();
}

fn run_child_at(db: &str, job: u64, p: usize, txn_rows: usize, point: &str) {
    run_child(&format!("{db},{job},{p},{txn_rows}"), point);
}

fn part_rows(s: &Server, db: &str) -> String {
    s.sql_in(
        db,
        "SELECT part, parts, pos, rows_done FROM _backfill_ledger_cursor_parts ORDER BY part",
    )
}

#[tokio::test]
async fn killed_after_some_parts_committed_converges_with_another_p_without_second_dml() {
    as_child(child).await;
    let s = shared_target();
    let g = distinct();
    let want = serial(s, 72, &g, 200, 1000).await;
    let db = audited_target(s, "pa_crash");
    let ctx = ctx(&db, 72, 1);
    baseline(s, &db, &ctx, 200).await;
    // P = 4, 25-change transactions: killed after the 2nd part COMMIT of the first one.
    run_child_at(&db, 72, 4, 25, "ledger.parts.after_part_commit@2");
    assert_eq!(cursor(s, &db), "");
    let rows = part_rows(s, &db);
    // The second part COMMIT exits (parts run ahead of part 0: one part may have
    // committed two transactions; a third COMMIT may have been answered just before).
    assert!((1..=3).contains(&rows.lines().count()), "{rows}");
    assert!(
        rows.lines()
            .all(|l| l.ends_with("\t4\t2000\t0") || l.ends_with("\t4\t4000\t0")),
        "{rows}"
    );
    // Restart with P = 3 and 7-change transactions: scheme 4 is finished first (part 3
    // shares connection 0 with part 0); killed again right before part 0's COMMIT of its
    // first transaction.
    run_child_at(&db, 72, 3, 7, "ledger.parts.before_main_commit");
    assert_eq!(cursor(s, &db), "");
    let rows = part_rows(s, &db);
    assert!(rows.lines().all(|l| l.contains("\t4\t")), "{rows}");
    // And now P = 1 with 13-change transactions on a fresh process's connection: the four
    // parts of scheme 4 run one after the other on it until main caught up, then P = 1.
    let mut cs = conns(s, &db, 1).await;
    let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits(13))
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!(dump(s, &db), want.0);
    assert_eq!(audit(s, &db), want.1, "a business DML ran twice (or never)");
    assert_eq!(cursor(s, &db), want.2);
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    assert_eq!(
        apply::resolve_groups(&mut c, &ctx, None, &g).await.unwrap(),
        apply::Resolution::Committed
    );
}

#[tokio::test]
async fn a_stale_applier_racing_a_live_one_is_refused_by_the_part_cas() {
    let s = shared_target();
    let g = distinct();
    let want = serial(s, 73, &g, 200, 1000).await;
    let db = audited_target(s, "pa_race");
    let ctx = ctx(&db, 73, 1);
    baseline(s, &db, &ctx, 200).await;
    // Two appliers with the same token and the same P (other txn_rows) plan from the
    // same T at once (a lost attempt still running next to its retry): whichever writes
    // a cursor first wins it; the other's CAS matches no row after the winner's COMMIT
    // and it re-plans. (Appliers of DIFFERENT P at once are not serialised by the part
    // rows: the lease and the KILL-confirm rule keep one applier per table-generation.)
    let mut a = conns(s, &db, 3).await;
    let mut b = conns(s, &db, 3).await;
    let (ra, rb) = tokio::join!(
        parts::apply_groups_parts(&mut a, &ctx, None, &g, limits(10)),
        parts::apply_groups_parts(&mut b, &ctx, None, &g, limits(7)),
    );
    assert!(ra.is_ok() && rb.is_ok(), "{ra:?} {rb:?}");
    assert_eq!(dump(s, &db), want.0);
    assert_eq!(audit(s, &db), want.1, "a business DML ran twice");
    assert_eq!(cursor(s, &db), want.2);
    // The exact CAS of a part transaction planned before the end now matches no row: a
    // COMMIT of such a transaction landing late could not have written anything.
    let before = part_rows(s, &db);
    let mut c = apply::connect(&opts(s, &db)).await.unwrap();
    c.query_drop(
        "UPDATE _backfill_ledger_cursor_parts SET pos = 1 WHERE part = 1 AND pos = 1000 AND rows_done = 0",
    )
    .await
    .unwrap();
    assert_eq!(c.affected_rows(), 0);
    assert_eq!(part_rows(s, &db), before);
}

#[tokio::test]
async fn statement_binlog_sessions_fall_back_from_read_committed() {
    let s = shared_target();
    let g = rich();
    let want = serial(s, 74, &g, 60, 9).await;
    let db = audited_target(s, "pa_stmt");
    let ctx = ctx(&db, 74, 1);
    baseline(s, &db, &ctx, 60).await;
    let mut cs = conns(s, &db, 2).await;
    for c in cs.iter_mut() {
        c.query_drop("SET SESSION binlog_format = 'STATEMENT'")
            .await
            .unwrap();
    }
    // What READ COMMITTED would do on such a session: the server refuses the DML.
    let mut probe = apply::connect(&opts(s, &db)).await.unwrap();
    probe
        .query_drop("SET SESSION binlog_format = 'STATEMENT'")
        .await
        .unwrap();
    probe
        .query_drop("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await
        .unwrap();
    let e = probe
        .query_drop("DELETE FROM t WHERE id = -5")
        .await
        .unwrap_err();
    assert_eq!(kernel::error::mysql_server_code(&e), Some(1665), "{e}");
    let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits(9))
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!((dump(s, &db), audit(s, &db), cursor(s, &db)), want);
}

#[tokio::test]
async fn a_target_without_the_parts_table_replays_on_one_connection() {
    let s = shared_target();
    let g = rich();
    let want = serial(s, 75, &g, 60, 9).await;
    let db = audited_target(s, "pa_old_t");
    let ctx = ctx(&db, 75, 1);
    baseline(s, &db, &ctx, 60).await;
    // T as an older build created it.
    s.sql_in(&db, "DROP TABLE _backfill_ledger_cursor_parts");
    let mut two = conns(s, &db, 2).await;
    let e = parts::apply_groups_parts(&mut two, &ctx, None, &g, limits(9))
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("_backfill_ledger_cursor_parts"),
        "{e}"
    );
    let mut one = conns(s, &db, 1).await;
    let r = parts::apply_groups_parts(&mut one, &ctx, None, &g, limits(9))
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!((dump(s, &db), audit(s, &db), cursor(s, &db)), want);
}

#[tokio::test]
async fn a_trigger_on_one_shared_row_costs_one_lock_wait_timeout_not_a_stall() {
    let s = shared_target();
    let g = rich();
    // The single-counter audit triggers of the other tests: every part's DML updates the
    // same row, so part p waits for part 0 while part 0 waits (in this process) for part p.
    let reference = fresh_target(s, "pa_shared_ref");
    let rctx = ctx(&reference, 76, 1);
    baseline(s, &reference, &rctx, 60).await;
    let mut c = apply::connect(&opts(s, &reference)).await.unwrap();
    apply::apply_groups(&mut c, &rctx, None, &g, limits(9))
        .await
        .unwrap();
    let db = fresh_target(s, "pa_shared");
    let ctx = ctx(&db, 76, 1);
    baseline(s, &db, &ctx, 60).await;
    let mut cs = conns(s, &db, 2).await;
    for c in cs.iter_mut() {
        c.query_drop("SET SESSION innodb_lock_wait_timeout = 1")
            .await
            .unwrap();
    }
    let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits(9))
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!(dump(s, &db), dump(s, &reference));
    assert_eq!(dml_count(s, &db), dml_count(s, &reference));
    assert_eq!(cursor(s, &db), cursor(s, &reference));
}

#[tokio::test]
async fn killed_with_parts_several_transactions_ahead_converges_without_second_dml() {
    as_child(child).await;
    let s = shared_target();
    let g = distinct();
    let want = serial(s, 77, &g, 200, 1000).await;
    let db = audited_target(s, "pa_ahead");
    let ctx = ctx(&db, 77, 1);
    baseline(s, &db, &ctx, 200).await;
    // P = 2, one group per transaction: killed right before main's third COMMIT, while
    // part 1 may already be transactions further.
    run_child_at(&db, 77, 2, 10, "ledger.parts.before_main_commit@3");
    let main: Vec<String> = s
        .sql_in(&db, "SELECT pos FROM _backfill_ledger_cursor")
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(main, ["2000"], "main after two COMMITs");
    let part: u64 = s
        .sql_in(
            &db,
            "SELECT pos FROM _backfill_ledger_cursor_parts WHERE part = 1",
        )
        .parse()
        .unwrap();
    assert!(
        part >= 3000,
        "part 1 at {part}: it committed its share of the third transaction before part 0's COMMIT"
    );
    // Restart with P = 3 and 6-change transactions.
    let mut cs = conns(s, &db, 3).await;
    let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits(6))
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!(dump(s, &db), want.0);
    assert_eq!(audit(s, &db), want.1, "a business DML ran twice (or never)");
    assert_eq!(cursor(s, &db), want.2);
}

#[tokio::test]
async fn killed_after_the_first_part_commit_converges_with_the_same_p_without_second_dml() {
    as_child(child).await;
    let s = shared_target();
    let g = distinct();
    let want = serial(s, 78, &g, 200, 1000).await;
    let db = audited_target(s, "pa_first");
    let ctx = ctx(&db, 78, 1);
    baseline(s, &db, &ctx, 200).await;
    // P = 2, one transaction for everything: killed right after part 1 committed its
    // share, before part 0 (the main cursor) committed anything.
    run_child_at(&db, 78, 2, 1000, "ledger.parts.after_part_commit@1");
    assert_eq!(cursor(s, &db), "");
    let rows = part_rows(s, &db);
    assert_eq!(rows.lines().count(), 1, "{rows}");
    // Restarted with the same P and txn_rows.
    let mut cs = conns(s, &db, 2).await;
    let r = parts::apply_groups_parts(&mut cs, &ctx, None, &g, limits(1000))
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!(dump(s, &db), want.0);
    assert_eq!(audit(s, &db), want.1, "a business DML ran twice (or never)");
    assert_eq!(cursor(s, &db), want.2);
}
