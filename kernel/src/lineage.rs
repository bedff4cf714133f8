//! Source lineage: which server and which binlog history a position belongs to (DESIGN §3.4).
//!
//! Why this is enough to refuse a swapped, reset or restored source:
//! * `server_id` + `server_uid` (`@@server_uuid` on MySQL) name the server, and
//!   `@@log_bin_basename` names the binlog series. A different server at the same URL has a
//!   different uid (MariaDB derives `@@server_uid` from the host and datadir) or id.
//! * Neither survives as proof across `RESET MASTER` or a restored backup on the same host,
//!   so D also stores the GTID of the group that ends at D. On every connect the server must
//!   still map D's (file, pos) to that GTID: MariaDB `BINLOG_GTID_POS(file, pos)`, MySQL
//!   "the GTID is in `gtid_executed` and the file is long enough". A reset history re-uses
//!   file names and offsets, but not with the same GTIDs at the same offsets.
//! * A file missing from `SHOW BINARY LOGS` that is older than the oldest file still there
//!   was purged ([`DefiniteCode::BinlogPurged`]); one newer than the newest can only mean the
//!   history was reset ([`DefiniteCode::LineageChanged`]).
//!
//! All checks return definite errors naming the position and the fix; nothing here retries.
use crate::change::GroupEnd;
use crate::error::{from_mysql, DefiniteCode, Error, Result};
use crate::position::{BinlogPos, Flavor, Gtid, Lineage};
use mysql_async::prelude::Queryable;

/// Reads the lineage of the server behind `conn`.
pub async fn read_lineage(conn: &mut mysql_async::Conn) -> Result<Lineage> {
    let version: Option<String> = conn
        .query_first("SELECT VERSION()")
        .await
        .map_err(|e| from_mysql("reading server version", &e))?;
    let version = version.unwrap_or_default();
    let flavor = flavor_of(&version);
    let uid_sql = match flavor {
        Flavor::Mariadb => "SELECT @@server_id, @@server_uid, @@log_bin_basename",
        Flavor::Mysql => "SELECT @@server_id, @@server_uuid, @@log_bin_basename",
    };
    let row: Option<(u64, Option<String>, Option<String>)> = conn
        .query_first(uid_sql)
        .await
        .map_err(|e| from_mysql("reading server identity", &e))?;
    let Some((server_id, uid, base)) = row else {
        return Err(Error::transient("reading server identity: no row"));
    };
    let server_id = u32::try_from(server_id).map_err(|_| {
        Error::definite(
            DefiniteCode::Precondition,
            format!("@@server_id {server_id} does not fit 32 bits"),
        )
    })?;
    let Some(base) = base.filter(|b| !b.is_empty()) else {
        return Err(Error::definite(
            DefiniteCode::Precondition,
            "the source has no binary log (@@log_bin_basename is NULL): enable log_bin",
        ));
    };
    Ok(Lineage {
        flavor,
        server_id,
        server_uid: uid.unwrap_or_default(),
        binlog_base: base_name(&base).to_string(),
    })
}

/// MariaDB reports itself in `VERSION()` (e.g. `10.11.6-MariaDB-0+deb12u1-log`).
pub fn flavor_of(version: &str) -> Flavor {
    if version.to_ascii_lowercase().contains("mariadb") {
        Flavor::Mariadb
    } else {
        Flavor::Mysql
    }
}

/// `/var/lib/mysql/mysql-bin` -> `mysql-bin`.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Compares the lineage recorded with the one the server reports now.
pub fn compare_lineage(recorded: &Lineage, now: &Lineage) -> Result<()> {
    if recorded == now {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::LineageChanged,
        format!(
            "the source at this URL is not the server whose binlog was captured: recorded \
             [{recorded}], found [{now}]; a swapped or re-initialised source is never \
             re-interpreted: re-install the table against the new source"
        ),
    ))
}

/// One file of `SHOW BINARY LOGS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogFile {
    pub name: String,
    pub size: u64,
}

/// Reads `SHOW BINARY LOGS`.
pub async fn binary_logs(conn: &mut mysql_async::Conn) -> Result<Vec<BinlogFile>> {
    let rows: Vec<mysql_async::Row> = conn
        .query("SHOW BINARY LOGS")
        .await
        .map_err(|e| from_mysql("SHOW BINARY LOGS", &e))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let name: Option<String> = row.get(0);
        let size: Option<u64> = row.get(1);
        if let (Some(name), Some(size)) = (name, size) {
            out.push(BinlogFile { name, size });
        }
    }
    Ok(out)
}

/// The current end of the binlog (`SHOW MASTER STATUS`).
pub async fn binlog_end(conn: &mut mysql_async::Conn) -> Result<BinlogPos> {
    let row: Option<mysql_async::Row> = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .map_err(|e| from_mysql("SHOW MASTER STATUS", &e))?;
    let Some(row) = row else {
        return Err(Error::definite(
            DefiniteCode::Precondition,
            "SHOW MASTER STATUS returned nothing: the source has no binary log; enable log_bin",
        ));
    };
    let file: Option<String> = row.get(0);
    let pos: Option<u64> = row.get(1);
    match (file, pos) {
        (Some(file), Some(pos)) => Ok(BinlogPos::new(file, pos)),
        _ => Err(Error::transient("SHOW MASTER STATUS: malformed row")),
    }
}

/// Decides whether `pos` is still in the retained binlog files (pure).
pub fn check_file_retained(pos: &BinlogPos, files: &[BinlogFile]) -> Result<()> {
    if let Some(f) = files.iter().find(|f| f.name == pos.file) {
        if pos.pos > f.size {
            return Err(Error::definite(
                DefiniteCode::LineageChanged,
                format!(
                    "restart position {pos} lies beyond the end of {} ({} bytes): the binlog \
                     history was reset or restored; re-install the table",
                    f.name, f.size
                ),
            ));
        }
        return Ok(());
    }
    let first = files.first().map(|f| BinlogPos::new(f.name.clone(), 4));
    let newer_than_all = files.last().is_some_and(|last| {
        matches!(
            pos.try_cmp(&BinlogPos::new(last.name.clone(), 0)),
            Ok(std::cmp::Ordering::Greater)
        )
    });
    if newer_than_all {
        return Err(Error::definite(
            DefiniteCode::LineageChanged,
            format!(
                "restart position {pos} is in a binlog file newer than every file the source \
                 has: the binlog history was reset; re-install the table"
            ),
        ));
    }
    let first = first.map(|p| p.file).unwrap_or_else(|| "(none)".into());
    Err(Error::definite(
        DefiniteCode::BinlogPurged,
        format!(
            "restart position {pos} was purged from the source (oldest binlog file now: \
             {first}); the captured tables must be re-installed, or keep binlogs longer \
             (binlog_expire_logs_seconds)"
        ),
    ))
}

/// Decides whether the GTID state the server reports at a position contains the GTID
/// recorded for the group that ends there (pure). `state` is `BINLOG_GTID_POS` output:
/// comma-separated `domain-server-seq`, one per domain; NULL when `pos` is not an event
/// boundary.
pub fn check_gtid_state(end: &GroupEnd, state: Option<&str>) -> Result<()> {
    let changed = |why: String| {
        Error::definite(
            DefiniteCode::LineageChanged,
            format!(
                "restart position {} no longer maps to GTID {}: {why}; the binlog history was \
                 reset or restored, re-install the table",
                end.pos,
                end.gtid
                    .as_ref()
                    .map(|g| g.to_string())
                    .unwrap_or_else(|| "(none)".into())
            ),
        )
    };
    let Some(state) = state else {
        return Err(changed(
            "the server says it is not an event boundary".into(),
        ));
    };
    let gtids: Vec<Gtid> = state
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter_map(Gtid::parse)
        .collect();
    match &end.gtid {
        None if gtids.is_empty() => Ok(()),
        None => Err(changed(format!("the server reports GTID state `{state}`"))),
        Some(g) if gtids.contains(g) => Ok(()),
        Some(_) => Err(changed(format!("the server reports GTID state `{state}`"))),
    }
}

/// MySQL: true when `g` is in the server's `gtid_executed`.
pub async fn in_gtid_executed(conn: &mut mysql_async::Conn, g: &Gtid) -> Result<bool> {
    let inside: Option<Option<i64>> = conn
        .exec_first(
            "SELECT GTID_SUBSET(?, @@GLOBAL.gtid_executed)",
            (g.to_string(),),
        )
        .await
        .map_err(|e| from_mysql("GTID_SUBSET", &e))?;
    Ok(inside.flatten() == Some(1))
}

/// Checks on a live server that `end` (D) is still a valid restart position of `recorded`.
pub async fn check_restart_position(
    conn: &mut mysql_async::Conn,
    recorded: &Lineage,
    end: &GroupEnd,
) -> Result<()> {
    let now = read_lineage(conn).await?;
    compare_lineage(recorded, &now)?;
    let files = binary_logs(conn).await?;
    let at = end.pos.server_pos();
    check_file_retained(&at, &files)?;
    match recorded.flavor {
        Flavor::Mariadb => {
            let state: Option<Option<String>> = conn
                .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (at.file.as_str(), at.pos))
                .await
                .map_err(|e| from_mysql("BINLOG_GTID_POS", &e))?;
            check_gtid_state(end, state.flatten().as_deref())
        }
        Flavor::Mysql => {
            let Some(g) = &end.gtid else {
                return Ok(());
            };
            if in_gtid_executed(conn, g).await? {
                Ok(())
            } else {
                Err(Error::definite(
                    DefiniteCode::LineageChanged,
                    format!(
                        "GTID {g} recorded at {} is not in the source's gtid_executed: the \
                         binlog history was reset or restored; re-install the table",
                        end.pos
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<BinlogFile> {
        vec![
            BinlogFile {
                name: "mysql-bin.000003".into(),
                size: 1000,
            },
            BinlogFile {
                name: "mysql-bin.000004".into(),
                size: 500,
            },
        ]
    }

    fn code(r: Result<()>) -> Option<DefiniteCode> {
        r.err().and_then(|e| e.as_definite().map(|d| d.code))
    }

    #[test]
    fn retained_purged_and_reset_files() {
        let f = files();
        assert!(check_file_retained(&BinlogPos::new("mysql-bin.000003", 900), &f).is_ok());
        assert_eq!(
            code(check_file_retained(
                &BinlogPos::new("mysql-bin.000002", 900),
                &f
            )),
            Some(DefiniteCode::BinlogPurged)
        );
        assert_eq!(
            code(check_file_retained(
                &BinlogPos::new("mysql-bin.000009", 4),
                &f
            )),
            Some(DefiniteCode::LineageChanged)
        );
        assert_eq!(
            code(check_file_retained(
                &BinlogPos::new("mysql-bin.000004", 501),
                &f
            )),
            Some(DefiniteCode::LineageChanged)
        );
    }

    #[test]
    fn gtid_state_must_contain_the_recorded_gtid() {
        let end = GroupEnd {
            pos: BinlogPos::new("mysql-bin.000003", 900),
            gtid: Gtid::parse("0-1-42"),
        };
        assert!(check_gtid_state(&end, Some("0-1-42")).is_ok());
        assert!(check_gtid_state(&end, Some("1-1-7,0-1-42")).is_ok());
        assert_eq!(
            code(check_gtid_state(&end, Some("0-1-41"))),
            Some(DefiniteCode::LineageChanged)
        );
        assert_eq!(
            code(check_gtid_state(&end, None)),
            Some(DefiniteCode::LineageChanged)
        );
        let empty = GroupEnd {
            pos: BinlogPos::new("mysql-bin.000001", 4),
            gtid: None,
        };
        assert!(check_gtid_state(&empty, Some("")).is_ok());
        assert!(check_gtid_state(&empty, Some("0-1-1")).is_err());
    }

    #[test]
    fn lineage_comparison_names_both_sides() {
        let a = Lineage {
            flavor: Flavor::Mariadb,
            server_id: 1,
            server_uid: "abc".into(),
            binlog_base: "mysql-bin".into(),
        };
        let mut b = a.clone();
        assert!(compare_lineage(&a, &b).is_ok());
        b.server_uid = "xyz".into();
        let e = compare_lineage(&a, &b)
            .expect_err("uid differs")
            .to_string();
        assert!(e.contains("lineage_changed") && e.contains("abc") && e.contains("xyz"));
        assert_eq!(flavor_of("10.11.6-MariaDB-0+deb12u1-log"), Flavor::Mariadb);
        assert_eq!(flavor_of("8.4.0"), Flavor::Mysql);
        assert_eq!(base_name("/var/lib/mysql/mysql-bin"), "mysql-bin");
    }
}
