//! The walk: chunk steps in key order until the end of the key space, a chunk budget or a
//! cancellation. The cursor advances only after a whole step (chunks and details of both
//! sides) succeeded, so a failed step leaves it at the last complete one.
use super::diff::{field_diffs, plan_step, FieldDetail, KeyDiff, KeyHash};
use super::key::{Key, KeyCols};
use super::read::{ChunkSum, Session};
use super::report::{FieldDiff, FieldValue, Tally, VerifyCursor};
use super::sql::Column;
use super::{millis, VerifyOptions, DETAIL_BATCH};
use kernel::error::{DefiniteCode, Error, Result};
use std::time::Instant;

pub(super) struct Side<'a> {
    pub(super) session: Session,
    pub(super) qualified: String,
    pub(super) key: KeyCols,
    pub(super) columns: Vec<&'a Column>,
}

impl Side<'_> {
    async fn chunk(&mut self, last: Option<&Key>, limit: usize) -> Result<Vec<KeyHash>> {
        self.session
            .chunk(&self.qualified, &self.key, &self.columns, last, limit)
            .await
    }

    async fn sum(&mut self, range: (Option<&Key>, Option<&Key>)) -> Result<ChunkSum> {
        self.session
            .sum(&self.qualified, &self.key, &self.columns, range)
            .await
    }

    async fn digest(&mut self, range: (Option<&Key>, Option<&Key>)) -> Result<Option<ChunkSum>> {
        self.session
            .digest(&self.qualified, &self.key, &self.columns, range)
            .await
    }

    /// [`Side::digest`], then (when it answered and the range has a bound) the bound of the
    /// `n` keys after it, as `(bound, next bound)` for [`Walk::ahead`].
    async fn digest_and_next(
        &mut self,
        range: (Option<&Key>, Option<&Key>),
        n: usize,
    ) -> Result<(Option<ChunkSum>, Option<(Key, Option<Key>)>)> {
        let digest = self.digest(range).await?;
        let Some(bound) = range.1.filter(|_| digest.is_some()) else {
            return Ok((digest, None));
        };
        let next = self
            .session
            .nth_key(&self.qualified, &self.key, Some(bound), n);
        Ok((digest, Some((bound.clone(), next.await?))))
    }

    /// The details of the rows with `keys` (this side's own key values), checked to be
    /// exactly those rows in that order.
    async fn details(&mut self, keys: &[Key], preview: usize) -> Result<Vec<Vec<FieldDetail>>> {
        let rows = self
            .session
            .details(&self.qualified, &self.key, &self.columns, keys, preview)
            .await?;
        if rows.len() != keys.len() {
            return Err(Error::transient(format!(
                "{} keys differed but {} rows of {} were found again in the same snapshot",
                keys.len(),
                rows.len(),
                self.qualified
            )));
        }
        rows.into_iter()
            .zip(keys)
            .map(|((got, fields), want)| match got.sort == want.sort {
                true => Ok(fields),
                false => Err(Error::transient(format!(
                    "detail rows of {} out of step: key {got} where {want} was asked",
                    self.qualified
                ))),
            })
            .collect()
    }
}

pub(super) struct Walk<'a> {
    pub(super) source: Side<'a>,
    pub(super) target: Side<'a>,
    pub(super) names: Vec<String>,
    pub(super) options: &'a VerifyOptions,
    /// Chunks a sampled walk skipped so far.
    pub(super) skipped: u64,
    /// Chunks found equal by their sums or digests alone (`sql::sum_sql`,
    /// `sql::digest_sql`), no row read.
    pub(super) summed: u64,
    /// A chunk string was too long for a digest (`sql::DIGEST_MAX_BYTES`): the rest of
    /// the walk compares by sums.
    pub(super) sums_only: bool,
    /// The bound of the chunk after a key, read by the source while the target was still
    /// digesting the chunk ending at that key: (that key, the bound).
    pub(super) ahead: Option<(Key, Option<Key>)>,
}

impl Walk<'_> {
    /// Walks until the end of the key space (true), the chunk budget or a cancellation.
    pub(super) async fn run(&mut self, cursor: &mut VerifyCursor) -> Result<bool> {
        self.rekey(cursor)?;
        let mut chunks = 0u64;
        while !cursor.finished {
            if self.options.cancel.is_cancelled()
                || self.options.max_chunks.is_some_and(|m| chunks >= m)
            {
                return Ok(false);
            }
            let index = cursor.tally.chunks + self.skipped;
            if !self.options.sample.is_none_or(|s| s.compares(index)) {
                match self.skip(cursor.last_key.as_ref()).await? {
                    Some(b) => cursor.last_key = Some(b),
                    None => cursor.finished = true,
                }
                self.skipped += 1;
                chunks += 1;
                continue;
            }
            let started = Instant::now();
            let mut tally = cursor.tally.clone();
            let bound = self.step(cursor.last_key.as_ref(), &mut tally).await?;
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

    /// A resumed cursor must be a key of this table's key; when every key column is
    /// encoded here (no server weights) its sort key is recomputed from its values, so a
    /// `VCUR` v1 cursor (signed integer sort keys) orders with an unsigned key's rows.
    fn rekey(&self, cursor: &mut VerifyCursor) -> Result<()> {
        let Some(last) = cursor.last_key.as_mut() else {
            return Ok(());
        };
        let width = self.source.key.0.len();
        if last.values.len() != width {
            return Err(Error::definite(
                DefiniteCode::Usage,
                format!(
                    "the cursor holds a key of {} values but {} is keyed by {} columns: \
                     start the walk again without it",
                    last.values.len(),
                    self.source.qualified,
                    width
                ),
            ));
        }
        if let Some(sort) = self.source.key.resort(&last.values) {
            last.sort = sort;
        }
        Ok(())
    }

    /// Walks over one chunk (one a sample does not compare, or the range of one compared
    /// by its sums): only the source's key `chunk_size` places on is read (the server
    /// steps over the others in the index); returns the chunk's last key, or None at the
    /// end of the key space (a chunk of fewer keys). Read ahead when [`Walk::summarize`]
    /// already read it.
    async fn skip(&mut self, last: Option<&Key>) -> Result<Option<Key>> {
        if let Some((after, bound)) = self.ahead.take() {
            if Some(&after) == last {
                return Ok(bound);
            }
        }
        let n = self.options.chunk_size;
        let s = &mut self.source;
        s.session.nth_key(&s.qualified, &s.key, last, n).await
    }

    /// One chunk step into `tally`; returns the step's bound. The chunk is first compared
    /// by its sums on both servers; only a chunk whose sums differ is read row by row.
    async fn step(&mut self, last: Option<&Key>, tally: &mut Tally) -> Result<Option<Key>> {
        if let Some((bound, rows)) = self.by_sums(last).await? {
            tally.source_rows += rows;
            tally.target_rows += rows;
            tally.rows_compared += rows;
            self.summed += 1;
            return Ok(bound);
        }
        self.by_rows(last, tally).await
    }

    /// The next `chunk_size` source keys after `last`, compared by count and hash sum on
    /// both sides at once: `Some((bound, rows))` when they agree (bound None: the key
    /// space ends in this chunk), None when the chunk must be compared row by row.
    async fn by_sums(&mut self, last: Option<&Key>) -> Result<Option<(Option<Key>, u64)>> {
        let bound = self.skip(last).await?;
        let range = (last, bound.as_ref());
        let (s, t) = self.summarize(range).await?;
        Ok((s == t).then_some((bound, s.rows)))
    }

    /// Both sides' digests of one range, or both sides' sums once a digest was cut (the
    /// two sides are always summarized the same way: a digest never meets a sum). The
    /// source, usually done first, then reads the next chunk's bound ([`Walk::ahead`]):
    /// the same snapshot, the same statement [`Walk::skip`] would run next.
    async fn summarize(
        &mut self,
        range: (Option<&Key>, Option<&Key>),
    ) -> Result<(ChunkSum, ChunkSum)> {
        if !self.sums_only {
            let n = self.options.chunk_size;
            let (s, t) = tokio::join!(
                self.source.digest_and_next(range, n),
                self.target.digest(range)
            );
            let ((s, next), t) = (s?, t?);
            self.ahead = next;
            if let (Some(s), Some(t)) = (s, t) {
                return Ok((s, t));
            }
            tracing::info!(
                source = %self.source.qualified,
                max_bytes = super::sql::DIGEST_MAX_BYTES,
                "a chunk's rows are too long for one digest: the walk compares by sums"
            );
            self.sums_only = true;
        }
        let (s, t) = tokio::join!(self.source.sum(range), self.target.sum(range));
        Ok((s?, t?))
    }

    /// One chunk step row by row: keys and row hashes of both sides, merged.
    async fn by_rows(&mut self, last: Option<&Key>, tally: &mut Tally) -> Result<Option<Key>> {
        let n = self.options.chunk_size;
        let (s, t) = tokio::join!(self.source.chunk(last, n), self.target.chunk(last, n));
        let (s, t) = (s?, t?);
        let step = plan_step(last, &s, &t, n)
            .map_err(|e| Error::definite(DefiniteCode::Preparation, e.to_string()))?;
        drop((s, t));
        tally.source_rows += step.source_rows;
        tally.target_rows += step.target_rows;
        tally.rows_compared += step.merge.matched;
        let max = self.options.max_examples;
        let mut differing = Vec::new();
        for d in step.merge.diffs {
            match d {
                KeyDiff::Missing(k) => tally.missing(k, max),
                KeyDiff::Extra(k) => tally.extra(k, max),
                KeyDiff::Differs { source, target } => differing.push((source, target)),
            }
        }
        for batch in differing.chunks(DETAIL_BATCH) {
            self.fields(batch, tally).await?;
        }
        Ok(step.bound)
    }

    /// Fetches the details of keys whose hashes differ (each side by its own key values)
    /// and counts their differing fields.
    async fn fields(&mut self, keys: &[(Key, Key)], tally: &mut Tally) -> Result<()> {
        let p = self.options.preview_bytes;
        let skeys: Vec<Key> = keys.iter().map(|k| k.0.clone()).collect();
        let tkeys: Vec<Key> = keys.iter().map(|k| k.1.clone()).collect();
        let s = self.source.details(&skeys, p).await?;
        let t = self.target.details(&tkeys, p).await?;
        for ((key, sf), tf) in skeys.into_iter().zip(&s).zip(&t) {
            tally.differing_rows += 1;
            for i in field_diffs(sf, tf) {
                let value = |f: &[FieldDetail]| {
                    f.get(i)
                        .map_or_else(FieldValue::null, FieldValue::from_detail)
                };
                let diff = FieldDiff {
                    key: key.clone(),
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
