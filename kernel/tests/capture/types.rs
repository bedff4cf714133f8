//! Value fidelity (DESIGN §10): values in L are the server's own values, checked against
//! what the server itself reports for the same rows, under a non-UTC global and session
//! time zone.
use crate::support::*;
use harness::{Server, ServerOpts};
use kernel::capture::Reader;
use kernel::control::IntentKind;
use kernel::log::RecordBody;
use kernel::value::SqlValue;

const DDL: &str = "CREATE TABLE ty (
    id BIGINT NOT NULL PRIMARY KEY,
    dt DATETIME(6) NULL,
    ts TIMESTAMP(6) NULL,
    de DECIMAL(20,6) NULL,
    dn DECIMAL(10,3) NULL,
    j JSON NULL,
    bl BLOB NULL,
    bi BINARY(16) NULL,
    vc VARCHAR(32) NULL,
    u BIGINT UNSIGNED NULL,
    d DATE NULL,
    tm TIME(3) NULL,
    f DOUBLE NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4";

const ROWS: &str = "SET NAMES utf8mb4; SET time_zone = '+05:30';
INSERT INTO ty VALUES
 (1, '2024-02-29 23:59:59.123456', '2024-03-01 01:02:03.456789', '12345678901234.123456',
  '-0.500', '{\"a\": [1, 2.5, \"x\"], \"b\": null}', X'00FF0000', UNHEX('01020000000000000000000000000000'),
  '', 18446744073709551615, '1999-12-31', '-838:59:59.000', 1.5),
 (2, '1970-01-01 00:00:00.000001', '2038-01-19 03:14:07.999999', '0.000001', '0.000',
  '[]', X'', UNHEX('00000000000000000000000000000000'), 'trailing  ', 0, '2024-02-29',
  '12:34:56.789', -0.0),
 (3, NULL, NULL, NULL, NULL, NULL, NULL, UNHEX('FF'), 'ünï©ødé 😀', NULL, NULL, NULL, NULL),
 (4, '2024-01-01 00:00:00', '2024-01-01 00:00:00', '1', '1', '\"s\"', NULL, NULL, NULL, 1, NULL, NULL, NULL)";

fn hex(v: &SqlValue) -> String {
    match v {
        SqlValue::Bytes(b) => hex::encode_upper(b),
        SqlValue::Null => "NULL".into(),
        other => panic!("not bytes: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_are_the_servers_own() {
    let src = leak(Server::start_private(
        ServerOpts::source().config("default_time_zone='+03:00'"),
    ));
    let e = env_on(src, harness::shared_target(), "cap_types").await;
    e.src.sql_in(&e.db, DDL);
    e.init_stream(1000).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "ty")]).await);
    e.intent(1, IntentKind::B).await;
    e.src.sql_in(&e.db, ROWS);
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();

    let recs = all_records(&e.pool, &e.stream).await;
    let mut rows = std::collections::BTreeMap::new();
    for r in &recs {
        if let RecordBody::Chunk(c) = &r.record.body {
            assert!(c.pauses.is_empty(), "{:?}", c.pauses);
            for ch in &c.changes {
                let a = ch.after.clone().unwrap();
                rows.insert(a[0].as_key().unwrap(), a);
            }
        }
    }
    assert_eq!(rows.len(), 4);
    // What the server says, column by column, in forms that do not depend on a decoder.
    let server = cli_rows(
        e.src,
        &e.db,
        "SELECT id, UNIX_TIMESTAMP(ts), de, dn, j, HEX(bl), HEX(bi), HEX(vc), vc IS NULL, u \
         FROM ty ORDER BY id",
    );
    for (id, row) in &rows {
        let s = &server[id];
        let field = |i: usize| s[i].as_str();
        match &row[2] {
            SqlValue::Null => assert_eq!(field(1), "NULL"),
            v => {
                // TIMESTAMP is the epoch (UTC), whatever the zones; ".000000" is dropped.
                let t = text(v);
                let server_ts = field(1).trim_end_matches(".000000");
                assert_eq!(t, server_ts, "ts of {id}");
            }
        }
        for (col, i) in [(3, 2), (4, 3), (5, 4), (9, 9)] {
            assert_eq!(text(&row[col]), field(i), "column {col} of row {id}");
        }
        assert_eq!(hex(&row[6]), field(5), "blob {id}");
        if field(6) != "NULL" {
            assert_eq!(hex(&row[7]), field(6), "binary(16) of {id}");
            assert_eq!(hex(&row[7]).len(), 32, "binary(16) is padded back");
        }
        if field(8) == "1" {
            assert_eq!(row[8], SqlValue::Null, "NULL stays NULL");
        } else {
            assert_eq!(hex(&row[8]), field(7), "varchar of {id}");
        }
    }
    // DATETIME is a calendar value: never shifted by either time zone.
    assert_eq!(
        rows[&1][1],
        SqlValue::Date(2024, 2, 29, 23, 59, 59, 123_456)
    );
    assert_eq!(rows[&2][1], SqlValue::Date(1970, 1, 1, 0, 0, 0, 1));
    assert_eq!(rows[&1][8], SqlValue::Bytes(Vec::new()), "'' is not NULL");
    assert_eq!(rows[&2][8], SqlValue::Bytes(b"trailing  ".to_vec()));
    assert_eq!(
        rows[&3][8],
        SqlValue::Bytes("ünï©ødé 😀".as_bytes().to_vec())
    );
    assert_eq!(rows[&1][9], SqlValue::UInt(u64::MAX));
    assert_eq!(
        rows[&3][7],
        SqlValue::Bytes({
            let mut b = vec![0xff];
            b.resize(16, 0);
            b
        })
    );
    assert_eq!(
        rows[&1][3],
        SqlValue::Bytes(b"12345678901234.123456".to_vec())
    );
    assert_eq!(rows[&1][4], SqlValue::Bytes(b"-0.500".to_vec()));
    assert_eq!(rows[&2][4], SqlValue::Bytes(b"0.000".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_supported_kind_passes_the_table_map_check() {
    let e = env("cap_kinds").await;
    e.src.sql_in(
        &e.db,
        "CREATE TABLE k (id INT NOT NULL PRIMARY KEY, ti TINYINT UNSIGNED, si SMALLINT, \
         mi MEDIUMINT, bi BIGINT, fl FLOAT, db DOUBLE, bt BIT(5), da DATE, tm TIME, \
         yr YEAR, ch CHAR(4), vb VARBINARY(8), tt TINYTEXT, tx TEXT, mt MEDIUMTEXT, \
         lt LONGTEXT, tb TINYBLOB, mb MEDIUMBLOB, lb LONGBLOB, en ENUM('a','b','c'), \
         st SET('x','y','z'), js JSON, g POINT, u UUID, i4 INET4, i6 INET6, \
         gv INT AS (id * 2) VIRTUAL, gs INT AS (id * 3) STORED) ENGINE=InnoDB \
         DEFAULT CHARSET=utf8mb4",
    );
    e.init_stream(1000).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "k")]).await);
    e.intent(1, IntentKind::B).await;
    e.src
        .sql_in(&e.db, "INSERT INTO k (id, mi) VALUES (2, -1), (3, 8388607)");
    e.src.sql_in(
        &e.db,
        "INSERT INTO k VALUES (1, 255, -3, -8388608, 9, 1.5, 2.5, b'10101', '2024-02-29', \
         '-12:00:01', 2155, 'ab', X'0001', 'a', 'b', 'c', 'd', X'01', X'02', X'03', 'c', \
         'x,z', '{\"k\": 1}', NULL, NULL, NULL, NULL, DEFAULT, DEFAULT)",
    );
    // YEAR 0000, a POINT with SRID 4326, binary forms ending in 0x00 (the binlog drops
    // those bytes), and the generated columns' values in the row image.
    e.src.sql_in(
        &e.db,
        "INSERT INTO k (id, yr, g, u, i4, i6) VALUES (4, 0, ST_GeomFromText('POINT(1 2)', \
         4326), 'ffffffff-ffff-ffff-ffff-ffffffffff00', '255.255.255.0', '::')",
    );
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();
    assert!(kernel::log::pauses(&e.pool, &e.stream)
        .await
        .unwrap()
        .is_empty());
    let recs = all_records(&e.pool, &e.stream).await;
    let rows: std::collections::BTreeMap<i64, Vec<SqlValue>> = recs
        .iter()
        .flat_map(|r| match &r.record.body {
            RecordBody::Chunk(c) => c.changes.clone(),
            _ => Vec::new(),
        })
        .map(|c| {
            let a = c.after.unwrap();
            (a[0].as_key().unwrap(), a)
        })
        .collect();
    assert_eq!(text(&rows[&2][3]), "-1", "signed MEDIUMINT -1");
    assert_eq!(text(&rows[&3][3]), "8388607");
    let row = rows[&1].clone();
    assert_eq!(row[8], SqlValue::Date(2024, 2, 29, 0, 0, 0, 0));
    assert_eq!(
        row[9],
        SqlValue::Time(true, 0, 12, 0, 1, 0),
        "negative TIME"
    );
    assert_eq!(
        (row[5].clone(), row[6].clone()),
        (SqlValue::Float(1.5), SqlValue::Double(2.5))
    );
    assert_eq!(row.len(), 29);
    let r4 = rows[&4].clone();
    assert_eq!(r4[10], SqlValue::Int(0), "YEAR 0000 (the binlog's 1900)");
    let point = "e61000000101000000000000000000f03f0000000000000040";
    assert_eq!(
        r4[23],
        SqlValue::Bytes(hex::decode(point).unwrap()),
        "SRID + WKB"
    );
    let mut uuid = vec![0xff; 16];
    uuid[15] = 0;
    assert_eq!(r4[24], SqlValue::Bytes(uuid), "UUID as its 16 bytes");
    assert_eq!(r4[25], SqlValue::Bytes(vec![255, 255, 255, 0]), "INET4");
    assert_eq!(r4[26], SqlValue::Bytes(vec![0; 16]), "INET6 ::");
    assert_eq!(
        (r4[27].clone(), r4[28].clone()),
        (SqlValue::Int(8), SqlValue::Int(12))
    );
    assert_eq!(text(&row[1]), "255", "TINYINT UNSIGNED keeps its value");
    assert_eq!(text(&row[3]), "-8388608");
    assert_eq!(row[7], SqlValue::Bytes(vec![0b10101]), "BIT as its bitmask");
    assert_eq!(text(&row[10]), "2155");
    assert_eq!(text(&row[11]), "ab");
    assert_eq!(row[20], SqlValue::Int(3), "ENUM as its index");
    assert_eq!(row[21], SqlValue::UInt(0b101), "SET as its bit value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wide_decimals_millisecond_timestamps_and_long_chars_are_exact() {
    let e = env("cap_wide").await;
    e.src.sql_in(
        &e.db,
        "CREATE TABLE w (id INT NOT NULL PRIMARY KEY, dz DECIMAL(65,30), t3 TIMESTAMP(3) NULL, \
         d3 DATETIME(3), c100 CHAR(100)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
    );
    e.init_stream(1000).await;
    let reader = Reader::start(e.pool.clone(), e.cfg(), e.set_for(&[(1, "w")]).await);
    e.intent(1, IntentKind::B).await;
    e.src.sql_in(
        &e.db,
        "SET NAMES utf8mb4; SET time_zone='+00:00'; INSERT INTO w VALUES \
         (1, '-12345678901234567890123456789012345.123456789012345678901234567890', \
          '2024-02-29 12:00:00.123', '2024-02-29 12:00:00.120', REPEAT('é', 100)), \
         (2, '0.000000000000000000000000000001', '1970-01-01 00:00:01.000', \
          '1000-01-01 00:00:00.000', 'x')",
    );
    let f = e.intent(1, IntentKind::F).await;
    e.wait_marker(&f, 30).await;
    reader.stop().await.unwrap();
    assert!(kernel::log::pauses(&e.pool, &e.stream)
        .await
        .unwrap()
        .is_empty());
    let recs = all_records(&e.pool, &e.stream).await;
    let rows: Vec<Vec<SqlValue>> = recs
        .iter()
        .flat_map(|r| match &r.record.body {
            RecordBody::Chunk(c) => c.changes.clone(),
            _ => Vec::new(),
        })
        .map(|c| c.after.unwrap())
        .collect();
    let server = cli_rows(
        e.src,
        &e.db,
        "SELECT id, dz, UNIX_TIMESTAMP(t3), HEX(c100) FROM w ORDER BY id",
    );
    for r in &rows {
        let s = &server[&r[0].as_key().unwrap()];
        assert_eq!(text(&r[1]), s[1], "DECIMAL(65,30)");
        let ts = text(&r[2]);
        assert_eq!(
            ts.parse::<f64>().unwrap(),
            s[2].parse::<f64>().unwrap(),
            "TIMESTAMP(3)"
        );
        assert_eq!(
            hex::encode_upper(match &r[4] {
                SqlValue::Bytes(b) => b.clone(),
                _ => Vec::new(),
            }),
            s[3]
        );
    }
    assert_eq!(rows[0][3], SqlValue::Date(2024, 2, 29, 12, 0, 0, 120_000));
}
