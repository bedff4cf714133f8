//! The release of a held XA group at its `XA COMMIT`: the held chunks are read back a few
//! at a time and appended again unchanged as the commit's group, the last one carrying the
//! hold's release, so the hold goes in the transaction that moves D past the commit.
//! L and the holds disagreeing is definite.

use super::store::{queue, Pending, Replay, Writer};
use super::Ctx;
use crate::capture::assemble::Release;
use crate::error::{DefiniteCode, Error, Result};
use crate::failpoint;
use crate::log::{self, Entry, RecordBody};

/// Appends the held chunks of `rel.xid` again as the chunks of its XA COMMIT's group,
/// reading a few held records at a time (memory stays bounded by the chunk size).
/// Everything queued before is stored first, so the hold is visible to the reads.
pub(super) async fn release(
    ctx: &Ctx<'_>,
    replay: &mut Replay,
    writer: Writer,
    batch: &mut Pending,
    rel: &Release,
) -> Result<Writer> {
    let mut writer = writer
        .send(batch.take())
        .await?
        .sync(ctx.pool, ctx.progressed)
        .await?;
    failpoint::hit("capture.before_release");
    let hold = match find_hold(ctx, rel).await {
        Ok(h) => h,
        Err(e) => return Err(writer.abandon(e).await),
    };
    let mut after = log::LSeq(hold.first_seq.0.saturating_sub(1));
    while after < hold.last_seq {
        let page = match held_page(ctx, rel, &hold, after).await {
            Ok(p) => p,
            Err(e) => return Err(writer.abandon(e).await),
        };
        for (seq, entry) in page {
            after = seq;
            if let Err(e) = queue(ctx, replay, batch, entry).await {
                return Err(writer.abandon(e).await);
            }
            if batch.full(ctx.cfg) {
                writer = writer.send(batch.take()).await?;
            }
        }
    }
    Ok(writer)
}

fn bad_release(ctx: &Ctx<'_>, rel: &Release, what: String) -> Error {
    Error::definite(
        DefiniteCode::EvidenceCorrupt,
        format!(
            "stream `{}`: releasing XA {} at {}: {what}",
            ctx.stream, rel.xid, rel.end.pos
        ),
    )
}

async fn find_hold(ctx: &Ctx<'_>, rel: &Release) -> Result<log::Hold> {
    log::holds(ctx.pool, ctx.stream)
        .await?
        .into_iter()
        .find(|h| h.xid == rel.xid)
        .ok_or_else(|| {
            bad_release(
                ctx,
                rel,
                "the change log holds no prepared group of it".into(),
            )
        })
}

/// The held records after `after` (a few), each checked and turned into the commit
/// group's chunk.
async fn held_page(
    ctx: &Ctx<'_>,
    rel: &Release,
    hold: &log::Hold,
    after: log::LSeq,
) -> Result<Vec<(log::LSeq, Entry)>> {
    let page = log::read_range(ctx.pool, ctx.stream, after, hold.last_seq, 8).await?;
    if page.is_empty() {
        return Err(bad_release(
            ctx,
            rel,
            format!("change log record {} is missing", after.next()),
        ));
    }
    let mut out = Vec::with_capacity(page.len());
    for r in page {
        let n = r.seq.0 - hold.first_seq.0;
        let last = r.seq == hold.last_seq;
        match r.record.body {
            RecordBody::Held(h)
                if h.xid == rel.xid
                    && u64::from(r.record.chunk) == n
                    && r.record.end.is_some() == last =>
            {
                out.push((r.seq, rel.record(h, r.record.chunk, last)));
            }
            _ => {
                return Err(bad_release(
                    ctx,
                    rel,
                    format!("change log record {} is not its held chunk {n}", r.seq),
                ))
            }
        }
    }
    Ok(out)
}
