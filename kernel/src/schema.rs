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
    /// Index into `columns` of the single signed integer primary-key column.
    pub pk: usize,
}

/// The physical part of a definition that the fingerprint covers: everything but names of
/// the database and table, so a target can be compared with its source.
#[derive(Serialize)]
struct Physical<'a> {
    columns: &'a [ColumnDef],
    pk: usize,
}

impl Versioned for SealedSchema {
    const KIND: [u8; 4] = *b"SCHM";
    const VERSION: u16 = 1;
}

impl SealedSchema {
    /// blake3 of the canonical physical definition (version-tagged).
    pub fn fingerprint(&self) -> Digest {
        let mut bytes = b"backfill-schema-v1".to_vec();
        bytes.extend(crate::codec::to_canonical(&Physical {
            columns: &self.columns,
            pk: self.pk,
        }));
        Digest::of(&bytes)
    }

    /// The primary-key column.
    pub fn pk_column(&self) -> &ColumnDef {
        &self.columns[self.pk]
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
        if self.pk != other.pk {
            out.push(format!("primary key column #{} vs #{}", self.pk, other.pk));
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

    fn schema(db: &str) -> SealedSchema {
        SealedSchema {
            database: db.into(),
            table: "t".into(),
            columns: vec![
                col("id", ColumnKind::BigInt, "bigint(20)"),
                col("at", ColumnKind::Datetime, "datetime(6)"),
            ],
            pk: 0,
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
