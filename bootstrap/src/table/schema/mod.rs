//! Schema changes of a captured table (DESIGN §16): the chain of sealed versions, the
//! proof that seals the next one at a DDL, and the DDL's application to the target in
//! replay order.
//!
//! # Why it is safe
//!
//! * The capture never guesses: at a DDL of the table it pauses the table at the DDL's
//!   position and keeps every later rows event raw, as for any pause (DESIGN §3.7).
//! * A version is sealed at the DDL only after [`seal`] has proven what it is: the live
//!   definition read from the source, with the source's binlog end read after it, and
//!   L holding no other DDL of the table up to that end, so the live definition is the one
//!   in force right after this DDL; the statement classifies compatible and the
//!   definitions before and after agree with its clauses
//!   ([`kernel::schema_change::check_after`]); every raw rows event after the DDL in L
//!   decodes against it. Anything else leaves the table paused with the reason.
//! * Replay decodes the raw rows against the version in force at their record, with the
//!   capture's own decoder and checks ([`crate::table::replay::table_part`]), and applies
//!   the DDL to the target as the one step of its own group ([`step`]): the source's
//!   clause text on the target table, then the target's definition must have the
//!   version's fingerprint, then one T transaction moves the cursor past the DDL's group
//!   and records the version ([`ledger::schema`]). Rows before it were applied in the old
//!   shape, rows after it in the new one, each run of replay with the target context of
//!   the version in force at T's cursor ([`Chain::in_force_at`]).
//! * A restart anywhere repeats only what T does not record: a DDL already run on the
//!   target (the cursor still before its group) is recognised by the target's definition
//!   and not run again.
//!
//! Layout: `chain` (pure) the versions and which is in force where, `step` the DDL on the
//! target and in T, `seal` the proof and the seal, `scratch` the definition after a DDL
//! that another DDL already followed.
mod chain;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod scratch;
pub mod seal;
pub mod step;

pub use chain::{later, Chain, InForce};

use crate::store::schema_versions;
use kernel::ids::{Generation, JobId};
use kernel::schema::SealedSchema;
use kernel::{Error, Result};
use ledger::target::TargetCtx;
use sqlx::mysql::MySqlPool;

/// The chain of the job-generation: `install` (version 1, source names) and the versions
/// sealed since, with the lineage digest of `stream`.
pub async fn load(
    pool: &MySqlPool,
    job: JobId,
    g: Generation,
    install: &SealedSchema,
    stream: &str,
) -> Result<Chain> {
    let versions = schema_versions::versions(pool, job, g).await?;
    let lineage = match kernel::log::load_position(pool, stream).await? {
        Some(d) => d.lineage.digest(),
        None => kernel::ids::Digest([0; 32]),
    };
    Ok(Chain {
        install: install.clone(),
        versions,
        lineage,
    })
}

/// `schema` (source names) with the target's database and table: the definition a target
/// context writes with.
pub fn on_target(schema: &SealedSchema, target: &SealedSchema) -> SealedSchema {
    let mut s = schema.clone();
    s.database = target.database.clone();
    s.table = target.table.clone();
    s
}

/// The target context `base` (version 1's) with the definition of the version in force at
/// T's cursor (the key's columns by that definition: an ADD COLUMN FIRST moves them; the
/// key itself is the same, [`kernel::schema_change::check_after`]).
pub async fn ctx_at(
    target: &crate::io::pool::ConnPool,
    base: &TargetCtx,
    chain: &Chain,
) -> Result<TargetCtx> {
    Ok(in_force(target, base, chain).await?.1)
}

/// As [`ctx_at`], with the number of the version in force (1: the install's). Two
/// versions may have one definition (an index is not part of it): the number tells them
/// apart.
pub async fn in_force(
    target: &crate::io::pool::ConnPool,
    base: &TargetCtx,
    chain: &Chain,
) -> Result<(u32, TargetCtx)> {
    if chain.versions.is_empty() {
        return Ok((1, base.clone()));
    }
    let mut tc = target
        .connect(
            crate::io::pool::Use::Control,
            "(schema version at the target ledger's cursor)",
        )
        .await?;
    let cursor = ledger::target::replay_cursor(&mut tc, base, false).await;
    tc.close().await;
    let cursor = cursor?;
    let (n, schema) = chain
        .in_force_at(cursor.as_ref().map(|c| &c.end))
        .map_err(Error::Definite)?;
    let mut t = base.clone();
    t.schema = on_target(schema, &base.schema);
    t.keyer = crate::store::jobs::keyer(&t.schema)?;
    Ok((n, t))
}

/// Seals the table's next DDLs after L record `b` (its B) that can be sealed
/// ([`seal::seal_all`]); the refusal that stops it, if any (None: sealed what there was,
/// or there was nothing). `chain` gets the new versions.
pub async fn seal_more(
    env: &seal::SealEnv<'_>,
    chain: &mut Chain,
    b: kernel::log::LSeq,
) -> Result<Option<Error>> {
    let mut next = chain.clone();
    let r = seal::seal_all(env, &mut next, b).await?;
    *chain = next;
    Ok(r.refusal())
}
