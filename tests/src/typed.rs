//! The table of every column type of issue 15 item 2 for the end-to-end suites: spatial
//! types with SRIDs, UUID, INET4, INET6, VIRTUAL and STORED generated columns, an
//! INVISIBLE column, JSON, negative and > 24 h TIME, zero dates and zero-in-date values,
//! BIT(1), BIT(13), BIT(64), ENUM members with commas and quotes, SET members with
//! quotes, DECIMAL(65,30), FLOAT and DOUBLE boundaries, YEAR 0000, TIMESTAMP(6) and
//! DATETIME(6), and Sakila's `address.location` (a NOT NULL POINT under a SPATIAL KEY).
//! Rows take one of [`VARIANTS`] value sets (boundary values; one all NULL),
//! and a [`writer`] inserts, deletes and rewrites every column of rows to another variant,
//! and bumps `n` (which the generated columns read).
use crate::case::Case;
use crate::keyed::Writing;
use mysql_async::prelude::Queryable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Keys 0..SPACE; the even ones are filled before install.
pub const SPACE: u32 = 240;

/// The table: key, `n`, then [`COLUMNS`] (two generated columns after `i6`, which the
/// writer never names).
pub const DDL: &str = "CREATE TABLE t (
    id INT NOT NULL PRIMARY KEY,
    n INT NOT NULL,
    g GEOMETRY NULL, pt POINT NULL, ls LINESTRING NULL, pg POLYGON NULL,
    mpt MULTIPOINT NULL, mls MULTILINESTRING NULL, mpg MULTIPOLYGON NULL,
    gc GEOMETRYCOLLECTION NULL,
    u UUID NULL, i4 INET4 NULL, i6 INET6 NULL,
    gv INT AS (n * 2) VIRTUAL,
    gs VARCHAR(80) AS (CONCAT('s', n, '/', IFNULL(CAST(i4 AS CHAR), '-'))) STORED,
    hid INT NULL INVISIBLE,
    j JSON NULL,
    tm TIME(6) NULL, d DATE NULL, dt DATETIME(6) NULL, ts TIMESTAMP(6) NULL DEFAULT NULL,
    b1 BIT(1) NULL, b13 BIT(13) NULL, b64 BIT(64) NULL,
    e ENUM('a,b', 'it''s', 'x\"y', 'plain') NULL,
    s SET('p', 'q''r', 's\"t') NULL,
    de DECIMAL(65,30) NULL,
    f FLOAT NULL, db DOUBLE NULL,
    y YEAR NULL,
    loc POINT NOT NULL,
    SPATIAL KEY idx_location (loc)
) ENGINE=InnoDB";

/// The columns the writer names, after `id, n` (every non-generated one).
pub const COLUMNS: &[&str] = &[
    "g", "pt", "ls", "pg", "mpt", "mls", "mpg", "gc", "u", "i4", "i6", "hid", "j", "tm", "d", "dt",
    "ts", "b1", "b13", "b64", "e", "s", "de", "f", "db", "y", "loc",
];

fn geo(wkt: &str, srid: u32) -> String {
    format!("ST_GeomFromText('{wkt}', {srid})")
}

/// The value sets but the all-NULL one: the SRID and first x of their geometries, then
/// their values of `u` .. `y`.
const SCALARS: [(u32, u32, [&str; 18]); 4] = [
    // Minimums, zero dates, SRID 0.
    (
        0,
        1,
        [
            "'00000000-0000-0000-0000-000000000000'",
            "'0.0.0.0'",
            "'::'",
            "0",
            r#"'{"a": 1,  "b": [1, 2.50, "x\u00e9"], "c" : null}'"#,
            "'-838:59:59.999999'",
            "'0000-00-00'",
            "'0000-00-00 00:00:00'",
            "'1970-01-02 00:00:00.000001'",
            "b'0'",
            "0",
            "0",
            "'a,b'",
            "''",
            "'-99999999999999999999999999999999999.999999999999999999999999999999'",
            "-3.40282e38",
            "-1.7976931348623157e308",
            "0",
        ],
    ),
    // Maximums, zero-in-date values, values whose binary form ends in 0x00.
    (
        4326,
        2,
        [
            "'ffffffff-ffff-ffff-ffff-ffffffffff00'",
            "'255.255.255.0'",
            "'2001:db8::ff00:42:8300'",
            "-2147483648",
            "'[]'",
            "'838:59:59.999999'",
            "'2024-00-15'",
            "'2024-02-00 12:00:00.5'",
            "'2038-01-18 03:14:07.999999'",
            "b'1'",
            "b'1000000000001'",
            "0xFFFFFFFFFFFFFFFF",
            "'it''s'",
            "'p,q''r,s\"t'",
            "'99999999999999999999999999999999999.999999999999999999999999999999'",
            "1.0000001",
            "0.1e0 + 0.2e0",
            "2155",
        ],
    ),
    // Values in between: a version-1 UUID, an IPv4-mapped address, subnormals.
    (
        3857,
        3,
        [
            "'6ccd780c-baba-1026-9564-5b8c656024db'",
            "'1.2.3.4'",
            "'::ffff:1.2.3.4'",
            "7",
            "'null'",
            "'-00:00:00.000001'",
            "'9999-12-31'",
            "'9999-12-31 23:59:59.999999'",
            "'2000-02-29 12:34:56.123456'",
            "1",
            "b'0000000000001'",
            "b'1000000000000000000000000000000000000000000000000000000000000001'",
            "'x\"y'",
            "'q''r'",
            "'0.000000000000000000000000000001'",
            "1.0000002",
            "5e-324",
            "1901",
        ],
    ),
    // A version-4 UUID, > 24 h TIME, a DOUBLE one bit above 1.
    (
        4326,
        5,
        [
            "'12345678-1234-4234-8234-123456789abc'",
            "'10.0.0.0'",
            "'1::'",
            "NULL",
            r#"'{"k":"v\\"q"}'"#,
            "'100:00:00.5'",
            "'0000-01-00'",
            "'2024-00-00 00:00:00'",
            "NULL",
            "NULL",
            "8191",
            "1",
            "'plain'",
            "'s\"t,p'",
            "'-0.5'",
            "16777216",
            "1.0000000000000002e0",
            "2000",
        ],
    ),
];

/// The value sets, SQL expressions in [`COLUMNS`] order.
pub fn variants() -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let geos = |srid: u32, k: u32| {
        vec![
            geo(&format!("POINT({k} -2.5)"), srid),
            geo("POINT(1e300 -0.000001)", srid),
            geo(&format!("LINESTRING(0 0,1 1,{k} 5)"), srid),
            geo("POLYGON((0 0,10 0,10 10,0 10,0 0),(2 2,3 2,3 3,2 2))", srid),
            geo("MULTIPOINT(1 1,2 2)", srid),
            geo("MULTILINESTRING((0 0,1 1),(2 2,3 3))", srid),
            geo(
                "MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))",
                srid,
            ),
            geo("GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))", srid),
        ]
    };
    // `loc` as Sakila's address.location: a NOT NULL POINT under a SPATIAL KEY.
    let row = |g: Vec<String>, rest: &[&str]| {
        let mut v = g;
        v.extend(s(rest));
        v.push(geo(&format!("POINT({} 0.5)", v.len()), 0));
        v
    };
    let mut sets: Vec<Vec<String>> = SCALARS
        .iter()
        .map(|(srid, k, rest)| row(geos(*srid, *k), rest))
        .collect();
    // NULL in every nullable column.
    let mut nulls = vec!["NULL".to_string(); COLUMNS.len() - 1];
    nulls.push(geo("POINT(-122.4194 37.7749)", 0));
    sets.insert(3, nulls);
    sets
}

/// `(id, n, values of variant id % len)` of row `id`.
fn values(id: u32, n: i64, vs: &[Vec<String>]) -> String {
    let v = &vs[id as usize % vs.len()];
    format!("({id}, {n}, {})", v.join(", "))
}

/// `INSERT INTO t (id, n, <COLUMNS>)` head.
fn insert_head() -> String {
    format!("INSERT INTO t (id, n, {}) VALUES ", COLUMNS.join(", "))
}

/// The INSERT of row `id` with the values of variant `k`.
pub fn insert_as(id: u32, k: usize) -> String {
    let vs = variants();
    format!("{}({id}, 0, {})", insert_head(), vs[k].join(", "))
}

/// The fill: every even key, one statement.
pub fn fill() -> Vec<String> {
    let vs = variants();
    let rows: Vec<String> = (0..SPACE)
        .step_by(2)
        .map(|i| values(i, i64::from(i), &vs))
        .collect();
    vec![format!("{}{}", insert_head(), rows.join(", "))]
}

/// The statements of one writer step.
pub fn step(op: u32, a: u32, b: u32, vs: &[Vec<String>]) -> Vec<String> {
    let set = |k: u32| {
        let v = &vs[k as usize % vs.len()];
        COLUMNS
            .iter()
            .zip(v)
            .map(|(c, x)| format!("{c} = {x}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match op % 5 {
        0 => vec![format!(
            "INSERT IGNORE INTO t (id, n, {}) VALUES {}",
            COLUMNS.join(", "),
            values(a, 0, vs)
        )],
        1 => vec![format!("UPDATE t SET n = n + 1, {} WHERE id = {a}", set(b))],
        2 => vec![format!("DELETE FROM t WHERE id = {a}")],
        3 => vec![
            "BEGIN".into(),
            format!("DELETE FROM t WHERE id = {a}"),
            format!(
                "INSERT INTO t (id, n, {}) VALUES {}",
                COLUMNS.join(", "),
                values(b, -1, vs).replacen(&format!("({b},"), &format!("({a},"), 1)
            ),
            "COMMIT".into(),
        ],
        _ => vec![format!("UPDATE t SET n = n - 1 WHERE id = {a}")],
    }
}

/// Changes the source table with [`step`]s until `stop`; returns the steps done.
pub async fn writer(url: String, stop: Arc<AtomicBool>) -> u64 {
    use rand::Rng;
    let vs = variants();
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        let (op, a, b) = {
            let mut r = rand::rng();
            (
                r.random_range(0..5),
                r.random_range(0..SPACE),
                r.random_range(0..SPACE),
            )
        };
        for sql in step(op, a, b, &vs) {
            c.query_drop(&sql)
                .await
                .unwrap_or_else(|e| panic!("typed writer: {e}\n{sql}"));
        }
        n += 1;
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    c.disconnect().await.unwrap();
    n
}

/// A [`writer`] on its own task.
pub fn writing(c: &Case) -> Writing {
    let url = c.source.url_db(&c.sdb);
    Writing::spawn(|stop| writer(url, stop))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_variant_has_a_value_per_column() {
        for (k, v) in super::variants().iter().enumerate() {
            assert_eq!(v.len(), super::COLUMNS.len(), "variant {k}");
        }
    }
}
