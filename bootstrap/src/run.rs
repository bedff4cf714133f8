//! Runs one parsed command and renders its output. Errors are returned to `main`, which
//! prints them on stderr and maps them to the exit codes of [`crate::cli`].
use crate::cli::{self, Cli, Command, Format};
use crate::install::{self, InstallRequest};
use crate::status;
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::{Error, Result};
use serde_json::json;

/// Runs `cli`; returns what to print on stdout.
pub async fn run(cli: Cli) -> Result<String> {
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
                    })
                ),
            })
        }
        Command::Status(a) => {
            let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
            let jobs = status::read(&pool, a.job.map(JobId)).await;
            pool.close().await;
            let jobs = jobs?;
            Ok(match (a.format, a.job) {
                (Format::Json, Some(_)) => format!(
                    "{}\n",
                    jobs.first().map(status::job_json).unwrap_or_default()
                ),
                (Format::Json, None) => format!(
                    "{}\n",
                    json!({ "jobs": jobs.iter().map(status::job_json).collect::<Vec<_>>() })
                ),
                (Format::Text, _) if jobs.is_empty() => "no jobs installed\n".to_string(),
                (Format::Text, _) => jobs.iter().map(|j| status::job_text(j) + "\n").collect(),
            })
        }
        Command::Demo(a) => Ok(demo(a.format)),
        Command::Start(a) => crate::serve_cli::start(a).await,
        Command::Serve(a) => crate::serve_cli::serve(a).await,
        Command::Audit(a) => crate::check_cli::audit(a).await,
        Command::Verify(a) => crate::check_cli::verify(a).await,
    }
}

/// What `backfill demo` can show today: nothing is copied before the copy exists.
fn demo(format: Format) -> String {
    const WHAT: &str = "backfill demo: the copy protocol (windows, fence, replay, audit) is not \
        built yet, so nothing was started and nothing was copied. What works today: \
        `backfill install` (every precondition of DESIGN §9, sealed schema, lineage, range \
        plan, generation) and `backfill status`.";
    match format {
        Format::Text => format!("{WHAT}\n"),
        Format::Json => format!("{}\n", json!({ "copied": false, "message": WHAT })),
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
