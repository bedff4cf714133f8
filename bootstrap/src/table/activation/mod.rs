//! From "every window applied" to STREAMING and beyond (DESIGN §6, §7): fence, replay of
//! (B, F], activation audit, activation, then continuous replay. Each step is idempotent
//! and decided from J, T and L as they stand, so the sequence is re-entered from the top
//! after a crash at any instant (DESIGN §11 I4); see [`crate::table::fence`], [`crate::table::replay`]
//! and [`crate::table::audit`] for the argument of each step.
mod follow;
mod permits;

pub(crate) use permits::under_write_permits;

use crate::table::audit::{
    self, Activated, FieldComparer, FieldConfig, FieldRequest, FieldSample, Sources,
};
use crate::table::ctx::{JobCtx, Reached};
use crate::table::fence::{self, FenceEnv};
use crate::table::replay::{self, MarkerAt, Outcome, ReplayConfig, Replayer, Scope, WritePermits};
use crate::table::schema::{self, Chain};
use kernel::control::IntentKind;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::log::LSeq;
use kernel::range::KeyRange;
use kernel::{Error, Result};
use ledger::journal::Journal;
use ledger::lease::Lease;
use ledger::material::MaterialStore;
use ledger::record::Phase;
use ledger::target::TargetCtx;
use sqlx::mysql::MySqlPool;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// Everything the finish needs (the job task builds it from its context).
pub struct Finish<'a> {
    pub pool: &'a MySqlPool,
    pub scope: Scope,
    pub journal: &'a Journal,
    pub lease: &'a Lease,
    pub store: &'a dyn MaterialStore,
    pub plan: &'a [KeyRange],
    pub schema_fingerprint: Digest,
    pub source: &'a crate::io::pool::ConnPool,
    pub control_schema: &'a str,
    pub target: &'a crate::io::pool::ConnPool,
    pub ctx: &'a TargetCtx,
    /// The table's schema chain (DESIGN §16); `ctx` is the target context of the version
    /// in force at T's cursor.
    pub chain: Option<&'a Chain>,
    pub replay: ReplayConfig,
    /// Bound on waiting for L to hold F.
    pub marker_wait: Duration,
    /// The audit's field comparison (`crate::table::audit::fields`); None only for library
    /// callers that compare by other means (the audit report then says `not run`).
    pub fields: Option<FieldGate<'a>>,
}

/// What the audit's field comparison needs: the comparer, its configuration, and the
/// read-window admission its source read view counts against (DESIGN §8).
#[derive(Clone, Copy)]
pub struct FieldGate<'a> {
    pub comparer: &'a dyn FieldComparer,
    pub config: FieldConfig,
    pub admission: &'a admission::Admission,
    pub permit_timeout: Duration,
    pub cancel: &'a CancellationToken,
}

/// A fence taken: B, F recorded in J, and how long it took.
#[derive(Debug)]
pub struct FenceTaken {
    b: MarkerAt,
    fenced: fence::Fenced,
    took: Duration,
}

/// Where the finish got to.
#[derive(Debug)]
pub struct Activation {
    pub b: MarkerAt,
    pub f: MarkerAt,
    pub replayed: Outcome,
    pub activated: Activated,
}

impl Finish<'_> {
    async fn target_conn(&self) -> Result<crate::io::pool::Pooled> {
        self.target
            .connect(crate::io::pool::Use::Control, "(target)")
            .await
    }

    fn journal_missing(&self) -> Error {
        Error::definite(
            DefiniteCode::JournalMissing,
            format!(
                "job {} {}: no journal record",
                self.scope.job, self.scope.generation
            ),
        )
    }

    /// What GC of this table needs (`crate::table::retention`).
    pub fn gc_env(
        &self,
        policy: crate::table::retention::policy::Policy,
    ) -> crate::table::retention::GcEnv<'_> {
        crate::table::retention::GcEnv {
            pool: self.pool,
            scope: &self.scope,
            store: self.store,
            target: self.target,
            ctx: self.ctx,
            plan: self.plan,
            schema_fingerprint: self.schema_fingerprint,
            chain: self.chain,
            policy,
        }
    }

    /// B as J records it, found in L.
    pub async fn b(&self) -> Result<MarkerAt> {
        let head = self
            .journal
            .head(self.scope.job, self.scope.generation)
            .await?
            .ok_or_else(|| self.journal_missing())?;
        let b = head.record.b.as_ref().ok_or_else(|| {
            Error::definite(
                DefiniteCode::JournalMissing,
                format!(
                    "job {}: the journal records no start position (B)",
                    self.scope.job
                ),
            )
        })?;
        replay::find_marker(self.pool, &self.scope, IntentKind::B, Some(b))
            .await?
            .ok_or_else(|| {
                Error::definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!(
                        "job {}: the journal records the start position (B) at {b} but the change log \
                         holds no start marker (B) there",
                        self.scope.job
                    ),
                )
            })
    }

    /// F (written if needed), replay of (B, F], audit and activation. Idempotent; on a
    /// table already STREAMING it re-audits (credential and accepted cursor) only.
    /// A cancel recorded for the table-generation refuses activation (see
    /// [`Finish::activate_unless`]).
    pub async fn activate(&self) -> Result<Activation> {
        self.activate_unless(&CancellationToken::new())
            .await?
            .ok_or_else(|| {
                Error::definite(
                    DefiniteCode::Usage,
                    format!(
                        "job {} {}: a cancel is recorded: the table is not activated;                          `backfill serve` completes the cancel",
                        self.scope.job, self.scope.generation
                    ),
                )
            })
    }

    /// As [`Finish::activate`], but returns `None` without writing the activation
    /// credential when the job is asked to stop (`stop`) or a cancel is recorded for it:
    /// DESIGN §8, a CANCELING table is never published.
    pub async fn activate_unless(&self, stop: &CancellationToken) -> Result<Option<Activation>> {
        self.activate_after(None, stop).await
    }

    /// As [`Finish::activate_unless`], going on from a fence [`Finish::fence_ahead`] took
    /// (J's B and F never change once recorded, and J changes only under this job's lease).
    pub async fn activate_fenced(
        &self,
        fenced: FenceTaken,
        stop: &CancellationToken,
    ) -> Result<Option<Activation>> {
        self.activate_after(Some(fenced), stop).await
    }

    async fn activate_after(
        &self,
        fenced: Option<FenceTaken>,
        stop: &CancellationToken,
    ) -> Result<Option<Activation>> {
        let fenced = match fenced {
            Some(f) => f,
            None => self.fence_ahead().await?,
        };
        self.activate_on(fenced, stop).await
    }

    /// True when the job must not be activated: asked to stop, or a cancel is recorded in
    /// the state store (read there, so a cancel recorded before serve's next poll counts).
    async fn stopped(&self, stop: &CancellationToken) -> Result<bool> {
        if stop.is_cancelled() {
            return Ok(true);
        }
        let (job, g) = (self.scope.job, self.scope.generation);
        crate::store::commands::has(self.pool, job, g, crate::store::commands::CANCEL).await
    }

    /// The fence alone (F written if needed, recorded in J, J moved to `Replaying`),
    /// outside any target-write permit: it writes no target row (F is a source intent, J
    /// is in the state store, T is only read), and most of its time is the wait for L to
    /// hold F. Taken before the permits (`activate_versions`), it no longer holds a
    /// target-write slot idle while a capture round trip passes; [`Finish::activate_fenced`]
    /// goes on from it. Idempotent (`fence::fence`).
    pub async fn fence_ahead(&self) -> Result<FenceTaken> {
        let started = std::time::Instant::now();
        let b = self.b().await?;
        let fenced = fence::fence(FenceEnv {
            pool: self.pool,
            scope: &self.scope,
            journal: self.journal,
            lease: self.lease,
            store: self.store,
            planned: self.plan.len(),
            target: self.target,
            ctx: self.ctx,
            source: self.source,
            control_schema: self.control_schema,
            wait: self.marker_wait,
        })
        .instrument(crate::profile_span!("fence", self.scope.job))
        .await?;
        if fenced.head.record.phase == Phase::Fenced {
            audit::advance_j(
                self.journal,
                self.lease,
                self.scope.job,
                self.scope.generation,
                Phase::Replaying,
            )
            .await?;
            kernel::failpoint::hit(crate::table::faults::ACTIVATE_AFTER_J_REPLAYING);
        }
        Ok(FenceTaken {
            b,
            fenced,
            took: started.elapsed(),
        })
    }

    /// The replay of (B, F], the field check and the audit. A target control connection
    /// is held for the audit only: the replay and the field check take their own
    /// (cursor reads), and a task holding a control slot while it waits for another
    /// deadlocked `--target-writes 4` (four activations held the four control slots,
    /// each waiting for a fifth until the 120 s slot wait failed them, again and again).
    async fn activate_on(
        &self,
        fenced: FenceTaken,
        stop: &CancellationToken,
    ) -> Result<Option<Activation>> {
        let FenceTaken {
            b,
            fenced,
            took: fence_took,
        } = fenced;
        let started = std::time::Instant::now();
        let replayed = if fenced.head.record.phase == Phase::Streaming {
            Outcome::default()
        } else {
            replay::replay_to(&self.replayer(), b.seq, fenced.f.seq)
                .instrument(crate::profile_span!("replay", self.scope.job))
                .await?
        };
        if let Some(v) = replayed.schema_applied {
            // The run ended at a DDL in (B, F] (DESIGN §16): this finish's context is of
            // the version before it; the caller runs again with the next one's.
            return Err(version_applied(&self.scope, v));
        }
        let replayed_at = started.elapsed();
        crate::seams::activation_gate::reached(self.scope.job).await;
        // The audit's reads of materials and of L from B to F do not depend on the field
        // check: they run while it does (audit::prefetch says why reading them early is
        // safe). Not on a table already STREAMING, whose evidence retention may release.
        let streaming = fenced.head.record.phase == Phase::Streaming;
        let check = self
            .compare_fields(b.seq)
            .instrument(crate::profile_span!("audit.fields", self.scope.job));
        let (fields, prefetched) = tokio::join!(check, async {
            if streaming {
                Default::default()
            } else {
                audit::prefetch(self.pool, &self.scope, self.store, self.chain).await
            }
        });
        let fields = fields?;
        let checked_at = started.elapsed();
        // The last instant before T may record the activation credential. A cancel
        // recorded after this check finds the credential in T and drains to K (T decides).
        if self.stopped(stop).await? {
            tracing::info!(job = %self.scope.job, "stopped before activation (cancel recorded or task asked to stop): no activation credential");
            return Ok(None);
        }
        let mut tc = self.target_conn().await?;
        let activated = audit::activate(
            &mut Sources {
                pool: self.pool,
                scope: &self.scope,
                store: self.store,
                target: &mut tc,
                ctx: self.ctx,
                plan: self.plan,
                schema_fingerprint: self.schema_fingerprint,
                chain: self.chain,
            },
            self.journal,
            self.lease,
            fields,
            prefetched,
        )
        .instrument(crate::profile_span!("audit.activate", self.scope.job))
        .await;
        tc.close().await;
        let activated = activated?;
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            job = %self.scope.job,
            fence_ms = ms(fence_took),
            replay_ms = ms(replayed_at),
            field_check_ms = ms(checked_at.saturating_sub(replayed_at)),
            audit_ms = ms(started.elapsed().saturating_sub(checked_at)),
            "activation steps"
        );
        Ok(Some(Activation {
            b,
            f: fenced.f,
            replayed,
            activated,
        }))
    }

    /// The audit's field comparison at a pinned point (replaying the target there), recorded
    /// in the state store before it is judged so `status` shows it either way.
    ///
    /// The comparison holds a consistent snapshot open on the source, so it runs under a
    /// read-window permit like a window's read view (DESIGN §8: at most `--read-windows`
    /// at once). It is taken while this finish holds its target-write permits; no cycle
    /// can form, because a read-permit holder (a window's read view) never waits for a
    /// write permit: it releases its read permit once its connection is closed, before
    /// its pages are applied. It is asked ahead of the windows' reads
    /// (`acquire_read_ahead`): queued behind them it kept the target-write permits idle
    /// while the windows' page writes waited for those permits (measured at 1 000 tables:
    /// the first 100 field checks took 505 ms each, 65-88 ms once the windows were done).
    /// The permit is released when the comparer has closed its connections, and kept as a
    /// hold (release unknown) when it says it could not.
    async fn compare_fields(&self, b_seq: LSeq) -> Result<Option<FieldSample>> {
        let Some(gate) = self.fields else {
            return Ok(None);
        };
        let (job, g) = (self.scope.job, self.scope.generation);
        let owner = format!("job {job} {g} activation field check");
        let permit = gate
            .admission
            .acquire_read_ahead(&owner, gate.permit_timeout, gate.cancel)
            .await
            .map_err(|e| Error::transient(format!("{owner}: {e}")))?;
        let started = std::time::Instant::now();
        let replayer = self.replayer();
        let compared = gate
            .comparer
            .compare(FieldRequest {
                replayer: &replayer,
                b_seq,
                key: crate::store::jobs::key_columns(&self.ctx.schema),
                config: gate.config,
                seed: rand::random(),
            })
            .await;
        crate::io::bounded::settle(permit, &compared);
        let sample = compared?;
        crate::store::field_checks::record(self.pool, job, g, &sample.record()).await?;
        tracing::info!(
            %job,
            rows = sample.rows_checked,
            differences = sample.differences(),
            mode = %sample.mode,
            walk_ms = sample.elapsed_ms,
            total_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "activation field check (pin, replay to P, compare)"
        );
        Ok(Some(sample))
    }

    /// The replayer of this table, with this finish's target and batch sizes.
    pub fn replayer(&self) -> Replayer<'_> {
        Replayer {
            pool: self.pool,
            scope: &self.scope,
            source: self.source,
            target: self.target,
            ctx: self.ctx,
            cfg: &self.replay,
            chain: self.chain,
        }
    }

    /// Continuous replay after activation, until `cancel`.
    pub async fn stream(&self, b_seq: LSeq, cancel: CancellationToken) -> Result<Outcome> {
        let r = self.replayer();
        replay::follow(&r, b_seq, cancel).await
    }

    /// As [`Finish::stream`], each replay batch under its own target-write permit from
    /// `permits` (DESIGN §8: STREAMING writes count against `--target-writes`; a batch
    /// on N apply streams takes N permits together). Never call this under
    /// [`under_write_permits`] (a nested acquire deadlocks at 1 permit).
    pub async fn stream_admitted(
        &self,
        b_seq: LSeq,
        cancel: CancellationToken,
        permits: &WritePermits<'_>,
    ) -> Result<Outcome> {
        let r = self.replayer();
        replay::follow_admitted(&r, b_seq, cancel, permits).await
    }

    /// Continuous replay up to the source's binlog end as it is now (waiting, within
    /// `marker_wait`, until L holds it), then return.
    pub async fn catch_up(&self, b_seq: LSeq) -> Result<Outcome> {
        let mut c = self
            .source
            .connect(crate::io::pool::Use::Control, "(job source)")
            .await?;
        let end = match kernel::lineage::binlog_end(&mut c).await {
            Ok(raw) => kernel::log::live_position(self.pool, &self.scope.stream, &mut c, raw).await,
            Err(e) => Err(e),
        };
        c.close().await;
        let deadline = tokio::time::Instant::now() + self.marker_wait;
        kernel::log::wait_for_position(self.pool, &self.scope.stream, &end?, deadline).await?;
        let r = self.replayer();
        replay::catch_up(&r, b_seq).await
    }

    /// Activation then streaming until `cancel`.
    pub async fn run(&self, cancel: CancellationToken) -> Result<(Activation, Outcome)> {
        let a = self.activate().await?;
        let o = self.stream(a.b.seq, cancel).await?;
        Ok((a, o))
    }
}

/// The job task's continuation after the window protocol (the hand-over point of
/// `crate::table`): F, replay, audit, activation, then continuous replay until the job is
/// cancelled (or, with `exit_when_idle`, until caught up with L once). A definite failure
/// (failed audit, evidence conflict, a pause seen in L) pauses the table in J with the
/// reason; the table then does not enter (or stays out of) STREAMING.
///
/// While STREAMING, a compatible DDL of the table is sealed as the next schema version
/// and applied in replay order (DESIGN §16, `crate::table::schema`): each replay run
/// writes with the target context of the version in force at T's cursor and ends right
/// after a DDL's step, and the next run takes the next version's context.
pub async fn after_windows(
    ctx: &JobCtx,
    reached: Reached,
    cfg: &ReplayConfig,
    exit_when_idle: bool,
) -> Result<Reached> {
    match &reached {
        Reached::WindowsDone(_) => {}
        Reached::Beyond(Phase::Fenced | Phase::Replaying | Phase::Audited | Phase::Streaming) => {}
        _ => return Ok(reached),
    }
    let scope = Scope::of(&ctx.job, ctx.stream.clone());
    let r = async {
        let mut chain = schema::load(
            &ctx.pool,
            ctx.id(),
            ctx.generation(),
            &ctx.schema,
            &ctx.stream,
        )
        .await?;
        let Some(a) = activate_versions(ctx, &scope, &mut chain, cfg).await? else {
            return Ok(None);
        };
        tracing::info!(
            job = %ctx.id(),
            f = %a.f.end.pos,
            replayed = a.replayed.groups_applied,
            "activation audit passed: STREAMING"
        );
        follow::stream_versions(ctx, &scope, &mut chain, cfg, a.b.seq, exit_when_idle)
            .await
            .map(Some)
    }
    .await;
    match r {
        // Stopped before activation (a cancel recorded, or serve stopping): J stays where
        // replay left it; the task's caller completes a recorded cancel (no credential in
        // T, so no drain: CANCELLED(K) with the partial target kept unpublished).
        Ok(None) => Ok(Reached::Beyond(Phase::Replaying)),
        Ok(Some(_)) => Ok(Reached::Beyond(Phase::Streaming)),
        Err(Error::Definite(d)) => {
            let head = ctx
                .journal
                .head(ctx.id(), ctx.generation())
                .await?
                .ok_or_else(|| {
                    Error::definite(
                        DefiniteCode::JournalMissing,
                        format!("job {} {}: no journal record", ctx.id(), ctx.generation()),
                    )
                })?;
            Ok(Reached::Paused(
                crate::table::pause::pause(ctx, &head, d).await?,
            ))
        }
        Err(e) => Err(e),
    }
}

/// The transient "again" of a finish whose replay applied schema version `v` on its way
/// (replay of (B, F], or the field check's replay to its pin): nothing is wrong, the
/// finish runs again with the target context of the version now in force at T's cursor.
fn version_applied(scope: &Scope, v: u32) -> Error {
    Error::transient(format!(
        "job {} {}: schema version {v} was applied during replay; the activation runs again \
         with its definition",
        scope.job, scope.generation
    ))
}

/// The activation (the audit, and on a restart of a STREAMING table the re-audit), with the
/// target context of the version in force at T's cursor. A DDL met on the way, in the
/// replay of (B, F] or in the field check's replay to its pin, is sealed and applied like
/// while following (DESIGN §16), and the finish runs again with the new version's
/// context. A DDL during the windows was taken there (`crate::table::window::versions`):
/// the target is at the version in force at T's cursor when the replay of (B, F] begins,
/// and the DDLs after the cursor apply in binlog order exactly as while STREAMING.
async fn activate_versions(
    ctx: &JobCtx,
    scope: &Scope,
    chain: &mut Chain,
    cfg: &ReplayConfig,
) -> Result<Option<Activation>> {
    loop {
        let (version, tctx) = schema::in_force(&ctx.target, &ctx.tctx, chain).await?;
        let f = finish(ctx, scope, &tctx, chain, cfg);
        let what = "replay up to the final fence (F) and activation";
        // Boxed: the activation future is large (fence, replay and audit state).
        let n = cfg.apply_streams;
        let r = async {
            let fenced = f.fence_ahead().await?;
            let work = Box::pin(f.activate_fenced(fenced, &ctx.cancel));
            under_write_permits(ctx, what, n, &ctx.cancel, work).await
        }
        .await;
        match r {
            Err(Error::Definite(d)) if d.code == DefiniteCode::SchemaChanged => {
                let b = replay::find_marker(&ctx.pool, scope, IntentKind::B, None)
                    .await?
                    .map_or(LSeq::ZERO, |m| m.seq);
                seal_after_stop(ctx, chain, b, d).await?;
            }
            // The replay of (B, F] or the field check's replay applied a DDL on its way
            // (a run ends there): again, with that version's context.
            Err(e)
                if e.is_transient()
                    && schema::in_force(&ctx.target, &ctx.tctx, chain).await?.0 != version =>
            {
                tracing::info!(job = %ctx.id(), error = %e, "a schema version was applied during the activation: again with its definition");
            }
            other => return other,
        }
    }
}

/// After replay stopped with `stop` (`schema_changed`): seals the table's next DDLs after
/// L record `b` (its B) that can be sealed ([`schema::seal_more`]). Ok when at least one
/// version was sealed (the caller runs again); else the refusal that stopped the seal, or
/// `stop` itself (no DDL to seal: a table-map mismatch, a DDL before STREAMING).
pub(crate) async fn seal_after_stop(
    ctx: &JobCtx,
    chain: &mut Chain,
    b: LSeq,
    stop: kernel::error::Definite,
) -> Result<()> {
    let scope = Scope::of(&ctx.job, ctx.stream.clone());
    let env = schema::seal::SealEnv {
        pool: &ctx.pool,
        scope: scope.seal_table(),
        source: &ctx.source,
        wait: ctx.cfg.marker_timeout,
        scratch: Some(schema::scratch::Scratch {
            target: &ctx.target,
            db: &ctx.job.target.db,
        }),
    };
    let before = chain.versions.len();
    if let Some(refused) = schema::seal_more(&env, chain, b).await? {
        return Err(refused);
    }
    if chain.versions.len() == before {
        return Err(Error::Definite(stop));
    }
    Ok(())
}

/// The job's target context of the version in force at T's cursor.
pub(crate) async fn ctx_at(ctx: &JobCtx, chain: &Chain) -> Result<TargetCtx> {
    schema::ctx_at(&ctx.target, &ctx.tctx, chain).await
}

/// The finish of the job with target context `tctx` (of the version in force at T's
/// cursor) and `chain`.
fn finish<'a>(
    ctx: &'a JobCtx,
    scope: &Scope,
    tctx: &'a TargetCtx,
    chain: &'a Chain,
    cfg: &ReplayConfig,
) -> Finish<'a> {
    Finish {
        pool: &ctx.pool,
        scope: scope.clone(),
        journal: &ctx.journal,
        lease: &ctx.lease,
        store: ctx.store.as_ref(),
        plan: &ctx.plan,
        // Version 1's (install's seal); a window read after a DDL carries the version in
        // force at its LOW, which the audit takes from the chain.
        schema_fingerprint: ctx.schema.fingerprint(),
        source: &ctx.source,
        control_schema: &ctx.job.control_schema,
        target: &ctx.target,
        ctx: tctx,
        chain: Some(chain),
        replay: cfg.clone(),
        marker_wait: ctx.cfg.marker_timeout,
        fields: Some(FieldGate {
            comparer: ctx.fields.as_ref(),
            config: ctx.cfg.fields,
            admission: &ctx.admission,
            permit_timeout: ctx.cfg.permit_timeout,
            cancel: &ctx.cancel,
        }),
    }
}
