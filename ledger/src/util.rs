//! Small shared helpers for the state-store and target edges.
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::Digest;
use kernel::Error;

/// Maps an sqlx error of `what` into the kernel split.
pub(crate) fn sq(what: &str) -> impl Fn(sqlx::Error) -> Error + '_ {
    move |e| from_sqlx(what, &e)
}

/// Maps a mysql_async error of `what` into the kernel split.
pub(crate) fn my(what: &str) -> impl Fn(mysql_async::Error) -> Error + '_ {
    move |e| kernel::error::from_mysql(what, &e)
}

/// A digest read from a BINARY(32) column; anything else is corrupt evidence.
pub(crate) fn digest_col(bytes: &[u8], what: &str) -> Result<Digest, Error> {
    Digest::from_slice(bytes).ok_or_else(|| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("{what}: stored digest has {} bytes, not 32", bytes.len()),
        )
    })
}

/// True when the sqlx error is a duplicate key (error 1062).
pub(crate) fn sqlx_is_dup(e: &sqlx::Error) -> bool {
    kernel::error::sqlx_server_code(e).map(kernel::error::classify_server_code)
        == Some(kernel::error::ServerClass::Duplicate)
}

/// True when the mysql_async error is a duplicate key (error 1062).
pub(crate) fn my_is_dup(e: &mysql_async::Error) -> bool {
    kernel::error::mysql_server_code(e).map(kernel::error::classify_server_code)
        == Some(kernel::error::ServerClass::Duplicate)
}
