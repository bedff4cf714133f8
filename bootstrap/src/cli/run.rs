//! Runs one parsed command and renders its output. Errors are returned to `main`, which
//! prints them on stderr and maps them to the exit codes of [`crate::cli`].
use crate::cli::{self, Cli, Command};
use crate::supervisor::telemetry::LogCounts;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};

/// Runs `cli`; returns what to print on stdout and the exit code (not 0 only for a bulk
/// install that refused or failed some tables). `logs` are the log events counted by the
/// program's tracing layer (shown by the metrics of `serve` and `demo`).
pub async fn run(cli: Cli, logs: LogCounts) -> Result<(String, i32)> {
    let out = match cli.command {
        Command::Install(a) => return crate::cli::install::command(a).await,
        Command::Status(a) => crate::cli::status::command(a).await,
        Command::Demo(a) => crate::demo::run(a.options(), logs).await,
        Command::Start(a) => crate::cli::serve::start(a).await,
        Command::Cancel(a) => crate::cli::commands::cancel(a).await,
        Command::Resume(a) => crate::cli::commands::resume(a).await,
        Command::RefreshSchema(a) => crate::cli::refresh::refresh(a).await,
        Command::Repoint(a) => crate::cli::repoint::repoint(a).await,
        Command::Serve(a) => crate::cli::serve::serve(a, logs).await,
        Command::Audit(a) => crate::cli::check::audit(a).await,
        Command::Verify(a) => crate::cli::check::verify(a).await,
        Command::Completions(a) => crate::cli::generate::completions(a),
        Command::Man(a) => crate::cli::generate::man(a),
    };
    out.map(|o| (o, cli::EXIT_OK))
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
