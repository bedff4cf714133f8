//! A capture process for crash tests: runs one reader until it is killed, a fault point
//! exits it (build with `--features failpoints`, set `BACKFILL_FAILPOINTS`), or it fails
//! definitely (exit 2).
//!
//! Usage: capture-probe STATE_URL SOURCE_URL STREAM CONTROL_SCHEMA REPLICA_ID BATCH
//!        DB.TABLE=JOB [DB.TABLE=JOB ...]
use kernel::capture::{reader, CaptureSet, CaptureTable, ReaderConfig};
use kernel::ids::{Generation, JobId};
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

fn usage() -> ExitCode {
    eprintln!(
        "usage: capture-probe STATE_URL SOURCE_URL STREAM CONTROL_SCHEMA REPLICA_ID BATCH \
         DB.TABLE=JOB..."
    );
    ExitCode::from(64)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 7 {
        return usage();
    }
    let (Ok(replica), Ok(batch)) = (args[4].parse::<u32>(), args[5].parse::<usize>()) else {
        return usage();
    };
    match run(&args, replica, batch).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("capture-probe: {e}");
            ExitCode::from(if e.is_transient() { 1 } else { 2 })
        }
    }
}

async fn run(args: &[String], replica: u32, batch: usize) -> kernel::Result<()> {
    let pool = kernel::state::open(&args[0], &Default::default()).await?;
    let mut cfg = ReaderConfig::new(&args[2], &args[1], replica);
    cfg.control_schema = args[3].clone();
    cfg.batch_records = batch;
    cfg.heartbeat = std::time::Duration::from_millis(200);
    let opts = mysql_async::Opts::from_url(&args[1])
        .map_err(|e| kernel::Error::transient(format!("source URL: {e}")))?;
    let mut conn = mysql_async::Conn::new(opts)
        .await
        .map_err(|e| kernel::error::from_mysql("connecting to the source", &e))?;
    let mut set = CaptureSet::default();
    for spec in &args[6..] {
        let bad = || kernel::Error::transient(format!("bad table spec `{spec}`"));
        let (name, job) = spec.split_once('=').ok_or_else(bad)?;
        let (db, table) = name.split_once('.').ok_or_else(bad)?;
        let job: u64 = job.parse().map_err(|_| bad())?;
        let facts = kernel::introspect::read_table(&mut conn, db, table)
            .await?
            .ok_or_else(bad)?;
        let sealed = kernel::introspect::seal(&facts).map_err(|_| bad())?;
        set.add(CaptureTable {
            job: JobId(job),
            generation: Generation(1),
            sealed,
        });
    }
    drop(conn);
    reader::run(&pool, &cfg, &set.shared(), &CancellationToken::new()).await
}
