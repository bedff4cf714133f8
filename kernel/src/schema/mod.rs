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

mod legacy;
pub use legacy::{ColumnDefV2, SealedSchemaV1, SealedSchemaV2};

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
    /// GEOMETRY and its subtypes (POINT .. GEOMETRYCOLLECTION): the server's internal
    /// form, a 4-byte little-endian SRID then the WKB, the same bytes in a SELECT, in the
    /// binlog and in an INSERT (notes/mariadb.md).
    Geometry,
    /// MariaDB UUID: read as `CAST(c AS BINARY)` (16 bytes, text order, the binlog's
    /// form too) and written as `CAST(x AS BINARY)`; a text-charset string would be
    /// parsed as text.
    Uuid,
    /// MariaDB INET4: 4 bytes, read and written as binary like [`ColumnKind::Uuid`].
    Inet4,
    /// MariaDB INET6: 16 bytes, read and written as binary like [`ColumnKind::Uuid`].
    Inet6,
}

/// Every `information_schema.COLUMNS.DATA_TYPE` accepted, with its kind. The list of
/// supported types in docs/types.md is this table.
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
    ("geometry", ColumnKind::Geometry),
    ("point", ColumnKind::Geometry),
    ("linestring", ColumnKind::Geometry),
    ("polygon", ColumnKind::Geometry),
    ("multipoint", ColumnKind::Geometry),
    ("multilinestring", ColumnKind::Geometry),
    ("multipolygon", ColumnKind::Geometry),
    ("geometrycollection", ColumnKind::Geometry),
    ("uuid", ColumnKind::Uuid),
    ("inet4", ColumnKind::Inet4),
    ("inet6", ColumnKind::Inet6),
];

impl ColumnKind {
    /// The kind of a DATA_TYPE, or None when it is not supported.
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

    /// True for the MariaDB types whose value is read and written as its binary form
    /// (`CAST(.. AS BINARY)`): a text-charset string given to them is parsed as text
    /// (measured: `_utf8mb4'ABCD'` into INET4 fails 1292, `CAST(.. AS BINARY)` stores
    /// 65.66.67.68).
    pub fn is_binary_form(self) -> bool {
        matches!(
            self,
            ColumnKind::Uuid | ColumnKind::Inet4 | ColumnKind::Inet6
        )
    }

    /// The byte length of a fixed binary form (UUID, INET4, INET6), whose trailing 0x00
    /// the binlog drops.
    pub fn binary_form_len(self) -> Option<usize> {
        match self {
            ColumnKind::Uuid | ColumnKind::Inet6 => Some(16),
            ColumnKind::Inet4 => Some(4),
            _ => None,
        }
    }
}

/// A generated column: the target computes it, so it is never written (DESIGN §15).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generated {
    /// STORED (true) or VIRTUAL (false).
    pub stored: bool,
    /// GENERATION_EXPRESSION as the server prints it; the target's must be the same.
    pub expression: String,
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
    /// Set for a VIRTUAL or STORED generated column (SCHM v3).
    pub generated: Option<Generated>,
}

impl ColumnDef {
    /// The expression a read selects for this column: the column, or `CAST(c AS BINARY)`
    /// for the binary-form types ([`ColumnKind::is_binary_form`]), whose plain SELECT
    /// is their text (`1.2.3.4`) while the binlog carries the binary form.
    pub fn select_expr(&self) -> String {
        let q = quote_ident(&self.name);
        if self.kind.is_binary_form() {
            format!("CAST({q} AS BINARY)")
        } else {
            q
        }
    }
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
            generated: None,
        }
    }

    /// Declared length of a fixed-length binary column (BINARY(n), UUID, INET4, INET6),
    /// for padding binlog values back.
    pub fn fixed_binary_len(&self) -> Option<usize> {
        match self.kind {
            ColumnKind::Binary => self.char_len.and_then(|n| usize::try_from(n).ok()),
            k => k.binary_form_len(),
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

/// Version 3 adds [`ColumnDef::generated`].
impl Versioned for SealedSchema {
    const KIND: [u8; 4] = *b"SCHM";
    const VERSION: u16 = 3;
}

impl SealedSchema {
    /// Decodes a sealed schema of every version written (v1: one primary-key column).
    pub fn decode(bytes: &[u8]) -> Result<SealedSchema, crate::codec::DecodeError> {
        let (version, body) = crate::codec::split::<SealedSchema>(bytes)?;
        if version == 1 {
            let v1: SealedSchemaV1 = crate::codec::decode_body(&Self::KIND, 1, body)?;
            return Ok(v1.into());
        }
        if version == 2 {
            let v2: SealedSchemaV2 = crate::codec::decode_body(&Self::KIND, 2, body)?;
            return Ok(v2.into());
        }
        crate::codec::decode_body(&Self::KIND, version, body)
    }

    /// Indexes of the columns a write names (INSERT, upsert): every column but the
    /// generated ones, which the target computes (DESIGN §15). The one place this is
    /// decided; rows still hold every column (read, logged and compared).
    pub fn written_columns(&self) -> Vec<usize> {
        (0..self.columns.len())
            .filter(|&i| self.columns[i].generated.is_none())
            .collect()
    }

    /// True for a key that is the table's PRIMARY KEY.
    pub fn key_is_primary(&self) -> bool {
        self.key_name == PRIMARY
    }

    /// blake3 of the canonical physical definition (version-tagged). A single-column
    /// primary key keeps the v1 formula, so tables sealed before composite keys keep
    /// their fingerprint; a table without generated columns keeps the v1/v2 column form,
    /// so tables sealed before generated columns keep theirs.
    pub fn fingerprint(&self) -> Digest {
        legacy::fingerprint(self)
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
        "{}{}{}{}",
        c.column_type,
        c.generated
            .as_ref()
            .map(|g| format!(
                " AS ({}) {}",
                g.expression,
                if g.stored { "STORED" } else { "VIRTUAL" }
            ))
            .unwrap_or_default(),
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
        assert_eq!(ColumnKind::classify("POINT"), Some(ColumnKind::Geometry));
        assert_eq!(ColumnKind::classify("inet6"), Some(ColumnKind::Inet6));
        assert_eq!(ColumnKind::classify("vector"), None);
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
mod golden;
