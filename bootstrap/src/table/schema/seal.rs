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
    /// The source's pool (a control slot for each read here).
    pub source: &'a crate::io::pool::ConnPool,
    /// How long to wait for L to reach the source's binlog end.
    pub wait: Duration,
    /// Where a DDL followed by another one may be run on a scratch table (None: such a
    /// DDL is refused).
    pub scratch: Option<super::scratch::Scratch<'a>>,
}

fn refused(scope: &Table<'_>, d: &DdlRow, why: String) -> Sealed {
    Sealed::Refused(Definite {
        code: DefiniteCode::SchemaChanged,
        message: format!(
            "job {} {}: the DDL `{}` of `{}`.`{}` at {} (change log record {}) is not applied: {why}; \
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
        s.stream,
        s.source_db,
        s.source_table,
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
    let later = later_ddl(env, &d, upto).await?;
    if let (Some(l), Some(s)) = (&later, env.scratch) {
        return seal_derived(env, s, d, (n, before), &clauses, l.seq).await;
    }
    if let Some(l) = later {
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
    seal_at(env, d, n + 1, live, schema_versions::AUTOMATIC).await
}

/// Seals the version after DDL `d` (version `n`, `before` in force before it) when the
/// table's next DDL is already in L at `next`: derived on a scratch table
/// ([`super::scratch`]), then the same checks as a live definition, with the rows up to
/// `next`.
async fn seal_derived(
    env: &SealEnv<'_>,
    s: super::scratch::Scratch<'_>,
    d: DdlRow,
    (n, before): (u32, &SealedSchema),
    clauses: &[kernel::schema_change::Alteration],
    next: LSeq,
) -> Result<Sealed> {
    let after = match super::scratch::derive(s, env.scope.job, before, &d.sql).await? {
        Ok(a) => a,
        Err(why) => return Ok(refused(&env.scope, &d, why)),
    };
    if let Err(i) = check_after(before, clauses, &after) {
        let why = format!("the definition derived from the DDL does not agree with it: {i}");
        return Ok(refused(&env.scope, &d, why));
    }
    if let Some(why) = raw_mismatch(env, &after, d.seq, next).await? {
        return Ok(refused(&env.scope, &d, why));
    }
    seal_at(env, d, n + 1, after, schema_versions::DERIVED).await
}

/// The first DDL of the table in L after `d` up to `upto` (the live definition read before
/// `upto` is then not the one right after `d`).
async fn later_ddl(env: &SealEnv<'_>, d: &DdlRow, upto: LSeq) -> Result<Option<DdlRow>> {
    let s = &env.scope;
    let later = log::ddls(env.pool, s.stream, s.source_db, s.source_table, d.seq, upto).await?;
    Ok(later.into_iter().next())
}

/// Seals `live` as `version` at DDL `d` (`how`: automatic or refresh).
async fn seal_at(
    env: &SealEnv<'_>,
    d: DdlRow,
    version: u32,
    live: SealedSchema,
    how: &str,
) -> Result<Sealed> {
    let s = &env.scope;
    let v = SchemaVersion {
        version,
        l_seq: d.seq,
        at: d.at,
        ddl: d.sql,
        schema: live,
        how: how.into(),
    };
    schema_versions::seal(env.pool, s.job, s.generation, &v).await?;
    tracing::info!(job = %s.job, version = v.version, at = %v.at, how, ddl = %short(&v.ddl), "schema version sealed");
    Ok(Sealed::Version(v))
}

/// The source table's definition now, as install seals it.
async fn live_definition(env: &SealEnv<'_>) -> Result<std::result::Result<SealedSchema, String>> {
    let s = &env.scope;
    let mut c = env
        .source
        .connect(crate::io::pool::Use::Control, "(schema seal)")
        .await?;
    let facts = kernel::introspect::read_table(&mut c, s.source_db, s.source_table).await;
    c.close().await;
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
    let mut c = env
        .source
        .connect(crate::io::pool::Use::Control, "(schema seal)")
        .await?;
    let end = match kernel::lineage::binlog_end(&mut c).await {
        Ok(raw) => log::live_position(env.pool, env.scope.stream, &mut c, raw).await,
        Err(e) => Err(e),
    };
    c.close().await;
    let deadline = tokio::time::Instant::now() + env.wait;
    let d = log::wait_for_position(env.pool, env.scope.stream, &end?, deadline).await?;
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
        s.stream,
        s.source_db,
        s.source_table,
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
                    "rows after it (change log record {}) do not decode against the live definition: {e}",
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

/// What `refresh-schema` checks on the target: its connection and table.
pub struct TargetTable<'a> {
    pub opts: &'a mysql_async::Opts,
    pub db: &'a str,
    pub table: &'a str,
    /// Run the DDL's own clauses on the target when it is compatible and the target does
    /// not match yet (`refresh-schema --apply`).
    pub apply: bool,
}

/// `backfill refresh-schema` (seed 003, DESIGN §16): seals the version after the table's
/// next unsealed DDL from the live definition, for a DDL the service refused, once the
/// operator made the target match. Refused, naming why, when: L holds a later DDL of the
/// table (up to the source's binlog end read after the live definition), the rows after
/// the DDL do not decode against the live definition (it differs from the binlog's), the
/// table's key changed, or the target's definition is not the live one.
pub async fn refresh(
    env: &SealEnv<'_>,
    chain: &Chain,
    from: LSeq,
    target: &TargetTable<'_>,
) -> Result<Sealed> {
    let Some(d) = next_ddl(env, chain, from).await? else {
        return Ok(Sealed::NoDdl);
    };
    let (n, before) = chain.in_force_after(d.seq);
    if let Some(why) = kernel::schema_change::refresh_refusal(&d.sql) {
        return Ok(refused(
            &env.scope,
            &d,
            format!("{why}; re-add the table (runbooks/cancel-and-readd.md)"),
        ));
    }
    let live = match live_definition(env).await? {
        Ok(s) => s,
        Err(why) => return Ok(refused(&env.scope, &d, why)),
    };
    if let Some(why) = key_changed(before, &live) {
        return Ok(refused(&env.scope, &d, why));
    }
    let upto = caught_up(env).await?;
    if let Some(l) = later_ddl(env, &d, upto).await? {
        let why = format!(
            "a later DDL of the table is already in the capture log (`{}` at {}, change log record {}): \
             the live definition is not the one right after this DDL; re-add the table",
            short(&l.sql),
            l.at,
            l.seq
        );
        return Ok(refused(&env.scope, &d, why));
    }
    if let Some(why) = raw_mismatch(env, &live, d.seq, upto).await? {
        return Ok(refused(
            &env.scope,
            &d,
            format!("the live definition differs from the binlog's: {why}"),
        ));
    }
    if let Some(why) = target_matches(target, &d, before, &live).await? {
        return Ok(refused(&env.scope, &d, why));
    }
    seal_at(env, d, n + 1, live, schema_versions::REFRESH).await
}

/// Why the key is not the sealed one any more (the range plan and the sort keys are).
fn key_changed(before: &SealedSchema, live: &SealedSchema) -> Option<String> {
    let cols =
        |s: &SealedSchema| -> Vec<kernel::schema::ColumnDef> { s.key_columns().cloned().collect() };
    (before.key_name != live.key_name || cols(before) != cols(live)).then(|| {
        format!(
            "the table's key changed ({} to {}): the range plan and the sort keys are sealed on \
             it; re-add the table",
            before.describe_key(),
            live.describe_key()
        )
    })
}

/// The DDL is in the compatible class: its clauses are (from the text) and the live
/// definition is what they make of `before` (a MODIFY that narrows is a compatible clause
/// whose result is not).
fn compatible(
    sql: &str,
    before: &SealedSchema,
    live: &SealedSchema,
) -> std::result::Result<(), kernel::schema_change::Incompatible> {
    match classify(sql, before) {
        Classified::Incompatible(i) => Err(i),
        Classified::Compatible(c) => check_after(before, &c, live),
    }
}

async fn read_target(
    c: &mut mysql_async::Conn,
    t: &TargetTable<'_>,
) -> Result<Option<SealedSchema>> {
    let f = kernel::introspect::read_table(c, t.db, t.table).await?;
    Ok(f.and_then(|f| kernel::introspect::seal(&f).ok()))
}

/// None when the target's definition is the live one (after running the DDL's clauses
/// there with `apply`, for a compatible DDL); else why not.
async fn target_matches(
    t: &TargetTable<'_>,
    d: &DdlRow,
    before: &SealedSchema,
    live: &SealedSchema,
) -> Result<Option<String>> {
    let mut c = ledger::apply::connect(t.opts).await?;
    let r = target_matches_on(&mut c, t, d, before, live).await;
    crate::io::connect::close(c).await;
    r
}

async fn target_matches_on(
    c: &mut mysql_async::Conn,
    t: &TargetTable<'_>,
    d: &DdlRow,
    before: &SealedSchema,
    live: &SealedSchema,
) -> Result<Option<String>> {
    use mysql_async::prelude::Queryable;
    let Some(mut have) = read_target(c, t).await? else {
        return Ok(Some(format!(
            "the target table `{}`.`{}` is missing or cannot be read",
            t.db, t.table
        )));
    };
    if have.fingerprint() != live.fingerprint() && t.apply {
        let quoted = format!(
            "{}.{}",
            kernel::schema::quote_ident(t.db),
            kernel::schema::quote_ident(t.table)
        );
        let refuse = |i: kernel::schema_change::Incompatible| {
            Error::definite(
                DefiniteCode::Usage,
                format!(
                    "--apply runs only a compatible DDL; this one is not: {i}; make the \
                     target match by hand"
                ),
            )
        };
        compatible(&d.sql, before, live).map_err(refuse)?;
        let stmt =
            kernel::schema_change::target_statement(&d.sql, before, &quoted).map_err(refuse)?;
        if let Some(sql) = stmt {
            c.query_drop(&sql).await.map_err(|e| {
                kernel::error::from_target_write(&format!("refresh-schema --apply (`{sql}`)"), &e)
            })?;
        }
        have = match read_target(c, t).await? {
            Some(h) => h,
            None => return Ok(Some("the target table cannot be read after --apply".into())),
        };
    }
    if have.fingerprint() == live.fingerprint() {
        return Ok(None);
    }
    Ok(Some(format!(
        "the target's definition is not the source's ({}); make it match (SHOW CREATE TABLE on \
         both) or pass --apply for a compatible DDL, then run refresh-schema again",
        live.differences(&have).join("; ")
    )))
}
