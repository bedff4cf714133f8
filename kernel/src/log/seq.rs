//! [`LSeq`]: the sequence number of an L record within its stream (STYLE §3: positions
//! are typed). Records of a stream are numbered 1, 2, 3... without holes; 0 names "before
//! the first record" (an empty L, or no record ending at a position).
//!
//! Stored in the state store as the `BIGINT UNSIGNED` it always was: the sqlx impls below
//! delegate to `u64`, so binds and reads at the SQL edge are unchanged. No persisted
//! (postcard) struct holds an `LSeq`; a newtype struct encodes exactly like its `u64` in
//! postcard and serde_json anyway (pinned below and by status's JSON test), so it needs no
//! `serde(transparent)`.

use serde::{Deserialize, Serialize};
use sqlx::mysql::{MySql, MySqlTypeInfo, MySqlValueRef};
use std::fmt;

/// The seq of an L record (1 for the first record of a stream; [`LSeq::ZERO`] before it).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct LSeq(pub u64);

impl LSeq {
    /// Before the first record of a stream.
    pub const ZERO: LSeq = LSeq(0);
    /// Upper bound for an open-ended read ([`super::read_range`] up to L's end).
    pub const MAX: LSeq = LSeq(u64::MAX);

    /// The record after this one.
    pub fn next(self) -> LSeq {
        LSeq(self.0 + 1)
    }
}

impl fmt::Display for LSeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl sqlx::Type<MySql> for LSeq {
    fn type_info() -> MySqlTypeInfo {
        <u64 as sqlx::Type<MySql>>::type_info()
    }

    fn compatible(ty: &MySqlTypeInfo) -> bool {
        <u64 as sqlx::Type<MySql>>::compatible(ty)
    }
}

impl sqlx::Encode<'_, MySql> for LSeq {
    fn encode_by_ref(
        &self,
        buf: &mut <MySql as sqlx::Database>::ArgumentBuffer,
    ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
        <u64 as sqlx::Encode<'_, MySql>>::encode_by_ref(&self.0, buf)
    }
}

impl<'r> sqlx::Decode<'r, MySql> for LSeq {
    fn decode(value: MySqlValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        <u64 as sqlx::Decode<'r, MySql>>::decode(value).map(LSeq)
    }
}

#[cfg(test)]
mod tests {
    use super::LSeq;

    #[test]
    fn encodes_like_its_u64() {
        // Pinned bytes: postcard's varint of 300, as a bare u64 encodes it.
        assert_eq!(postcard::to_allocvec(&LSeq(300)).unwrap(), vec![0xac, 0x02]);
        for n in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(
                postcard::to_allocvec(&LSeq(n)).unwrap(),
                postcard::to_allocvec(&n).unwrap()
            );
            assert_eq!(
                postcard::from_bytes::<LSeq>(&postcard::to_allocvec(&n).unwrap()).unwrap(),
                LSeq(n)
            );
        }
    }

    #[test]
    fn orders_and_prints_as_the_number() {
        assert!(LSeq::ZERO < LSeq::ZERO.next());
        assert_eq!(LSeq(41).next(), LSeq(42));
        assert_eq!(LSeq(42).to_string(), "42");
        assert_eq!(LSeq::default(), LSeq::ZERO);
    }
}
