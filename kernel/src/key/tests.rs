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
    assert_eq!(
        SortKey::of_i64(1).0,
        [0x80, 0, 0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 1, 0, 1]
    );
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
