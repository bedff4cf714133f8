//! The `backfill` command line (DESIGN §13, STYLE §11): kebab-case subcommands, every flag
//! documented and mirrored by an environment variable, `--format text|json`, and distinct
//! exit codes. URLs are read from flags or the environment but never echoed with their
//! password (`hide_env_values`, `kernel::redact`).
use crate::install::select::{TablePattern, TargetMap};
use crate::install::{DEFAULT_PAGE_ROWS, DEFAULT_WINDOW_ROWS};
use clap::{Args, Parser, Subcommand, ValueEnum};

pub mod check;
pub mod commands;
pub mod config;
pub mod generate;
pub mod install;
pub mod materials;
pub mod refresh;
pub mod repoint;
pub mod run;
pub mod serve;
pub mod status;
mod words;

/// Success.
pub const EXIT_OK: i32 = 0;
/// A runtime failure: connection lost, server error, corrupt state; retrying may help.
pub const EXIT_FAILURE: i32 = 1;
/// A usage or configuration error: bad flag, bad URL, unknown job.
pub const EXIT_USAGE: i32 = 2;
/// A precondition refused the operation (DESIGN §9): the message names the object and fix.
/// A bulk install exits with it when it refused any table (the others are installed; the
/// report on stdout lists both).
pub const EXIT_REFUSED: i32 = 3;
/// A check failed: `audit` found a finding or `verify` found a difference (the report on
/// stdout names each), or stored evidence failed verification during another command.
pub const EXIT_CHECK_FAILED: i32 = 4;

/// Copies a live MySQL/MariaDB table into an exclusive empty target, then follows the binlog.
#[derive(Debug, Parser)]
#[command(name = "backfill", version, propagate_version = true)]
pub struct Cli {
    /// Log lines on stderr as text or as JSON objects, one a line (level: RUST_LOG).
    #[arg(
        long,
        global = true,
        env = "BACKFILL_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text
    )]
    pub log_format: LogFormat,
    /// TOML file with serve's settings: each key is one of serve's flags without its `--`,
    /// with `_` for `-` (`read_windows = 2`, `source = ["mysql://..."]`; `backfill serve
    /// --help` lists them); a flag or its environment variable overrides the file.
    #[arg(long, global = true, env = "BACKFILL_CONFIG", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

/// Format of the tracing output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check every precondition, seal the source schema, record its lineage, plan the
    /// windows and register the table under a new generation; prints the job id.
    Install(InstallArgs),
    /// Show jobs: without a JOB one line per job (state, windows, rows/s, ETA, lag, pause
    /// reason) and a summary; with a JOB its detail.
    Status(StatusArgs),
    /// Record a start command for a job; `serve` runs it (the process may be down now).
    Start(crate::cli::serve::StartArgs),
    /// Record a cancel command (CANCELING); `serve` stops the job at its next boundary,
    /// writes the cancel point (K) and records CANCELLED(K). The partial target is kept,
    /// never deleted.
    Cancel(commands::CancelArgs),
    /// Record a resume command for a paused job (fix the cause first); `serve` clears the
    /// pause and continues from the persisted context.
    Resume(commands::ResumeArgs),
    /// Resume a STREAMING table paused at a DDL without a re-copy, once its target matches:
    /// seal the live definition as its next schema version at the DDL and record a resume.
    RefreshSchema(crate::cli::refresh::RefreshArgs),
    /// After a replica of a source was promoted: check that the new server's binlog holds
    /// the stream's last captured GTID, record a lineage switch there in the change log and
    /// move the source's jobs to the new server (runbooks/source-failover.md). Stop serve
    /// first.
    Repoint(crate::cli::repoint::RepointArgs),
    /// Run every started job: one capture reader per source server, one task per job.
    Serve(crate::cli::serve::ServeArgs),
    /// The activation audit (DESIGN §7), read-only: the journal, range chain, materials,
    /// the target ledger's credentials and cursor, the change log's chain from the start
    /// position (B) to the final fence (F); exits 4 naming every failure.
    Audit(crate::cli::check::AuditArgs),
    /// Compare source and target row by row and field by field (missing keys, extra keys,
    /// differing fields) and their definitions (columns and indexes); exits 4 on any
    /// difference.
    Verify(crate::cli::check::VerifyArgs),
    /// The end-to-end demonstration on throwaway local MariaDB servers: load a sample
    /// table, copy it under concurrent writes to STREAMING, audit, verify, summarise.
    Demo(DemoArgs),
    /// Print a shell completion script on stdout, generated from these definitions, e.g.
    /// `backfill completions bash > /etc/bash_completion.d/backfill`.
    Completions(CompletionsArgs),
    /// Print the manual page (roff) on stdout, generated from these definitions, e.g.
    /// `backfill man | man -l -`; with a COMMAND, that command's page.
    Man(ManArgs),
}

/// `backfill completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell the script is for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `backfill man [COMMAND]`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// A subcommand whose page to print (default: the page of `backfill` itself).
    pub command: Option<String>,
}

/// Output format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable text.
    #[default]
    Text,
    /// One JSON document on stdout.
    Json,
}

/// Where the state store is.
#[derive(Debug, Args)]
pub struct StateArgs {
    /// State store URL, e.g. mysql://user:pass@target-host:3306/backfill_state (the schema
    /// is created and migrated on first use; it must not be on the source server). The
    /// nodes of a Galera cluster may be listed, tried in order:
    /// mysql://user:pass@db1:3306,db2:3306,db3:3306/backfill_state.
    #[arg(long, env = "BACKFILL_STATE", hide_env_values = true)]
    pub state: String,
}

/// `backfill install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// Source server URL, e.g. mysql://capture:pass@source-host:3306 (this user reads the
    /// table and the binlog and writes the control table).
    #[arg(long, env = "BACKFILL_SOURCE", hide_env_values = true)]
    pub source: String,
    /// Source table as db.table, or a pattern of table names in one database (`*` any run
    /// of characters, `?` one; base tables only): shop.*, shop.order_*. Repeat the flag for
    /// more; one job per table, each checked on its own.
    #[arg(
        long,
        env = "BACKFILL_SOURCE_TABLE",
        required_unless_present = "source_tables_from"
    )]
    pub source_table: Vec<TablePattern>,
    /// A file of source tables: one db.table or pattern a line; lines starting with `#`
    /// are comments. Adds to --source-table.
    #[arg(long, env = "BACKFILL_SOURCE_TABLES_FROM", value_name = "FILE")]
    pub source_tables_from: Option<std::path::PathBuf>,
    /// Target server URL, e.g. mysql://loader:pass@target-host:3306.
    #[arg(long, env = "BACKFILL_TARGET", hide_env_values = true)]
    pub target: String,
    /// Target table as db.table (one source table), or a pattern with one `*` standing for
    /// each source table's name: shop_copy.* (same names in database shop_copy),
    /// shop_copy.old_*. Each target is exclusive, empty, same definition as its source.
    #[arg(long, env = "BACKFILL_TARGET_TABLE")]
    pub target_table: TargetMap,
    /// Create each missing target table from the sealed source definition (same columns,
    /// types, charsets, collations, key and non-unique indexes; no foreign keys, triggers or
    /// extra unique keys). Needs CREATE on the target database. An existing target must
    /// still be empty with the source's definition.
    #[arg(long, env = "BACKFILL_CREATE_TARGET")]
    pub create_target: bool,
    /// Rows per window: the primary-key ranges are cut so each holds this many keys at
    /// install time.
    #[arg(long, env = "BACKFILL_WINDOW_ROWS", default_value_t = DEFAULT_WINDOW_ROWS)]
    pub window_rows: u64,
    /// Rows per page inside a window (at most --window-rows).
    #[arg(long, env = "BACKFILL_PAGE_ROWS", default_value_t = DEFAULT_PAGE_ROWS)]
    pub page_rows: u64,
    /// Schema of the control table on the source (created if missing).
    #[arg(long, env = "BACKFILL_CONTROL_SCHEMA", default_value = kernel::control::DEFAULT_SCHEMA)]
    pub control_schema: String,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `backfill status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// Only this job, in detail; without it, one line per job and a summary line.
    pub job: Option<u64>,
    /// Without a JOB: only jobs in this state (INSTALLED, CAPTURING, WINDOWS, FENCED,
    /// REPLAYING, AUDITED, STREAMING, CANCELING, CANCELLED, or PAUSED for any pause).
    #[arg(
        long,
        env = "BACKFILL_STATUS_IN_STATE",
        value_name = "STATE",
        conflicts_with = "job"
    )]
    pub in_state: Option<String>,
    /// Without a JOB: only jobs whose source or target `db.table` matches PATTERN (`*`
    /// any run, `?` one character; case-insensitive), e.g. 'shop.*'.
    #[arg(
        long,
        env = "BACKFILL_STATUS_TABLE",
        value_name = "PATTERN",
        conflicts_with = "job"
    )]
    pub table: Option<String>,
    /// Redraw every SECS seconds until Ctrl-C (JSON: one document per line each time).
    #[arg(long, env = "BACKFILL_STATUS_WATCH", value_name = "SECS")]
    pub watch: Option<u64>,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `backfill demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Rows in the sample table.
    #[arg(long, env = "BACKFILL_DEMO_ROWS", default_value_t = 1_000_000)]
    pub rows: u64,
    /// Statements per second of the concurrent writer (0: no writer).
    #[arg(long, env = "BACKFILL_DEMO_WRITES_PER_SEC", default_value_t = 500)]
    pub writes_per_sec: u32,
    /// Rows per window (default: rows / 32, between 1 000 and 100 000).
    #[arg(long, env = "BACKFILL_DEMO_WINDOW_ROWS")]
    pub window_rows: Option<u64>,
    /// Rows per page inside a window.
    #[arg(long, env = "BACKFILL_DEMO_PAGE_ROWS", default_value_t = crate::install::DEFAULT_PAGE_ROWS)]
    pub page_rows: u64,
    /// Seconds the writer keeps writing once the table is STREAMING.
    #[arg(long, env = "BACKFILL_DEMO_STREAM_SECS", default_value_t = 3)]
    pub stream_secs: u64,
    /// Serve Prometheus metrics on this address during the run (GET /metrics).
    #[arg(long, env = "BACKFILL_METRICS_ADDR", value_parser = crate::present::metrics::parse_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Output format of the summary.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

impl DemoArgs {
    /// The demo's options.
    pub fn options(&self) -> crate::demo::DemoOptions {
        crate::demo::DemoOptions {
            rows: self.rows,
            writes_per_sec: self.writes_per_sec,
            window_rows: self.window_rows,
            page_rows: self.page_rows,
            stream_secs: self.stream_secs,
            metrics_addr: self.metrics_addr,
            json: self.format == Format::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::TableName;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn install_parses_with_defaults() {
        let a = install_args(&[
            "--source-table",
            "d.t",
            "--target-table",
            "d.t2",
            "--format",
            "json",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.window_rows, DEFAULT_WINDOW_ROWS);
        assert_eq!(a.page_rows, DEFAULT_PAGE_ROWS);
        assert_eq!(a.format, Format::Json);
        assert_eq!(a.target_table, TargetMap::One(TableName::new("d", "t2")));
        assert_eq!(
            a.source_table,
            vec!["d.t".parse().unwrap_or_else(|e| panic!("{e}"))]
        );
        assert!(!a.create_target);
        assert!(Cli::try_parse_from(["backfill", "install", "--source-table", "nodot"]).is_err());
    }

    fn install_args(extra: &[&str]) -> Result<InstallArgs, clap::Error> {
        let mut argv = vec![
            "backfill",
            "install",
            "--state",
            "mysql://r@h/s",
            "--source",
            "mysql://r@h",
            "--target",
            "mysql://r@h2",
        ];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv)?.command {
            Command::Install(a) => Ok(a),
            c => panic!("install expected, got {c:?}"),
        }
    }

    #[test]
    fn install_takes_patterns_lists_and_create_target() {
        let a = install_args(&[
            "--source-table",
            "shop.*",
            "--source-table",
            "crm.user_*",
            "--target-table",
            "shop_copy.*",
            "--create-target",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.source_table.len(), 2);
        assert!(a.source_table[0].glob && a.source_table[1].matches("user_x"));
        assert!(a.create_target);
        assert!(matches!(a.target_table, TargetMap::Pattern { ref db, .. } if db == "shop_copy"));
        let a = install_args(&["--source-tables-from", "t.txt", "--target-table", "c.*"])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(a.source_table.is_empty());
        assert_eq!(a.source_tables_from, Some("t.txt".into()));
        // Neither a table nor a file; a target pattern with two stars; a glob database.
        assert!(install_args(&["--target-table", "c.*"]).is_err());
        assert!(install_args(&["--source-table", "s.*", "--target-table", "c.**"]).is_err());
        assert!(install_args(&["--source-table", "s*.t", "--target-table", "c.*"]).is_err());
    }

    #[test]
    fn start_takes_several_jobs_or_all() {
        let start = |extra: &[&str]| {
            let mut argv = vec!["backfill", "start", "--state", "mysql://r@h/s"];
            argv.extend_from_slice(extra);
            Cli::try_parse_from(argv).map(|c| match c.command {
                Command::Start(a) => (a.jobs, a.all),
                c => panic!("start expected, got {c:?}"),
            })
        };
        assert_eq!(start(&["3"]).ok(), Some((vec![3], false)));
        assert_eq!(start(&["3", "4", "9"]).ok(), Some((vec![3, 4, 9], false)));
        assert_eq!(start(&["--all"]).ok(), Some((vec![], true)));
        assert!(start(&[]).is_err(), "a job or --all is required");
        assert!(start(&["3", "--all"]).is_err(), "jobs and --all conflict");
    }
}
