//! The install test tables (formerly `bootstrap/tests/install_support`): a source table and its target in fresh databases of
//! the shared servers (or of private ones), a state store on the target server, and
//! helpers that run install and return its refusal.
use crate::bf::install::{install, InstallRequest, Installed, TableName};
use harness::Server;
use kernel::error::DefiniteCode;

/// The source definition most tests use.
pub const DDL: &str = "CREATE TABLE t (
    id BIGINT NOT NULL PRIMARY KEY,
    name VARCHAR(100) NULL,
    amount DECIMAL(12,3) NULL,
    at DATETIME(6) NULL,
    ts TIMESTAMP(6) NULL DEFAULT NULL,
    bin VARBINARY(16) NULL
) ENGINE=InnoDB";

/// A source table `t` and an empty target `t` created from `source_ddl` / `target_ddl`.
pub struct Tables {
    pub source: &'static Server,
    pub target: &'static Server,
    pub sdb: String,
    pub tdb: String,
    pub state_db: String,
}

impl Tables {
    /// Fresh databases on the shared source and target; `t` created on both.
    pub fn new(prefix: &str, source_ddl: &str, target_ddl: &str) -> Tables {
        Tables::on(harness::shared_source(), prefix, source_ddl, target_ddl)
    }

    /// Same, with a given source server.
    pub fn on(source: &'static Server, prefix: &str, source_ddl: &str, target_ddl: &str) -> Tables {
        let target = harness::shared_target();
        let sdb = source.fresh_db(&format!("{prefix}_s"));
        let tdb = target.fresh_db(&format!("{prefix}_t"));
        if !source_ddl.is_empty() {
            source.sql_in(&sdb, source_ddl);
        }
        if !target_ddl.is_empty() {
            target.sql_in(&tdb, target_ddl);
        }
        let state_db = format!("{tdb}_state");
        Tables {
            source,
            target,
            sdb,
            tdb,
            state_db,
        }
    }

    /// The state store URL (on the target server, as by default).
    pub fn state_url(&self) -> String {
        self.target.url_db(&self.state_db)
    }

    /// An install request of `sdb.t` into `tdb.t`, as root.
    pub fn req(&self) -> InstallRequest {
        InstallRequest::new(
            self.state_url(),
            self.source.url(),
            TableName::new(&self.sdb, "t"),
            self.target.url(),
            TableName::new(&self.tdb, "t"),
        )
    }
}

/// Runs install and expects success.
pub async fn installs(req: &InstallRequest) -> Installed {
    match install(req).await {
        Ok(i) => i,
        Err(e) => panic!("install failed: {e}"),
    }
}

/// Runs install and returns the message of its Precondition refusal.
pub async fn refusal(req: &InstallRequest) -> String {
    match install(req).await {
        Ok(i) => panic!("expected a refusal, but installed {i:?}"),
        Err(e) => {
            let d = e
                .as_definite()
                .unwrap_or_else(|| panic!("expected a definite refusal, got: {e}"));
            assert_eq!(d.code, DefiniteCode::Precondition, "{e}");
            // Shown with --nocapture: what an operator reads.
            eprintln!("{e}");
            d.message.clone()
        }
    }
}

/// Asserts that `msg` mentions every needle (the object, the fix).
#[track_caller]
pub fn names(msg: &str, needles: &[&str]) {
    for n in needles {
        assert!(msg.contains(n), "refusal does not name {n:?}:\n{msg}");
    }
    assert!(msg.contains("fix:"), "refusal names no fix:\n{msg}");
}

/// Where [`install_each`] installs: the source and target servers with their databases,
/// the state store, the control schema, and the window and page sizes.
pub struct Each<'a> {
    pub state_url: &'a str,
    pub source: (&'a Server, &'a str),
    pub target: (&'a Server, &'a str),
    pub control_schema: &'a str,
    pub window_rows: u64,
    pub page_rows: u64,
}

/// Installs one job per table name of `tables` (`db.T` on the source to `db.T` on the
/// target), for the many-tables suites. Returns each job with its table name, in order.
pub async fn install_each(
    at: &Each<'_>,
    tables: &[String],
) -> Vec<(kernel::ids::JobId, kernel::ids::Generation, String)> {
    let mut jobs = Vec::new();
    for table in tables {
        let mut req = InstallRequest::new(
            at.state_url,
            at.source.0.url(),
            TableName::new(at.source.1, table),
            at.target.0.url(),
            TableName::new(at.target.1, table),
        );
        req.window_rows = at.window_rows;
        req.page_rows = at.page_rows;
        req.control_schema = at.control_schema.to_string();
        let done = install(&req)
            .await
            .unwrap_or_else(|e| panic!("install {table}: {e}"));
        jobs.push((done.job_id, done.generation, table.clone()));
    }
    jobs
}

/// `backfill install` of `sdb.t` (at `source_url`) into `tdb.t` (at `target_url`) through
/// the program, windows of 500 rows in pages of 250, then `backfill start`; returns the
/// job id. Panics with the program's output when either fails.
pub fn install_and_start_t(
    state: &str,
    (source_url, sdb): (&str, &str),
    (target_url, tdb): (&str, &str),
    ctl: &str,
) -> String {
    let r = crate::bin::backfill(&[
        "install",
        "--state",
        state,
        "--source",
        source_url,
        "--source-table",
        &format!("{sdb}.t"),
        "--target",
        target_url,
        "--target-table",
        &format!("{tdb}.t"),
        "--control-schema",
        ctl,
        "--window-rows",
        "500",
        "--page-rows",
        "250",
        "--format",
        "json",
    ]);
    assert_eq!(r.code, 0, "{}", r.all());
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).expect("install's JSON");
    let job = v["job_id"].as_u64().expect("job_id").to_string();
    let s = crate::bin::backfill(&["start", "--state", state, &job]);
    assert_eq!(s.code, 0, "{}", s.all());
    job
}
