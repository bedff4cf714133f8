//! The one support module of kernel's test binaries (`capture`, `crash`): a test's
//! world ([`Env`]), capture runs, L's content, the server's own view of a table, one
//! [`wait_for`], the capture-probe process ([`probe`]) and the XA workload ([`xa`]).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod probe;
pub mod xa;

use harness::Server;
use kernel::capture::{CaptureSet, CaptureTable, ReaderConfig, SharedCaptureSet};
use kernel::control::{Intent, IntentKind};
use kernel::ids::{Generation, JobId};
use kernel::log::{self, RecordBody, StoredRecord};
use kernel::schema::SealedSchema;
use kernel::value::SqlValue;
use sqlx::mysql::MySqlPool;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Polls `probe` every `every` until it returns a value; panics naming `what` when
/// `within` has passed without one.
pub async fn wait_for<T, F, Fut>(what: &str, within: Duration, every: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {within:?}"
        );
        tokio::time::sleep(every).await;
    }
}

/// One test's world: a source database and control schema, a state store schema.
pub struct Env {
    pub src: &'static Server,
    pub db: String,
    pub ctl: String,
    pub state_url: String,
    pub pool: MySqlPool,
    pub stream: String,
}

pub fn leak(s: Server) -> &'static Server {
    Box::leak(Box::new(s))
}

/// A distinct replica server_id per reader in this process.
pub fn replica_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    1000 + (std::process::id() % 1000) * 100 + NEXT.fetch_add(1, Ordering::Relaxed)
}

pub async fn env_on(src: &'static Server, target: &'static Server, prefix: &str) -> Env {
    let db = src.fresh_db(prefix);
    let ctl = src.fresh_db(&format!("{prefix}_ctl"));
    for sql in kernel::control::create_statements(&ctl) {
        src.sql(&sql);
    }
    let state = target.fresh_db(&format!("{prefix}_state"));
    let state_url = target.url_db(&state);
    let pool = kernel::state::open(&state_url, &Default::default())
        .await
        .unwrap();
    Env {
        src,
        db,
        ctl,
        state_url,
        pool,
        stream: "src".into(),
    }
}

pub async fn env(prefix: &str) -> Env {
    env_on(harness::shared_source(), harness::shared_target(), prefix).await
}

impl Env {
    pub fn cfg(&self) -> ReaderConfig {
        let mut c = ReaderConfig::new(&self.stream, &self.src.url(), replica_id());
        c.control_schema = self.ctl.clone();
        c.heartbeat = Duration::from_millis(200);
        c.silence_timeout = Duration::from_secs(5);
        c.max_failures = 200;
        c
    }

    pub async fn conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(mysql_async::Opts::from_url(&self.src.url_db(&self.db)).unwrap())
            .await
            .unwrap()
    }

    pub async fn sealed(&self, table: &str) -> SealedSchema {
        let mut c = self.conn().await;
        let facts = kernel::introspect::read_table(&mut c, &self.db, table)
            .await
            .unwrap()
            .unwrap();
        kernel::introspect::seal(&facts).unwrap()
    }

    pub async fn set_for(&self, tables: &[(u64, &str)]) -> SharedCaptureSet {
        let mut set = CaptureSet::default();
        for (job, t) in tables {
            set.add(CaptureTable {
                job: JobId(*job),
                generation: Generation(1),
                sealed: self.sealed(t).await,
            });
        }
        set.shared()
    }

    /// Writes an intent and returns it.
    pub async fn intent(&self, job: u64, kind: IntentKind) -> Intent {
        let i = Intent::new(JobId(job), Generation(1), kind, None, None);
        let mut c = self.conn().await;
        kernel::control::write_intent(&mut c, &self.ctl, &i)
            .await
            .unwrap();
        i
    }

    pub async fn wait_marker(&self, i: &Intent, secs: u64) -> log::MarkerSeen {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        log::wait_for_marker(&self.pool, &self.stream, i.nonce, deadline)
            .await
            .unwrap()
    }

    /// Creates D at the source's current end (before any B).
    pub async fn init_stream(&self, chunk: u32) -> log::Position {
        self.init_stream_named(&self.pool, &self.stream, chunk)
            .await
    }

    pub async fn init_stream_named(
        &self,
        pool: &MySqlPool,
        stream: &str,
        chunk: u32,
    ) -> log::Position {
        let mut c = self.conn().await;
        let lin = kernel::lineage::read_lineage(&mut c).await.unwrap();
        let pos = kernel::lineage::binlog_end(&mut c).await.unwrap();
        let st: Option<Option<String>> = mysql_async::prelude::Queryable::exec_first(
            &mut c,
            "SELECT BINLOG_GTID_POS(?, ?)",
            (pos.file.as_str(), pos.pos),
        )
        .await
        .unwrap();
        let gtid = st
            .flatten()
            .and_then(|s| s.split(',').next().and_then(kernel::position::Gtid::parse));
        let end = kernel::change::GroupEnd { pos, gtid };
        log::init_position(pool, stream, &lin, &end, chunk)
            .await
            .unwrap()
    }
}

/// Every record of a stream, verified.
pub async fn all_records(pool: &MySqlPool, stream: &str) -> Vec<StoredRecord> {
    let mut out = Vec::new();
    let mut after = log::LSeq::ZERO;
    loop {
        let page = log::read_range(pool, stream, after, log::LSeq::MAX, 1000)
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = last.seq;
        out.extend(page);
    }
    out
}

/// (kind, start, chunk, end, digest) of every record but progress records (whose
/// placement depends on timing): the identity of L's content, held XA chunks included.
pub fn chunk_identities(recs: &[StoredRecord]) -> Vec<String> {
    recs.iter()
        .filter(|r| !matches!(r.record.body, RecordBody::Progress))
        .map(|r| {
            let kind = match r.record.body {
                RecordBody::Chunk(_) => "",
                RecordBody::Held(_) => "held ",
                _ => "dropped ",
            };
            format!(
                "{kind}{} #{} -> {:?} {}",
                r.record.start,
                r.record.chunk,
                r.record.end.as_ref().map(|e| e.pos.to_string()),
                r.body_digest
            )
        })
        .collect()
}

/// Runs a reader on `stream` until L holds `nonce`; with `restarts`, stops and restarts it
/// at random moments on the way. Returns the number of sessions.
pub async fn run_until(
    e: &Env,
    stream: &str,
    set: &SharedCaptureSet,
    batch: usize,
    restarts: bool,
    nonce: kernel::ids::Nonce,
) -> u32 {
    let mut cfg = e.cfg();
    cfg.stream = stream.to_string();
    cfg.batch_records = batch;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut n = 0;
    loop {
        cfg.replica_server_id = replica_id();
        let reader = kernel::capture::Reader::start(e.pool.clone(), cfg.clone(), set.clone());
        if restarts {
            let ms = 20 + rand::random::<u64>() % 200;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        } else {
            log::wait_for_marker(&e.pool, stream, nonce, deadline)
                .await
                .unwrap();
        }
        reader.stop().await.unwrap();
        n += 1;
        if log::marker(&e.pool, stream, nonce).await.unwrap().is_some() {
            return n;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "capture did not reach the marker"
        );
    }
}

/// An uninterrupted in-process capture of `tables` on `stream` of `pool` until L holds
/// `nonce` (by `deadline`): the reference a crashed capture is compared with.
pub async fn clean_capture(
    e: &Env,
    pool: &MySqlPool,
    stream: &str,
    tables: &[(u64, &str)],
    nonce: kernel::ids::Nonce,
    deadline: tokio::time::Instant,
) {
    let mut cfg = e.cfg();
    cfg.stream = stream.into();
    let reader = kernel::capture::Reader::start(pool.clone(), cfg, e.set_for(tables).await);
    log::wait_for_marker(pool, stream, nonce, deadline)
        .await
        .unwrap();
    reader.stop().await.unwrap();
}

/// Folds every change of `table` in L onto `base` by primary key (column `pk`).
pub fn fold(
    recs: &[StoredRecord],
    table: &str,
    pk: usize,
    mut base: BTreeMap<i64, Vec<SqlValue>>,
) -> BTreeMap<i64, Vec<SqlValue>> {
    for r in recs {
        let RecordBody::Chunk(c) = &r.record.body else {
            continue;
        };
        for ch in c.changes.iter().filter(|c| c.id.table == table) {
            if let Some(b) = &ch.before {
                base.remove(&b[pk].as_key().unwrap());
            }
            if let Some(a) = &ch.after {
                base.insert(a[pk].as_key().unwrap(), a.clone());
            }
        }
    }
    base
}

/// Text form of a value as the mysql CLI prints it (for simple types).
pub fn text(v: &SqlValue) -> String {
    match v {
        SqlValue::Null => "NULL".into(),
        SqlValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        SqlValue::Int(i) => i.to_string(),
        SqlValue::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}

/// The table as the CLI prints it, keyed by the first column.
pub fn cli_rows(src: &Server, db: &str, sql: &str) -> BTreeMap<i64, Vec<String>> {
    src.sql_in(db, &format!("SET NAMES utf8mb4; {sql}"))
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let cols: Vec<String> = l.split('\t').map(str::to_string).collect();
            (cols[0].parse().unwrap(), cols)
        })
        .collect()
}

pub fn as_text(m: &BTreeMap<i64, Vec<SqlValue>>) -> BTreeMap<i64, Vec<String>> {
    m.iter()
        .map(|(k, v)| (*k, v.iter().map(text).collect()))
        .collect()
}
