//! The kind of each key column (how it is read, ordered and written back) from its
//! definition, and the typed literals of its values in a predicate.
use super::{KeyCol, KeyKind};
use crate::verify::column::Column;
use kernel::key::encode;
use kernel::value::SqlValue;

pub(super) fn number<T: std::str::FromStr>(b: &[u8]) -> std::result::Result<T, String> {
    std::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an integer: {}", String::from_utf8_lossy(b)))
}

/// The kind of a key column, or why verify cannot merge by it yet.
pub(super) fn kind_of(c: &Column) -> std::result::Result<KeyKind, String> {
    let unsigned = c.column_type.contains("unsigned");
    Ok(match c.data_type.as_str() {
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" if unsigned => KeyKind::Unsigned,
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" => KeyKind::Signed,
        "char" | "varchar" => {
            let collation = c
                .collation
                .clone()
                .ok_or("a character column without a collation")?;
            let charset = collation
                .split('_')
                .next()
                .filter(|s| !s.is_empty())
                .ok_or("a collation without a charset")?
                .to_string();
            let ident = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident(&collation) {
                return Err(format!("unexpected collation {collation:?}"));
            }
            KeyKind::Chars {
                len: declared_len(&c.column_type).ok_or("a character column without a length")?,
                charset,
                collation,
            }
        }
        // INET4/INET6: read as CAST(.. AS BINARY), ordered by that form, compared with a
        // binary literal of it (kernel::key, measured).
        "binary" | "varbinary" | "inet4" | "inet6" => KeyKind::Binary,
        "enum" | "set" => KeyKind::Members {
            members: encode::members(&c.column_type, &c.data_type)?,
            set: c.data_type == "set",
        },
        "date" | "year" => KeyKind::Text {
            cast: c.data_type.clone(),
        },
        "decimal" => {
            let (p, s) = decimal_digits(&c.column_type).ok_or("a DECIMAL without (p,s)")?;
            KeyKind::Shifted {
                int_digits: p - s,
                scale: s,
                time: false,
                cast: format!("decimal({p},{s})"),
            }
        }
        "time" => {
            let n = declared_len(&c.column_type).unwrap_or(0) as u32;
            KeyKind::Shifted {
                int_digits: 7,
                scale: n,
                time: true,
                cast: format!("time({n})"),
            }
        }
        "datetime" | "timestamp" => KeyKind::Text {
            cast: format!("datetime({})", declared_len(&c.column_type).unwrap_or(0)),
        },
        other => {
            return Err(format!(
                "verify cannot merge by a {other} key column yet (it merges by integer, \
                 decimal, character, binary, temporal, ENUM and SET key columns)"
            ))
        }
    })
}

/// The index of an ENUM value or the bit value of a SET value, from its member names.
pub(super) fn member_number(
    column: &str,
    members: &[Vec<u8>],
    set: bool,
    value: &[u8],
) -> std::result::Result<String, String> {
    let index = |name: &[u8]| {
        members
            .iter()
            .position(|m| m.as_slice() == name)
            .ok_or_else(|| {
                format!(
                    "key column `{column}`: {:?} is not one of its members",
                    String::from_utf8_lossy(name)
                )
            })
    };
    if !set {
        return Ok((index(value)? + 1).to_string());
    }
    let mut bits = 0u64;
    for name in value.split(|b| *b == b',').filter(|n| !n.is_empty()) {
        bits |= 1u64 << index(name)?;
    }
    Ok(bits.to_string())
}

/// (p, s) of `decimal(p,s)`.
pub(super) fn decimal_digits(column_type: &str) -> Option<(u32, u32)> {
    let open = column_type.find('(')?;
    let close = column_type[open..].find(')')? + open;
    let (p, s) = column_type[open + 1..close].split_once(',')?;
    let (p, s): (u32, u32) = (p.trim().parse().ok()?, s.trim().parse().ok()?);
    (s <= p).then_some((p, s))
}

/// `n` of `varchar(n)`, `char(n)`, `datetime(n)`.
pub(super) fn declared_len(column_type: &str) -> Option<u64> {
    let open = column_type.find('(')?;
    let close = column_type[open..].find(')')? + open;
    column_type[open + 1..close].trim().parse().ok()
}

pub(super) fn literal(c: &KeyCol, v: &SqlValue) -> std::result::Result<String, String> {
    let bytes = |v: &SqlValue| match v {
        SqlValue::Bytes(b) => Ok(b.clone()),
        SqlValue::Int(i) => Ok(i.to_string().into_bytes()),
        SqlValue::UInt(u) => Ok(u.to_string().into_bytes()),
        other => Err(format!(
            "key column `{}`: unexpected value {other:?}",
            c.name
        )),
    };
    Ok(match &c.kind {
        KeyKind::Signed | KeyKind::Unsigned => match v {
            SqlValue::Int(i) => i.to_string(),
            SqlValue::UInt(u) => u.to_string(),
            other => {
                let b = bytes(other)?;
                let s = std::str::from_utf8(&b).unwrap_or_default();
                s.parse::<i128>()
                    .map_err(|_| format!("key column `{}`: not an integer: {s:?}", c.name))?
                    .to_string()
            }
        },
        KeyKind::Chars {
            charset, collation, ..
        } => format!(
            "CONVERT(X'{}' USING {charset}) COLLATE {collation}",
            hex::encode(bytes(v)?)
        ),
        KeyKind::Binary => format!("X'{}'", hex::encode(bytes(v)?)),
        KeyKind::Text { cast } if cast == "year" => {
            let b = bytes(v)?;
            if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
                return Err(format!("key column `{}`: not a year: {b:?}", c.name));
            }
            String::from_utf8_lossy(&b).into_owned()
        }
        KeyKind::Text { cast } => format!("CAST(X'{}' AS {cast})", hex::encode(bytes(v)?)),
        KeyKind::Members { members, set } => member_number(&c.name, members, *set, &bytes(v)?)?,
        KeyKind::Shifted { cast, .. } => {
            // Quoted text, not X'..': a hex literal is a number in a numeric CAST.
            let b = bytes(v)?;
            let number = |b: &u8| b.is_ascii_digit() || matches!(b, b'-' | b'.' | b':');
            if b.is_empty() || !b.iter().all(number) {
                return Err(format!(
                    "key column `{}`: not a number or time: {b:?}",
                    c.name
                ));
            }
            format!("CAST('{}' AS {cast})", String::from_utf8_lossy(&b))
        }
    })
}
