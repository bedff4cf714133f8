//! The reader's I/O loop: connect, check lineage at D, stream from D, store records with D,
//! and on any transient failure start over from the stored D (DESIGN §3.6).
//!
//! Layout: this module holds the session loop, `store` the writer task, the batches and
//! the check of records already stored beyond D, `release` the re-append of a held XA
//! group at its `XA COMMIT`.
mod release;
mod store;
#[cfg(test)]
mod tests;

use release::release;
use store::{queue, Pending, Replay, Writer};

use crate::capture::assemble::{Capturer, Emit, Restored};
use crate::capture::SharedCaptureSet;
use crate::change::GroupEnd;
use crate::error::{from_mysql, DefiniteCode, Error, Result};
use crate::lineage;
use crate::log::{self, Position};
use crate::position::{Flavor, Gtid};
use admission::{retry_with, RetryError, RetryPolicy};
use futures_util::StreamExt;
use mysql_async::prelude::Queryable;
use sqlx::mysql::MySqlPool;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a reader runs. Every wait and retry is bounded.
#[derive(Clone, Debug)]
pub struct ReaderConfig {
    /// Name of the stream in the state store (one per source server).
    pub stream: String,
    /// mysql:// URL of the source, with a user holding SELECT, RELOAD, REPLICATION SLAVE,
    /// BINLOG MONITOR.
    pub source_url: String,
    /// The replica server_id this reader registers with; distinct per reader (two streams
    /// with one id kick each other, 4052).
    pub replica_server_id: u32,
    /// Schema of the control table on the source.
    pub control_schema: String,
    /// Changes per L record of a large group; fixed when the stream is created.
    pub chunk_changes: u32,
    /// Records per state-store transaction.
    pub batch_records: usize,
    /// Changes per state-store transaction (bounds memory whatever the group sizes).
    pub batch_changes: usize,
    /// Longest delay before read records are committed.
    pub flush_interval: Duration,
    /// Server heartbeat period while idle.
    pub heartbeat: Duration,
    /// A stream silent for this long is considered dead and reconnected.
    pub silence_timeout: Duration,
    /// While the stream is idle (heartbeats), re-check this often, on a short connection
    /// of its own, that the source still maps the stored D to its GTID: after a RESET
    /// MASTER the server's dump thread keeps sending heartbeats from the old, removed
    /// history and never the new events (measured on MariaDB 10.11), so without this a
    /// reset source would stall the stream silently instead of pausing it by name.
    pub lineage_probe: Duration,
    /// Connect and query timeout.
    pub connect_timeout: Duration,
    /// Consecutive failed sessions (no record stored) before the reader gives up.
    pub max_failures: u32,
    /// Record a progress record at most this often while other tables are written.
    pub progress_interval: Duration,
    /// The stream's capture lease token (`crate::capture::owner`): every L append checks
    /// it. None: unfenced (a reader that is alone by construction, e.g. tests).
    pub fence: Option<u64>,
}

impl ReaderConfig {
    /// Defaults for a source URL and stream name.
    pub fn new(stream: &str, source_url: &str, replica_server_id: u32) -> ReaderConfig {
        ReaderConfig {
            stream: stream.to_string(),
            source_url: source_url.to_string(),
            replica_server_id,
            control_schema: crate::control::DEFAULT_SCHEMA.to_string(),
            chunk_changes: 1000,
            batch_records: 64,
            batch_changes: 8000,
            flush_interval: Duration::from_millis(20),
            heartbeat: Duration::from_secs(1),
            silence_timeout: Duration::from_secs(10),
            lineage_probe: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            max_failures: 40,
            progress_interval: Duration::from_secs(1),
            fence: None,
        }
    }
}

/// A running reader task.
pub struct Reader {
    cancel: CancellationToken,
    handle: tokio::task::JoinHandle<Result<()>>,
}

impl Reader {
    /// Starts the reader in a task.
    pub fn start(pool: MySqlPool, cfg: ReaderConfig, set: SharedCaptureSet) -> Reader {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        let handle = tokio::spawn(async move { run(&pool, &cfg, &set, &c).await });
        Reader { cancel, handle }
    }

    /// True when the task ended (by a definite error or exhausted retries).
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Stops the reader after its current step and returns how it ended.
    pub async fn stop(self) -> Result<()> {
        self.cancel.cancel();
        self.join().await
    }

    /// Waits for the reader to end on its own.
    pub async fn join(self) -> Result<()> {
        match self.handle.await {
            Ok(r) => r,
            Err(e) => Err(Error::transient(format!("reader task failed: {e}"))),
        }
    }
}

/// Runs sessions until cancelled, a definite error, or `max_failures` sessions in a row
/// that stored nothing ([`sessions`]).
pub async fn run(
    pool: &MySqlPool,
    cfg: &ReaderConfig,
    set: &SharedCaptureSet,
    cancel: &CancellationToken,
) -> Result<()> {
    let session = || async {
        let progressed = Arc::new(AtomicBool::new(false));
        let r = session(pool, cfg, set, cancel, &progressed).await;
        (r, progressed.load(Ordering::Relaxed))
    };
    sessions(&cfg.stream, cfg.max_failures, cancel, &session).await
}

/// The retry bound of [`run`] over `session` (which says whether it stored anything).
///
/// Each streak of failed sessions is one bounded [`admission::retry_with`]: a definite
/// error is permanent, at most `max_failures` sessions, 50 ms doubling to 2 s between them,
/// ended by `cancel`. A session that stored something before it failed starts a new streak
/// in which it is the first failure (carried into the streak's first attempt), so the
/// budget counts failures in a row without progress.
async fn sessions<F, Fut>(
    stream: &str,
    max_failures: u32,
    cancel: &CancellationToken,
    session: &F,
) -> Result<()>
where
    F: Fn() -> Fut + Sync,
    Fut: std::future::Future<Output = (Result<()>, bool)> + Send,
{
    let policy = RetryPolicy::exponential(
        max_failures,
        Duration::from_millis(50),
        Duration::from_secs(2),
    );
    let failed = || Error::transient("capture session failed");
    let mut carried: Option<Error> = None;
    loop {
        let streak = retry_with(
            &mut carried,
            |carried, attempt| {
                Box::pin(async move {
                    if let Some(e) = carried.take() {
                        return Err(e);
                    }
                    let (r, progressed) = session().await;
                    streak_step(stream, r, progressed, attempt, carried)
                })
            },
            |e: &Error| !e.is_transient(),
            &policy,
            cancel,
        )
        .await;
        match streak {
            Ok(Streak::Ended) | Err(RetryError::Cancelled { .. }) => return Ok(()),
            // A budget of one: the failure that made progress is the last one.
            Ok(Streak::Progressed) if max_failures <= 1 => {
                return Err(carried.take().unwrap_or_else(failed))
            }
            Ok(Streak::Progressed) => {}
            Err(e) => return Err(e.into_last().unwrap_or_else(failed)),
        }
    }
}

/// How a streak of [`sessions`] ended without giving up.
#[derive(Debug)]
enum Streak {
    /// A session ended without an error (cancelled).
    Ended,
    /// A session failed after storing something: its error is carried into a new streak.
    Progressed,
}

/// What session attempt `attempt` of a streak that ended with `r` means for the streak.
fn streak_step(
    stream: &str,
    r: Result<()>,
    progressed: bool,
    attempt: u32,
    carried: &mut Option<Error>,
) -> Result<Streak> {
    match r {
        Ok(()) => Ok(Streak::Ended),
        Err(e @ Error::Definite(_)) => {
            tracing::error!(stream = %stream, error = %e, "capture stopped");
            Err(e)
        }
        Err(e) => {
            let failures = if progressed { 1 } else { attempt };
            tracing::warn!(stream = %stream, error = %e, failures, "capture session ended; resuming from the capture position");
            if progressed && attempt > 1 {
                *carried = Some(e);
                return Ok(Streak::Progressed);
            }
            Err(e)
        }
    }
}

async fn connect(cfg: &ReaderConfig) -> Result<mysql_async::Conn> {
    let opts = crate::tls::mysql_opts(&cfg.source_url).map_err(|e| {
        Error::definite(
            DefiniteCode::Usage,
            format!(
                "source URL {} is not valid: {e}",
                crate::redact::redact_url(&cfg.source_url)
            ),
        )
    })?;
    tokio::time::timeout(cfg.connect_timeout, mysql_async::Conn::new(opts))
        .await
        .map_err(|_| Error::transient("connecting to the source: timed out"))?
        .map_err(|e| from_mysql("connecting to the source", &e))
}

/// The current end of the source binlog as a group end (for a new stream).
async fn current_end(conn: &mut mysql_async::Conn, flavor: Flavor) -> Result<GroupEnd> {
    let pos = lineage::binlog_end(conn).await?;
    let gtid = match flavor {
        Flavor::Mariadb => {
            let state: Option<Option<String>> = conn
                .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (pos.file.as_str(), pos.pos))
                .await
                .map_err(|e| from_mysql("BINLOG_GTID_POS", &e))?;
            state
                .flatten()
                .unwrap_or_default()
                .split(',')
                .filter_map(|s| Gtid::parse(s.trim()))
                .max_by_key(|g| match g {
                    Gtid::Mariadb { seq, .. } | Gtid::Mysql { seq, .. } => *seq,
                })
        }
        Flavor::Mysql => None,
    };
    Ok(GroupEnd { pos, gtid })
}

async fn load_or_init(
    pool: &MySqlPool,
    cfg: &ReaderConfig,
    conn: &mut mysql_async::Conn,
) -> Result<Position> {
    if let Some(d) = log::load_position(pool, &cfg.stream).await? {
        return Ok(d);
    }
    let lin = lineage::read_lineage(conn).await?;
    let end = current_end(conn, lin.flavor).await?;
    log::init_position(pool, &cfg.stream, &lin, &end, cfg.chunk_changes).await
}

async fn restore(pool: &MySqlPool, d: &Position) -> Result<Restored> {
    let mut r = Restored::default();
    for (job, gen, kind, _) in log::markers_of(pool, &d.stream, d.restart_seq).await? {
        match kind {
            crate::control::IntentKind::B if !r.cancelled.contains(&(job, gen)) => {
                r.active.insert((job, gen));
            }
            crate::control::IntentKind::K => {
                r.active.remove(&(job, gen));
                r.cancelled.insert((job, gen));
            }
            _ => {}
        }
    }
    for p in log::pauses(pool, &d.stream).await? {
        if p.seq <= d.restart_seq {
            r.paused.insert((p.job, p.generation));
        }
    }
    // Holds change only in transactions that move D: they are exactly those open at D.
    for h in log::holds(pool, &d.stream).await? {
        r.held.insert(h.xid);
    }
    Ok(r)
}

/// Every table-generation with its B in L and no K must be in the set: the capturer keeps
/// only the rows of tables in its set, so a session started without one of them would
/// drop that table's changes without a trace (its L chain still whole). Such a session
/// does not start (transient: the owner of the set adds the table once it can load it).
fn check_set_covers(set: &SharedCaptureSet, r: &Restored, stream: &str) -> Result<()> {
    let set = set.read().unwrap_or_else(|p| p.into_inner());
    let missing = r.active.iter().find(|(job, g)| {
        !set.tables
            .iter()
            .any(|t| t.job == *job && t.generation == *g)
    });
    match missing {
        None => Ok(()),
        Some((job, g)) => Err(Error::transient(format!(
            "stream `{stream}`: job {job} {g} has its start marker (B) in the change log and no cancel marker (K) but is not in this reader's capture set; the reader does not start until it is (its rows would be lost)"
        ))),
    }
}

/// Turns `conn` (the session's own connection, which checked D's lineage) into the
/// binlog stream: one connection per session, never a second one opened while the first
/// is still closing (a server counts a closing connection against max_connections).
async fn open_stream(
    mut conn: mysql_async::Conn,
    cfg: &ReaderConfig,
    flavor: Flavor,
    d: &Position,
) -> Result<mysql_async::BinlogStream> {
    if flavor == Flavor::Mariadb {
        conn.query_drop("SET @mariadb_slave_capability=4")
            .await
            .map_err(|e| from_mysql("SET @mariadb_slave_capability", &e))?;
    }
    let ns = cfg.heartbeat.as_nanos().max(1_000_000);
    conn.query_drop(format!("SET @master_heartbeat_period={ns}"))
        .await
        .map_err(|e| from_mysql("SET @master_heartbeat_period", &e))?;
    // The server's own name: D's file carries the lineage epoch after a repoint.
    let at = d.restart.pos.server_pos();
    let file = at.file.into_bytes();
    let req = mysql_async::BinlogStreamRequest::new(cfg.replica_server_id)
        .with_filename(&file)
        .with_pos(at.pos);
    tokio::time::timeout(cfg.connect_timeout, conn.get_binlog_stream(req))
        .await
        .map_err(|_| Error::transient("requesting the binlog stream: timed out"))?
        .map_err(|e| from_mysql("requesting the binlog stream", &e))
}

/// What a session works with.
struct Ctx<'a> {
    pool: &'a MySqlPool,
    cfg: &'a ReaderConfig,
    stream: &'a str,
    progressed: &'a Arc<AtomicBool>,
}

async fn session(
    pool: &MySqlPool,
    cfg: &ReaderConfig,
    set: &SharedCaptureSet,
    cancel: &CancellationToken,
    progressed: &Arc<AtomicBool>,
) -> Result<()> {
    let mut conn = connect(cfg).await?;
    let d = load_or_init(pool, cfg, &mut conn).await?;
    if let Err(e) = lineage::check_restart_position(&mut conn, &d.lineage, &d.restart).await {
        return Err(stop_stream(pool, &d.stream, e).await);
    }
    log::stop::clear(pool, &d.stream).await?;
    log::check_tail(pool, &d).await?;
    let restored = restore(pool, &d).await?;
    check_set_covers(set, &restored, &d.stream)?;
    let mut cap = Capturer::new(
        d.lineage.digest(),
        &cfg.control_schema,
        set.clone(),
        d.chunk_changes,
        d.restart.clone(),
        restored,
    );
    let mut replay = Replay {
        next_seq: d.restart_seq.next(),
        upto: d.tail.seq,
    };
    let ctx = Ctx {
        pool,
        cfg,
        stream: &d.stream,
        progressed,
    };
    let mut stream = open_stream(conn, cfg, d.lineage.flavor, &d).await?;
    let mut writer = Writer::start(pool.clone(), d.clone(), progressed.clone(), cfg.fence);
    let mut batch = Pending::default();
    let mut last_commit = Instant::now();
    let mut probe_at = Instant::now() + cfg.lineage_probe;
    loop {
        let wait_until = batch
            .flush_at
            .unwrap_or_else(|| Instant::now() + cfg.silence_timeout);
        let next = tokio::select! {
            _ = cancel.cancelled() => {
                writer.send(batch.take()).await?.finish().await?;
                let _ = stream.close().await;
                return Ok(());
            }
            r = tokio::time::timeout_at(wait_until, stream.next()) => r,
        };
        let heartbeat = match next {
            Err(_) if batch.flush_at.is_some() => false,
            Err(_) => {
                writer.send(batch.take()).await?.finish().await?;
                return Err(Error::transient(format!(
                    "binlog stream silent for {:?} (no heartbeat); reconnecting",
                    cfg.silence_timeout
                )));
            }
            Ok(None) => {
                writer.send(batch.take()).await?.finish().await?;
                return Err(Error::transient(
                    "binlog stream ended (source shut down?); resuming from the capture position",
                ));
            }
            Ok(Some(Err(e))) => {
                writer.send(batch.take()).await?.finish().await?;
                return Err(stream_error(&e, &d));
            }
            Ok(Some(Ok(ev))) => {
                if let Err(e) = cap.on_event(&ev) {
                    return Err(writer.abandon(e).await);
                }
                ev.header().event_type_raw()
                    == mysql_async::binlog::EventType::HEARTBEAT_EVENT as u8
            }
        };
        if heartbeat && Instant::now() >= probe_at {
            probe_at = Instant::now() + cfg.lineage_probe;
            if let Err(e) = probe_lineage(&ctx, &d.lineage).await {
                writer.send(batch.take()).await?.finish().await?;
                return Err(stop_stream(pool, &d.stream, e).await);
            }
        }
        if heartbeat || last_commit.elapsed() >= cfg.progress_interval {
            cap.progress();
        }
        for em in cap.take() {
            match em {
                Emit::Record(entry) => {
                    if let Err(e) = queue(&ctx, &mut replay, &mut batch, entry).await {
                        return Err(writer.abandon(e).await);
                    }
                }
                Emit::Release(rel) => {
                    writer = release(&ctx, &mut replay, writer, &mut batch, &rel).await?;
                }
            }
        }
        let due = batch.flush_at.is_some_and(|t| Instant::now() >= t);
        if batch.full(cfg) || due || (heartbeat && !batch.items.is_empty()) {
            writer = writer.send(batch.take()).await?;
            last_commit = Instant::now();
        }
    }
}

/// Records a stop of the whole stream ([`log::stop`]) for an error that is one; returns
/// the error. A failure to record is logged: the reader stops with the error either way.
async fn stop_stream(pool: &MySqlPool, stream: &str, e: Error) -> Error {
    if let Error::Definite(d) = &e {
        if log::stop::stops_the_stream(d.code) {
            if let Err(w) = log::stop::record(pool, stream, d).await {
                tracing::warn!(%stream, error = %w, "cannot record the stream's stop");
            }
        }
    }
    e
}

/// The check every reconnect makes ([`lineage::check_restart_position`] of the stored D),
/// made while the stream runs: a definite finding (a reset or restored history) ends the
/// session with it, as a reconnect would; a transient one (the source briefly
/// unreachable) is logged and the stream goes on (it fails by itself if the source is
/// really gone).
async fn probe_lineage(ctx: &Ctx<'_>, recorded: &crate::position::Lineage) -> Result<()> {
    let checked = async {
        let Some(d) = log::load_position(ctx.pool, ctx.stream).await? else {
            return Ok(());
        };
        let mut conn = connect(ctx.cfg).await?;
        let checked = lineage::check_restart_position(&mut conn, recorded, &d.restart).await;
        let _ = conn.disconnect().await;
        checked
    };
    match checked.await {
        Err(e @ Error::Definite(_)) => Err(e),
        Err(e) => {
            tracing::warn!(stream = ctx.stream, error = %e, "lineage probe failed; the stream goes on");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

fn stream_error(e: &mysql_async::Error, d: &Position) -> Error {
    use crate::error::codes::*;
    match crate::error::mysql_server_code(e) {
        Some(ER_MASTER_FATAL_READING_BINLOG) => Error::definite(
            DefiniteCode::BinlogPurged,
            format!(
                "the source refused to stream from the capture position {}: {}; the position was purged or the \
                 history reset: re-install the captured tables",
                d.restart.pos,
                crate::redact::redact_text(&e.to_string())
            ),
        ),
        _ => from_mysql("reading the binlog stream", e),
    }
}
