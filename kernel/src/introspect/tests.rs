use super::*;
use crate::position::{BinlogPos, Flavor, Lineage};
use crate::schema::ColumnKind;
use std::collections::BTreeMap;

fn raw(name: &str, data_type: &str, column_type: &str) -> RawColumn {
    RawColumn {
        name: name.into(),
        data_type: data_type.into(),
        column_type: column_type.into(),
        nullable: false,
        char_len: None,
        numeric_precision: None,
        numeric_scale: None,
        datetime_precision: None,
        charset: None,
        collation: None,
        extra: String::new(),
        generation: None,
        default: None,
    }
}

fn table(columns: Vec<RawColumn>, pk: &[&str]) -> TableFacts {
    let mut indexes = Vec::new();
    if !pk.is_empty() {
        indexes.push(IndexDef {
            name: "PRIMARY".into(),
            unique: true,
            columns: pk.iter().map(|s| s.to_string()).collect(),
            sub_parts: vec![None; pk.len()],
        });
    }
    TableFacts {
        database: "d".into(),
        table: "t".into(),
        table_type: "BASE TABLE".into(),
        engine: Some("InnoDB".into()),
        estimated_rows: 0,
        columns,
        indexes,
        triggers: vec![],
        foreign_keys: vec![],
    }
}

#[test]
fn enum_and_set_members_keep_their_case() {
    let c = |kind, t| normalize_column_type(kind, t);
    assert_eq!(
        c(ColumnKind::Enum, "ENUM('small','MEDIUM','It''s')"),
        "enum('small','MEDIUM','It''s')"
    );
    assert_eq!(c(ColumnKind::Set, "set('A','b')"), "set('A','b')");
    assert_eq!(c(ColumnKind::Int, "INT(11) UNSIGNED"), "int unsigned");
}

#[test]
fn seals_a_good_table_and_normalizes_display_width() {
    let t = table(
        vec![
            raw("id", "bigint", "bigint(20)"),
            raw("n", "int", "int(10) unsigned"),
            raw("at", "datetime", "datetime(6)"),
        ],
        &["id"],
    );
    let s = seal(&t).unwrap();
    assert_eq!((s.key.clone(), s.key_name.as_str()), (vec![0], "PRIMARY"));
    assert_eq!(s.columns[0].column_type, "bigint");
    assert_eq!(s.columns[1].column_type, "int unsigned");
    assert!(s.columns[1].unsigned);
    assert_eq!(s.columns[2].column_type, "datetime(6)");
    // The same table printed by MySQL 8.0.19+ (no display width) seals identically.
    let t8 = table(
        vec![
            raw("id", "bigint", "bigint"),
            raw("n", "int", "int unsigned"),
            raw("at", "datetime", "datetime(6)"),
        ],
        &["id"],
    );
    assert_eq!(seal(&t8).unwrap().fingerprint(), s.fingerprint());
}

#[test]
fn names_every_problem() {
    let t = table(vec![raw("id", "bigint", "bigint(20)")], &[]);
    assert_eq!(seal(&t), Err(vec![SealProblem::NoKey]));
    assert!(SealProblem::NoKey.to_string().contains("add a primary key"));
    let mut t = table(vec![raw("id", "varchar", "varchar(10)")], &["id"]);
    t.indexes[0].sub_parts[0] = Some(4);
    let e = seal(&t).unwrap_err();
    assert!(
        matches!(&e[0], SealProblem::KeyPrefix { length: 4, .. }),
        "{e:?}"
    );
    assert!(e[0].to_string().contains("`id`"), "{}", e[0]);
    let t = table(vec![raw("f", "float", "float")], &["f"]);
    let e = seal(&t).unwrap_err();
    assert!(matches!(&e[0], SealProblem::KeyColumnType { .. }), "{e:?}");
    // The types of issue 15 item 2 are sealed; a generated column with its expression.
    let mut cols = vec![raw("id", "int", "int(11)")];
    for (n, dt) in [
        ("g", "geometry"),
        ("p", "point"),
        ("l", "linestring"),
        ("pg", "polygon"),
        ("mp", "multipoint"),
        ("ml", "multilinestring"),
        ("mpg", "multipolygon"),
        ("gc", "geometrycollection"),
        ("u", "uuid"),
        ("i4", "inet4"),
        ("i6", "inet6"),
    ] {
        cols.push(raw(n, dt, dt));
    }
    let mut g = raw("v", "int", "int(11)");
    g.extra = "VIRTUAL GENERATED".into();
    g.generation = Some("`id` * 2".into());
    cols.push(g);
    let s = seal(&table(cols, &["id"])).unwrap();
    assert_eq!(s.columns[1].kind, ColumnKind::Geometry);
    assert_eq!(s.columns[8].kind, ColumnKind::Geometry);
    assert_eq!(s.columns[9].select_expr(), "CAST(`u` AS BINARY)");
    assert_eq!(s.columns[11].fixed_binary_len(), Some(16));
    let v = s.columns[12].generated.clone().unwrap();
    assert_eq!((v.stored, v.expression.as_str()), (false, "`id` * 2"));
    assert_eq!(s.written_columns(), (0..12).collect::<Vec<_>>());
    // A generated column whose expression is not shown cannot be checked on the target.
    let mut g = raw("s", "int", "int(11)");
    g.extra = "STORED GENERATED".into();
    let t = table(vec![raw("id", "int", "int(11)"), g], &["id"]);
    let e = seal(&t).unwrap_err();
    assert!(
        matches!(&e[0], SealProblem::GeneratedWithoutExpression { .. }),
        "{e:?}"
    );
    // A UUID key is refused with its reason; INET4 and INET6 keys are sealed.
    let e = seal(&table(vec![raw("k", "uuid", "uuid")], &["k"])).unwrap_err();
    let msg = e[0].to_string();
    assert!(matches!(&e[0], SealProblem::KeyColumnType { .. }), "{e:?}");
    assert!(
        msg.contains("`k`") && msg.contains("swapped") && msg.contains("fix:"),
        "{msg}"
    );
    for dt in ["inet4", "inet6"] {
        assert!(seal(&table(vec![raw("k", dt, dt)], &["k"])).is_ok(), "{dt}");
    }
}

#[test]
fn the_key_is_the_primary_key_in_index_order_else_the_first_not_null_unique() {
    let cols = || {
        vec![
            raw("a", "int", "int(11)"),
            raw("b", "int", "int(10) unsigned"),
            raw("c", "date", "date"),
        ]
    };
    let s = seal(&table(cols(), &["c", "a"])).unwrap();
    assert_eq!(s.key, vec![2, 0]);
    let mut t = table(cols(), &[]);
    t.columns[0].nullable = true;
    let unique = |name: &str, cols: &[&str]| IndexDef {
        name: name.into(),
        unique: true,
        columns: cols.iter().map(|c| c.to_string()).collect(),
        sub_parts: vec![None; cols.len()],
    };
    t.indexes.push(unique("nullable", &["a"]));
    t.indexes.push(unique("u_b_c", &["b", "c"]));
    t.indexes.push(unique("u_c", &["c"]));
    let s = seal(&t).unwrap();
    assert_eq!((s.key.clone(), s.key_name.as_str()), (vec![1, 2], "u_b_c"));
    assert!(!s.key_is_primary());
    // A UNIQUE key is sealed as itself: the same columns as a primary key differ.
    let p = seal(&table(cols(), &["b", "c"])).unwrap();
    assert_ne!(p.fingerprint(), s.fingerprint());
}

#[test]
fn server_facts_from_variables() {
    let vars: BTreeMap<String, String> = [
        ("version", "10.11.6-MariaDB-0+deb12u1-log"),
        ("server_id", "7"),
        ("server_uid", "abc="),
        ("log_bin", "ON"),
        ("binlog_format", "ROW"),
        ("binlog_order_commits", "OFF"),
        ("gtid_binlog_pos", "0-7-9"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let f = ServerFacts::from_vars(&vars);
    assert_eq!(f.flavor, Flavor::Mariadb);
    assert_eq!(f.identity(), "mariadb:7:abc=");
    assert!(f.log_bin);
    assert_eq!(f.binlog_row_metadata, None);
    assert_eq!(f.binlog_order_commits, None, "MariaDB has no such switch");
    assert_eq!(f.gtid_pos.as_deref(), Some("0-7-9"));
    let mut m = vars.clone();
    m.insert("version".into(), "8.0.36".into());
    m.insert("server_uuid".into(), "u-u".into());
    let f = ServerFacts::from_vars(&m);
    assert_eq!(f.flavor, Flavor::Mysql);
    assert_eq!(f.binlog_order_commits, Some(false));
    assert_eq!(f.identity(), "mysql:u-u");
}

#[test]
fn binlog_filters() {
    let s = |d: &[&str], i: &[&str]| BinlogStatus {
        position: BinlogPos::new("b.000001", 4),
        do_db: d.iter().map(|x| x.to_string()).collect(),
        ignore_db: i.iter().map(|x| x.to_string()).collect(),
    };
    assert!(!s(&[], &[]).drops_schema("a"));
    assert!(s(&["b"], &[]).drops_schema("a"));
    assert!(!s(&["a", "b"], &[]).drops_schema("a"));
    assert!(s(&[], &["a"]).drops_schema("a"));
}

#[test]
fn accounts_and_fk_rules() {
    assert_eq!(account_of("cap@%"), "'cap'@'%'");
    assert_eq!(account_of("o'k@localhost"), "'o''k'@'localhost'");
    let fk = |d: &str| ForeignKey {
        name: "f".into(),
        child_db: "d".into(),
        child_table: "t".into(),
        parent_db: "d".into(),
        parent_table: "p".into(),
        update_rule: "RESTRICT".into(),
        delete_rule: d.into(),
    };
    assert!(fk("CASCADE").acts_on_child());
    assert!(fk("SET NULL").acts_on_child());
    assert!(!fk("NO ACTION").acts_on_child());
}

#[test]
fn install_lineage_golden_bytes() {
    let l = InstallLineage {
        lineage: Lineage {
            flavor: Flavor::Mariadb,
            server_id: 1,
            server_uid: "u".into(),
            binlog_base: "mysql-bin".into(),
        },
        position: BinlogPos::new("mysql-bin.000001", 330),
        gtid_pos: "0-1-5".into(),
    };
    let bytes = crate::codec::encode(&l);
    assert_eq!(&bytes[..6], b"LING\x01\x00");
    assert_eq!(
        hex::encode(&bytes[6..]),
        "0001017509".to_string()
            + &hex::encode(b"mysql-bin")
            + "10"
            + &hex::encode(b"mysql-bin.000001")
            + "ca0205"
            + &hex::encode(b"0-1-5")
    );
    assert_eq!(crate::codec::decode::<InstallLineage>(&bytes), Ok(l));
}
