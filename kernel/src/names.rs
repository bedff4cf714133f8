//! The connection character set of every data-plane session (DESIGN §10, §15): `SET NAMES
//! binary`, so that a string value travels as its column's own bytes in both directions.
//!
//! Why this is safe (measured on MariaDB 10.11, recorded in the report of issue 15):
//! * Reads: with `character_set_results = binary` the server sends a CHAR/VARCHAR/TEXT
//!   value as the bytes it stores (latin1 'Å' is `C5`, ucs2 'é' `00E9`, gbk '中' `D6D0`),
//!   which are the bytes the binlog carries for the same value. Under the default utf8mb4
//!   results the snapshot would read latin1 'Å' as `C385` while the binlog says `C5`: one
//!   value, two byte forms, and a key or a comparison that sees either.
//! * Writes: with `character_set_client = character_set_connection = binary` a quoted
//!   literal, an `X'..'` literal and a bound string parameter are binary strings; stored
//!   into a column they are relabelled as the column's charset, byte for byte (`X'E5'` into
//!   latin1 is 'å'; `X'0041'` into ucs2 is 'A'; a one-byte `X'61'` into ucs2 is left-padded
//!   to `0061`, as the server pads any binary string of odd length into ucs2). Bytes that are
//!   invalid in the column's charset are refused (ERROR 1366 under a strict sql_mode): the
//!   source could not have stored them, so the refusal names a real fault.
//! * Comparisons: a column (coercibility 2) beats a binary literal or parameter
//!   (coercibility 4), so `k = X'E5'` compares under the COLUMN's collation and is an
//!   index lookup: a case-only key change under `_ci` still finds its row.
//! * Statement text is read as binary too: identifiers are UTF-8 (information_schema reads
//!   back as UTF-8 bytes, a column named `café` is found), and a text literal that is not
//!   a value (a pad character, a probe) must name its charset with an introducer
//!   (`_utf8mb4' '`), or it is taken as bytes of whatever charset it meets.
//!
//! The statement is in the options' `setup`, which mysql_async runs on every new
//! connection and again after every `COM_RESET_CONNECTION` (a pooled connection returned),
//! which would otherwise bring back the handshake's utf8mb4.
use mysql_async::{Opts, OptsBuilder};

/// The statement every data-plane session runs first. It also sets `autocommit = 1`: a
/// marker's INSERT on the source and a lone read of T on the target are single autocommitted
/// statements, which a server whose global `autocommit` is 0 would otherwise leave in an
/// open transaction (a marker never committed, then rolled back by the connection's reset).
pub const SET_NAMES_BINARY: &str = "SET NAMES binary, autocommit = 1";

/// `opts` whose sessions run [`SET_NAMES_BINARY`] on connect and after every reset (its
/// other setup statements kept).
pub fn binary_names(opts: Opts) -> Opts {
    let mut setup = opts.setup().to_vec();
    if !setup.iter().any(|s| s == SET_NAMES_BINARY) {
        setup.push(SET_NAMES_BINARY.to_string());
    }
    OptsBuilder::from_opts(opts).setup(setup).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_names_binary_once_and_keeps_the_rest() {
        let o = Opts::from_url("mysql://u@h:1/db").expect("url");
        let o: Opts = OptsBuilder::from_opts(o)
            .setup(vec!["SET time_zone = '+00:00'"])
            .into();
        let o = binary_names(binary_names(o));
        assert_eq!(o.setup(), ["SET time_zone = '+00:00'", SET_NAMES_BINARY]);
    }
}
