//! `backfill start JOB` and `backfill serve`: their flags (STYLE §11: each documented and
//! mirrored by an environment variable) and what they print.
use crate::cli::{Format, StateArgs};
use crate::supervisor::telemetry::{LogCounts, Telemetry};
use crate::supervisor::{self, ServeConfig};
use clap::Args;
use kernel::ids::JobId;
use kernel::Result;
use serde_json::json;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// `backfill start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// The jobs to start (as printed by install).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub jobs: Vec<u64>,
    /// Start every installed job that has no start command yet (not cancelled ones).
    #[arg(long, env = "BACKFILL_START_ALL")]
    pub all: bool,
    /// Execution sessions of serve (same flag as serve's): a start beyond the jobs already
    /// started is refused.
    #[arg(long, env = "BACKFILL_MAX_SESSIONS", default_value_t = 8)]
    pub max_sessions: u32,
    /// Output format.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// `backfill serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub state: StateArgs,
    /// Directory of the material store (RAW/FINAL pages, manifests).
    #[arg(long, env = "BACKFILL_DATA_DIR")]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub materials: crate::cli::materials::MaterialsArg,
    /// Seconds a job's lease lasts without renewal (renewed every third of it): another
    /// serve takes a lost host's jobs over within about this long plus its 2 s takeover
    /// poll. See runbooks/several-serves.md for sizing.
    #[arg(long, env = "BACKFILL_LEASE_TTL_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(3..=3600))]
    pub lease_ttl_secs: u64,
    /// Source URLs with their passwords (jobs record them redacted); comma-separated.
    #[arg(
        long,
        env = "BACKFILL_SOURCE",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub source: Vec<String>,
    /// Target URLs with their passwords; comma-separated.
    #[arg(
        long,
        env = "BACKFILL_TARGET",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub target: Vec<String>,
    /// Rows per page of windows sealed from now on (default: the job's --page-rows).
    #[arg(long, env = "BACKFILL_SERVE_PAGE_ROWS")]
    pub page_rows: Option<u64>,
    /// Read views open at once in this process.
    #[arg(long, env = "BACKFILL_READ_WINDOWS", default_value_t = 2)]
    pub read_windows: u32,
    /// Target write transactions at once in this process.
    #[arg(long, env = "BACKFILL_TARGET_WRITES", default_value_t = 2)]
    pub target_writes: u32,
    /// Execution sessions (running tables) in this process.
    #[arg(long, env = "BACKFILL_MAX_SESSIONS", default_value_t = 8)]
    pub max_sessions: u32,
    /// Seconds one target write (a page's transaction) may take before it is KILLed; its
    /// permit stays held until the target shows the connection gone.
    #[arg(
        long,
        env = "BACKFILL_TARGET_WRITE_TIMEOUT_SECS",
        default_value_t = 300
    )]
    pub target_write_timeout_secs: u64,
    /// Rows per second that window page reads may take from each source (0: unlimited).
    #[arg(long, env = "BACKFILL_READ_ROWS_PER_SEC", default_value_t = 0)]
    pub read_rows_per_sec: u32,
    /// Bytes per second that window page reads may take from each source (0: unlimited).
    #[arg(long, env = "BACKFILL_READ_BYTES_PER_SEC", default_value_t = 0)]
    pub read_bytes_per_sec: u32,
    /// Lease owner name; keep it stable so a restarted process takes over at once.
    #[arg(long, env = "BACKFILL_OWNER")]
    pub owner: Option<String>,
    /// Exit once every started job has all windows applied or is paused (after
    /// activation: once its replay caught up with the binlog read so far).
    #[arg(long, env = "BACKFILL_EXIT_WHEN_IDLE")]
    pub exit_when_idle: bool,
    /// Transient failures in a row (a job that cannot start or whose task keeps failing)
    /// after which the table pauses with `retries_exhausted` and the last error, instead
    /// of being started again (backoff 1 s doubling to 60 s between tries).
    #[arg(long, env = "BACKFILL_TASK_RETRIES", default_value_t = crate::supervisor::DEFAULT_TASK_RETRIES)]
    pub task_retries: u32,
    /// Row changes per replay target transaction (whole source transactions are packed; a
    /// larger one is applied in chunks). Safe to change across restarts.
    #[arg(long, env = "BACKFILL_REPLAY_BATCH_ROWS", default_value_t = 20_000)]
    pub replay_batch_rows: usize,
    /// Source transactions handed to one replay apply call at most.
    #[arg(long, env = "BACKFILL_REPLAY_BATCH_GROUPS", default_value_t = 500)]
    pub replay_batch_groups: usize,
    /// How long a schema change applied to the target (DESIGN §16) waits for the target
    /// table's metadata lock before it fails and is tried again (e.g. 30s; a bare number is
    /// seconds): a session holding the table on the target never stalls the stream.
    #[arg(long, env = "BACKFILL_SCHEMA_LOCK_WAIT", default_value = "30s", value_name = "DURATION", value_parser = parse_duration)]
    pub schema_lock_wait: std::time::Duration,
    /// Target connections each table's replay applies on at once, keys split between
    /// them (1..=16; 1 = one connection). Each is a target write: at most
    /// --target-writes. Safe to change across restarts.
    #[arg(
        long,
        env = "BACKFILL_APPLY_STREAMS",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=16)
    )]
    pub apply_streams: u32,
    /// Stop each job once every window is applied (no final fence (F), replay, activation or
    /// streaming).
    #[arg(long, env = "BACKFILL_WINDOWS_ONLY")]
    pub windows_only: bool,
    /// Serve Prometheus metrics on this address (GET /metrics), e.g. 127.0.0.1:9187.
    #[arg(long, env = "BACKFILL_METRICS_ADDR", value_parser = crate::present::metrics::parse_addr)]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The activation audit (and the re-audit on every restart) compares source and
    /// target fields at a pinned binlog point: every row with 1 (the default), or a seeded
    /// sample of about one chunk in N (recorded with its seed; a sample can miss a
    /// difference). See runbooks/activation.md (section 4) for its cost.
    #[arg(
        long,
        env = "BACKFILL_AUDIT_SAMPLE_EVERY",
        default_value_t = 1,
        value_name = "N"
    )]
    pub audit_sample_every: u32,
    /// Keys per chunk of the audit's field comparison.
    #[arg(long, env = "BACKFILL_AUDIT_CHUNK_ROWS", default_value_t = 10_000)]
    pub audit_chunk_rows: usize,
    /// Verify each STREAMING table in turn at a pinned binlog point (every row, chunks of
    /// --audit-chunk-rows), one table at a time, the next starting DURATION after the
    /// previous ended (e.g. 30s, 5m, 1h; a bare number is seconds). A difference pauses
    /// the table with `verify_failed` (runbooks/periodic-verify.md). Default: off.
    #[arg(long, env = "BACKFILL_VERIFY_EVERY", value_name = "DURATION", value_parser = parse_duration)]
    pub verify_every: Option<std::time::Duration>,
    /// Days a STREAMING table's materials (RAW/FINAL pages, manifests) are kept after
    /// activation before GC releases them (0: right after activation; `never`). Its change
    /// log records before every consumer's cursor are deleted once released
    /// (runbooks/retention.md).
    #[arg(long, env = "BACKFILL_RETENTION_DAYS", default_value = "7", value_name = "N|never", value_parser = crate::table::retention::policy::parse_keep)]
    pub retention_days: crate::table::retention::policy::Keep,
    /// Also keep the materials until a periodic verify (--verify-every) passed after
    /// activation.
    #[arg(long, env = "BACKFILL_RETENTION_UNTIL_VERIFY")]
    pub retention_until_verify: bool,
    /// How often each STREAMING table runs a GC pass (e.g. 10m).
    #[arg(long, env = "BACKFILL_GC_EVERY", default_value = "10m", value_name = "DURATION", value_parser = parse_duration)]
    pub gc_every: std::time::Duration,
    /// Change log records deleted per state-store transaction.
    #[arg(
        long,
        env = "BACKFILL_GC_BATCH",
        default_value_t = 1_000,
        value_name = "N"
    )]
    pub gc_batch: u32,
    /// No retention or GC at all: materials and the change log are kept forever.
    #[arg(long, env = "BACKFILL_NO_GC")]
    pub no_gc: bool,
    /// Output format of the final report.
    #[arg(long, env = "BACKFILL_FORMAT", value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Parses a DURATION: a number with a unit `ms`, `s`, `m`, `h` or `d` (a bare number is
/// seconds), above zero.
pub fn parse_duration(s: &str) -> std::result::Result<std::time::Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(split);
    let bad = || format!("`{s}` is not a duration like 500ms, 30s, 5m, 1h or 1d");
    let n: u64 = n.parse().map_err(|_| bad())?;
    let ms = match unit.trim() {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1_000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => return Err(bad()),
    }
    .ok_or_else(bad)?;
    if ms == 0 {
        return Err(format!("`{s}`: the duration must be above zero"));
    }
    Ok(std::time::Duration::from_millis(ms))
}

/// Persists `start` for each job named (or, with `--all`, each installed job not yet
/// started). The session limit is checked for the whole set before any is recorded.
pub async fn start(a: StartArgs) -> Result<String> {
    let pool = kernel::state::open(&a.state.state, &Default::default()).await?;
    let r = start_on(&pool, &a).await;
    pool.close().await;
    let started = r?;
    Ok(match a.format {
        Format::Text if started.is_empty() => {
            "no installed job is waiting for a start command\n".to_string()
        }
        Format::Text => started
            .iter()
            .map(|(j, g)| format!("job {j} {g}: start recorded; `backfill serve` runs it\n"))
            .collect(),
        Format::Json if !a.all && started.len() == 1 => format!(
            "{}\n",
            json!({ "job_id": started[0].0 .0, "generation": started[0].1 .0, "command": "start" })
        ),
        Format::Json => {
            let jobs: Vec<_> = started
                .iter()
                .map(|(j, g)| json!({ "job_id": j.0, "generation": g.0 }))
                .collect();
            format!("{}\n", json!({ "command": "start", "jobs": jobs }))
        }
    })
}

async fn start_on(
    pool: &sqlx::MySqlPool,
    a: &StartArgs,
) -> Result<Vec<(JobId, kernel::ids::Generation)>> {
    use crate::store::commands;
    let jobs: Vec<JobId> = if a.all {
        commands::unstarted(pool).await?
    } else {
        a.jobs.iter().map(|j| JobId(*j)).collect()
    };
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    if let [job] = jobs.as_slice() {
        let g = commands::start_within(pool, *job, a.max_sessions).await?;
        return Ok(vec![(*job, g)]);
    }
    commands::check_sessions(pool, &jobs, a.max_sessions).await?;
    let mut out = Vec::with_capacity(jobs.len());
    for job in jobs {
        out.push((job, commands::start(pool, job).await?));
    }
    Ok(out)
}

/// Refuses `--apply-streams` above `--target-writes`: every apply stream is a target write
/// (DESIGN §8) and a replay batch takes all its permits together, so it could never run.
pub fn check_streams(apply_streams: u32, target_writes: u32) -> Result<()> {
    if apply_streams <= target_writes {
        return Ok(());
    }
    Err(kernel::Error::definite(
        kernel::error::DefiniteCode::Usage,
        format!(
            "--apply-streams {apply_streams} is above --target-writes {target_writes}: each \
             apply stream is one target write and a replay batch needs all of them at once, \
             so it could never be admitted; lower --apply-streams (BACKFILL_APPLY_STREAMS) \
             or raise --target-writes (BACKFILL_TARGET_WRITES) to at least {apply_streams}"
        ),
    ))
}

/// SIGINT (Ctrl-C) or SIGTERM (what systemd and Kubernetes send): both stop serve cleanly
/// (permits released, the serve row marked stopped).
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Runs `serve` until SIGINT/SIGTERM (or idle, with --exit-when-idle).
pub async fn serve(a: ServeArgs, logs: LogCounts) -> Result<String> {
    check_streams(a.apply_streams, a.target_writes)?;
    let mut cfg = ServeConfig::new(&a.state.state, a.data_dir);
    cfg.materials = a.materials.materials.into();
    cfg.lease_ttl = std::time::Duration::from_secs(a.lease_ttl_secs);
    cfg.telemetry = Telemetry::new(logs);
    cfg.sources = a.source;
    cfg.targets = a.target;
    cfg.page_rows = a.page_rows;
    cfg.limits = admission::Limits {
        read_windows: a.read_windows,
        target_writes: a.target_writes,
        sessions: a.max_sessions,
    };
    cfg.deadlines.target_write = std::time::Duration::from_secs(a.target_write_timeout_secs.max(1));
    cfg.rate = admission::RateLimits {
        rows_per_sec: std::num::NonZeroU32::new(a.read_rows_per_sec),
        bytes_per_sec: std::num::NonZeroU32::new(a.read_bytes_per_sec),
    };
    if let Some(o) = a.owner {
        cfg.owner = o;
    }
    cfg.exit_when_idle = a.exit_when_idle;
    cfg.run.fields = crate::table::audit::FieldConfig {
        sample_every: a.audit_sample_every.max(1),
        chunk_rows: a.audit_chunk_rows.max(1),
    };
    cfg.task_retries = a.task_retries;
    cfg.run.verify = a
        .verify_every
        .map(|d| std::sync::Arc::new(crate::table::turns::Turns::new(d)));
    cfg.run.retention = (!a.no_gc).then_some(crate::table::retention::policy::Policy {
        keep: a.retention_days,
        until_verify: a.retention_until_verify,
        every: a.gc_every,
        batch: a.gc_batch.max(1),
    });
    if !a.windows_only {
        cfg.finish = Some(crate::table::replay::ReplayConfig {
            batch_rows: a.replay_batch_rows.max(1),
            batch_groups: a.replay_batch_groups.max(1),
            apply_streams: a.apply_streams as usize,
            schema_lock_wait: a.schema_lock_wait,
            ..Default::default()
        });
    }
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        stop_signal().await;
        c.cancel();
    });
    let metrics = match a.metrics_addr {
        Some(addr) => Some(
            crate::present::metrics::spawn(
                addr,
                &a.state.state,
                cfg.telemetry.clone(),
                cancel.child_token(),
            )
            .await?,
        ),
        None => None,
    };
    let outcomes = supervisor::serve(cfg, cancel.clone()).await;
    if let Some(m) = metrics {
        m.abort();
    }
    let outcomes = outcomes?;
    Ok(match a.format {
        Format::Text => outcomes
            .iter()
            .map(|(j, o)| format!("job {j}: {o}\n"))
            .collect(),
        Format::Json => format!(
            "{}\n",
            json!({ "jobs": outcomes.iter().map(|(j, o)| json!({"job_id": j.0, "outcome": o})).collect::<Vec<_>>() })
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_take_a_unit_or_mean_seconds() {
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in ["", "s", "1x", "-1s", "1.5s", "99999999999999999999d"] {
            let e = parse_duration(bad).expect_err(bad);
            assert!(e.contains("not a duration"), "{bad}: {e}");
        }
        assert!(parse_duration("0s").unwrap_err().contains("above zero"));
    }
}
