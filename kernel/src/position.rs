//! Typed binlog positions, GTIDs and source lineage (DESIGN §3.4, STYLE §3).
//!
//! A position is only meaningful inside one lineage: the same server and the same binlog
//! history. Comparing positions of two binlog series (another basename) is an error, not
//! `false`, so a swapped or reset source can never be silently re-interpreted.
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::fmt;

/// A position in one binlog series: file name (e.g. `mysql-bin.000012`) and byte offset.
/// `pos` is the offset AFTER an event (the server's `log_pos`), so a group boundary is the
/// `log_pos` of its XID or of the QUERY event closing a standalone DDL.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BinlogPos {
    pub file: String,
    pub pos: u64,
}

/// Two positions that cannot be compared.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("binlog positions {a} and {b} belong to different binlog series and cannot be compared")]
pub struct Incomparable {
    pub a: String,
    pub b: String,
}

impl BinlogPos {
    /// A position.
    pub fn new(file: impl Into<String>, pos: u64) -> BinlogPos {
        BinlogPos {
            file: file.into(),
            pos,
        }
    }

    /// Splits `mysql-bin.000012` into (`mysql-bin`, 12) (the server's file name, without
    /// a lineage epoch).
    pub fn split_file(&self) -> Option<(&str, u64)> {
        let (base, seq) = self.server_file().rsplit_once('.')?;
        if seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((base, seq.parse().ok()?))
    }

    /// The lineage epoch the position belongs to: 0 for the stream's first source, N
    /// after the N-th lineage switch (`backfill repoint`, DESIGN §18). Stored as an
    /// `N/` prefix of the file name (a binlog file name never holds a `/`), so positions
    /// of epoch 0 keep every persisted byte they always had.
    pub fn epoch(&self) -> u32 {
        split_epoch(&self.file).0
    }

    /// The file name as the server names it (without the epoch prefix).
    pub fn server_file(&self) -> &str {
        split_epoch(&self.file).1
    }

    /// The position as the server names it (for a dump request or `BINLOG_GTID_POS`).
    pub fn server_pos(&self) -> BinlogPos {
        BinlogPos::new(self.server_file(), self.pos)
    }

    /// This server position placed in lineage epoch `epoch`.
    pub fn in_epoch(&self, epoch: u32) -> BinlogPos {
        let file = self.server_file();
        match epoch {
            0 => BinlogPos::new(file, self.pos),
            n => BinlogPos::new(format!("{n}/{file}"), self.pos),
        }
    }

    /// Orders two positions: within one lineage epoch only inside one binlog series
    /// (refused across series); across epochs by the epoch, which is L's order (every
    /// record of epoch N is in L after the switch record that opened N and before the one
    /// that closed it). Raw file positions of two servers are never compared.
    pub fn try_cmp(&self, other: &BinlogPos) -> Result<Ordering, Incomparable> {
        let (e1, e2) = (self.epoch(), other.epoch());
        if e1 != e2 {
            return Ok(e1.cmp(&e2));
        }
        match (self.split_file(), other.split_file()) {
            (Some((b1, s1)), Some((b2, s2))) if b1 == b2 => {
                Ok(s1.cmp(&s2).then(self.pos.cmp(&other.pos)))
            }
            _ => Err(Incomparable {
                a: self.to_string(),
                b: other.to_string(),
            }),
        }
    }
}

/// `3/mysql-bin.000002` -> (3, `mysql-bin.000002`); a name without a numeric prefix is
/// epoch 0.
fn split_epoch(file: &str) -> (u32, &str) {
    match file.split_once('/') {
        Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            match n.parse() {
                Ok(e) => (e, rest),
                Err(_) => (0, file),
            }
        }
        _ => (0, file),
    }
}

impl fmt::Display for BinlogPos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.pos)
    }
}

/// A MariaDB GTID `domain-server-seq`. (MySQL GTIDs `uuid:n` are kept as [`Gtid::Mysql`].)
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Gtid {
    Mariadb { domain: u32, server: u32, seq: u64 },
    Mysql { uuid: String, seq: u64 },
}

impl Gtid {
    /// Parses `0-1-42` (MariaDB) or `3e11fa47-71ca-11e1-9e33-c80aa9429562:23` (MySQL).
    pub fn parse(s: &str) -> Option<Gtid> {
        if let Some((uuid, seq)) = s.split_once(':') {
            return Some(Gtid::Mysql {
                uuid: uuid.to_string(),
                seq: seq.parse().ok()?,
            });
        }
        let mut it = s.split('-');
        let domain = it.next()?.parse().ok()?;
        let server = it.next()?.parse().ok()?;
        let seq = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        Some(Gtid::Mariadb {
            domain,
            server,
            seq,
        })
    }
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gtid::Mariadb {
                domain,
                server,
                seq,
            } => write!(f, "{domain}-{server}-{seq}"),
            Gtid::Mysql { uuid, seq } => write!(f, "{uuid}:{seq}"),
        }
    }
}

/// Which server family a source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Flavor {
    Mariadb,
    Mysql,
}

/// The server identity and binlog history positions belong to (DESIGN §3.4).
///
/// `server_id` and `server_uid` survive RESET MASTER and a restored backup on the same host,
/// so a lineage check also needs a recorded (position, GTID) pair that the server must still
/// map the same way: see `kernel::lineage` users.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lineage {
    pub flavor: Flavor,
    pub server_id: u32,
    /// MariaDB `@@server_uid`, MySQL `@@server_uuid`.
    pub server_uid: String,
    /// `@@log_bin_basename` without its directory: the binlog series' name.
    pub binlog_base: String,
}

impl Lineage {
    /// A short stable digest that names this lineage in identities.
    pub fn digest(&self) -> crate::ids::Digest {
        crate::ids::Digest::of(&crate::codec::to_canonical(self))
    }
}

impl fmt::Display for Lineage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} server_id={} uid={} binlog={}",
            self.flavor, self.server_id, self.server_uid, self.binlog_base
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_order_within_a_series() {
        let a = BinlogPos::new("mysql-bin.000009", 900);
        let b = BinlogPos::new("mysql-bin.000010", 4);
        assert_eq!(a.try_cmp(&b), Ok(Ordering::Less));
        assert_eq!(b.try_cmp(&a), Ok(Ordering::Greater));
        assert_eq!(a.try_cmp(&a), Ok(Ordering::Equal));
    }

    #[test]
    fn positions_of_two_series_do_not_compare() {
        let a = BinlogPos::new("mysql-bin.000009", 900);
        let b = BinlogPos::new("other-bin.000009", 900);
        assert!(a.try_cmp(&b).is_err());
        assert!(BinlogPos::new("nofile", 4).try_cmp(&a).is_err());
    }

    #[test]
    fn epochs_order_by_lineage_switch_and_keep_old_bytes() {
        let old = BinlogPos::new("mysql-bin.000009", 900);
        assert_eq!(old.epoch(), 0);
        assert_eq!(old.in_epoch(0), old);
        let new = BinlogPos::new("mysql-bin.000002", 4).in_epoch(1);
        assert_eq!(new.file, "1/mysql-bin.000002");
        assert_eq!(new.epoch(), 1);
        assert_eq!(new.server_file(), "mysql-bin.000002");
        assert_eq!(new.server_pos(), BinlogPos::new("mysql-bin.000002", 4));
        assert_eq!(new.split_file(), Some(("mysql-bin", 2)));
        // Epoch order wins over file numbers, whatever the names.
        assert_eq!(old.try_cmp(&new), Ok(Ordering::Less));
        assert_eq!(new.try_cmp(&old), Ok(Ordering::Greater));
        let other = BinlogPos::new("other-bin.000001", 4).in_epoch(2);
        assert_eq!(new.try_cmp(&other), Ok(Ordering::Less));
        // Within an epoch series still must match.
        let b = BinlogPos::new("other-bin.000009", 4).in_epoch(1);
        assert!(new.try_cmp(&b).is_err());
        assert_eq!(new.in_epoch(3).file, "3/mysql-bin.000002");
        assert_eq!(BinlogPos::new("x/y.000001", 4).epoch(), 0);
    }

    #[test]
    fn gtids_parse_and_print() {
        let g = Gtid::parse("0-1-42").unwrap();
        assert_eq!(
            g,
            Gtid::Mariadb {
                domain: 0,
                server: 1,
                seq: 42
            }
        );
        assert_eq!(g.to_string(), "0-1-42");
        let m = Gtid::parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:23").unwrap();
        assert_eq!(m.to_string(), "3e11fa47-71ca-11e1-9e33-c80aa9429562:23");
        assert_eq!(Gtid::parse("1-2"), None);
        assert_eq!(Gtid::parse("1-2-3-4"), None);
    }
}
