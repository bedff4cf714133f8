//! Source failover by GTID (DESIGN §18, `backfill repoint`): the check that a new server
//! continues the history L holds, and where its binlog continues it.
//!
//! Why the new server's binlog after the mapped position is exactly what follows D:
//! * D is a group end and carries the GTID `g` of the group that ends there (§3.4). A
//!   replica that applied `g` and logs what it applies (`log_slave_updates`) holds `g` in
//!   its own binlog under the same GTID, and with one GTID domain everything it logged
//!   after `g`'s group is what the old primary logged after `g` (in-order apply per
//!   domain), followed by what it was written itself once promoted.
//! * The mapped position is the end of `g`'s group in the new binlog, found by reading the
//!   new server's events (`SHOW BINLOG EVENTS`: the GTID event of `g`, then its XID or
//!   closing statement), then confirmed by the server: `BINLOG_GTID_POS(file, end)` must
//!   contain `g` (the same check the reader repeats on every connect).
//! * A server without `g` (a restored older backup, a reset binlog, a replica that is
//!   behind, or one that purged `g`'s file) is refused naming `g`: the stream never
//!   resumes at a guessed position.
//!
//! MySQL (written, not tested here; these machines only run MariaDB): `g` must be in
//! `@@GLOBAL.gtid_executed` (`GTID_SUBSET`) and is located the same way by its
//! `SET @@SESSION.GTID_NEXT= 'uuid:n'` event.
use crate::error::{from_mysql, DefiniteCode, Error, Result};
use crate::lineage::{self, binary_logs};
use crate::log::Position;
use crate::position::{BinlogPos, Flavor, Gtid, Lineage};
use mysql_async::prelude::Queryable;

/// Events per `SHOW BINLOG EVENTS` page.
const PAGE: u32 = 2000;

/// Where a new server continues the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewSource {
    pub lineage: Lineage,
    /// D's GTID.
    pub gtid: Gtid,
    /// The end of `gtid`'s group in the new server's binlog (the server's own name).
    pub end: BinlogPos,
}

/// One row of `SHOW BINLOG EVENTS`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinlogEvent {
    pub pos: u64,
    pub event_type: String,
    pub end_log_pos: u64,
    pub info: String,
}

fn refused(msg: String) -> Error {
    Error::definite(DefiniteCode::Precondition, msg)
}

/// The refusal of a server that lacks `g` (names the GTID it lacks).
pub fn lacks(g: &Gtid, why: &str) -> Error {
    refused(format!(
        "repoint refused: the new server's binlog does not hold GTID {g}, the last group the \
         stream captured (D): {why}. A restored older backup, a reset binlog or a replica \
         that is behind cannot continue the stream; wait until the replica has applied {g}, \
         or re-install the tables against the new server"
    ))
}

/// Checks that `conn`'s server can continue the stream at D (`d`), and where.
pub async fn check_new_source(conn: &mut mysql_async::Conn, d: &Position) -> Result<NewSource> {
    if d.open_chunks() > 0 {
        return Err(refused(format!(
            "repoint refused: the change log holds {} chunk(s) of a group that is not complete after the capture position {}; \
             a group is never continued on another server. Start serve on the old source \
             until the group is complete, or re-install the tables",
            d.open_chunks(),
            d.restart.pos
        )));
    }
    let Some(g) = d.restart.gtid.clone() else {
        return Err(refused(format!(
            "repoint refused: the capture position {} has no GTID (the old source logged none), so no other \
             server can be checked to hold it",
            d.restart.pos
        )));
    };
    let to = lineage::read_lineage(conn).await?;
    if to == d.lineage {
        return Err(refused(format!(
            "repoint refused: the new server is the stream's current source [{to}]; nothing to switch"
        )));
    }
    if to.flavor != d.lineage.flavor {
        return Err(refused(format!(
            "repoint refused: the stream's source is {:?} and the new server is {:?}",
            d.lineage.flavor, to.flavor
        )));
    }
    let end = match to.flavor {
        Flavor::Mariadb => locate_mariadb(conn, &g).await?,
        Flavor::Mysql => locate_mysql(conn, &g).await?,
    };
    if to.flavor == Flavor::Mariadb {
        confirm_mariadb(conn, &g, &end).await?;
    }
    Ok(NewSource {
        lineage: to,
        gtid: g,
        end,
    })
}

/// Where `g` lies relative to a GTID state (`domain-server-seq`, comma separated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateHas {
    /// The state is at or past `g` in its domain.
    AtOrPast,
    /// The state is before `g` (or lacks its domain).
    Before,
}

/// Compares a MariaDB GTID state with `g` (pure).
pub fn state_has(state: &str, g: &Gtid) -> StateHas {
    let Gtid::Mariadb { domain, seq, .. } = g else {
        return StateHas::Before;
    };
    let past = state
        .split(',')
        .filter_map(|s| Gtid::parse(s.trim()))
        .any(|s| matches!(s, Gtid::Mariadb { domain: d, seq: n, .. } if d == *domain && n >= *seq));
    if past {
        StateHas::AtOrPast
    } else {
        StateHas::Before
    }
}

async fn mariadb_state(conn: &mut mysql_async::Conn, sql: &str, what: &str) -> Result<String> {
    let v: Option<Option<String>> = conn
        .query_first(sql)
        .await
        .map_err(|e| from_mysql(what, &e))?;
    Ok(v.flatten().unwrap_or_default())
}

/// Finds the end of `g`'s group in a MariaDB binlog: the newest file whose start state is
/// before `g` holds it, if any file does.
async fn locate_mariadb(conn: &mut mysql_async::Conn, g: &Gtid) -> Result<BinlogPos> {
    let state = mariadb_state(
        conn,
        "SELECT @@GLOBAL.gtid_binlog_state",
        "gtid_binlog_state",
    )
    .await?;
    if state_has(&state, g) == StateHas::Before {
        return Err(lacks(g, &format!("its gtid_binlog_state is `{state}`")));
    }
    let files = binary_logs(conn).await?;
    for f in files.iter().rev() {
        let start: Option<Option<String>> = conn
            .exec_first("SELECT BINLOG_GTID_POS(?, 4)", (f.name.as_str(),))
            .await
            .map_err(|e| from_mysql("BINLOG_GTID_POS", &e))?;
        let start = start.flatten().unwrap_or_default();
        if state_has(&start, g) == StateHas::AtOrPast {
            continue;
        }
        return match scan_file(conn, &f.name, g, Flavor::Mariadb).await? {
            Some(end) => Ok(BinlogPos::new(f.name.clone(), end)),
            None => Err(lacks(
                g,
                &format!(
                    "{} (the file that would hold it, starting at state `{start}`) has no \
                     complete group with that GTID",
                    f.name
                ),
            )),
        };
    }
    let oldest = files.first().map(|f| f.name.as_str()).unwrap_or("(none)");
    Err(lacks(
        g,
        &format!("it was purged (its oldest binlog file {oldest} starts after it)"),
    ))
}

/// MySQL: `g` in `gtid_executed`, then every retained file scanned newest first.
async fn locate_mysql(conn: &mut mysql_async::Conn, g: &Gtid) -> Result<BinlogPos> {
    if !lineage::in_gtid_executed(conn, g).await? {
        return Err(lacks(g, "it is not in the server's gtid_executed"));
    }
    for f in binary_logs(conn).await?.iter().rev() {
        if let Some(end) = scan_file(conn, &f.name, g, Flavor::Mysql).await? {
            return Ok(BinlogPos::new(f.name.clone(), end));
        }
    }
    Err(lacks(
        g,
        "it is in gtid_executed but in no retained binlog file",
    ))
}

/// The server must map the found end to a state holding `g`.
async fn confirm_mariadb(conn: &mut mysql_async::Conn, g: &Gtid, end: &BinlogPos) -> Result<()> {
    let state: Option<Option<String>> = conn
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (end.file.as_str(), end.pos))
        .await
        .map_err(|e| from_mysql("BINLOG_GTID_POS", &e))?;
    let state = state.flatten();
    let gtids: Vec<Gtid> = state
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| Gtid::parse(s.trim()))
        .collect();
    if gtids.contains(g) {
        return Ok(());
    }
    Err(lacks(
        g,
        &format!(
            "the server maps the end of its group {end} to `{}`",
            state.unwrap_or_else(|| "NULL".into())
        ),
    ))
}

/// Pages through one file's events until `g`'s group end is found.
async fn scan_file(
    conn: &mut mysql_async::Conn,
    file: &str,
    g: &Gtid,
    flavor: Flavor,
) -> Result<Option<u64>> {
    let mut from = 4u64;
    let mut carry: Vec<BinlogEvent> = Vec::new();
    loop {
        let sql = format!(
            "SHOW BINLOG EVENTS IN '{}' FROM {from} LIMIT {PAGE}",
            file.replace('\\', "\\\\").replace('\'', "''")
        );
        let rows: Vec<mysql_async::Row> = conn
            .query(sql)
            .await
            .map_err(|e| from_mysql("SHOW BINLOG EVENTS", &e))?;
        let n = rows.len();
        let page: Vec<BinlogEvent> = rows.into_iter().filter_map(event_of).collect();
        let Some(last) = page.last().map(|e| e.end_log_pos) else {
            return Ok(None);
        };
        // A group may straddle two pages: keep the tail from its GTID event on.
        carry.extend(page);
        if let Some(end) = group_end(&carry, g, flavor) {
            return Ok(Some(end));
        }
        if n < PAGE as usize || last <= from {
            return Ok(None);
        }
        let keep = carry
            .iter()
            .rposition(|e| gtid_of(e, flavor).is_some_and(|x| x == *g))
            .unwrap_or(carry.len());
        carry.drain(..keep);
        from = last;
    }
}

fn event_of(row: mysql_async::Row) -> Option<BinlogEvent> {
    let pos: u64 = row.get(1)?;
    let event_type: String = row.get(2)?;
    let end_log_pos: u64 = row.get(4)?;
    let info: Option<String> = row.get(5);
    Some(BinlogEvent {
        pos,
        event_type,
        end_log_pos,
        info: info.unwrap_or_default(),
    })
}

/// The GTID a GTID event names (`BEGIN GTID 0-1-4`, `GTID 0-1-6`,
/// `XA START ... GTID 0-1-7`; MySQL `SET @@SESSION.GTID_NEXT= 'uuid:n'`).
fn gtid_of(e: &BinlogEvent, flavor: Flavor) -> Option<Gtid> {
    if !e.event_type.eq_ignore_ascii_case("Gtid") {
        return None;
    }
    match flavor {
        Flavor::Mariadb => Gtid::parse(e.info.rsplit_once("GTID ")?.1.trim()),
        Flavor::Mysql => Gtid::parse(e.info.split('\'').nth(1)?),
    }
}

/// The end of `g`'s group in `events` (in file order), if the whole group is there
/// (pure): a transaction ends at its XID (or a COMMIT/ROLLBACK statement), a prepared XA
/// group at its XA_prepare event, a standalone statement at itself.
pub fn group_end(events: &[BinlogEvent], g: &Gtid, flavor: Flavor) -> Option<u64> {
    let at = events
        .iter()
        .position(|e| gtid_of(e, flavor).is_some_and(|x| x == *g))?;
    let head = &events[at];
    let rest = &events[at + 1..];
    let is_query = |e: &BinlogEvent| e.event_type.eq_ignore_ascii_case("Query");
    let closes = |e: &BinlogEvent| {
        e.event_type.eq_ignore_ascii_case("Xid")
            || (is_query(e)
                && matches!(
                    e.info.trim().to_ascii_uppercase().as_str(),
                    "COMMIT" | "ROLLBACK"
                ))
    };
    let end = if flavor == Flavor::Mariadb && head.info.starts_with("BEGIN GTID") {
        rest.iter().find(|e| closes(e))
    } else if flavor == Flavor::Mariadb && head.info.starts_with("XA START") {
        rest.iter()
            .find(|e| e.event_type.eq_ignore_ascii_case("XA_prepare"))
    } else if flavor == Flavor::Mysql
        && rest
            .first()
            .is_some_and(|e| is_query(e) && e.info.trim().eq_ignore_ascii_case("BEGIN"))
    {
        rest.iter().find(|e| closes(e))
    } else {
        rest.iter()
            .find(|e| is_query(e) || e.event_type.eq_ignore_ascii_case("Xid"))
    };
    end.map(|e| e.end_log_pos)
}

#[cfg(test)]
mod tests;
