use super::*;

#[test]
fn framing_orders_tuples_lexicographically() {
    let k = |cols: &[&[u8]]| {
        let mut out = Vec::new();
        for c in cols {
            frame(c, &mut out);
        }
        out
    };
    assert!(k(&[b"a"]) < k(&[b"a\0"]));
    assert!(k(&[b"a", b"z"]) < k(&[b"a\0", b""]));
    assert!(k(&[b"", b"b"]) < k(&[b"\0", b"a"]));
    assert!(k(&[b"ab", b""]) > k(&[b"a", b"zz"]));
}

#[test]
fn the_sort_key_of_an_old_i64_key_is_pinned() {
    assert_eq!(SortKey::of_i64(1).0, [0x80, 0, 0, 0, 0, 0, 0, 1]);
    assert!(SortKey::of_i64(-1) < SortKey::of_i64(0));
    assert!(SortKey::of_i64(i64::MIN) < SortKey::of_i64(i64::MAX));
}

#[test]
fn enum_members_are_read_from_the_column_type() {
    assert_eq!(
        encode::members("enum('a','b''c','d,e')", "enum").unwrap(),
        vec![b"a".to_vec(), b"b'c".to_vec(), b"d,e".to_vec()]
    );
    assert!(encode::members("set('a'", "set").is_err());
}

fn enc(e: &Encoding, v: SqlValue) -> String {
    let mut out = Vec::new();
    encode::encode(e, &v, &mut out).unwrap_or_else(|why| panic!("{v:?}: {why}"));
    hex_of(&out)
}

fn b(s: &str) -> SqlValue {
    SqlValue::Bytes(s.as_bytes().to_vec())
}

fn refused(e: &Encoding, v: SqlValue) -> String {
    let mut out = Vec::new();
    encode::encode(e, &v, &mut out).expect_err("refused")
}

#[test]
fn decimal_bytes_are_pinned() {
    let e = Encoding::Decimal { scale: 3 };
    assert_eq!(enc(&e, b("12.340")), "03023132333430");
    assert_eq!(enc(&e, b("12.34")), "03023132333430");
    assert_eq!(enc(&e, b("0.000")), "02");
    assert_eq!(enc(&e, b("-0.000")), "02");
    assert_eq!(enc(&e, b("-0.001")), "01ff393938");
    assert_eq!(enc(&e, b("-12.340")), "01fd3837363539");
    assert_eq!(enc(&e, b("9999999.999")), "030739393939393939393939");
    assert_eq!(enc(&e, SqlValue::Int(-12)), "01fd3837393939");
    let order = [
        "-9999999.999",
        "-12.341",
        "-12.340",
        "-2.000",
        "-0.001",
        "0",
        "0.001",
        "0.010",
        "1",
        "9.999",
        "10.000",
        "9999999.999",
    ];
    let keys: Vec<String> = order.iter().map(|v| enc(&e, b(v))).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    assert!(refused(&e, b("1.2345")).contains("scale"));
    assert_eq!(enc(&e, b("1.2340")), enc(&e, b("1.234")));
    for bad in ["", "-", "1.", ".", "1e3", "--1", "1.2.3", " 1"] {
        refused(&e, b(bad));
    }
    assert_eq!(enc(&Encoding::Decimal { scale: 0 }, b("-5")), "01fe34");
}

#[test]
fn temporal_bytes_are_pinned() {
    let d = SqlValue::Date;
    assert_eq!(enc(&Encoding::Date, d(2024, 2, 29, 0, 0, 0, 0)), "07e8021d");
    assert_eq!(enc(&Encoding::Date, b("2024-02-29")), "07e8021d");
    assert_eq!(enc(&Encoding::Date, b("0000-00-00")), "00000000");
    assert_eq!(enc(&Encoding::Date, b("2024-00-00")), "07e80000");
    refused(&Encoding::Date, d(2024, 2, 29, 1, 0, 0, 0));
    let dt = Encoding::Datetime;
    assert_eq!(
        enc(&dt, d(2024, 2, 29, 23, 59, 59, 123_456)),
        "07e8021d173b3b01e240"
    );
    assert_eq!(
        enc(&dt, b("2024-02-29 23:59:59.123456")),
        "07e8021d173b3b01e240"
    );
    assert_eq!(
        enc(&dt, b("2024-02-29 23:59:59.12")),
        enc(&dt, b("2024-02-29 23:59:59.120000"))
    );
    assert_eq!(enc(&dt, b("0000-00-00 00:00:00")), "00000000000000000000");
    assert_eq!(enc(&dt, d(0, 0, 0, 0, 0, 0, 0)), "00000000000000000000");
    refused(&dt, b("2024-02-29 24:00:00"));
    let ts = Encoding::Timestamp;
    // 2024-03-01 01:02:03.456789 UTC = epoch 1709254923.
    assert_eq!(enc(&ts, b("1709254923.456789")), "0000000065e1290b06f855");
    assert_eq!(
        enc(&ts, d(2024, 3, 1, 1, 2, 3, 456_789)),
        "0000000065e1290b06f855"
    );
    assert_eq!(
        enc(&ts, b("2024-03-01 01:02:03.456789")),
        "0000000065e1290b06f855"
    );
    assert_eq!(enc(&ts, b("1")), enc(&ts, b("1970-01-01 00:00:01.000000")));
    assert_eq!(enc(&ts, b("0")), "0000000000000000000000");
    assert_eq!(enc(&ts, d(0, 0, 0, 0, 0, 0, 0)), "0000000000000000000000");
    assert_eq!(
        enc(&ts, b("0000-00-00 00:00:00.000000")),
        "0000000000000000000000"
    );
    assert_eq!(
        enc(&ts, b("2147483647.999999")),
        enc(&ts, d(2038, 1, 19, 3, 14, 7, 999_999))
    );
    refused(&ts, b("2024-00-01 00:00:00"));
    let t = Encoding::Time;
    let time = SqlValue::Time;
    assert_eq!(enc(&t, time(false, 0, 0, 0, 0, 0)), "8000000000000000");
    assert_eq!(enc(&t, time(true, 0, 0, 0, 0, 0)), "8000000000000000");
    assert_eq!(enc(&t, b("-00:00:00.500000")), "7ffffffffff85ee0");
    assert_eq!(enc(&t, time(true, 0, 0, 0, 0, 500_000)), "7ffffffffff85ee0");
    assert_eq!(enc(&t, b("838:59:59.999999")), "800002bf3dde7bff");
    assert_eq!(
        enc(&t, time(false, 34, 22, 59, 59, 999_999)),
        "800002bf3dde7bff"
    );
    assert_eq!(
        enc(&t, b("-838:59:59")),
        enc(&t, time(true, 34, 22, 59, 59, 0))
    );
    assert_eq!(enc(&t, b("25:00:00")), enc(&t, time(false, 1, 1, 0, 0, 0)));
    assert!(enc(&t, b("-838:59:59")) < enc(&t, b("-00:00:00.000001")));
}

#[test]
fn year_enum_set_bytes_are_pinned() {
    let y = Encoding::Year;
    assert_eq!(enc(&y, SqlValue::Int(0)), "0000");
    assert_eq!(enc(&y, b("0000")), "0000");
    assert_eq!(enc(&y, b("1900")), "0000", "the binlog's 0000");
    assert_eq!(enc(&y, SqlValue::Int(2155)), "086b");
    assert_eq!(enc(&y, b("1901")), "076d");
    refused(&y, SqlValue::Int(1899));
    let members = |m: &[&str]| m.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    let e = Encoding::Enum(members(&["b", "a", "c"]));
    assert_eq!(enc(&e, b("")), "0000");
    assert_eq!(enc(&e, SqlValue::Int(0)), "0000");
    assert_eq!(enc(&e, b("b")), "0001");
    assert_eq!(enc(&e, SqlValue::Int(2)), enc(&e, b("a")));
    assert_eq!(enc(&e, b("c")), "0003");
    refused(&e, SqlValue::Int(4));
    refused(&e, b("B"));
    let with_empty = Encoding::Enum(members(&["", "a"]));
    assert!(refused(&with_empty, b("")).contains("member named ''"));
    assert_eq!(enc(&with_empty, SqlValue::Int(1)), "0001");
    let s = Encoding::Set(members(&["x", "yy", "z"]));
    assert_eq!(enc(&s, b("")), "0000000000000000");
    assert_eq!(enc(&s, SqlValue::Bytes(vec![0])), "0000000000000000");
    assert_eq!(enc(&s, b("x,z")), "0000000000000005");
    assert_eq!(enc(&s, SqlValue::Bytes(vec![5])), "0000000000000005");
    assert_eq!(enc(&s, SqlValue::UInt(5)), "0000000000000005");
    refused(&s, SqlValue::Bytes(vec![8]));
    refused(&s, b("x,w"));
    // 9 members: a 2-byte little-endian bitmask.
    let nine = Encoding::Set(members(&["a1", "b", "c", "d", "e", "f", "g", "h", "i"]));
    assert_eq!(
        enc(&nine, SqlValue::Bytes(vec![0x01, 0x01])),
        "0000000000000101"
    );
    assert_eq!(enc(&nine, b("a1,i")), "0000000000000101");
    // 'a' (0x61 = bits 0, 5, 6) is both a member list and a bitmask: refused.
    let letters = Encoding::Set(members(&["a", "b", "c", "d", "e", "f", "g"]));
    assert!(refused(&letters, b("a")).contains("bitmask"));
}

#[test]
fn inet_forms_are_their_bytes_and_text_forms_are_refused() {
    let v6 = Encoding::Form(16);
    let mut one = vec![0u8; 16];
    one[15] = 1;
    assert_eq!(
        enc(&v6, SqlValue::Bytes(one)),
        "00000000000000000000000000000001"
    );
    // `8000::fc` as text is 8 bytes: never padded into a wrong address.
    assert!(refused(&v6, b("8000::fc")).contains("text form"));
    let v4 = Encoding::Form(4);
    assert_eq!(enc(&v4, SqlValue::Bytes(vec![10, 0, 0, 1])), "0a000001");
    assert!(refused(&v4, b("1.2.3.4")).contains("7 bytes"));
    assert!(v4.fixed_width());
}

#[test]
fn binary_and_integer_bytes_are_pinned() {
    let bin = Encoding::Binary { pad: Some(4) };
    assert_eq!(enc(&bin, SqlValue::Bytes(vec![0x61])), "61000000");
    assert_eq!(enc(&bin, SqlValue::Bytes(vec![0x61, 0, 0, 0])), "61000000");
    assert_eq!(
        enc(
            &Encoding::Binary { pad: None },
            SqlValue::Bytes(vec![0x61, 0])
        ),
        "6100"
    );
    assert_eq!(
        enc(&Encoding::Unsigned, SqlValue::UInt(u64::MAX)),
        "ffffffffffffffff"
    );
    assert_eq!(
        enc(&Encoding::Unsigned, SqlValue::Int(-1)),
        "ffffffffffffffff"
    );
    assert_eq!(
        enc(&Encoding::Signed, SqlValue::Int(-1)),
        "7fffffffffffffff"
    );
    assert_eq!(
        enc(&Encoding::Signed, b("-128")),
        enc(&Encoding::Signed, SqlValue::Int(-128))
    );
}

/// A key of (INT, VARCHAR, DECIMAL, BIGINT UNSIGNED, VARBINARY): only the variable-width
/// columns before the last are framed.
fn mixed() -> KeyDef {
    let chars = Encoding::Chars {
        charset: "utf8mb4".into(),
        collation: "utf8mb4_bin".into(),
        len: 8,
        fixed: false,
    };
    let col = |i: usize, encoding: Encoding| KeyColumn {
        index: i,
        name: format!("c{i}"),
        encoding,
    };
    KeyDef {
        columns: vec![
            col(0, Encoding::Signed),
            col(1, chars),
            col(2, Encoding::Decimal { scale: 1 }),
            col(3, Encoding::Unsigned),
            col(4, Encoding::Binary { pad: None }),
        ],
    }
}

#[test]
fn only_variable_width_columns_before_the_last_are_framed() {
    let d = mixed();
    let framed: Vec<bool> = (0..5).map(|ci| d.framed(ci)).collect();
    assert_eq!(framed, [false, true, true, false, false]);
    assert!(Encoding::Binary { pad: Some(16) }.fixed_width());
    assert!(!Encoding::Binary { pad: None }.fixed_width());
    let mut out = Vec::new();
    encode::encode(
        &Encoding::Binary { pad: Some(2) },
        &SqlValue::Bytes(vec![1, 2, 3]),
        &mut out,
    )
    .unwrap_err();
}

/// A weight given with the row and the same weight from the cache make the same sort key;
/// a character column with neither is refused, never guessed.
#[test]
fn inline_weights_make_the_cached_weights_sort_key() {
    let keyer = Keyer::new(mixed());
    let row = vec![
        SqlValue::Int(-3),
        b("ab\0c"),
        b("1.5"),
        SqlValue::UInt(7),
        SqlValue::Bytes(vec![0, 9]),
    ];
    let weight = vec![0x41, 0x00, 0x42];
    let inline = keyer.sort_key_inline(&row, &[(1, weight.clone())]).unwrap();
    assert!(matches!(
        keyer.sort_key(&row),
        Err(KeyError::NoWeight { ref column }) if column == "c1"
    ));
    keyer.insert_weight(1, b"ab\0c".to_vec(), weight.clone());
    assert_eq!(keyer.sort_key(&row).unwrap(), inline);
    // The weight sits framed in the middle of the key: 0x00 doubled, then the frame's end.
    let mut expected = Vec::new();
    encode::signed(-3, &mut expected);
    frame(&weight, &mut expected);
    assert!(inline.0.starts_with(&expected), "{inline:?}");
}

/// Joins per-column encodings the way a keyer does for [`mixed`].
fn joined(d: &KeyDef, cols: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (ci, c) in cols.iter().enumerate() {
        join(c, d.framed(ci), &mut out);
    }
    out
}

proptest::proptest! {
    /// Tuple order and equality of the joined bytes are the lexicographic order of the
    /// column encodings, for fixed-width columns of one width and variable ones of any.
    #[test]
    fn joined_keys_order_like_tuples(
        a in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..4), 5),
        b in proptest::collection::vec(proptest::collection::vec(0u8..3, 0..4), 5),
        ints in proptest::array::uniform4(0u64..3),
    ) {
        let d = mixed();
        let fix = |cols: &[Vec<u8>], x: u64, y: u64| {
            let mut cols = cols.to_vec();
            cols[0] = x.to_be_bytes().to_vec();
            cols[3] = y.to_be_bytes().to_vec();
            cols
        };
        let ta = fix(&a, ints[0], ints[1]);
        let tb = fix(&b, ints[2], ints[3]);
        proptest::prop_assert_eq!(joined(&d, &ta).cmp(&joined(&d, &tb)), ta.cmp(&tb));
    }
}
