//! The admission state of each running `serve`, persisted for `status` (DESIGN §8: "Permits
//! held by unconfirmed releases are shown in status, and the tables waiting on them say
//! so"). `status` is another process, so `serve` writes its [`AdmissionSnapshot`] into the
//! state store about every [`INTERVAL`] (table `serve_processes`, migration 0070).
//!
//! This is a report, never evidence: nothing decides from it. A row whose heartbeat is
//! older than [`STALE_AFTER`] (measured on the state store's clock, so two hosts' clocks
//! never compare) belongs to a process that stopped without saying so (kill -9): status
//! shows it as stale, with the capacity it held then. A clean stop writes `stopped_at`.
use admission::{Admission, AdmissionSnapshot, PoolKind};
use kernel::codec::{self, Versioned};
use kernel::error::from_sqlx;
use kernel::Result;
use serde::{Deserialize, Serialize};
use sqlx::MySqlPool;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often a running serve rewrites its row.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// A heartbeat older than this marks the row stale (serve is not running).
pub const STALE_AFTER: Duration = Duration::from_secs(10);
/// Rows of other processes silent for longer than this are deleted by a starting serve.
pub const FORGET_AFTER_SECS: u64 = 24 * 3600;
/// At most this many serve rows are read.
const MAX_ROWS: u32 = 100;

/// Every pool of one process at one instant, as persisted (`ADMS` v2: v1 had no
/// `connections`, and decodes with none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisted {
    pub pools: Vec<Pool>,
    /// The connection pools per server (`crate::io::pool`).
    pub connections: Vec<ConnRow>,
}

impl Versioned for Persisted {
    const KIND: [u8; 4] = *b"ADMS";
    const VERSION: u16 = 2;
}

/// `ADMS` v1.
#[derive(Deserialize)]
struct PersistedV1 {
    pools: Vec<Pool>,
}

/// Decodes `ADMS` v1 or v2.
pub fn decode(bytes: &[u8]) -> std::result::Result<Persisted, codec::DecodeError> {
    let (version, body) = codec::split::<Persisted>(bytes)?;
    if version == 1 {
        let v1: PersistedV1 = codec::decode_body(&Persisted::KIND, version, body)?;
        return Ok(Persisted {
            pools: v1.pools,
            connections: Vec::new(),
        });
    }
    codec::decode_body(&Persisted::KIND, version, body)
}

/// One connection pool of a serve: a server and account, its slots and their use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnRow {
    /// `source` or `target`.
    pub side: String,
    /// `user@host:port`.
    pub server: String,
    /// Every slot (data + control + kill).
    pub capacity: u32,
    pub in_use: u32,
    /// Control connections open and idle.
    pub idle: u32,
    /// The most slots in use at once since serve started.
    pub peak: u32,
    /// Takes that waited for a free slot.
    pub waits: u64,
}

impl From<&crate::io::pool::PoolStats> for ConnRow {
    fn from(p: &crate::io::pool::PoolStats) -> ConnRow {
        ConnRow {
            side: p.side.to_string(),
            server: p.server.clone(),
            capacity: p.capacity(),
            in_use: p.slots.iter().map(|s| s.in_use).sum(),
            idle: p.idle,
            peak: p.slots.iter().map(|s| s.peak).sum(),
            waits: p.slots.iter().map(|s| s.waits).sum(),
        }
    }
}

/// What serve reports of its connection pools at each write.
pub type Connections = std::sync::Arc<dyn Fn() -> Vec<ConnRow> + Send + Sync>;

/// One pool: `in_use.len() + holds.len() <= capacity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pool {
    /// `read-window`, `target-write` or `session`.
    pub pool: String,
    pub capacity: u32,
    pub available: u32,
    pub in_use: Vec<Use>,
    pub holds: Vec<Hold>,
    pub waiting: Vec<Wait>,
}

/// A permit in use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Use {
    pub owner: String,
    pub age_ms: u64,
}

/// A permit whose release is unknown ("release unknown"): capacity lost until confirmed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub owner: String,
    pub reason: String,
    pub age_ms: u64,
}

/// An owner queued for a permit, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wait {
    pub owner: String,
    pub waited_ms: u64,
    /// It would be admitted if the pool's holds were confirmed.
    pub blocked_by_holds: bool,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl From<&AdmissionSnapshot> for Persisted {
    fn from(s: &AdmissionSnapshot) -> Persisted {
        let pool = |kind: PoolKind| {
            let p = s.pool(kind);
            Pool {
                pool: kind.as_str().to_string(),
                capacity: p.capacity,
                available: p.available,
                in_use: p
                    .in_use
                    .iter()
                    .map(|u| Use {
                        owner: u.owner.clone(),
                        age_ms: ms(u.age),
                    })
                    .collect(),
                holds: p
                    .holds
                    .iter()
                    .map(|h| Hold {
                        owner: h.owner.clone(),
                        reason: kernel::redact::redact_text(&h.reason),
                        age_ms: ms(h.age),
                    })
                    .collect(),
                waiting: p
                    .waiting
                    .iter()
                    .map(|w| Wait {
                        owner: w.owner.clone(),
                        waited_ms: ms(w.waited),
                        blocked_by_holds: w.blocked_by_holds,
                    })
                    .collect(),
            }
        };
        Persisted {
            pools: PoolKind::ALL.into_iter().map(pool).collect(),
            connections: Vec::new(),
        }
    }
}

/// The job an admission owner belongs to: owners are named `job N ...` by the window,
/// apply and session code.
pub fn owner_job(owner: &str) -> Option<u64> {
    let rest = owner.strip_prefix("job ")?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
}

/// One serve process as the state store shows it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeRow {
    pub owner: String,
    pub pid: u32,
    pub up_ms: u64,
    /// Age of the last heartbeat (state store clock).
    pub heartbeat_age_ms: u64,
    /// The process said it stopped.
    pub stopped: bool,
    pub admission: Persisted,
}

impl ServeRow {
    /// True when the row still describes a running process.
    pub fn live(&self) -> bool {
        !self.stopped && self.heartbeat_age_ms <= ms(STALE_AFTER)
    }

    /// `running`, `stopped` or `stale`.
    pub fn liveness(&self) -> &'static str {
        if self.stopped {
            "stopped"
        } else if self.live() {
            "running"
        } else {
            "stale"
        }
    }
}

/// Every serve row, by owner.
pub async fn read(pool: &MySqlPool) -> Result<Vec<ServeRow>> {
    type Row = (String, u32, i64, i64, i8, Vec<u8>);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT owner, pid, TIMESTAMPDIFF(MICROSECOND, started_at, CURRENT_TIMESTAMP(6)), \
         TIMESTAMPDIFF(MICROSECOND, heartbeat_at, CURRENT_TIMESTAMP(6)), \
         CAST(stopped_at IS NOT NULL AS SIGNED) + 0, admission \
         FROM serve_processes ORDER BY owner LIMIT ?",
    )
    .bind(MAX_ROWS)
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading serve_processes", &e))?;
    Ok(rows
        .into_iter()
        .filter_map(|(owner, pid, up, hb, stopped, bytes)| {
            // A report, not evidence: a row this build cannot read (a newer format) is
            // left out with a warning instead of failing status.
            let admission = match decode(&bytes) {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(%owner, error = %e, "serve_processes row not shown");
                    return None;
                }
            };
            Some(ServeRow {
                owner,
                pid,
                up_ms: u64::try_from(up / 1000).unwrap_or(0),
                heartbeat_age_ms: u64::try_from(hb / 1000).unwrap_or(0),
                stopped: stopped != 0,
                admission,
            })
        })
        .collect())
}

/// The serve rows that still describe a running process.
pub async fn live(pool: &MySqlPool) -> Result<Vec<ServeRow>> {
    Ok(read(pool).await?.into_iter().filter(|s| s.live()).collect())
}

/// Deletes the rows of other processes silent for [`FORGET_AFTER_SECS`] (hosts renamed,
/// test owners): status keeps showing a stale row for a day, then forgets it.
async fn forget_old(pool: &MySqlPool, owner: &str) -> Result<u64> {
    let r = sqlx::query(
        "DELETE FROM serve_processes WHERE owner <> ? \
         AND heartbeat_at < CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND",
    )
    .bind(owner)
    .bind(FORGET_AFTER_SECS)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("pruning serve_processes", &e))?;
    Ok(r.rows_affected())
}

async fn write(
    pool: &MySqlPool,
    owner: &str,
    snap: &AdmissionSnapshot,
    conns: &Connections,
    first: bool,
    stopped: bool,
) -> Result<()> {
    let mut p = Persisted::from(snap);
    p.connections = conns();
    let bytes = codec::encode(&p);
    sqlx::query(
        "INSERT INTO serve_processes (owner, pid, admission, stopped_at) \
         VALUES (?, ?, ?, IF(?, CURRENT_TIMESTAMP(6), NULL)) \
         ON DUPLICATE KEY UPDATE pid = VALUES(pid), admission = VALUES(admission), \
         heartbeat_at = CURRENT_TIMESTAMP(6), stopped_at = VALUES(stopped_at), \
         started_at = IF(?, CURRENT_TIMESTAMP(6), started_at)",
    )
    .bind(owner)
    .bind(std::process::id())
    .bind(bytes)
    .bind(stopped)
    .bind(first)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("writing serve_processes", &e))?;
    Ok(())
}

/// Records where this serve keeps materials and refuses to run beside a live serve of
/// the same state store that keeps them elsewhere: a job one of them took over from the
/// other would find its materials missing (`evidence_corrupt`). Our own row is written
/// first, so of two serves starting at once at least one sees the other.
pub async fn claim_materials(pool: &MySqlPool, owner: &str, materials: &str) -> Result<()> {
    let empty = codec::encode(&Persisted {
        pools: Vec::new(),
        connections: Vec::new(),
    });
    sqlx::query(
        "INSERT INTO serve_processes (owner, pid, admission, materials) VALUES (?, ?, ?, ?) \
         ON DUPLICATE KEY UPDATE materials = VALUES(materials)",
    )
    .bind(owner)
    .bind(std::process::id())
    .bind(empty)
    .bind(materials)
    .execute(pool)
    .await
    .map_err(|e| from_sqlx("recording serve's --materials in serve_processes", &e))?;
    let others: Vec<(String, String)> = sqlx::query_as(
        "SELECT owner, materials FROM serve_processes WHERE owner <> ? \
         AND stopped_at IS NULL AND materials IS NOT NULL AND materials <> ? \
         AND heartbeat_at >= CURRENT_TIMESTAMP(6) - INTERVAL ? SECOND ORDER BY owner LIMIT 5",
    )
    .bind(owner)
    .bind(materials)
    .bind(STALE_AFTER.as_secs())
    .fetch_all(pool)
    .await
    .map_err(|e| from_sqlx("reading the other serves' --materials", &e))?;
    let Some((other, theirs)) = others.first() else {
        return Ok(());
    };
    Err(kernel::Error::definite(
        kernel::error::DefiniteCode::Usage,
        format!(
            "serve {owner} was started with --materials {materials}, but serve {other} on \
             the same state store keeps materials with --materials {theirs}: every serve \
             sharing a state store must use the same placement (a job taken over from a \
             local one would find its materials missing); start this one with \
             --materials {theirs}, or stop {other} first"
        ),
    ))
}

/// The task that keeps one serve's row current.
pub struct Publisher {
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

/// Starts writing `admission`'s snapshot under `owner` every [`INTERVAL`]. Write errors
/// are logged and retried on the next tick: the row is a report, serve never stops for it.
pub fn publish(
    pool: MySqlPool,
    admission: &Admission,
    conns: Connections,
    owner: &str,
) -> Publisher {
    let stop = CancellationToken::new();
    let (token, adm, owner) = (stop.clone(), admission.clone(), owner.to_string());
    let task = tokio::spawn(async move {
        let mut first = true;
        if let Err(e) = forget_old(&pool, &owner).await {
            tracing::debug!(error = %e, "cannot prune old serve rows");
        }
        loop {
            match write(&pool, &owner, &adm.snapshot(), &conns, first, false).await {
                Ok(()) => first = false,
                Err(e) => tracing::debug!(error = %e, "cannot write the admission snapshot"),
            }
            tokio::select! {
                _ = token.cancelled() => break,
                _ = tokio::time::sleep(INTERVAL) => {}
            }
        }
        if let Err(e) = write(&pool, &owner, &adm.snapshot(), &conns, first, true).await {
            tracing::debug!(error = %e, "cannot record serve's stop");
        }
    });
    Publisher {
        stop,
        task: Some(task),
    }
}

impl Publisher {
    /// Writes the last snapshot with `stopped_at` and ends the task.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What one job holds and waits for in one pool of a serve process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct JobAdmission {
    pub in_use: Vec<(String, Use)>,
    pub holds: Vec<(String, Hold)>,
    pub waiting: Vec<(String, Wait)>,
}

impl JobAdmission {
    /// True when nothing of the job is in the snapshot.
    pub fn is_empty(&self) -> bool {
        self.in_use.is_empty() && self.holds.is_empty() && self.waiting.is_empty()
    }
}

/// The entries of `job` in `snap`, each with its pool's name.
pub fn for_job(snap: &Persisted, job: u64) -> JobAdmission {
    let mine = |owner: &str| owner_job(owner) == Some(job);
    let mut out = JobAdmission::default();
    for p in &snap.pools {
        let name = || p.pool.clone();
        out.in_use.extend(
            p.in_use
                .iter()
                .filter(|u| mine(&u.owner))
                .map(|u| (name(), u.clone())),
        );
        out.holds.extend(
            p.holds
                .iter()
                .filter(|h| mine(&h.owner))
                .map(|h| (name(), h.clone())),
        );
        out.waiting.extend(
            p.waiting
                .iter()
                .filter(|w| mine(&w.owner))
                .map(|w| (name(), w.clone())),
        );
    }
    out
}

/// The pool named `name` in `snap`.
pub fn pool<'a>(snap: &'a Persisted, name: &str) -> Option<&'a Pool> {
    snap.pools.iter().find(|p| p.pool == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Persisted {
        Persisted {
            pools: vec![Pool {
                pool: "read-window".into(),
                capacity: 2,
                available: 0,
                in_use: vec![Use {
                    owner: "job 3 w1 a1 read".into(),
                    age_ms: 5,
                }],
                holds: vec![Hold {
                    owner: "job 12 w2 a1 read".into(),
                    reason: "timed out".into(),
                    age_ms: 7,
                }],
                waiting: vec![Wait {
                    owner: "job 3 w2 a1 read".into(),
                    waited_ms: 9,
                    blocked_by_holds: true,
                }],
            }],
            connections: Vec::new(),
        }
    }

    fn sample_v2() -> Persisted {
        let mut p = sample();
        p.connections = vec![ConnRow {
            side: "target".into(),
            server: "bf@h:3306".into(),
            capacity: 7,
            in_use: 3,
            idle: 1,
            peak: 6,
            waits: 2,
        }];
        p
    }

    /// `ADMS` v2 bytes as written by this build.
    const GOLDEN_V2: &str = "41444d530200010b726561642d77696e646f77020001106a6f62203320773120613120726561640501116a6f6220313220773220613120726561640974696d6564206f75740701106a6f62203320773220613120726561640901010674617267657409626640683a333330360703010602";

    #[test]
    fn persisted_v2_is_pinned() {
        let bytes = codec::encode(&sample_v2());
        assert_eq!(hex::encode(&bytes), GOLDEN_V2);
        let back =
            decode(&hex::decode(GOLDEN_V2).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, sample_v2());
    }

    /// `ADMS` v1 bytes as written by the builds before connection pools: an old row must
    /// keep decoding (with no connection pools).
    const GOLDEN: &str = "41444d530100010b726561642d77696e646f770200\
        01106a6f6220332077312061312072656164050111\
        6a6f62203132207732206131207265616409\
        74696d6564206f7574070110\
        6a6f62203320773220613120726561640901";

    #[test]
    fn persisted_v1_still_decodes() {
        let back =
            decode(&hex::decode(GOLDEN).unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, sample());
    }

    #[test]
    fn owners_map_to_jobs() {
        assert_eq!(owner_job("job 3 w1 a1 read"), Some(3));
        assert_eq!(owner_job("job 42"), Some(42));
        assert_eq!(owner_job("capture"), None);
        assert_eq!(owner_job("job x"), None);
        let s = sample();
        let j3 = for_job(&s, 3);
        assert_eq!(j3.in_use.len(), 1);
        assert_eq!(j3.waiting.len(), 1);
        assert!(j3.holds.is_empty());
        let j12 = for_job(&s, 12);
        assert_eq!(j12.holds[0].1.reason, "timed out");
        assert!(for_job(&s, 1).is_empty());
        assert_eq!(pool(&s, "read-window").map(|p| p.capacity), Some(2));
    }

    #[test]
    fn liveness_follows_heartbeat_and_stop() {
        let mut r = ServeRow {
            owner: "serve@h".into(),
            pid: 1,
            up_ms: 10,
            heartbeat_age_ms: 100,
            stopped: false,
            admission: sample(),
        };
        assert_eq!(r.liveness(), "running");
        r.heartbeat_age_ms = ms(STALE_AFTER) + 1;
        assert_eq!(r.liveness(), "stale");
        r.stopped = true;
        assert_eq!(r.liveness(), "stopped");
    }
}
