//! The activation audit's field comparer (issue 15 item 4): `verify`'s independent
//! comparator, pinned at a binlog position P, behind the [`FieldComparer`] seam of
//! `crate::table::audit::fields` (whose module doc argues why the comparison is exact at
//! P, what it costs and what a difference does). The supervisor puts a [`Comparer`] in
//! every job context; the audit layer never imports this one.
use super::pinned::replay_and_compare;
use super::report::{FieldValue, PreviewKind, Report};
use super::sample::Sample;
use super::{Endpoint, VerifyCursor, VerifyOptions};
use crate::table::audit::fields::{CompareFuture, FieldDifference, FieldRequest, FieldSample};
use crate::table::audit::FieldComparer;
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use mysql_async::Pool;

/// Differences of each kind kept as examples (the pause reason names them all).
const EXAMPLES: usize = 5;

/// The comparer of `serve`.
pub struct Comparer;

impl FieldComparer for Comparer {
    fn compare<'a>(&'a self, req: FieldRequest<'a>) -> CompareFuture<'a> {
        Box::pin(compare(req))
    }
}

async fn compare(req: FieldRequest<'_>) -> Result<FieldSample> {
    let r = req.replayer;
    // Its source read view is a data connection of the source's pool (the caller holds a
    // read-window permit); each side is one session, so each pool opens one connection.
    let slot = r.source.slot(crate::io::pool::Use::Data).await?;
    let src = Endpoint::new(
        Pool::new(one_connection(r.source.opts())),
        &r.scope.source_db,
        &r.scope.source_table,
    );
    let tgt = Endpoint::new(
        Pool::new(one_connection(r.target.opts())),
        &r.ctx.schema.database,
        &r.ctx.schema.table,
    );
    let options = VerifyOptions {
        chunk_size: req.config.chunk_rows.max(1),
        max_examples: EXAMPLES,
        sample: Some(Sample {
            seed: req.seed,
            every: req.config.sample_every,
        }),
        ..VerifyOptions::default()
    };
    let key: Vec<&str> = req.key.iter().map(String::as_str).collect();
    let mut cursor = VerifyCursor::start();
    let report = replay_and_compare(r, req.b_seq, &src, &tgt, &key, &options, &mut cursor).await;
    let closed = src.pool.disconnect().await;
    let _ = tgt.pool.disconnect().await;
    if closed.is_ok() {
        drop(slot);
    } else {
        slot.lose();
    }
    // The source connection holds a read view (a read-window permit, DESIGN §8): a close
    // that failed leaves its end unknown, whatever the comparison said.
    if let Err(e) = closed {
        return Err(Error::definite(
            DefiniteCode::ReleaseUnconfirmed,
            format!(
                "the activation field check could not close its source read-view connection \
                 of `{}`.`{}`: {e}; its read-window permit stays held until serve restarts",
                r.scope.source_db, r.scope.source_table
            ),
        ));
    }
    Ok(sample_of(&report?, req.config.mode(), req.seed))
}

/// `opts` for a mysql_async pool of at most one connection.
fn one_connection(opts: &mysql_async::Opts) -> mysql_async::Opts {
    let one = mysql_async::PoolConstraints::new(0, 1).unwrap_or_default();
    mysql_async::OptsBuilder::from_opts(opts.clone())
        .pool_opts(mysql_async::PoolOpts::default().with_constraints(one))
        .into()
}

/// A value preview as hex (text previews are hex-encoded too: values are shown as bytes).
fn hex_of(v: &FieldValue) -> Option<String> {
    let h = match v.kind {
        PreviewKind::Null => return None,
        PreviewKind::Text => hex::encode(v.preview.as_bytes()),
        PreviewKind::Binary => v.preview.clone(),
    };
    Some(if v.truncated { format!("{h}...") } else { h })
}

/// `id=5`: the key as the report's key columns name it.
fn key_text(report: &Report, k: &super::Key) -> String {
    format!("{}={k}", report.key.join(","))
}

/// The audit's view of a verify report (also what `verify` records on a STREAMING table).
pub fn sample_of(report: &Report, mode: String, seed: u64) -> FieldSample {
    let t = &report.cursor.tally;
    let key = |kind: &str, k: &super::Key| FieldDifference {
        kind: kind.to_string(),
        key: key_text(report, k),
        column: None,
        source_hex: None,
        target_hex: None,
    };
    let mut examples: Vec<FieldDifference> = t
        .differing_fields
        .examples
        .iter()
        .map(|d| FieldDifference {
            kind: "field".to_string(),
            key: key_text(report, &d.key),
            column: Some(d.column.clone()),
            source_hex: hex_of(&d.source),
            target_hex: hex_of(&d.target),
        })
        .collect();
    examples.extend(t.missing.examples.iter().map(|k| key("missing", k)));
    examples.extend(t.extra.examples.iter().map(|k| key("extra", k)));
    examples.extend(report.schema_differences.iter().map(|s| FieldDifference {
        kind: "schema".to_string(),
        key: "(definition)".to_string(),
        column: Some(s.clone()),
        source_hex: None,
        target_hex: None,
    }));
    FieldSample {
        mode,
        seed,
        position: report.source_snapshot.as_ref().map(ToString::to_string),
        rows_checked: t.rows_compared + t.missing.count + t.extra.count,
        chunks_compared: t.chunks,
        chunks_skipped: report.skipped_chunks,
        missing: t.missing.count,
        extra: t.extra.count,
        differing_rows: t.differing_rows + report.schema_differences.len() as u64,
        examples,
        complete: report.complete,
        elapsed_ms: report.elapsed_ms,
    }
}
