//! The partition function of key-partitioned replay, pinned: part rows persist its
//! results in meaning, so for integer keys and for keys that are no single signed integer
//! (composite, unsigned, binary) every value maps to the partition it always did. No server.
use crate::common::{col, key_col};
use kernel::key::Keyer;
use kernel::schema::{ColumnKind, SealedSchema};
use kernel::value::SqlValue;
use ledger::parts::{partition_of, partition_of_int, MAX_PARTS};

#[test]
fn partition_of_is_pinned() {
    // These values are persisted in meaning by part rows: they never change.
    let keys = [0i64, 1, 2, 3, -1, -2, 42, 1_000_000, i64::MIN, i64::MAX];
    let got: Vec<Vec<usize>> = [2usize, 3, 4, 16]
        .iter()
        .map(|&p| keys.iter().map(|&k| partition_of_int(k, p)).collect())
        .collect();
    assert_eq!(
        got,
        vec![
            GOLDEN_2.to_vec(),
            GOLDEN_3.to_vec(),
            GOLDEN_4.to_vec(),
            GOLDEN_16.to_vec(),
        ]
    );
    let k = keyer();
    let part = |v: SqlValue, p: usize| {
        let v = [v];
        partition_of(&k, &k.sort_key_of_values(&v).unwrap(), &v, p)
    };
    for p in [1, 2, 3, 4, 16] {
        // One key, whatever value type carries it.
        assert_eq!(part(SqlValue::Int(42), p), partition_of_int(42, p));
        assert_eq!(part(SqlValue::UInt(42), p), partition_of_int(42, p));
        assert_eq!(
            part(SqlValue::Bytes(b"42".to_vec()), p),
            partition_of_int(42, p)
        );
        assert_eq!(
            part(SqlValue::Bytes(b"-7".to_vec()), p),
            partition_of_int(-7, p)
        );
    }
    // No signed 64-bit integer: no sort key in a signed key, so no step and no partition
    // (replay refuses such changes as corrupt evidence).
    for v in [
        SqlValue::UInt(u64::MAX),
        SqlValue::Bytes(b"12.5".to_vec()),
        SqlValue::Null,
    ] {
        assert!(k.sort_key_of_values(&[v]).is_err());
    }
    assert!((-1000..1000).all(|k| partition_of_int(k, 1) == 0));
    // Consecutive keys spread evenly enough.
    let mut n = [0usize; 4];
    for k in 0..4000 {
        n[partition_of_int(k, 4)] += 1;
    }
    assert!(n.iter().all(|&c| (800..1200).contains(&c)), "{n:?}");
}

const GOLDEN_2: [usize; 10] = [1, 1, 0, 1, 0, 1, 1, 1, 1, 1];
const GOLDEN_3: [usize; 10] = [1, 2, 1, 0, 2, 2, 1, 0, 1, 0];
const GOLDEN_4: [usize; 10] = [3, 1, 2, 1, 0, 1, 1, 3, 3, 3];
const GOLDEN_16: [usize; 10] = [15, 1, 14, 13, 0, 1, 5, 7, 11, 7];

/// The crash model's integer-key table: `id BIGINT, v BIGINT, PRIMARY KEY (id)`.
pub(crate) fn schema() -> SealedSchema {
    SealedSchema {
        database: "d".into(),
        table: "t".into(),
        columns: vec![col("id", ColumnKind::BigInt), col("v", ColumnKind::BigInt)],
        key: vec![0],
        key_name: "PRIMARY".into(),
    }
}

fn keyer() -> Keyer {
    Keyer::of(&schema()).unwrap()
}

/// Keys that are no single signed integer: (INT UNSIGNED, VARBINARY(16)), (INT, INT),
/// BIGINT UNSIGNED and BINARY(16), each with its column values.
pub(crate) fn other_keys() -> Vec<(SealedSchema, Vec<Vec<SqlValue>>)> {
    let b = |x: &[u8]| SqlValue::Bytes(x.to_vec());
    let t = |columns, key| SealedSchema {
        database: "d".into(),
        table: "t".into(),
        columns,
        key,
        key_name: "PRIMARY".into(),
    };
    vec![
        (
            t(
                vec![
                    key_col("a", ColumnKind::Int, "int(10) unsigned", None),
                    key_col("b", ColumnKind::Varbinary, "varbinary(16)", Some(16)),
                ],
                vec![0, 1],
            ),
            vec![
                vec![SqlValue::UInt(0), b(b"")],
                vec![SqlValue::UInt(1), b(b"a")],
                vec![SqlValue::UInt(1), b(b"a\0")],
                vec![SqlValue::UInt(7), b(b"k\0z")],
                vec![SqlValue::UInt(u64::from(u32::MAX)), b(&[0xFF; 16])],
            ],
        ),
        (
            t(
                vec![
                    key_col("a", ColumnKind::Int, "int(11)", None),
                    key_col("b", ColumnKind::Int, "int(11)", None),
                ],
                vec![0, 1],
            ),
            vec![
                vec![SqlValue::Int(0), SqlValue::Int(0)],
                vec![SqlValue::Int(1), SqlValue::Int(-1)],
                vec![SqlValue::Int(-1), SqlValue::Int(1)],
                vec![SqlValue::Int(42), SqlValue::Int(7)],
                vec![
                    SqlValue::Int(i64::from(i32::MIN)),
                    SqlValue::Int(i64::from(i32::MAX)),
                ],
            ],
        ),
        (
            t(
                vec![key_col(
                    "id",
                    ColumnKind::BigInt,
                    "bigint(20) unsigned",
                    None,
                )],
                vec![0],
            ),
            vec![
                vec![SqlValue::UInt(0)],
                vec![SqlValue::UInt(42)],
                vec![SqlValue::UInt(1 << 63)],
                vec![SqlValue::UInt((1 << 63) + 1)],
                vec![SqlValue::UInt(u64::MAX)],
            ],
        ),
        (
            t(
                vec![key_col("id", ColumnKind::Binary, "binary(16)", Some(16))],
                vec![0],
            ),
            vec![
                vec![b(&[0; 16])],
                vec![b(b"0123456789abcde")],
                vec![b(b"0123456789abcdef")],
                vec![b(&[0xFF; 16])],
                vec![b(&[1])],
            ],
        ),
    ]
}

#[test]
fn partition_of_a_non_integer_key_is_pinned() {
    // Persisted in meaning by part rows like the integer function: these never change.
    let mut got = Vec::new();
    for (s, keys) in other_keys() {
        let k = Keyer::of(&s).unwrap();
        for p in [2usize, 3, 4, 16] {
            got.push(
                keys.iter()
                    .map(|v| partition_of(&k, &k.sort_key_of_values(v).unwrap(), v, p))
                    .collect::<Vec<usize>>(),
            );
        }
        for v in &keys {
            assert_eq!(partition_of(&k, &k.sort_key_of_values(v).unwrap(), v, 1), 0);
        }
    }
    assert_eq!(got, GOLDEN_OTHER);
    // An unsigned key is not read as the signed integer it may equal: it is hashed.
    let (s, _) = other_keys().swap_remove(2);
    let k = Keyer::of(&s).unwrap();
    let v = [SqlValue::UInt(42)];
    let sk = k.sort_key_of_values(&v).unwrap();
    assert!((2..=16).any(|p| partition_of(&k, &sk, &v, p) != partition_of_int(42, p)));
    // BINARY(16): a value the binlog gave without its trailing 0x00 is the key of its
    // padded form, in the same partition.
    let (s, _) = other_keys().swap_remove(3);
    let k = Keyer::of(&s).unwrap();
    let short = [SqlValue::Bytes(b"0123456789abcde".to_vec())];
    let padded = [SqlValue::Bytes(b"0123456789abcde\0".to_vec())];
    let (a, b) = (
        k.sort_key_of_values(&short).unwrap(),
        k.sort_key_of_values(&padded).unwrap(),
    );
    assert_eq!(a, b);
    for p in 1..=MAX_PARTS {
        assert_eq!(
            partition_of(&k, &a, &short, p),
            partition_of(&k, &b, &padded, p)
        );
    }
    // Composite keys spread evenly enough.
    let (s, _) = other_keys().swap_remove(0);
    let k = Keyer::of(&s).unwrap();
    let mut n = [0usize; 4];
    for i in 0..4000u64 {
        let v = [
            SqlValue::UInt(i / 40),
            SqlValue::Bytes(vec![(i % 40) as u8]),
        ];
        n[partition_of(&k, &k.sort_key_of_values(&v).unwrap(), &v, 4)] += 1;
    }
    assert!(n.iter().all(|&c| (800..1200).contains(&c)), "{n:?}");
}

/// Per key of [`other_keys`] (4 keys, each for P = 2, 3, 4, 16), the partitions of its 5
/// values.
const GOLDEN_OTHER: [[usize; 5]; 16] = [
    [1, 0, 1, 1, 0],
    [0, 0, 0, 2, 2],
    [3, 0, 3, 1, 0],
    [3, 0, 11, 13, 4],
    [0, 1, 1, 0, 0],
    [2, 1, 1, 0, 1],
    [0, 3, 3, 0, 0],
    [0, 7, 7, 0, 4],
    [1, 1, 0, 0, 0],
    [0, 2, 2, 2, 1],
    [3, 1, 2, 2, 0],
    [3, 9, 6, 10, 12],
    [1, 0, 0, 1, 1],
    [1, 0, 0, 0, 1],
    [3, 2, 2, 1, 1],
    [15, 2, 14, 1, 13],
];
