//! The frozen old forms of the sealed schema: SCHM v1 and v2 ([`SealedSchemaV1`],
//! [`SealedSchemaV2`], their column [`ColumnDefV2`]) and the physical forms each
//! fingerprint formula is computed over. Frozen: every schema sealed before composite keys
//! or generated columns is decoded, and keeps its fingerprint, through these types, so they
//! never change (the golden tests in `golden.rs` pin their bytes and digests).
use super::{ColumnDef, ColumnKind, SealedSchema, PRIMARY};
use crate::ids::Digest;
use serde::{Deserialize, Serialize};

/// A column as SCHM v1 and v2 stored it (before generated columns). Also the form the
/// fingerprint of a table without generated columns is computed over, so every table
/// sealed before SCHM v3 keeps its fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDefV2 {
    pub name: String,
    pub kind: ColumnKind,
    pub column_type: String,
    pub unsigned: bool,
    pub nullable: bool,
    pub char_len: Option<u64>,
    pub numeric_precision: Option<u64>,
    pub numeric_scale: Option<u64>,
    pub datetime_precision: Option<u64>,
    pub charset: Option<String>,
    pub collation: Option<String>,
}

impl From<ColumnDefV2> for ColumnDef {
    fn from(c: ColumnDefV2) -> ColumnDef {
        ColumnDef {
            name: c.name,
            kind: c.kind,
            column_type: c.column_type,
            unsigned: c.unsigned,
            nullable: c.nullable,
            char_len: c.char_len,
            numeric_precision: c.numeric_precision,
            numeric_scale: c.numeric_scale,
            datetime_precision: c.datetime_precision,
            charset: c.charset,
            collation: c.collation,
            generated: None,
        }
    }
}

impl ColumnDef {
    /// The v2 form of a column that is not generated (None for a generated one).
    pub fn to_v2(&self) -> Option<ColumnDefV2> {
        if self.generated.is_some() {
            return None;
        }
        Some(ColumnDefV2 {
            name: self.name.clone(),
            kind: self.kind,
            column_type: self.column_type.clone(),
            unsigned: self.unsigned,
            nullable: self.nullable,
            char_len: self.char_len,
            numeric_precision: self.numeric_precision,
            numeric_scale: self.numeric_scale,
            datetime_precision: self.datetime_precision,
            charset: self.charset.clone(),
            collation: self.collation.clone(),
        })
    }
}

/// The physical part of a definition that the fingerprint covers: everything but names of
/// the database and table, so a target can be compared with its source. Version 1 (one
/// primary-key column) is kept so every fingerprint sealed before composite keys stays.
#[derive(Serialize)]
struct PhysicalV1<'a> {
    columns: &'a [ColumnDefV2],
    pk: usize,
}

#[derive(Serialize)]
struct PhysicalV2<'a> {
    columns: &'a [ColumnDefV2],
    key: &'a [usize],
    primary: bool,
}

/// The physical definition of a table with a generated column (its own tag, so it never
/// collides with a v1/v2 one).
#[derive(Serialize)]
struct PhysicalV3<'a> {
    columns: &'a [ColumnDef],
    key: &'a [usize],
    primary: bool,
}

/// SCHM version 1: the single signed integer primary-key column. Public so formats that
/// embed a schema (test fixtures) can decode their own old versions.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SealedSchemaV1 {
    pub database: String,
    pub table: String,
    pub columns: Vec<ColumnDefV2>,
    pub pk: usize,
}

impl From<SealedSchemaV1> for SealedSchema {
    fn from(v1: SealedSchemaV1) -> SealedSchema {
        SealedSchema {
            database: v1.database,
            table: v1.table,
            columns: v1.columns.into_iter().map(ColumnDef::from).collect(),
            key: vec![v1.pk],
            key_name: PRIMARY.into(),
        }
    }
}

/// SCHM version 2: composite keys, columns without a generated part.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SealedSchemaV2 {
    pub database: String,
    pub table: String,
    pub columns: Vec<ColumnDefV2>,
    pub key: Vec<usize>,
    pub key_name: String,
}

impl From<SealedSchemaV2> for SealedSchema {
    fn from(v2: SealedSchemaV2) -> SealedSchema {
        SealedSchema {
            database: v2.database,
            table: v2.table,
            columns: v2.columns.into_iter().map(ColumnDef::from).collect(),
            key: v2.key,
            key_name: v2.key_name,
        }
    }
}

/// [`SealedSchema::fingerprint`]: v3 for a table with a generated column, else the v1
/// formula for a one-column primary key and v2 for any other key.
pub(super) fn fingerprint(s: &SealedSchema) -> Digest {
    let Some(v2) = s
        .columns
        .iter()
        .map(ColumnDef::to_v2)
        .collect::<Option<Vec<_>>>()
    else {
        let mut bytes = b"backfill-schema-v3".to_vec();
        bytes.extend(crate::codec::to_canonical(&PhysicalV3 {
            columns: &s.columns,
            key: &s.key,
            primary: s.key_is_primary(),
        }));
        return Digest::of(&bytes);
    };
    if let ([pk], true) = (s.key.as_slice(), s.key_is_primary()) {
        let mut bytes = b"backfill-schema-v1".to_vec();
        bytes.extend(crate::codec::to_canonical(&PhysicalV1 {
            columns: &v2,
            pk: *pk,
        }));
        return Digest::of(&bytes);
    }
    let mut bytes = b"backfill-schema-v2".to_vec();
    bytes.extend(crate::codec::to_canonical(&PhysicalV2 {
        columns: &v2,
        key: &s.key,
        primary: s.key_is_primary(),
    }));
    Digest::of(&bytes)
}
