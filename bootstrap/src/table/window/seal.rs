//! Steps 5-7 of a window (DESIGN §5): HIGH, the reconcile fold over L, FINAL pages and the
//! manifest sealed, then the seal row that names the manifest.
//!
//! Why it is safe: HIGH is awaited in L, so every change of the table committed before
//! HIGH is in L with seq <= HIGH's record; the fold reads exactly the records in
//! (LOW, HIGH] (by L seq, which is binlog order), keeps the changes of this table whose
//! old or new key is in the range and folds them by key and full image
//! (`crate::table::window::reconcile`, I1). A pause the reader recorded for the table at
//! or before HIGH means L lacks decoded changes: the window refuses to seal (definite, I6),
//! unless it is a DDL whose schema version is sealed before LOW, after which the rows
//! kept raw decode with that version (`crate::table::window::versions`). The order of
//! writes is the ledger's (`ledger::seal`): page bytes fsynced, registry, manifest; the
//! seal row comes last, so a seal row always names a complete, durable manifest.
use crate::table::ctx::JobCtx;
use crate::table::schema::Chain;
use crate::table::window::read::ReadView;
use crate::table::window::reconcile::{self, Folded, Raw};
use crate::table::window::versions;
use kernel::change::Change;
use kernel::error::{from_sqlx, DefiniteCode};
use kernel::ids::{Attempt, Digest, WindowId};
use kernel::key::{weigh, Keyer};
use kernel::log::MarkerSeen;
use kernel::range::KeyRange;
use kernel::value::Row;
use kernel::{Error, Result};
use ledger::seal::{SealedWindow, WindowFacts};
use std::cmp::Ordering;
use tracing::Instrument;

/// Checks LOW <= S < HIGH for the read view's binlog point S (when the server reports it).
///
/// A window whose LOW and HIGH lie in two lineage epochs (a repoint between them: its read
/// view was on the old server) is not sealed: a transient failure, so the window is read
/// again as a new attempt on the new server (sealed windows are kept as they are).
pub fn check_snapshot(low: &MarkerSeen, high: &MarkerSeen, view: &ReadView) -> Result<()> {
    if low.end.pos.epoch() != high.end.pos.epoch() {
        return Err(Error::transient(format!(
            "LOW {} and HIGH {} lie on two sides of a source repoint: the window is read \
             again as a new attempt on the new source",
            low.end.pos, high.end.pos
        )));
    }
    let Some(s) = &view.snapshot else {
        return Ok(());
    };
    let ok = matches!(low.end.pos.try_cmp(s), Ok(Ordering::Less | Ordering::Equal))
        && matches!(s.try_cmp(&high.end.pos), Ok(Ordering::Less));
    if ok {
        return Ok(());
    }
    Err(Error::definite(
        DefiniteCode::EvidenceConflict,
        format!(
            "read view at {s} does not lie between LOW {} and HIGH {}: the fence does not hold \
             (is the binlog commit-ordered?)",
            low.end.pos, high.end.pos
        ),
    ))
}

/// Asks the source for the weights of the character keys of `rows` not cached (DESIGN
/// §14): one connection, batches of `weigh::BATCH` values; nothing when all are cached.
async fn weigh_rows<'r>(
    ctx: &JobCtx,
    keyer: &Keyer,
    rows: impl IntoIterator<Item = &'r Row>,
) -> Result<()> {
    let missing = keyer.unweighed(rows);
    if missing.is_empty() {
        return Ok(());
    }
    let mut conn = ctx
        .source
        .connect(crate::io::pool::Use::Control, "(key weights)")
        .await?;
    let n = missing.len();
    let trips = weigh::weigh_values(&mut conn, keyer, &missing).await?;
    tracing::debug!(job = %ctx.id(), values = n, trips, "asked the source for key weights");
    conn.close().await;
    Ok(())
}

/// The reconcile fold (`reconcile`): the changes' keys weighed, their net effect, the
/// weights of the RAW rows it may touch (mostly the changes' own values, cached), merged.
async fn fold(
    ctx: &JobCtx,
    (w, a): (WindowId, Attempt),
    (range, keyer): (&KeyRange, &Keyer),
    raw: Raw,
    changes: &[Change],
) -> Result<Folded> {
    let refused = |e: reconcile::FoldError| {
        Error::definite(
            DefiniteCode::Uncapturable,
            format!(
                "{} {w} {a}: the reconcile fold refused: {e}",
                ctx.schema.qualified()
            ),
        )
    };
    weigh_rows(ctx, keyer, changes.iter().flat_map(Change::images)).await?;
    let net = reconcile::net_effect(range, keyer, changes).map_err(refused)?;
    weigh_rows(ctx, keyer, raw.touched(&net)).await?;
    reconcile::merge(keyer, raw, net).map_err(refused)
}

/// Folds L over the RAW rows and seals FINAL pages and the manifest, then the seal row.
/// `ctx` holds the schema version the window was read in, `chain` the table's versions
/// (rows kept raw after a DDL sealed before LOW are decoded with the version in force).
pub async fn seal(
    ctx: &JobCtx,
    (w, a): (WindowId, Attempt),
    (range, keyer): (&KeyRange, &Keyer),
    (low, high): (&MarkerSeen, &MarkerSeen),
    view: ReadView,
    chain: &Chain,
) -> Result<SealedWindow> {
    let changes = versions::changes_between(ctx, chain, low.seq, high.seq).await?;
    let folded = fold(ctx, (w, a), (range, keyer), view.raw, &changes)
        .instrument(crate::profile_span!("window.fold", ctx.id(), w))
        .await?;
    let facts = WindowFacts {
        job: ctx.id(),
        generation: ctx.generation(),
        window: w,
        range: range.clone(),
        attempt: a,
        low: low.end.pos.clone(),
        high: high.end.pos.clone(),
        snapshot: view.snapshot,
        schema_fingerprint: ctx.schema.fingerprint(),
        raw_pages: view.raw_pages,
        folded_digest: folded.changes_digest,
        folded_changes: folded.changes_folded,
    };
    let rows = folded.rows;
    let sealed = ledger::seal::seal_window(
        ctx.store.as_ref(),
        &ctx.registry,
        facts,
        rows,
        ctx.cfg.page_rows,
    )
    .instrument(crate::profile_span!("window.final_seal", ctx.id(), w))
    .await?;
    record_seal(ctx, w, a, &sealed.manifest_hash).await?;
    Ok(sealed)
}

/// Writes the seal row (idempotent for the same hash; another hash is a conflict).
async fn record_seal(ctx: &JobCtx, w: WindowId, a: Attempt, hash: &Digest) -> Result<()> {
    sqlx::query(
        "INSERT IGNORE INTO window_seals (job_id, generation, window_id, attempt, manifest_hash) \
         VALUES (?, ?, ?, ?, ?)",
    )
    .bind(ctx.id().0)
    .bind(ctx.generation().0)
    .bind(w.0)
    .bind(a.0)
    .bind(&hash.0[..])
    .execute(&ctx.pool)
    .await
    .map_err(|e| from_sqlx("recording a window seal", &e))?;
    match sealed_hash(ctx, w, a).await? {
        Some(h) if &h == hash => Ok(()),
        other => Err(Error::definite(
            DefiniteCode::EvidenceConflict,
            format!("{w} {a}: the seal row names manifest {other:?}, this attempt sealed {hash}"),
        )),
    }
}

/// The manifest hash sealed for (window, attempt), if any.
pub async fn sealed_hash(ctx: &JobCtx, w: WindowId, a: Attempt) -> Result<Option<Digest>> {
    let row: Option<Vec<u8>> = sqlx::query_scalar(
        "SELECT manifest_hash FROM window_seals WHERE job_id = ? AND generation = ? \
         AND window_id = ? AND attempt = ?",
    )
    .bind(ctx.id().0)
    .bind(ctx.generation().0)
    .bind(w.0)
    .bind(a.0)
    .fetch_optional(&ctx.pool)
    .await
    .map_err(|e| from_sqlx("reading a window seal", &e))?;
    row.map(|b| {
        Digest::from_slice(&b).ok_or_else(|| {
            Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!("{w} {a}: the seal row's manifest hash is not 32 bytes"),
            )
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel::change::GroupEnd;
    use kernel::control::{Intent, IntentKind};
    use kernel::ids::{Attempt, Generation, JobId, WindowId};
    use kernel::log::LSeq;
    use kernel::position::BinlogPos;

    fn seen(kind: IntentKind, pos: BinlogPos) -> MarkerSeen {
        let intent = Intent::new(
            JobId(1),
            Generation(1),
            kind,
            Some(WindowId(1)),
            Some(Attempt(1)),
        );
        MarkerSeen {
            intent,
            obsolete: false,
            seq: LSeq(1),
            end: GroupEnd { pos, gtid: None },
        }
    }

    fn view(snapshot: Option<BinlogPos>) -> ReadView {
        ReadView {
            snapshot,
            raw_pages: Vec::new(),
            raw: Default::default(),
        }
    }

    #[test]
    fn a_window_across_a_repoint_is_read_again_not_sealed() {
        let old = |p| BinlogPos::new("mysql-bin.000003", p);
        let new = |p| BinlogPos::new("mysql-bin.000001", p).in_epoch(1);
        let low = seen(IntentKind::Low, old(100));
        let high = seen(IntentKind::High, old(300));
        assert!(check_snapshot(&low, &high, &view(Some(old(200)))).is_ok());
        let e = check_snapshot(&low, &high, &view(Some(old(400)))).expect_err("outside");
        assert!(!e.is_transient());
        // LOW on the old server, HIGH on the new one: transient (a new attempt), never sealed.
        let straddling = seen(IntentKind::High, new(50));
        let e = check_snapshot(&low, &straddling, &view(Some(old(200)))).expect_err("straddles");
        assert!(e.is_transient(), "{e}");
        assert!(check_snapshot(&low, &straddling, &view(None)).is_err());
        // Both on the new server: the usual check, in the new epoch.
        let (l2, h2) = (
            seen(IntentKind::Low, new(50)),
            seen(IntentKind::High, new(90)),
        );
        assert!(check_snapshot(&l2, &h2, &view(Some(new(60)))).is_ok());
    }
}
