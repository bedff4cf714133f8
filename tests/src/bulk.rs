//! The 50-table schema of the bulk install test (issue 17 item 3): tables of mixed keys and
//! types that install must take, tables it must refuse (each with a word of the cause its
//! refusal names), the targets in the way, and a small writer over the installed tables.
use harness::Server;
use mysql_async::prelude::Queryable;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Rows each table starts with.
pub const ROWS: u32 = 200;

/// One kind of table: its definition, the columns a row is written by, the key the
/// comparator keys rows by (named by the test, not by backfill's choice).
pub struct Shape {
    pub prefix: &'static str,
    pub count: usize,
    pub ddl: &'static str,
    pub cols: &'static str,
    pub values: fn(u32) -> String,
    pub key: &'static [&'static str],
}

pub const SHAPES: &[Shape] = &[
    Shape {
        prefix: "int_pk",
        count: 10,
        ddl: "id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL, name VARCHAR(40) CHARACTER SET \
              utf8mb4 COLLATE utf8mb4_unicode_ci NULL, amount DECIMAL(12,3) NULL, at \
              DATETIME(6) NULL, KEY by_name (name(10)), KEY by_at (at)",
        cols: "id, v, name, amount, at",
        values: |i| format!("({i}, 0, 'név {i}', {i}.125, '2024-01-01 00:00:00.{i:06}')"),
        key: &["id"],
    },
    Shape {
        prefix: "composite",
        count: 7,
        ddl: "id INT NOT NULL, tag VARCHAR(12) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT \
              NULL, v INT NOT NULL, note TEXT NULL, PRIMARY KEY (id, tag)",
        cols: "id, tag, v, note",
        values: |i| format!("({i}, 'T{}', 0, REPEAT('x', {}))", i % 3, i % 50),
        key: &["id", "tag"],
    },
    Shape {
        prefix: "unique_nn",
        count: 6,
        ddl: "id INT NOT NULL, v INT NOT NULL, code CHAR(8) CHARACTER SET latin1 NULL, \
              UNIQUE KEY u_id (id)",
        cols: "id, v, code",
        values: |i| format!("({i}, 0, 'c{}')", i % 97),
        key: &["id"],
    },
    Shape {
        prefix: "str_pk",
        count: 6,
        ddl: "code VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL \
              PRIMARY KEY, id INT NOT NULL, v INT NOT NULL, bin VARBINARY(16) NULL, KEY by_id (id)",
        cols: "code, id, v, bin",
        values: |i| {
            format!(
                "('Code-{i}', {i}, 0, UNHEX('{:08X}'))",
                i.wrapping_mul(2654435761)
            )
        },
        key: &["code"],
    },
    Shape {
        prefix: "generated",
        count: 6,
        ddl: "id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v INT NOT NULL, a INT NOT NULL, twice \
              BIGINT AS (a * 2) STORED, label VARCHAR(20) AS (CONCAT('L', a)) VIRTUAL, \
              KEY by_twice (twice)",
        cols: "id, v, a",
        values: |i| format!("({i}, 0, {})", i * 7),
        key: &["id"],
    },
    Shape {
        prefix: "types",
        count: 5,
        ddl: "id INT NOT NULL PRIMARY KEY, v INT NOT NULL, e ENUM('a','b','c') NULL, s \
              SET('x','y') NULL, d DATE NULL, tm TIME(3) NULL, f DOUBLE NULL, j JSON NULL, \
              u_code VARCHAR(10) NULL, UNIQUE KEY u_code (u_code)",
        cols: "id, v, e, s, d, tm, f, j, u_code",
        values: |i| {
            format!(
                "({i}, 0, '{}', 'x,y', '2024-02-{:02}', '12:00:{:02}.5', {i}.5e-3, \
                 '{{\"n\": {i}}}', 'u{i}')",
                ["a", "b", "c"][i as usize % 3],
                i % 28 + 1,
                i % 60
            )
        },
        key: &["id"],
    },
    Shape {
        prefix: "fk_child",
        count: 3,
        ddl: "id INT NOT NULL PRIMARY KEY, v INT NOT NULL, parent_id BIGINT NULL, FOREIGN KEY \
              (parent_id) REFERENCES int_pk_00 (id) ON DELETE RESTRICT",
        cols: "id, v, parent_id",
        values: |i| format!("({i}, 0, {})", i % 5 + 1),
        key: &["id"],
    },
];

/// A table that must be refused: name, columns, engine, a row, and a word of the cause
/// its refusal must name.
pub struct Refused {
    pub name: &'static str,
    pub columns: &'static str,
    pub engine: &'static str,
    pub row: &'static str,
    pub cause: &'static str,
}

pub const REFUSED: &[Refused] = &[
    Refused {
        name: "nokey_a",
        columns: "id INT NULL, v INT NOT NULL",
        engine: "InnoDB",
        row: "(1, 1)",
        cause: "key",
    },
    Refused {
        name: "nokey_b",
        columns: "id INT NULL, v INT NOT NULL, UNIQUE KEY u (id)",
        engine: "InnoDB",
        row: "(1, 1)",
        cause: "key",
    },
    Refused {
        name: "prefix_key",
        columns: "name VARCHAR(100) NOT NULL, v INT NOT NULL, PRIMARY KEY (name(10))",
        engine: "InnoDB",
        row: "('a', 1)",
        cause: "prefix",
    },
    Refused {
        name: "full_target",
        columns: "id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL",
        engine: "InnoDB",
        row: "(1, 1)",
        cause: "is not empty",
    },
    Refused {
        name: "wrong_target",
        columns: "id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL",
        engine: "InnoDB",
        row: "(1, 1)",
        cause: "definition differs",
    },
    Refused {
        name: "myisam",
        columns: "id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL",
        engine: "MyISAM",
        row: "(1, 1)",
        cause: "MyISAM",
    },
    Refused {
        name: "cascade_child",
        columns: "id INT NOT NULL PRIMARY KEY, v INT NOT NULL, parent_id BIGINT NULL, FOREIGN \
                  KEY (parent_id) REFERENCES int_pk_00 (id) ON DELETE CASCADE",
        engine: "InnoDB",
        row: "(1, 1, 1)",
        cause: "CASCADE",
    },
];

/// An installed table: its name and the comparator's key.
pub struct Table {
    pub name: String,
    pub key: &'static [&'static str],
}

/// Creates the 50 source tables (rows in each) and the target database with the targets
/// that are in the way (one non-empty, one of another definition) and one empty target
/// made by hand with the right definition (used as it is).
pub fn schema(source: &Server, target: &Server) -> (String, String, Vec<Table>) {
    let sdb = source.fresh_db("bulk_s");
    let tdb = target.fresh_db("bulk_t");
    let mut installed = Vec::new();
    for shape in SHAPES {
        for n in 0..shape.count {
            let name = format!("{}_{n:02}", shape.prefix);
            source.sql_in(
                &sdb,
                &format!("CREATE TABLE {name} ({}) ENGINE=InnoDB", shape.ddl),
            );
            let rows: Vec<String> = (1..=ROWS).map(shape.values).collect();
            source.sql_in(
                &sdb,
                &format!(
                    "INSERT INTO {name} ({}) VALUES {}",
                    shape.cols,
                    rows.join(", ")
                ),
            );
            installed.push(Table {
                name,
                key: shape.key,
            });
        }
    }
    for r in REFUSED {
        source.sql_in(
            &sdb,
            &format!(
                "CREATE TABLE {} ({}) ENGINE={}; INSERT INTO {} VALUES {}",
                r.name, r.columns, r.engine, r.name, r.row
            ),
        );
    }
    target.sql_in(
        &tdb,
        "CREATE TABLE full_target (id BIGINT NOT NULL PRIMARY KEY, v INT NOT NULL) \
         ENGINE=InnoDB; INSERT INTO full_target VALUES (42, 42); \
         CREATE TABLE wrong_target (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL) \
         ENGINE=InnoDB",
    );
    let made = SHAPES[0].ddl;
    target.sql_in(
        &tdb,
        &format!("CREATE TABLE int_pk_01 ({made}) ENGINE=InnoDB"),
    );
    (sdb, tdb, installed)
}

/// A writer touching random installed tables (inserts of new keys, updates of `v`,
/// deletes of rows no foreign key points at), one statement each 20 ms (about 50 a
/// second); returns the statements run.
pub async fn writer(url: String, tables: Vec<String>, stop: Arc<AtomicBool>) -> u64 {
    let mut conn = mysql_async::Conn::from_url(url.as_str())
        .await
        .expect("writer connects");
    let mut rng = rand::rngs::StdRng::seed_from_u64(17);
    let mut next_id = 10_000_u32;
    let mut done = 0;
    while !stop.load(Ordering::SeqCst) {
        let t = &tables[rng.random_range(0..tables.len())];
        let shape = SHAPES
            .iter()
            .find(|s| t.starts_with(s.prefix))
            .expect("a shape");
        let sql = match rng.random_range(0..3) {
            0 => {
                next_id += 1;
                format!(
                    "INSERT INTO {t} ({}) VALUES {}",
                    shape.cols,
                    (shape.values)(next_id)
                )
            }
            1 => format!(
                "UPDATE {t} SET v = v + 1 WHERE id = {}",
                rng.random_range(1..=ROWS)
            ),
            _ => format!("DELETE FROM {t} WHERE id = {}", rng.random_range(21..=ROWS)),
        };
        conn.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        done += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    done
}
