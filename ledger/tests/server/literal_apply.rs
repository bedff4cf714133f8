//! Text-protocol literals write exactly what bound parameters write: the same hard rows
//! applied as pages and as replay upserts, once as text and once prepared, under the
//! default sql_mode and under NO_BACKSLASH_ESCAPES, give identical target tables.
use crate::common::*;
use kernel::change::{Change, Op};
use kernel::codec;
use kernel::value::{Row, SqlValue};
use ledger::apply::{self, Applied, Limits, ReplayGroup};
use ledger::target::{self, TargetCtx};
use mysql_async::prelude::Queryable;

fn hard_rows(base: i64, v: &str) -> Vec<Row> {
    let names: [Option<&[u8]>; 8] = [
        Some(b"it's"),
        Some(b"back\\slash and \\' both"),
        Some(b"nul\0byte"),
        Some("\u{fc}n\u{ef}c\u{f6}d\u{e9} \u{2713}".as_bytes()),
        Some(b"'); DROP TABLE t; --"),
        Some(b""),
        None,
        Some(b"\\"),
    ];
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let id = base + i as i64;
            let mut name = n.map(|b| b.to_vec());
            if let Some(b) = name.as_mut() {
                b.extend_from_slice(v.as_bytes());
            }
            vec![
                SqlValue::Int(id),
                name.map_or(SqlValue::Null, SqlValue::Bytes),
                if i % 3 == 0 {
                    SqlValue::Null
                } else {
                    SqlValue::Bytes(format!("-{i}.001").into_bytes())
                },
                if i % 2 == 0 {
                    SqlValue::Date(1000, 1, 1, 0, 0, 0, 0)
                } else {
                    SqlValue::Date(9999, 12, 31, 23, 59, 59, 999_999)
                },
                SqlValue::Bytes(format!("1709210096.{i:06}").into_bytes()),
                match i % 3 {
                    0 => SqlValue::Bytes(vec![0xff, 0, b'\'', b'\\']),
                    1 => SqlValue::Bytes(b"a\\'b".to_vec()),
                    _ => SqlValue::Null,
                },
            ]
        })
        .collect()
}

/// A target connection with the ledger's session settings, optionally with
/// NO_BACKSLASH_ESCAPES added to the session's sql_mode.
async fn conn(db: &str, no_backslash: bool) -> mysql_async::Conn {
    let mut c = apply::connect(&opts(shared_target(), db)).await.unwrap();
    if no_backslash {
        c.query_drop("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
            .await
            .unwrap();
    }
    c
}

fn upserts(rows: Vec<Row>, at: u64) -> ReplayGroup {
    ReplayGroup {
        end: group_end("mysql-bin.000001", at, None),
        changes: rows
            .into_iter()
            .enumerate()
            .map(|(i, r)| Change {
                id: change_id(1, "s", "mysql-bin.000001", at - 10, i as u32, Op::Insert),
                before: None,
                after: Some(r),
            })
            .collect(),
    }
}

/// Pages then replay upserts (over the same keys and new ones), then a delete of keys
/// written either way; returns the server's dump of the table.
async fn apply_all(job: u64, text: bool, no_backslash: bool) -> String {
    let s = shared_target();
    let db = fresh_target(s, "ll_lit");
    let ctx: TargetCtx = ctx(&db, job, 1);
    drop(claimed(s, &db, &ctx).await);
    let mut c = conn(&db, no_backslash).await;
    let limits = Limits {
        text_pages: text,
        text_replay: text,
        stmt_rows: 3,
        ..Limits::default()
    };
    let p = page(job, 0, 0, hard_rows(1, ""));
    let r = apply::apply_page(&mut c, &ctx, &codec::encode(&p), limits)
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    let mut g = vec![upserts(hard_rows(5, "-v2"), 100)];
    let mut del = upserts(Vec::new(), 200);
    del.changes = (1..=3)
        .map(|id| Change {
            id: change_id(1, "s", "mysql-bin.000001", 190, id as u32, Op::Delete),
            before: Some(vec![SqlValue::Int(id), SqlValue::Null]),
            after: None,
        })
        .collect();
    g.push(del);
    let r = apply::apply_groups(&mut c, &ctx, None, &g, limits)
        .await
        .unwrap();
    assert_eq!(r, Applied::Committed);
    let cur = target::replay_cursor(&mut c, &ctx, false).await.unwrap();
    assert_eq!(cur.map(|c| c.end), Some(g[1].end.clone()));
    c.disconnect().await.unwrap();
    dump(s, &db)
}

#[tokio::test]
async fn text_literals_write_exactly_what_bound_values_write() {
    let prepared = apply_all(71, false, false).await;
    assert_eq!(prepared.lines().count(), 9, "{prepared}");
    for (job, no_backslash) in [(72, false), (73, true)] {
        let text = apply_all(job, true, no_backslash).await;
        assert_eq!(text, prepared, "no_backslash_escapes={no_backslash}");
    }
    let prepared_nb = apply_all(74, false, true).await;
    assert_eq!(prepared_nb, prepared);
}
