//! `backfill repoint` (DESIGN §18, runbooks/source-failover.md): after a replica of a
//! source was promoted, moves that source's stream and every live job of it to the new
//! server, at D's GTID, without a re-copy.
//!
//! Order of effects, and why a crash between them is safe: (1) the new server is checked
//! to hold D's GTID and the end of its group there is found (`kernel::repoint`); (2) under
//! the stream's capture lease, one state-store transaction appends the lineage switch
//! record to L and moves D to the new server (`kernel::log::append_switch`); (3) the jobs'
//! source URL is set to the new server. Run again after a crash between (2) and (3), the
//! command finds D already on the new server and does (3) only.
use crate::cli::{Format, StateArgs};
use crate::io::connect::Account;
use crate::store::jobs::{self, stream_name, STATE_CANCELLED};
use crate::store::repoint as store;
use clap::Args;
use kernel::capture::owner;
use kernel::error::DefiniteCode;
use kernel::ids::JobId;
use kernel::redact::redact_url;
use kernel::{Error, Result};
use serde_json::json;
use sqlx::MySqlPool;
use std::time::Duration;

/// `backfill repoint`.
#[derive(Debug, Args)]
pub struct RepointArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The old source server as HOST:PORT, as its jobs recorded it at install (`backfill
    /// status JOB` shows it).
    #[arg(
        long,
        env = "BACKFILL_REPOINT_SOURCE_SERVER",
        required_unless_present = "job",
        conflicts_with = "job"
    )]
    pub source_server: Option<String>,
    /// Or a job of that source: every live job of its source moves with it (they share
    /// one capture stream).
    #[arg(long, env = "BACKFILL_REPOINT_JOB")]
    pub job: Option<u64>,
    /// URL of the promoted server, e.g. mysql://capture:pass@new-host:3306 (same grants as
    /// the old source's user).
    #[arg(long, env = "BACKFILL_REPOINT_TO", hide_env_values = true)]
    pub to: String,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// What a repoint did.
#[derive(Debug)]
struct Done {
    stream: String,
    jobs: Vec<JobId>,
    /// None: D was already on the new server (or no capture yet); only URLs were set.
    switch: Option<Switched>,
    to_url: String,
}

#[derive(Debug)]
struct Switched {
    gtid: String,
    from: String,
    from_pos: String,
    to: String,
    to_pos: String,
    seq: u64,
}

fn usage(m: String) -> Error {
    Error::definite(DefiniteCode::Usage, m)
}

fn refused(m: String) -> Error {
    Error::definite(DefiniteCode::Precondition, m)
}

/// Runs the command.
pub async fn repoint(a: RepointArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = repoint_in(&pool, &a).await;
    pool.close().await;
    Ok(render(&r?, a.format))
}

fn render(d: &Done, format: Format) -> String {
    let jobs: Vec<u64> = d.jobs.iter().map(|j| j.0).collect();
    match format {
        Format::Json => {
            let sw = d.switch.as_ref().map(|s| {
                json!({"gtid": s.gtid, "from": s.from, "from_pos": s.from_pos, "to": s.to,
                       "to_pos": s.to_pos, "l_seq": s.seq})
            });
            format!(
                "{}\n",
                json!({"stream": d.stream, "jobs": jobs, "source_url": d.to_url, "switch": sw})
            )
        }
        Format::Text => {
            let mut out = match &d.switch {
                Some(s) => format!(
                    "stream {}: lineage switch recorded at GTID {} (change log record {}):\n  from [{}] at {}\n  to   [{}] at {}\n",
                    d.stream, s.gtid, s.seq, s.from, s.from_pos, s.to, s.to_pos
                ),
                None => format!(
                    "stream {}: the capture position is already on the new server (or nothing was captured yet); no switch recorded\n",
                    d.stream
                ),
            };
            out.push_str(&format!(
                "jobs {:?} now read {}; start serve with --source for it\n",
                jobs, d.to_url
            ));
            out
        }
    }
}

async fn repoint_in(pool: &MySqlPool, a: &RepointArgs) -> Result<Done> {
    let identity = select_identity(pool, a).await?;
    let jobs = store::live_jobs(pool, &identity).await?;
    refuse_live_serves(pool).await?;
    let stream = stream_name(&identity);
    let to_url = redact_url(&a.to);
    let opts = crate::io::connect::opts(&a.to, "--to")?;
    let mut conn = crate::io::connect::connect(opts, "new source (--to)", &a.to).await?;
    let switch = switch_stream(pool, &stream, &mut conn).await;
    crate::io::connect::close(conn).await;
    let switch = switch?;
    store::set_source_url(pool, &identity, &to_url).await?;
    Ok(Done {
        stream,
        jobs,
        switch,
        to_url,
    })
}

/// The source identity the arguments name (one; never a guess between several).
async fn select_identity(pool: &MySqlPool, a: &RepointArgs) -> Result<String> {
    if let Some(job) = a.job {
        return Ok(jobs::load_job(pool, JobId(job)).await?.source.identity);
    }
    let server = a.source_server.as_deref().unwrap_or_default();
    let (host, port) = server
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_ascii_lowercase(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| usage(format!("--source-server `{server}` is not HOST:PORT")))?;
    let mut ids: Vec<String> = Vec::new();
    for j in jobs::list_jobs(pool, u32::MAX).await? {
        if j.state == STATE_CANCELLED {
            continue;
        }
        let same = Account::of(&j.source_url).is_ok_and(|acc| acc.host == host && acc.port == port);
        if same && !ids.contains(&j.source.identity) {
            ids.push(j.source.identity.clone());
        }
    }
    match ids.len() {
        1 => Ok(ids.remove(0)),
        0 => Err(usage(format!(
            "no live job records its source at {host}:{port}; `backfill status` lists the jobs"
        ))),
        _ => Err(usage(format!(
            "the live jobs at {host}:{port} belong to {} source servers ({}); repoint one with --job JOB",
            ids.len(),
            ids.join(", ")
        ))),
    }
}

/// A running serve may hold jobs' connections and cached URLs: stop every serve first.
async fn refuse_live_serves(pool: &MySqlPool) -> Result<()> {
    let live: Vec<String> = crate::store::processes::live(pool)
        .await?
        .into_iter()
        .map(|s| format!("{} (pid {})", s.owner, s.pid))
        .collect();
    if live.is_empty() {
        return Ok(());
    }
    Err(refused(format!(
        "repoint refused: serve processes are running on this state store: {}; stop them \
         first (they read the old source's URL), then repoint and start serve with --source \
         for the new server",
        live.join(", ")
    )))
}

/// Checks the new server and records the switch under the stream's capture lease.
async fn switch_stream(
    pool: &MySqlPool,
    stream: &str,
    conn: &mut mysql_async::Conn,
) -> Result<Option<Switched>> {
    let Some(d) = kernel::log::load_position(pool, stream).await? else {
        return Ok(None);
    };
    if kernel::lineage::read_lineage(conn).await? == d.lineage {
        return Ok(None);
    }
    let found = kernel::repoint::check_new_source(conn, &d).await?;
    let me = format!("repoint:{}", std::process::id());
    let ttl = Duration::from_secs(60);
    let Some(lease) = owner::acquire(pool, stream, &me, ttl).await? else {
        let who = owner::holder(pool, stream).await?.map(|(o, _)| o);
        return Err(refused(format!(
            "repoint refused: the capture lease of stream `{stream}` is held by {}; stop that \
             serve (or wait for its lease to expire) and run repoint again",
            who.unwrap_or_else(|| "another process".into())
        )));
    };
    let r = async {
        // D as it is under the lease (a reader may have moved it since the check).
        let d = kernel::log::load_position(pool, stream)
            .await?
            .ok_or_else(|| Error::transient("the capture position vanished"))?;
        kernel::log::append_switch(
            pool,
            &d,
            &found.lineage,
            &found.gtid,
            &found.end,
            Some(lease.token),
        )
        .await
        .map(|next| (d, next))
    }
    .await;
    let _ = owner::release(pool, &lease).await;
    let (d, next) = r?;
    Ok(Some(Switched {
        gtid: found.gtid.to_string(),
        from: d.lineage.to_string(),
        from_pos: d.restart.pos.to_string(),
        to: next.lineage.to_string(),
        to_pos: next.restart.pos.to_string(),
        seq: next.restart_seq.0,
    }))
}
