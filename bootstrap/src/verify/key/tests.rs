use super::*;

fn col(name: &str, data_type: &str, column_type: &str, coll: Option<&str>) -> Column {
    Column::new(
        name.into(),
        data_type,
        column_type,
        false,
        coll.map(str::to_string),
    )
}

fn b(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

fn lower_ab() -> Vec<SqlValue> {
    vec![SqlValue::Int(5), SqlValue::Bytes(b"ab".to_vec())]
}

fn table() -> Vec<Column> {
    vec![
        col("a", "int", "int(11)", None),
        col("s", "varchar", "varchar(20)", Some("utf8mb4_general_ci")),
        col("u", "bigint", "bigint(20) unsigned", None),
        col("t", "datetime", "datetime(6)", None),
        col("d", "decimal", "decimal(5,2)", None),
        col("e", "enum", "enum('a','b')", Some("utf8mb4_general_ci")),
        col("f", "float", "float", None),
        col("st", "set", "set('x','y','z')", Some("utf8mb4_general_ci")),
    ]
}

#[test]
fn key_columns_are_found_and_typed_or_refused_by_name() {
    let k = KeyCols::of("t", &table(), &["A", "s", "u", "t"]).expect("supported");
    assert_eq!(k.names(), ["a", "s", "u", "t"]);
    assert_eq!(
        k.0[1].kind,
        KeyKind::Chars {
            len: 20,
            charset: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into()
        }
    );
    assert_eq!(k.width(), 5);
    assert_eq!(
        k.select_exprs()[..3],
        [
            "CAST(`a` AS BINARY)",
            "CAST(`s` AS BINARY)",
            "WEIGHT_STRING(`s` AS CHAR(20))"
        ]
    );
    for bad in [&["f"][..], &["nope"], &[]] {
        let e = KeyCols::of("t", &table(), bad).expect_err("refused");
        assert_eq!(e.as_definite().map(|d| d.code), Some(DefiniteCode::Usage));
    }
    assert!(KeyCols::of("t", &[], &["a"]).is_err());
}

#[test]
fn keys_equal_by_weight_are_one_key_whatever_their_bytes() {
    let k = KeyCols::of("t", &table(), &["a", "s"]).expect("supported");
    let w = "\u{0}A\u{0}B";
    let lower = k.read(&[b("5"), b("ab"), b(w)]).expect("key");
    let upper = k.read(&[b("5"), b("AB"), b(w)]).expect("key");
    assert_eq!(lower.sort, upper.sort);
    assert_ne!(lower.values, upper.values);
    assert_eq!(lower.to_string(), "(5, 'ab')");
    let next = k.read(&[b("5"), b("ab"), b("\u{0}A\u{0}C")]).expect("key");
    assert!(lower.sort < next.sort);
    let six = k.read(&[b("6"), b(""), b("")]).expect("key");
    assert!(next.sort < six.sort, "tuple order is lexicographic");
    assert!(k.read(&[b("5"), None, b(w)]).is_err());
    assert!(k.read(&[b("x"), b("a"), b(w)]).is_err());
}

#[test]
fn unsigned_keys_above_2_63_order_as_unsigned() {
    let k = KeyCols::of("t", &table(), &["u"]).expect("supported");
    let big = k.read(&[b("18446744073709551615")]).expect("key");
    let small = k.read(&[b("1")]).expect("key");
    assert!(small.sort < big.sort);
    assert_eq!(big.values, [SqlValue::UInt(u64::MAX)]);
    assert_eq!(k.resort(&big.values), Some(big.sort.clone()));
    // A v1 cursor's key (a signed sort key) is re-keyed to order with unsigned rows.
    let v1 = Key::of_i64(1);
    assert_ne!(v1.sort, small.sort);
    assert_eq!(k.resort(&v1.values), Some(small.sort.clone()));
    let chars = KeyCols::of("t", &table(), &["a", "s"]).expect("supported");
    assert_eq!(
        chars.resort(&lower_ab()),
        None,
        "weights are the server's: kept"
    );
    assert_eq!(
        k.after(Some(&big)).expect("sql"),
        " WHERE `u` > 18446744073709551615"
    );
}

#[test]
fn predicates_are_typed_literals() {
    let k = KeyCols::of("t", &table(), &["a", "s", "t"]).expect("supported");
    let key = Key {
        values: vec![
            SqlValue::Int(-5),
            SqlValue::Bytes(b"a'b".to_vec()),
            SqlValue::Bytes(b"2024-01-02 00:00:00.000000".to_vec()),
        ],
        sort: SortKey::default(),
    };
    let lits = k.literals(&key).expect("literals");
    assert_eq!(lits[0], "-5");
    assert_eq!(
        lits[1],
        "CONVERT(X'612762' USING utf8mb4) COLLATE utf8mb4_general_ci"
    );
    assert!(lits[2].starts_with("CAST(X'323032342d") && lits[2].ends_with("AS datetime(6))"));
    let sql = k.after(Some(&key)).expect("sql");
    assert!(
        sql.starts_with(" WHERE `a` >= -5 AND (`a` > -5 OR (`s` >= CONVERT("),
        "{sql}"
    );
    assert_eq!(k.after(None).expect("sql"), "");
    let one = KeyCols::of("t", &table(), &["a"]).expect("supported");
    let keys = [Key::of_i64(1), Key::of_i64(2)];
    assert_eq!(one.any_of(&keys).expect("sql"), " WHERE `a` IN (1, 2)");
    assert!(k.any_of(&keys).is_err(), "a key of the wrong width");
}

#[test]
fn decimals_and_times_order_by_their_shifted_server_text() {
    let cols = [
        col("d", "decimal", "decimal(5,2)", None),
        col("t", "time", "time(3)", None),
    ];
    let k = KeyCols::of("t", &cols, &["d", "t"]).expect("supported");
    assert_eq!(k.width(), 4);
    assert_eq!(
        k.select_exprs()[1],
        "IF(`d` < 0, CONCAT('0', LPAD(CAST(`d` + 1000 AS CHAR), 6, '0')), \
         CONCAT('1', LPAD(CAST(`d` AS CHAR), 6, '0')))"
    );
    assert!(k.select_exprs()[3].contains("CAST((`t` + 0) + 10000000 AS CHAR), 11"));
    // -1.50 + 1000 = 998.50; 2.25; the server computes these, the reader checks widths.
    let neg = k
        .read(&[
            b("-1.50"),
            b("0998.50"),
            b("-01:00:00.000"),
            b("09900000.000"),
        ])
        .expect("key");
    let pos = k
        .read(&[
            b("2.25"),
            b("1002.25"),
            b("00:00:00.000"),
            b("10000000.000"),
        ])
        .expect("key");
    assert!(neg.sort < pos.sort);
    assert!(k
        .read(&[b("2.25"), b("12.25"), b("0"), b("10000000.000")])
        .is_err());
    let sql = k.after(Some(&neg)).expect("sql");
    assert!(
        sql.starts_with(" WHERE `d` >= CAST('-1.50' AS decimal(5,2)) AND"),
        "{sql}"
    );
    assert!(
        sql.ends_with("`t` > CAST('-01:00:00.000' AS time(3))))"),
        "{sql}"
    );
}

#[test]
fn enums_and_sets_seek_by_their_numbers() {
    let k = KeyCols::of("t", &table(), &["e", "st"]).expect("supported");
    assert_eq!(k.select_exprs()[1], "LPAD(HEX(`e` + 0), 16, '0')");
    let key = k
        .read(&[
            b("b"),
            b("0000000000000002"),
            b("x,z"),
            b("0000000000000005"),
        ])
        .expect("key");
    assert_eq!(key.to_string(), "('b', 'x,z')");
    assert_eq!(
        k.after(Some(&key)).expect("sql"),
        " WHERE `e` >= 2 AND (`e` > 2 OR (`st` > 5))"
    );
    let empty = k
        .read(&[b("a"), b("0000000000000001"), b(""), b("0000000000000000")])
        .expect("key");
    assert!(empty.sort < key.sort);
    assert_eq!(k.literals(&empty).expect("literals"), ["1", "0"]);
    let odd = Key {
        values: vec![SqlValue::Bytes(b"c".to_vec()), SqlValue::Bytes(Vec::new())],
        sort: SortKey::default(),
    };
    assert!(k.literals(&odd).is_err(), "not a member");
    assert!(k.read(&[b("b"), b("2"), b(""), b("0")]).is_err());
}

#[test]
fn years_order_as_text_and_are_written_back_as_numbers() {
    let cols = [col("y", "year", "year(4)", None)];
    let k = KeyCols::of("t", &cols, &["y"]).expect("supported");
    let y = k.read(&[b("2155")]).expect("key");
    assert_eq!(y.values, [SqlValue::UInt(2155)]);
    assert!(k.read(&[b("1901")]).expect("key").sort < y.sort);
    assert_eq!(k.after(Some(&y)).expect("sql"), " WHERE `y` > 2155");
    assert_eq!(y.to_string(), "2155");
}

#[test]
fn a_v1_key_is_one_signed_integer() {
    let k = KeyCols::of("t", &table(), &["a"]).expect("supported");
    let v1 = Key::of_i64(-3);
    assert_eq!(k.read(&[b("-3")]).expect("key"), v1);
    assert_eq!(v1.to_string(), "-3");
}
