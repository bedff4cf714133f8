//! Runs one parsed command and renders its output. Errors are returned to `main`, which
//! prints them on stderr and maps them to the exit codes of [`crate::cli`].
use crate::cli::{self, Cli, Command, Format};
use crate::install::{self, InstallRequest};
use crate::supervisor::telemetry::LogCounts;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use serde_json::json;

/// Runs `cli`; returns what to print on stdout. `logs` are the log events counted by the
/// program's tracing layer (shown by the metrics of `serve` and `demo`).
pub async fn run(cli: Cli, logs: LogCounts) -> Result<String> {
    match cli.command {
        Command::Install(a) => {
            let req = InstallRequest {
                state_url: a.state.state,
                source_url: a.source,
                source_table: a.source_table,
                target_url: a.target,
                target_table: a.target_table,
                window_rows: a.window_rows,
                page_rows: a.page_rows,
                control_schema: a.control_schema,
            };
            let done = install::install(&req).await?;
            Ok(match a.format {
                Format::Text => format!("{}\n", done.job_id),
                Format::Json => format!(
                    "{}\n",
                    json!({
                        "job_id": done.job_id.0,
                        "generation": done.generation.0,
                        "windows": done.windows,
                        "fingerprint": done.fingerprint.to_hex(),
                        "key": done.key,
                    })
                ),
            })
        }
        Command::Status(a) => crate::cli::status::command(a).await,
        Command::Demo(a) => crate::demo::run(a.options(), logs).await,
        Command::Start(a) => crate::cli::serve::start(a).await,
        Command::Cancel(a) => crate::cli::commands::cancel(a).await,
        Command::Resume(a) => crate::cli::commands::resume(a).await,
        Command::Serve(a) => crate::cli::serve::serve(a, logs).await,
        Command::Audit(a) => crate::cli::check::audit(a).await,
        Command::Verify(a) => crate::cli::check::verify(a).await,
    }
}

/// The exit code of an error.
pub fn exit_code(e: &Error) -> i32 {
    match e.as_definite().map(|d| d.code) {
        Some(DefiniteCode::Usage) => cli::EXIT_USAGE,
        Some(DefiniteCode::Precondition) => cli::EXIT_REFUSED,
        Some(DefiniteCode::EvidenceCorrupt | DefiniteCode::EvidenceConflict) => {
            cli::EXIT_CHECK_FAILED
        }
        _ => cli::EXIT_FAILURE,
    }
}
