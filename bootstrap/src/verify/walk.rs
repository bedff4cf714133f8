//! The walk: chunk steps in key order until the end of the key space, a chunk budget or a
//! cancellation. The cursor advances only after a whole step (chunks and details of both
//! sides) succeeded, so a failed step leaves it at the last complete one.
use super::diff::{field_diffs, plan_step, FieldDetail, KeyDiff, KeyHash};
use super::read::Session;
use super::report::{FieldDiff, FieldValue, Tally, VerifyCursor};
use super::sql::Column;
use super::{millis, VerifyOptions, DETAIL_BATCH};
use kernel::error::{DefiniteCode, Error, Result};
use std::time::Instant;

pub(super) struct Side<'a> {
    pub(super) session: Session,
    pub(super) qualified: String,
    pub(super) key: String,
    pub(super) columns: Vec<&'a Column>,
}

impl Side<'_> {
    async fn chunk(&mut self, last: Option<i64>, limit: usize) -> Result<Vec<KeyHash>> {
        self.session
            .chunk(&self.qualified, &self.key, &self.columns, last, limit)
            .await
    }

    async fn details(
        &mut self,
        keys: &[i64],
        preview: usize,
    ) -> Result<Vec<(i64, Vec<FieldDetail>)>> {
        self.session
            .details(&self.qualified, &self.key, &self.columns, keys, preview)
            .await
    }
}

pub(super) struct Walk<'a> {
    pub(super) source: Side<'a>,
    pub(super) target: Side<'a>,
    pub(super) names: Vec<String>,
    pub(super) options: &'a VerifyOptions,
}

impl Walk<'_> {
    /// Walks until the end of the key space (true), the chunk budget or a cancellation.
    pub(super) async fn run(&mut self, cursor: &mut VerifyCursor) -> Result<bool> {
        let mut chunks = 0u64;
        while !cursor.finished {
            if self.options.cancel.is_cancelled()
                || self.options.max_chunks.is_some_and(|m| chunks >= m)
            {
                return Ok(false);
            }
            let started = Instant::now();
            let mut tally = cursor.tally.clone();
            let bound = self.step(cursor.last_key, &mut tally).await?;
            tally.chunks += 1;
            tally.elapsed_ms = tally.elapsed_ms.saturating_add(millis(started.elapsed()));
            cursor.tally = tally;
            match bound {
                Some(b) => cursor.last_key = Some(b),
                None => cursor.finished = true,
            }
            chunks += 1;
        }
        Ok(true)
    }

    /// One chunk step into `tally`; returns the step's bound.
    async fn step(&mut self, last: Option<i64>, tally: &mut Tally) -> Result<Option<i64>> {
        let n = self.options.chunk_size;
        let s = self.source.chunk(last, n).await?;
        let t = self.target.chunk(last, n).await?;
        let step = plan_step(last, &s, &t, n)
            .map_err(|e| Error::definite(DefiniteCode::Preparation, e.to_string()))?;
        drop((s, t));
        tally.source_rows += step.source_rows;
        tally.target_rows += step.target_rows;
        tally.rows_compared += step.merge.matched;
        let max = self.options.max_examples;
        let mut differing = Vec::new();
        for d in &step.merge.diffs {
            match *d {
                KeyDiff::Missing(k) => tally.missing(k, max),
                KeyDiff::Extra(k) => tally.extra(k, max),
                KeyDiff::Differs(k) => differing.push(k),
            }
        }
        for batch in differing.chunks(DETAIL_BATCH) {
            self.fields(batch, tally).await?;
        }
        Ok(step.bound)
    }

    /// Fetches the details of keys whose hashes differ and counts their differing fields.
    async fn fields(&mut self, keys: &[i64], tally: &mut Tally) -> Result<()> {
        let p = self.options.preview_bytes;
        let s = self.source.details(keys, p).await?;
        let t = self.target.details(keys, p).await?;
        if s.len() != keys.len() || t.len() != keys.len() {
            return Err(Error::transient(format!(
                "{} keys differed but {} source and {} target rows were found again \
                 in the same snapshots",
                keys.len(),
                s.len(),
                t.len()
            )));
        }
        for ((key, sf), (tkey, tf)) in s.iter().zip(&t) {
            if key != tkey {
                return Err(Error::transient(format!(
                    "detail rows out of step: source key {key}, target key {tkey}"
                )));
            }
            tally.differing_rows += 1;
            for i in field_diffs(sf, tf) {
                let value = |f: &[FieldDetail]| {
                    f.get(i)
                        .map_or_else(FieldValue::null, FieldValue::from_detail)
                };
                let diff = FieldDiff {
                    key: *key,
                    column: self.names.get(i).cloned().unwrap_or_default(),
                    source: value(sf),
                    target: value(tf),
                };
                tally.field(diff, self.options.max_examples);
            }
        }
        Ok(())
    }
}
