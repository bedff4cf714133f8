//! The capture reader of each source stream (DESIGN §17, §18): ONE per stream across every
//! serve sharing the state store, run by the process that holds the stream's capture
//! lease (`kernel::capture::owner`), restarted after a backoff when it ends.
//!
//! Why this is safe with several serves:
//! * Every serve knows every started job of every source it can reach and adds it to that
//!   source's capture set ([`Serve::know_started`]), whether or not it runs the job. Only
//!   the holder of the stream's lease starts a reader, and only after that set is filled;
//!   every L append checks the lease token in its transaction, so a reader that lost its
//!   lease (a paused or partitioned host) appends nothing once another took over.
//! * A table enters `capture_members` under the holder's token only after it is in the
//!   running reader's set, and a job writes B only once its table is listed there with
//!   the current token (`crate::table::capture`): a B that the reader would read without
//!   capturing the table's rows is never written.
//! * A started job whose URL does not resolve here is still added to its source's set
//!   (the reader needs its sealed schema only); a job whose control schema differs from
//!   its source's makes the set incomplete, and this serve then never takes that
//!   stream's lease.
use super::{restarts, Serve};
use crate::io::connect::resolve_url;
use crate::store::jobs::{stream_name, JobRecord};
use admission::Throttle;
use kernel::capture::owner::{self, StreamLease};
use kernel::capture::{CaptureSet, CaptureTable, Reader, ReaderConfig, SharedCaptureSet};
use kernel::error::DefiniteCode;
use kernel::ids::{Generation, JobId};
use kernel::{Error, Result};
use std::collections::HashSet;
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
    /// The stream's capture lease while this process runs its reader, renewed at.
    pub(super) lease: Option<(StreamLease, Instant)>,
    /// Tables listed in `capture_members` under the held lease.
    pub(super) members: HashSet<(JobId, Generation)>,
    /// A started job of this source could not be added (its URL did not resolve here).
    pub(super) incomplete: bool,
}

/// A replica server_id distinct per stream and state store (two readers with one id kick
/// each other off the source, error 4052).
pub(super) fn replica_id(stream: &str, state_url: &str) -> u32 {
    let d = kernel::ids::Digest::of(format!("{stream}\n{state_url}").as_bytes());
    let n = u32::from_le_bytes([d.0[0], d.0[1], d.0[2], d.0[3]]);
    0x4000_0000 | (n & 0x0fff_ffff)
}

impl Serve {
    /// Adds every started job to its source's capture set (loaded once per job), so a
    /// reader started here captures every table of its source, whoever runs the job.
    ///
    /// A job that cannot be loaded (a transient state-store error, a schema this build
    /// cannot decode) may be of any source and may already have its B in L: until a pass
    /// places every started job, no stream lease is taken here (a reader started with an
    /// incomplete set would drop that table's rows without a trace).
    pub(super) async fn know_started(&mut self, started: &[(JobId, Generation)]) {
        self.unplaced_jobs = false;
        for (job, g) in started {
            if self.known.contains(&(*job, *g)) {
                continue;
            }
            let r = async {
                let rec = crate::store::jobs::load_job(&self.pool, *job).await?;
                let schema = crate::store::jobs::load_schema(&self.pool, *job).await?;
                Ok::<_, Error>((rec, schema))
            }
            .await;
            match r {
                Ok((rec, schema)) if rec.generation == *g => {
                    if let Err(e) = self.ensure_source(&rec, &schema) {
                        self.place_unreachable(&rec, schema, &e);
                    }
                    self.known.insert((*job, *g));
                }
                Ok(_) => {}
                Err(e) => {
                    self.unplaced_jobs = true;
                    tracing::warn!(job = %job, error = %e, "cannot read the started job; retrying (no capture lease is taken meanwhile)")
                }
            }
        }
    }

    /// A started job whose source URL does not resolve here still belongs in its source's
    /// capture set (the reader needs its sealed schema, not its URL): added to the source
    /// if known, else kept until the source is registered by another job. A job whose
    /// control schema differs from its source's makes the set incomplete: this serve then
    /// never runs that source's reader.
    fn place_unreachable(
        &mut self,
        rec: &JobRecord,
        sealed: kernel::schema::SealedSchema,
        e: &Error,
    ) {
        let table = CaptureTable {
            job: rec.job_id,
            generation: rec.generation,
            sealed,
        };
        let entry = (table, rec.control_schema.clone());
        match self.sources.get_mut(&rec.source.identity) {
            Some(s) => add_or_incomplete(s, entry, e),
            None => {
                tracing::info!(job = %rec.job_id, error = %e, "the job's source is not reachable from this serve yet; its table joins the source's capture set once another job registers the source");
                self.unplaced
                    .entry(rec.source.identity.clone())
                    .or_default()
                    .push(entry);
            }
        }
    }

    /// Adds the job's table to its source's capture set (registering the source on first
    /// use; its reader runs only under the stream lease, [`Serve::tend_streams`]) and
    /// returns the source's L stream name and read limiter.
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
        let throttle = Arc::new(Throttle::new(self.cfg.rate));
        self.cfg.telemetry.add_throttle(throttle.clone());
        let waiting = self
            .unplaced
            .remove(&rec.source.identity)
            .unwrap_or_default();
        let mut src = Source {
            reader: None,
            throttle: throttle.clone(),
            set: set.shared(),
            cfg,
            restart_at: Some(Instant::now()),
            started: Instant::now(),
            ended: 0,
            lease: None,
            members: HashSet::new(),
            incomplete: false,
        };
        let e = Error::transient("its source URL does not resolve in this serve");
        for entry in waiting {
            add_or_incomplete(&mut src, entry, &e);
        }
        self.sources.insert(rec.source.identity.clone(), src);
        Ok((stream, throttle))
    }

    /// Per stream: keeps or takes its capture lease, runs its reader only while holding
    /// it (restarting one that ended after the backoff of [`restarts::reader_delay`]) and
    /// lists the tables of its set as members under the lease.
    pub(super) async fn tend_streams(&mut self) {
        let (pool, owner, ttl) = (
            self.pool.clone(),
            self.cfg.owner.clone(),
            self.cfg.lease_ttl,
        );
        let may_take = !self.unplaced_jobs;
        for src in self.sources.values_mut() {
            keep_lease(&pool, &owner, ttl, src, may_take).await;
            reap_reader(src, &self.cfg.telemetry).await;
            let Some((lease, _)) = src.lease.clone() else {
                continue;
            };
            if src.reader.is_none() && src.restart_at.is_some_and(|t| Instant::now() >= t) {
                let mut cfg = src.cfg.clone();
                cfg.fence = Some(lease.token);
                src.reader = Some(Reader::start(pool.clone(), cfg, src.set.clone()));
                src.restart_at = None;
                src.started = Instant::now();
            }
            if src.reader.is_some() {
                list_members(&pool, &lease, src).await;
            }
        }
    }

    /// Stops every reader and gives their leases up (shutdown).
    pub(super) async fn stop_streams(&mut self) {
        for (_, s) in self.sources.drain() {
            if let Some(r) = s.reader {
                super::stop_step("stopping a capture reader", r.stop()).await;
            }
            if let Some((lease, _)) = s.lease {
                if let Err(e) = owner::release(&self.pool, &lease).await {
                    tracing::warn!(stream = %lease.stream, error = %e, "releasing the capture lease (it expires by itself)");
                }
            }
        }
    }
}

/// Adds a table to a source's set when its control schema is the source's, else marks the
/// set incomplete (its intents would be missed by this reader).
fn add_or_incomplete(src: &mut Source, (table, control): (CaptureTable, String), e: &Error) {
    if control == src.cfg.control_schema {
        src.set
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .add(table);
    } else {
        tracing::warn!(job = %table.job, error = %e, "the job's control schema differs from its source's: this serve will not run that source's reader");
        src.incomplete = true;
    }
}

/// Renews a held lease every third of the TTL (dropping it and stopping the reader when
/// it was taken over, or could not be renewed for two thirds of the TTL), or takes a free
/// or expired one when this process's set for the stream is complete and `may_take`
/// (every started job was placed in its source's set).
async fn keep_lease(
    pool: &sqlx::MySqlPool,
    owner: &str,
    ttl: std::time::Duration,
    src: &mut Source,
    may_take: bool,
) {
    let stream = src.cfg.stream.clone();
    match src.lease.clone() {
        Some((lease, at)) if at.elapsed() >= ttl / 3 => match owner::renew(pool, &lease, ttl).await
        {
            Ok(()) => src.lease = Some((lease, Instant::now())),
            Err(e) if e.is_transient() && at.elapsed() < ttl * 2 / 3 => {
                tracing::warn!(%stream, error = %e, retry = "capture_lease", "renewing the capture lease failed; retrying");
            }
            Err(e) => {
                tracing::error!(%stream, error = %e, "capture lease lost: stopping this stream's reader");
                lose_lease(src).await;
            }
        },
        Some(_) => {}
        None if src.incomplete || !may_take => {}
        None => match owner::acquire(pool, &stream, owner, ttl).await {
            Ok(Some(lease)) => {
                tracing::info!(%stream, token = lease.token, "took the capture lease: this serve runs the stream's reader");
                src.lease = Some((lease, Instant::now()));
                src.members.clear();
                src.restart_at = Some(Instant::now());
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(%stream, error = %e, "cannot take the capture lease; retrying")
            }
        },
    }
}

async fn lose_lease(src: &mut Source) {
    src.lease = None;
    src.members.clear();
    if let Some(r) = src.reader.take() {
        let _ = r.stop().await;
    }
}

/// Collects a reader that ended and schedules its restart after the backoff.
async fn reap_reader(src: &mut Source, telemetry: &super::Telemetry) {
    if !src.reader.as_ref().is_some_and(Reader::is_finished) {
        return;
    }
    let Some(r) = src.reader.take() else { return };
    let res = r.join().await;
    if src.started.elapsed() >= restarts::MAX_RETRY_DELAY {
        src.ended = 0;
    }
    src.ended += 1;
    let delay = restarts::reader_delay(src.ended);
    telemetry.count_retry("capture_reader");
    tracing::error!(stream = %src.cfg.stream, result = ?res, retry = "capture_reader", ended_in_a_row = src.ended, ?delay, "capture reader ended; restarting it");
    src.restart_at = Some(Instant::now() + delay);
    if res
        .as_ref()
        .err()
        .and_then(Error::as_definite)
        .is_some_and(|d| d.code == DefiniteCode::Fenced)
    {
        lose_lease(src).await;
    }
}

/// Lists every table of the running reader's set not yet listed under `lease`.
async fn list_members(pool: &sqlx::MySqlPool, lease: &StreamLease, src: &mut Source) {
    let keys: Vec<(JobId, Generation)> = src
        .set
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .tables
        .iter()
        .map(|t| (t.job, t.generation))
        .filter(|k| !src.members.contains(k))
        .collect();
    for (job, g) in keys {
        match owner::list_member(pool, lease, job, g).await {
            Ok(()) => {
                src.members.insert((job, g));
            }
            Err(e) => {
                tracing::warn!(%job, error = %e, "cannot list the table as captured; retrying")
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
