//! The window/serve test world (formerly `bootstrap/tests/window_support`): a source table on the shared source, an empty target
//! and the state store on the shared target, install + start, and evidence checks.
use crate::bf::install::{install, InstallRequest, TableName};
use crate::bf::table::window::WindowHooks;
use crate::init_tracing;
use crate::serving::{self as serve, ServeConfig};
use harness::Server;
use kernel::ids::{Generation, JobId};
use kernel::log::LSeq;
use kernel::value::{Row, SqlValue};
use ledger::check;
use ledger::journal::Journal;
use ledger::material::LocalDirStore;
use ledger::registry::Registry;
use mysql_async::prelude::Queryable;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The test table: a key, an integer that writers bump, a text.
pub const DDL: &str = "CREATE TABLE t (
    id BIGINT NOT NULL PRIMARY KEY,
    k INT NOT NULL,
    v VARCHAR(64) NULL
) ENGINE=InnoDB";

/// One test's world.
pub struct Case {
    pub source: &'static Server,
    pub target: &'static Server,
    pub sdb: String,
    pub tdb: String,
    pub ctl: String,
    pub state_db: String,
    pub data: tempfile::TempDir,
    pub job: JobId,
    pub generation: Generation,
    pub pool: sqlx::MySqlPool,
}

impl Case {
    /// Creates and fills `sdb.t` with ids 1..=rows (k = id, v = 'v<id>'), an empty target
    /// with an audit trigger counting inserts, installs with the given sizes, starts it.
    pub async fn new(prefix: &str, rows: i64, window_rows: u64, page_rows: u64) -> Case {
        let c = Case::unstarted(prefix, rows, window_rows, page_rows).await;
        crate::bf::store::commands::start(&c.pool, c.job)
            .await
            .unwrap();
        c
    }

    /// Like [`Case::new`] without the start command.
    pub async fn unstarted(prefix: &str, rows: i64, window_rows: u64, page_rows: u64) -> Case {
        Case::unstarted_on(
            harness::shared_source(),
            prefix,
            rows,
            window_rows,
            page_rows,
        )
        .await
    }

    /// Like [`Case::new`] on a given source server (e.g. a private one).
    pub async fn on(
        source: &'static Server,
        prefix: &str,
        rows: i64,
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        let c = Case::unstarted_on(source, prefix, rows, window_rows, page_rows).await;
        crate::bf::store::commands::start(&c.pool, c.job)
            .await
            .unwrap();
        c
    }

    /// Like [`Case::unstarted`] on a given source server.
    pub async fn unstarted_on(
        source: &'static Server,
        prefix: &str,
        rows: i64,
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        init_tracing();
        let target = harness::shared_target();
        let sdb = source.fresh_db(&format!("{prefix}_s"));
        let ctl = source.fresh_db(&format!("{prefix}_c"));
        let tdb = target.fresh_db(&format!("{prefix}_t"));
        source.sql_in(&sdb, DDL);
        target.sql_in(&tdb, DDL);
        fill(source, &sdb, rows);
        let state_db = format!("{tdb}_state");
        let mut req = InstallRequest::new(
            target.url_db(&state_db),
            source.url(),
            TableName::new(&sdb, "t"),
            target.url(),
            TableName::new(&tdb, "t"),
        );
        req.window_rows = window_rows;
        req.page_rows = page_rows;
        req.control_schema = ctl.clone();
        let done = install(&req)
            .await
            .unwrap_or_else(|e| panic!("install: {e}"));
        // The audit counter is created after install (install refuses a target with triggers).
        add_audit_triggers(target, &tdb);
        let pool = kernel::state::open(&target.url_db(&state_db), &Default::default())
            .await
            .unwrap();
        Case {
            source,
            target,
            sdb,
            tdb,
            ctl,
            state_db,
            data: tempfile::tempdir().unwrap(),
            job: done.job_id,
            generation: done.generation,
            pool,
        }
    }

    pub fn state_url(&self) -> String {
        self.target.url_db(&self.state_db)
    }

    /// A serve configuration for this case that exits when idle.
    pub fn serve_cfg(&self) -> ServeConfig {
        let mut c = ServeConfig::new(&self.state_url(), self.data.path().to_path_buf());
        c.exit_when_idle = true;
        c.poll = Duration::from_millis(100);
        c.reader = |r| {
            r.heartbeat = Duration::from_millis(200);
            r.silence_timeout = Duration::from_secs(5);
        };
        c.owner = format!("test-{}", std::process::id());
        c
    }

    /// Runs serve in-process until idle; returns this job's outcome.
    pub async fn serve(&self, hooks: Option<Arc<dyn WindowHooks>>) -> String {
        let mut cfg = self.serve_cfg();
        cfg.hooks = hooks;
        let out = tokio::time::timeout(
            Duration::from_secs(120),
            serve::serve(cfg, CancellationToken::new()),
        )
        .await
        .expect("serve did not become idle within 120 s")
        .unwrap_or_else(|e| panic!("serve: {e}"));
        out.get(&self.job).cloned().unwrap_or_default()
    }

    pub async fn source_conn(&self) -> mysql_async::Conn {
        mysql_async::Conn::new(mysql_async::Opts::from_url(&self.source.url_db(&self.sdb)).unwrap())
            .await
            .unwrap()
    }

    /// Business DML row executions on the target table counted by its audit triggers:
    /// inserts, updates and deletes together (a row applied twice shows, whether as a
    /// second insert or as an update or delete).
    pub fn audit_count(&self) -> u64 {
        let (i, u, d) = self.audit_ops();
        i + u + d
    }

    /// (inserts, updates, deletes) counted by the target table's audit triggers.
    pub fn audit_ops(&self) -> (u64, u64, u64) {
        audit_ops(self.target, &self.tdb)
    }

    pub fn target_count(&self) -> u64 {
        self.target
            .sql_in(&self.tdb, "SELECT COUNT(*) FROM t")
            .parse()
            .unwrap()
    }

    pub fn journal(&self) -> Journal {
        Journal::new(self.pool.clone())
    }

    /// J's head record.
    pub async fn head(&self) -> ledger::record::JournalRecord {
        self.journal()
            .head(self.job, self.generation)
            .await
            .unwrap()
            .expect("J exists")
            .record
    }

    /// Installs and starts a second table of the same shape with `rows` rows (see
    /// [`Case::second_table`]); returns its job and generation.
    pub async fn start_second_table(&self, rows: u64) -> (JobId, Generation) {
        let done = install(&self.second_table(rows)).await.unwrap();
        crate::bf::store::commands::start(&self.pool, done.job_id)
            .await
            .unwrap();
        (done.job_id, done.generation)
    }

    /// A serve configuration that keeps STREAMING (no exit when idle), finishes with the
    /// default replay and has ONE target-write permit.
    pub fn streaming_cfg_one_write(&self) -> ServeConfig {
        let mut cfg = self.serve_cfg();
        cfg.exit_when_idle = false;
        cfg.finish = Some(crate::bf::table::replay::ReplayConfig::default());
        cfg.limits.target_writes = 1;
        cfg
    }

    /// Waits (at most 120 s) until this case's table and each of `others` are STREAMING.
    pub async fn wait_streaming(&self, others: &[(JobId, Generation)]) {
        let j = self.journal();
        let all: Vec<_> = [(self.job, self.generation)]
            .into_iter()
            .chain(others.iter().copied())
            .collect();
        let until = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            let mut phases = Vec::new();
            for (job, g) in &all {
                phases.push(j.head(*job, *g).await.unwrap().map(|h| h.record.phase));
            }
            if phases
                .iter()
                .all(|p| *p == Some(ledger::record::Phase::Streaming))
            {
                return;
            }
            assert!(
                std::time::Instant::now() < until,
                "not all STREAMING: {phases:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// J's head record, if J exists yet.
    pub async fn head_opt(&self) -> Option<ledger::record::JournalRecord> {
        self.journal()
            .head(self.job, self.generation)
            .await
            .unwrap()
            .map(|h| h.record)
    }

    pub async fn plan(&self) -> Vec<kernel::range::KeyRange> {
        crate::bf::store::jobs::load_plan(&self.pool, self.job)
            .await
            .unwrap()
            .ranges
    }

    /// J + range chain, materials, and T credentials all agree (ledger check functions).
    pub async fn assert_evidence_agrees(&self) {
        let plan = self.plan().await;
        let j = self.journal();
        let f = check::journal_and_chain_in(&j, self.job, self.generation, &plan, true)
            .await
            .unwrap();
        assert_eq!(f, Vec::<String>::new(), "J/range chain findings");
        let store = LocalDirStore::open(self.data.path()).unwrap();
        let reg = Registry::new(self.pool.clone());
        let f = check::materials_in(&reg, &store, self.job, self.generation)
            .await
            .unwrap();
        assert_eq!(f, Vec::<String>::new(), "material findings");
        let manifests = self.manifests(&store).await;
        let mut c = self.target_conn().await;
        let creds = ledger::target::page_credentials(&mut c, &self.tctx().await)
            .await
            .unwrap();
        assert_eq!(
            check::t_credentials(&creds, &manifests),
            Vec::<String>::new()
        );
        let pages: usize = manifests.iter().map(|m| m.final_pages.len()).sum();
        assert_eq!(creds.len(), pages, "one credential per FINAL page");
    }

    /// The manifests of the range chain, in window order.
    pub async fn manifests(&self, store: &LocalDirStore) -> Vec<ledger::manifest::WindowManifest> {
        let chain = self
            .journal()
            .chain(self.job, self.generation)
            .await
            .unwrap();
        chain
            .iter()
            .map(|(e, _)| {
                ledger::seal::load_final_pages(store, &e.manifest_hash)
                    .unwrap()
                    .0
            })
            .collect()
    }

    /// (window, attempt, manifest hash) of the range chain.
    pub async fn chain(&self) -> Vec<(u32, u32, kernel::ids::Digest)> {
        self.journal()
            .chain(self.job, self.generation)
            .await
            .unwrap()
            .iter()
            .map(|(e, _)| (e.window.0, e.attempt.0, e.manifest_hash))
            .collect()
    }

    pub async fn tctx(&self) -> ledger::target::TargetCtx {
        let mut schema = crate::bf::store::jobs::load_schema(&self.pool, self.job)
            .await
            .unwrap();
        schema.database = self.tdb.clone();
        ledger::target::TargetCtx {
            job: self.job,
            generation: self.generation,
            schema,
            token: 0,
        }
    }

    pub async fn target_conn(&self) -> mysql_async::Conn {
        ledger::apply::connect(&ledger::target::target_opts(&self.target.url()).unwrap())
            .await
            .unwrap()
    }

    /// The FINAL rows of every sealed window, by key.
    pub async fn final_rows(&self) -> Vec<BTreeMap<i64, Row>> {
        let store = LocalDirStore::open(self.data.path()).unwrap();
        let chain = self
            .journal()
            .chain(self.job, self.generation)
            .await
            .unwrap();
        chain
            .iter()
            .map(|(e, _)| {
                let (_, pages) = ledger::seal::load_final_pages(&store, &e.manifest_hash).unwrap();
                pages
                    .iter()
                    .flat_map(|b| ledger::page::FinalPage::decode(b).unwrap().rows)
                    .map(|r| (r[0].as_key().unwrap(), r))
                    .collect()
            })
            .collect()
    }

    /// Asserts that the target table holds exactly the source table's rows, compared by the
    /// two servers alone (nothing decoded by the pipeline or by this crate): `CHECKSUM
    /// TABLE` and [`crate::table_digest`] (per-row `HEX()` of every column, in key order,
    /// hashed by the server) on each side; on a difference, the keys that differ.
    pub fn assert_target_equals_source(&self) {
        let cols = ["id", "k", "v"];
        let s = crate::table_digest(self.source, &self.sdb, "t", "id", &cols);
        let t = crate::table_digest(self.target, &self.tdb, "t", "id", &cols);
        if s != t {
            let (a, b) = (
                hex_rows(self.source, &self.sdb),
                hex_rows(self.target, &self.tdb),
            );
            let differ: Vec<&i64> = a
                .keys()
                .chain(b.keys())
                .filter(|k| a.get(k) != b.get(k))
                .take(20)
                .collect();
            panic!("target differs from source (count, digest {t} vs {s}); keys {differ:?}");
        }
        assert_eq!(
            crate::checksum(self.target, &self.tdb, "t"),
            crate::checksum(self.source, &self.sdb, "t"),
            "CHECKSUM TABLE of target and source"
        );
    }

    /// Every change of the source table in L from B on, with the L seq of its record,
    /// in L order; and the seq of each window's HIGH marker.
    pub async fn l_changes(&self) -> Vec<(LSeq, kernel::change::Change)> {
        let stream = crate::bf::store::jobs::stream_name(&self.source_identity().await);
        let mut out = Vec::new();
        let mut after = LSeq::ZERO;
        loop {
            let recs = kernel::log::table_records(
                &self.pool,
                &stream,
                &self.sdb,
                "t",
                after,
                LSeq::MAX,
                500,
            )
            .await
            .unwrap();
            let Some(last) = recs.last() else { break };
            after = last.seq;
            for r in recs {
                if let kernel::log::RecordBody::Chunk(c) = r.record.body {
                    for ch in c.changes {
                        if ch.id.table == "t" && ch.id.schema == self.sdb {
                            out.push((r.seq, ch));
                        }
                    }
                }
            }
        }
        out
    }

    pub async fn source_identity(&self) -> String {
        crate::bf::store::jobs::load_job(&self.pool, self.job)
            .await
            .unwrap()
            .source
            .identity
    }

    /// The L seq of the marker ending at `pos` (the HIGH of a manifest).
    pub async fn seq_at(&self, pos: &kernel::position::BinlogPos) -> u64 {
        let stream = crate::bf::store::jobs::stream_name(&self.source_identity().await);
        sqlx::query_scalar(
            "SELECT seq FROM capture_marker WHERE stream = ? AND end_file = ? AND end_pos = ?",
        )
        .bind(stream)
        .bind(&pos.file)
        .bind(pos.pos)
        .fetch_one(&self.pool)
        .await
        .unwrap()
    }
}

/// Audit triggers on `db.t` logging every business DML row execution by kind, INSERT,
/// UPDATE and DELETE, with its key (created after install, which refuses a target with
/// triggers). A log table without a key, not a counter row: concurrent writers of one
/// table (the apply streams of one batch) never wait for each other on it.
pub fn add_audit_triggers(server: &Server, db: &str) {
    server.sql_in(
        db,
        "CREATE TABLE audit_log (id BIGINT NOT NULL, op CHAR(1) NOT NULL);
         CREATE TRIGGER t_ins AFTER INSERT ON t FOR EACH ROW INSERT INTO audit_log VALUES (NEW.id, 'I');
         CREATE TRIGGER t_upd AFTER UPDATE ON t FOR EACH ROW INSERT INTO audit_log VALUES (NEW.id, 'U');
         CREATE TRIGGER t_del AFTER DELETE ON t FOR EACH ROW INSERT INTO audit_log VALUES (OLD.id, 'D');",
    );
}

/// (inserts, updates, deletes) logged by [`add_audit_triggers`] on `db.t`.
pub fn audit_ops(server: &Server, db: &str) -> (u64, u64, u64) {
    let out = server.sql_in(
        db,
        "SELECT COUNT(op = 'I' OR NULL), COUNT(op = 'U' OR NULL), COUNT(op = 'D' OR NULL) \
         FROM audit_log",
    );
    let v: Vec<u64> = out.split('\t').map(|x| x.trim().parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

/// Inserts ids 1..=rows in batches.
pub fn fill(source: &Server, db: &str, rows: i64) {
    let mut from = 1;
    while from <= rows {
        let to = (from + 9_999).min(rows);
        source.sql_in(
            db,
            &format!(
                "INSERT INTO t (id, k, v) SELECT seq, seq, CONCAT('v', seq) FROM seq_{from}_to_{to}"
            ),
        );
        from = to + 1;
    }
}

/// Replays L changes by key and full image over `state` (the test's own, independent of
/// the pipeline's fold): the table's state after the last change applied.
pub fn replay(state: &mut BTreeMap<i64, Row>, c: &kernel::change::Change) {
    if let Some(b) = &c.before {
        state.remove(&b[0].as_key().unwrap());
    }
    if let Some(a) = &c.after {
        state.insert(a[0].as_key().unwrap(), a.clone());
    }
}

/// The table state right after `fill(rows)`, as the binary protocol reads it.
pub fn filled_state(rows: i64) -> BTreeMap<i64, Row> {
    (1..=rows)
        .map(|i| {
            (
                i,
                vec![
                    SqlValue::Int(i),
                    SqlValue::Int(i),
                    SqlValue::Bytes(format!("v{i}").into_bytes()),
                ],
            )
        })
        .collect()
}

/// For every sealed window: FINAL equals the range's state at its HIGH, computed by
/// replaying L (from B, over the filled state) by key and full image up to HIGH's record.
pub async fn assert_final_is_state_at_high(c: &Case, initial: &BTreeMap<i64, Row>) {
    let store = LocalDirStore::open(c.data.path()).unwrap();
    let manifests = c.manifests(&store).await;
    let finals = c.final_rows().await;
    let changes = c.l_changes().await;
    let mut state = initial.clone();
    let mut applied = 0;
    let mut order: Vec<(u64, usize)> = Vec::new();
    for (i, m) in manifests.iter().enumerate() {
        order.push((c.seq_at(&m.high).await, i));
    }
    order.sort();
    for (high_seq, i) in order {
        while applied < changes.len() && changes[applied].0 .0 <= high_seq {
            replay(&mut state, &changes[applied].1);
            applied += 1;
        }
        let m = &manifests[i];
        let expect: BTreeMap<i64, Row> = state
            .iter()
            .filter(|(k, _)| m.range.contains(**k))
            .map(|(k, v)| (*k, v.clone()))
            .collect();
        assert_eq!(
            finals[i].len(),
            expect.len(),
            "window {} {}: FINAL row count differs from the state at HIGH",
            m.window,
            m.range
        );
        assert!(
            finals[i] == expect,
            "window {} {}: FINAL differs from the state at HIGH",
            m.window,
            m.range
        );
    }
}

/// The target holds exactly the FINAL rows of every window (windows alone; F and replay
/// bring it to the source's state later). The target's rows are rendered by its server
/// (`HEX()` per column, [`hex_rows`]), the FINAL rows by [`hex_row`]: the comparison does
/// not read the target through the pipeline's value decoding.
pub async fn assert_target_is_finals(c: &Case) {
    let mut all = BTreeMap::new();
    for f in c.final_rows().await {
        all.extend(f.iter().map(|(k, r)| (*k, hex_row(&r[1..]))));
    }
    let target = hex_rows(c.target, &c.tdb);
    if target != all {
        let differ: Vec<&i64> = all
            .keys()
            .chain(target.keys())
            .filter(|k| all.get(k) != target.get(k))
            .take(20)
            .collect();
        panic!(
            "target ({} rows) differs from the union of FINAL pages ({} rows): keys {differ:?}",
            target.len(),
            all.len()
        );
    }
}

/// The rows of `db.t` (columns id, k, v) by key, each rendered by the server as
/// `HEX(k),HEX(v)` with `NULL` for a NULL.
pub fn hex_rows(server: &Server, db: &str) -> BTreeMap<i64, String> {
    let out = server.sql_in(
        db,
        "SELECT id, CONCAT_WS(',', IFNULL(HEX(k), 'NULL'), IFNULL(HEX(v), 'NULL')) FROM t ORDER BY id",
    );
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('\t').expect("id and row");
            (k.parse().unwrap(), v.to_string())
        })
        .collect()
}

/// `values` rendered as the server's `HEX()` renders them in [`hex_rows`] (an integer as
/// its 64-bit two's complement, bytes as themselves; upper case).
pub fn hex_row(values: &[SqlValue]) -> String {
    values
        .iter()
        .map(|v| match v {
            SqlValue::Null => "NULL".to_string(),
            SqlValue::Int(i) => format!("{:X}", *i as u64),
            SqlValue::UInt(u) => format!("{u:X}"),
            SqlValue::Bytes(b) => b.iter().map(|x| format!("{x:02X}")).collect(),
            other => panic!("not a value of the test table: {other:?}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `backfill serve --exit-when-idle --windows-only` of this case as a child PROCESS (fault
/// points compiled in: `failpoints` is `name@n` or empty; `hook` is a `SQL_ENV` value).
pub fn serve_cmd(
    c: &Case,
    page_rows: u64,
    read_windows: u32,
    failpoints: &str,
    hook: &str,
) -> std::process::Child {
    use std::process::Stdio;
    crate::bin::command()
        .args([
            "serve",
            "--exit-when-idle",
            "--windows-only",
            "--owner",
            "crash-test",
        ])
        .arg("--state")
        .arg(c.state_url())
        .arg("--data-dir")
        .arg(c.data.path())
        .arg("--page-rows")
        .arg(page_rows.to_string())
        .arg("--read-windows")
        .arg(read_windows.to_string())
        .env(kernel::failpoint::ENV, failpoints)
        .env(crate::bf::table::hooks::SQL_ENV, hook)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn backfill serve")
}

/// Waits for the child; kills it (SIGKILL) after `kill_after` if given. Returns the exit
/// code (None when killed).
pub fn wait(mut child: std::process::Child, kill_after: Option<Duration>) -> Option<i32> {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if kill_after.is_some_and(|d| t0.elapsed() >= d) {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            return None;
        }
        assert!(t0.elapsed() < Duration::from_secs(90), "serve stalled");
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Case {
    /// (window, attempt, manifest hash) of every seal row, in window then attempt order.
    pub async fn seals(&self) -> Vec<(u32, u32, Vec<u8>)> {
        sqlx::query_as(
            "SELECT window_id, attempt, manifest_hash FROM window_seals WHERE job_id = ? \
             AND generation = ? ORDER BY window_id, attempt",
        )
        .bind(self.job.0)
        .bind(self.generation.0)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }

    /// The last attempt recorded for each window, in window order.
    pub async fn last_attempts(&self) -> Vec<(u32, u32)> {
        sqlx::query_as(
            "SELECT window_id, MAX(attempt) FROM window_attempts WHERE job_id = ? \
             AND generation = ? GROUP BY window_id ORDER BY window_id",
        )
        .bind(self.job.0)
        .bind(self.generation.0)
        .fetch_all(&self.pool)
        .await
        .unwrap()
    }

    /// Registered materials of (window, attempt).
    pub async fn materials_of(&self, window: u32, attempt: u32) -> i64 {
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM ledger_material WHERE job_id = ? AND generation = ? \
             AND window_id = ? AND attempt = ?",
        )
        .bind(self.job.0)
        .bind(self.generation.0)
        .bind(window)
        .bind(attempt)
        .fetch_one(&self.pool)
        .await
        .unwrap()
    }

    /// Every file of the material store (besides its temporary directory).
    pub fn material_files(&self) -> usize {
        let root = self.data.path().join("materials");
        std::fs::read_dir(&root)
            .unwrap()
            .flatten()
            .filter(|d| d.file_name() != "tmp" && d.path().is_dir())
            .map(|d| std::fs::read_dir(d.path()).unwrap().count())
            .sum()
    }

    /// Garbage bytes not yet released (materials of attempts other than the sealed one).
    pub async fn garbage_bytes(&self) -> u64 {
        Registry::new(self.pool.clone())
            .garbage_bytes(self.job, self.generation)
            .await
            .unwrap()
    }

    /// Every window that has a seal row has no later attempt (sealed windows are never
    /// re-read), whether J is at it or behind it.
    pub async fn assert_sealed_windows_not_reread(&self) {
        let last = self.last_attempts().await;
        for (w, a, _) in self.seals().await {
            let l = last.iter().find(|(lw, _)| *lw == w).map(|(_, la)| *la);
            assert_eq!(
                l,
                Some(a),
                "window {w} sealed by attempt {a} was attempted again"
            );
        }
    }
}

/// A concurrent writer on the source: random inserts, updates, deletes and key changes
/// (into and out of ranges) on ids 1..=max_id until `stop`, never on a key of `reserved`
/// (keys a test's own statements keep for themselves, so those always find their row).
/// Returns the writes done.
pub async fn writer(
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    max_id: i64,
    reserved: &[i64],
) -> u64 {
    use rand::Rng;
    let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap())
        .await
        .unwrap();
    let mut n = 0;
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let (op, a, b): (u8, i64, i64) = {
            let mut r = rand::rng();
            (
                r.random_range(0..4),
                r.random_range(1..=max_id),
                r.random_range(1..=max_id),
            )
        };
        if reserved.contains(&a) || reserved.contains(&b) {
            continue;
        }
        let sql = match op {
            0 => format!("INSERT IGNORE INTO t VALUES ({a}, 0, 'new')"),
            1 => format!("UPDATE t SET k = k + 1 WHERE id = {a}"),
            2 => format!("DELETE FROM t WHERE id = {a}"),
            _ => format!("UPDATE IGNORE t SET id = {b} WHERE id = {a}"),
        };
        c.query_drop(sql).await.unwrap();
        n += 1;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    n
}

/// The target-write pool of the admission snapshot of the serve running in this process.
pub fn write_pool() -> admission::PoolSnapshot {
    let snap = crate::serving::admission_snapshot().expect("serve registered admission");
    snap.pool(admission::PoolKind::TargetWrite).clone()
}

impl Case {
    /// A second table `t2` of the same shape on the source (its first `rows` rows of `t`)
    /// and an empty one on the target; returns its install request (control schema set).
    pub fn second_table(&self, rows: u64) -> crate::bf::install::InstallRequest {
        let ddl = DDL.replace("TABLE t ", "TABLE t2 ");
        self.source.sql_in(&self.sdb, &ddl);
        self.source.sql_in(
            &self.sdb,
            &format!("INSERT INTO t2 SELECT * FROM t WHERE id <= {rows}"),
        );
        self.target.sql_in(&self.tdb, &ddl);
        let mut req = crate::bf::install::InstallRequest::new(
            self.state_url(),
            self.source.url(),
            crate::bf::install::TableName::new(&self.sdb, "t2"),
            self.target.url(),
            crate::bf::install::TableName::new(&self.tdb, "t2"),
        );
        req.control_schema = self.ctl.clone();
        req
    }
}

/// Runs serve in-process with `cfg` until it is idle, for at most `limit`; returns every
/// job's outcome (the in-process serve of the serve-level tests).
pub async fn serve_until_idle(cfg: ServeConfig, limit: Duration) -> serve::Outcomes {
    tokio::time::timeout(limit, serve::serve(cfg, CancellationToken::new()))
        .await
        .expect("serve did not become idle")
        .unwrap_or_else(|e| panic!("serve: {e}"))
}

/// Asserts that the last serve of this process left no permit in use, held or waited for.
pub fn assert_no_permit_left() {
    let snap = crate::serving::admission_snapshot().expect("serve registered admission");
    for kind in admission::PoolKind::ALL {
        let p = snap.pool(kind);
        assert_eq!(p.available, p.capacity, "{kind}: {p:?}");
        assert!(p.in_use.is_empty() && p.holds.is_empty() && p.waiting.is_empty());
    }
}

impl Case {
    /// [`serve_until_idle`] with this case's configuration, changed by `tune`; returns this
    /// job's outcome ("" when serve did not run it).
    pub async fn serve_tuned(
        &self,
        limit: Duration,
        tune: impl FnOnce(&mut ServeConfig),
    ) -> String {
        let mut cfg = self.serve_cfg();
        tune(&mut cfg);
        let out = serve_until_idle(cfg, limit).await;
        out.get(&self.job).cloned().unwrap_or_default()
    }
}

/// `backfill status ARGS` run by the real binary; asserts it exits 0, returns its stdout.
pub fn status_cli(args: &[&str]) -> String {
    let out = crate::bin::command()
        .arg("status")
        .args(args)
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{s}{err}");
    s
}
