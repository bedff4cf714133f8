//! Gathering the evidence (I/O): J's rows and the range chain, the registry, each
//! registered material (one at a time, reduced to its facts), T's credentials, cursor and
//! activation credential, and L from B to F. Nothing here decides; the checks do.
use super::evidence::{Evidence, Facts, Link, LogFacts, Snapshot, Stored};
use crate::table::replay::{self, Scope};
use kernel::control::IntentKind;
use kernel::ids::Digest;
use kernel::position::BinlogPos;
use kernel::range::KeyRange;
use kernel::{log, Result};
use ledger::journal::Journal;
use ledger::material::MaterialStore;
use ledger::record::JournalRecord;
use ledger::registry::{Kind, Registry};
use ledger::target::{self, TargetCtx};
use sqlx::mysql::MySqlPool;

/// Where the audit reads from.
pub struct Sources<'a> {
    pub pool: &'a MySqlPool,
    pub scope: &'a Scope,
    pub store: &'a dyn MaterialStore,
    pub target: &'a mut mysql_async::Conn,
    pub ctx: &'a TargetCtx,
    pub plan: &'a [KeyRange],
    pub schema_fingerprint: Digest,
    /// The table's schema chain (DESIGN §16): a DDL in (B, F] with a sealed version, and
    /// the rows after it, are read as replay reads them. None: L is read with version 1.
    pub chain: Option<&'a crate::table::schema::Chain>,
}

fn err_text<T>(r: Result<T>) -> std::result::Result<T, String> {
    r.map_err(|e| e.to_string())
}

/// Materials read at once by the audit: each is reduced to its facts as soon as it is read,
/// so at most this many pages are in memory.
const READS_AT_ONCE: usize = 4;

/// Reads every digest of `wanted` not answered yet into `materials` (a digest listed twice
/// is read once, as its last kind), [`READS_AT_ONCE`] at a time.
async fn snap_all(
    store: &dyn MaterialStore,
    wanted: Vec<(Digest, Kind)>,
    materials: &mut Snapshot,
) {
    use futures_util::stream::{self, StreamExt as _};
    let wanted: std::collections::BTreeMap<Digest, Kind> = wanted
        .into_iter()
        .filter(|(d, _)| !materials.answers.contains_key(d))
        .collect();
    let mut read = stream::iter(wanted)
        .map(|(d, kind)| async move { (d, snap(store, &d, kind).await) })
        .buffer_unordered(READS_AT_ONCE);
    while let Some((d, stored)) = read.next().await {
        materials.answers.insert(d, stored);
    }
}

/// One material read, verified and reduced to what the checks need; its page bytes are
/// dropped as soon as it is. The shared copy is read, not a host's cache (the store
/// decompresses and hashes it off this task; its facts come from its head, no row is
/// decoded).
async fn snap(store: &dyn MaterialStore, d: &Digest, kind: Kind) -> Stored {
    match store.get_shared(d).await {
        Ok(Some(b)) if kind == Kind::Manifest => Stored::Manifest(b),
        Ok(Some(b)) => Stored::Facts(Facts::of(kind, &b)),
        Ok(None) => Stored::Missing,
        Err(e) => Stored::Bad(e.to_string()),
    }
}

/// Chain fields read per round trip.
const LINKS_PAGE: u32 = 5_000;

/// Reads L from B to F: the chain fields of every record (links and each record's own
/// chain step), and the table's last group at or before F.
///
/// Why no other body is read: the check of DESIGN §7 is that L's hash chain is intact
/// from B to F, and the chain is over (prev, seq, body digest), so the chain fields
/// decide it; a body is checked against its digest by every reader of it (replay applied
/// the table's records through that check). The one group the audit needs whole is the
/// table's last one up to F, which T's cursor must name: it is found through L's table
/// index (written in the transaction that appends the record, and the index replay
/// itself follows), read, verified and built here. Reading every body of the stream from
/// B to F made each activation cost the whole stream's traffic since its B: quadratic
/// in the tables of a stream (issue 17). A change replay missed anywhere in (B, F] is
/// the field check's finding (`super::fields`), not this one's.
async fn read_log(
    pool: &MySqlPool,
    scope: &Scope,
    chain: Option<&crate::table::schema::Chain>,
    journal_b: Option<&BinlogPos>,
    journal_f: Option<&BinlogPos>,
) -> Result<LogFacts> {
    let mut facts = LogFacts {
        b: match journal_b {
            Some(b) => replay::find_marker(pool, scope, IntentKind::B, Some(b)).await?,
            None => None,
        },
        f: match journal_f {
            Some(f) => replay::find_marker(pool, scope, IntentKind::F, Some(f)).await?,
            None => None,
        },
        ..LogFacts::default()
    };
    let (Some(b), Some(f)) = (facts.b.clone(), facts.f.clone()) else {
        return Ok(facts);
    };
    let from = log::LSeq(b.seq.0.saturating_sub(1));
    read_links(pool, &scope.stream, from, f.seq, &mut facts).await?;
    last_group(pool, scope, chain, from, f.seq, &mut facts).await?;
    Ok(facts)
}

/// Every record's chain fields in `(after, upto]` into `facts.links`; a record whose own
/// chain step does not verify is a read error naming it.
async fn read_links(
    pool: &MySqlPool,
    stream: &str,
    mut after: log::LSeq,
    upto: log::LSeq,
    facts: &mut LogFacts,
) -> Result<()> {
    while after < upto {
        let page = log::read_links(pool, stream, after, upto, LINKS_PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.seq;
        for l in page {
            if !l.step_verifies() {
                facts.read_errors.push(format!(
                    "change log record {}: chain digest does not verify",
                    l.seq
                ));
            }
            facts.links.push(Link {
                seq: l.seq,
                prev: l.prev_chain,
                chain: l.chain,
            });
        }
    }
    Ok(())
}

/// Index entries of the table looked at, newest first, before the audit gives up looking
/// for a group with changes (entries of pauses and DDLs only hold none).
const LAST_GROUP_LOOK: u32 = 64;

/// The table's last complete group with changes in `(after, upto]` into
/// `facts.last_group`: the index's newest entries, each read as its whole group from its
/// first chunk (chunks are consecutive records) and built as replay builds it
/// ([`replay::finish_group`]); a group that does not read or build is a read error and
/// ends the search (an older group must not stand in for it).
async fn last_group(
    pool: &MySqlPool,
    scope: &Scope,
    chain: Option<&crate::table::schema::Chain>,
    after: log::LSeq,
    upto: log::LSeq,
    facts: &mut LogFacts,
) -> Result<()> {
    let (db, table) = (&scope.source_db, &scope.source_table);
    let seqs =
        log::table_seqs_desc(pool, &scope.stream, db, table, after, upto, LAST_GROUP_LOOK).await?;
    let mut below = log::LSeq::MAX;
    for seq in seqs {
        if seq >= below {
            continue; // a chunk of a group already looked at
        }
        let built = match first_chunk(pool, &scope.stream, seq).await {
            Ok(first) => {
                below = first.seq;
                replay::finish_group(pool, scope, chain, vec![first], upto).await
            }
            Err(e) => Err(e),
        };
        match built {
            Ok(replay::Built::Complete { group, .. }) if !group.changes.is_empty() => {
                facts.last_group = Some((group.end.clone(), group.digest()));
                return Ok(());
            }
            Ok(_) => {}
            Err(e) if e.is_transient() => return Err(e),
            Err(e) => {
                facts.read_errors.push(e.to_string());
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The first chunk of the group holding record `seq` (`seq` minus its chunk number),
/// verified; `seq` itself is read once only when it is the first.
async fn first_chunk(pool: &MySqlPool, stream: &str, seq: log::LSeq) -> Result<log::StoredRecord> {
    let at = |s: log::LSeq| log::read_range(pool, stream, log::LSeq(s.0.saturating_sub(1)), s, 1);
    let missing = |s: log::LSeq| {
        kernel::Error::definite(
            kernel::error::DefiniteCode::EvidenceCorrupt,
            format!("the change log's table index names record {seq}, but the change log does not hold record {s}"),
        )
    };
    let r = at(seq)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| missing(seq))?;
    if r.record.chunk == 0 {
        return Ok(r);
    }
    let first = log::LSeq(seq.0.saturating_sub(u64::from(r.record.chunk)));
    at(first)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| missing(first))
}

/// The registry's entries, usage and registered sum of one job as of one instant: every
/// registration and release changes the job's usage row in its own transaction, so the
/// three reads are taken again while the usage read before them differs from the one
/// after (a release committing in between would otherwise look like a usage mismatch).
async fn registry_view(
    reg: &Registry,
    job: kernel::ids::JobId,
    g: kernel::ids::Generation,
) -> Result<(
    Vec<ledger::registry::Entry>,
    Option<ledger::registry::Usage>,
    u64,
)> {
    let mut tries = 0;
    loop {
        let before = reg.usage(job).await?;
        let entries = reg.entries(job, g).await?;
        let sum = reg.registered_bytes(job).await?;
        let usage = reg.usage(job).await?;
        tries += 1;
        if usage == before || tries == 5 {
            return Ok((entries, usage, sum));
        }
    }
}

/// Reads the registered materials and the range chain's manifests into `materials`
/// (those it does not hold yet).
async fn snap_registered(
    store: &dyn MaterialStore,
    entries: Option<&[ledger::registry::Entry]>,
    chain: Option<&[(ledger::chain::ChainEntry, Digest)]>,
    materials: &mut Snapshot,
) {
    if let Some(entries) = entries {
        let wanted = entries.iter().map(|e| (e.digest, e.kind)).collect();
        snap_all(store, wanted, materials).await;
    }
    if let Some(c) = chain {
        let wanted = c
            .iter()
            .map(|(e, _)| (e.manifest_hash, Kind::Manifest))
            .collect();
        snap_all(store, wanted, materials).await;
    }
}

/// What [`gather_with`] may take as already read: materials, and L from B to F.
#[derive(Clone, Debug, Default)]
pub struct Prefetched {
    pub materials: Snapshot,
    /// L's facts, with the B and F of J's head they were read for.
    pub log: Option<(Option<BinlogPos>, Option<BinlogPos>, LogFacts)>,
}

/// The materials and L facts [`gather_with`] will read, read ahead: the activation reads
/// them while its field check runs on the servers, instead of after it.
///
/// Why an answer read early is still the answer: materials are content-addressed (a
/// digest's bytes never change), and nothing releases a table-generation's materials or
/// L records before it is STREAMING (retention starts after activation), so a material
/// present and verified now is present and verified at the audit. L's records from B to
/// F are appended once and never rewritten, J records B and F once and never changes
/// them (`ledger::record::check_transition`), and the audit uses these facts only when
/// J's head still names the same B and F. Callers prefetch only before STREAMING. A
/// material read that fails here is not trusted: it is left out, and the audit reads it
/// again itself; so is L when its read fails. The registry and the chain are read again
/// by the audit, which reads any material registered since.
pub async fn prefetch(
    pool: &MySqlPool,
    scope: &Scope,
    store: &dyn MaterialStore,
    schema_chain: Option<&crate::table::schema::Chain>,
) -> Prefetched {
    let (job, g) = (scope.job, scope.generation);
    let journal = Journal::new(pool.clone());
    let chain = journal.chain(job, g).await.ok();
    let entries = Registry::new(pool.clone()).entries(job, g).await.ok();
    let mut materials = Snapshot::default();
    let (_, log) = tokio::join!(
        snap_registered(store, entries.as_deref(), chain.as_deref(), &mut materials),
        async {
            let head = journal.head(job, g).await.ok()??;
            let (b, f) = (head.record.b.clone(), head.record.f.clone());
            let facts = read_log(pool, scope, schema_chain, b.as_ref(), f.as_ref()).await;
            facts.ok().map(|l| (b, f, l))
        }
    );
    materials
        .answers
        .retain(|_, a| matches!(a, Stored::Manifest(_) | Stored::Facts(_)));
    Prefetched { materials, log }
}

/// Gathers every piece of evidence the audit checks.
pub async fn gather(s: &mut Sources<'_>) -> Result<Evidence> {
    gather_with(s, Prefetched::default()).await
}

/// [`gather`], with the material answers of a [`prefetch`] taken as already read.
pub async fn gather_with(s: &mut Sources<'_>, prefetched: Prefetched) -> Result<Evidence> {
    let (job, g) = (s.scope.job, s.scope.generation);
    let journal = Journal::new(s.pool.clone());
    let rows = journal.rows(job, g).await?;
    let head = rows
        .last()
        .and_then(|r| JournalRecord::decode(&r.bytes).ok());
    let chain = err_text(journal.chain(job, g).await);
    let reg = Registry::new(s.pool.clone());
    let registry = err_text(registry_view(&reg, job, g).await);
    let Prefetched {
        mut materials,
        log: early_log,
    } = prefetched;
    snap_registered(
        s.store,
        registry.as_ref().ok().map(|(e, _, _)| e.as_slice()),
        chain.as_ref().ok().map(|c| c.as_slice()),
        &mut materials,
    )
    .await;
    let credentials = err_text(target::page_credentials(s.target, s.ctx).await);
    let cursor = err_text(target::replay_cursor(s.target, s.ctx, false).await);
    let activation = err_text(target::read_activation(s.target, s.ctx).await);
    let (jb, jf) = (
        head.as_ref().and_then(|h| h.b.as_ref()),
        head.as_ref().and_then(|h| h.f.as_ref()),
    );
    let log = match early_log {
        Some((b, f, facts)) if b.as_ref() == jb && f.as_ref() == jf && jf.is_some() => Ok(facts),
        _ => err_text(read_log(s.pool, s.scope, s.chain, jb, jf).await),
    };
    let b_seq = match &log {
        Ok(l) => l.b.as_ref().map_or(kernel::log::LSeq::ZERO, |m| m.seq),
        Err(_) => kernel::log::LSeq::ZERO,
    };
    let schema = err_text(
        super::schema::gather(
            s.pool,
            s.scope,
            b_seq,
            s.target,
            s.ctx,
            s.schema_fingerprint,
        )
        .await,
    );
    // Read last: a material or L record found missing above was released before this
    // read (the intent is durable before any byte goes), never after it.
    let released = released_of(s.pool, job, g).await?;
    let horizon = log::horizon(s.pool, &s.scope.stream).await?;
    Ok(Evidence {
        released,
        horizon,
        schema,
        job,
        generation: g,
        plan: s.plan.to_vec(),
        schema_fingerprint: s.schema_fingerprint,
        journal: rows,
        chain,
        registry,
        materials,
        credentials,
        cursor,
        activation,
        log,
        fields: None,
    })
}

/// The table-generation's recorded release (intent or done), if any.
async fn released_of(
    pool: &MySqlPool,
    job: kernel::ids::JobId,
    g: kernel::ids::Generation,
) -> Result<Option<super::ReleasedEvidence>> {
    use crate::store::retention as rows;
    let Some(r) = rows::read(pool, job, g).await? else {
        return Ok(None);
    };
    if r.state < rows::INTENT {
        return Ok(None);
    }
    let record = super::released::ReleaseRecord::decode(r.record.as_deref().unwrap_or_default())
        .map_err(|e| format!("the release record does not decode: {e}"));
    Ok(Some(super::ReleasedEvidence {
        done: r.state == rows::DONE,
        at: r.done_at.or(r.intent_at).unwrap_or_default(),
        record,
    }))
}
