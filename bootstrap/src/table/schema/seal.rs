//! Sealing the next schema version at a DDL of the table (DESIGN §16): the proof of what
//! the definition after the DDL is, then the seal in the state store. See the module doc
//! of [`super`] for why each condition is needed.
use super::Chain;
use crate::store::schema_versions::{self, SchemaVersion};
use kernel::error::{Definite, DefiniteCode};
use kernel::log::{self, DdlRow, LSeq, RecordBody};
use kernel::schema::SealedSchema;
use kernel::schema_change::{check_after, classify, Classified};
use kernel::{Error, Result};
use sqlx::mysql::MySqlPool;
use std::time::Duration;

/// What sealing the next DDL of the table came to.
#[derive(Debug)]
pub enum Sealed {
    /// The version is sealed (now or by an earlier run).
    Version(SchemaVersion),
    /// L holds no DDL of the table after the chain's last version.
    NoDdl,
    /// The DDL cannot be taken without an operator: the table stays paused with this.
    Refused(Definite),
}

/// The table-generation a seal is for, as L names it.
pub struct Table<'a> {
    pub job: kernel::ids::JobId,
    pub generation: kernel::ids::Generation,
    pub stream: &'a str,
    pub source_db: &'a str,
    pub source_table: &'a str,
}

/// Everything the proof reads.
pub struct SealEnv<'a> {
    pub pool: &'a MySqlPool,
    pub scope: Table<'a>,
    pub source: &'a mysql_async::Opts,
    /// How long to wait for L to reach the source's binlog end.
    pub wait: Duration,
}

fn refused(scope: &Table<'_>, d: &DdlRow, why: String) -> Sealed {
    Sealed::Refused(Definite {
        code: DefiniteCode::SchemaChanged,
        message: format!(
            "job {} {}: the DDL `{}` of `{}`.`{}` at {} (L record {}) is not applied: {why}; \
             the table stays paused there (runbooks/schema-change.md)",
            scope.job,
            scope.generation,
            short(&d.sql),
            scope.source_db,
            scope.source_table,
            d.at,
            d.seq
        ),
    })
}

fn short(sql: &str) -> String {
    sql.chars().take(200).collect()
}

/// The first DDL of the table in L after the chain's last version (after `from`, the
/// record of B, when there is none), up to L's tail.
async fn next_ddl(env: &SealEnv<'_>, chain: &Chain, from: LSeq) -> Result<Option<DdlRow>> {
    let after = chain.versions.last().map_or(from, |v| v.l_seq);
    let s = &env.scope;
    let rows = log::ddls(
        env.pool,
        &s.stream,
        &s.source_db,
        &s.source_table,
        after,
        LSeq::MAX,
    )
    .await?;
    Ok(rows.into_iter().next())
}

/// Seals the version after the table's next unsealed DDL (after L record `from`), if the
/// proof holds.
pub async fn seal_next(env: &SealEnv<'_>, chain: &Chain, from: LSeq) -> Result<Sealed> {
    let Some(d) = next_ddl(env, chain, from).await? else {
        return Ok(Sealed::NoDdl);
    };
    let (n, before) = chain.in_force_after(d.seq);
    let clauses = match classify(&d.sql, before) {
        Classified::Incompatible(i) => {
            return Ok(refused(&env.scope, &d, format!("not compatible: {i}")))
        }
        Classified::Compatible(c) => c,
    };
    let live = match live_definition(env).await? {
        Ok(s) => s,
        Err(why) => return Ok(refused(&env.scope, &d, why)),
    };
    let upto = caught_up(env).await?;
    let s = &env.scope;
    let later = log::ddls(
        env.pool,
        &s.stream,
        &s.source_db,
        &s.source_table,
        d.seq,
        upto,
    )
    .await?;
    if let Some(l) = later.first() {
        return Ok(refused(
            &env.scope,
            &d,
            format!(
                "another DDL of the table (`{}` at {}) followed before this one was sealed, so \
                 the live definition is not the one right after it",
                short(&l.sql),
                l.at
            ),
        ));
    }
    if let Err(i) = check_after(before, &clauses, &live) {
        return Ok(refused(
            &env.scope,
            &d,
            format!("the live definition does not agree with the DDL: {i}"),
        ));
    }
    if let Some(why) = raw_mismatch(env, &live, d.seq, upto).await? {
        return Ok(refused(&env.scope, &d, why));
    }
    let v = SchemaVersion {
        version: n + 1,
        l_seq: d.seq,
        at: d.at.clone(),
        ddl: d.sql.clone(),
        schema: live,
        how: schema_versions::AUTOMATIC.into(),
    };
    schema_versions::seal(env.pool, s.job, s.generation, &v).await?;
    tracing::info!(job = %s.job, version = v.version, at = %v.at, ddl = %short(&v.ddl), "schema version sealed");
    Ok(Sealed::Version(v))
}

/// The source table's definition now, as install seals it.
async fn live_definition(env: &SealEnv<'_>) -> Result<std::result::Result<SealedSchema, String>> {
    let s = &env.scope;
    let mut c = crate::io::connect::connect(env.source.clone(), "source", "(job source)").await?;
    let facts = kernel::introspect::read_table(&mut c, &s.source_db, &s.source_table).await;
    crate::io::connect::close(c).await;
    let Some(facts) = facts? else {
        return Ok(Err("the source table is gone".into()));
    };
    Ok(kernel::introspect::seal(&facts).map_err(|p| {
        let p: Vec<String> = p.iter().map(ToString::to_string).collect();
        format!("the new definition cannot be sealed: {}", p.join("; "))
    }))
}

/// Waits until L holds the source's binlog end read now (after the live definition was
/// read); returns L's tail then.
async fn caught_up(env: &SealEnv<'_>) -> Result<LSeq> {
    let mut c = crate::io::connect::connect(env.source.clone(), "source", "(job source)").await?;
    let end = kernel::lineage::binlog_end(&mut c).await;
    crate::io::connect::close(c).await;
    let deadline = tokio::time::Instant::now() + env.wait;
    let d = log::wait_for_position(env.pool, &env.scope.stream, &end?, deadline).await?;
    Ok(d.tail.seq)
}

/// The first raw rows event of the table after the DDL (up to `upto`, at most 1 000
/// records read) that does not decode against `live`, if any.
async fn raw_mismatch(
    env: &SealEnv<'_>,
    live: &SealedSchema,
    after: LSeq,
    upto: LSeq,
) -> Result<Option<String>> {
    let s = &env.scope;
    let recs = log::table_records(
        env.pool,
        &s.stream,
        &s.source_db,
        &s.source_table,
        after,
        upto,
        1000,
    )
    .await?;
    for r in recs {
        let RecordBody::Chunk(c) = &r.record.body else {
            continue;
        };
        for raw in c
            .raw
            .iter()
            .filter(|x| x.schema == s.source_db && x.table == s.source_table)
        {
            if let Err(e) = kernel::capture::raw::decode_raw(raw, live) {
                return Ok(Some(format!(
                    "rows after it (L record {}) do not decode against the live definition: {e}",
                    r.seq
                )));
            }
        }
    }
    Ok(None)
}

/// Seals every DDL of the table that can be sealed, in order; returns the chain's last
/// outcome: the last version sealed, NoDdl, or the refusal that stops it.
pub async fn seal_all(env: &SealEnv<'_>, chain: &mut Chain, from: LSeq) -> Result<Sealed> {
    let mut last = Sealed::NoDdl;
    loop {
        match seal_next(env, chain, from).await? {
            Sealed::Version(v) => {
                chain.versions.push(v.clone());
                last = Sealed::Version(v);
            }
            Sealed::NoDdl => return Ok(last),
            r @ Sealed::Refused(_) => return Ok(r),
        }
    }
}

impl Sealed {
    /// The refusal as an error (a pause), or None.
    pub fn refusal(self) -> Option<Error> {
        match self {
            Sealed::Refused(d) => Some(Error::Definite(d)),
            _ => None,
        }
    }
}
