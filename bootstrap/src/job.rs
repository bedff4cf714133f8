//! One job's execution task (DESIGN §4): B, the schema re-check, the window loop, and the
//! hand-over point where F (issue 6) continues.
//!
//! Why B is safe: the table is in the reader's capture set before B is written (`serve`
//! adds it first), and capture starts at B's binlog position, decided by the reader from
//! the stream itself. The job waits until L durably holds B, then compares the live source
//! definition with the sealed one: a DDL between install and B would otherwise never be
//! seen (from B on, every DDL is in L and pauses the table there), and checks that no XA
//! transaction is prepared (DESIGN §3.8). Only then does J record
//! CAPTURING(B). A crash before that writes a new B with a new nonce on restart; an extra
//! B of an already captured table changes nothing in the reader.
//!
//! J is the single authority on where the job is; every step re-reads it on restart.
use crate::jobs::JobRecord;
use crate::window::{self, fp, RunConfig, WindowHooks};
use admission::Admission;
use kernel::control::{Intent, IntentKind};
use kernel::error::{Definite, DefiniteCode};
use kernel::failpoint;
use kernel::ids::{Generation, JobId};
use kernel::range::KeyRange;
use kernel::schema::SealedSchema;
use kernel::{Error, Result};
use ledger::journal::{Head, Journal};
use ledger::lease::Lease;
use ledger::material::MaterialStore;
use ledger::record::{JournalRecord, Phase};
use ledger::registry::Registry;
use ledger::target::TargetCtx;
use sqlx::MySqlPool;
use std::sync::Arc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Everything a job's protocol steps need. Built by `serve`; issue 6 (F, replay, audit)
/// and issue 7 (cancel, pause/resume) take the same context.
#[derive(Clone)]
pub struct JobCtx {
    pub job: JobRecord,
    pub schema: SealedSchema,
    pub plan: Vec<KeyRange>,
    pub pool: MySqlPool,
    pub journal: Journal,
    pub lease: Lease,
    pub registry: Registry,
    pub store: Arc<dyn MaterialStore>,
    /// The L stream of the job's source server.
    pub stream: String,
    /// Source connection options (with the password, never printed).
    pub source: mysql_async::Opts,
    /// Target connection options (ledger session settings).
    pub target: mysql_async::Opts,
    pub tctx: TargetCtx,
    pub admission: Admission,
    /// Client deadlines of target writes (a timed-out statement is KILLed and confirmed).
    pub deadlines: crate::bounded::Deadlines,
    /// The source's read rate limits (rows/s, bytes/s), shared by the jobs of one source.
    pub throttle: Arc<admission::Throttle>,
    pub cfg: RunConfig,
    pub hooks: Arc<dyn WindowHooks>,
    pub cancel: CancellationToken,
}

impl JobCtx {
    pub fn id(&self) -> JobId {
        self.job.job_id
    }

    pub fn generation(&self) -> Generation {
        self.job.generation
    }

    /// Paces window page reads to the source's read rate limits (DESIGN §8): call once
    /// per page read. Waits end when the job is asked to stop.
    pub async fn throttle_read(&self, rows: &[kernel::value::Row]) -> Result<()> {
        let n = u32::try_from(rows.len()).unwrap_or(u32::MAX);
        let bytes: u64 = rows.iter().flatten().map(value_bytes).sum();
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
        self.throttle
            .throttle(n, bytes, &self.cancel)
            .await
            .map_err(|_| Error::transient("the job task was asked to stop (read rate limit wait)"))
    }
}

/// About the bytes a value takes on the wire (for the bytes/s read limit).
fn value_bytes(v: &kernel::value::SqlValue) -> u64 {
    use kernel::value::SqlValue as V;
    match v {
        V::Null => 1,
        V::Bytes(b) => b.len() as u64,
        V::Int(_) | V::UInt(_) | V::Double(_) => 8,
        V::Float(_) => 4,
        V::Date(..) => 11,
        V::Time(..) => 12,
    }
}

/// How a job task ended.
#[derive(Debug)]
pub enum Reached {
    /// Every window is sealed, applied and recorded in J (phase WINDOWS, completed = n).
    /// Issue 6 continues from here with F.
    WindowsDone(Box<Head>),
    /// J records a pause with this reason; the job waits for an operator.
    Paused(Definite),
    /// J is past the windows (FENCED or later): not this task's business.
    Beyond(Phase),
}

/// Runs the job from wherever J says it is up to "every window applied".
pub async fn run(ctx: &JobCtx) -> Result<Reached> {
    let mut head = ensure_journal(ctx).await?;
    if let Some(p) = &head.record.paused {
        return Ok(Reached::Paused(p.clone()));
    }
    if head.record.phase == Phase::Installed {
        head = match capture(ctx, head).await? {
            Ok(h) => h,
            Err(d) => return Ok(Reached::Paused(d)),
        };
    }
    if head.record.phase == Phase::Capturing {
        head = append_phase(ctx, &head, Phase::Windows).await?;
    }
    if head.record.phase != Phase::Windows {
        return Ok(Reached::Beyond(head.record.phase));
    }
    panic_seam::hit(ctx.id());
    window::runner::run_windows(ctx, head).await
}

/// Test seam (effective only with fault points compiled in): the task of an armed job
/// panics when it enters the window loop, as a bug would, so tests can check that `serve`
/// pauses that table only and never restarts it in a loop.
pub mod panic_seam {
    use kernel::ids::JobId;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    static ARMED: AtomicU64 = AtomicU64::new(0);
    static HITS: AtomicU32 = AtomicU32::new(0);

    /// Arms the seam for `job` (0 disarms).
    pub fn arm(job: JobId) {
        ARMED.store(job.0, Ordering::SeqCst);
    }

    /// How many times an armed task panicked.
    pub fn hits() -> u32 {
        HITS.load(Ordering::SeqCst)
    }

    pub(crate) fn hit(job: JobId) {
        if kernel::failpoint::ENABLED && job.0 != 0 && ARMED.load(Ordering::SeqCst) == job.0 {
            HITS.fetch_add(1, Ordering::SeqCst);
            panic!("injected panic in the task of job {job} (test seam)");
        }
    }
}

/// The J head, created (INSTALLED) on the first run; the material registry row too.
pub async fn ensure_journal(ctx: &JobCtx) -> Result<Head> {
    ctx.registry.open_table(ctx.id(), None).await?;
    if let Some(h) = ctx.journal.head(ctx.id(), ctx.generation()).await? {
        return Ok(h);
    }
    ctx.journal
        .create(
            &ctx.lease,
            JournalRecord::installed(ctx.id(), ctx.generation()),
        )
        .await
}

async fn append_phase(ctx: &JobCtx, head: &Head, phase: Phase) -> Result<Head> {
    let mut next = head.record.clone();
    next.phase = phase;
    ctx.journal.append(&ctx.lease, head, next).await
}

/// Records a pause in J (the phase stays). Returns the reason.
pub async fn pause(ctx: &JobCtx, head: &Head, reason: Definite) -> Result<Definite> {
    tracing::error!(job = %ctx.id(), reason = %reason, "pausing the table");
    let mut next = head.record.clone();
    next.paused = Some(reason.clone());
    ctx.journal.append(&ctx.lease, head, next).await?;
    crate::metrics::count_pause(reason.code);
    Ok(reason)
}

/// Writes an intent and waits until L durably holds it.
pub async fn write_and_await(
    ctx: &JobCtx,
    intent: &Intent,
    written_fp: &str,
) -> Result<kernel::log::MarkerSeen> {
    let mut conn = crate::connect::connect(ctx.source.clone(), "source", "(job source)").await?;
    let r = kernel::control::write_intent(&mut conn, &ctx.job.control_schema, intent).await;
    crate::connect::close(conn).await;
    r?;
    failpoint::hit(written_fp);
    let deadline = Instant::now() + ctx.cfg.marker_timeout;
    kernel::log::wait_for_marker(&ctx.pool, &ctx.stream, intent.nonce, deadline).await
}

/// Step B: write B, await it in L, re-check the live definition, record CAPTURING(B).
/// The inner error is a definite pause already recorded in J.
async fn capture(ctx: &JobCtx, head: Head) -> Result<std::result::Result<Head, Definite>> {
    let b = Intent::new(ctx.id(), ctx.generation(), IntentKind::B, None, None);
    let seen = write_and_await(ctx, &b, fp::AFTER_B_WRITTEN).await?;
    if let Some(d) = schema_drift(ctx).await? {
        return Ok(Err(pause(ctx, &head, d).await?));
    }
    if let Some(d) = xa_prepared(ctx).await? {
        return Ok(Err(pause(ctx, &head, d).await?));
    }
    let mut next = head.record.clone();
    next.phase = Phase::Capturing;
    next.b = Some(seen.end.pos.clone());
    let h = ctx.journal.append(&ctx.lease, &head, next).await?;
    tracing::info!(job = %ctx.id(), b = %seen.end.pos, "capture effective from B");
    failpoint::hit(fp::AFTER_CAPTURING);
    Ok(Ok(h))
}

/// Compares the live source definition with the sealed one (after B is durable).
async fn schema_drift(ctx: &JobCtx) -> Result<Option<Definite>> {
    let mut conn = crate::connect::connect(ctx.source.clone(), "source", "(job source)").await?;
    let facts =
        kernel::introspect::read_table(&mut conn, &ctx.schema.database, &ctx.schema.table).await;
    crate::connect::close(conn).await;
    let what = ctx.schema.qualified();
    let Some(facts) = facts? else {
        return Ok(Some(Definite {
            code: DefiniteCode::SchemaChanged,
            message: format!("source table {what} is gone (dropped or renamed) since install"),
        }));
    };
    let live = match kernel::introspect::seal(&facts) {
        Ok(s) => s,
        Err(problems) => {
            let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            return Ok(Some(changed(&what, &list)));
        }
    };
    let diff = ctx.schema.differences(&live);
    Ok((!diff.is_empty()).then(|| changed(&what, &diff)))
}

/// DESIGN §3.8: `XA RECOVER` must be empty when B becomes durable. A transaction prepared
/// before B commits later at a position the reader cannot tie to its PREPARE.
async fn xa_prepared(ctx: &JobCtx) -> Result<Option<Definite>> {
    use mysql_async::prelude::Queryable;
    let mut conn = crate::connect::connect(ctx.source.clone(), "source", "(job source)").await?;
    let rows: std::result::Result<Vec<mysql_async::Row>, _> = conn.query("XA RECOVER").await;
    crate::connect::close(conn).await;
    let rows = rows.map_err(|e| kernel::error::from_mysql("XA RECOVER on the source", &e))?;
    Ok((!rows.is_empty()).then(|| Definite {
        code: DefiniteCode::Precondition,
        message: format!(
            "{} prepared XA transaction(s) on the source when B became durable (XA RECOVER): \
             commit or roll them back (XA COMMIT/XA ROLLBACK), then resume the job",
            rows.len()
        ),
    }))
}

fn changed(what: &str, diff: &[String]) -> Definite {
    Definite {
        code: DefiniteCode::SchemaChanged,
        message: format!(
            "source table {what} changed between install and B ({}): the sealed schema no \
             longer describes it; cancel and re-install the table",
            diff.join("; ")
        ),
    }
}

/// Maps an error of a job step: a definite error pauses the table in J, a transient one
/// is returned for the caller's retry.
pub async fn pause_on_definite(ctx: &JobCtx, head: &Head, e: Error) -> Result<Reached> {
    match e {
        Error::Definite(d) if d.code == DefiniteCode::Fenced => Err(Error::Definite(d)),
        Error::Definite(d) => Ok(Reached::Paused(pause(ctx, head, d).await?)),
        t => Err(t),
    }
}
