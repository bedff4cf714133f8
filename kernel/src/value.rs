//! Row values exactly as the server gave them (DESIGN §10).
//!
//! [`SqlValue`] mirrors `mysql_common::Value` one to one so nothing is re-typed on the way:
//! DATETIME stays a calendar value with no zone, TIMESTAMP stays the server's epoch text,
//! DECIMAL stays its exact digit string, NULL stays distinct from the empty string, bytes
//! stay bytes. It exists only because `mysql_common::Value` has no serde support.
use mysql_async::Value;
use serde::{Deserialize, Serialize};

/// One column value.
///
/// `Bytes` goes through `serde_bytes`: postcard writes a byte string and a `Vec<u8>` alike
/// (varint length, then the raw bytes: golden fixtures pin it), but serde's own `Vec<u8>`
/// visits the bytes one by one, which was ~10% of serve's CPU during windows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SqlValue {
    Null,
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    /// year, month, day, hour, minute, second, microsecond; no time zone, ever.
    Date(u16, u8, u8, u8, u8, u8, u32),
    /// negative, days, hours, minutes, seconds, microseconds.
    Time(bool, u32, u8, u8, u8, u32),
}

/// One row: values in the sealed schema's column order.
pub type Row = Vec<SqlValue>;

impl From<Value> for SqlValue {
    fn from(v: Value) -> SqlValue {
        match v {
            Value::NULL => SqlValue::Null,
            Value::Bytes(b) => SqlValue::Bytes(b),
            Value::Int(i) => SqlValue::Int(i),
            Value::UInt(u) => SqlValue::UInt(u),
            Value::Float(f) => SqlValue::Float(f),
            Value::Double(d) => SqlValue::Double(d),
            Value::Date(y, m, d, h, mi, s, us) => SqlValue::Date(y, m, d, h, mi, s, us),
            Value::Time(n, d, h, m, s, us) => SqlValue::Time(n, d, h, m, s, us),
        }
    }
}

impl From<SqlValue> for Value {
    fn from(v: SqlValue) -> Value {
        match v {
            SqlValue::Null => Value::NULL,
            SqlValue::Bytes(b) => Value::Bytes(b),
            SqlValue::Int(i) => Value::Int(i),
            SqlValue::UInt(u) => Value::UInt(u),
            SqlValue::Float(f) => Value::Float(f),
            SqlValue::Double(d) => Value::Double(d),
            SqlValue::Date(y, m, d, h, mi, s, us) => Value::Date(y, m, d, h, mi, s, us),
            SqlValue::Time(n, d, h, m, s, us) => Value::Time(n, d, h, m, s, us),
        }
    }
}

impl SqlValue {
    /// The value as a signed 64-bit primary key, if it is an integer that fits.
    pub fn as_key(&self) -> Option<i64> {
        match self {
            SqlValue::Int(i) => Some(*i),
            SqlValue::UInt(u) => i64::try_from(*u).ok(),
            SqlValue::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        }
    }

    /// True for SQL NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, SqlValue::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_variant() {
        let all = vec![
            Value::NULL,
            Value::Bytes(b"a \x00".to_vec()),
            Value::Bytes(Vec::new()),
            Value::Int(-5),
            Value::UInt(u64::MAX),
            Value::Float(1.5),
            Value::Double(-2.25),
            Value::Date(2024, 2, 29, 23, 59, 59, 999_999),
            Value::Time(true, 3, 1, 2, 3, 4),
        ];
        for v in all {
            let s = SqlValue::from(v.clone());
            let bytes = postcard::to_stdvec(&s).unwrap();
            let back: SqlValue = postcard::from_bytes(&bytes).unwrap();
            assert_eq!(Value::from(back), v);
        }
    }

    #[test]
    fn null_and_empty_string_differ() {
        assert_ne!(SqlValue::Null, SqlValue::Bytes(Vec::new()));
        assert_eq!(SqlValue::Bytes(b"42".to_vec()).as_key(), Some(42));
        assert_eq!(SqlValue::UInt(u64::MAX).as_key(), None);
    }
}
