//! Continuous replay after activation (DESIGN §7): version after version of the table's
//! schema chain (DESIGN §16), each run under the job's target-write permits per batch,
//! beside the periodic verify and the retention's GC when they are configured.
//!
//! # Why it is safe
//!
//! Nothing here decides about data: each run is [`Finish::stream_admitted`] (or a
//! catch-up) with the target context of the version in force at T's cursor, so a run that
//! applied a DDL ends and the next run re-reads T's cursor for its context; a DDL without
//! a sealed version is sealed only through [`seal_after_stop`]'s proofs, else the table
//! pauses with it.
use super::{ctx_at, finish, seal_after_stop, under_write_permits, Finish};
use crate::table::ctx::JobCtx;
use crate::table::replay::{Outcome, ReplayConfig, Scope, WritePermits};
use crate::table::schema::Chain;
use kernel::error::DefiniteCode;
use kernel::log::LSeq;
use kernel::{Error, Result};
/// Continuous replay after activation, version after version: a run that applied a DDL
/// ends, and the next one writes with the new version's context; a run stopped by a DDL
/// without a sealed version seals it when the proof holds (`schema::seal`), else the
/// table pauses with the DDL and the reason.
pub(super) async fn stream_versions(
    ctx: &JobCtx,
    scope: &Scope,
    chain: &mut Chain,
    cfg: &ReplayConfig,
    b_seq: LSeq,
    exit_when_idle: bool,
) -> Result<Outcome> {
    loop {
        let tctx = ctx_at(ctx, chain).await?;
        let f = finish(ctx, scope, &tctx, chain, cfg);
        let r = stream_once(ctx, &f, cfg, b_seq, exit_when_idle).await;
        match r {
            Ok(o) if o.schema_applied.is_some() => continue,
            Ok(o) => return Ok(o),
            Err(Error::Definite(d)) if d.code == DefiniteCode::SchemaChanged => {
                seal_after_stop(ctx, chain, b_seq, d).await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One replay run after activation: a catch-up (`exit_when_idle`) or following L.
async fn stream_once(
    ctx: &JobCtx,
    f: &Finish<'_>,
    cfg: &ReplayConfig,
    b_seq: LSeq,
    exit_when_idle: bool,
) -> Result<Outcome> {
    if exit_when_idle {
        let what = "replay catch-up";
        let n = cfg.apply_streams;
        let o = under_write_permits(ctx, what, n, &ctx.cancel, f.catch_up(b_seq)).await?;
        if let Some(p) = ctx.cfg.retention {
            crate::table::retention::pass(&f.gc_env(p)).await;
        }
        return Ok(o);
    }
    let permits = WritePermits {
        admission: &ctx.admission,
        owner: format!(
            "job {} {} streaming replay batch",
            ctx.id(),
            ctx.generation()
        ),
        deadline: ctx.cfg.permit_timeout,
        cancel: &ctx.cancel,
        write_deadline: ctx.deadlines.target_write,
    };
    let n = cfg.apply_streams;
    let verify = || {
        let work = crate::table::periodic::compare(ctx, f.replayer(), b_seq);
        under_write_permits(ctx, "periodic verify", n, &ctx.cancel, work)
    };
    let follow = |stop| f.stream_admitted(b_seq, stop, &permits);
    let streaming = crate::table::periodic::stream(ctx, follow, verify);
    let Some(p) = ctx.cfg.retention else {
        return streaming.await;
    };
    let env = f.gc_env(p);
    Box::pin(crate::table::retention::beside(&env, streaming)).await
}
