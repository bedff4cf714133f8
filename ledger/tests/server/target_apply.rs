//! T against a real MariaDB target: idempotent page and group apply counted by an audit
//! trigger (I2), evidence conflicts, fencing, exact DATETIME/TIMESTAMP, T tampering.
use crate::common::*;
use kernel::change::{Change, GroupEnd, Op};
use kernel::codec;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::position::BinlogPos;
use kernel::value::SqlValue;
use ledger::apply::{self, Applied, ApplyError, Limits, ReplayGroup, Resolution};
use ledger::target;

fn bytes(p: &ledger::page::FinalPage) -> Vec<u8> {
    codec::encode(p)
}

#[tokio::test]
async fn page_apply_is_exact_and_reapply_runs_no_business_dml() {
    let s = shared_target();
    let db = fresh_target(s, "lp_once");
    let ctx = ctx(&db, 1, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let p = page(1, 0, 0, (1..=5).map(|i| row(i, &format!("n{i}"))).collect());
    let b = bytes(&p);
    let r = apply::apply_page(
        &mut c,
        &ctx,
        &b,
        Limits {
            stmt_rows: 2,
            ..Limits::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!(dml_count(s, &db), 5);
    let before = dump(s, &db);
    assert!(
        before.starts_with(
            "1\tn1\t1.125\t2026-10-18 01:02:03.654321\t2024-02-29 12:34:56.789012\t0001FF00"
        ),
        "{before}"
    );
    // Re-apply after "a crash between target COMMIT and J": AlreadyCommitted, 0 DML.
    for _ in 0..3 {
        let r = apply::apply_page(&mut c, &ctx, &b, Limits::default())
            .await
            .unwrap();
        assert_eq!(r, Applied::AlreadyCommitted);
    }
    let r = apply::apply_page_resolved(&opts(s, &db), &ctx, &b, Limits::default())
        .await
        .unwrap();
    assert_eq!(r, Applied::AlreadyCommitted);
    assert_eq!(dml_count(s, &db), 5);
    assert_eq!(dump(s, &db), before);
    let mut c2 = apply::connect(&opts(s, &db)).await.unwrap();
    assert_eq!(
        apply::resolve_page(&mut c2, &ctx, &b).await.unwrap(),
        Resolution::Committed
    );
    let creds = target::page_credentials(&mut c2, &ctx).await.unwrap();
    assert_eq!(creds.len(), 1);
    assert_eq!(creds[0].digest, Digest::of(&b));
    assert_eq!(creds[0].rows, 5);
}

#[tokio::test]
async fn same_credential_with_other_bytes_is_a_conflict_and_changes_nothing() {
    let s = shared_target();
    let db = fresh_target(s, "lp_conflict");
    let ctx = ctx(&db, 2, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let a = page(2, 3, 0, vec![row(1, "a"), row(2, "b")]);
    apply::apply_page(&mut c, &ctx, &bytes(&a), Limits::default())
        .await
        .unwrap();
    let before = (dump(s, &db), dml_count(s, &db));
    let b = page(2, 3, 0, vec![row(1, "a"), row(2, "B")]);
    let e = match apply::apply_page(&mut c, &ctx, &bytes(&b), Limits::default()).await {
        Err(ApplyError::Failed(e)) => e,
        other => panic!("expected a conflict, got {other:?}"),
    };
    assert_eq!(code(&e), Some(DefiniteCode::EvidenceConflict), "{e}");
    assert!(e.to_string().contains("w3p0"), "{e}");
    assert_eq!((dump(s, &db), dml_count(s, &db)), before);
    let mut c2 = apply::connect(&opts(s, &db)).await.unwrap();
    assert!(apply::resolve_page(&mut c2, &ctx, &bytes(&b))
        .await
        .is_err());
}

#[tokio::test]
async fn a_stale_owner_is_refused_by_t() {
    let s = shared_target();
    let db = fresh_target(s, "lp_fence");
    let old = ctx(&db, 3, 4);
    let mut c_old = claimed(s, &db, &old).await;
    let new = ctx(&db, 3, 5);
    let mut c_new = claimed(s, &db, &new).await;
    let p = page(3, 0, 0, vec![row(1, "x")]);
    let e = match apply::apply_page(&mut c_old, &old, &bytes(&p), Limits::default()).await {
        Err(ApplyError::Failed(e)) => e,
        other => panic!("stale owner was not refused: {other:?}"),
    };
    assert_eq!(code(&e), Some(DefiniteCode::Fenced), "{e}");
    assert_eq!(
        code(&target::claim(&mut c_old, &old).await.unwrap_err()),
        Some(DefiniteCode::Fenced)
    );
    let g = groups(&[vec![ins(1, "x")]]);
    assert!(matches!(
        apply::apply_groups(&mut c_old, &old, None, &g, Limits::default()).await,
        Err(ApplyError::Failed(e)) if code(&e) == Some(DefiniteCode::Fenced)
    ));
    assert_eq!(dml_count(s, &db), 0);
    apply::apply_page(&mut c_new, &new, &bytes(&p), Limits::default())
        .await
        .unwrap();
    assert_eq!(dml_count(s, &db), 1);
}

fn end(pos: u64) -> GroupEnd {
    group_end("mysql-bin.000007", pos, Some(pos))
}

fn change(
    op: Op,
    pos: u64,
    row: u32,
    before: Option<kernel::value::Row>,
    after: Option<kernel::value::Row>,
) -> Change {
    Change {
        id: change_id(1, "src", "mysql-bin.000007", pos, row, op),
        before,
        after,
    }
}

fn ins(id: i64, name: &str) -> Change {
    change(Op::Insert, id as u64, 0, None, Some(row(id, name)))
}
fn upd(from: i64, to: i64, name: &str) -> Change {
    change(
        Op::Update,
        1000 + to as u64,
        0,
        Some(row(from, "old")),
        Some(row(to, name)),
    )
}
fn del(id: i64) -> Change {
    change(Op::Delete, 2000 + id as u64, 0, Some(row(id, "gone")), None)
}

fn groups(changes: &[Vec<Change>]) -> Vec<ReplayGroup> {
    changes
        .iter()
        .enumerate()
        .map(|(i, c)| ReplayGroup {
            end: end(100 * (i as u64 + 1)),
            changes: c.clone(),
        })
        .collect()
}

#[tokio::test]
async fn replay_by_key_and_full_image_survives_regrouping_without_second_dml() {
    let s = shared_target();
    let db = fresh_target(s, "lg_replay");
    let ctx = ctx(&db, 4, 1);
    let mut c = claimed(s, &db, &ctx).await;
    // Baseline holds both 50 and 150: a key change 50 -> 150 must not stall.
    let base = page(
        4,
        0,
        0,
        vec![
            row(1, "a"),
            row(2, "b"),
            row(50, "fifty"),
            row(150, "old150"),
        ],
    );
    apply::apply_page(&mut c, &ctx, &bytes(&base), Limits::default())
        .await
        .unwrap();
    let g = groups(&[
        vec![upd(1, 1, "a2"), ins(7, "seven")],
        vec![upd(50, 150, "moved")],
        vec![del(2), del(999)],
        vec![
            ins(8, "eight"),
            upd(8, 9, "nine"),
            del(7),
            ins(7, "seven again"),
        ],
    ]);
    // First run commits only the first two groups (the reader batched them so).
    let r = apply::apply_groups(&mut c, &ctx, None, &g[..2], Limits::default())
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    let n2 = dml_count(s, &db);
    // Restart with another batching: all four groups, tiny transactions.
    let small = Limits {
        txn_rows: 1,
        stmt_rows: 1,
        ..Limits::default()
    };
    let r = apply::apply_groups(&mut c, &ctx, None, &g, small)
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    let n4 = dml_count(s, &db);
    assert!(n4 > n2);
    let after = dump(s, &db);
    let ids: Vec<&str> = after
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(ids, ["1", "7", "9", "150"], "{after}");
    assert!(after.contains("150\tmoved"), "{after}");
    assert!(after.contains("7\tseven again"), "{after}");
    // Any re-application, however grouped, adds no DML.
    for (lo, hi) in [(0, 4), (0, 1), (2, 4), (3, 4)] {
        let prev = if lo == 0 {
            None
        } else {
            Some(g[lo - 1].end.clone())
        };
        let r = apply::apply_groups(&mut c, &ctx, prev.as_ref(), &g[lo..hi], Limits::default())
            .await
            .unwrap();
        assert_eq!(r, Applied::AlreadyCommitted, "{lo}..{hi}");
    }
    assert_eq!(dml_count(s, &db), n4);
    assert_eq!(dump(s, &db), after);
    let cur = target::replay_cursor(&mut c, &ctx, false)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cur.end, g[3].end);
    assert_eq!(cur.rows_done, 0);
    let mut c2 = apply::connect(&opts(s, &db)).await.unwrap();
    assert_eq!(
        apply::resolve_groups(&mut c2, &ctx, None, &g)
            .await
            .unwrap(),
        Resolution::Committed
    );
    // Same group key, other content: a conflict, nothing written.
    let mut forged = g.clone();
    forged[3].changes[0] = ins(8, "EIGHT");
    let e = match apply::apply_groups(&mut c, &ctx, None, &forged, Limits::default()).await {
        Err(ApplyError::Failed(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(code(&e), Some(DefiniteCode::EvidenceConflict), "{e}");
    assert_eq!(dml_count(s, &db), n4);
}

#[tokio::test]
async fn a_big_group_is_chunked_and_resumes_with_another_chunk_size() {
    let s = shared_target();
    let db = fresh_target(s, "lg_chunk");
    let ctx = ctx(&db, 5, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let big: Vec<Change> = (1..=25).map(|i| ins(i, "bulk")).collect();
    let g = groups(&[big, vec![del(3)]]);
    let r = apply::apply_groups(
        &mut c,
        &ctx,
        None,
        &g,
        Limits {
            txn_rows: 10,
            ..Limits::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(r, Applied::Committed);
    assert_eq!(s.sql_in(&db, "SELECT COUNT(*) FROM t"), "24");
    assert_eq!(dml_count(s, &db), 26);
    let r = apply::apply_groups(
        &mut c,
        &ctx,
        None,
        &g,
        Limits {
            txn_rows: 7,
            ..Limits::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(r, Applied::AlreadyCommitted);
    assert_eq!(dml_count(s, &db), 26);
}

#[tokio::test]
async fn binlog_timestamp_text_lands_exactly_and_datetime_is_never_shifted() {
    let s = shared_target();
    let db = fresh_target(s, "lg_time");
    let ctx = ctx(&db, 6, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let mut r = row(1, "t");
    r[4] = SqlValue::Bytes(b"1709210096.789012".to_vec());
    let g = groups(&[vec![change(Op::Insert, 1, 0, None, Some(r))]]);
    apply::apply_groups(&mut c, &ctx, None, &g, Limits::default())
        .await
        .unwrap();
    assert_eq!(
        s.sql_in(
            &db,
            "SET time_zone = '+00:00'; SELECT at, ts, UNIX_TIMESTAMP(ts) FROM t"
        ),
        "2026-10-18 01:02:03.654321\t2024-02-29 12:34:56.789012\t1709210096.789012"
    );
    // A session in another zone sees DATETIME unchanged.
    assert_eq!(
        s.sql_in(&db, "SET time_zone = '+08:00'; SELECT at FROM t"),
        "2026-10-18 01:02:03.654321"
    );
}

#[tokio::test]
async fn activation_credential_is_written_once() {
    let s = shared_target();
    let db = fresh_target(s, "lt_act");
    let ctx = ctx(&db, 7, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let a = target::Activation {
        job: ctx.job,
        generation: ctx.generation,
        b: BinlogPos::new("mysql-bin.000001", 4),
        f: BinlogPos::new("mysql-bin.000002", 99),
        chain_root: Digest([1; 32]),
        l_digest: Digest([2; 32]),
    };
    assert!(target::write_activation(&mut c, &ctx, &a).await.unwrap());
    assert!(!target::write_activation(&mut c, &ctx, &a).await.unwrap());
    let mut other = a.clone();
    other.f = BinlogPos::new("mysql-bin.000002", 100);
    assert_eq!(
        code(
            &target::write_activation(&mut c, &ctx, &other)
                .await
                .unwrap_err()
        ),
        Some(DefiniteCode::EvidenceConflict)
    );
    assert_eq!(
        target::read_activation(&mut c, &ctx).await.unwrap(),
        Some(a)
    );
    // Tampering with the stored credential is detected.
    s.sql_in(
        &db,
        "UPDATE _backfill_ledger_activation SET credential = CONCAT(credential, 'x')",
    );
    assert_eq!(
        code(&target::read_activation(&mut c, &ctx).await.unwrap_err()),
        Some(DefiniteCode::EvidenceCorrupt)
    );
}

#[tokio::test]
async fn a_tampered_t_credential_is_detected_against_the_manifests() {
    let s = shared_target();
    let db = fresh_target(s, "lt_tamper");
    let ctx = ctx(&db, 8, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let pages = [
        page(8, 0, 0, vec![row(1, "a")]),
        page(8, 0, 1, vec![row(2, "b")]),
    ];
    let mut refs = Vec::new();
    for p in &pages {
        let sealed = ledger::page::seal(p);
        apply::apply_page(&mut c, &ctx, &sealed.bytes, Limits::default())
            .await
            .unwrap();
        refs.push(p.page_ref(&sealed));
    }
    let m = ledger::manifest::WindowManifest {
        job: ctx.job,
        generation: ctx.generation,
        window: kernel::ids::WindowId(0),
        range: ledger::range::KeyRange::ALL,
        attempt: kernel::ids::Attempt(1),
        low: BinlogPos::new("mysql-bin.000001", 10),
        high: BinlogPos::new("mysql-bin.000001", 20),
        snapshot: None,
        schema_fingerprint: ctx.schema.fingerprint(),
        raw_pages: vec![],
        folded_digest: Digest([0; 32]),
        folded_changes: 0,
        final_pages: refs,
    };
    let creds = target::page_credentials(&mut c, &ctx).await.unwrap();
    assert!(ledger::check::t_credentials(&creds, std::slice::from_ref(&m)).is_empty());
    s.sql_in(
        &db,
        "UPDATE _backfill_ledger_pages SET digest = REPEAT('x', 32) WHERE page_no = 1",
    );
    let creds = target::page_credentials(&mut c, &ctx).await.unwrap();
    let f = ledger::check::t_credentials(&creds, std::slice::from_ref(&m));
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].contains("w0p1"), "{f:?}");
    s.sql_in(&db, "DELETE FROM _backfill_ledger_pages WHERE page_no = 0");
    let creds = target::page_credentials(&mut c, &ctx).await.unwrap();
    assert_eq!(
        ledger::check::t_credentials(&creds, std::slice::from_ref(&m)).len(),
        2
    );
}

#[tokio::test]
async fn a_write_the_target_refuses_is_target_rejected_with_the_server_error_and_commits_nothing() {
    let s = shared_target();
    let db = fresh_target(s, "lp_refused");
    // The server refuses the row (CHECK constraint, ER_CONSTRAINT_FAILED 4025), as it would
    // a string its column's charset cannot hold (1366).
    s.sql_in(
        &db,
        "ALTER TABLE t ADD CONSTRAINT short_name CHECK (CHAR_LENGTH(name) < 5)",
    );
    let ctx = ctx(&db, 7, 1);
    let mut c = claimed(s, &db, &ctx).await;
    let p = page(7, 0, 0, vec![row(1, "ok"), row(2, "too long")]);
    let err = apply::apply_page(&mut c, &ctx, &bytes(&p), Limits::default())
        .await
        .expect_err("the target refuses row 2");
    let ApplyError::Failed(e) = err else {
        panic!("a refused statement is no unknown outcome: {err}");
    };
    let d = e.as_definite().expect("definite");
    assert_eq!(d.code, DefiniteCode::TargetRejected, "{d}");
    assert!(d.message.contains("server error 4025"), "{d}");
    assert_eq!(dml_count(s, &db), 0, "nothing of the page stays");
    assert_eq!(dump(s, &db), "");
    let mut c2 = apply::connect(&opts(s, &db)).await.unwrap();
    assert!(target::page_credentials(&mut c2, &ctx)
        .await
        .unwrap()
        .is_empty());
}
