//! SQL literals for text-protocol multi-row statements (pages and replay upserts).
//!
//! Why this is safe: every literal has exactly the value the binary protocol would have
//! bound for the same [`SqlValue`] on the same session, or none is produced and the caller
//! binds the statement instead ([`Literals::push`] returns false):
//! * integers and dates are printed in full; a FLOAT is printed through its exact f64
//!   widening (the server parses that double and stores the same f32); a DOUBLE is printed
//!   with Rust's shortest round-trip form, which the server parses back bit for bit.
//! * bytes that are valid UTF-8 become a quoted string in the connection character set,
//!   which is what a bound string parameter is: `'` is doubled (valid in every sql_mode),
//!   `\` and NUL are escaped only when the session does NOT run with
//!   `NO_BACKSLASH_ESCAPES`, and a value holding either is refused when the session's mode
//!   is unknown. Bytes that are not UTF-8 become a hex literal only for binary columns
//!   (stored as-is, like a bound value); for other columns they are refused. The bytes of
//!   UUID, INET4, INET6 and spatial columns are always a hex literal: their value is the
//!   binary form, and a quoted text-charset string would be parsed as text.
//!
//! Nothing here builds SQL from anything but the sealed schema's quoted identifiers and
//! these literals, so no value can change a statement's shape.
use kernel::schema::ColumnKind;
use kernel::value::SqlValue;
use std::fmt::Write as _;

/// How backslashes are read by the target session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backslash {
    /// Default sql_mode: `\` starts an escape.
    Escape,
    /// `NO_BACKSLASH_ESCAPES`: `\` is an ordinary character.
    Literal,
    /// Not asked yet: values holding `\` or NUL are refused.
    Unknown,
}

/// Appends literals to one statement.
pub(crate) struct Literals {
    pub(crate) backslash: Backslash,
}

/// True for columns that store bytes without a character set.
pub(crate) fn is_binary(kind: ColumnKind) -> bool {
    matches!(
        kind,
        ColumnKind::Binary
            | ColumnKind::Varbinary
            | ColumnKind::TinyBlob
            | ColumnKind::Blob
            | ColumnKind::MediumBlob
            | ColumnKind::LongBlob
            | ColumnKind::Bit
            | ColumnKind::Geometry
            | ColumnKind::Uuid
            | ColumnKind::Inet4
            | ColumnKind::Inet6
    )
}

/// True for columns whose bytes are always written as a hex literal (a binary string).
fn always_hex(kind: ColumnKind) -> bool {
    kind.is_binary_form() || kind == ColumnKind::Geometry
}

/// True when some value of `rows` holds a byte whose escaping depends on the sql_mode.
pub(crate) fn needs_mode<'a>(mut values: impl Iterator<Item = &'a SqlValue>) -> bool {
    values.any(|v| matches!(v, SqlValue::Bytes(b) if b.iter().any(|&c| c == b'\\' || c == 0)))
}

impl Literals {
    /// Appends the literal of `v` for a column of `kind`; false (and `out` possibly
    /// partly written: the caller discards it) when the value has no exact literal.
    pub(crate) fn push(&self, out: &mut String, v: &SqlValue, kind: ColumnKind) -> bool {
        match v {
            SqlValue::Null => out.push_str("NULL"),
            SqlValue::Int(i) => {
                let _ = write!(out, "{i}");
            }
            SqlValue::UInt(u) => {
                let _ = write!(out, "{u}");
            }
            SqlValue::Float(f) if f.is_finite() => {
                let _ = write!(out, "{:e}", f64::from(*f));
            }
            SqlValue::Double(d) if d.is_finite() => {
                let _ = write!(out, "{d:e}");
            }
            SqlValue::Float(_) | SqlValue::Double(_) => return false,
            SqlValue::Date(y, m, d, 0, 0, 0, 0) => {
                let _ = write!(out, "'{y:04}-{m:02}-{d:02}'");
            }
            SqlValue::Date(y, m, d, h, mi, s, us) => {
                let _ = write!(out, "'{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}'");
            }
            SqlValue::Time(neg, d, h, mi, s, us) => {
                let hours = u64::from(*d) * 24 + u64::from(*h);
                let sign = if *neg { "-" } else { "" };
                let _ = write!(out, "'{sign}{hours:02}:{mi:02}:{s:02}.{us:06}'");
            }
            SqlValue::Bytes(b) => return self.bytes(out, b, kind),
        }
        true
    }

    fn bytes(&self, out: &mut String, b: &[u8], kind: ColumnKind) -> bool {
        let text = std::str::from_utf8(b).ok().filter(|_| !always_hex(kind));
        let Some(s) = text else {
            if !is_binary(kind) {
                return false;
            }
            out.reserve(3 + 2 * b.len());
            out.push_str("X'");
            for c in b {
                let _ = write!(out, "{c:02X}");
            }
            out.push('\'');
            return true;
        };
        out.reserve(s.len() + 2);
        out.push('\'');
        let mut rest = s;
        while let Some(i) = rest.find(['\'', '\\', '\0']) {
            out.push_str(&rest[..i]);
            match (rest.as_bytes()[i], self.backslash) {
                (b'\'', _) => out.push_str("''"),
                (_, Backslash::Unknown) => return false,
                (b'\\', Backslash::Escape) => out.push_str("\\\\"),
                (_, Backslash::Escape) => out.push_str("\\0"),
                (c, Backslash::Literal) => out.push(char::from(c)),
            }
            rest = &rest[i + 1..];
        }
        out.push_str(rest);
        out.push('\'');
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: SqlValue, kind: ColumnKind, backslash: Backslash) -> Option<String> {
        let mut s = String::new();
        Literals { backslash }.push(&mut s, &v, kind).then_some(s)
    }

    #[test]
    fn literals_are_exact_or_refused() {
        use Backslash::*;
        use ColumnKind as K;
        let b = |s: &[u8]| SqlValue::Bytes(s.to_vec());
        assert_eq!(lit(b(b"it's"), K::Varchar, Unknown).unwrap(), "'it''s'");
        assert_eq!(lit(b(b"a\\b"), K::Varchar, Unknown), None);
        assert_eq!(
            lit(b(b"a\\b\0"), K::Varchar, Escape).unwrap(),
            "'a\\\\b\\0'"
        );
        assert_eq!(lit(b(b"a\\b"), K::Varchar, Literal).unwrap(), "'a\\b'");
        assert_eq!(
            lit(b(&[0xff, 0]), K::Varbinary, Unknown).unwrap(),
            "X'FF00'"
        );
        assert_eq!(lit(b(&[0xff]), K::Varchar, Escape), None);
        assert_eq!(lit(SqlValue::Int(-5), K::BigInt, Unknown).unwrap(), "-5");
        assert_eq!(
            lit(SqlValue::UInt(u64::MAX), K::BigInt, Unknown).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(
            lit(
                SqlValue::Date(2024, 2, 29, 1, 2, 3, 45),
                K::Datetime,
                Unknown
            )
            .unwrap(),
            "'2024-02-29 01:02:03.000045'"
        );
        assert_eq!(
            lit(SqlValue::Time(true, 1, 2, 3, 4, 5), K::Time, Unknown).unwrap(),
            "'-26:03:04.000005'"
        );
        assert_eq!(lit(SqlValue::Double(f64::NAN), K::Double, Unknown), None);
        // A FLOAT goes through its exact widening: parsing the text gives the same f32.
        let f = lit(SqlValue::Float(0.1), K::Float, Unknown).unwrap();
        assert_eq!(f.parse::<f64>().unwrap() as f32, 0.1f32);
        let d = lit(SqlValue::Double(0.1), K::Double, Unknown).unwrap();
        assert_eq!(d.parse::<f64>().unwrap(), 0.1);
        assert_eq!(lit(SqlValue::Null, K::Int, Unknown).unwrap(), "NULL");
        assert_eq!(
            lit(SqlValue::Date(2024, 2, 29, 0, 0, 0, 0), K::Date, Unknown).unwrap(),
            "'2024-02-29'"
        );
        // INET4 65.66.67.68 is the valid UTF-8 "ABCD", which as a quoted string INET4
        // would parse as text: binary forms are hex whatever their bytes.
        assert_eq!(lit(b(b"ABCD"), K::Inet4, Unknown).unwrap(), "X'41424344'");
        assert_eq!(lit(b(b"\0\0"), K::Geometry, Unknown).unwrap(), "X'0000'");
        assert!(needs_mode([b(b"x\\")].iter()));
        assert!(!needs_mode([b(b"x'")].iter()));
    }
}
