//! `backfill install`'s refusals of the target table against real MariaDB servers: missing,
//! not empty, with a trigger, a foreign key or an extra unique key, a definition or a
//! generated column that differs from the source's (DESIGN §9). The rest of install is in
//! `install.rs`.

use backfill_tests::install::{names, refusal, Tables, DDL};
#[tokio::test]
async fn refuses_a_missing_target_table() {
    let case = Tables::new("notgt", DDL, "");
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            &format!("target table `{}`.`t`", case.tdb),
            "does not exist",
        ],
    );
}

#[tokio::test]
async fn refuses_a_target_that_is_not_empty() {
    let case = Tables::new("full", DDL, DDL);
    case.target
        .sql_in(&case.tdb, "INSERT INTO t (id) VALUES (1)");
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[&format!("target table `{}`.`t`", case.tdb), "is not empty"],
    );
}

#[tokio::test]
async fn refuses_a_target_with_a_trigger() {
    let case = Tables::new("trig", DDL, DDL);
    case.target.sql_in(
        &case.tdb,
        "CREATE TABLE audit (n INT); CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (1)",
    );
    let msg = refusal(&case.req()).await;
    names(&msg, &["`t_ai`", "DROP TRIGGER"]);
}

#[tokio::test]
async fn refuses_a_target_with_a_foreign_key() {
    let case = Tables::new("tfk", DDL, "");
    case.target.sql_in(
        &case.tdb,
        "CREATE TABLE p (id BIGINT NOT NULL PRIMARY KEY) ENGINE=InnoDB;
         CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR(100) NULL,
            amount DECIMAL(12,3) NULL, at DATETIME(6) NULL, ts TIMESTAMP(6) NULL DEFAULT NULL,
            bin VARBINARY(16) NULL, CONSTRAINT fk_t FOREIGN KEY (id) REFERENCES p (id)) ENGINE=InnoDB",
    );
    let msg = refusal(&case.req()).await;
    names(&msg, &["foreign key", "`fk_t`", "DROP FOREIGN KEY"]);
}

#[tokio::test]
async fn refuses_a_target_with_a_unique_key_beyond_the_primary_key() {
    let case = Tables::new("tuk", DDL, DDL);
    case.target
        .sql_in(&case.tdb, "ALTER TABLE t ADD UNIQUE KEY uk_name (name)");
    let msg = refusal(&case.req()).await;
    names(&msg, &["unique key `uk_name`", "DROP INDEX"]);
}

#[tokio::test]
async fn refuses_a_target_whose_definition_differs() {
    // DATETIME on the source, TIMESTAMP on the target: a different physical type.
    let tddl = DDL.replace("at DATETIME(6)", "at TIMESTAMP(6)");
    let case = Tables::new("tdiff", DDL, &tddl);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "definition differs",
            "`at`",
            "datetime(6)",
            "timestamp(6)",
            "SHOW CREATE TABLE",
        ],
    );
}

/// A target whose generated column computes something else is refused, both named.
#[tokio::test]
async fn refuses_a_target_whose_generated_column_differs() {
    let ddl =
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT AS (id * 2) VIRTUAL) ENGINE=InnoDB";
    let tddl =
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, v INT AS (id * 3) VIRTUAL) ENGINE=InnoDB";
    let case = Tables::new("gen", ddl, tddl);
    let msg = refusal(&case.req()).await;
    names(&msg, &["column `v`", "`id` * 2", "`id` * 3"]);
}
