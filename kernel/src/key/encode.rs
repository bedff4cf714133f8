//! Order-preserving encodings of key values computed in the service (DESIGN §14): the
//! memcmp order of the bytes is the server's `ORDER BY` of the values and equal bytes are
//! `=`. Each encoding is pinned by golden bytes and checked against a real server.
//!
//! A value may arrive in more than one representation (a snapshot read and the binlog
//! decode differ: an ENUM is its name in one and its index in the other, an integer may be
//! text): every representation of the same value gives the same bytes.
use super::Encoding;
use crate::value::SqlValue;

/// Appends the encoding of `v` (never NULL: the caller checked).
pub fn encode(enc: &Encoding, v: &SqlValue, out: &mut Vec<u8>) -> Result<(), String> {
    match enc {
        Encoding::Signed => signed(as_i64(v)?, out),
        Encoding::Unsigned => unsigned(as_u64(v)?, out),
        Encoding::Binary { pad } => binary(v, *pad, out)?,
        other => return Err(format!("no key encoding yet for {other:?} (value {v:?})")),
    }
    Ok(())
}

/// Signed integers of every width: 8 bytes big-endian with the sign bit flipped.
pub fn signed(v: i64, out: &mut Vec<u8>) {
    out.extend_from_slice(&((v as u64) ^ (1 << 63)).to_be_bytes());
}

/// Unsigned integers of every width: 8 bytes big-endian.
pub fn unsigned(v: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn as_i64(v: &SqlValue) -> Result<i64, String> {
    match v {
        SqlValue::Int(i) => Ok(*i),
        SqlValue::UInt(u) => i64::try_from(*u).map_err(|_| format!("{u} is out of signed range")),
        SqlValue::Bytes(b) => text(b)?.parse().map_err(|e| format!("not an integer: {e}")),
        other => Err(format!("not an integer: {other:?}")),
    }
}

/// Unsigned values: the binlog may hand a BIGINT UNSIGNED above 2^63 as a negative `Int`
/// (its two's complement); the sealed column says it is unsigned, so the bits are kept.
fn as_u64(v: &SqlValue) -> Result<u64, String> {
    match v {
        SqlValue::UInt(u) => Ok(*u),
        SqlValue::Int(i) => Ok(*i as u64),
        SqlValue::Bytes(b) => text(b)?.parse().map_err(|e| format!("not an integer: {e}")),
        other => Err(format!("not an integer: {other:?}")),
    }
}

fn binary(v: &SqlValue, pad: Option<usize>, out: &mut Vec<u8>) -> Result<(), String> {
    let SqlValue::Bytes(b) = v else {
        return Err(format!("not a binary string: {v:?}"));
    };
    out.extend_from_slice(b);
    if let Some(n) = pad {
        out.resize(out.len() + n.saturating_sub(b.len()), 0);
    }
    Ok(())
}

fn text(b: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(b).map_err(|_| "not text".to_string())
}

/// The members of an `enum('a','b')` or `set('a','b')` COLUMN_TYPE, unquoted, in order.
pub fn members(column_type: &str, word: &str) -> Result<Vec<Vec<u8>>, String> {
    let bad = || format!("cannot read the members of `{column_type}`");
    let t = column_type.trim();
    let inner = t
        .get(..word.len())
        .filter(|h| h.eq_ignore_ascii_case(word))
        .and_then(|_| t[word.len()..].trim().strip_prefix('('))
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(bad)?;
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut chars = inner.bytes().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (false, b'\'') => quoted = true,
            (false, b',') => out.push(std::mem::take(&mut cur)),
            (false, b' ') => {}
            (false, _) => return Err(bad()),
            (true, b'\'') if chars.peek() == Some(&b'\'') => {
                chars.next();
                cur.push(b'\'');
            }
            (true, b'\'') => quoted = false,
            (true, b'\\') => {
                let n = chars.next().ok_or_else(bad)?;
                cur.push(n);
            }
            (true, _) => cur.push(c),
        }
    }
    if quoted {
        return Err(bad());
    }
    out.push(cur);
    Ok(out)
}
