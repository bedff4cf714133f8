//! Shared setup of the ledger's server tests: a test target table with an audit trigger
//! that counts business DML (its counter table is separate from T and from the target).
#![allow(dead_code, clippy::unwrap_used)]
use harness::Server;
use kernel::ids::{Attempt, Generation, JobId, PageNo, WindowId};
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::page::{FinalPage, PageKey};
use ledger::target::{self, TargetCtx};

pub fn col(name: &str, kind: ColumnKind) -> ColumnDef {
    ColumnDef {
        name: name.into(),
        kind,
        column_type: String::new(),
        unsigned: false,
        nullable: kind != ColumnKind::BigInt,
        char_len: None,
        numeric_precision: None,
        numeric_scale: None,
        datetime_precision: None,
        charset: None,
        collation: None,
    }
}

pub const DDL: &str = "CREATE TABLE t (
    id BIGINT NOT NULL PRIMARY KEY,
    name VARCHAR(100) NULL,
    amount DECIMAL(12,3) NULL,
    at DATETIME(6) NULL,
    ts TIMESTAMP(6) NULL DEFAULT NULL,
    bin VARBINARY(16) NULL
) ENGINE=InnoDB";

pub fn schema(db: &str) -> SealedSchema {
    SealedSchema {
        database: db.into(),
        table: "t".into(),
        columns: vec![
            col("id", ColumnKind::BigInt),
            col("name", ColumnKind::Varchar),
            col("amount", ColumnKind::Decimal),
            col("at", ColumnKind::Datetime),
            col("ts", ColumnKind::Timestamp),
            col("bin", ColumnKind::Varbinary),
        ],
        pk: 0,
    }
}

/// Creates `t`, the counter table and the three audit triggers in a fresh database.
pub fn fresh_target(server: &Server, prefix: &str) -> String {
    let db = server.fresh_db(prefix);
    server.sql_in(&db, DDL);
    server.sql_in(
        &db,
        "CREATE TABLE dml_audit (n BIGINT NOT NULL); INSERT INTO dml_audit VALUES (0);
         CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW UPDATE dml_audit SET n = n + 1;
         CREATE TRIGGER t_bu BEFORE UPDATE ON t FOR EACH ROW UPDATE dml_audit SET n = n + 1;
         CREATE TRIGGER t_bd BEFORE DELETE ON t FOR EACH ROW UPDATE dml_audit SET n = n + 1;",
    );
    db
}

/// Business DML executions counted by the triggers.
pub fn dml_count(server: &Server, db: &str) -> u64 {
    server
        .sql_in(db, "SELECT n FROM dml_audit")
        .parse()
        .unwrap()
}

/// The target rows as the server prints them in UTC (independent of our decoding).
pub fn dump(server: &Server, db: &str) -> String {
    server.sql_in(
        db,
        "SET time_zone = '+00:00'; SELECT id, name, amount, at, ts, HEX(bin) FROM t ORDER BY id",
    )
}

pub fn row(id: i64, name: &str) -> Row {
    vec![
        SqlValue::Int(id),
        SqlValue::Bytes(name.as_bytes().to_vec()),
        SqlValue::Bytes(format!("{id}.125").into_bytes()),
        SqlValue::Date(2026, 10, 18, 1, 2, 3, 654_321),
        SqlValue::Date(2024, 2, 29, 12, 34, 56, 789_012),
        SqlValue::Bytes(vec![0, 1, 0xff, 0]),
    ]
}

pub fn page(job: u64, window: u32, page: u32, rows: Vec<Row>) -> FinalPage {
    FinalPage {
        key: PageKey {
            job: JobId(job),
            generation: Generation(1),
            window: WindowId(window),
            attempt: Attempt(1),
            page: PageNo(page),
        },
        rows,
    }
}

pub fn ctx(db: &str, job: u64, token: u64) -> TargetCtx {
    TargetCtx {
        job: JobId(job),
        generation: Generation(1),
        schema: schema(db),
        token,
    }
}

pub fn opts(server: &Server, db: &str) -> mysql_async::Opts {
    target::target_opts(&server.url_db(db)).unwrap()
}

/// Opens a connection, creates T and claims it for `ctx`.
pub async fn claimed(server: &Server, db: &str, ctx: &TargetCtx) -> mysql_async::Conn {
    let mut c = ledger::apply::connect(&opts(server, db)).await.unwrap();
    target::ensure_ledger_tables(&mut c, db).await.unwrap();
    target::claim(&mut c, ctx).await.unwrap();
    c
}

pub fn code(e: &kernel::Error) -> Option<kernel::error::DefiniteCode> {
    e.as_definite().map(|d| d.code)
}
