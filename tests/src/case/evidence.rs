//! Evidence checks of the window/serve test world: audit triggers, the filled state and its
//! replay over L, FINAL pages against the target, per-row HEX() renderings by the server.
use super::Case;
use harness::Server;
use kernel::value::{Row, SqlValue};
use ledger::material::LocalDirStore;
use std::collections::BTreeMap;

/// Audit triggers on `db.t` logging every business DML row execution by kind, INSERT,
/// UPDATE and DELETE, with its key (created after install, which refuses a target with
/// triggers). A log table without a key, not a counter row: concurrent writers of one
/// table (the apply streams of one batch) never wait for each other on it.
pub fn add_audit_triggers(server: &Server, db: &str) {
    add_audit_triggers_of(server, db, "t");
}

/// [`add_audit_triggers`] on `db.table` (of the shape of `t`), logging to
/// [`audit_log_of`]`(table)`.
pub fn add_audit_triggers_of(server: &Server, db: &str, table: &str) {
    let log = audit_log_of(table);
    server.sql_in(
        db,
        &format!(
            "CREATE TABLE {log} (id BIGINT NOT NULL, op CHAR(1) NOT NULL);
             CREATE TRIGGER {table}_ins AFTER INSERT ON {table} FOR EACH ROW INSERT INTO {log} VALUES (NEW.id, 'I');
             CREATE TRIGGER {table}_upd AFTER UPDATE ON {table} FOR EACH ROW INSERT INTO {log} VALUES (NEW.id, 'U');
             CREATE TRIGGER {table}_del AFTER DELETE ON {table} FOR EACH ROW INSERT INTO {log} VALUES (OLD.id, 'D');"
        ),
    );
}

/// The audit triggers' log table of `table`: `audit_log` for `t`, `audit_log_<table>`
/// for another.
pub fn audit_log_of(table: &str) -> String {
    match table {
        "t" => "audit_log".into(),
        _ => format!("audit_log_{table}"),
    }
}

/// (inserts, updates, deletes) logged by [`add_audit_triggers`] on `db.t`.
pub fn audit_ops(server: &Server, db: &str) -> (u64, u64, u64) {
    let out = server.sql_in(
        db,
        "SELECT COUNT(op = 'I' OR NULL), COUNT(op = 'U' OR NULL), COUNT(op = 'D' OR NULL) \
         FROM audit_log",
    );
    let v: Vec<u64> = out.split('\t').map(|x| x.trim().parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

/// Inserts ids 1..=rows in batches.
pub fn fill(source: &Server, db: &str, rows: i64) {
    let mut from = 1;
    while from <= rows {
        let to = (from + 9_999).min(rows);
        source.sql_in(
            db,
            &format!(
                "INSERT INTO t (id, k, v) SELECT seq, seq, CONCAT('v', seq) FROM seq_{from}_to_{to}"
            ),
        );
        from = to + 1;
    }
}

/// Replays L changes by key and full image over `state` (the test's own, independent of
/// the pipeline's fold): the table's state after the last change applied.
pub fn replay(state: &mut BTreeMap<i64, Row>, c: &kernel::change::Change) {
    if let Some(b) = &c.before {
        state.remove(&b[0].as_key().unwrap());
    }
    if let Some(a) = &c.after {
        state.insert(a[0].as_key().unwrap(), a.clone());
    }
}

/// The table state right after `fill(rows)`, as the binary protocol reads it.
pub fn filled_state(rows: i64) -> BTreeMap<i64, Row> {
    (1..=rows)
        .map(|i| {
            (
                i,
                vec![
                    SqlValue::Int(i),
                    SqlValue::Int(i),
                    SqlValue::Bytes(format!("v{i}").into_bytes()),
                ],
            )
        })
        .collect()
}

/// For every sealed window: FINAL equals the range's state at its HIGH, computed by
/// replaying L (from B, over the filled state) by key and full image up to HIGH's record.
pub async fn assert_final_is_state_at_high(c: &Case, initial: &BTreeMap<i64, Row>) {
    let store = LocalDirStore::open(c.data.path()).unwrap();
    let manifests = c.manifests(&store).await;
    let finals = c.final_rows().await;
    let changes = c.l_changes().await;
    let mut state = initial.clone();
    let mut applied = 0;
    let mut order: Vec<(u64, usize)> = Vec::new();
    for (i, m) in manifests.iter().enumerate() {
        order.push((c.seq_at(&m.high).await, i));
    }
    order.sort();
    for (high_seq, i) in order {
        while applied < changes.len() && changes[applied].0 .0 <= high_seq {
            replay(&mut state, &changes[applied].1);
            applied += 1;
        }
        let m = &manifests[i];
        let expect: BTreeMap<i64, Row> = state
            .iter()
            .filter(|(k, _)| m.range.contains(&kernel::key::SortKey::of_i64(**k)))
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        assert_eq!(
            finals[i].len(),
            expect.len(),
            "window {} {}: FINAL row count differs from the state at HIGH",
            m.window,
            m.range
        );
        assert!(
            finals[i] == expect,
            "window {} {}: FINAL differs from the state at HIGH",
            m.window,
            m.range
        );
    }
}

/// The target holds exactly the FINAL rows of every window (windows alone; F and replay
/// bring it to the source's state later). The target's rows are rendered by its server
/// (`HEX()` per column, [`hex_rows`]), the FINAL rows by [`hex_row`]: the comparison does
/// not read the target through the pipeline's value decoding.
pub async fn assert_target_is_finals(c: &Case) {
    let mut all = BTreeMap::new();
    for f in c.final_rows().await {
        all.extend(f.iter().map(|(k, r)| (*k, hex_row(&r[1..]))));
    }
    let target = hex_rows(c.target, &c.tdb);
    if target != all {
        let differ: Vec<&i64> = all
            .keys()
            .chain(target.keys())
            .filter(|k| all.get(k) != target.get(k))
            .take(20)
            .collect();
        panic!(
            "target ({} rows) differs from the union of FINAL pages ({} rows): keys {differ:?}",
            target.len(),
            all.len()
        );
    }
}

/// The rows of `db.t` (columns id, k, v) by key, each rendered by the server as
/// `HEX(k),HEX(v)` with `NULL` for a NULL.
pub fn hex_rows(server: &Server, db: &str) -> BTreeMap<i64, String> {
    let out = server.sql_in(
        db,
        "SELECT id, CONCAT_WS(',', IFNULL(HEX(k), 'NULL'), IFNULL(HEX(v), 'NULL')) FROM t ORDER BY id",
    );
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('\t').expect("id and row");
            (k.parse().unwrap(), v.to_string())
        })
        .collect()
}

/// `values` rendered as the server's `HEX()` renders them in [`hex_rows`] (an integer as
/// its 64-bit two's complement, bytes as themselves; upper case).
pub fn hex_row(values: &[SqlValue]) -> String {
    values
        .iter()
        .map(|v| match v {
            SqlValue::Null => "NULL".to_string(),
            SqlValue::Int(i) => format!("{:X}", *i as u64),
            SqlValue::UInt(u) => format!("{u:X}"),
            SqlValue::Bytes(b) => b.iter().map(|x| format!("{x:02X}")).collect(),
            other => panic!("not a value of the test table: {other:?}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}
