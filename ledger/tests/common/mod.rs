//! The one support module of ledger's test binaries (`pure`, `server`, `crash`): builders
//! of schemas, rows, pages, change identities and group ends; a test target table with
//! audit triggers that count business DML (their counter table is separate from T and
//! from the target); state store databases; the child processes of the crash tests.
#![allow(dead_code, clippy::unwrap_used)]
use harness::Server;
use kernel::change::{ChangeId, GroupEnd, Op};
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::key::Keyer;
use kernel::position::{BinlogPos, Gtid};
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::{Row, SqlValue};
use ledger::page::{FinalPage, PageKey};
use ledger::target::{self, TargetCtx};
use std::future::Future;
use std::process::Command;
use std::sync::Mutex;

/// Server starts of this test binary, one at a time: concurrent `mariadb-install-db` runs
/// were seen to fail (ERROR 1051 `mysql.tmp_user_sys`) when several bootstrap at once.
pub fn one_start_at_a_time<T>(start: impl FnOnce() -> T) -> T {
    static STARTS: Mutex<()> = Mutex::new(());
    let _one = STARTS.lock().unwrap_or_else(|p| p.into_inner());
    start()
}

/// The target shared by the tests of this binary ([`harness::shared_target`]).
pub fn shared_target() -> &'static Server {
    one_start_at_a_time(harness::shared_target)
}

/// A fresh database on the shared target as a state store: its pool and its name.
pub async fn state_db(prefix: &str) -> (sqlx::mysql::MySqlPool, String) {
    let s = shared_target();
    let db = s.fresh_db(prefix);
    let pool = kernel::state::open(&s.url_db(&db), &Default::default())
        .await
        .unwrap();
    (pool, db)
}

/// The identity of row `row` of the binlog event at `file`:`event_pos` changing
/// `schema`.t, from a source of lineage `[lineage; 32]`.
pub fn change_id(
    lineage: u8,
    schema: &str,
    file: &str,
    event_pos: u64,
    row: u32,
    op: Op,
) -> ChangeId {
    ChangeId {
        lineage: Digest([lineage; 32]),
        schema: schema.into(),
        table: "t".into(),
        file: file.into(),
        event_pos,
        row,
        op,
    }
}

/// The end of a group at `file`:`pos`, with the GTID 0-1-`seq` when given.
pub fn group_end(file: &str, pos: u64, gtid_seq: Option<u64>) -> GroupEnd {
    GroupEnd {
        pos: BinlogPos::new(file, pos),
        gtid: gtid_seq.map(|seq| Gtid::Mariadb {
            domain: 0,
            server: 1,
            seq,
        }),
    }
}

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
        generated: None,
    }
}

/// A NOT NULL key column of `column_type` as information_schema spells it (`int(10)
/// unsigned`, `varbinary(16)`); `len` is CHARACTER_MAXIMUM_LENGTH for binary types.
pub fn key_col(name: &str, kind: ColumnKind, column_type: &str, len: Option<u64>) -> ColumnDef {
    ColumnDef {
        column_type: column_type.into(),
        unsigned: column_type.contains("unsigned"),
        nullable: false,
        char_len: len,
        ..col(name, kind)
    }
}

/// A table `t` of `db` keyed (PRIMARY) by the columns at `key`.
pub fn keyed(db: &str, columns: Vec<ColumnDef>, key: Vec<usize>) -> SealedSchema {
    SealedSchema {
        database: db.into(),
        table: "t".into(),
        columns,
        key,
        key_name: "PRIMARY".into(),
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
        key: vec![0],
        key_name: "PRIMARY".into(),
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
    ctx_of(schema(db), job, token)
}

/// The target context of job `job` for a table of `schema`, with its keyer.
pub fn ctx_of(schema: SealedSchema, job: u64, token: u64) -> TargetCtx {
    TargetCtx {
        job: JobId(job),
        generation: Generation(1),
        keyer: Keyer::of(&schema).unwrap(),
        schema,
        token,
        within: None,
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

/// The work of a child process started by [`run_child`] (comma-separated fields).
const CHILD_ENV: &str = "LEDGER_TEST_CHILD";
/// The port of the shared target, for a child (which must not start servers of its own).
const CHILD_PORT_ENV: &str = "LEDGER_TEST_CHILD_PORT";

/// The first statement of a test that kills a child process at a fault point. In the
/// child copy of the test binary that the test starts with [`run_child`], this runs
/// `work` on the fields of its spec and the shared target's port, and fails if `work`
/// returns (its fault point should have exited the process). In the test itself it
/// returns at once and the test goes on: no test passes without doing its scenario.
pub async fn as_child<F, Fut>(work: F)
where
    F: FnOnce(Vec<String>, u16) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let port = std::env::var(CHILD_PORT_ENV).unwrap().parse().unwrap();
    work(spec.split(',').map(String::from).collect(), port).await;
    panic!("the fault point did not stop the process");
}

/// Runs the calling test again in a child copy of this test binary (`--exact` its name:
/// libtest names each test's thread after the test), as a child doing `spec` against the
/// shared target with the fault point `point` armed; asserts that the child exited there.
pub fn run_child(spec: &str, point: &str) {
    let me = std::thread::current();
    let test = me.name().filter(|n| *n != "main").unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec)
        .env(CHILD_PORT_ENV, shared_target().port().to_string())
        .env(kernel::failpoint::ENV, point)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(kernel::failpoint::EXIT_CODE),
        "child of {test} did not exit at {point}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Target connection options for database `db` of the server at `port` (in a child).
pub fn opts_at(port: u16, db: &str) -> mysql_async::Opts {
    target::target_opts(&format!("mysql://root@127.0.0.1:{port}/{db}")).unwrap()
}

pub fn code(e: &kernel::Error) -> Option<kernel::error::DefiniteCode> {
    e.as_definite().map(|d| d.code)
}
