//! Order-preserving encodings of key values computed in the service (DESIGN §14): the
//! memcmp order of the bytes is the server's `ORDER BY` of the values and equal bytes are
//! `=`. Each encoding is pinned by golden bytes and checked against a real server.
//!
//! A value may arrive in more than one representation (a snapshot read and the binlog
//! decode differ: an ENUM is its name in one and its index in the other, an integer may be
//! text): every representation of the same value gives the same bytes. How each type
//! arrives on each path was measured against MariaDB 10.11 (kernel/tests/keys):
//!
//! | type | binary-protocol SELECT | text-protocol SELECT | binlog (`to_sql_value`) |
//! |---|---|---|---|
//! | DECIMAL | digit text | digit text | digit text |
//! | DATE, DATETIME | `Date` | calendar text | `Date` |
//! | TIMESTAMP | `Date`, UTC (the session zone is `+00:00`) | calendar text, UTC | epoch text `sec[.ffffff]` |
//! | TIME | `Time` | `[-]h:mm:ss[.f]` text | `Time` |
//! | YEAR | `Int` (0 for 0000) | text | text, 0000 as `"1900"` |
//! | ENUM | member name | member name | `Int` index |
//! | SET | member list `a,c` | member list | `UInt` bits (the capture decodes the binlog's little-endian bitmask; L records written before hold the bytes, still read) |
//!
//! A value is refused (an `Err` naming why) rather than guessed whenever its
//! representation does not say exactly one value: an ENUM `''` when a member is `''`, a
//! SET byte string that is both a valid member list and a different valid bitmask, a
//! DECIMAL with more fraction digits than the column's scale that are not zeros.
//!
//! A TIMESTAMP in calendar form is read as UTC: every session that reads keys sets
//! `time_zone = '+00:00'` (DESIGN §10), under which the server's calendar form is exact and
//! one to one with its epoch (no DST fold).
use super::Encoding;
use crate::value::SqlValue;

/// Appends the encoding of `v` (never NULL: the caller checked).
pub fn encode(enc: &Encoding, v: &SqlValue, out: &mut Vec<u8>) -> Result<(), String> {
    match enc {
        Encoding::Signed => signed(as_i64(v)?, out),
        Encoding::Unsigned => unsigned(as_u64(v)?, out),
        Encoding::Binary { pad } => binary(v, *pad, out)?,
        Encoding::Form(n) => form(v, *n, out)?,
        Encoding::Decimal { scale } => decimal(v, *scale, out)?,
        Encoding::Date => date(v, out)?,
        Encoding::Datetime => datetime(v, out)?,
        Encoding::Timestamp => timestamp(v, out)?,
        Encoding::Time => signed(time_micros(v)?, out),
        Encoding::Year => out.extend_from_slice(&year(v)?.to_be_bytes()),
        Encoding::Enum(members) => out.extend_from_slice(&enum_index(v, members)?.to_be_bytes()),
        Encoding::Set(members) => unsigned(set_bits(v, members)?, out),
        Encoding::Chars { .. } => {
            return Err("a character value is weighed by the server, not encoded".into())
        }
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
    if let Some(n) = pad {
        if b.len() > n {
            return Err(format!("{} bytes in a BINARY({n}) column", b.len()));
        }
    }
    out.extend_from_slice(b);
    if let Some(n) = pad {
        out.resize(out.len() + n - b.len(), 0);
    }
    Ok(())
}

/// INET4/INET6: the binary form as it is, of exactly `n` bytes.
fn form(v: &SqlValue, n: usize, out: &mut Vec<u8>) -> Result<(), String> {
    match v {
        SqlValue::Bytes(b) if b.len() == n => {
            out.extend_from_slice(b);
            Ok(())
        }
        SqlValue::Bytes(b) => Err(format!(
            "{} bytes where the binary form has {n} (its text form?)",
            b.len()
        )),
        v => Err(format!("not a binary string: {v:?}")),
    }
}

/// DECIMAL: a class byte (1 negative, 2 zero, 3 positive), the count of integer digits
/// (leading zeros dropped), then the integer digits and exactly `scale` fraction digits as
/// ASCII. For a negative value the count and the digits are complemented, so a larger
/// magnitude sorts first; two values with the same count have the same number of digits,
/// so the digits compare position by position. Negative zero is zero.
fn decimal(v: &SqlValue, scale: u32, out: &mut Vec<u8>) -> Result<(), String> {
    let owned;
    let t: &str = match v {
        SqlValue::Bytes(b) => text(b)?,
        SqlValue::Int(i) => {
            owned = i.to_string();
            &owned
        }
        SqlValue::UInt(u) => {
            owned = u.to_string();
            &owned
        }
        other => return Err(format!("not a decimal: {other:?}")),
    };
    let bad = || format!("not a decimal: {t:?}");
    let (neg, body) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t),
    };
    let (int, frac) = match body.split_once('.') {
        Some((i, f)) if !f.is_empty() => (i, f),
        Some(_) => return Err(bad()),
        None => (body, ""),
    };
    let digits_only = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits_only(int) || !digits_only(frac) {
        return Err(bad());
    }
    let int = int.trim_start_matches('0');
    let scale = scale as usize;
    let (kept, rest) = frac.split_at(frac.len().min(scale));
    if rest.bytes().any(|c| c != b'0') {
        return Err(format!(
            "{t} has more fraction digits than the column's scale {scale}"
        ));
    }
    let mut digits: Vec<u8> = int.bytes().chain(kept.bytes()).collect();
    digits.resize(int.len() + scale, b'0');
    if digits.iter().all(|&d| d == b'0') {
        out.push(2);
        return Ok(());
    }
    let count = u8::try_from(int.len()).map_err(|_| format!("{t} has too many digits"))?;
    if neg {
        out.push(1);
        out.push(!count);
        out.extend(digits.iter().map(|d| b'0' + b'9' - d));
    } else {
        out.push(3);
        out.push(count);
        out.extend_from_slice(&digits);
    }
    Ok(())
}

/// A calendar value: year, month, day, hour, minute, second, microsecond.
type Calendar = (u16, u8, u8, u8, u8, u8, u32);

/// A DATE/DATETIME/TIMESTAMP as a calendar value, from `Date` or from the server's text
/// `YYYY-MM-DD[ HH:MM:SS[.f]]`. Zero parts are kept (zero dates, `2024-00-00`).
fn calendar(v: &SqlValue) -> Result<Calendar, String> {
    let c = match v {
        SqlValue::Date(y, m, d, h, mi, s, us) => (*y, *m, *d, *h, *mi, *s, *us),
        SqlValue::Bytes(b) => parse_calendar(text(b)?)?,
        other => return Err(format!("not a date: {other:?}")),
    };
    let (y, m, d, h, mi, s, us) = c;
    if y > 9999 || m > 12 || d > 31 || h > 23 || mi > 59 || s > 59 || us > 999_999 {
        return Err(format!("not a calendar value: {v:?}"));
    }
    Ok(c)
}

fn parse_calendar(t: &str) -> Result<Calendar, String> {
    let bad = || format!("not a calendar value: {t:?}");
    let (date, time) = t.split_once(' ').unwrap_or((t, "00:00:00"));
    let mut p = date.split('-');
    let (y, m, d) = (p.next(), p.next(), p.next());
    if p.next().is_some() {
        return Err(bad());
    }
    let y = fixed(y, 4).ok_or_else(bad)?;
    let (m, d) = (fixed(m, 2).ok_or_else(bad)?, fixed(d, 2).ok_or_else(bad)?);
    let (h, mi, s, us) = clock(time).ok_or_else(bad)?;
    if h > 23 {
        return Err(bad());
    }
    Ok((y as u16, m as u8, d as u8, h as u8, mi, s, us))
}

/// `H+:MM:SS[.f]` (any number of hour digits, 1-6 fraction digits).
fn clock(t: &str) -> Option<(u64, u8, u8, u32)> {
    let (hms, frac) = match t.split_once('.') {
        Some((a, f)) => (a, Some(f)),
        None => (t, None),
    };
    let mut p = hms.split(':');
    let h = p.next().filter(|h| !h.is_empty() && h.len() <= 10)?;
    if !h.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let h: u64 = h.parse().ok()?;
    let (mi, s) = (fixed(p.next(), 2)?, fixed(p.next(), 2)?);
    if p.next().is_some() || mi > 59 || s > 59 {
        return None;
    }
    let us = match frac {
        None => 0,
        Some(f) => micros(f)?,
    };
    Some((h, mi as u8, s as u8, us))
}

/// 1-6 fraction digits as microseconds.
fn micros(f: &str) -> Option<u32> {
    if f.is_empty() || f.len() > 6 || !f.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    Some(f.parse::<u32>().ok()? * 10u32.pow(6 - f.len() as u32))
}

/// Exactly `width` ASCII digits.
fn fixed(s: Option<&str>, width: usize) -> Option<u32> {
    let s = s?;
    (s.len() == width && s.bytes().all(|c| c.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// DATE: year (2 bytes), month, day. A zero date is all zeros and sorts first.
fn date(v: &SqlValue, out: &mut Vec<u8>) -> Result<(), String> {
    let (y, m, d, h, mi, s, us) = calendar(v)?;
    if (h, mi, s, us) != (0, 0, 0, 0) {
        return Err(format!("a DATE value with a time of day: {v:?}"));
    }
    out.extend_from_slice(&y.to_be_bytes());
    out.extend_from_slice(&[m, d]);
    Ok(())
}

/// DATETIME: year (2 bytes), month, day, hour, minute, second, microsecond (3 bytes).
fn datetime(v: &SqlValue, out: &mut Vec<u8>) -> Result<(), String> {
    let (y, m, d, h, mi, s, us) = calendar(v)?;
    out.extend_from_slice(&y.to_be_bytes());
    out.extend_from_slice(&[m, d, h, mi, s]);
    out.extend_from_slice(&us.to_be_bytes()[1..]);
    Ok(())
}

/// TIMESTAMP: the epoch second (8 bytes) and microsecond (3 bytes), as the server orders
/// it. The zero TIMESTAMP is epoch 0 (the server stores it so; 1970-01-01 00:00:00 UTC
/// itself is outside TIMESTAMP's range).
fn timestamp(v: &SqlValue, out: &mut Vec<u8>) -> Result<(), String> {
    let (secs, us) = epoch(v)?;
    out.extend_from_slice(&secs.to_be_bytes());
    out.extend_from_slice(&us.to_be_bytes()[1..]);
    Ok(())
}

fn epoch(v: &SqlValue) -> Result<(u64, u32), String> {
    match v {
        SqlValue::Int(i) => {
            return u64::try_from(*i)
                .map(|s| (s, 0))
                .map_err(|_| format!("a negative epoch: {i}"))
        }
        SqlValue::UInt(u) => return Ok((*u, 0)),
        SqlValue::Bytes(b) if !b.contains(&b'-') => {
            let t = text(b)?;
            let (sec, frac) = t.split_once('.').unwrap_or((t, ""));
            let bad = || format!("not an epoch: {t:?}");
            if sec.is_empty() || sec.len() > 19 || !sec.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let us = if frac.is_empty() && !t.contains('.') {
                0
            } else {
                micros(frac).ok_or_else(bad)?
            };
            return Ok((sec.parse().map_err(|_| bad())?, us));
        }
        _ => {}
    }
    let (y, m, d, h, mi, s, us) = calendar(v)?;
    if (y, m, d, h, mi, s, us) == (0, 0, 0, 0, 0, 0, 0) {
        return Ok((0, 0));
    }
    if m == 0 || d == 0 {
        return Err(format!("not a TIMESTAMP value: {v:?}"));
    }
    let days = days_from_civil(i64::from(y), u32::from(m), u32::from(d));
    let secs = days * 86_400 + i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(s);
    let secs = u64::try_from(secs).map_err(|_| format!("a TIMESTAMP before 1970: {v:?}"))?;
    Ok((secs, us))
}

/// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// TIME as signed microseconds (negative times, hours above 24); `-00:00:00` is zero.
fn time_micros(v: &SqlValue) -> Result<i64, String> {
    let (neg, h, mi, s, us) = match v {
        SqlValue::Time(neg, d, h, mi, s, us) => {
            if *mi > 59 || *s > 59 || *us > 999_999 {
                return Err(format!("not a TIME value: {v:?}"));
            }
            (*neg, u64::from(*d) * 24 + u64::from(*h), *mi, *s, *us)
        }
        SqlValue::Bytes(b) => {
            let t = text(b)?;
            let (neg, body) = match t.strip_prefix('-') {
                Some(r) => (true, r),
                None => (false, t),
            };
            let (h, mi, s, us) = clock(body).ok_or_else(|| format!("not a TIME value: {t:?}"))?;
            (neg, h, mi, s, us)
        }
        other => return Err(format!("not a TIME value: {other:?}")),
    };
    let total = h
        .checked_mul(3600)
        .and_then(|x| x.checked_add(u64::from(mi) * 60 + u64::from(s)))
        .and_then(|x| x.checked_mul(1_000_000))
        .and_then(|x| x.checked_add(u64::from(us)))
        .and_then(|x| i64::try_from(x).ok())
        .ok_or_else(|| format!("a TIME value out of range: {v:?}"))?;
    Ok(if neg { -total } else { total })
}

/// YEAR as its number, 0000 as 0. The binlog decoder gives 0000 as "1900" (1900 + the
/// stored byte 0); 1900 is no YEAR value, so it is 0000 exactly.
fn year(v: &SqlValue) -> Result<u16, String> {
    let y: u64 = match v {
        SqlValue::Int(i) => u64::try_from(*i).map_err(|_| format!("not a YEAR: {i}"))?,
        SqlValue::UInt(u) => *u,
        SqlValue::Bytes(b) => fixed(Some(text(b)?), 4)
            .map(u64::from)
            .ok_or_else(|| format!("not a YEAR: {v:?}"))?,
        other => return Err(format!("not a YEAR: {other:?}")),
    };
    match y {
        0 | 1900 => Ok(0),
        1901..=2155 => Ok(y as u16),
        _ => Err(format!("not a YEAR value: {y}")),
    }
}

/// ENUM by its 1-based index in definition order (0: the invalid value ''), from the
/// binlog's index or a SELECT's member name.
pub(crate) fn enum_index(v: &SqlValue, members: &[Vec<u8>]) -> Result<u16, String> {
    let n = members.len();
    let i = match v {
        SqlValue::Int(i) => usize::try_from(*i).ok().filter(|i| *i <= n),
        SqlValue::UInt(u) => usize::try_from(*u).ok().filter(|i| *i <= n),
        SqlValue::Bytes(b) if b.is_empty() && members.iter().any(Vec::is_empty) => {
            return Err(
                "the ENUM value '' is both the invalid value (index 0) and a member named ''"
                    .into(),
            )
        }
        SqlValue::Bytes(b) if b.is_empty() => Some(0),
        SqlValue::Bytes(b) => members.iter().position(|m| m == b).map(|p| p + 1),
        _ => None,
    };
    i.and_then(|i| u16::try_from(i).ok())
        .ok_or_else(|| format!("not a member of the ENUM: {v:?}"))
}

/// SET by its bit value, from an integer, the binlog's bitmask bytes (little-endian, 1-4
/// or 8 bytes as the server stores it) or a SELECT's member list `a,c`. Bytes that read
/// as both a member list and a different bitmask are refused.
pub(crate) fn set_bits(v: &SqlValue, members: &[Vec<u8>]) -> Result<u64, String> {
    let n = members.len();
    let valid = |bits: u64| n >= 64 || bits >> n == 0;
    let bits = match v {
        SqlValue::Int(i) => Some(*i as u64).filter(|b| valid(*b)),
        SqlValue::UInt(u) => Some(*u).filter(|b| valid(*b)),
        SqlValue::Bytes(b) => {
            let list = set_list(b, members);
            let mask = (b.len() == set_pack_len(n)).then(|| {
                let mut le = [0u8; 8];
                le[..b.len()].copy_from_slice(b);
                u64::from_le_bytes(le)
            });
            match (list, mask.filter(|m| valid(*m))) {
                (Some(l), Some(m)) if l != m => {
                    return Err(format!(
                        "SET bytes {b:?} read as the members of {l:#x} and as the bitmask {m:#x}"
                    ))
                }
                (Some(l), _) => Some(l),
                (None, m) => m,
            }
        }
        _ => None,
    };
    bits.ok_or_else(|| format!("not a value of the SET: {v:?}"))
}

/// The bytes a SET of `n` members takes (the binlog bitmask's length).
fn set_pack_len(n: usize) -> usize {
    match n.div_ceil(8) {
        0 | 1 => 1,
        b @ 2..=4 => b,
        _ => 8,
    }
}

fn set_list(b: &[u8], members: &[Vec<u8>]) -> Option<u64> {
    if b.is_empty() {
        return Some(0);
    }
    let mut bits = 0u64;
    for part in b.split(|&c| c == b',') {
        let i = members.iter().position(|m| m == part)?;
        bits |= 1u64.checked_shl(u32::try_from(i).ok()?)?;
    }
    Some(bits)
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
