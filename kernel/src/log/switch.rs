//! The lineage switch record (`backfill repoint`, DESIGN §18): the one L record that
//! moves a stream to another server, and D with it, in one state-store transaction.
//!
//! Why identities and cursors keep ordering by L across the switch: the record opens the
//! next lineage epoch, and every position read from the new server afterwards (by the
//! reader, read views, binlog ends) is placed in that epoch (`BinlogPos::in_epoch`), so
//! `BinlogPos::try_cmp` orders it after every position of the epochs before, which is
//! exactly L's order. Raw file positions of two servers are never compared; change
//! identities name the new lineage's digest and the epoch-qualified file, so they cannot
//! collide with the old server's.

use super::append::append_tx;
use super::{Entry, LineageSwitch, LogRecord, Position, RecordBody};
use crate::change::GroupEnd;
use crate::error::{DefiniteCode, Error, Result};
use crate::position::{BinlogPos, Gtid, Lineage};
use sqlx::mysql::MySqlPool;

/// The switch record after D `d` to `to`, continuing at `to_end` (the server's own
/// position of the end of D's GTID group there). Pure; refuses what cannot be switched.
pub fn switch_record(
    d: &Position,
    to: &Lineage,
    gtid: &Gtid,
    to_end: &BinlogPos,
) -> Result<LogRecord> {
    let refuse = |m: String| Error::definite(DefiniteCode::Precondition, m);
    if d.open_chunks() > 0 {
        return Err(refuse(format!(
            "stream `{}`: the change log holds an open group after the capture position {}",
            d.stream, d.restart.pos
        )));
    }
    if d.restart.gtid.as_ref() != Some(gtid) {
        return Err(refuse(format!(
            "stream `{}`: the capture position moved (now {} at {}) since the new server was checked for {gtid}",
            d.stream,
            d.restart
                .gtid
                .as_ref()
                .map(|g| g.to_string())
                .unwrap_or_else(|| "(none)".into()),
            d.restart.pos
        )));
    }
    let epoch = d.restart.pos.epoch() + 1;
    let to_pos = to_end.server_pos().in_epoch(epoch);
    Ok(LogRecord {
        start: d.restart.pos.clone(),
        chunk: 0,
        gtid: Some(gtid.clone()),
        end: Some(GroupEnd {
            pos: to_pos.clone(),
            gtid: Some(gtid.clone()),
        }),
        body: RecordBody::Switch(Box::new(LineageSwitch {
            from: d.lineage.clone(),
            to: to.clone(),
            gtid: gtid.clone(),
            from_pos: d.restart.pos.clone(),
            to_pos,
        })),
    })
}

/// Appends the switch record after `d` and moves D (position and lineage) to the new
/// server, under the stream's capture lease token `fence`; fails and changes nothing if
/// L's tail moved.
pub async fn append_switch(
    pool: &MySqlPool,
    d: &Position,
    to: &Lineage,
    gtid: &Gtid,
    to_end: &BinlogPos,
    fence: Option<u64>,
) -> Result<Position> {
    let rec = switch_record(d, to, gtid, to_end)?;
    append_tx(pool, d, &[Entry::from(rec)], fence, Some(to)).await
}

/// Places a position just read from the source behind `conn` (a read view's snapshot, the
/// binlog end) in the stream's current lineage epoch, so it orders against L. Before any
/// switch (epoch 0) it is returned unchanged; after one, `conn` must be on the stream's
/// current source (a job still pointed at the old server is refused, never mixed).
pub async fn live_position(
    pool: &MySqlPool,
    stream: &str,
    conn: &mut mysql_async::Conn,
    raw: BinlogPos,
) -> Result<BinlogPos> {
    let Some(d) = super::load_position(pool, stream).await? else {
        return Ok(raw);
    };
    let epoch = d.restart.pos.epoch();
    if epoch == 0 {
        return Ok(raw);
    }
    let now = crate::lineage::read_lineage(conn).await?;
    if now != d.lineage {
        return Err(Error::definite(
            DefiniteCode::LineageChanged,
            format!(
                "stream `{stream}` reads [{}] since its repoint, but this connection is to \
                 [{now}]: pass the new source's URL (--source) to serve",
                d.lineage
            ),
        ));
    }
    Ok(raw.in_epoch(epoch))
}
