//! Sort keys against a real MariaDB (DESIGN §14): for every key type and collation, random
//! and boundary values are stored in a table column, read back by a binary-protocol
//! SELECT, a text-protocol SELECT and the binlog capture, and turned into sort keys by the
//! keyer (character weights asked of the server by `weigh`). The property: sorting by sort
//! key gives the server's `ORDER BY v` sequence of equivalence classes, two sort keys are
//! equal exactly when the server's `=` says so, and every path gives the same bytes.
//!
//! The seed is printed; `KEYS_SEED=<n>` repeats a run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod values;

use kernel::capture::Reader;
use kernel::control::IntentKind;
use kernel::key::{encoding_of, weigh, KeyColumn, KeyDef, Keyer, SortKey};
use kernel::log::RecordBody;
use kernel::value::{Row, SqlValue};
use mysql_async::prelude::Queryable;
use std::collections::{BTreeMap, BTreeSet};
use support::*;

/// One table of the run: `CREATE TABLE name (id INT PRIMARY KEY, v <column>)` and the SQL
/// literals of its values.
pub struct Case {
    pub name: String,
    pub column: String,
    pub values: Vec<String>,
}

fn seed() -> u64 {
    let s = std::env::var("KEYS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("keys: KEYS_SEED={s}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_keys_are_the_servers_order_and_equality_on_every_path() {
    let seed = seed();
    let cases = values::cases(seed);
    let e = env("keys").await;
    for c in &cases {
        e.src.sql_in(
            &e.db,
            &format!(
                "CREATE TABLE {} (id INT NOT NULL PRIMARY KEY, v {} NOT NULL, KEY (v)) \
                 ENGINE=InnoDB",
                c.name, c.column
            ),
        );
    }
    e.init_stream(1000).await;
    let tables: Vec<(u64, &str)> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u64 + 1, c.name.as_str()))
        .collect();
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&tables).await);
    for (i, _) in cases.iter().enumerate() {
        e.intent(i as u64 + 1, IntentKind::B).await;
    }
    for c in &cases {
        insert(&e, c);
    }
    let mut last = None;
    for (i, _) in cases.iter().enumerate() {
        last = Some(e.intent(i as u64 + 1, IntentKind::F).await);
    }
    e.wait_marker(&last.unwrap(), 60).await;
    reader.stop().await.unwrap();
    let binlog = binlog_rows(&e).await;

    let mut conn = e.conn().await;
    // As a key-reading session must: text arrives as the column's own bytes (with the
    // default utf8mb4 results a latin1 value arrives re-encoded, unlike the binlog's), and
    // a TIMESTAMP in calendar form is UTC.
    conn.query_drop("SET NAMES utf8mb4, character_set_results = NULL, time_zone = '+00:00'")
        .await
        .unwrap();
    let mut report = Vec::new();
    for c in &cases {
        let (rt, sample) = check(&e, &mut conn, c, &binlog[&c.name]).await;
        report.push(format!(
            "{} {}: {} values, {rt} round trips; largest: {sample}",
            c.name,
            c.column,
            c.values.len()
        ));
    }
    eprintln!("keys (seed {seed}):\n{}", report.join("\n"));
}

fn insert(e: &Env, c: &Case) {
    let rows: Vec<String> = c
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| format!("({}, {v})", i + 1))
        .collect();
    e.src.sql_in(
        &e.db,
        &format!(
            "SET NAMES utf8mb4; SET sql_mode = ''; SET time_zone = '+00:00'; \
             INSERT INTO {} (id, v) VALUES {}",
            c.name,
            rows.join(", ")
        ),
    );
}

/// Every table's rows as the capture put them in L: id -> v.
async fn binlog_rows(e: &Env) -> BTreeMap<String, BTreeMap<i64, SqlValue>> {
    let mut out: BTreeMap<String, BTreeMap<i64, SqlValue>> = BTreeMap::new();
    for r in all_records(&e.pool, &e.stream).await {
        if let RecordBody::Chunk(c) = &r.record.body {
            assert!(c.pauses.is_empty(), "{:?}", c.pauses);
            for ch in &c.changes {
                let a = ch.after.clone().unwrap();
                out.entry(ch.id.table.clone())
                    .or_default()
                    .insert(a[0].as_key().unwrap(), a[1].clone());
            }
        }
    }
    out
}

/// The keyer of column `v` of a table, from the server's own definition.
pub async fn keyer_of(e: &Env, table: &str) -> Keyer {
    let schema = e.sealed(table).await;
    let col = &schema.columns[1];
    Keyer::new(KeyDef {
        columns: vec![KeyColumn {
            index: 1,
            name: col.name.clone(),
            // Every charset is weighed here (the binlog's bytes are the column's own);
            // install refuses some as key columns for the snapshot read's sake.
            encoding: encoding_of(col)
                .or_else(|_| kernel::key::chars_encoding(col))
                .unwrap(),
        }],
    })
}

/// Sort keys of `(id, v)` rows, weighing first.
async fn keys(
    conn: &mut mysql_async::Conn,
    k: &mut Keyer,
    rows: &[(i64, SqlValue)],
) -> Vec<SortKey> {
    let rows: Vec<Row> = rows
        .iter()
        .map(|(id, v)| vec![SqlValue::Int(*id), v.clone()])
        .collect();
    weigh::weigh(conn, k, &rows).await.unwrap();
    rows.iter()
        .map(|r| k.sort_key(r).unwrap_or_else(|e| panic!("{r:?}: {e}")))
        .collect()
}

/// Checks one table; returns the weighing round trips it took and how its largest value
/// arrived on each path.
async fn check(
    e: &Env,
    conn: &mut mysql_async::Conn,
    c: &Case,
    binlog: &BTreeMap<i64, SqlValue>,
) -> (u64, String) {
    // The index's order (v, id): a filesort's `ORDER BY v` is not it everywhere (under
    // utf8mb4_nopad_bin it ties '' with '\0' and 'a' with 'a\0', which `<` and the index
    // order keep apart).
    let sql = format!(
        "SELECT id, v FROM {} FORCE INDEX (v) ORDER BY v, id",
        c.name
    );
    let bin: Vec<(i64, mysql_async::Value)> = conn.exec(sql.as_str(), ()).await.unwrap();
    let bin: Vec<(i64, SqlValue)> = bin.into_iter().map(|(i, v)| (i, v.into())).collect();
    let txt: Vec<(i64, mysql_async::Value)> = conn.query(sql.as_str()).await.unwrap();
    let txt: Vec<(i64, SqlValue)> = txt.into_iter().map(|(i, v)| (i, v.into())).collect();
    assert_eq!(bin.len(), c.values.len(), "{}", c.name);
    let mut k = keyer_of(e, &c.name).await;
    let log: Vec<(i64, SqlValue)> = bin.iter().map(|(i, _)| (*i, binlog[i].clone())).collect();
    let read = Read {
        keys: [
            keys(conn, &mut k, &bin).await,
            keys(conn, &mut k, &txt).await,
            keys(conn, &mut k, &log).await,
        ],
        rows: [bin, txt, log],
    };
    let pairs = |op: &str| {
        format!(
            "SELECT a.id, b.id FROM {0} a JOIN {0} b ON a.v {op} b.v",
            c.name
        )
    };
    let equal: BTreeSet<(i64, i64)> = conn.query(pairs("=")).await.unwrap().into_iter().collect();
    // `<` of two ENUM or SET values compares their text; their index (and ORDER BY) order
    // is by number, which the index order checks.
    // And `<` of two CHAR values under a NO PAD collation compares the values without
    // the padding their index orders them by ('' < '\0' by `<`, '\0' before '' in the
    // index): the index order is the key order.
    let by_text = c.column.starts_with("ENUM")
        || c.column.starts_with("SET")
        || (c.column.starts_with("CHAR") && c.column.contains("nopad"));
    let less: Option<BTreeSet<(i64, i64)>> = if by_text {
        None
    } else {
        Some(conn.query(pairs("<")).await.unwrap().into_iter().collect())
    };
    read.paths_agree(&c.name);
    read.order_and_equality(&c.name, &equal, less.as_ref());
    (k.weigh_stats().round_trips, read.sample())
}

/// One table read three ways (binary SELECT, text SELECT, binlog), in index order.
struct Read {
    rows: [Vec<(i64, SqlValue)>; 3],
    keys: [Vec<SortKey>; 3],
}

impl Read {
    fn show(&self, i: usize) -> String {
        let [b, t, l] = &self.rows;
        format!(
            "id {} {:?} (text {:?}, binlog {:?}) key {:?}",
            b[i].0, b[i].1, t[i].1, l[i].1, self.keys[0][i]
        )
    }

    /// The largest value as each path gave it (binary SELECT / text SELECT / binlog).
    fn sample(&self) -> String {
        let last = self.rows[0].len() - 1;
        let [b, t, l] = &self.rows;
        format!("{:?} / {:?} / {:?}", b[last].1, t[last].1, l[last].1)
    }

    fn paths_agree(&self, table: &str) {
        let [b, t, _] = &self.rows;
        for i in 0..b.len() {
            assert_eq!(t[i].0, b[i].0, "{table}: the two SELECTs agree on order");
            for (p, name) in [(1, "text SELECT"), (2, "binlog")] {
                assert_eq!(
                    self.keys[p][i],
                    self.keys[0][i],
                    "{table}: {name}: {}",
                    self.show(i)
                );
            }
            if i > 0 {
                assert!(
                    self.keys[0][i - 1] <= self.keys[0][i],
                    "{table}: the index puts {} before {}",
                    self.show(i - 1),
                    self.show(i)
                );
            }
        }
    }

    fn order_and_equality(
        &self,
        table: &str,
        equal: &BTreeSet<(i64, i64)>,
        less: Option<&BTreeSet<(i64, i64)>>,
    ) {
        let (ids, k) = (&self.rows[0], &self.keys[0]);
        for i in 0..ids.len() {
            for j in 0..ids.len() {
                let pair = (ids[i].0, ids[j].0);
                let eq = equal.contains(&pair);
                assert_eq!(
                    k[i] == k[j],
                    eq,
                    "{table}: `=` is {eq} for {} and {}",
                    self.show(i),
                    self.show(j)
                );
                if let Some(less) = less {
                    let lt = less.contains(&pair);
                    assert_eq!(
                        k[i] < k[j],
                        lt,
                        "{table}: `<` is {lt} for {} and {}",
                        self.show(i),
                        self.show(j)
                    );
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_that_would_be_wrong_are_refused_and_batches_are_counted() {
    let e = env("keys_refuse").await;
    e.src.sql_in(
        &e.db,
        "CREATE TABLE u (id INT PRIMARY KEY, v VARCHAR(3) CHARACTER SET utf8mb4 \
         COLLATE utf8mb4_unicode_ci NOT NULL)",
    );
    let mut conn = e.conn().await;
    let k = keyer_of(&e, "u").await;
    // 'ß' weighs as 'ss': 'ßßß' has 6 weights, AS CHAR(3) keeps 3 (= 'ßsx', 'sss'...).
    let err = weigh::weigh_values(&mut conn, &k, &[(0, "ßßß".as_bytes().to_vec())])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("expands"), "{err}");
    assert!(
        weigh::weigh_values(&mut conn, &k, &[(0, "ßß".as_bytes().to_vec())])
            .await
            .is_err()
    );
    // 'ß' + 'x' = 3 weights: fits.
    weigh::weigh_values(&mut conn, &k, &[(0, "ßx".as_bytes().to_vec())])
        .await
        .unwrap();
    // Bytes that are no utf8mb4 text: the server would weigh '?'.
    let err = weigh::weigh_values(&mut conn, &k, &[(0, vec![b'a', 0xFF])])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not valid utf8mb4"), "{err}");
    // 1 200 values: three statements (and the pad check asked once).
    let k = keyer_of(&e, "u").await;
    let many: Vec<(usize, Vec<u8>)> = (0..1200)
        .map(|i| (0, format!("{i:x}").into_bytes()))
        .collect();
    let n = weigh::weigh_values(&mut conn, &k, &many).await.unwrap();
    assert_eq!(n, 1200);
    assert_eq!(k.weigh_stats().round_trips, 1 + 3);
    assert_eq!(k.weigh_stats().values, 1200);
    // Cached: nothing is asked again.
    assert_eq!(weigh::weigh_values(&mut conn, &k, &many).await.unwrap(), 0);
    assert_eq!(k.weigh_stats().round_trips, 4);
}

/// Keys of the `(id, v)` rows `sql` returns over the binary protocol.
async fn select_keys(conn: &mut mysql_async::Conn, k: &mut Keyer, sql: &str) -> Vec<SortKey> {
    let rows: Vec<(i64, mysql_async::Value)> = conn.exec(sql, ()).await.unwrap();
    let rows: Vec<(i64, SqlValue)> = rows.into_iter().map(|(i, v)| (i, v.into())).collect();
    keys(conn, k, &rows).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamp_is_keyed_as_its_epoch_read_in_utc() {
    let e = env("keys_ts").await;
    e.src.sql_in(
        &e.db,
        "SET time_zone = '+00:00'; CREATE TABLE ts (id INT PRIMARY KEY, v TIMESTAMP(6) NOT NULL); \
         INSERT INTO ts VALUES (1, '2024-03-01 01:02:03.456789'), (2, '1970-01-01 00:00:01'), \
         (3, '2038-01-19 03:14:07.999999'), (4, '2024-10-27 00:30:00')",
    );
    let mut k = keyer_of(&e, "ts").await;
    let mut conn = e.conn().await;
    let sql = "SELECT id, v FROM ts ORDER BY id";
    conn.query_drop("SET time_zone = '+00:00'").await.unwrap();
    let utc = select_keys(&mut conn, &mut k, sql).await;
    // The server's own epoch, in the binlog's form (`sec.ffffff`).
    let epoch = select_keys(
        &mut conn,
        &mut k,
        "SELECT id, CAST(UNIX_TIMESTAMP(v) AS CHAR) FROM ts ORDER BY id",
    )
    .await;
    assert_eq!(utc, epoch);
    conn.query_drop("SET time_zone = '+05:30'").await.unwrap();
    let zoned = select_keys(&mut conn, &mut k, sql).await;
    assert!(
        zoned.iter().zip(&utc).all(|(z, u)| z != u),
        "a zoned calendar is another key"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enum_member_outside_ascii_in_latin1_is_refused_not_guessed() {
    let e = env("keys_enum1").await;
    e.src.sql_in(
        &e.db,
        "SET NAMES utf8mb4; CREATE TABLE en (id INT PRIMARY KEY, \
         v ENUM('á','b') CHARACTER SET latin1 NOT NULL); INSERT INTO en VALUES (1, 'á'), (2, 'b')",
    );
    let k = keyer_of(&e, "en").await;
    let mut conn = e.conn().await;
    conn.query_drop("SET NAMES utf8mb4, character_set_results = NULL")
        .await
        .unwrap();
    let rows: Vec<(i64, mysql_async::Value)> = conn
        .exec("SELECT id, v FROM en ORDER BY id", ())
        .await
        .unwrap();
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|(i, v)| vec![SqlValue::Int(i), v.into()])
        .collect();
    // COLUMN_TYPE names the member in UTF-8, the column's own bytes are latin1 0xE1.
    assert_eq!(rows[0][1], SqlValue::Bytes(vec![0xE1]));
    let err = k.sort_key(&rows[0]).unwrap_err();
    assert!(err.to_string().contains("not a member"), "{err}");
    assert!(k.sort_key(&rows[1]).is_ok());
}
