//! Golden byte fixtures for every persisted ledger format (STYLE §5): postcard is not
//! self-describing, so bytes written by an older build must keep decoding to the same
//! value. Each fixture in `tests/fixtures/` was written once by `BLESS=1 cargo test
//! -p ledger --test pure golden`; the test decodes it and checks that this build still encodes the value
//! to the same bytes. A format change must add a new version and keep these decoding.
use crate::common::{change_id, group_end};
use kernel::change::{Change, Op};
use kernel::codec::{self, Versioned};
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::key::{Keyer, SortKey};
use kernel::position::BinlogPos;
use kernel::schema::{ColumnDef, ColumnKind, SealedSchema};
use kernel::value::SqlValue;
use ledger::chain::{self, ChainEntry};
use ledger::manifest::WindowManifest;
use ledger::page::{self, FinalPage, PageKey, PageRef, RawPage};
use ledger::range::{Bound, KeyRange, KeyRangeV1};
use ledger::record::{CurrentWindow, JournalRecord, Phase};
use ledger::target::Activation;
use std::fmt::Debug;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn check<T: Versioned + PartialEq + Debug>(name: &str, value: &T) {
    check_with(name, value, codec::encode, codec::decode);
}

/// [`check`] for a format with its own encoder and decoder (one that still writes an
/// older version when a value fits it): the fixture decodes to `value`, and `value`
/// encodes to the fixture's exact bytes.
fn check_with<T: Versioned + PartialEq + Debug, E: Debug>(
    name: &str,
    value: &T,
    encode: impl Fn(&T) -> Vec<u8>,
    decode: impl Fn(&[u8]) -> Result<T, E>,
) {
    let path = fixture(name);
    let now = encode(value);
    if std::env::var_os("BLESS").is_some() && !path.exists() {
        std::fs::write(&path, &now).unwrap();
    }
    let old = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "fixture {}: {e} (BLESS=1 writes missing fixtures)",
            path.display()
        )
    });
    let decoded: T =
        decode(&old).unwrap_or_else(|e| panic!("fixture {name} no longer decodes: {e:?}"));
    assert_eq!(&decoded, value, "fixture {name} decodes to another value");
    assert_eq!(
        now,
        old,
        "fixture {name}: this build encodes v{} differently",
        version(&old)
    );
}

/// The version in a record's header (kind, then u16 little-endian).
fn version(bytes: &[u8]) -> u16 {
    u16::from_le_bytes([bytes[4], bytes[5]])
}

/// A value pinned as text (a digest in hex): `fixture` must hold `now`. A missing fixture
/// fails; `BLESS=1` writes it.
fn pinned(name: &str, now: &str) {
    let path = fixture(name);
    if std::env::var_os("BLESS").is_some() && !path.exists() {
        std::fs::write(&path, now).unwrap();
    }
    let old = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "fixture {}: {e} (BLESS=1 writes missing fixtures)",
            path.display()
        )
    });
    assert_eq!(
        now,
        old.trim(),
        "fixture {name}: this build computes another value"
    );
}

fn key() -> PageKey {
    PageKey {
        job: JobId(42),
        generation: Generation(3),
        window: WindowId(5),
        attempt: Attempt(2),
        page: PageNo(1),
    }
}

fn rows() -> Vec<Vec<SqlValue>> {
    vec![
        vec![
            SqlValue::Int(-7),
            SqlValue::Bytes(b"12345.678".to_vec()),
            SqlValue::Date(2024, 2, 29, 23, 59, 59, 999_999),
            SqlValue::Null,
        ],
        vec![
            SqlValue::UInt(u64::MAX),
            SqlValue::Bytes("ü \0".as_bytes().to_vec()),
            SqlValue::Time(true, 1, 2, 3, 4, 5),
            SqlValue::Double(-2.25),
        ],
        vec![
            SqlValue::Int(9),
            SqlValue::Bytes(Vec::new()),
            SqlValue::Float(1.5),
            SqlValue::Int(0),
        ],
    ]
}

fn manifest() -> WindowManifest {
    let r = |n: u32, b: u8| PageRef {
        page: PageNo(n),
        digest: Digest([b; 32]),
        rows: 3,
        bytes: 120,
    };
    WindowManifest {
        job: JobId(42),
        generation: Generation(3),
        window: WindowId(5),
        range: ledger::range::range(Some(1000), Some(2000)),
        attempt: Attempt(2),
        low: BinlogPos::new("mysql-bin.000004", 1234),
        high: BinlogPos::new("mysql-bin.000004", 9876),
        snapshot: Some(BinlogPos::new("mysql-bin.000004", 2345)),
        schema_fingerprint: Digest([0xAB; 32]),
        raw_pages: vec![r(0, 1), r(1, 2)],
        folded_digest: Digest([0xCD; 32]),
        folded_changes: 17,
        final_pages: vec![r(0, 3)],
    }
}

#[test]
fn raw_page_v1() {
    check(
        "raw_page_v1.bin",
        &RawPage {
            key: key(),
            rows: rows(),
        },
    );
}

#[test]
fn final_page_v1() {
    check(
        "final_page_v1.bin",
        &FinalPage {
            key: key(),
            rows: rows(),
        },
    );
}

/// The audit reads a stored page's place and row count from its front
/// (`page::page_head`): the same as the whole decode of the v1 fixtures.
#[test]
fn page_heads_of_the_v1_fixtures() {
    let raw = std::fs::read(fixture("raw_page_v1.bin")).unwrap();
    let fin = std::fs::read(fixture("final_page_v1.bin")).unwrap();
    let n = rows().len() as u64;
    assert_eq!(page::page_head::<RawPage>(&raw).unwrap(), (key(), n));
    assert_eq!(page::page_head::<FinalPage>(&fin).unwrap(), (key(), n));
}

fn seal_manifest(m: &WindowManifest) -> Vec<u8> {
    m.seal().bytes
}

#[test]
fn manifest_v1() {
    // An integer-key job's manifest: still version 1, byte for byte.
    check_with(
        "manifest_v1.bin",
        &manifest(),
        seal_manifest,
        WindowManifest::decode,
    );
    assert_eq!(version(&manifest().seal().bytes), 1);
}

/// The composite key (a INT UNSIGNED, b VARBINARY(16)) of the v2 fixtures.
fn composite_keyer() -> Keyer {
    let col = |name: &str, kind, column_type: &str, len| ColumnDef {
        name: name.into(),
        kind,
        column_type: String::from(column_type),
        unsigned: column_type.contains("unsigned"),
        nullable: false,
        char_len: len,
        numeric_precision: None,
        numeric_scale: None,
        datetime_precision: None,
        charset: None,
        collation: None,
        generated: None,
    };
    Keyer::of(&SealedSchema {
        database: "d".into(),
        table: "t".into(),
        columns: vec![
            col("a", ColumnKind::Int, "int(10) unsigned", None),
            col("b", ColumnKind::Varbinary, "varbinary(16)", Some(16)),
        ],
        key: vec![0, 1],
        key_name: "PRIMARY".into(),
    })
    .unwrap()
}

fn composite_bound(a: u64, b: &[u8]) -> Bound {
    let values = vec![SqlValue::UInt(a), SqlValue::Bytes(b.to_vec())];
    Bound {
        sort: composite_keyer().sort_key_of_values(&values).unwrap(),
        values,
    }
}

/// A range over the composite key, with a 0x00 inside a bound and a value above 2^31.
fn composite_range() -> KeyRange {
    KeyRange {
        lower: Some(composite_bound(7, b"k\0z")),
        upper: Some(composite_bound(3_000_000_000, b"")),
    }
}

#[test]
fn manifest_v2() {
    let m = WindowManifest {
        range: composite_range(),
        ..manifest()
    };
    check_with("manifest_v2.bin", &m, seal_manifest, WindowManifest::decode);
    assert_eq!(version(&m.seal().bytes), 2);
    // The sort keys are stored as computed (the fixed-width integer and the last column
    // unframed), not recomputed.
    let d = WindowManifest::decode(&std::fs::read(fixture("manifest_v2.bin")).unwrap()).unwrap();
    assert_eq!(
        d.range.lower.unwrap().sort.0,
        [0, 0, 0, 0, 0, 0, 0, 7, b'k', 0, b'z']
    );
}

#[test]
fn v1_fixtures_decode_to_the_integer_ranges_of_today() {
    // What a v1 record means in memory: bounds holding the signed integer as `Int` with
    // the sort key this build computes for it, equal to the ranges built today.
    let signed = |v: i64| {
        let b = Bound::of_i64(v);
        assert_eq!(b.values, [SqlValue::Int(v)]);
        assert_eq!(b.sort, SortKey::of_i64(v));
        assert_eq!(b.as_i64(), Some(v));
        b
    };
    let m = WindowManifest::decode(&std::fs::read(fixture("manifest_v1.bin")).unwrap()).unwrap();
    assert_eq!(
        m.range,
        KeyRange {
            lower: Some(signed(1000)),
            upper: Some(signed(2000)),
        }
    );
    assert_eq!(
        m.range.lower.as_ref().unwrap().values,
        [SqlValue::Int(1000)]
    );
    assert_eq!(
        m.range.as_v1(),
        Some(KeyRangeV1 {
            lower: Some(1000),
            upper: Some(2000)
        })
    );
    let e = ChainEntry::decode(&std::fs::read(fixture("chain_entry_v1.bin")).unwrap()).unwrap();
    assert_eq!(
        e.range,
        KeyRange {
            lower: Some(signed(1000)),
            upper: None,
        }
    );
    assert_eq!(e.range.upper, None);
    // Membership of the decoded range is by the integer's order, sign included.
    assert!(e.range.contains(&SortKey::of_i64(1001)));
    assert!(!e.range.contains(&SortKey::of_i64(1000)));
    assert!(!e.range.contains(&SortKey::of_i64(-1001)));
    // A single-column key that is no signed integer (BIGINT UNSIGNED) has no v1 form.
    let u = Bound {
        values: vec![SqlValue::UInt(1000)],
        sort: SortKey(vec![
            0, 0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 0, 0xFF, 3, 0xE8, 0, 1,
        ]),
    };
    let r = KeyRange {
        lower: Some(u),
        upper: None,
    };
    assert_eq!(r.as_v1(), None);
    let e2 = ChainEntry { range: r, ..e };
    assert_eq!(version(&e2.encode()), 2);
    assert_eq!(ChainEntry::decode(&e2.encode()).unwrap(), e2);
}

#[test]
fn journal_record_v1() {
    let mut r = JournalRecord::installed(JobId(42), Generation(3));
    r.phase = Phase::Windows;
    r.current = Some(CurrentWindow {
        window: WindowId(5),
        attempt: Attempt(2),
    });
    r.completed = 5;
    r.chain_root = Digest([0x11; 32]);
    r.b = Some(BinlogPos::new("mysql-bin.000004", 4));
    check("journal_record_v1.bin", &r);
    let mut p = r.clone();
    p.phase = Phase::Replaying;
    p.f = Some(BinlogPos::new("mysql-bin.000005", 800));
    p.paused = Some(Definite {
        code: DefiniteCode::EvidenceConflict,
        message: "same key, different bytes".into(),
    });
    check("journal_record_paused_v1.bin", &p);
}

fn chain_entry() -> ChainEntry {
    ChainEntry {
        window: WindowId(5),
        range: ledger::range::range(Some(1000), None),
        attempt: Attempt(2),
        manifest_hash: Digest([0x22; 32]),
    }
}

#[test]
fn chain_entry_v1() {
    check_with(
        "chain_entry_v1.bin",
        &chain_entry(),
        ChainEntry::encode,
        ChainEntry::decode,
    );
    assert_eq!(version(&chain_entry().encode()), 1);
}

#[test]
fn chain_entry_v2() {
    let e = ChainEntry {
        range: composite_range(),
        ..chain_entry()
    };
    check_with(
        "chain_entry_v2.bin",
        &e,
        ChainEntry::encode,
        ChainEntry::decode,
    );
    assert_eq!(version(&e.encode()), 2);
    // And the root over a v2 entry is pinned as well.
    pinned(
        "chain_root_v2.txt",
        &chain::root(JobId(1), Generation(1), &[e]).to_hex(),
    );
}

#[test]
fn activation_v1() {
    check(
        "activation_v1.bin",
        &Activation {
            job: JobId(42),
            generation: Generation(3),
            b: BinlogPos::new("mysql-bin.000004", 4),
            f: BinlogPos::new("mysql-bin.000009", 77),
            chain_root: Digest([0x33; 32]),
            l_digest: Digest([0x44; 32]),
        },
    );
}

#[test]
fn replay_group_digest_is_pinned() {
    // T's cursor stores this digest: changing its canonical form would turn every
    // re-application after an upgrade into an evidence conflict.
    let end = group_end("mysql-bin.000004", 500, Some(9));
    let empty = ledger::apply::ReplayGroup {
        end: end.clone(),
        changes: vec![],
    };
    pinned("replay_group_digest_v1.txt", &empty.digest().to_hex());
    // A group with an insert, a key-changing update and a delete, over every kind of value
    // of `rows()`: the digest covers the changes' identities and images.
    let [a, b, c] = <[_; 3]>::try_from(rows()).unwrap();
    let file = "mysql-bin.000004";
    let changes = vec![
        Change {
            id: change_id(7, "src", file, 420, 0, Op::Insert),
            before: None,
            after: Some(a.clone()),
        },
        Change {
            id: change_id(7, "src", file, 420, 1, Op::Update),
            before: Some(a),
            after: Some(b),
        },
        Change {
            id: change_id(7, "src", file, 460, 0, Op::Delete),
            before: Some(c),
            after: None,
        },
    ];
    let group = ledger::apply::ReplayGroup { end, changes };
    let digest = group.digest().to_hex();
    assert_ne!(digest, empty.digest().to_hex());
    pinned("replay_group_digest_changes_v1.txt", &digest);
    let e = ChainEntry {
        window: WindowId(0),
        range: KeyRange::ALL,
        attempt: Attempt(1),
        manifest_hash: Digest([0; 32]),
    };
    let root = chain::root(JobId(1), Generation(1), &[e]);
    pinned("chain_root_v1.txt", &root.to_hex());
}

/// Chunk layout 2 (`ledger::material::chunks`): one zstd frame of the material, chunked.
/// The fixture holds a frame as a state store would hold it; it must keep decoding to the
/// material whatever zstd version writes new frames (so the frame is read from the fixture,
/// never compared with what this build would write).
#[test]
fn material_chunks_v2() {
    use ledger::material::chunks::{self, Head, LAYOUT_ZSTD};
    let material: Vec<u8> = (0..120)
        .flat_map(|i| {
            format!(
                "({i},'customer-{i:010}-abcdefghijklmnopqrstuvwxyz','{}.500');",
                i * 7
            )
            .into_bytes()
        })
        .collect();
    let (head, frame) = chunks::encode(&material);
    assert_eq!(
        head.layout, LAYOUT_ZSTD,
        "a page of rows is stored as a frame"
    );
    let now = format!(
        "layout {LAYOUT_ZSTD}\nhead layout={} size={} chunks={}\ndigest {}\nframe {}",
        head.layout,
        head.size,
        head.chunks,
        Digest::of(&material).to_hex(),
        hex::encode(&frame)
    );
    let path = fixture("material_chunks_v2.txt");
    if std::env::var_os("BLESS").is_some() && !path.exists() {
        std::fs::write(&path, &now).unwrap();
    }
    let old = std::fs::read_to_string(&path).expect("fixture material_chunks_v2.txt");
    let field = |name: &str| {
        old.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("fixture line `{name}`"))
            .to_string()
    };
    let stored = hex::decode(field("frame ")).unwrap();
    let pinned_head = Head {
        layout: LAYOUT_ZSTD,
        size: material.len() as u64,
        chunks: 1,
    };
    assert_eq!(
        field("head "),
        format!("layout=2 size={} chunks=1", material.len())
    );
    assert_eq!(field("digest "), Digest::of(&material).to_hex());
    assert_eq!(
        chunks::assemble(&Digest::of(&material), pinned_head, vec![(0, stored)]).unwrap(),
        material
    );
}

/// The chunk layout of materials in the state store, version 1
/// (`ledger::material::chunks`): layout, chunk size, the head of a 2.5-chunk material and
/// each chunk's length and blake3. A change of the layout must add version 2 and keep
/// reading version 1.
#[test]
fn material_chunks_v1() {
    use ledger::material::chunks::{self, CHUNK_BYTES, LAYOUT_V1};
    let bytes: Vec<u8> = (0..CHUNK_BYTES * 5 / 2).map(|i| (i % 251) as u8).collect();
    let head = chunks::head_of(&bytes);
    let mut text = format!(
        "layout {LAYOUT_V1}\nchunk_bytes {CHUNK_BYTES}\nhead layout={} size={} chunks={}\ndigest {}",
        head.layout,
        head.size,
        head.chunks,
        Digest::of(&bytes).to_hex()
    );
    for (i, c) in chunks::split(&bytes).enumerate() {
        text.push_str(&format!(
            "\nchunk {i} {} {}",
            c.len(),
            Digest::of(c).to_hex()
        ));
    }
    pinned("material_chunks_v1.txt", &text);
    let read = chunks::split(&bytes)
        .enumerate()
        .map(|(i, c)| (i as u32, c.to_vec()))
        .collect();
    assert_eq!(
        chunks::assemble(&Digest::of(&bytes), head, read).unwrap(),
        bytes
    );
}
