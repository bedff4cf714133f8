//! Pure parsers for what mysql_common does not decode (notes/mariadb.md): MariaDB GTID
//! (162) and GTID_LIST (163) events, the artificial ROTATE's file name, and the
//! classification of QUERY events and of the statements that name a captured table.
//!
//! Layout: this module holds the binary event parsers, `query` the classification of
//! QUERY events and the statements that name a table, `ddl` the tokenizer that finds
//! the objects a DDL statement changes.
mod ddl;
mod query;
#[cfg(test)]
mod tests;

pub use ddl::{ddl_targets, Target};
pub(crate) use ddl::{spanned, tokens, Tok};
pub use query::{
    classify_query, ddl_changes_table, identifiers, names_table, parse_xa_prepare, xa_one_phase,
    xa_xid, QueryKind,
};

use crate::position::Gtid;

/// MariaDB event type numbers mysql_common does not know.
pub mod types {
    pub const ANNOTATE_ROWS: u8 = 160;
    pub const BINLOG_CHECKPOINT: u8 = 161;
    pub const MARIADB_GTID: u8 = 162;
    pub const GTID_LIST: u8 = 163;
    pub const START_ENCRYPTION: u8 = 164;
    pub const QUERY_COMPRESSED: u8 = 165;
    /// 166..=171: compressed rows events (v1 and v2).
    pub const FIRST_COMPRESSED_ROWS: u8 = 166;
    pub const LAST_COMPRESSED_ROWS: u8 = 171;
}

/// MariaDB GTID event flags.
pub mod gtid_flags {
    pub const STANDALONE: u8 = 1;
    pub const GROUP_COMMIT_ID: u8 = 2;
    pub const PREPARED_XA: u8 = 64;
    pub const COMPLETED_XA: u8 = 128;
}

/// A parsed MariaDB GTID event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MariadbGtid {
    pub gtid: Gtid,
    pub flags: u8,
    /// The xid of an XA group (PREPARED_XA or COMPLETED_XA), rendered as the server
    /// logs it in XA statements ([`xid_text`]).
    pub xid: Option<String>,
}

impl MariadbGtid {
    /// True when the group is one statement with no XID (DDL).
    pub fn standalone(&self) -> bool {
        self.flags & gtid_flags::STANDALONE != 0
    }

    /// True for the group of an `XA PREPARE` (its `XA START` is in this event).
    pub fn prepared_xa(&self) -> bool {
        self.flags & gtid_flags::PREPARED_XA != 0
    }
}

/// An xid as the server writes it in XA statements: `X'gtrid',X'bqual',formatID`, hex in
/// lower case.
pub fn xid_text(format_id: i32, gtrid: &[u8], bqual: &[u8]) -> String {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!("X'{}',X'{}',{format_id}", hex(gtrid), hex(bqual))
}

/// Parses a MariaDB GTID event body: seq u64 LE, domain u32 LE, flags u8 (server id comes
/// from the event header); with GROUP_COMMIT_ID a commit id u64; with PREPARED_XA or
/// COMPLETED_XA the xid: formatID i32 LE, gtrid length u8, bqual length u8, the bytes.
pub fn parse_mariadb_gtid(data: &[u8], server_id: u32) -> Option<MariadbGtid> {
    let seq = u64::from_le_bytes(data.get(0..8)?.try_into().ok()?);
    let domain = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?);
    let flags = *data.get(12)?;
    let mut at = 13;
    if flags & gtid_flags::GROUP_COMMIT_ID != 0 {
        at += 8;
    }
    let xid = if flags & (gtid_flags::PREPARED_XA | gtid_flags::COMPLETED_XA) != 0 {
        let format_id = i32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?);
        let g = usize::from(*data.get(at + 4)?);
        let b = usize::from(*data.get(at + 5)?);
        let bytes = data.get(at + 6..at + 6 + g + b)?;
        Some(xid_text(format_id, &bytes[..g], &bytes[g..]))
    } else {
        None
    };
    Some(MariadbGtid {
        xid,
        gtid: Gtid::Mariadb {
            domain,
            server: server_id,
            seq,
        },
        flags,
    })
}

/// Parses a MariaDB GTID_LIST event body: count u32 (low 28 bits), then count x (domain
/// u32, server u32, seq u64).
pub fn parse_gtid_list(data: &[u8]) -> Option<Vec<Gtid>> {
    let count = u32::from_le_bytes(data.get(0..4)?.try_into().ok()?) & 0x0fff_ffff;
    let mut out = Vec::with_capacity(count.min(1024) as usize);
    for i in 0..count as usize {
        let b = data.get(4 + i * 16..4 + (i + 1) * 16)?;
        out.push(Gtid::Mariadb {
            domain: u32::from_le_bytes(b[0..4].try_into().ok()?),
            server: u32::from_le_bytes(b[4..8].try_into().ok()?),
            seq: u64::from_le_bytes(b[8..16].try_into().ok()?),
        });
    }
    Some(out)
}

/// The file name of an artificial ROTATE read before the format description event: its
/// last 4 bytes are the event's CRC32, which the stream reader could not strip yet.
pub fn fake_rotate_name(raw: &[u8], checksum_pending: bool) -> String {
    let looks_like_file = |b: &[u8]| {
        !b.is_empty()
            && b.iter().all(|c| c.is_ascii_graphic())
            && b.last().is_some_and(u8::is_ascii_digit)
    };
    if checksum_pending && raw.len() > 4 && looks_like_file(&raw[..raw.len() - 4]) {
        return String::from_utf8_lossy(&raw[..raw.len() - 4]).into_owned();
    }
    String::from_utf8_lossy(raw).into_owned()
}
