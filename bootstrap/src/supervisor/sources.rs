//! One capture reader per source server, shared by the jobs of that server, with the
//! capture set filled before a job can write B (see the supervisor's module doc), and a
//! reader that ended restarted after a short pause.
use super::{restarts, Serve};
use crate::io::connect::resolve_url;
use crate::store::jobs::{stream_name, JobRecord};
use admission::Throttle;
use kernel::capture::{CaptureSet, CaptureTable, Reader, ReaderConfig, SharedCaptureSet};
use kernel::error::DefiniteCode;
use kernel::{Error, Result};
use std::sync::Arc;
use tokio::time::Instant;

pub(super) struct Source {
    pub(super) reader: Option<Reader>,
    pub(super) throttle: Arc<Throttle>,
    pub(super) set: SharedCaptureSet,
    pub(super) cfg: ReaderConfig,
    pub(super) restart_at: Option<Instant>,
    /// When the running reader started, and how many ended in a row (for the backoff).
    pub(super) started: Instant,
    pub(super) ended: u32,
}

/// A replica server_id distinct per stream and state store (two readers with one id kick
/// each other off the source, error 4052).
pub(super) fn replica_id(stream: &str, state_url: &str) -> u32 {
    let d = kernel::ids::Digest::of(format!("{stream}\n{state_url}").as_bytes());
    let n = u32::from_le_bytes([d.0[0], d.0[1], d.0[2], d.0[3]]);
    0x4000_0000 | (n & 0x0fff_ffff)
}

impl Serve {
    /// Adds the job's table to its source's capture set (starting that source's reader on
    /// first use) and returns the source's L stream name and read limiter.
    pub(super) fn ensure_source(
        &mut self,
        rec: &JobRecord,
        schema: &kernel::schema::SealedSchema,
    ) -> Result<(String, Arc<Throttle>)> {
        let whose = format!("job {}'s source", rec.job_id);
        let url = resolve_url(&rec.source_url, &self.cfg.sources, "--source", &whose)?;
        let stream = stream_name(&rec.source.identity);
        let table = CaptureTable {
            job: rec.job_id,
            generation: rec.generation,
            sealed: schema.clone(),
        };
        if let Some(src) = self.sources.get(&rec.source.identity) {
            if src.cfg.control_schema != rec.control_schema {
                return Err(Error::definite(
                    DefiniteCode::Usage,
                    format!(
                        "job {}: control schema `{}` differs from `{}` used by the other jobs of its source",
                        rec.job_id, rec.control_schema, src.cfg.control_schema
                    ),
                ));
            }
            src.set
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .add(table);
            return Ok((stream, src.throttle.clone()));
        }
        let mut cfg = ReaderConfig::new(&stream, &url, replica_id(&stream, &self.cfg.state_url));
        cfg.control_schema = rec.control_schema.clone();
        (self.cfg.reader)(&mut cfg);
        let mut set = CaptureSet::default();
        set.add(table);
        let set = set.shared();
        let reader = Reader::start(self.pool.clone(), cfg.clone(), set.clone());
        let throttle = Arc::new(Throttle::new(self.cfg.rate));
        self.cfg.telemetry.add_throttle(throttle.clone());
        self.sources.insert(
            rec.source.identity.clone(),
            Source {
                reader: Some(reader),
                throttle: throttle.clone(),
                set,
                cfg,
                restart_at: None,
                started: Instant::now(),
                ended: 0,
            },
        );
        Ok((stream, throttle))
    }

    /// Restarts a reader that ended (its own retries exhausted, or a definite error that
    /// the affected tables see as pauses or marker timeouts), after the backoff of
    /// [`restarts::reader_delay`].
    pub(super) async fn watch_readers(&mut self) {
        for src in self.sources.values_mut() {
            if src.reader.as_ref().is_some_and(Reader::is_finished) {
                if let Some(r) = src.reader.take() {
                    let res = r.join().await;
                    if src.started.elapsed() >= restarts::MAX_RETRY_DELAY {
                        src.ended = 0;
                    }
                    src.ended += 1;
                    let delay = restarts::reader_delay(src.ended);
                    self.cfg.telemetry.count_retry("capture_reader");
                    tracing::error!(stream = %src.cfg.stream, result = ?res, retry = "capture_reader", ended_in_a_row = src.ended, ?delay, "capture reader ended; restarting it");
                    src.restart_at = Some(Instant::now() + delay);
                }
            }
            if src.reader.is_none() && src.restart_at.is_some_and(|t| Instant::now() >= t) {
                src.reader = Some(Reader::start(
                    self.pool.clone(),
                    src.cfg.clone(),
                    src.set.clone(),
                ));
                src.restart_at = None;
                src.started = Instant::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_names_and_replica_ids() {
        assert!(stream_name("x").len() <= 64);
        assert_ne!(replica_id("a", "s"), replica_id("b", "s"));
    }
}
