//! The finish test world (formerly `bootstrap/tests/finish_support`): precondition state for
//! the fence/replay/audit tests, built through the ledger and the
//! kernel directly (not through the window runner): a captured source table, B in L, every
//! window sealed from a quiescent read between its LOW and HIGH, applied through T and
//! recorded in J and the range chain. The target has audit triggers counting business DML.
use crate::bf::table::activation::Finish;
use crate::bf::table::replay::{ReplayConfig, Scope};
use harness::Server;
use kernel::capture::{CaptureSet, CaptureTable, Reader, ReaderConfig};
use kernel::change::GroupEnd;
use kernel::control::{Intent, IntentKind};
use kernel::ids::{Attempt, Digest, Generation, JobId, PageNo, WindowId};
use kernel::log;
use kernel::range::KeyRange;
use kernel::schema::SealedSchema;
use kernel::value::{Row, SqlValue};
use ledger::apply::{self, Limits};
use ledger::chain::{self, ChainEntry};
use ledger::journal::Journal;
use ledger::lease::Lease;
use ledger::material::LocalDirStore;
use ledger::page::{self, PageKey, RawPage};
use ledger::record::{JournalRecord, Phase};
use ledger::registry::{Kind, Registry};
use ledger::seal::{self, WindowFacts};
use ledger::target::{self, TargetCtx};
use mysql_async::prelude::Queryable;
use sqlx::mysql::MySqlPool;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub const DDL: &str = "CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY, v VARCHAR(64) NULL, \
    n INT NOT NULL, amount DECIMAL(12,3) NULL, at DATETIME(6) NULL) ENGINE=InnoDB";

pub fn replica_id() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    3000 + (std::process::id() % 1000) * 50 + NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Everything one test's world holds; serialisable into a child process's environment.
#[derive(Clone, Debug)]
pub struct World {
    pub src_port: u16,
    pub tgt_port: u16,
    pub db: String,
    pub ctl: String,
    pub state_db: String,
    pub tdb: String,
    pub stream: String,
    pub dir: PathBuf,
    pub job: u64,
}

impl World {
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.src_port,
            self.tgt_port,
            self.db,
            self.ctl,
            self.state_db,
            self.tdb,
            self.stream,
            self.dir.display(),
            self.job
        )
    }

    pub fn decode(s: &str) -> World {
        let v: Vec<&str> = s.split('|').collect();
        World {
            src_port: v[0].parse().unwrap(),
            tgt_port: v[1].parse().unwrap(),
            db: v[2].into(),
            ctl: v[3].into(),
            state_db: v[4].into(),
            tdb: v[5].into(),
            stream: v[6].into(),
            dir: PathBuf::from(v[7]),
            job: v[8].parse().unwrap(),
        }
    }

    pub fn src_url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}", self.src_port)
    }
    pub fn src_url_db(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/{}", self.src_port, self.db)
    }
    pub fn tgt_url_db(&self, db: &str) -> String {
        format!("mysql://root@127.0.0.1:{}/{}", self.tgt_port, db)
    }
    pub fn state_url(&self) -> String {
        self.tgt_url_db(&self.state_db)
    }
    pub fn scope(&self) -> Scope {
        Scope {
            job: JobId(self.job),
            generation: Generation(1),
            stream: self.stream.clone(),
            source_db: self.db.clone(),
            source_table: "t".into(),
        }
    }
    pub fn store(&self) -> LocalDirStore {
        LocalDirStore::open(&self.dir).unwrap()
    }
    /// A connection pool of the source, as serve's (2 data slots).
    pub fn source_pool(&self) -> crate::bf::io::pool::ConnPool {
        let opts = mysql_async::Opts::from_url(&self.src_url()).unwrap();
        crate::bf::io::pool::ConnPool::of_opts(crate::bf::io::pool::Side::Source, opts, 2)
    }

    /// A connection pool of the target, as serve's (2 data slots).
    pub fn target_pool(&self) -> crate::bf::io::pool::ConnPool {
        let opts = self.target_opts();
        crate::bf::io::pool::ConnPool::of_opts(crate::bf::io::pool::Side::Target, opts, 2)
    }

    pub fn target_opts(&self) -> mysql_async::Opts {
        target::target_opts(&self.tgt_url_db(&self.tdb)).unwrap()
    }
    pub async fn pool(&self) -> MySqlPool {
        kernel::state::open(&self.state_url(), &Default::default())
            .await
            .unwrap()
    }
    pub async fn src_conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(mysql_async::Opts::from_url(&self.src_url_db()).unwrap())
            .await
            .unwrap()
    }
    pub async fn sealed(&self) -> SealedSchema {
        let mut c = self.src_conn().await;
        let facts = kernel::introspect::read_table(&mut c, &self.db, "t")
            .await
            .unwrap()
            .unwrap();
        kernel::introspect::seal(&facts).unwrap()
    }
    /// The target's schema (same columns, target db).
    pub async fn target_schema(&self) -> SealedSchema {
        let mut s = self.sealed().await;
        s.database = self.tdb.clone();
        s
    }
    pub async fn ctx(&self, token: u64) -> TargetCtx {
        let schema = self.target_schema().await;
        TargetCtx {
            job: JobId(self.job),
            generation: Generation(1),
            keyer: kernel::key::Keyer::of(&schema).unwrap(),
            schema,
            token,
            within: None,
        }
    }
    pub fn reader_cfg(&self) -> ReaderConfig {
        let mut c = ReaderConfig::new(&self.stream, &self.src_url(), replica_id());
        c.control_schema = self.ctl.clone();
        c.heartbeat = Duration::from_millis(200);
        c.silence_timeout = Duration::from_secs(5);
        c.max_failures = 200;
        c.chunk_changes = 1000;
        c
    }
    pub async fn start_reader(&self, pool: &MySqlPool) -> Reader {
        let mut set = CaptureSet::default();
        set.add(CaptureTable {
            job: JobId(self.job),
            generation: Generation(1),
            sealed: self.sealed().await,
        });
        Reader::start(pool.clone(), self.reader_cfg(), set.shared())
    }
    pub async fn lease(&self, pool: &MySqlPool) -> Lease {
        ledger::lease::acquire(
            pool,
            JobId(self.job),
            "finish-test",
            Duration::from_secs(600),
        )
        .await
        .unwrap()
    }
    /// Claims T for `token` (a new process takes a new lease token).
    pub async fn claim(&self, ctx: &TargetCtx) {
        let mut c = apply::connect(&self.target_opts()).await.unwrap();
        target::ensure_ledger_tables(&mut c, &self.tdb)
            .await
            .unwrap();
        target::claim(&mut c, ctx).await.unwrap();
        c.disconnect().await.unwrap();
    }
}

/// A fresh world: source table (with `rows` rows), control schema, state store, stream
/// initialised at the source's end, target table with audit triggers.
pub async fn world(src: &Server, tgt: &Server, prefix: &str, job: u64, rows: u64) -> World {
    let db = src.fresh_db(prefix);
    let ctl = src.fresh_db(&format!("{prefix}_ctl"));
    for sql in kernel::control::create_statements(&ctl) {
        src.sql(&sql);
    }
    src.sql_in(&db, DDL);
    if rows > 0 {
        src.sql_in(
            &db,
            &format!(
                "INSERT INTO t SELECT seq, concat('v', seq), 0, seq / 8, '2026-10-18 01:02:03.654321' FROM seq_1_to_{rows}"
            ),
        );
    }
    let state_db = tgt.fresh_db(&format!("{prefix}_st"));
    let tdb = tgt.fresh_db(&format!("{prefix}_tg"));
    tgt.sql_in(&tdb, DDL);
    tgt.sql_in(
        &tdb,
        "CREATE TABLE dml_audit (n BIGINT NOT NULL); INSERT INTO dml_audit VALUES (0);
         CREATE TRIGGER t_bi BEFORE INSERT ON t FOR EACH ROW UPDATE dml_audit SET n = n + 1;
         CREATE TRIGGER t_bu BEFORE UPDATE ON t FOR EACH ROW UPDATE dml_audit SET n = n + 1;
         CREATE TRIGGER t_bd BEFORE DELETE ON t FOR EACH ROW UPDATE dml_audit SET n = n + 1;",
    );
    let dir = std::env::temp_dir().join(format!("backfill-finish-{}-{db}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = World {
        src_port: src.port(),
        tgt_port: tgt.port(),
        db,
        ctl,
        state_db,
        tdb,
        stream: format!("s{job}"),
        dir,
        job,
    };
    let pool = w.pool().await;
    init_stream(&w, &pool).await;
    w
}

async fn init_stream(w: &World, pool: &MySqlPool) {
    let mut c = w.src_conn().await;
    let lin = kernel::lineage::read_lineage(&mut c).await.unwrap();
    let pos = kernel::lineage::binlog_end(&mut c).await.unwrap();
    let st: Option<Option<String>> = c
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (pos.file.as_str(), pos.pos))
        .await
        .unwrap();
    let gtid = st
        .flatten()
        .and_then(|s| s.split(',').next().and_then(kernel::position::Gtid::parse));
    log::init_position(pool, &w.stream, &lin, &GroupEnd { pos, gtid }, 1000)
        .await
        .unwrap();
}

/// Writes an intent and waits until L holds it.
pub async fn intent(
    w: &World,
    pool: &MySqlPool,
    kind: IntentKind,
    window: Option<u32>,
) -> log::MarkerSeen {
    let i = Intent::new(
        JobId(w.job),
        Generation(1),
        kind,
        window.map(WindowId),
        window.map(|_| Attempt(1)),
    );
    let mut c = w.src_conn().await;
    kernel::control::write_intent(&mut c, &w.ctl, &i)
        .await
        .unwrap();
    c.disconnect().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    log::wait_for_marker(pool, &w.stream, i.nonce, deadline)
        .await
        .unwrap()
}

/// B: written, in L, J CAPTURING(B) then WINDOWS. Returns B's marker.
pub async fn start(w: &World, pool: &MySqlPool, lease: &Lease) -> log::MarkerSeen {
    let j = Journal::new(pool.clone());
    Registry::new(pool.clone())
        .open_table(JobId(w.job), None)
        .await
        .unwrap();
    let b = intent(w, pool, IntentKind::B, None).await;
    let mut h = j
        .create(lease, JournalRecord::installed(JobId(w.job), Generation(1)))
        .await
        .unwrap();
    let mut n = h.record.clone();
    n.phase = Phase::Capturing;
    n.b = Some(b.end.pos.clone());
    h = j.append(lease, &h, n).await.unwrap();
    let mut n = h.record.clone();
    n.phase = Phase::Windows;
    j.append(lease, &h, n).await.unwrap();
    b
}

/// Rows of `t` matching `filter` in key order, read in a consistent-snapshot view with a
/// prepared statement (binary protocol), and the view's binlog snapshot position as L
/// names it.
async fn read_view(
    w: &World,
    pool: &MySqlPool,
    c: &mut mysql_async::Conn,
    filter: &str,
) -> (Vec<mysql_async::Row>, kernel::position::BinlogPos) {
    c.query_drop(
        "SET SESSION time_zone = '+00:00'; \
         SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
         START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
    )
    .await
    .unwrap();
    let st: Vec<(String, String)> = c
        .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
        .await
        .unwrap();
    let get = |n: &str| {
        st.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    let raw = kernel::position::BinlogPos::new(
        get("binlog_snapshot_file").expect("a binlog snapshot file"),
        get("binlog_snapshot_position")
            .and_then(|p| p.parse().ok())
            .expect("a binlog snapshot position"),
    );
    let snapshot = log::live_position(pool, &w.stream, c, raw).await.unwrap();
    let rows = c
        .exec(format!("SELECT * FROM t{filter} ORDER BY id"), ())
        .await
        .unwrap();
    c.query_drop("COMMIT").await.unwrap();
    (rows, snapshot)
}

/// One window, read quiescently between LOW and HIGH (no source writes meanwhile, so the
/// FINAL rows are the RAW rows), sealed, applied through T and completed in J. Every column
/// is read (`SELECT *`): columns a test adds after [`world`] must be NULL or plain text.
pub async fn window(
    w: &World,
    pool: &MySqlPool,
    lease: &Lease,
    ctx: &TargetCtx,
    wid: u32,
    range: KeyRange,
    page_rows: usize,
) {
    let j = Journal::new(pool.clone());
    let reg = Registry::new(pool.clone());
    let store = w.store();
    let sch = w.sealed().await;
    let low = intent(w, pool, IntentKind::Low, Some(wid)).await;
    let mut c = w.src_conn().await;
    let mut conds = Vec::new();
    if let Some(l) = &range.lower {
        conds.push(format!("id > {l}"));
    }
    if let Some(u) = &range.upper {
        conds.push(format!("id <= {u}"));
    }
    let filter = if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    };
    // As production reads (`bootstrap::table::window::read`): a REPEATABLE READ view in
    // UTC, its binlog snapshot position, rows over the binary protocol (a prepared read).
    let (rows, snapshot) = read_view(w, pool, &mut c, &filter).await;
    c.disconnect().await.unwrap();
    let rows: Vec<Row> = rows
        .into_iter()
        .map(|r| r.unwrap().into_iter().map(SqlValue::from).collect())
        .collect();
    let high = intent(w, pool, IntentKind::High, Some(wid)).await;
    let (job, g) = (JobId(w.job), Generation(1));
    let raw = RawPage {
        key: PageKey {
            job,
            generation: g,
            window: WindowId(wid),
            attempt: Attempt(1),
            page: PageNo(0),
        },
        rows: rows.clone(),
    };
    let rs = page::seal(&raw);
    seal::persist(&store, &reg, job, g, Kind::Raw, &rs.bytes)
        .await
        .unwrap();
    let facts = WindowFacts {
        job,
        generation: g,
        window: WindowId(wid),
        range: range.clone(),
        attempt: Attempt(1),
        low: low.end.pos.clone(),
        high: high.end.pos.clone(),
        snapshot: Some(snapshot),
        schema_fingerprint: sch.fingerprint(),
        raw_pages: vec![raw.page_ref_for(&rs)],
        // Production's fold digest of no change (`reconcile::net_effect`: an empty
        // blake3 hasher), which a quiescent window folds.
        folded_digest: Digest::of(b""),
        folded_changes: 0,
    };
    let sealed = seal::seal_window(&store, &reg, facts, rows, page_rows)
        .await
        .unwrap();
    let (_, pages) = seal::load_final_pages(&store, &sealed.manifest_hash)
        .await
        .unwrap();
    let mut tc = apply::connect(&w.target_opts()).await.unwrap();
    for b in &pages {
        apply::apply_page(&mut tc, ctx, b, Limits::default())
            .await
            .unwrap();
    }
    tc.disconnect().await.unwrap();
    let h = j.head(job, g).await.unwrap().unwrap();
    let e = ChainEntry {
        window: WindowId(wid),
        range,
        attempt: Attempt(1),
        manifest_hash: sealed.manifest_hash,
    };
    let mut next = h.record.clone();
    next.completed += 1;
    next.chain_root = chain::extend(next.chain_root, &e);
    j.complete_window(lease, &h, e, next).await.unwrap();
}

/// Business DML executions counted by the target's triggers.
/// The exactly-once oracle over both shared servers' binlogs from `marks` (taken before
/// [`world`] created the databases) for this world's table.
pub fn oracle(
    w: &World,
    marks: &(crate::oracle::Mark, crate::oracle::Mark),
) -> crate::oracle::Report {
    let (src, tgt) = (harness::shared_source(), harness::shared_target());
    let subject = crate::oracle::Subject {
        sdb: w.db.clone(),
        tdb: w.tdb.clone(),
        table: "t".into(),
        ctl: w.ctl.clone(),
        key: crate::oracle::primary_key(src, &w.db, "t"),
        job: w.job,
        generation: 1,
        applied: None,
    };
    let r = crate::oracle::check(src, &marks.0, tgt, &marks.1, &subject);
    eprintln!("exactly-once oracle of {}: {r}", w.db);
    r
}

pub fn dml_count(tgt: &Server, w: &World) -> u64 {
    tgt.sql_in(&w.tdb, "SELECT n FROM dml_audit")
        .trim()
        .parse()
        .unwrap()
}

/// Waits until D reaches the source's current binlog end (L caught up).
pub async fn catch_up(w: &World, pool: &MySqlPool) {
    let mut c = w.src_conn().await;
    let end = kernel::lineage::binlog_end(&mut c).await.unwrap();
    c.disconnect().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    log::wait_for_position(pool, &w.stream, &end, deadline)
        .await
        .unwrap();
}

/// A replay configuration with these batch bounds.
pub fn cfg(batch_rows: usize, batch_groups: usize) -> ReplayConfig {
    ReplayConfig {
        batch_rows,
        batch_groups,
        ..ReplayConfig::default()
    }
}

/// The plan of `windows` equal windows over 1..=n (as `prepared` in the finish tests).
pub fn plan_of(w: &World, n: u64, windows: u32) -> Vec<KeyRange> {
    let _ = w;
    let bounds: Vec<kernel::range::Bound> = (1..windows)
        .map(|i| kernel::range::Bound::of_i64((n as i64) * i64::from(i) / i64::from(windows)))
        .collect();
    KeyRange::plan_from_bounds(&bounds)
}

/// What a process holds to run the steps after the windows: the state store pool and its
/// capture reader, a new lease (a new token) with its claim of the target, J, the
/// material store, the plan and both servers' connection options.
pub struct Finishing {
    pub pool: MySqlPool,
    pub reader: Reader,
    pub lease: Lease,
    pub ctx: TargetCtx,
    pub journal: Journal,
    pub store: LocalDirStore,
    pub plan: Vec<KeyRange>,
    pub source: crate::bf::io::pool::ConnPool,
    pub target: crate::bf::io::pool::ConnPool,
    pub fingerprint: Digest,
}

impl Finishing {
    /// Opens the pool, starts the reader, takes the lease and claims the target for `plan`.
    pub async fn open(w: &World, plan: Vec<KeyRange>) -> Finishing {
        let pool = w.pool().await;
        let reader = w.start_reader(&pool).await;
        let lease = w.lease(&pool).await;
        let ctx = w.ctx(lease.token).await;
        w.claim(&ctx).await;
        Finishing {
            journal: Journal::new(pool.clone()),
            store: w.store(),
            plan,
            source: w.source_pool(),
            target: w.target_pool(),
            fingerprint: w.sealed().await.fingerprint(),
            pool,
            reader,
            lease,
            ctx,
        }
    }

    /// The steps after the windows with `replay` (no field comparison, F within 60 s).
    pub fn finish<'a>(&'a self, w: &'a World, replay: ReplayConfig) -> Finish<'a> {
        Finish {
            pool: &self.pool,
            scope: w.scope(),
            journal: &self.journal,
            lease: &self.lease,
            store: &self.store,
            plan: &self.plan,
            schema_fingerprint: self.fingerprint,
            source: &self.source,
            control_schema: &w.ctl,
            target: &self.target,
            ctx: &self.ctx,
            chain: None,
            replay,
            marker_wait: Duration::from_secs(60),
            fields: None,
        }
    }
}

/// What a process does: the steps after the windows, with this configuration.
pub async fn finish_steps(
    w: &World,
    n: u64,
    windows: u32,
    replay_cfg: ReplayConfig,
    stream_for: Duration,
) {
    let fin = Finishing::open(w, plan_of(w, n, windows)).await;
    let f = fin.finish(w, replay_cfg);
    let a = f.activate().await.unwrap();
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(stream_for).await;
        c2.cancel();
    });
    f.stream(a.b.seq, cancel).await.unwrap();
    stopper.await.unwrap();
    fin.reader.stop().await.unwrap();
    fin.pool.close().await;
}
