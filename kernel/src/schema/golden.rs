//! Golden fixtures of every SCHM version: pinned bytes and fingerprints, so a change to
//! the canonical forms (or to the frozen old versions in [`super::legacy`]) fails here.
use super::*;

/// SCHM v1 bytes as every table installed before composite keys stored them.
const V1: &str = "5343484d010001640174010269640406626967696e740000000113010000000000";

fn v1_schema() -> SealedSchemaV1 {
    SealedSchemaV1 {
        database: "d".into(),
        table: "t".into(),
        columns: vec![ColumnDefV2 {
            name: "id".into(),
            kind: ColumnKind::BigInt,
            column_type: "bigint".into(),
            unsigned: false,
            nullable: false,
            char_len: None,
            numeric_precision: Some(19),
            numeric_scale: Some(0),
            datetime_precision: None,
            charset: None,
            collation: None,
        }],
        pk: 0,
    }
}

#[test]
fn v1_bytes_still_decode_to_a_one_column_primary_key() {
    let mut bytes = b"SCHM\x01\x00".to_vec();
    bytes.extend(crate::codec::to_canonical(&v1_schema()));
    assert_eq!(hex::encode(&bytes), V1, "the v1 encoding is pinned");
    let s = SealedSchema::decode(&bytes).unwrap();
    assert_eq!((s.key.clone(), s.key_is_primary()), (vec![0], true));
    // The fingerprint of a v1 table is the one it was sealed with.
    assert_eq!(
        s.fingerprint().to_hex(),
        "5d24ef08717d85d04ada7e820552912dc99f10d2da3950ba724e81cca8a9bfeb"
    );
    let v3 = crate::codec::encode(&s);
    assert_eq!(&v3[4..6], &[3, 0]);
    assert_eq!(SealedSchema::decode(&v3).unwrap(), s);
}

/// A composite key over (INT, VARCHAR): SCHM v2 as tables installed before generated
/// columns stored it, and its fingerprint (computed by the code before SCHM v3).
const V2: &str = "5343484d0200016401740201610303696e74000000000000000001620f0b76617263686172\
                  283130290000010a0000000107757466386d6234010b757466386d62345f62696e0200\
                  01075052494d415259";
const V2_FINGERPRINT: &str = "6803c7286199c3b9c8eae2116db69be08bc28dc438b72368393dd2de3f9493e5";

fn v2_schema() -> SealedSchemaV2 {
    let mut b = ColumnDef::plain("b", ColumnKind::Varchar, "varchar(10)");
    b.char_len = Some(10);
    b.charset = Some("utf8mb4".into());
    b.collation = Some("utf8mb4_bin".into());
    let a = ColumnDef::plain("a", ColumnKind::Int, "int");
    SealedSchemaV2 {
        database: "d".into(),
        table: "t".into(),
        columns: vec![a.to_v2().unwrap(), b.to_v2().unwrap()],
        key: vec![0, 1],
        key_name: PRIMARY.into(),
    }
}

#[test]
fn v2_bytes_still_decode_and_keep_their_fingerprint() {
    let bytes = crate::codec::encode_version(*b"SCHM", 2, &v2_schema());
    if std::env::var("BLESS").is_ok() {
        let s = SealedSchema::decode(&bytes).unwrap();
        eprintln!(
            "V2 = {}\nfp = {}",
            hex::encode(&bytes),
            s.fingerprint().to_hex()
        );
    }
    assert_eq!(hex::encode(&bytes), V2, "the v2 encoding is pinned");
    let s = SealedSchema::decode(&bytes).unwrap();
    assert_eq!(s.key, vec![0, 1]);
    assert!(s.columns.iter().all(|c| c.generated.is_none()));
    assert_eq!(s.fingerprint().to_hex(), V2_FINGERPRINT);
}

/// SCHM v3 with a STORED and a VIRTUAL generated column: pinned bytes, its own
/// fingerprint formula, and the written columns leave both out.
const V3: &str = "5343484d0300016401740401610303696e7400000000000000000001620f0b76617263686172\
                  283130290000010a0000000107757466386d6234010b757466386d62345f62696e0001\
                  730303696e740001000000000000010107606160202a203201760303696e7400010000\
                  00000000010007606160202a2032020001075052494d415259";
const V3_FINGERPRINT: &str = "66091888dab68b0f63a3c6444bdf96eb205e928d6dc479580b9b2023c5cf77bb";

fn v3_schema() -> SealedSchema {
    let mut s: SealedSchema = v2_schema().into();
    for (name, stored) in [("s", true), ("v", false)] {
        let mut g = ColumnDef::plain(name, ColumnKind::Int, "int");
        g.nullable = true;
        g.generated = Some(Generated {
            stored,
            expression: "`a` * 2".into(),
        });
        s.columns.push(g);
    }
    s
}

#[test]
fn v3_bytes_are_pinned_and_generated_columns_are_not_written() {
    let s = v3_schema();
    let bytes = crate::codec::encode(&s);
    if std::env::var("BLESS").is_ok() {
        eprintln!(
            "V3 = {}\nfp = {}",
            hex::encode(&bytes),
            s.fingerprint().to_hex()
        );
    }
    assert_eq!(hex::encode(&bytes), V3, "the v3 encoding is pinned");
    assert_eq!(SealedSchema::decode(&bytes).unwrap(), s);
    assert_eq!(s.fingerprint().to_hex(), V3_FINGERPRINT);
    assert_eq!(s.written_columns(), vec![0, 1]);
    let mut virt = s.clone();
    virt.columns[3].generated.as_mut().unwrap().stored = true;
    assert_ne!(
        virt.fingerprint(),
        s.fingerprint(),
        "VIRTUAL vs STORED differ"
    );
    let plain: SealedSchema = v2_schema().into();
    assert_eq!(plain.written_columns(), vec![0, 1]);
}
