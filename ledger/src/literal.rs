//! SQL literals for text-protocol multi-row statements (pages and replay upserts).
//!
//! Why this is safe: every literal has exactly the value the binary protocol would have
//! bound for the same [`SqlValue`] on the same session, or none is produced and the caller
//! binds the statement instead ([`Literals::push`] returns false):
//! * integers and dates are printed in full; a FLOAT is printed through its exact f64
//!   widening (the server parses that double and stores the same f32); a DOUBLE is printed
//!   with Rust's shortest round-trip form, which the server parses back bit for bit.
//! * a string is written as its column's own bytes, never re-encoded: every target session
//!   runs `SET NAMES binary` ([`kernel::names`]), so a literal is a binary string that the
//!   server relabels as the column's charset byte for byte (a bound parameter is the same
//!   binary string). Bytes that are valid UTF-8 become a quoted string (the statement text
//!   is a Rust `str`): `'` is doubled (valid in every sql_mode), `\` and NUL are escaped
//!   only when the session does NOT run with `NO_BACKSLASH_ESCAPES`, and a value holding
//!   either is refused when the session's mode is unknown. Any other bytes (latin1 'é' is
//!   `E9`, cp1251 'т' `F2`, ucs2 'é' `00E9` is UTF-8 but `D8 00` is not) become a hex
//!   literal `X'..'`, for character and binary columns alike. The bytes of UUID, INET4,
//!   INET6 and spatial columns are always a hex literal: their value is the binary form,
//!   and a quoted string would be parsed as their text form.
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

/// True for columns whose bytes are always written as a hex literal (a binary string).
fn always_hex(kind: ColumnKind) -> bool {
    kind.is_binary_form() || kind == ColumnKind::Geometry
}

/// True when some value of `rows` holds a byte whose escaping depends on the sql_mode.
pub(crate) fn needs_mode<'a>(mut values: impl Iterator<Item = &'a SqlValue>) -> bool {
    values.any(|v| matches!(v, SqlValue::Bytes(b) if b.iter().any(|&c| c == b'\\' || c == 0)))
}

impl Literals {
    /// Appends the literal of `v` for a column of `kind`; false (and `out` possibly partly
    /// written: the caller discards it) when the value has no exact literal.
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
            SqlValue::Date(y, m, d, h, mi, s, us) => date(out, (*y, *m, *d), (*h, *mi, *s, *us)),
            SqlValue::Time(neg, d, h, mi, s, us) => {
                let hours = u64::from(*d) * 24 + u64::from(*h);
                let sign = if *neg { "-" } else { "" };
                let _ = write!(out, "'{sign}{hours:02}:{mi:02}:{s:02}.{us:06}'");
            }
            SqlValue::Bytes(b) if always_hex(kind) => hex(out, b),
            SqlValue::Bytes(b) => return self.bytes(out, b),
        }
        true
    }

    fn bytes(&self, out: &mut String, b: &[u8]) -> bool {
        let Ok(s) = std::str::from_utf8(b) else {
            hex(out, b);
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

/// Appends `X'..'` of `b`: a binary string, relabelled as the column's charset.
fn hex(out: &mut String, b: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(3 + 2 * b.len());
    out.push_str("X'");
    for &c in b {
        out.push(char::from(DIGITS[usize::from(c >> 4)]));
        out.push(char::from(DIGITS[usize::from(c & 0x0F)]));
    }
    out.push('\'');
}

/// Appends `'YYYY-MM-DD'`, or `'YYYY-MM-DD hh:mm:ss.ffffff'` when the time part is not all
/// zero: the text `write!` with zero padding gives, without its per-field formatting cost
/// (pages of DATETIME rows spent ~8% of serve's CPU there).
fn date(out: &mut String, (y, m, d): (u16, u8, u8), (h, mi, s, us): (u8, u8, u8, u32)) {
    // Each field after the year: its separator, value and width.
    let fields = [
        ('-', u64::from(m), 2),
        ('-', u64::from(d), 2),
        (' ', u64::from(h), 2),
        (':', u64::from(mi), 2),
        (':', u64::from(s), 2),
        ('.', u64::from(us), 6),
    ];
    let shown = if (h, mi, s, us) == (0, 0, 0, 0) { 2 } else { 6 };
    out.push('\'');
    padded(out, u64::from(y), 4);
    for &(sep, v, width) in &fields[..shown] {
        out.push(sep);
        padded(out, v, width);
    }
    out.push('\'');
}

/// Appends `v` in decimal, zero-padded to at least `width` digits (as `{v:0width$}`).
fn padded(out: &mut String, v: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    let mut rest = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let start = i.min(buf.len().saturating_sub(width));
    // ASCII digits only: always UTF-8.
    out.push_str(std::str::from_utf8(&buf[start..]).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: SqlValue, backslash: Backslash) -> Option<String> {
        lit_of(v, ColumnKind::Varchar, backslash)
    }

    fn lit_of(v: SqlValue, kind: ColumnKind, backslash: Backslash) -> Option<String> {
        let mut s = String::new();
        Literals { backslash }.push(&mut s, &v, kind).then_some(s)
    }

    fn b(s: &[u8]) -> SqlValue {
        SqlValue::Bytes(s.to_vec())
    }

    #[test]
    fn literals_are_exact_or_refused() {
        use Backslash::*;
        assert_eq!(lit(b(b"it's"), Unknown).unwrap(), "'it''s'");
        assert_eq!(lit(b(b"a\\b"), Unknown), None);
        assert_eq!(lit(b(b"a\\b\0"), Escape).unwrap(), "'a\\\\b\\0'");
        assert_eq!(lit(b(b"a\\b"), Literal).unwrap(), "'a\\b'");
        assert_eq!(lit(b(&[0xff, 0]), Unknown).unwrap(), "X'FF00'");
        assert_eq!(lit(SqlValue::Int(-5), Unknown).unwrap(), "-5");
        assert_eq!(
            lit(SqlValue::UInt(u64::MAX), Unknown).unwrap(),
            "18446744073709551615"
        );
        assert_eq!(
            lit(SqlValue::Date(2024, 2, 29, 1, 2, 3, 45), Unknown).unwrap(),
            "'2024-02-29 01:02:03.000045'"
        );
        assert_eq!(
            lit(SqlValue::Time(true, 1, 2, 3, 4, 5), Unknown).unwrap(),
            "'-26:03:04.000005'"
        );
        assert_eq!(lit(SqlValue::Double(f64::NAN), Unknown), None);
        // A FLOAT goes through its exact widening: parsing the text gives the same f32.
        let f = lit(SqlValue::Float(0.1), Unknown).unwrap();
        assert_eq!(f.parse::<f64>().unwrap() as f32, 0.1f32);
        let d = lit(SqlValue::Double(0.1), Unknown).unwrap();
        assert_eq!(d.parse::<f64>().unwrap(), 0.1);
        assert_eq!(lit(SqlValue::Null, Unknown).unwrap(), "NULL");
        assert_eq!(
            lit(SqlValue::Date(2024, 2, 29, 0, 0, 0, 0), Unknown).unwrap(),
            "'2024-02-29'"
        );
        // INET4 65.66.67.68 is the valid UTF-8 "ABCD", which as a quoted string INET4
        // would parse as text: binary forms are hex whatever their bytes.
        let k = |v, kind| lit_of(v, kind, Unknown).unwrap();
        assert_eq!(k(b(b"ABCD"), ColumnKind::Inet4), "X'41424344'");
        assert_eq!(k(b(b"\0\0"), ColumnKind::Geometry), "X'0000'");
        assert!(needs_mode([b(b"x\\")].iter()));
        assert!(!needs_mode([b(b"x'")].iter()));
    }

    proptest::proptest! {
        /// The hand-written date, time-of-day and hex literals are exactly the text of the
        /// `write!` formats they replaced, for every field value (boundaries included).
        #[test]
        fn fast_literals_equal_their_formats(
            (y, m, d) in (proptest::prelude::any::<u16>(), proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>()),
            (h, mi, s, us) in (proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>(), proptest::prelude::any::<u8>(), proptest::prelude::any::<u32>()),
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
        ) {
            let mut got = String::new();
            date(&mut got, (y, m, d), (h, mi, s, us));
            let want = match (h, mi, s, us) {
                (0, 0, 0, 0) => format!("'{y:04}-{m:02}-{d:02}'"),
                _ => format!("'{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02}.{us:06}'"),
            };
            proptest::prop_assert_eq!(got, want);
            let mut got = String::new();
            hex(&mut got, &bytes);
            let want: String = bytes.iter().map(|c| format!("{c:02X}")).collect();
            proptest::prop_assert_eq!(got, format!("X'{want}'"));
        }
    }

    /// Golden literals of character values in their own charsets (issue 15): bytes that
    /// are not UTF-8 are written as hex, every byte kept in its place, whatever the
    /// column; UTF-8 bytes are quoted as they are (relabelled by the binary session).
    #[test]
    fn strings_keep_their_own_bytes() {
        use Backslash::*;
        // cp1251 'тиов' (source) and its permutation 'твои': the silent difference of
        // issue 15 (source F2E9EEE2, target F2E2EEE9) cannot come from a literal.
        assert_eq!(
            lit(b(&[0xf2, 0xe9, 0xee, 0xe2]), Unknown).unwrap(),
            "X'F2E9EEE2'"
        );
        assert_eq!(
            lit(b(&[0xf2, 0xe2, 0xee, 0xe9]), Unknown).unwrap(),
            "X'F2E2EEE9'"
        );
        // latin1 'Å', 'é'; gbk '中'; big5 '中'; sjis 'ア'; euckr '한'.
        assert_eq!(lit(b(&[0xc5]), Unknown).unwrap(), "X'C5'");
        assert_eq!(lit(b(&[0xe9]), Unknown).unwrap(), "X'E9'");
        assert_eq!(lit(b(&[0xd6, 0xd0]), Unknown).unwrap(), "X'D6D0'");
        assert_eq!(lit(b(&[0xa4, 0xa4]), Unknown).unwrap(), "X'A4A4'");
        assert_eq!(lit(b(&[0x83, 0x41]), Unknown).unwrap(), "X'8341'");
        assert_eq!(lit(b(&[0xc7, 0xd1]), Unknown).unwrap(), "X'C7D1'");
        // A latin1 value whose bytes are also UTF-8 ('Ã©' is C3 A9): quoted, same bytes.
        assert_eq!(lit(b(&[0xc3, 0xa9]), Unknown).unwrap(), "'é'");
        // ucs2/utf16 'é' (00 E9) is not UTF-8; utf32 'A' (00 00 00 41) is, with NULs.
        assert_eq!(lit(b(&[0x00, 0xe9]), Unknown).unwrap(), "X'00E9'");
        assert_eq!(lit(b(&[0, 0, 0, 0x41]), Unknown), None);
        assert_eq!(lit(b(&[0, 0, 0, 0x41]), Escape).unwrap(), "'\\0\\0\\0A'");
        assert_eq!(
            lit(b(&[0, 0, 0, 0x41]), Literal).unwrap(),
            "'\u{0}\u{0}\u{0}A'"
        );
        // A value of bytes only partly UTF-8 is hex as a whole.
        assert_eq!(lit(b(b"ab\xe9'"), Unknown).unwrap(), "X'6162E927'");
        assert_eq!(lit(b(b""), Unknown).unwrap(), "''");
    }
}
