//! `backfill install` against real MariaDB servers: a valid install read back from the
//! state store, range plans over real key distributions, and one test per refusal of the
//! source table, the target table, the state store and the generation rules (DESIGN §9).
//! Binlog configuration, privileges and the binary are in `install_server.rs`.

use backfill_tests::bf::install::{self, Installed, TableName};
use backfill_tests::bf::store::jobs;
use backfill_tests::install::{installs, names, refusal, Tables, DDL};
use kernel::ids::{Generation, WindowId};
use kernel::position::Flavor;
use kernel::range::{KeyRange, KeyRangeV1};
use kernel::schema::ColumnKind;

async fn pool(case: &Tables) -> sqlx::MySqlPool {
    kernel::state::open(&case.state_url(), &Default::default())
        .await
        .unwrap_or_else(|e| panic!("state store: {e}"))
}

#[tokio::test]
async fn a_valid_install_is_read_back_from_the_state_store() {
    let case = Tables::new("valid", DDL, DDL);
    case.source.sql_in(
        &case.sdb,
        "INSERT INTO t (id, name) VALUES (1,'a'),(2,'b'),(3,'c'),(4,'d'),(5,'e'),(6,'f'),(7,'g')",
    );
    let mut req = case.req();
    req.window_rows = 3;
    req.page_rows = 2;
    let done = installs(&req).await;
    assert_eq!(done.generation, Generation(1));
    // 7 keys in windows of 3: bounds 3 and 6, so (-inf,3] (3,6] (6,+inf).
    assert_eq!(done.windows, 3);

    let pool = pool(&case).await;
    the_job_is_recorded(&pool, &case, &done).await;
    its_schema_is_sealed(&pool, &done).await;
    its_lineage_is_recorded(&pool, &done).await;
    its_plan_is_recorded(&pool, &done).await;
    only_the_control_table_was_written(&case);
    pool.close().await;
}

async fn the_job_is_recorded(pool: &sqlx::MySqlPool, case: &Tables, done: &Installed) {
    let job = jobs::load_job(pool, done.job_id).await.expect("job");
    assert_eq!(job.state, jobs::STATE_INSTALLED);
    assert_eq!(job.generation, Generation(1));
    assert_eq!(
        (job.source.db.as_str(), job.source.table.as_str()),
        (case.sdb.as_str(), "t")
    );
    assert_eq!(
        (job.target.db.as_str(), job.target.table.as_str()),
        (case.tdb.as_str(), "t")
    );
    assert_eq!((job.window_rows, job.page_rows), (3, 2));
    assert_eq!(job.fingerprint, done.fingerprint);
    assert!(
        job.source.identity.starts_with("mariadb:1:"),
        "{}",
        job.source.identity
    );
    assert!(
        job.target.identity.starts_with("mariadb:2:"),
        "{}",
        job.target.identity
    );
}

async fn its_schema_is_sealed(pool: &sqlx::MySqlPool, done: &Installed) {
    let schema = jobs::load_schema(pool, done.job_id).await.expect("schema");
    assert_eq!(schema.fingerprint(), done.fingerprint);
    let kinds: Vec<(&str, ColumnKind)> = schema
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("id", ColumnKind::BigInt),
            ("name", ColumnKind::Varchar),
            ("amount", ColumnKind::Decimal),
            ("at", ColumnKind::Datetime),
            ("ts", ColumnKind::Timestamp),
            ("bin", ColumnKind::Varbinary),
        ]
    );
    assert_eq!(
        (schema.key.clone(), schema.key_name.as_str()),
        (vec![0], "PRIMARY")
    );
    let name = &schema.columns[1];
    assert_eq!(
        (name.char_len, name.collation.as_deref()),
        (Some(100), Some("utf8mb4_general_ci"))
    );
    assert_eq!(schema.columns[2].column_type, "decimal(12,3)");
    assert_eq!(schema.columns[3].datetime_precision, Some(6));
}

async fn its_lineage_is_recorded(pool: &sqlx::MySqlPool, done: &Installed) {
    let lineage = jobs::load_lineage(pool, done.job_id)
        .await
        .expect("lineage");
    assert_eq!(lineage.lineage.flavor, Flavor::Mariadb);
    assert_eq!(lineage.lineage.server_id, 1);
    assert!(!lineage.lineage.server_uid.is_empty());
    assert_eq!(lineage.lineage.binlog_base, "mysql-bin");
    assert!(
        lineage.position.file.starts_with("mysql-bin."),
        "{}",
        lineage.position
    );
    assert!(lineage.position.pos > 4);
    assert!(
        lineage.gtid_pos.split(',').any(|g| g.starts_with("0-1-")),
        "gtid_binlog_pos {:?}",
        lineage.gtid_pos
    );
}

async fn its_plan_is_recorded(pool: &sqlx::MySqlPool, done: &Installed) {
    let plan = jobs::load_plan(pool, done.job_id).await.expect("plan");
    assert_eq!(
        plan.ranges,
        [
            KeyRangeV1 {
                lower: None,
                upper: Some(3)
            }
            .into(),
            KeyRangeV1 {
                lower: Some(3),
                upper: Some(6)
            }
            .into(),
            KeyRangeV1 {
                lower: Some(6),
                upper: None
            }
            .into(),
        ]
    );
    assert_eq!(
        plan.window_of(&kernel::key::SortKey::of_i64(7)),
        Some(WindowId(2))
    );
}

fn only_the_control_table_was_written(case: &Tables) {
    // install created the control table on the source.
    let ctl = case.source.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{}' AND TABLE_NAME = '{}'",
        kernel::control::DEFAULT_SCHEMA,
        kernel::control::TABLE
    ));
    assert_eq!(ctl, "1");
    // The privilege probe left no row behind.
    let probes = case.source.sql(&format!(
        "SELECT COUNT(*) FROM `{}`.`{}` WHERE kind = 'PROBE'",
        kernel::control::DEFAULT_SCHEMA,
        kernel::control::TABLE
    ));
    assert_eq!(probes, "0");
    // Nothing was written to the target.
    assert_eq!(case.target.sql_in(&case.tdb, "SELECT COUNT(*) FROM t"), "0");
}

#[tokio::test]
async fn a_sparse_key_space_gets_balanced_contiguous_windows() {
    let case = Tables::new(
        "sparse",
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB",
        "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB",
    );
    case.source.sql_in(
        &case.sdb,
        "INSERT INTO t (id) SELECT seq FROM seq_1_to_1000;
         INSERT INTO t (id) SELECT 1000000000000 + seq FROM seq_0_to_1000;",
    );
    let mut req = case.req();
    req.window_rows = 100;
    req.page_rows = 10;
    let done = installs(&req).await;
    // 2001 keys: 20 full windows of 100 and a last window open above holding 1.
    assert_eq!(done.windows, 21);
    let pool = pool(&case).await;
    let plan = jobs::load_plan(&pool, done.job_id).await.expect("plan");
    assert!(plan.check().is_ok());
    for (i, r) in plan.ranges.iter().enumerate() {
        let lower = r
            .lower
            .as_ref()
            .map_or(String::from("TRUE"), |l| format!("id > {l}"));
        let upper = r
            .upper
            .as_ref()
            .map_or(String::from("TRUE"), |u| format!("id <= {u}"));
        let n: u64 = case
            .source
            .sql_in(
                &case.sdb,
                &format!("SELECT COUNT(*) FROM t WHERE {lower} AND {upper}"),
            )
            .parse()
            .expect("count");
        let want = if i + 1 == plan.len() { 1 } else { 100 };
        assert_eq!(n, want, "window {i} {r}");
    }
    // The window spanning the gap is cut by keys, not by arithmetic.
    assert_eq!(
        plan.ranges[10],
        KeyRangeV1 {
            lower: Some(1000),
            upper: Some(1_000_000_000_099)
        }
        .into()
    );
    pool.close().await;
}

#[tokio::test]
async fn an_empty_table_gets_one_window_over_the_whole_key_space() {
    let case = Tables::new("empty", DDL, DDL);
    let done = installs(&case.req()).await;
    assert_eq!(done.windows, 1);
    let pool = pool(&case).await;
    let plan = jobs::load_plan(&pool, done.job_id).await.expect("plan");
    assert_eq!(plan.ranges, [KeyRange::ALL]);
    pool.close().await;
}

#[tokio::test]
async fn refuses_a_missing_source_table() {
    let case = Tables::new("nosrc", "", DDL);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            &format!("`{}`.`t`", case.sdb),
            "does not exist",
            "--source-table",
        ],
    );
}

#[tokio::test]
async fn refuses_a_source_table_that_is_not_innodb() {
    let ddl = DDL.replace("ENGINE=InnoDB", "ENGINE=MyISAM");
    let case = Tables::new("myisam", &ddl, DDL);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[&format!("`{}`.`t`", case.sdb), "MyISAM", "ENGINE=InnoDB"],
    );
}

#[tokio::test]
async fn refuses_a_source_table_without_primary_key() {
    let ddl = "CREATE TABLE t (id BIGINT NOT NULL, v INT) ENGINE=InnoDB";
    let case = Tables::new("nopk", ddl, ddl);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            &format!("source table `{}`.`t`", case.sdb),
            "no primary key and no UNIQUE key over NOT NULL columns",
            "fix: add a primary key",
        ],
    );
}

/// DESIGN §14: composite, unsigned and character primary keys are keys like any other; the
/// key is sealed in index order (not column order).
#[tokio::test]
async fn installs_composite_unsigned_and_character_keys_in_index_order() {
    let shapes = [
        (
            "cpk",
            "CREATE TABLE t (a INT NOT NULL, b CHAR(4) NOT NULL, v INT, PRIMARY KEY (b, a)) ENGINE=InnoDB",
            vec![1, 0],
            "PRIMARY (`b`, `a`)",
        ),
        (
            "upk",
            "CREATE TABLE t (id BIGINT UNSIGNED NOT NULL PRIMARY KEY) ENGINE=InnoDB",
            vec![0],
            "PRIMARY (`id`)",
        ),
        (
            "spk",
            "CREATE TABLE t (id VARCHAR(36) NOT NULL PRIMARY KEY) ENGINE=InnoDB",
            vec![0],
            "PRIMARY (`id`)",
        ),
    ];
    for (prefix, ddl, key, shown) in shapes {
        let case = Tables::new(prefix, ddl, ddl);
        let done = installs(&case.req()).await;
        assert_eq!(done.key, shown, "{ddl}");
        let pool = pool(&case).await;
        let schema = jobs::load_schema(&pool, done.job_id).await.expect("schema");
        assert_eq!(schema.key, key, "{ddl}");
        assert!(schema.key_is_primary());
        pool.close().await;
    }
}

/// Without a primary key, the first UNIQUE key over NOT NULL columns is the key, named.
#[tokio::test]
async fn installs_a_table_keyed_only_by_a_not_null_unique_key_and_names_it() {
    let ddl = "CREATE TABLE t (n VARCHAR(20) NULL, a VARCHAR(20) NOT NULL, b INT NOT NULL, \
               v INT, KEY k_n (n), UNIQUE KEY u_ab (a, b)) ENGINE=InnoDB";
    let case = Tables::new("uk", ddl, ddl);
    let done = installs(&case.req()).await;
    assert_eq!(done.key, "UNIQUE `u_ab` (`a`, `b`) (no primary key)");
    let pool = pool(&case).await;
    let schema = jobs::load_schema(&pool, done.job_id).await.expect("schema");
    assert_eq!(
        (schema.key.clone(), schema.key_name.as_str()),
        (vec![1, 2], "u_ab")
    );
    pool.close().await;
}

#[tokio::test]
async fn refuses_a_key_with_a_prefix_part_or_an_unorderable_type() {
    let ddl = "CREATE TABLE t (c VARCHAR(40) NOT NULL, v INT, PRIMARY KEY (c(10))) ENGINE=InnoDB";
    let case = Tables::new("pfx", ddl, ddl);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            &format!("`{}`.`t`", case.sdb),
            "key `PRIMARY` covers only the first 10 characters of `c`",
            "fix: key the table by whole columns",
        ],
    );
    let ddl = "CREATE TABLE t (f DOUBLE NOT NULL PRIMARY KEY) ENGINE=InnoDB";
    let case = Tables::new("dblk", ddl, ddl);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &["key `PRIMARY` column `f`", "cannot be part of a key"],
    );
}

/// Issue 15 item 2: spatial types, UUID, INET4, INET6, VIRTUAL and STORED generated
/// columns and INVISIBLE columns are sealed (the generated ones with their expression,
/// left out of every write).
#[tokio::test]
async fn accepts_spatial_uuid_inet_generated_and_invisible_columns() {
    let case = Tables::new(
        "types",
        backfill_tests::typed::DDL,
        backfill_tests::typed::DDL,
    );
    let done = installs(&case.req()).await;
    let pool = pool(&case).await;
    let schema = jobs::load_schema(&pool, done.job_id).await.expect("schema");
    let kind = |n: &str| schema.columns.iter().find(|c| c.name == n).unwrap().kind;
    assert_eq!(kind("pt"), ColumnKind::Geometry);
    assert_eq!(kind("gc"), ColumnKind::Geometry);
    assert_eq!(kind("u"), ColumnKind::Uuid);
    assert_eq!(kind("i4"), ColumnKind::Inet4);
    assert_eq!(kind("i6"), ColumnKind::Inet6);
    let generated: Vec<(&str, bool)> = schema
        .columns
        .iter()
        .filter_map(|c| c.generated.as_ref().map(|g| (c.name.as_str(), g.stored)))
        .collect();
    assert_eq!(generated, vec![("gv", false), ("gs", true)]);
    let written = schema.written_columns();
    assert_eq!(written.len(), schema.columns.len() - 2);
    assert!(
        schema.columns.iter().any(|c| c.name == "hid"),
        "INVISIBLE sealed"
    );
    pool.close().await;
}

/// A UUID key is refused with the reason and the fix (INET4 and INET6 keys are copied:
/// `scenarios keys_e2e`).
#[tokio::test]
async fn refuses_uuid_keys_with_the_reason() {
    let ddl = "CREATE TABLE t (k UUID NOT NULL PRIMARY KEY, v INT) ENGINE=InnoDB";
    let case = Tables::new("kuuid", ddl, ddl);
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "key `PRIMARY` column `k`",
            "swapped segments",
            "fix: key the table by",
        ],
    );
}

#[tokio::test]
async fn refuses_a_child_of_a_cascading_foreign_key() {
    let ddl = "CREATE TABLE p (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB;
        CREATE TABLE t (id INT NOT NULL PRIMARY KEY, p INT NULL,
            CONSTRAINT fk_p FOREIGN KEY (p) REFERENCES p (id) ON DELETE CASCADE) ENGINE=InnoDB";
    let tddl = "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, p INT NULL) ENGINE=InnoDB";
    let case = Tables::new("cascade", ddl, tddl);
    let msg = refusal(&case.req()).await;
    names(&msg, &["`fk_p`", "CASCADE", "not written to the binlog"]);
}

#[tokio::test]
async fn refuses_a_state_store_on_the_source_server() {
    let case = Tables::new("stsrc", DDL, DDL);
    let mut req = case.req();
    req.state_url = case.source.url_db(&format!("{}_state", case.sdb));
    let msg = refusal(&req).await;
    names(&msg, &["state store", "is on the source server", "--state"]);
}

#[tokio::test]
async fn refuses_a_second_live_generation_and_readds_after_cancellation() {
    let case = Tables::new("gen2", DDL, DDL);
    let first = installs(&case.req()).await;
    assert_eq!(first.generation, Generation(1));

    // Same source table, another empty target: the live generation refuses it.
    case.target
        .sql_in(&case.tdb, &DDL.replace("CREATE TABLE t", "CREATE TABLE t2"));
    let mut again = case.req();
    again.target_table = TableName::new(&case.tdb, "t2");
    let msg = refusal(&again).await;
    names(
        &msg,
        &[
            "already has live generation g1",
            &format!("job {}", first.job_id),
            "cancel",
        ],
    );

    // After cancellation the table can be re-added: new generation, new target.
    let pool = pool(&case).await;
    jobs::mark_cancelled(&pool, first.job_id)
        .await
        .expect("cancel");
    let second = installs(&again).await;
    assert_eq!(second.generation, Generation(2));
    assert_ne!(second.job_id, first.job_id);
    assert_eq!(
        jobs::live_job(
            &pool,
            &jobs::load_job(&pool, second.job_id)
                .await
                .expect("job")
                .source
        )
        .await
        .expect("live"),
        Some((second.job_id, Generation(2)))
    );

    // The first target stays claimed by the cancelled job, even though it is empty.
    jobs::mark_cancelled(&pool, second.job_id)
        .await
        .expect("cancel");
    let msg = refusal(&case.req()).await;
    names(&msg, &["already belongs to job", "new, empty target"]);
    pool.close().await;
}

#[tokio::test]
async fn refuses_bad_sizes_as_usage_errors() {
    let case = Tables::new("sizes", DDL, DDL);
    let mut req = case.req();
    req.window_rows = 10;
    req.page_rows = 20;
    let e = install::install(&req).await.expect_err("page > window");
    let d = e.as_definite().expect("definite");
    assert_eq!(d.code, kernel::error::DefiniteCode::Usage);
    assert!(d.message.contains("--page-rows"), "{e}");
    req.window_rows = 0;
    assert!(install::install(&req).await.is_err());
}

#[tokio::test]
async fn lists_every_refusal_at_once() {
    // (No MariaDB 10.11 column type is refused any more: a per-column refusal is shown by
    // the unit tests of kernel::introspect with MariaDB 11.7's VECTOR.)
    let ddl = "CREATE TABLE t (id FLOAT NOT NULL PRIMARY KEY, g POINT NULL) ENGINE=MyISAM";
    let case = Tables::new("many", ddl, "");
    let msg = refusal(&case.req()).await;
    names(
        &msg,
        &[
            "MyISAM",
            "column `id`: a Float column",
            "target table",
            "does not exist",
        ],
    );
    assert!(msg.contains("3 problems"), "{msg}");
}

#[tokio::test]
async fn refuses_a_source_whose_lineage_differs_from_the_recorded_one() {
    let case = Tables::new("ling", DDL, DDL);
    let first = installs(&case.req()).await;
    // A second live job that recorded the current series: the install compares with each
    // distinct recorded lineage, so the one that differs is found among those that agree.
    let agreeing = installs(&table_pair(&case, "t3")).await;
    // Make the first job's record say it saw another binlog series on this same server,
    // as after the source was re-initialised with another log_bin basename.
    let pool = pool(&case).await;
    let mut recorded = jobs::load_lineage(&pool, first.job_id)
        .await
        .expect("lineage");
    recorded.lineage.binlog_base = "old-bin".into();
    sqlx::query(
        "UPDATE install_lineage SET lineage_digest = ?, lineage_bytes = ? WHERE job_id = ?",
    )
    .bind(&recorded.lineage.digest().0[..])
    .bind(kernel::codec::encode(&recorded))
    .bind(first.job_id.0)
    .execute(&pool)
    .await
    .expect("tamper");
    let msg = refusal(&table_pair(&case, "t2")).await;
    names(
        &msg,
        &[
            "source lineage",
            &format!("job {}", first.job_id),
            "binlog=old-bin",
            "binlog=mysql-bin",
        ],
    );
    assert!(
        !msg.contains(&format!("job {} recorded", agreeing.job_id)),
        "{msg}"
    );
    pool.close().await;
}

/// A request for a new table `name` created alike on both sides of `case`.
fn table_pair(case: &Tables, name: &str) -> install::InstallRequest {
    let ddl = DDL.replace("CREATE TABLE t", &format!("CREATE TABLE {name}"));
    case.source.sql_in(&case.sdb, &ddl);
    case.target.sql_in(&case.tdb, &ddl);
    let mut other = case.req();
    other.source_table = TableName::new(&case.sdb, name);
    other.target_table = TableName::new(&case.tdb, name);
    other
}

#[tokio::test]
async fn two_concurrent_installs_of_one_table_give_one_generation() {
    let case = Tables::new("race", DDL, DDL);
    case.target
        .sql_in(&case.tdb, &DDL.replace("CREATE TABLE t", "CREATE TABLE t2"));
    // The state store exists before the race (both would otherwise migrate it at once).
    pool(&case).await.close().await;
    let a = case.req();
    let mut b = case.req();
    b.target_table = TableName::new(&case.tdb, "t2");
    let (ra, rb) = tokio::join!(install::install(&a), install::install(&b));
    let ok: Vec<_> = [&ra, &rb]
        .into_iter()
        .filter_map(|r| r.as_ref().ok())
        .collect();
    assert_eq!(ok.len(), 1, "exactly one install wins: {ra:?} {rb:?}");
    assert_eq!(ok[0].generation, Generation(1));
    let lost = [ra, rb]
        .into_iter()
        .find_map(|r| r.err())
        .expect("one refusal");
    assert!(
        lost.to_string().contains("already has live generation g1"),
        "{lost}"
    );
}

#[tokio::test]
async fn a_recorded_install_is_found_by_its_evidence_after_an_unknown_outcome() {
    // What record_install reads after a transient failure: the job that holds this
    // target's claim with this schema and plan is the one that committed.
    let case = Tables::new("evid", DDL, DDL);
    let done = installs(&case.req()).await;
    let pool = pool(&case).await;
    let job = jobs::load_job(&pool, done.job_id).await.expect("job");
    let mut new = jobs::NewJob {
        source: job.source.clone(),
        target: job.target.clone(),
        source_url: job.source_url.clone(),
        target_url: job.target_url.clone(),
        control_schema: job.control_schema.clone(),
        window_rows: job.window_rows,
        page_rows: job.page_rows,
        estimated_rows: 0,
        schema: jobs::load_schema(&pool, done.job_id).await.expect("schema"),
        lineage: jobs::load_lineage(&pool, done.job_id)
            .await
            .expect("lineage"),
        plan: jobs::load_plan(&pool, done.job_id).await.expect("plan"),
    };
    let found = jobs::find_recorded(&pool, &new).await.expect("find");
    assert_eq!(found, Some((done.job_id, Generation(1))));
    // Another plan is another install.
    new.plan = install::plan::RangePlan::from_i64_bounds(&[5]).expect("plan");
    assert_eq!(jobs::find_recorded(&pool, &new).await.expect("find"), None);
    pool.close().await;
}
