//! The XA workload of the XA tests (capture/xa.rs, crash/xa.rs) and what L must hold
//! for it (DESIGN §3.8), against real MariaDB 10.11, which logs a prepared transaction as
//! its own group (`XA START xid`, rows, `XA END xid`, XA_PREPARE event) and its outcome
//! later as a group holding only `XA COMMIT xid` or `XA ROLLBACK xid`; `XA COMMIT xid ONE
//! PHASE` is logged as an ordinary transaction.
use super::{as_text, cli_rows, fold, text, Env};
use kernel::change::Change;
use kernel::log::{LSeq, RecordBody, StoredRecord};
use kernel::position::BinlogPos;
use std::collections::BTreeMap;

pub const T: &str =
    "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, s VARCHAR(32) NULL, n INT NOT NULL)";

/// The xid as the server logs it.
pub fn logged(xid: &str) -> String {
    let hex: String = xid.bytes().map(|b| format!("{b:02x}")).collect();
    format!("X'{hex}',X'',1")
}

/// Changes of `t` in Chunk records, with the L record holding each.
fn changes(recs: &[StoredRecord]) -> Vec<(&StoredRecord, &Change)> {
    let mut out = Vec::new();
    for r in recs {
        if let RecordBody::Chunk(c) = &r.record.body {
            out.extend(
                c.changes
                    .iter()
                    .filter(|c| c.id.table == "t")
                    .map(|c| (r, c)),
            );
        }
    }
    out
}

fn s_of(c: &Change) -> String {
    let img = c.after.as_ref().or(c.before.as_ref()).unwrap();
    text(&img[1])
}

fn pos(file: &str, p: u64) -> BinlogPos {
    BinlogPos::new(file, p)
}

/// The XA workload, part 1: a prepared group of 251 changes (3 chunks of 100).
pub fn prepare_big(e: &Env, p: &str) {
    e.src.sql_in(
        &e.db,
        &format!(
            "INSERT INTO t SELECT seq, 'base', 0 FROM seq_1_to_10;
             XA START '{p}big'; INSERT INTO t SELECT seq, 'xa', 1 FROM seq_1001_to_1250;
             UPDATE t SET n = n + 5, s = 'xa' WHERE id = 3; XA END '{p}big';
             XA PREPARE '{p}big';"
        ),
    );
}

/// Part 2: other groups, a prepared group rolled back, a prepared group of another
/// table, the commit of the big group, a one-phase XA.
pub fn finish_workload(e: &Env, p: &str) {
    // One prepared XA per session: each statement list runs on its own connection.
    for sql in [
        "INSERT INTO t VALUES (20, 'mid', 0); INSERT INTO other VALUES (1)".to_string(),
        format!(
            "XA START '{p}rb'; INSERT INTO t VALUES (2000, 'rb', 0); DELETE FROM t WHERE id = 4;
             XA END '{p}rb'; XA PREPARE '{p}rb'"
        ),
        format!(
            "XA START '{p}oth'; INSERT INTO other VALUES (2); XA END '{p}oth'; XA PREPARE '{p}oth'"
        ),
        "UPDATE t SET s = 'after' WHERE id = 5".to_string(),
        format!("XA COMMIT '{p}big'"),
        format!("XA ROLLBACK '{p}rb'"),
        format!("XA COMMIT '{p}oth'"),
        format!(
            "XA START '{p}one'; INSERT INTO t VALUES (3000, 'one', 0); XA END '{p}one';
             XA COMMIT '{p}one' ONE PHASE"
        ),
    ] {
        e.src.sql_in(&e.db, &sql);
    }
}

pub fn assert_xa_semantics(e: &Env, recs: &[StoredRecord], p: &str) {
    let (big_xid, rb_xid) = (logged(&format!("{p}big")), logged(&format!("{p}rb")));
    let ch = changes(recs);
    // The rolled-back group never takes effect.
    assert!(
        ch.iter().all(|(_, c)| s_of(c) != "rb"),
        "rolled back rows in L"
    );
    let dropped: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.record.body, RecordBody::Dropped { xid } if *xid == rb_xid))
        .collect();
    assert_eq!(dropped.len(), 1, "one Dropped record for XA 'rb'");
    // The held group: 251 changes in 3 held chunks, then the same 3 chunks again at the
    // XA COMMIT's position.
    let held: Vec<_> = recs
        .iter()
        .filter(|r| matches!(&r.record.body, RecordBody::Held(h) if h.xid == big_xid))
        .collect();
    assert_eq!(held.len(), 3, "251 changes held in chunks of 100");
    let big: Vec<_> = ch.iter().filter(|(_, c)| s_of(c) == "xa").collect();
    assert_eq!(big.len(), 251);
    let group: Vec<LSeq> = {
        let mut v: Vec<LSeq> = big.iter().map(|(r, _)| r.seq).collect();
        v.dedup();
        v
    };
    assert_eq!(group.len(), 3, "released as 3 chunks");
    let last = recs.iter().find(|r| r.seq == group[2]).unwrap();
    let end = last
        .record
        .end
        .clone()
        .expect("the last chunk ends the group");
    // Identities keep the prepared group's event positions; the group ends at the commit,
    // after the groups logged between the prepare and the commit.
    let mid = ch.iter().find(|(_, c)| s_of(c) == "mid").unwrap();
    let after = ch.iter().find(|(_, c)| s_of(c) == "after").unwrap();
    let first_big = big[0].1;
    let at = |c: &Change| pos(&c.id.file, c.id.event_pos);
    assert!(at(first_big).try_cmp(&at(mid.1)).unwrap().is_lt());
    assert!(
        mid.0.seq < group[0] && after.0.seq < group[0],
        "released after them"
    );
    let after_end = after.0.record.end.clone().unwrap();
    assert!(after_end.pos.try_cmp(&end.pos).unwrap().is_lt());
    for (i, seq) in group.iter().enumerate() {
        let r = recs.iter().find(|r| r.seq == *seq).unwrap();
        assert_eq!(r.record.chunk, i as u32);
        assert_eq!(r.record.start, last.record.start);
        assert_eq!(r.record.gtid, end.gtid);
    }
    // The one-phase XA is an ordinary transaction.
    assert_eq!(ch.iter().filter(|(_, c)| s_of(c) == "one").count(), 1);
    let folded = fold(recs, "t", 0, BTreeMap::new());
    assert_eq!(
        as_text(&folded),
        cli_rows(e.src, &e.db, "SELECT id, s, n FROM t")
    );
}
