//! Newtypes for every identity that travels between components (STYLE §3).
//!
//! None of them is derived from how work happened to be batched (DESIGN §3.1): a job id and
//! a generation are assigned once by `install`, windows come from the persisted range plan,
//! attempts are counted in J.
use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$m:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// One installed table. Printed by `install`, used by every other command.
    JobId(u64), ""
);
id_type!(
    /// One installation of a table; re-adding a table needs a new generation (DESIGN §2).
    Generation(u64), "g"
);
id_type!(
    /// Index of a window in the persisted range plan, starting at 0.
    WindowId(u32), "w"
);
id_type!(
    /// Attempt number of a window: a restarted unsealed window gets a new one (DESIGN §5).
    Attempt(u32), "a"
);
id_type!(
    /// Index of a page inside a window's RAW or FINAL output.
    PageNo(u32), "p"
);

impl Attempt {
    /// The attempt after this one.
    pub fn next(self) -> Attempt {
        Attempt(self.0 + 1)
    }
}

/// A random value carried by every control-table intent so that a late intent of another
/// attempt or generation can never satisfy a waiter (DESIGN §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Nonce(pub u64);

impl Nonce {
    /// A fresh random nonce.
    pub fn random() -> Nonce {
        Nonce(rand::random())
    }
}

impl fmt::Display for Nonce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A blake3 digest, shown as hex.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// blake3 of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest(*blake3::hash(bytes).as_bytes())
    }

    /// The digest as 64 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses 64 hex characters.
    pub fn from_hex(s: &str) -> Option<Digest> {
        let v = hex::decode(s).ok()?;
        Some(Digest(v.try_into().ok()?))
    }

    /// Parses 32 raw bytes (as stored in a BINARY(32) column).
    pub fn from_slice(b: &[u8]) -> Option<Digest> {
        Some(Digest(b.try_into().ok()?))
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", &self.to_hex()[..16])
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_hex_round_trip() {
        let d = Digest::of(b"abc");
        assert_eq!(Digest::from_hex(&d.to_hex()), Some(d));
        assert_eq!(
            d.to_hex(),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(Digest::from_hex("zz"), None);
    }

    #[test]
    fn ids_display_with_prefix() {
        assert_eq!(Generation(3).to_string(), "g3");
        assert_eq!(WindowId(7).to_string(), "w7");
        assert_eq!(Attempt(1).next(), Attempt(2));
    }
}
