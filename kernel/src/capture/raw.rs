//! Rows kept raw in L decoded later, against a definition sealed after they were
//! captured (DESIGN §16: the rows of a table after a DDL are decoded with the schema
//! version in force at their position, which is sealed once the DDL was proven
//! compatible).
//!
//! # Why it is exact
//!
//! The bytes are the rows event and the table map the capture kept unchanged
//! ([`crate::log::RawRows`]); they are parsed by the same mysql_common structures the live
//! capture parses, with the binlog v4 post-header lengths (the table-id width and the rows
//! header follow from them; an event they do not fit fails to parse: "bytes remaining"),
//! and decoded by the same [`RowDecoder`] after the same checks: the table map must agree
//! with the definition column by column ([`check_table_map`]) and every image must hold
//! every column. Any disagreement is an error naming it, never a guess.
use super::decode::{check_table_map, Images, RowDecoder};
use crate::change::Op;
use crate::log::RawRows;
use crate::schema::SealedSchema;
use mysql_async::binlog::events::{
    DeleteRowsEvent, DeleteRowsEventV1, FormatDescriptionEvent, RowsEventData, TableMapEvent,
    UpdateRowsEvent, UpdateRowsEventV1, WriteRowsEvent, WriteRowsEventV1,
};
use mysql_async::binlog::{BinlogVersion, EventType};
use mysql_common::binlog::BinlogCtx;
use mysql_common::io::ParseBuf;
use mysql_common::proto::MyDeserialize;

/// The event header's length in binlog v4 (the stored bytes are the body only).
const HEADER_LEN: usize = 19;

fn parse<'a, T>(fde: &'a FormatDescriptionEvent<'a>, ty: u8, body: &'a [u8]) -> Result<T, String>
where
    T: MyDeserialize<'a, Ctx = BinlogCtx<'a>>,
{
    let mut buf = ParseBuf(body);
    let ctx = BinlogCtx::new(HEADER_LEN + body.len(), fde, ty);
    let v: T = buf
        .parse(ctx)
        .map_err(|e| format!("a raw event of type {ty} does not parse: {e}"))?;
    if !buf.is_empty() {
        return Err(format!(
            "a raw event of type {ty}: bytes remaining after parsing"
        ));
    }
    Ok(v)
}

fn rows_data<'a>(
    fde: &'a FormatDescriptionEvent<'a>,
    raw: &'a RawRows,
) -> Result<(Op, RowsEventData<'a>), String> {
    use EventType::*;
    let (t, d) = (raw.event_type, raw.data.as_slice());
    let is = |e: EventType| t == e as u8;
    Ok(if is(WRITE_ROWS_EVENT) {
        (
            Op::Insert,
            RowsEventData::WriteRowsEvent(parse::<WriteRowsEvent>(fde, t, d)?),
        )
    } else if is(UPDATE_ROWS_EVENT) {
        (
            Op::Update,
            RowsEventData::UpdateRowsEvent(parse::<UpdateRowsEvent>(fde, t, d)?),
        )
    } else if is(DELETE_ROWS_EVENT) {
        (
            Op::Delete,
            RowsEventData::DeleteRowsEvent(parse::<DeleteRowsEvent>(fde, t, d)?),
        )
    } else if is(WRITE_ROWS_EVENT_V1) {
        (
            Op::Insert,
            RowsEventData::WriteRowsEventV1(parse::<WriteRowsEventV1>(fde, t, d)?),
        )
    } else if is(UPDATE_ROWS_EVENT_V1) {
        (
            Op::Update,
            RowsEventData::UpdateRowsEventV1(parse::<UpdateRowsEventV1>(fde, t, d)?),
        )
    } else if is(DELETE_ROWS_EVENT_V1) {
        (
            Op::Delete,
            RowsEventData::DeleteRowsEventV1(parse::<DeleteRowsEventV1>(fde, t, d)?),
        )
    } else {
        return Err(format!("raw rows of event type {t}, which is not decoded later (partial JSON or compressed rows)"));
    })
}

/// Every row of `raw` as (op, before, after) server values of `sealed`'s columns, or why
/// they cannot be decoded against it.
pub fn decode_raw(raw: &RawRows, sealed: &SealedSchema) -> Result<(Op, Vec<Images>), String> {
    let fde = FormatDescriptionEvent::new(BinlogVersion::Version4);
    let tme: TableMapEvent<'_> = parse(&fde, EventType::TABLE_MAP_EVENT as u8, &raw.table_map)?;
    let problems = check_table_map(&tme, sealed);
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let (op, data) = rows_data(&fde, raw)?;
    let problems = super::assemble::image_problems(&data);
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    let rows = RowDecoder::new(&tme)?.rows(&data, sealed)?;
    Ok((op, rows))
}
