//! Steps 1-4 of a window (DESIGN §5): LOW, the read view, RAW pages, close and confirm.
//!
//! Why it is safe: LOW is awaited in L before the view opens, so the view's binlog point S
//! (MariaDB's `binlog_snapshot_position`, fixed for the transaction's life) is at or after
//! LOW; HIGH is written only after this module returns, so S < HIGH. Pages are read in
//! primary-key order by the server (STYLE §9) with a keyset cursor that lives only inside
//! this one transaction: a failure anywhere abandons the attempt, and its RAW pages become
//! garbage (DESIGN §5 restart rules). The read permit returns to the pool only once the
//! connection is confirmed closed (DESIGN §8); an unconfirmed close keeps it as a hold and
//! is reported even when the read itself succeeded. The read view is bounded in time
//! (`read_view_timeout`), and so are the close and its confirmation.
use crate::io::pool::Use;
use crate::table::ctx::JobCtx;
use crate::table::window::reconcile::Raw;
use crate::table::window::{fp, progress};
use kernel::error::{from_mysql, DefiniteCode};
use kernel::failpoint;
use kernel::ids::{Attempt, PageNo, WindowId};
use kernel::key::{sql as key_sql, weigh, Keyer, SortKey};
use kernel::position::BinlogPos;
use kernel::range::{Bound, KeyRange};
use kernel::value::{Row, SqlValue};
use kernel::{Error, Result};
use ledger::page::{self, PageKey, PageRef, RawPage};
use ledger::registry::{Kind, Owner};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Params, Value};
use std::time::Duration;
use tracing::Instrument;

/// What one read view produced.
#[derive(Debug)]
pub struct ReadView {
    /// The view's binlog point, where the server reports it (MariaDB).
    pub snapshot: Option<BinlogPos>,
    pub raw_pages: Vec<PageRef>,
    /// Every RAW row, in key order (bounded by the window's size), with the print of its
    /// sort key, computed and checked as its page arrived so the page's weights need not
    /// be kept for the fold.
    pub raw: Raw,
}

/// Steps 2-4 under a read permit: open the view, read pages, close and confirm.
pub async fn read_window(
    ctx: &JobCtx,
    w: WindowId,
    a: Attempt,
    range: &KeyRange,
    keyer: &Keyer,
) -> Result<ReadView> {
    let owner = format!("job {} {w} {a} read", ctx.id());
    let permit = ctx
        .admission
        .acquire_read(&owner, ctx.cfg.permit_timeout, &ctx.cancel)
        .await
        .map_err(|e| Error::transient(format!("{owner}: {e}")))?;
    crate::seams::read_panic::hit(ctx.id(), w);
    let mut conn = match ctx.source.connect(Use::Data, "(read view)").await {
        Ok(c) => c,
        Err(e) => {
            permit.release_confirmed(); // nothing was sent
            return Err(e);
        }
    };
    let id = conn.id();
    let limit = ctx.cfg.read_view_timeout;
    let read = match tokio::time::timeout(limit, in_view(ctx, &mut conn, w, a, range, keyer)).await
    {
        Ok(r) => r,
        // The statement may still run on the server: only the close below can tell.
        Err(_) => Err(Error::transient(format!(
            "{owner}: the read view did not finish within {limit:?} (read_view_timeout)"
        ))),
    };
    let (conn, slot) = conn.split();
    match close_confirmed(ctx, conn, id, read.is_ok()).await {
        Ok(()) => {
            drop(slot);
            permit.release_confirmed()
        }
        Err(e) => {
            slot.lose();
            let hold = permit.mark_release_unknown(e.to_string());
            tracing::error!(%hold, error = %e, "read connection close not confirmed");
            return Err(Error::definite(
                DefiniteCode::ReleaseUnconfirmed,
                format!("{owner}: closing the read connection {id} could not be confirmed: {e}"),
            ));
        }
    }
    read
}

async fn in_view(
    ctx: &JobCtx,
    conn: &mut Conn,
    w: WindowId,
    a: Attempt,
    range: &KeyRange,
    keyer: &Keyer,
) -> Result<ReadView> {
    let my = |what: &'static str| move |e: mysql_async::Error| from_mysql(what, &e);
    conn.query_drop("SET SESSION time_zone = '+00:00'")
        .await
        .map_err(my("setting the read session time zone"))?;
    crate::io::connect::bound_statements(conn).await?;
    conn.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .await
        .map_err(my("setting REPEATABLE READ"))?;
    conn.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        .await
        .map_err(my("opening the read view"))?;
    let snapshot = match snapshot_position(conn).await? {
        Some(p) => Some(kernel::log::live_position(&ctx.pool, &ctx.stream, conn, p).await?),
        None => None,
    };
    let mut view = ReadView {
        snapshot,
        raw_pages: Vec::new(),
        raw: Raw::default(),
    };
    failpoint::hit(fp::AFTER_READ_VIEW_OPEN);
    let mut after: Option<Vec<SqlValue>> = range.lower.as_ref().map(|b| b.values.clone());
    let weighed = weigh::inline(conn, keyer).await?;
    loop {
        let page = Page {
            keyer,
            weighed: &weighed,
            after: after.as_deref(),
            upper: range.upper.as_ref(),
        };
        let (rows, keys) = read_page(ctx, conn, page)
            .instrument(crate::profile_span!("window.page_read", ctx.id(), w))
            .await?;
        ctx.throttle_read(&rows).await?;
        let n = rows.len();
        if n == 0 && !view.raw_pages.is_empty() {
            break;
        }
        after = match rows.last() {
            Some(r) => Some(key_of(ctx, keyer, r)?),
            None => after,
        };
        persist_raw(ctx, (w, a, range), &mut view, keys, rows)
            .instrument(crate::profile_span!("window.raw_persist", ctx.id(), w))
            .await?;
        progress::record(
            &ctx.pool,
            ctx.id(),
            ctx.generation(),
            w,
            a,
            progress::Step::Reading,
            (view.raw.len() as u64, 0, 0),
        )
        .await?;
        failpoint::hit(fp::MID_PAGES);
        if view.raw_pages.len() == 1 {
            ctx.hooks.mid_read(ctx.id(), w, a, conn.id()).await;
        }
        if n < ctx.cfg.page_rows.max(1) {
            break;
        }
    }
    failpoint::hit(fp::AFTER_RAW);
    conn.query_drop("COMMIT")
        .await
        .map_err(my("closing the read view"))?;
    Ok(view)
}

/// MariaDB's `binlog_snapshot_file/position` of the open view (None elsewhere).
async fn snapshot_position(conn: &mut Conn) -> Result<Option<BinlogPos>> {
    let rows: Vec<(String, String)> = conn
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .map_err(|e| from_mysql("reading the read view's binlog position", &e))?;
    let get = |name: &str| {
        rows.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    match (get("binlog_snapshot_file"), get("binlog_snapshot_position")) {
        (Some(f), Some(p)) if !f.is_empty() => Ok(p.parse().ok().map(|p| BinlogPos::new(f, p))),
        _ => Ok(None),
    }
}

/// What one page read needs: the key (with the inline weight expressions of its character
/// columns) and the window's cursor and upper bound.
struct Page<'a> {
    keyer: &'a Keyer,
    weighed: &'a [(usize, String)],
    after: Option<&'a [SqlValue]>,
    upper: Option<&'a Bound>,
}

/// One page of the window in key order, by the full key: `key > after AND key <= upper`
/// as range-seek predicates (kernel::key::sql), `ORDER BY` the key columns, with each
/// row's sort key. The server's weights of character key columns come back in the same
/// statement (`kernel::key::weigh::inline`) and go into the row's sort key at once (a
/// window holds sort keys' prints, not a weight per row, DESIGN §14).
async fn read_page(ctx: &JobCtx, conn: &mut Conn, p: Page<'_>) -> Result<(Vec<Row>, Vec<SortKey>)> {
    let s = &ctx.schema;
    let mut cols: Vec<String> = s.columns.iter().map(|c| c.select_expr()).collect();
    let ncols = cols.len();
    cols.extend(p.weighed.iter().map(|(_, e)| e.clone()));
    let key = s.key_names_quoted();
    let mut conds = Vec::new();
    let mut params = Vec::new();
    for pred in [
        p.after
            .map(|v| key_sql::after(&key, &p.keyer.predicate_values(v))),
        p.upper
            .map(|u| key_sql::upto(&key, &p.keyer.predicate_values(&u.values))),
    ]
    .into_iter()
    .flatten()
    {
        conds.push(format!("({})", pred.sql));
        params.extend(pred.params.into_iter().map(Value::from));
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    let sql = format!(
        "SELECT {} FROM {}{filter} ORDER BY {} LIMIT {}",
        cols.join(", "),
        s.qualified(),
        key_sql::order_by(&key),
        ctx.cfg.page_rows.max(1)
    );
    let rows: Vec<mysql_async::Row> = conn
        .exec(sql, Params::Positional(params))
        .await
        .map_err(|e| from_mysql(&format!("reading a page of {}", s.qualified()), &e))?;
    let mut out = (
        Vec::with_capacity(rows.len()),
        Vec::with_capacity(rows.len()),
    );
    let mut weights = Vec::with_capacity(p.weighed.len());
    for r in rows {
        let row = split_weights(ctx, &p, ncols, r, &mut weights)?;
        out.1.push(sort_key(ctx, p.keyer, &row, &weights)?);
        out.0.push(row);
    }
    Ok(out)
}

/// The row's sealed columns; the trailing (weight, whole) pairs, checked, into `weights`
/// as `(key column, weight)`.
fn split_weights(
    ctx: &JobCtx,
    p: &Page<'_>,
    ncols: usize,
    r: mysql_async::Row,
    weights: &mut Vec<(usize, Vec<u8>)>,
) -> Result<Row> {
    let s = &ctx.schema;
    let extra = 2 * p.weighed.len();
    let mut vals: Vec<SqlValue> = r.unwrap().into_iter().map(SqlValue::from).collect();
    if vals.len() != ncols + extra {
        return Err(Error::definite(
            DefiniteCode::SchemaChanged,
            format!(
                "{}: the read returned {} columns, sealed {}",
                s.qualified(),
                vals.len().saturating_sub(extra),
                s.columns.len()
            ),
        ));
    }
    // The (weight, whole) pairs are taken off the end of the row, last pair first.
    weights.clear();
    for (ci, _) in p.weighed.iter().rev() {
        let whole = vals.pop().as_ref().and_then(int_of);
        let weight = vals.pop().and_then(bytes_of);
        let col = p.keyer.def.columns[*ci].index;
        let SqlValue::Bytes(v) = &vals[col] else {
            continue; // not a string: its sort key names it
        };
        weights.push((*ci, weigh::check_inline(p.keyer, *ci, v, weight, whole)?));
    }
    Ok(vals)
}

fn bytes_of(v: SqlValue) -> Option<Vec<u8>> {
    match v {
        SqlValue::Bytes(w) => Some(w),
        _ => None,
    }
}

fn int_of(v: &SqlValue) -> Option<i64> {
    match v {
        SqlValue::Int(i) => Some(*i),
        SqlValue::UInt(u) => i64::try_from(*u).ok(),
        SqlValue::Bytes(b) => std::str::from_utf8(b).ok().and_then(|t| t.parse().ok()),
        _ => None,
    }
}

/// The sort key of a read row, its character columns' weights given.
fn sort_key(
    ctx: &JobCtx,
    keyer: &Keyer,
    row: &Row,
    weights: &[(usize, Vec<u8>)],
) -> Result<SortKey> {
    keyer.sort_key_inline(row, weights).map_err(|e| {
        Error::definite(
            DefiniteCode::Uncapturable,
            format!(
                "{}: a read row has no sort key: {e}",
                ctx.schema.qualified()
            ),
        )
    })
}

/// The key values of a read row (the keyset cursor of the next page).
fn key_of(ctx: &JobCtx, keyer: &Keyer, row: &Row) -> Result<Vec<SqlValue>> {
    keyer.values(row).map_err(|e| {
        Error::definite(
            DefiniteCode::SchemaChanged,
            format!("{}: a read row has no key: {e}", ctx.schema.qualified()),
        )
    })
}

/// Seals and registers a RAW page, then keeps its rows with their keys' prints (each key
/// checked inside the window and after the one before).
async fn persist_raw(
    ctx: &JobCtx,
    (w, a, range): (WindowId, Attempt, &KeyRange),
    view: &mut ReadView,
    keys: Vec<SortKey>,
    rows: Vec<Row>,
) -> Result<()> {
    let page = RawPage {
        key: PageKey {
            job: ctx.id(),
            generation: ctx.generation(),
            window: w,
            attempt: a,
            page: PageNo(u32::try_from(view.raw_pages.len()).unwrap_or(u32::MAX)),
        },
        rows,
    };
    let sealed = page::seal(&page);
    ledger::seal::persist_owned(
        ctx.store.as_ref(),
        &ctx.registry,
        ctx.id(),
        ctx.generation(),
        Kind::Raw,
        &sealed.bytes,
        Some(Owner {
            window: w,
            attempt: a,
        }),
    )
    .await?;
    view.raw_pages.push(page.page_ref_for(&sealed));
    view.raw.push(range, keys, page.rows).map_err(|e| {
        Error::definite(
            DefiniteCode::Uncapturable,
            format!("{} {w} {a}: {e}", ctx.schema.qualified()),
        )
    })
}

/// How long the server may take to show a killed read connection gone.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// Closes the read connection and confirms the server thread is gone: a clean COM_QUIT,
/// or else KILL from a new session and a bounded wait until PROCESSLIST no longer shows it.
///
/// A clean COM_QUIT proves the release only when every statement sent was answered
/// (`answered`); after a failure or a timeout a statement may still run on the server,
/// so only the KILL and PROCESSLIST confirm it. Every step is bounded: an unanswered
/// close or confirmation is an error (release unknown), never an endless wait.
pub async fn close_confirmed(ctx: &JobCtx, conn: Conn, id: u32, answered: bool) -> Result<()> {
    if answered {
        if let Ok(Ok(())) = tokio::time::timeout(CONFIRM_TIMEOUT, conn.disconnect()).await {
            return Ok(());
        }
    } else {
        drop(conn); // closes the socket; the server thread may live on until KILLed
    }
    let confirm = async {
        let mut c = ctx.source.connect(Use::Kill, "(confirm close)").await?;
        let r = kill_and_wait(&mut c, id).await;
        c.close().await;
        r
    };
    let limit = CONFIRM_TIMEOUT * 2;
    tokio::time::timeout(limit, confirm)
        .await
        .unwrap_or_else(|_| {
            Err(Error::transient(format!(
                "the source did not answer the KILL of read connection {id} within {limit:?}"
            )))
        })
}

/// The shared KILL-and-confirm of `crate::io::bounded`; a connection still listed after
/// it is a transient failure here (the window's attempt fails and the read permit's
/// release stays unknown), as it always was for read connections.
async fn kill_and_wait(c: &mut Conn, id: u32) -> Result<()> {
    crate::io::bounded::kill_and_wait(c, "source read", id)
        .await
        .map_err(|e| match e {
            Error::Definite(d) => Error::transient(d.message),
            e => e,
        })
}
