//! Table-map checks against the sealed schema and row values as server values
//! (DESIGN §3.7, §9, §10).
//!
//! A rows event is only decoded against a sealed schema after its table map agrees with it
//! column by column: count, physical type (from the table map's column types and
//! metadata), name (binlog_row_metadata=FULL) and signedness. Any disagreement is a
//! definite `schema_changed` naming the position and the difference; the caller pauses
//! the table and keeps its events raw.
use crate::schema::{ColumnKind, SealedSchema};
use crate::value::SqlValue;
use mysql_async::binlog::events::{OptionalMetaExtractor, RowsEventData, TableMapEvent};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::consts::ColumnType;
use mysql_common::io::ParseBuf;

/// The column types a kind may have in a table map.
fn allowed(kind: ColumnKind) -> &'static [ColumnType] {
    use ColumnType::*;
    match kind {
        ColumnKind::TinyInt => &[MYSQL_TYPE_TINY],
        ColumnKind::SmallInt => &[MYSQL_TYPE_SHORT],
        ColumnKind::MediumInt => &[MYSQL_TYPE_INT24],
        ColumnKind::Int => &[MYSQL_TYPE_LONG],
        ColumnKind::BigInt => &[MYSQL_TYPE_LONGLONG],
        ColumnKind::Decimal => &[MYSQL_TYPE_NEWDECIMAL],
        ColumnKind::Float => &[MYSQL_TYPE_FLOAT],
        ColumnKind::Double => &[MYSQL_TYPE_DOUBLE],
        ColumnKind::Bit => &[MYSQL_TYPE_BIT],
        ColumnKind::Date => &[MYSQL_TYPE_NEWDATE, MYSQL_TYPE_DATE],
        ColumnKind::Datetime => &[MYSQL_TYPE_DATETIME2, MYSQL_TYPE_DATETIME],
        ColumnKind::Timestamp => &[MYSQL_TYPE_TIMESTAMP2, MYSQL_TYPE_TIMESTAMP],
        ColumnKind::Time => &[MYSQL_TYPE_TIME2, MYSQL_TYPE_TIME],
        ColumnKind::Year => &[MYSQL_TYPE_YEAR],
        ColumnKind::Char | ColumnKind::Binary => &[MYSQL_TYPE_STRING],
        ColumnKind::Varchar | ColumnKind::Varbinary => &[MYSQL_TYPE_VARCHAR, MYSQL_TYPE_VAR_STRING],
        ColumnKind::TinyText
        | ColumnKind::Text
        | ColumnKind::MediumText
        | ColumnKind::LongText
        | ColumnKind::TinyBlob
        | ColumnKind::Blob
        | ColumnKind::MediumBlob
        | ColumnKind::LongBlob => &[
            MYSQL_TYPE_BLOB,
            MYSQL_TYPE_TINY_BLOB,
            MYSQL_TYPE_MEDIUM_BLOB,
            MYSQL_TYPE_LONG_BLOB,
        ],
        ColumnKind::Enum => &[MYSQL_TYPE_ENUM],
        ColumnKind::Set => &[MYSQL_TYPE_SET],
        // MariaDB logs JSON as LONGTEXT; MySQL as its binary JSON.
        ColumnKind::Json => &[MYSQL_TYPE_JSON, MYSQL_TYPE_BLOB],
        ColumnKind::Geometry => &[MYSQL_TYPE_GEOMETRY],
        // MariaDB logs UUID, INET4 and INET6 as fixed strings of their binary form
        // (measured: STRING(16) meta 65040, STRING(4) meta 65028).
        ColumnKind::Uuid | ColumnKind::Inet4 | ColumnKind::Inet6 => &[MYSQL_TYPE_STRING],
    }
}

/// Compares a table map with the sealed schema. Returns the differences (empty = agree).
pub fn check_table_map(tme: &TableMapEvent<'_>, sealed: &SealedSchema) -> Vec<String> {
    let mut diffs = Vec::new();
    let n = tme.columns_count() as usize;
    if n != sealed.columns.len() {
        diffs.push(format!(
            "column count {n} in the binlog, {} sealed",
            sealed.columns.len()
        ));
        return diffs;
    }
    let meta = match OptionalMetaExtractor::new(tme.iter_optional_meta()) {
        Ok(m) => m,
        Err(e) => {
            diffs.push(format!("unreadable table-map metadata: {e}"));
            return diffs;
        }
    };
    let names: Vec<String> = meta
        .iter_column_name()
        .filter_map(|r| r.ok().map(|c| c.name().into_owned()))
        .collect();
    if names.len() != n {
        diffs.push(
            "the table map carries no column names: set binlog_row_metadata=FULL on the \
             source"
                .to_string(),
        );
    }
    let mut signed = meta.iter_signedness();
    for (i, col) in sealed.columns.iter().enumerate() {
        let ty = match tme.get_column_type(i) {
            Ok(Some(t)) => t,
            Ok(None) | Err(_) => {
                diffs.push(format!("column #{i} `{}`: unknown binlog type", col.name));
                continue;
            }
        };
        let unsigned = if ty.is_numeric_type() {
            signed.next()
        } else {
            None
        };
        if !allowed(col.kind).contains(&ty) {
            diffs.push(format!(
                "column #{i} `{}`: binlog type {ty:?}, sealed {}",
                col.name, col.column_type
            ));
        }
        if let Some(name) = names.get(i) {
            if name != &col.name {
                diffs.push(format!(
                    "column #{i}: named `{name}` in the binlog, `{}` sealed",
                    col.name
                ));
            }
        }
        if col.kind.is_integer() {
            if let Some(u) = unsigned {
                if u != col.unsigned {
                    diffs.push(format!(
                        "column #{i} `{}`: {} in the binlog, sealed {}",
                        col.name,
                        if u { "unsigned" } else { "signed" },
                        col.column_type
                    ));
                }
            }
        }
        if let Some(d) = meta_difference(tme, i, ty, col) {
            diffs.push(d);
        }
    }
    diffs
}

/// Length/precision differences visible in the table map's per-column metadata.
fn meta_difference(
    tme: &TableMapEvent<'_>,
    i: usize,
    ty: ColumnType,
    col: &crate::schema::ColumnDef,
) -> Option<String> {
    let m = tme.get_column_metadata(i)?;
    match ty {
        ColumnType::MYSQL_TYPE_NEWDECIMAL if m.len() >= 2 => {
            let (p, s) = (u64::from(m[0]), u64::from(m[1]));
            let sealed = (col.numeric_precision, col.numeric_scale);
            (sealed != (Some(p), Some(s)) && sealed.0.is_some()).then(|| {
                format!(
                    "column #{i} `{}`: decimal({p},{s}) in the binlog, sealed {}",
                    col.name, col.column_type
                )
            })
        }
        ColumnType::MYSQL_TYPE_DATETIME2
        | ColumnType::MYSQL_TYPE_TIMESTAMP2
        | ColumnType::MYSQL_TYPE_TIME2
            if !m.is_empty() =>
        {
            let fsp = u64::from(m[0]);
            let sealed = col.datetime_precision.unwrap_or(0);
            (fsp != sealed).then(|| {
                format!(
                    "column #{i} `{}`: fractional precision {fsp} in the binlog, sealed {}",
                    col.name, col.column_type
                )
            })
        }
        _ => None,
    }
}

/// Decodes the row images of one table map's rows events. mysql_common's row iterator
/// re-reads the table map's optional metadata and builds named column descriptions for
/// every row; here the per-column facts (binlog type, metadata, signedness) are taken
/// once per table map and each value is parsed by the same mysql_common value parser.
/// Only images that hold every column are decoded (the caller checks it first, §3.7).
#[derive(Clone, Debug)]
pub struct RowDecoder {
    cols: Vec<(ColumnType, Vec<u8>, bool)>,
}

/// One decoded row: before and after images as server values.
pub type Images = (Option<Vec<SqlValue>>, Option<Vec<SqlValue>>);

impl RowDecoder {
    /// The decoder of a table map.
    pub fn new(tme: &TableMapEvent<'_>) -> Result<RowDecoder, String> {
        let meta = OptionalMetaExtractor::new(tme.iter_optional_meta())
            .map_err(|e| format!("unreadable table-map metadata: {e}"))?;
        let mut signed = meta.iter_signedness();
        let n = tme.columns_count() as usize;
        let mut cols = Vec::with_capacity(n);
        for i in 0..n {
            let ty = match tme.get_column_type(i) {
                Ok(Some(t)) => t,
                _ => return Err(format!("column #{i}: unknown binlog type")),
            };
            let m = tme.get_column_metadata(i).unwrap_or(&[]).to_vec();
            let unsigned = ty.is_numeric_type() && signed.next().unwrap_or(false);
            cols.push((ty, m, unsigned));
        }
        Ok(RowDecoder { cols })
    }

    /// Every row of `data` (whose images hold every column), as server values of the
    /// sealed columns.
    pub fn rows<'a>(
        &'a self,
        data: &'a RowsEventData<'_>,
        sealed: &SealedSchema,
    ) -> Result<Vec<Images>, String> {
        if self.cols.len() != sealed.columns.len() {
            return Err("a row image without every column".to_string());
        }
        let (before, after) = (
            data.columns_before_image().is_some(),
            data.columns_after_image().is_some(),
        );
        let mut buf = ParseBuf(data.rows_data());
        let mut out = Vec::new();
        while !buf.is_empty() {
            let b = if before {
                Some(self.image(&mut buf, sealed)?)
            } else {
                None
            };
            let a = if after {
                Some(self.image(&mut buf, sealed)?)
            } else {
                None
            };
            out.push((b, a));
        }
        Ok(out)
    }

    fn image<'a>(
        &'a self,
        buf: &mut ParseBuf<'a>,
        sealed: &SealedSchema,
    ) -> Result<Vec<SqlValue>, String> {
        let n = self.cols.len();
        let nulls = buf
            .checked_eat(n.div_ceil(8))
            .ok_or_else(|| "undecodable row: truncated null bitmap".to_string())?;
        let mut row = Vec::with_capacity(n);
        for (i, ((ty, meta, unsigned), col)) in self.cols.iter().zip(&sealed.columns).enumerate() {
            if nulls[i / 8] & (1 << (i % 8)) != 0 {
                row.push(SqlValue::Null);
                continue;
            }
            let v: BinlogValue<'_> = buf
                .parse((*ty, meta.as_slice(), *unsigned, false))
                .map_err(|e| format!("undecodable row: column `{}`: {e}", col.name))?;
            row.push(to_sql_value(v.into_owned(), col).map_err(|p| match p {
                ValueProblem::PartialJson => "a partial JSON update".to_string(),
                ValueProblem::Json(e) => format!("column `{}`: JSON not renderable: {e}", col.name),
            })?);
        }
        Ok(row)
    }
}

/// Why a value could not be kept.
#[derive(Debug, PartialEq, Eq)]
pub enum ValueProblem {
    /// MySQL partial JSON (binlog_row_value_options=PARTIAL_JSON): no full image.
    PartialJson,
    /// The binary JSON could not be rendered.
    Json(String),
}

/// Converts one binlog value to the server value kept in L: fixed-length binary (BINARY(n),
/// UUID, INET4, INET6) is padded back to its declared length (the binlog drops trailing
/// 0x00), JSON binary becomes its text, a SET's bitmask its bit value (`UInt`), YEAR 0000
/// its 0; everything else is kept exactly as decoded (DATETIME as a calendar value,
/// TIMESTAMP as epoch text, DECIMAL as its exact digits).
pub fn to_sql_value(
    v: BinlogValue<'static>,
    col: &crate::schema::ColumnDef,
) -> Result<SqlValue, ValueProblem> {
    let value = match v {
        BinlogValue::Value(v) => v,
        BinlogValue::Jsonb(_) => {
            mysql_async::Value::try_from(v).map_err(|e| ValueProblem::Json(e.to_string()))?
        }
        BinlogValue::JsonDiff(_) => return Err(ValueProblem::PartialJson),
    };
    let mut out = SqlValue::from(value);
    // mysql_common 0.37 reads a signed MEDIUMINT without sign extension (-1 arrives as
    // 16777215); the 24-bit two's complement is restored here, exactly.
    if let (ColumnKind::MediumInt, false, SqlValue::Int(v)) = (col.kind, col.unsigned, &mut out) {
        if (0x80_0000..=0xFF_FFFF).contains(v) {
            *v -= 0x100_0000;
        }
    }
    // A SET arrives as its bitmask (little-endian, 1-8 bytes). Kept as bytes it would be
    // written to the target as a string, which is no member list (strict mode refuses it
    // with 1265, another mode stores ''): it is kept as its bit value, which the target
    // takes as written and the key encoding reads as the same SET.
    if let (ColumnKind::Set, SqlValue::Bytes(b)) = (col.kind, &out) {
        if (1..=8).contains(&b.len()) {
            let mut le = [0u8; 8];
            le[..b.len()].copy_from_slice(b);
            out = SqlValue::UInt(u64::from_le_bytes(le));
        }
    }
    // A YEAR is one byte, 0 for 0000 and y - 1900 for 1901..2155; mysql_common gives the
    // text of 1900 + byte, so YEAR 0000 arrives as "1900" (measured; mariadb-binlog
    // prints 1900 too), and written back as that text it would not be 0000 (and '0' as
    // text is 2000). It is kept as the integer a SELECT gives: 1900 is no YEAR, so 0.
    if let (ColumnKind::Year, SqlValue::Bytes(b)) = (col.kind, &out) {
        if let Some(y) = std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
        {
            out = SqlValue::Int(if y == 1900 { 0 } else { y });
        }
    }
    if let (Some(n), SqlValue::Bytes(b)) = (col.fixed_binary_len(), &mut out) {
        if b.len() < n {
            b.resize(n, 0);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColumnDef;

    fn col(kind: ColumnKind, len: Option<u64>) -> ColumnDef {
        ColumnDef {
            name: "c".into(),
            kind,
            column_type: "x".into(),
            unsigned: false,
            nullable: true,
            char_len: len,
            numeric_precision: None,
            numeric_scale: None,
            datetime_precision: None,
            charset: None,
            collation: None,
            generated: None,
        }
    }

    /// A MySQL JSON column value as the binlog carries it (4-byte length, then the binary
    /// JSON), parsed by the capture's own call.
    fn mysql_json(jsonb: &[u8]) -> BinlogValue<'static> {
        let mut bytes = (jsonb.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(jsonb);
        let mut buf = ParseBuf(&bytes);
        let v: BinlogValue<'_> = buf
            .parse((ColumnType::MYSQL_TYPE_JSON, &[4u8][..], false, false))
            .expect("a binary JSON value");
        v.into_owned()
    }

    /// MySQL 8's binary JSON (json_binary.h layout, built here by hand: no MySQL server
    /// runs on these machines) is rendered as text without loss: a uint64 above 2^63, an
    /// empty key, a double, nesting and a null literal. A value JSON text cannot hold
    /// exactly (an opaque DECIMAL, e.g. `JSON_OBJECT('a', 1.5)` on MySQL) is refused, so
    /// the table pauses naming the column instead of writing another value.
    #[test]
    fn mysql_binary_json_renders_exactly_or_is_refused() {
        let inner = [
            1, 0, 12, 0, // small object: 1 element, 12 bytes
            11, 0, 1, 0, // key at 11, 1 byte
            0x04, 0, 0, // value: literal null, inline
            b'b',
        ];
        let mut array = vec![
            2, 0, 30, 0, // small array: 2 elements, 30 bytes
            0x0b, 10, 0, // double at 10
            0x00, 18, 0, // small object at 18
        ];
        array.extend_from_slice(&1.5f64.to_le_bytes());
        array.extend_from_slice(&inner);
        let mut outer = vec![
            0x00, // small object
            2, 0, 57, 0, // 2 elements, 57 bytes
            18, 0, 0, 0, // key "" at 18
            18, 0, 1, 0, // key "a" at 18
            0x0a, 19, 0, // uint64 at 19
            0x02, 27, 0, // small array at 27
            b'a',
        ];
        outer.extend_from_slice(&u64::MAX.to_le_bytes());
        outer.extend_from_slice(&array);
        let j = col(ColumnKind::Json, None);
        assert_eq!(
            to_sql_value(mysql_json(&outer), &j),
            Ok(SqlValue::Bytes(
                br#"{"":18446744073709551615,"a":[1.5,{"b":null}]}"#.to_vec()
            ))
        );
        // An opaque NEWDECIMAL scalar (type 246, 2 bytes of packed decimal after precision
        // and scale).
        let opaque = [0x0f, 246, 4, 3, 1, 0x80, 0x0f];
        assert!(matches!(
            to_sql_value(mysql_json(&opaque), &j),
            Err(ValueProblem::Json(_))
        ));
    }

    #[test]
    fn binary_is_padded_back_and_others_untouched() {
        let b = col(ColumnKind::Binary, Some(4));
        let v = to_sql_value(BinlogValue::Value(b"ab".to_vec().into()), &b);
        assert_eq!(v, Ok(SqlValue::Bytes(b"ab\0\0".to_vec())));
        let v = to_sql_value(BinlogValue::Value(mysql_async::Value::NULL), &b);
        assert_eq!(v, Ok(SqlValue::Null));
        let vb = col(ColumnKind::Varbinary, Some(4));
        let v = to_sql_value(BinlogValue::Value(b"ab".to_vec().into()), &vb);
        assert_eq!(v, Ok(SqlValue::Bytes(b"ab".to_vec())));
        let dt = col(ColumnKind::Datetime, None);
        let d = mysql_async::Value::Date(2024, 2, 29, 23, 59, 59, 123_456);
        assert_eq!(
            to_sql_value(BinlogValue::Value(d), &dt),
            Ok(SqlValue::Date(2024, 2, 29, 23, 59, 59, 123_456))
        );
        assert_eq!(
            to_sql_value(BinlogValue::JsonDiff(Vec::new()), &dt),
            Err(ValueProblem::PartialJson)
        );
    }

    #[test]
    fn signed_mediumint_is_sign_extended() {
        let m = col(ColumnKind::MediumInt, None);
        let v = |i: i64| to_sql_value(BinlogValue::Value(mysql_async::Value::Int(i)), &m);
        assert_eq!(v(0xFF_FFFF), Ok(SqlValue::Int(-1)));
        assert_eq!(v(0x80_0000), Ok(SqlValue::Int(-8_388_608)));
        assert_eq!(v(0x7F_FFFF), Ok(SqlValue::Int(8_388_607)));
        let mut u = col(ColumnKind::MediumInt, None);
        u.unsigned = true;
        let uv = to_sql_value(BinlogValue::Value(mysql_async::Value::Int(0xFF_FFFF)), &u);
        assert_eq!(uv, Ok(SqlValue::Int(16_777_215)));
    }

    /// Golden: the row-image bytes of a value, parsed by the same parser as
    /// [`RowDecoder`], then kept.
    fn decoded(ty: ColumnType, meta: &[u8], image: &[u8], c: &ColumnDef) -> SqlValue {
        let v: BinlogValue<'_> = ParseBuf(image).parse((ty, meta, false, false)).unwrap();
        to_sql_value(v.into_owned(), c).unwrap()
    }

    #[test]
    fn year_0000_is_0_and_years_are_integers() {
        let y = col(ColumnKind::Year, None);
        let v = |b: u8| decoded(ColumnType::MYSQL_TYPE_YEAR, &[], &[b], &y);
        assert_eq!(v(0), SqlValue::Int(0));
        assert_eq!(v(1), SqlValue::Int(1901));
        assert_eq!(v(255), SqlValue::Int(2155));
    }

    /// A UUID's row image as MariaDB 10.11 logs it: STRING meta FE 10, a length byte and
    /// the bytes without their trailing 0x00 (here 00 01 of INET6 `1::`).
    #[test]
    fn a_binary_form_row_image_is_padded_back() {
        let c = col(ColumnKind::Inet6, None);
        let v = decoded(ColumnType::MYSQL_TYPE_STRING, &[0xfe, 0x10], &[2, 0, 1], &c);
        let mut want = vec![0u8; 16];
        want[1] = 1;
        assert_eq!(v, SqlValue::Bytes(want));
    }

    /// UUID, INET4 and INET6 arrive as their binary form without trailing 0x00 (measured:
    /// INET4 255.255.255.0 as FF FF FF, UUID 0 as no byte): padded back to 16, 4, 16.
    #[test]
    fn binary_forms_are_padded_back() {
        let cases: [(ColumnKind, &[u8], &[u8]); 4] = [
            (ColumnKind::Inet4, b"\xff\xff\xff", b"\xff\xff\xff\x00"),
            (ColumnKind::Uuid, b"", &[0; 16]),
            (
                ColumnKind::Inet6,
                b"\x00\x01",
                b"\x00\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
            ),
            (ColumnKind::Geometry, b"\x00\x00", b"\x00\x00"),
        ];
        for (kind, binlog, stored) in cases {
            let v = to_sql_value(BinlogValue::Value(binlog.to_vec().into()), &col(kind, None));
            assert_eq!(v, Ok(SqlValue::Bytes(stored.to_vec())), "{kind:?}");
        }
    }

    #[test]
    fn every_kind_has_binlog_types() {
        for (_, k) in crate::schema::SUPPORTED_TYPES {
            assert!(!allowed(*k).is_empty());
        }
    }
}
