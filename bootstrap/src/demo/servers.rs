//! The demo's two throwaway servers, started by the test harness (`tests/harness`), whose
//! panics (a missing binary, a server that does not start) become an error that says how
//! to install MariaDB. The harness's watchdog removes the servers even if this process is
//! killed; a normal end (or Ctrl-C) drops them here.
use super::{DDL, SOURCE_DB, TABLE, TARGET_DB};
use crate::supervisor::telemetry::Telemetry;
use crate::supervisor::ServeConfig;
use harness::{Server, ServerOpts};
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use mysql_async::prelude::Queryable;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Rows per INSERT ... SELECT while loading.
const LOAD_CHUNK: u64 = 100_000;

pub struct Servers {
    source: Arc<Server>,
    target: Arc<Server>,
    /// What the demo's serve runs count (its metrics endpoint shows them).
    pub telemetry: Telemetry,
}

fn start_one(opts: ServerOpts) -> std::result::Result<Server, String> {
    // The harness reports by panicking (it is a test library): silence the default hook
    // while it runs and turn the panic message into an error.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(move || Server::start(opts));
    std::panic::set_hook(hook);
    r.map_err(|p| {
        p.downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the MariaDB server did not start".into())
    })
}

impl Servers {
    /// Starts a source (ROW binlog, FULL image and metadata) and a target/state server.
    pub async fn start(telemetry: Telemetry) -> Result<Servers> {
        let started = tokio::task::spawn_blocking(|| {
            harness::check_installed()?;
            // A bigger buffer pool than the tests' so a million rows stay in memory.
            let bp = "innodb_buffer_pool_size=256M";
            let source = start_one(ServerOpts::source().config(bp))?;
            let target = start_one(ServerOpts::target().config(bp))?;
            Ok::<_, String>((source, target))
        })
        .await
        .map_err(|e| Error::transient(format!("demo: starting the servers: {e}")))?;
        let (source, target) = started.map_err(|m| {
            Error::definite(
                DefiniteCode::Precondition,
                format!("demo: cannot start a local MariaDB server: {m}"),
            )
        })?;
        Ok(Servers {
            source: Arc::new(source),
            target: Arc::new(target),
            telemetry,
        })
    }

    /// Kills both servers and removes their directories.
    pub async fn stop(self) {
        let Servers { source, target, .. } = self;
        let _ = tokio::task::spawn_blocking(move || {
            drop(source);
            drop(target);
        })
        .await;
    }

    pub fn source_url(&self) -> String {
        self.source.url()
    }

    pub fn target_url(&self) -> String {
        self.target.url()
    }

    pub fn state_url(&self, db: &str) -> String {
        self.target.url_db(db)
    }

    pub fn source_opts(&self, db: &str) -> Result<mysql_async::Opts> {
        crate::io::connect::opts(&self.source.url_db(db), "source")
    }

    /// The material store: inside the source server's directory, removed with it.
    pub fn data_dir(&self) -> PathBuf {
        self.source.dir().join("materials")
    }

    /// Creates the sample table on the source (filled) and the empty target.
    pub async fn load(&self, rows: u64, cancel: &CancellationToken) -> Result<()> {
        let opts = crate::io::connect::opts(&self.source.url(), "source")?;
        let mut c = mysql_async::Conn::new(opts)
            .await
            .map_err(|e| Error::transient(format!("demo: connecting to the source: {e}")))?;
        let q = |e: mysql_async::Error| Error::transient(format!("demo: loading: {e}"));
        c.query_drop(format!("CREATE DATABASE {SOURCE_DB}"))
            .await
            .map_err(q)?;
        c.query_drop(format!("USE {SOURCE_DB}")).await.map_err(q)?;
        c.query_drop(DDL).await.map_err(q)?;
        let mut from = 1;
        while from <= rows {
            if cancel.is_cancelled() {
                return Err(Error::transient("demo: interrupted (Ctrl-C)"));
            }
            let to = (from + LOAD_CHUNK - 1).min(rows);
            c.query_drop(format!(
                "INSERT INTO {TABLE} SELECT seq, 1 + seq % 50000, \
                 ELT(1 + seq % 4, 'new', 'paid', 'shipped', 'cancelled'), \
                 (seq * 7919 % 10000000) / 100, IF(seq % 5 = 0, 'USD', 'EUR'), \
                 IF(seq % 10 = 0, NULL, CONCAT('order ', seq, ' for customer ', 1 + seq % 50000)), \
                 TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL seq % 1000000 MICROSECOND, \
                 NULL FROM seq_{from}_to_{to}"
            ))
            .await
            .map_err(q)?;
            from = to + 1;
        }
        let _ = c.disconnect().await;
        let opts = crate::io::connect::opts(&self.target.url(), "target")?;
        let mut t = mysql_async::Conn::new(opts)
            .await
            .map_err(|e| Error::transient(format!("demo: connecting to the target: {e}")))?;
        t.query_drop(format!(
            "CREATE DATABASE {TARGET_DB}; USE {TARGET_DB}; {DDL}"
        ))
        .await
        .map_err(q)?;
        let _ = t.disconnect().await;
        Ok(())
    }

    /// The serve configuration of the demo (the same code path as `backfill serve`).
    pub fn serve_cfg(&self, exit_when_idle: bool) -> ServeConfig {
        let mut c = ServeConfig::new(&self.state_url(super::STATE_DB), self.data_dir());
        c.sources = vec![self.source_url()];
        c.targets = vec![self.target_url()];
        c.owner = format!("demo-{}", std::process::id());
        c.exit_when_idle = exit_when_idle;
        c.poll = Duration::from_millis(200);
        c.finish = Some(crate::table::replay::ReplayConfig::default());
        c.telemetry = self.telemetry.clone();
        c
    }
}
