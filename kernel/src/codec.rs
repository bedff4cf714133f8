//! The versioned envelope for every persisted payload (STYLE §5).
//!
//! postcard is not self-describing, so every persisted record starts with a 4-byte kind tag
//! and a little-endian u16 format version. A reader decodes each version it has ever
//! written (golden byte fixtures pin them) and refuses an unknown kind or a newer version
//! with a definite error instead of misreading bytes.
use serde::{de::DeserializeOwned, Serialize};

/// Length of the envelope header: 4 bytes of kind, 2 bytes of version.
pub const HEADER_LEN: usize = 6;

/// A persisted format: its kind tag and current version.
pub trait Versioned: Serialize + DeserializeOwned {
    /// Four ASCII bytes naming the format, e.g. `b"RAWP"`.
    const KIND: [u8; 4];
    /// The version this build writes.
    const VERSION: u16;
}

/// Why bytes could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("record too short ({0} bytes) to hold a format header")]
    Short(usize),
    #[error("record kind {found:?} where {expected:?} was expected")]
    Kind { expected: String, found: String },
    #[error("record {kind} has format version {found}; this build reads up to {known}: upgrade the binary")]
    Version {
        kind: String,
        found: u16,
        known: u16,
    },
    #[error("record {kind} v{version} is malformed: {reason}")]
    Malformed {
        kind: String,
        version: u16,
        reason: String,
    },
}

/// Encodes `value` with its header. Encoding into a Vec cannot fail for our types.
pub fn encode<T: Versioned>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&T::KIND);
    out.extend_from_slice(&T::VERSION.to_le_bytes());
    postcard::to_io(value, &mut out).expect("postcard into a Vec cannot fail");
    out
}

/// Encodes `value` under an explicit kind and (older) version: for formats that still
/// write their previous version when a record fits it (a key range of one signed
/// integer), so records of jobs installed before stay byte-identical.
pub fn encode_version<T: Serialize>(kind: [u8; 4], version: u16, value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&kind);
    out.extend_from_slice(&version.to_le_bytes());
    postcard::to_io(value, &mut out).expect("postcard into a Vec cannot fail");
    out
}

/// Reads the header and returns (version, body) after checking the kind.
pub fn split<T: Versioned>(bytes: &[u8]) -> Result<(u16, &[u8]), DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Err(DecodeError::Short(bytes.len()));
    }
    if bytes[..4] != T::KIND {
        return Err(DecodeError::Kind {
            expected: kind_name(&T::KIND),
            found: kind_name(&bytes[..4]),
        });
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version > T::VERSION {
        return Err(DecodeError::Version {
            kind: kind_name(&T::KIND),
            found: version,
            known: T::VERSION,
        });
    }
    Ok((version, &bytes[HEADER_LEN..]))
}

/// Decodes a record written in the current version. Formats that have older versions
/// call [`split`] and dispatch on the version themselves.
pub fn decode<T: Versioned>(bytes: &[u8]) -> Result<T, DecodeError> {
    let (version, body) = split::<T>(bytes)?;
    decode_body(&T::KIND, version, body)
}

/// Decodes a body of a known version; the whole body must be consumed.
pub fn decode_body<T: DeserializeOwned>(
    kind: &[u8; 4],
    version: u16,
    body: &[u8],
) -> Result<T, DecodeError> {
    let (value, rest) = take(kind, version, body)?;
    if !rest.is_empty() {
        return Err(malformed(
            kind,
            version,
            format!("{} trailing bytes", rest.len()),
        ));
    }
    Ok(value)
}

/// Decodes the front of a body of a known version as `T` (a prefix of the body's fields),
/// leaving the rest unread.
pub fn decode_prefix<T: DeserializeOwned>(
    kind: &[u8; 4],
    version: u16,
    body: &[u8],
) -> Result<T, DecodeError> {
    take(kind, version, body).map(|(value, _)| value)
}

fn take<'b, T: DeserializeOwned>(
    kind: &[u8; 4],
    version: u16,
    body: &'b [u8],
) -> Result<(T, &'b [u8]), DecodeError> {
    postcard::take_from_bytes(body).map_err(|e| malformed(kind, version, e.to_string()))
}

fn malformed(kind: &[u8; 4], version: u16, reason: String) -> DecodeError {
    DecodeError::Malformed {
        kind: kind_name(kind),
        version,
        reason,
    }
}

/// Canonical bytes of a value without an envelope, for digests of in-memory structures.
pub fn to_canonical<T: Serialize>(value: &T) -> Vec<u8> {
    postcard::to_stdvec(value).expect("postcard into a Vec cannot fail")
}

/// blake3 of `prefix` followed by the canonical bytes of `value` ([`to_canonical`]), hashed
/// as they are serialized: the same digest as hashing the concatenated bytes, without ever
/// holding them (a group of a large transaction encodes to as many bytes as its images).
pub fn digest_canonical<T: Serialize>(prefix: &[u8], value: &T) -> crate::ids::Digest {
    let mut hasher = blake3::Hasher::new();
    hasher.update(prefix);
    {
        // postcard writes a field at a time: batch the hasher's updates.
        let mut w = std::io::BufWriter::with_capacity(DIGEST_BUFFER, &mut hasher);
        postcard::to_io(value, &mut w).expect("postcard into a hasher cannot fail");
        std::io::Write::flush(&mut w).expect("flushing into a hasher cannot fail");
    }
    crate::ids::Digest(*hasher.finalize().as_bytes())
}

/// Bytes [`digest_canonical`] hands the hasher at a time.
const DIGEST_BUFFER: usize = 64 << 10;

fn kind_name(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize, Debug, PartialEq)]
    struct Probe {
        a: u32,
        b: String,
    }
    impl Versioned for Probe {
        const KIND: [u8; 4] = *b"PROB";
        const VERSION: u16 = 1;
    }

    #[test]
    fn round_trip_and_golden_bytes() {
        let p = Probe {
            a: 300,
            b: "x".into(),
        };
        let bytes = encode(&p);
        assert_eq!(bytes, [b'P', b'R', b'O', b'B', 1, 0, 0xac, 0x02, 1, b'x']);
        assert_eq!(decode::<Probe>(&bytes), Ok(p));
    }

    #[test]
    fn refuses_wrong_kind_newer_version_and_trailing_bytes() {
        let mut bytes = encode(&Probe {
            a: 1,
            b: String::new(),
        });
        let mut other = bytes.clone();
        other[0] = b'X';
        assert!(matches!(
            decode::<Probe>(&other),
            Err(DecodeError::Kind { .. })
        ));
        let mut newer = bytes.clone();
        newer[4] = 2;
        assert!(matches!(
            decode::<Probe>(&newer),
            Err(DecodeError::Version { found: 2, .. })
        ));
        bytes.push(0);
        assert!(matches!(
            decode::<Probe>(&bytes),
            Err(DecodeError::Malformed { .. })
        ));
        assert_eq!(decode::<Probe>(b"PR"), Err(DecodeError::Short(2)));
    }

    #[test]
    fn digest_canonical_is_the_digest_of_the_concatenated_bytes() {
        // Values around and well past the hasher's buffer.
        for len in [
            0,
            1,
            DIGEST_BUFFER - 7,
            DIGEST_BUFFER,
            3 * DIGEST_BUFFER + 5,
        ] {
            let p = Probe {
                a: len as u32,
                b: "q".repeat(len),
            };
            let mut whole = b"prefix".to_vec();
            whole.extend(to_canonical(&p));
            assert_eq!(
                digest_canonical(b"prefix", &p),
                crate::ids::Digest::of(&whole),
                "length {len}"
            );
        }
    }
}
