use super::*;

fn ev(pos: u64, t: &str, end: u64, info: &str) -> BinlogEvent {
    BinlogEvent {
        pos,
        event_type: t.into(),
        end_log_pos: end,
        info: info.into(),
    }
}

/// The events MariaDB 10.11 listed for a file (measured, `SHOW BINLOG EVENTS`).
fn mariadb_file() -> Vec<BinlogEvent> {
    vec![
        ev(
            4,
            "Format_desc",
            256,
            "Server ver: 10.11.19-MariaDB-0+deb12u1-log",
        ),
        ev(256, "Gtid_list", 299, "[0-1-3]"),
        ev(299, "Binlog_checkpoint", 342, "mysql-bin.000001"),
        ev(342, "Gtid", 384, "BEGIN GTID 0-1-4"),
        ev(384, "Annotate_rows", 432, "insert into d.t values(2)"),
        ev(432, "Table_map", 473, "table_id: 18 (d.t)"),
        ev(473, "Write_rows_v1", 511, "table_id: 18 flags: STMT_END_F"),
        ev(511, "Xid", 542, "COMMIT /* xid=5 */"),
        ev(542, "Binlog_checkpoint", 585, "mysql-bin.000002"),
        ev(585, "Gtid", 627, "BEGIN GTID 0-1-5"),
        ev(627, "Table_map", 716, "table_id: 18 (d.t)"),
        ev(716, "Write_rows_v1", 754, "table_id: 18 flags: STMT_END_F"),
        ev(843, "Write_rows_v1", 881, "table_id: 18 flags: STMT_END_F"),
        ev(881, "Xid", 912, "COMMIT /* xid=7 */"),
        ev(912, "Gtid", 954, "GTID 0-1-6"),
        ev(954, "Query", 1058, "alter table d.t add column x int"),
        ev(1058, "Gtid", 1100, "XA START X'31',X'',1 GTID 0-1-7"),
        ev(
            1100,
            "Write_rows_v1",
            1150,
            "table_id: 18 flags: STMT_END_F",
        ),
        ev(1150, "Query", 1200, "XA END X'31',X'',1"),
        ev(1200, "XA_prepare", 1250, "XA PREPARE X'31',X'',1"),
    ]
}

fn g(s: &str) -> Gtid {
    Gtid::parse(s).expect("gtid")
}

#[test]
fn group_ends_are_found_by_gtid() {
    let f = mariadb_file();
    assert_eq!(group_end(&f, &g("0-1-4"), Flavor::Mariadb), Some(542));
    assert_eq!(group_end(&f, &g("0-1-5"), Flavor::Mariadb), Some(912));
    assert_eq!(group_end(&f, &g("0-1-6"), Flavor::Mariadb), Some(1058));
    assert_eq!(group_end(&f, &g("0-1-7"), Flavor::Mariadb), Some(1250));
    assert_eq!(group_end(&f, &g("0-1-3"), Flavor::Mariadb), None);
    assert_eq!(group_end(&f, &g("0-2-4"), Flavor::Mariadb), None);
    // A group cut by the end of the events read is not complete.
    assert_eq!(group_end(&f[..6], &g("0-1-4"), Flavor::Mariadb), None);
}

#[test]
fn mysql_group_ends() {
    let u = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
    let f = vec![
        ev(4, "Gtid", 80, &format!("SET @@SESSION.GTID_NEXT= '{u}:7'")),
        ev(80, "Query", 150, "BEGIN"),
        ev(150, "Write_rows", 200, ""),
        ev(200, "Xid", 231, "COMMIT /* xid=9 */"),
        ev(
            231,
            "Gtid",
            300,
            &format!("SET @@SESSION.GTID_NEXT= '{u}:8'"),
        ),
        ev(300, "Query", 400, "CREATE TABLE t (id INT)"),
    ];
    assert_eq!(
        group_end(&f, &g(&format!("{u}:7")), Flavor::Mysql),
        Some(231)
    );
    assert_eq!(
        group_end(&f, &g(&format!("{u}:8")), Flavor::Mysql),
        Some(400)
    );
}

#[test]
fn states_place_a_gtid() {
    assert_eq!(state_has("0-1-42", &g("0-1-42")), StateHas::AtOrPast);
    assert_eq!(state_has("0-3-50", &g("0-1-42")), StateHas::AtOrPast);
    assert_eq!(state_has("1-9-99,0-1-41", &g("0-1-42")), StateHas::Before);
    assert_eq!(state_has("", &g("0-1-42")), StateHas::Before);
    assert_eq!(state_has("1-1-99", &g("0-1-42")), StateHas::Before);
    let e = lacks(&g("0-1-42"), "why").to_string();
    assert!(e.contains("0-1-42") && e.contains("why"), "{e}");
}
