//! `backfill status [JOB] [--in-state STATE] [--table PATTERN] [--watch SECS] [--format
//! json]`: the rendering is `crate::present::status` (without a JOB its fleet view); this
//! adds the state-store connection, the filters and the watch loop.
use crate::cli::{Format, StatusArgs};
use crate::present::status;
use kernel::ids::JobId;
use kernel::Result;

/// `backfill status`.
pub async fn command(a: StatusArgs) -> Result<String> {
    let (job, json) = (a.job.map(JobId), a.format == Format::Json);
    let filter = status::fleet::Filter::new(a.in_state.as_deref(), a.table.as_deref())?;
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = async {
        let Some(every) = a.watch else {
            return status::render(&pool, job, &filter, json).await;
        };
        let every = std::time::Duration::from_secs(every.max(1));
        loop {
            let out = status::render(&pool, job, &filter, json).await?;
            match a.format {
                // Clear the screen and redraw from the top left.
                Format::Text => print!("\x1b[2J\x1b[H{out}"),
                Format::Json => print!("{out}"),
            }
            let _ = std::io::Write::flush(&mut std::io::stdout());
            tokio::select! {
                _ = tokio::signal::ctrl_c() => return Ok(String::new()),
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
    .await;
    pool.close().await;
    r
}
