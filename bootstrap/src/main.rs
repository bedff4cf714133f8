//! The `backfill` program: parses the command line, runs the command, prints its result on
//! stdout and any error on stderr, and exits with the codes documented in `cli`.
use bootstrap::cli::{Cli, LogFormat, EXIT_FAILURE, EXIT_OK, EXIT_USAGE};
use bootstrap::supervisor::telemetry::{EventCounter, LogCounts};
use clap::Parser;
use std::io::Write;

/// jemalloc gives freed memory back to the system (glibc's per-thread arenas kept a
/// bootstrap's page buffers and a large transaction's images resident: issue 17's bound).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    // Before any thread or connection: mysql_async reads these once.
    bootstrap::io::connect::bound_client_buffers();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Err(e) = bootstrap::cli::config::apply(&args) {
        eprintln!("backfill: {}", kernel::redact::redact_text(&e));
        std::process::exit(EXIT_USAGE);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    // A panic message may quote a value that holds a URL: print it redacted (DESIGN §13).
    std::panic::set_hook(Box::new(|info| {
        eprintln!(
            "backfill: internal error: {}",
            kernel::redact::redact_text(&info.to_string())
        );
    }));
    bootstrap::seams::main_panic();
    let logs = init_tracing(cli.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("backfill: cannot start the async runtime: {e}");
            std::process::exit(EXIT_FAILURE);
        }
    };
    let code = match runtime.block_on(bootstrap::cli::run::run(cli, logs)) {
        Ok((out, code)) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => code,
                Err(_) => EXIT_FAILURE,
            }
        }
        Err(e) => {
            eprintln!("backfill: {}", kernel::redact::redact_text(&e.to_string()));
            bootstrap::cli::run::exit_code(&e)
        }
    };
    drop(runtime);
    std::process::exit(code);
}

/// Text or JSON lines on stderr, filtered by RUST_LOG (default warn), plus the metrics
/// layer counting warnings and errors.
fn init_tracing(format: LogFormat) -> LogCounts {
    use bootstrap::present::profile::{ProfileLayer, TARGET};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    // Per layer: the log filter does not disable the profile's spans (`BACKFILL_PROFILE`).
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
    };
    let logs = LogCounts::default();
    let profile = ProfileLayer::from_env().map(|p| {
        p.with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.target() == TARGET
        }))
    });
    let registry = tracing_subscriber::registry()
        .with(EventCounter(logs.clone()).with_filter(filter()))
        .with(profile);
    match format {
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(filter()),
            )
            .init(),
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr)
                    .with_filter(filter()),
            )
            .init(),
    }
    logs
}
