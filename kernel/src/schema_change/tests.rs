#![allow(clippy::unwrap_used)]
use super::*;
use crate::schema::{ColumnDef, ColumnKind, SealedSchema};

fn varchar(name: &str, n: u64) -> ColumnDef {
    let mut c = ColumnDef::plain(name, ColumnKind::Varchar, &format!("varchar({n})"));
    c.char_len = Some(n);
    c.nullable = true;
    c.charset = Some("utf8mb4".into());
    c.collation = Some("utf8mb4_general_ci".into());
    c
}

fn decimal(name: &str, p: u64, s: u64) -> ColumnDef {
    let mut c = ColumnDef::plain(name, ColumnKind::Decimal, &format!("decimal({p},{s})"));
    c.numeric_precision = Some(p);
    c.numeric_scale = Some(s);
    c
}

fn table() -> SealedSchema {
    SealedSchema {
        database: "shop".into(),
        table: "t".into(),
        columns: vec![
            ColumnDef::plain("id", ColumnKind::Int, "int(11)"),
            varchar("name", 20),
            ColumnDef::plain("qty", ColumnKind::Int, "int(11)"),
            decimal("price", 10, 2),
        ],
        key: vec![0],
        key_name: "PRIMARY".into(),
    }
}

fn compatible(sql: &str) -> Vec<Alteration> {
    match classify(sql, &table()) {
        Classified::Compatible(a) => a,
        Classified::Incompatible(i) => panic!("{sql}: refused: {i}"),
    }
}

fn refused(sql: &str) -> Incompatible {
    match classify(sql, &table()) {
        Classified::Compatible(a) => panic!("{sql}: accepted as {a:?}"),
        Classified::Incompatible(i) => i,
    }
}

#[test]
fn the_compatible_clauses_of_design_16_are_accepted() {
    column_clauses_are_accepted();
    index_and_default_clauses_are_accepted();
    table_options_are_accepted();
}

fn column_clauses_are_accepted() {
    let add = |n: &str| Alteration::AddColumn { name: n.into() };
    assert_eq!(
        compatible("ALTER TABLE t ADD COLUMN w INT NULL"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("alter table shop.t add w int not null default 7 after name"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("ALTER TABLE `t` ADD `w` VARCHAR(5) DEFAULT 'x,y' FIRST"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("ALTER TABLE t ADD w DECIMAL(5,2) DEFAULT -1.5"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("ALTER TABLE t ADD w TIMESTAMP NULL"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("ALTER TABLE t ADD w BINARY(2) DEFAULT X'00ff'"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("ALTER TABLE t ADD w VARCHAR(3) DEFAULT _latin1'e'"),
        vec![add("w")]
    );
    assert_eq!(
        compatible("ALTER TABLE t MODIFY name VARCHAR(50), MODIFY COLUMN qty BIGINT NOT NULL"),
        vec![
            Alteration::ModifyColumn {
                name: "name".into()
            },
            Alteration::ModifyColumn { name: "qty".into() }
        ]
    );
    assert_eq!(
        compatible("ALTER TABLE t CHANGE qty amount BIGINT NOT NULL"),
        vec![Alteration::ChangeColumn {
            from: "qty".into(),
            to: "amount".into()
        }]
    );
    assert_eq!(
        compatible("ALTER TABLE t RENAME COLUMN qty TO amount"),
        vec![Alteration::RenameColumn {
            from: "qty".into(),
            to: "amount".into()
        }]
    );
    assert_eq!(
        compatible("ALTER TABLE t DROP COLUMN qty"),
        vec![Alteration::DropColumn { name: "qty".into() }]
    );
    assert_eq!(
        compatible("ALTER TABLE t DROP qty"),
        vec![Alteration::DropColumn { name: "qty".into() }]
    );
}

fn index_and_default_clauses_are_accepted() {
    assert_eq!(
        compatible(
            "ALTER TABLE t ADD INDEX i_qty (qty), ADD KEY (name(5)), ADD FULLTEXT KEY f (name)"
        ),
        vec![
            Alteration::AddIndex {
                name: Some("i_qty".into())
            },
            Alteration::AddIndex { name: None },
            Alteration::AddIndex {
                name: Some("f".into())
            }
        ]
    );
    assert_eq!(
        compatible("ALTER TABLE t DROP INDEX i_qty"),
        vec![Alteration::DropIndex {
            name: "i_qty".into()
        }]
    );
    assert_eq!(
        compatible("CREATE INDEX i ON t (qty)"),
        vec![Alteration::AddIndex {
            name: Some("i".into())
        }]
    );
    assert_eq!(
        compatible("DROP INDEX i ON t"),
        vec![Alteration::DropIndex { name: "i".into() }]
    );
    assert_eq!(
        compatible("ALTER TABLE t RENAME INDEX a TO b"),
        vec![Alteration::RenameIndex {
            from: "a".into(),
            to: "b".into()
        }]
    );
    assert_eq!(
        compatible("ALTER TABLE t ALTER COLUMN qty SET DEFAULT 3"),
        vec![Alteration::AlterDefault { name: "qty".into() }]
    );
    assert_eq!(
        compatible("ALTER TABLE t ALTER qty DROP DEFAULT"),
        vec![Alteration::AlterDefault { name: "qty".into() }]
    );
}

fn table_options_are_accepted() {
    for sql in [
        "ALTER TABLE t COMMENT 'a, b'",
        "ALTER TABLE t COMMENT = 'x'",
        "ALTER TABLE t ENGINE=InnoDB",
        "ALTER TABLE t FORCE",
        "ALTER TABLE t ROW_FORMAT=DYNAMIC KEY_BLOCK_SIZE=8",
        "ALTER TABLE t AUTO_INCREMENT = 1000",
        "ALTER TABLE t ADD COLUMN w INT, ALGORITHM=INPLACE, LOCK=NONE",
        "/*!40000 ALTER TABLE `t` DISABLE KEYS */",
        "ALTER TABLE t DROP FOREIGN KEY fk_1",
        "ALTER ONLINE TABLE t ADD w INT",
        "ALTER TABLE IF EXISTS t NOWAIT ADD w INT",
    ] {
        compatible(sql);
    }
}

#[test]
fn everything_else_is_refused_with_the_clause_named() {
    for (sql, clause, why) in [
        ("TRUNCATE TABLE t", "TRUNCATE", "without a row event"),
        (
            "ALTER TABLE t ADD UNIQUE KEY u (name)",
            "ADD UNIQUE",
            "unique key",
        ),
        ("ALTER TABLE t ADD PRIMARY KEY (id, qty)", "PRIMARY", "key"),
        (
            "ALTER TABLE t ADD CONSTRAINT c CHECK (qty > 0)",
            "CONSTRAINT",
            "constraint",
        ),
        ("ALTER TABLE t DROP PRIMARY KEY", "DROP PRIMARY", "key"),
        ("ALTER TABLE t DROP COLUMN id", "DROP COLUMN id", "key"),
        ("ALTER TABLE t DROP INDEX `PRIMARY`", "PRIMARY", "key"),
        (
            "ALTER TABLE t ADD w DATETIME DEFAULT CURRENT_TIMESTAMP",
            "CURRENT_TIMESTAMP",
            "non-constant",
        ),
        (
            "ALTER TABLE t ADD w INT DEFAULT (qty + 1)",
            "DEFAULT",
            "non-constant",
        ),
        (
            "ALTER TABLE t ADD w BIGINT NOT NULL AUTO_INCREMENT",
            "AUTO_INCREMENT",
            "AUTO_INCREMENT",
        ),
        (
            "ALTER TABLE t ADD w TIMESTAMP",
            "TIMESTAMP",
            "CURRENT_TIMESTAMP",
        ),
        (
            "ALTER TABLE t ADD w TIMESTAMP NOT NULL DEFAULT '2020-01-01 00:00:00'",
            "TIMESTAMP",
            "time zone",
        ),
        (
            "ALTER TABLE t ADD w VARCHAR(3) DEFAULT 'é'",
            "ADD",
            "non-ASCII",
        ),
        (
            "ALTER TABLE t ADD w INT AS (qty * 2) VIRTUAL",
            "AS",
            "generated",
        ),
        ("ALTER TABLE t ADD (a INT, b INT)", "ADD", "one per clause"),
        (
            "ALTER TABLE t CONVERT TO CHARACTER SET latin1",
            "CONVERT",
            "charset",
        ),
        ("ALTER TABLE t DEFAULT CHARSET=latin1", "CHARSET", "charset"),
        ("ALTER TABLE t ENGINE=MyISAM", "MyISAM", "InnoDB"),
        (
            "ALTER TABLE t PARTITION BY HASH(id) PARTITIONS 4",
            "PARTITION",
            "partition",
        ),
        (
            "ALTER TABLE t TRUNCATE PARTITION p0",
            "PARTITION",
            "partition",
        ),
        ("ALTER TABLE t RENAME TO u", "RENAME", "another name"),
        ("RENAME TABLE t TO u", "RENAME", "another name"),
        ("DROP TABLE t", "DROP", "dropped"),
        ("CREATE OR REPLACE TABLE t (id INT)", "CREATE", "replaced"),
        ("CREATE UNIQUE INDEX u ON t (name)", "UNIQUE", "unique key"),
        ("ALTER TABLE t DISCARD TABLESPACE", "DISCARD", "recognise"),
        (
            "ALTER TABLE t DROP CONSTRAINT c",
            "CONSTRAINT",
            "unique key",
        ),
        (
            "ALTER TABLE t MODIFY name VARCHAR(10) UNIQUE",
            "UNIQUE",
            "key",
        ),
    ] {
        let i = refused(sql);
        assert!(
            i.clause.contains(clause),
            "{sql}: clause `{}` lacks `{clause}`",
            i.clause
        );
        assert!(
            i.why.contains(why),
            "{sql}: reason `{}` lacks `{why}`",
            i.why
        );
    }
}

fn after(f: impl FnOnce(&mut SealedSchema)) -> SealedSchema {
    let mut s = table();
    f(&mut s);
    s
}

fn check(sql: &str, a: &SealedSchema) -> Result<(), Incompatible> {
    check_after(&table(), &compatible(sql), a)
}

#[test]
fn the_definition_after_must_be_what_the_clauses_describe() {
    let added = after(|s| {
        s.columns
            .insert(2, ColumnDef::plain("w", ColumnKind::Int, "int(11)"))
    });
    check(
        "ALTER TABLE t ADD w INT NOT NULL DEFAULT 0 AFTER name",
        &added,
    )
    .unwrap();
    // The text and the definition disagree: a column the DDL does not name.
    let e = check("ALTER TABLE t ADD v INT", &added).unwrap_err();
    assert!(e.why.contains("the DDL describes"), "{e}");
    // An unnamed column changed (e.g. a second DDL already applied to the live table).
    let other = after(|s| s.columns[1] = varchar("name", 30));
    let e = check("ALTER TABLE t ADD INDEX i (qty)", &other).unwrap_err();
    assert!(e.why.contains("does not modify it"), "{e}");
    let renamed = after(|s| s.columns[2].name = "amount".into());
    check("ALTER TABLE t RENAME COLUMN qty TO amount", &renamed).unwrap();
    let dropped = after(|s| {
        s.columns.remove(2);
    });
    check("ALTER TABLE t DROP COLUMN qty", &dropped).unwrap();
}

#[test]
fn only_widenings_pass_as_modifications() {
    let wider = after(|s| s.columns[1] = varchar("name", 50));
    check("ALTER TABLE t MODIFY name VARCHAR(50)", &wider).unwrap();
    let narrower = after(|s| s.columns[1] = varchar("name", 10));
    let e = check("ALTER TABLE t MODIFY name VARCHAR(10)", &narrower).unwrap_err();
    assert!(e.why.contains("not a widening"), "{e}");
    let mut latin1 = varchar("name", 50);
    latin1.charset = Some("latin1".into());
    latin1.collation = Some("latin1_swedish_ci".into());
    let recoded = after(|s| s.columns[1] = latin1);
    check("ALTER TABLE t MODIFY name VARCHAR(50)", &recoded).unwrap_err();
    let big = after(|s| s.columns[2] = ColumnDef::plain("qty", ColumnKind::BigInt, "bigint(20)"));
    check("ALTER TABLE t MODIFY qty BIGINT NOT NULL", &big).unwrap();
    let unsigned = after(|s| {
        s.columns[2] = ColumnDef::plain("qty", ColumnKind::BigInt, "bigint(20) unsigned")
    });
    check("ALTER TABLE t MODIFY qty BIGINT UNSIGNED", &unsigned).unwrap_err();
    let small =
        after(|s| s.columns[2] = ColumnDef::plain("qty", ColumnKind::SmallInt, "smallint(6)"));
    check("ALTER TABLE t MODIFY qty SMALLINT", &small).unwrap_err();
    let wide_dec = after(|s| s.columns[3] = decimal("price", 14, 4));
    check("ALTER TABLE t MODIFY price DECIMAL(14,4)", &wide_dec).unwrap();
    let fewer_int_digits = after(|s| s.columns[3] = decimal("price", 10, 4));
    check(
        "ALTER TABLE t MODIFY price DECIMAL(10,4)",
        &fewer_int_digits,
    )
    .unwrap_err();
    let nullable = after(|s| s.columns[2].nullable = true);
    check("ALTER TABLE t MODIFY qty INT NULL", &nullable).unwrap();
    let mut t2 = table();
    t2.columns[2].nullable = true;
    let e = check_after(
        &t2,
        &compatible("ALTER TABLE t MODIFY qty INT NOT NULL"),
        &table(),
    )
    .unwrap_err();
    assert!(e.why.contains("not a widening"), "{e}");
    let as_text = after(|s| s.columns[2] = varchar("qty", 20));
    check("ALTER TABLE t MODIFY qty VARCHAR(20)", &as_text).unwrap_err();
}

#[test]
fn the_key_stays_the_same_index_over_the_same_unchanged_columns() {
    let big_key =
        after(|s| s.columns[0] = ColumnDef::plain("id", ColumnKind::BigInt, "bigint(20)"));
    let e = check("ALTER TABLE t MODIFY id BIGINT NOT NULL", &big_key).unwrap_err();
    assert!(e.why.contains("key column"), "{e}");
    let renamed_key = after(|s| s.columns[0].name = "ident".into());
    check("ALTER TABLE t RENAME COLUMN id TO ident", &renamed_key).unwrap();
    let other_key = after(|s| s.key_name = "u".into());
    check("ALTER TABLE t ADD INDEX i (qty)", &other_key).unwrap_err();
}

#[test]
fn refresh_is_refused_where_rows_left_without_row_events() {
    for sql in [
        "TRUNCATE TABLE t",
        "TRUNCATE t",
        "ALTER TABLE t TRUNCATE PARTITION p0",
        "ALTER TABLE t DROP PARTITION p0",
        "RENAME TABLE t TO u",
        "ALTER TABLE t RENAME TO u",
        "DROP TABLE t",
        "CREATE OR REPLACE TABLE t (id INT PRIMARY KEY)",
        "ALTER TABLE t DISCARD TABLESPACE",
    ] {
        assert!(refresh_refusal(sql).is_some(), "{sql}");
    }
    for sql in [
        "ALTER TABLE t ADD UNIQUE KEY u (name)",
        "ALTER TABLE t MODIFY name VARCHAR(10)",
        "ALTER TABLE t RENAME COLUMN a TO b",
        "ALTER TABLE t CONVERT TO CHARACTER SET latin1",
    ] {
        assert_eq!(refresh_refusal(sql), None, "{sql}");
    }
}

#[test]
fn descriptions_name_every_clause() {
    let c = classify("ALTER TABLE t ADD w INT, DROP INDEX i", &table());
    assert_eq!(c.describe(), "compatible (ADD COLUMN `w`, DROP INDEX `i`)");
    let c = classify("TRUNCATE t", &table());
    assert!(
        c.describe().starts_with("not compatible: `TRUNCATE t`"),
        "{}",
        c.describe()
    );
}

#[test]
fn the_target_runs_the_sources_own_clauses_on_its_table() {
    let t = |sql: &str| target_statement(sql, &table(), "`tdb`.`tt`").unwrap();
    assert_eq!(
        t("ALTER TABLE shop.t ADD COLUMN w VARCHAR(5) DEFAULT 'a, b' AFTER name, ALGORITHM=INPLACE").as_deref(),
        Some("ALTER TABLE `tdb`.`tt` ADD COLUMN w VARCHAR(5) DEFAULT 'a, b' AFTER name")
    );
    assert_eq!(
        t("alter table `t` modify name varchar(50), drop index i, add key k (qty)").as_deref(),
        Some("ALTER TABLE `tdb`.`tt` modify name varchar(50), drop index IF EXISTS i, add key IF NOT EXISTS k (qty)")
    );
    assert_eq!(
        t("ALTER TABLE t DROP INDEX IF EXISTS i").as_deref(),
        Some("ALTER TABLE `tdb`.`tt` DROP INDEX IF EXISTS i")
    );
    assert_eq!(t("ALTER TABLE t COMMENT 'x', FORCE"), None);
    assert_eq!(t("ALTER TABLE t RENAME INDEX a TO b"), None);
    assert_eq!(
        t("CREATE INDEX i ON shop.t (qty)").as_deref(),
        Some("CREATE INDEX IF NOT EXISTS i ON `tdb`.`tt` (qty)")
    );
    assert_eq!(
        t("DROP INDEX i ON t").as_deref(),
        Some("DROP INDEX IF EXISTS i ON `tdb`.`tt`")
    );
    assert!(target_statement("TRUNCATE t", &table(), "`tdb`.`tt`").is_err());
}
