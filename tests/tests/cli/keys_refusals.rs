//! `backfill install` of a table backfill cannot key (DESIGN §14, §9; issue 14), through the
//! real program: a table without a usable key (no primary key, its only unique key on a
//! NULLable column) and a key with a prefix part, as the only unique key or as the primary
//! key. Each exits 3 with the table, the cause and the fix on stderr, and writes nothing
//! anywhere: no job, schema, plan or claim in the state store, no control schema on the
//! source, the target table as it was and nothing beside it.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use backfill_tests::install::Tables;
use backfill_tests::Run;

/// Runs install of `t` (control schema `ctl`) and returns what it printed.
fn install(case: &Tables, ctl: &str) -> Run {
    Run::of(backfill_tests::command().args([
        "install",
        "--state",
        &case.state_url(),
        "--source",
        &case.source.url(),
        "--source-table",
        &format!("{}.t", case.sdb),
        "--target",
        &case.target.url(),
        "--target-table",
        &format!("{}.t", case.tdb),
        "--control-schema",
        ctl,
    ]))
}

/// Refused with exit 3, every needle on stderr, and nothing written anywhere.
fn refused_without_a_trace(prefix: &str, ddl: &str, needles: &[&str]) {
    let case = Tables::new(prefix, ddl, ddl);
    case.source
        .sql_in(&case.sdb, "INSERT INTO t VALUES ('a-1', 1), ('b-2', 2)");
    let ctl = format!("{}_ctl", case.sdb);
    let before_target = tables(case.target, &case.tdb);
    let out = install(&case, &ctl);
    assert_eq!(out.code, 3, "{}", out.all());
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    let err = &out.stderr;
    let table = format!("`{}`.`t`", case.sdb);
    for n in [table.as_str()].iter().chain(needles) {
        assert!(err.contains(n), "stderr does not name {n:?}:\n{err}");
    }
    // Nothing in the state store (if install created it at all).
    let st = &case.state_db;
    let exists = case.target.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{st}'"
    ));
    if exists == "1" {
        for t in [
            "jobs",
            "sealed_schemas",
            "range_plans",
            "plan_windows",
            "target_claims",
        ] {
            assert_eq!(
                case.target.sql_in(st, &format!("SELECT COUNT(*) FROM {t}")),
                "0",
                "state store table {t}"
            );
        }
    }
    // No control schema on the source, the target table as it was and alone.
    let ctl_exists = case.source.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '{ctl}'"
    ));
    assert_eq!(ctl_exists, "0", "install created the control schema {ctl}");
    assert_eq!(tables(case.target, &case.tdb), before_target);
    assert_eq!(case.target.sql_in(&case.tdb, "SELECT COUNT(*) FROM t"), "0");
    eprintln!("{err}");
}

fn tables(server: &harness::Server, db: &str) -> String {
    server.sql(&format!(
        "SELECT GROUP_CONCAT(CONCAT(TABLE_NAME, ':', CREATE_TIME) ORDER BY TABLE_NAME) \
         FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{db}'"
    ))
}

#[test]
fn keys_refuses_a_table_without_a_key_and_writes_nothing() {
    refused_without_a_trace(
        "knokey",
        "CREATE TABLE t (c VARCHAR(100) NOT NULL, n INT NULL, UNIQUE KEY un (n)) ENGINE=InnoDB",
        &["no primary key", "fix:", "PRIMARY KEY"],
    );
}

#[test]
fn keys_refuses_a_prefix_part_unique_key_and_writes_nothing() {
    refused_without_a_trace(
        "kprefu",
        "CREATE TABLE t (c VARCHAR(100) NOT NULL, n INT NULL, UNIQUE KEY uc (c(10))) ENGINE=InnoDB",
        &[
            "key `uc`",
            "first 10 characters of `c`",
            "prefix part",
            "fix:",
        ],
    );
}

#[test]
fn keys_refuses_a_prefix_part_primary_key_and_writes_nothing() {
    refused_without_a_trace(
        "kprefp",
        "CREATE TABLE t (c VARCHAR(100) NOT NULL, n INT NULL, PRIMARY KEY (c(10))) ENGINE=InnoDB",
        &[
            "key `PRIMARY`",
            "first 10 characters of `c`",
            "prefix part",
            "fix:",
        ],
    );
}
