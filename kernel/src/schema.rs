//! The sealed schema: the one definition rows are ever decoded against (DESIGN §3.7, §9).
//!
//! `install` reads the source definition from `information_schema`, checks that every
//! column type is supported ([`ColumnKind::classify`]) and that the primary key is one
//! signed integer column, and seals it with a blake3 fingerprint over the physical
//! definition (names, types, lengths, signedness, nullability, collation, key). A target's
//! definition must have the same fingerprint; a table-map or DDL that contradicts it pauses
//! the table instead of decoding with a wrong definition.
use crate::codec::Versioned;
use crate::ids::Digest;
use serde::{Deserialize, Serialize};

/// The physical type of a supported column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ColumnKind {
    TinyInt,
    SmallInt,
    MediumInt,
    Int,
    BigInt,
    Decimal,
    Float,
    Double,
    Bit,
    Date,
    /// DATETIME: a calendar value, never shifted by a time zone.
    Datetime,
    /// TIMESTAMP: an instant, stored as epoch; written with an explicit session zone.
    Timestamp,
    Time,
    Year,
    Char,
    Varchar,
    /// BINARY(n): fixed length; trailing 0x00 lost in the binlog are padded back.
    Binary,
    Varbinary,
    TinyText,
    Text,
    MediumText,
    LongText,
    TinyBlob,
    Blob,
    MediumBlob,
    LongBlob,
    Enum,
    Set,
    /// MariaDB JSON (LONGTEXT with a JSON check) or MySQL JSON.
    Json,
}

/// Every `information_schema.COLUMNS.DATA_TYPE` accepted, with its kind. The README's
/// list of supported types is this table.
pub const SUPPORTED_TYPES: &[(&str, ColumnKind)] = &[
    ("tinyint", ColumnKind::TinyInt),
    ("smallint", ColumnKind::SmallInt),
    ("mediumint", ColumnKind::MediumInt),
    ("int", ColumnKind::Int),
    ("bigint", ColumnKind::BigInt),
    ("decimal", ColumnKind::Decimal),
    ("float", ColumnKind::Float),
    ("double", ColumnKind::Double),
    ("bit", ColumnKind::Bit),
    ("date", ColumnKind::Date),
    ("datetime", ColumnKind::Datetime),
    ("timestamp", ColumnKind::Timestamp),
    ("time", ColumnKind::Time),
    ("year", ColumnKind::Year),
    ("char", ColumnKind::Char),
    ("varchar", ColumnKind::Varchar),
    ("binary", ColumnKind::Binary),
    ("varbinary", ColumnKind::Varbinary),
    ("tinytext", ColumnKind::TinyText),
    ("text", ColumnKind::Text),
    ("mediumtext", ColumnKind::MediumText),
    ("longtext", ColumnKind::LongText),
    ("tinyblob", ColumnKind::TinyBlob),
    ("blob", ColumnKind::Blob),
    ("mediumblob", ColumnKind::MediumBlob),
    ("longblob", ColumnKind::LongBlob),
    ("enum", ColumnKind::Enum),
    ("set", ColumnKind::Set),
    ("json", ColumnKind::Json),
];

impl ColumnKind {
    /// The kind of a DATA_TYPE, or None when it is not supported (spatial types,
    /// MariaDB `uuid`/`inet6` user types are refused until tested).
    pub fn classify(data_type: &str) -> Option<ColumnKind> {
        let dt = data_type.to_ascii_lowercase();
        SUPPORTED_TYPES
            .iter()
            .find(|(n, _)| *n == dt)
            .map(|(_, k)| *k)
    }

    /// True for the integer kinds a primary key may have.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            ColumnKind::TinyInt
                | ColumnKind::SmallInt
                | ColumnKind::MediumInt
                | ColumnKind::Int
                | ColumnKind::BigInt
        )
    }
}

/// One column of the sealed definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    pub kind: ColumnKind,
    /// The full COLUMN_TYPE text, e.g. `decimal(12,3) unsigned`, `enum('a','b')`.
    pub column_type: String,
    pub unsigned: bool,
    pub nullable: bool,
    /// CHARACTER_MAXIMUM_LENGTH for string and binary types.
    pub char_len: Option<u64>,
    pub numeric_precision: Option<u64>,
    pub numeric_scale: Option<u64>,
    pub datetime_precision: Option<u64>,
    pub charset: Option<String>,
    pub collation: Option<String>,
}

impl ColumnDef {
    /// A NOT NULL column of `kind` with no lengths, charset or collation (tests, benches
    /// and examples build definitions this way; install reads them from the server).
    pub fn plain(name: &str, kind: ColumnKind, column_type: &str) -> ColumnDef {
        ColumnDef {
            name: name.into(),
            kind,
            column_type: column_type.into(),
            unsigned: column_type.contains("unsigned"),
            nullable: false,
            char_len: None,
            numeric_precision: None,
            numeric_scale: None,
            datetime_precision: None,
            charset: None,
            collation: None,
        }
    }

    /// Declared length of a fixed-length binary column, for padding binlog values back.
    pub fn fixed_binary_len(&self) -> Option<usize> {
        match self.kind {
            ColumnKind::Binary => self.char_len.and_then(|n| usize::try_from(n).ok()),
            _ => None,
        }
    }
}

/// A sealed table definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedSchema {
    pub database: String,
    pub table: String,
    pub columns: Vec<ColumnDef>,
    /// Indexes into `columns` of the key's columns, in index order (DESIGN §14).
    pub key: Vec<usize>,
    /// The index the key is: `PRIMARY`, or the NOT NULL UNIQUE index chosen without one.
    pub key_name: String,
}

/// The name of a primary key index.
pub const PRIMARY: &str = "PRIMARY";

/// The physical part of a definition that the fingerprint covers: everything but names of
/// the database and table, so a target can be compared with its source. Version 1 (one
/// primary-key column) is kept so every fingerprint sealed before composite keys stays.
#[derive(Serialize)]
struct PhysicalV1<'a> {
    columns: &'a [ColumnDef],
    pk: usize,
}

#[derive(Serialize)]
struct PhysicalV2<'a> {
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
    pub columns: Vec<ColumnDef>,
    pub pk: usize,
}

impl From<SealedSchemaV1> for SealedSchema {
    fn from(v1: SealedSchemaV1) -> SealedSchema {
        SealedSchema {
            database: v1.database,
            table: v1.table,
            columns: v1.columns,
            key: vec![v1.pk],
            key_name: PRIMARY.into(),
        }
    }
}

impl Versioned for SealedSchema {
    const KIND: [u8; 4] = *b"SCHM";
    const VERSION: u16 = 2;
}

impl SealedSchema {
    /// Decodes a sealed schema of every version written (v1: one primary-key column).
    pub fn decode(bytes: &[u8]) -> Result<SealedSchema, crate::codec::DecodeError> {
        let (version, body) = crate::codec::split::<SealedSchema>(bytes)?;
        if version == 1 {
            let v1: SealedSchemaV1 = crate::codec::decode_body(&Self::KIND, 1, body)?;
            return Ok(v1.into());
        }
        crate::codec::decode_body(&Self::KIND, version, body)
    }

    /// True for a key that is the table's PRIMARY KEY.
    pub fn key_is_primary(&self) -> bool {
        self.key_name == PRIMARY
    }

    /// blake3 of the canonical physical definition (version-tagged). A single-column
    /// primary key keeps the v1 formula, so tables sealed before composite keys keep
    /// their fingerprint.
    pub fn fingerprint(&self) -> Digest {
        if let ([pk], true) = (self.key.as_slice(), self.key_is_primary()) {
            let mut bytes = b"backfill-schema-v1".to_vec();
            bytes.extend(crate::codec::to_canonical(&PhysicalV1 {
                columns: &self.columns,
                pk: *pk,
            }));
            return Digest::of(&bytes);
        }
        let mut bytes = b"backfill-schema-v2".to_vec();
        bytes.extend(crate::codec::to_canonical(&PhysicalV2 {
            columns: &self.columns,
            key: &self.key,
            primary: self.key_is_primary(),
        }));
        Digest::of(&bytes)
    }

    /// The key a table is copied by, for people: `PRIMARY (`a`, `b`)`, or
    /// `UNIQUE `u` (`c`) (no primary key)` when a NOT NULL UNIQUE key stands in for one.
    pub fn describe_key(&self) -> String {
        let cols = self.key_names_quoted().join(", ");
        if self.key_is_primary() {
            format!("PRIMARY ({cols})")
        } else {
            format!(
                "UNIQUE {} ({cols}) (no primary key)",
                quote_ident(&self.key_name)
            )
        }
    }

    /// The key's columns, in index order.
    pub fn key_columns(&self) -> impl Iterator<Item = &ColumnDef> {
        self.key.iter().map(|&i| &self.columns[i])
    }

    /// The key's column names, quoted, in index order.
    pub fn key_names_quoted(&self) -> Vec<String> {
        self.key_columns().map(|c| quote_ident(&c.name)).collect()
    }

    /// `db`.`table`, quoted.
    pub fn qualified(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.database),
            quote_ident(&self.table)
        )
    }

    /// Human-readable differences from another definition (empty when equal).
    pub fn differences(&self, other: &SealedSchema) -> Vec<String> {
        let mut out = Vec::new();
        if self.columns.len() != other.columns.len() {
            out.push(format!(
                "column count {} vs {}",
                self.columns.len(),
                other.columns.len()
            ));
        }
        for (a, b) in self.columns.iter().zip(&other.columns) {
            if a != b {
                out.push(format!(
                    "column `{}`: {} vs `{}`: {}",
                    a.name,
                    describe(a),
                    b.name,
                    describe(b)
                ));
            }
        }
        if self.key != other.key || self.key_is_primary() != other.key_is_primary() {
            out.push(format!(
                "key {} {:?} vs {} {:?}",
                self.key_name, self.key, other.key_name, other.key
            ));
        }
        out
    }
}

fn describe(c: &ColumnDef) -> String {
    format!(
        "{}{}{}",
        c.column_type,
        if c.nullable { " NULL" } else { " NOT NULL" },
        c.collation
            .as_deref()
            .map(|x| format!(" COLLATE {x}"))
            .unwrap_or_default()
    )
}

/// Quotes an identifier with backticks (doubling any backtick inside).
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn col(name: &str, kind: ColumnKind, column_type: &str) -> ColumnDef {
        ColumnDef::plain(name, kind, column_type)
    }

    fn schema(db: &str) -> SealedSchema {
        SealedSchema {
            database: db.into(),
            table: "t".into(),
            columns: vec![
                col("id", ColumnKind::BigInt, "bigint(20)"),
                col("at", ColumnKind::Datetime, "datetime(6)"),
            ],
            key: vec![0],
            key_name: PRIMARY.into(),
        }
    }

    #[test]
    fn support_table_classifies() {
        assert_eq!(ColumnKind::classify("BIGINT"), Some(ColumnKind::BigInt));
        assert_eq!(
            ColumnKind::classify("timestamp"),
            Some(ColumnKind::Timestamp)
        );
        assert_eq!(ColumnKind::classify("geometry"), None);
        assert_eq!(ColumnKind::classify("point"), None);
        assert!(ColumnKind::Int.is_integer());
        assert!(!ColumnKind::Decimal.is_integer());
    }

    #[test]
    fn fingerprint_ignores_names_of_db_but_not_types() {
        let a = schema("a");
        let b = schema("b");
        assert_eq!(a.fingerprint(), b.fingerprint());
        let mut c = schema("a");
        c.columns[1] = col("at", ColumnKind::Timestamp, "timestamp(6)");
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.differences(&c).len(), 1);
        assert!(a.differences(&b).is_empty());
    }

    #[test]
    fn fingerprint_is_pinned() {
        // Golden: changing the canonical form silently would orphan every sealed schema.
        assert_eq!(
            schema("x").fingerprint().to_hex(),
            schema("y").fingerprint().to_hex()
        );
        assert_eq!(
            schema("x").fingerprint().to_hex(),
            "7bf0a4430e7ecd420ec2452d23a3ec80646c5bb6b702fafadc157f66a4141f85"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
    }
}

#[cfg(test)]
mod golden {
    use super::*;

    /// SCHM v1 bytes as every table installed before composite keys stored them.
    const V1: &str = "5343484d010001640174010269640406626967696e740000000113010000000000";

    fn v1_schema() -> SealedSchemaV1 {
        SealedSchemaV1 {
            database: "d".into(),
            table: "t".into(),
            columns: vec![ColumnDef {
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
        let v2 = crate::codec::encode(&s);
        assert_eq!(&v2[4..6], &[2, 0]);
        assert_eq!(SealedSchema::decode(&v2).unwrap(), s);
    }
}
