//! The window/serve test world (formerly `bootstrap/tests/window_support`): a source table on the shared source, an empty target
//! and the state store on the shared target, install + start, and evidence checks.
use crate::bf::install::{install, InstallRequest, TableName};
use crate::bf::table::window::WindowHooks;
use crate::init_tracing;
use crate::oracle::{primary_key, Mark, Report, Subject};
use crate::serving::{self as serve, ServeConfig};
use harness::Server;
use kernel::ids::{Generation, JobId};
use kernel::log::LSeq;
use kernel::value::Row;
use ledger::check;
use ledger::journal::Journal;
use ledger::material::LocalDirStore;
use ledger::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// Where the source's and the target's binlogs stood before the case's tables existed
    /// (the exactly-once oracle reads both from there: [`Case::oracle`]).
    pub marks: (Mark, Mark),
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
        let fill_rows = |s: &Server, db: &str| fill(s, db, rows);
        let target = harness::shared_target();
        let c = Case::install_on(
            source,
            target,
            prefix,
            DDL,
            fill_rows,
            window_rows,
            page_rows,
        )
        .await;
        // The audit counter is created after install (install refuses a target with triggers).
        add_audit_triggers(c.target, &c.tdb);
        c
    }

    /// A case of any table: `ddl` creates `t` on the shared source and on the target,
    /// `fill` runs on the source, then install with these sizes and start. No audit
    /// triggers (those name the column `id` of [`DDL`]). A prefix `=name` makes the source
    /// database exactly `name` (for fixtures that carry it).
    pub async fn of_table(
        prefix: &str,
        ddl: &str,
        fill: &[String],
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        let servers = (harness::shared_source(), harness::shared_target());
        Case::of_table_between(servers, prefix, ddl, fill, window_rows, page_rows).await
    }

    /// Like [`Case::of_table`] without the start command.
    pub async fn of_table_unstarted(
        prefix: &str,
        ddl: &str,
        fill: &[String],
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        let servers = (harness::shared_source(), harness::shared_target());
        Case::unstarted_between(servers, prefix, ddl, fill, window_rows, page_rows).await
    }

    /// [`Case::of_table`] between given servers (private ones: other time zones, other
    /// modes); the state store lives on `target`.
    pub async fn of_table_between(
        servers: (&'static Server, &'static Server),
        prefix: &str,
        ddl: &str,
        fill: &[String],
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        let c = Case::unstarted_between(servers, prefix, ddl, fill, window_rows, page_rows).await;
        crate::bf::store::commands::start(&c.pool, c.job)
            .await
            .unwrap();
        c
    }

    /// [`Case::of_table_unstarted`] between given servers.
    async fn unstarted_between(
        (source, target): (&'static Server, &'static Server),
        prefix: &str,
        ddl: &str,
        fill: &[String],
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        let fill = |s: &Server, db: &str| {
            for sql in fill {
                s.sql_in(db, sql);
            }
        };
        Case::install_on(source, target, prefix, ddl, fill, window_rows, page_rows).await
    }

    /// Fresh databases, `t` from `ddl` on both sides, `fill` on the source, install.
    async fn install_on(
        source: &'static Server,
        target: &'static Server,
        prefix: &str,
        ddl: &str,
        fill: impl FnOnce(&Server, &str),
        window_rows: u64,
        page_rows: u64,
    ) -> Case {
        init_tracing();
        let marks = (Mark::now(source), Mark::now(target));
        // A prefix `=name` names the source database itself (fixtures that carry it).
        let sdb = match prefix.strip_prefix('=') {
            Some(name) => {
                source.sql(&format!("CREATE DATABASE `{name}`"));
                name.to_string()
            }
            None => source.fresh_db(&format!("{prefix}_s")),
        };
        let prefix = prefix.trim_start_matches('=');
        let ctl = source.fresh_db(&format!("{prefix}_c"));
        let tdb = target.fresh_db(&format!("{prefix}_t"));
        source.sql_in(&sdb, ddl);
        target.sql_in(&tdb, ddl);
        fill(source, &sdb);
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
            marks,
        }
    }

    /// The exactly-once oracle over both binlogs ([`crate::oracle`]): every change of `t`
    /// after B applied exactly once, every page as the source was at its HIGH.
    pub fn oracle(&self) -> Report {
        self.oracle_of("t", self.job, self.generation)
    }

    /// [`Case::oracle`] of `table` (same name on both sides) copied by `job`.
    pub fn oracle_of(&self, table: &str, job: JobId, generation: Generation) -> Report {
        let s = self.subject(table, job, generation);
        let sg = crate::oracle::read_source(self.source, &self.marks.0, &s);
        self.oracle_over(&sg, &s)
    }

    /// The oracle of `s` over the source's groups `sg` (e.g. across a repoint,
    /// [`crate::oracle::switched`]) and the target's binlog from its mark.
    pub fn oracle_over(&self, sg: &[crate::oracle::parse::Group], s: &Subject) -> Report {
        let report = crate::oracle::check_groups(sg, self.target, &self.marks.1, s);
        eprintln!("exactly-once oracle of {}.{}: {report}", s.sdb, s.table);
        report
    }

    /// What the oracle checks of `table` copied by `job`, with the audit triggers' log
    /// of the table where it has one ([`add_audit_triggers_of`]).
    pub fn subject(&self, table: &str, job: JobId, generation: Generation) -> Subject {
        let log = audit_log_of(table);
        Subject {
            sdb: self.sdb.clone(),
            tdb: self.tdb.clone(),
            table: table.into(),
            ctl: self.ctl.clone(),
            key: primary_key(self.source, &self.sdb, table),
            job: job.0,
            generation: generation.0,
            applied: self.has_table(&log).then_some(log),
        }
    }

    /// The target database has a table `name` (e.g. an audit triggers' log).
    fn has_table(&self, name: &str) -> bool {
        let n = self.target.sql(&format!(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{}' \
             AND TABLE_NAME = '{name}'",
            self.tdb
        ));
        n.trim() == "1"
    }

    /// [`Case::oracle`], failing on any finding.
    pub fn assert_exactly_once(&self) {
        self.oracle().assert_exactly_once();
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
        let out = serve::serve_until_idle(cfg, Duration::from_secs(120)).await;
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
        let mut out = Vec::new();
        for (e, _) in &chain {
            let (m, _) = ledger::seal::load_final_pages(store, &e.manifest_hash)
                .await
                .unwrap();
            out.push(m);
        }
        out
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
            keyer: kernel::key::Keyer::of(&schema).unwrap(),
            schema,
            token: 0,
            within: None,
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
        let mut out = Vec::new();
        for (e, _) in &chain {
            let (_, pages) = ledger::seal::load_final_pages(&store, &e.manifest_hash)
                .await
                .unwrap();
            out.push(
                pages
                    .iter()
                    .flat_map(|b| ledger::page::FinalPage::decode(b).unwrap().rows)
                    .map(|r| (r[0].as_key().unwrap(), r))
                    .collect(),
            );
        }
        out
    }

    /// Asserts that the target table holds exactly the source table's rows, compared by the
    /// two servers alone (nothing decoded by the pipeline or by this crate): `CHECKSUM
    /// TABLE` and [`crate::table_digest`] (per row the exact bytes of every column, in key
    /// order, hashed by the server) on each side; on a difference, the keys that differ.
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

mod evidence;
mod run;

pub use evidence::*;
pub use run::*;
