//! The material registry in the state store (DESIGN §2, §8): which materials belong to
//! which table-generation, and the bytes accounted per table and in total against quotas.
//!
//! * Every registration first locks the pre-inserted total row (`job_id = 0`) FOR UPDATE.
//!   Registrations are thereby serialised on an existing row, never on gap locks of an
//!   empty index, which deadlock under InnoDB.
//! * A table's usage row is created once, by [`Registry::open_table`], and only when the
//!   table has no material yet. A table with materials but no usage row is refused with a
//!   clear error: it is never re-created with 0 bytes.
//! * A registration over a quota is refused (`capacity_exhausted`) before anything is
//!   written; the material bytes already on disk are unaffected, nothing is lost.
//! * Galera (DESIGN §18): a `FOR UPDATE` lock holds on the local node only, so the
//!   serialisation across nodes comes from the writes: every registration and
//!   unregistration writes the usage rows it locked (`bytes = bytes ± n` on the total and
//!   the table's row) and the material row by primary key, so two of them through two
//!   nodes conflict at certification (ERROR 1213, retried) and the byte accounting cannot
//!   lose an update. [`Registry::open_table`] locks the total row without writing it: it
//!   only creates a table's usage row (by primary key, so two creations conflict), and no
//!   registration of that table can run before the row exists.
use crate::util::{digest_col, sq};
use kernel::error::DefiniteCode;
use kernel::ids::{Attempt, Digest, Generation, JobId, WindowId};
use kernel::{Error, Result};
use sqlx::mysql::MySqlPool;
use sqlx::{MySqlConnection, Row as _};

/// The kind of a registered material.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Raw,
    Final,
    Manifest,
}

impl Kind {
    /// The 4-byte code stored in the registry (same as the envelope kind).
    pub fn code(self) -> &'static str {
        match self {
            Kind::Raw => "RAWP",
            Kind::Final => "FINP",
            Kind::Manifest => "WMAN",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        [Kind::Raw, Kind::Final, Kind::Manifest]
            .into_iter()
            .find(|k| k.code() == s)
    }
}

/// One registered material.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub digest: Digest,
    pub kind: Kind,
    pub bytes: u64,
}

/// The window attempt a material belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    pub window: WindowId,
    pub attempt: Attempt,
}

/// Bytes accounted for a table (or the total) and its quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub bytes: u64,
    pub quota: Option<u64>,
}

/// The registry.
#[derive(Clone, Debug)]
pub struct Registry {
    pool: MySqlPool,
}

const TOTAL: u64 = 0;

async fn lock_usage(c: &mut MySqlConnection, job: u64) -> Result<Option<Usage>> {
    let r =
        sqlx::query("SELECT bytes, quota FROM ledger_material_usage WHERE job_id = ? FOR UPDATE")
            .bind(job)
            .fetch_optional(&mut *c)
            .await
            .map_err(sq("locking material usage"))?;
    r.map(|r| {
        Ok(Usage {
            bytes: r.try_get("bytes").map_err(sq("reading material usage"))?,
            quota: r.try_get("quota").map_err(sq("reading material usage"))?,
        })
    })
    .transpose()
}

fn missing_total() -> Error {
    Error::definite(
        DefiniteCode::EvidenceCorrupt,
        "the material registry's total row (job_id 0) is missing: the state store was altered; restore it from a backup",
    )
}

impl Registry {
    /// The registry of an opened state store.
    pub fn new(pool: MySqlPool) -> Registry {
        Registry { pool }
    }

    /// Sets the total quota (None = unlimited).
    pub async fn set_total_quota(&self, quota: Option<u64>) -> Result<()> {
        sqlx::query("UPDATE ledger_material_usage SET quota = ? WHERE job_id = 0")
            .bind(quota)
            .execute(&self.pool)
            .await
            .map_err(sq("setting the total material quota"))?;
        Ok(())
    }

    /// Creates the usage row of a job with its quota. Refuses when the job already has
    /// materials but no usage row; an existing usage row only gets its quota updated.
    pub async fn open_table(&self, job: JobId, quota: Option<u64>) -> Result<()> {
        let what = format!("opening the material registry of job {job}");
        let mut tx = self.pool.begin().await.map_err(sq(&what))?;
        lock_usage(&mut tx, TOTAL)
            .await?
            .ok_or_else(missing_total)?;
        if lock_usage(&mut tx, job.0).await?.is_some() {
            sqlx::query("UPDATE ledger_material_usage SET quota = ? WHERE job_id = ?")
                .bind(quota)
                .bind(job.0)
                .execute(&mut *tx)
                .await
                .map_err(sq(&what))?;
        } else {
            let n: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM ledger_material WHERE job_id = ?")
                    .bind(job.0)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(sq(&what))?;
            if n > 0 {
                return Err(missing_row(job, n));
            }
            sqlx::query(
                "INSERT INTO ledger_material_usage (job_id, bytes, quota) VALUES (?, 0, ?)",
            )
            .bind(job.0)
            .bind(quota)
            .execute(&mut *tx)
            .await
            .map_err(sq(&what))?;
        }
        tx.commit().await.map_err(sq(&what))?;
        Ok(())
    }

    /// Accounts a material for a table-generation. Idempotent for the same digest; refuses
    /// over a quota or without the table's usage row.
    pub async fn register(
        &self,
        job: JobId,
        generation: Generation,
        kind: Kind,
        digest: Digest,
        bytes: u64,
    ) -> Result<()> {
        self.register_owned(job, generation, kind, digest, bytes, None)
            .await
    }

    /// [`Registry::register`] naming the window attempt the material belongs to, in the
    /// same transaction: the materials of an abandoned attempt are then known exactly
    /// ([`Registry::garbage`]).
    pub async fn register_owned(
        &self,
        job: JobId,
        generation: Generation,
        kind: Kind,
        digest: Digest,
        bytes: u64,
        owner: Option<Owner>,
    ) -> Result<()> {
        let what = format!("registering material {digest} of job {job} {generation}");
        let mut tx = self.pool.begin().await.map_err(sq(&what))?;
        let total = lock_usage(&mut tx, TOTAL)
            .await?
            .ok_or_else(missing_total)?;
        let Some(mine) = lock_usage(&mut tx, job.0).await? else {
            let n: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM ledger_material WHERE job_id = ?")
                    .bind(job.0)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(sq(&what))?;
            return Err(if n > 0 {
                missing_row(job, n)
            } else {
                Error::definite(
                    DefiniteCode::Preparation,
                    format!("job {job} has no material registry row: open it (Registry::open_table at install) before writing materials"),
                )
            });
        };
        let existing: Option<u64> = sqlx::query_scalar(
            "SELECT bytes FROM ledger_material WHERE job_id = ? AND generation = ? AND digest = ?",
        )
        .bind(job.0)
        .bind(generation.0)
        .bind(&digest.0[..])
        .fetch_optional(&mut *tx)
        .await
        .map_err(sq(&what))?;
        if let Some(b) = existing {
            if b != bytes {
                return Err(Error::definite(
                    DefiniteCode::EvidenceConflict,
                    format!("{what}: already registered with {b} bytes, now {bytes}"),
                ));
            }
            return Ok(());
        }
        for (scope, u) in [
            ("job ".to_string() + &job.to_string(), mine),
            ("the total".to_string(), total),
        ] {
            if let Some(q) = u.quota {
                if u.bytes.saturating_add(bytes) > q {
                    return Err(Error::definite(
                        DefiniteCode::CapacityExhausted,
                        format!(
                            "material quota of {scope} exhausted: {} bytes used + {bytes} new > quota {q}; raise the quota or free space (nothing was written to the registry)",
                            u.bytes
                        ),
                    ));
                }
            }
        }
        sqlx::query("INSERT INTO ledger_material (job_id, generation, digest, kind, bytes, window_id, attempt) VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(job.0)
            .bind(generation.0)
            .bind(&digest.0[..])
            .bind(kind.code())
            .bind(bytes)
            .bind(owner.map(|o| o.window.0))
            .bind(owner.map(|o| o.attempt.0))
            .execute(&mut *tx)
            .await
            .map_err(sq(&what))?;
        sqlx::query("UPDATE ledger_material_usage SET bytes = bytes + ? WHERE job_id IN (0, ?)")
            .bind(bytes)
            .bind(job.0)
            .execute(&mut *tx)
            .await
            .map_err(sq(&what))?;
        tx.commit().await.map_err(sq(&what))?;
        Ok(())
    }

    /// Removes a material of an abandoned attempt from the accounting (idempotent). The
    /// caller removes the bytes from the store afterwards; a crash in between leaves bytes
    /// without a registry row (garbage), never a registry row without bytes.
    pub async fn unregister(
        &self,
        job: JobId,
        generation: Generation,
        digest: Digest,
    ) -> Result<()> {
        let what = format!("unregistering material {digest} of job {job} {generation}");
        let mut tx = self.pool.begin().await.map_err(sq(&what))?;
        lock_usage(&mut tx, TOTAL)
            .await?
            .ok_or_else(missing_total)?;
        if lock_usage(&mut tx, job.0).await?.is_none() {
            return Err(missing_row(job, -1));
        }
        let bytes: Option<u64> = sqlx::query_scalar(
            "SELECT bytes FROM ledger_material WHERE job_id = ? AND generation = ? AND digest = ? FOR UPDATE",
        )
        .bind(job.0)
        .bind(generation.0)
        .bind(&digest.0[..])
        .fetch_optional(&mut *tx)
        .await
        .map_err(sq(&what))?;
        let Some(bytes) = bytes else { return Ok(()) };
        sqlx::query(
            "DELETE FROM ledger_material WHERE job_id = ? AND generation = ? AND digest = ?",
        )
        .bind(job.0)
        .bind(generation.0)
        .bind(&digest.0[..])
        .execute(&mut *tx)
        .await
        .map_err(sq(&what))?;
        sqlx::query("UPDATE ledger_material_usage SET bytes = bytes - ? WHERE job_id IN (0, ?)")
            .bind(bytes)
            .bind(job.0)
            .execute(&mut *tx)
            .await
            .map_err(sq(&what))?;
        tx.commit().await.map_err(sq(&what))?;
        Ok(())
    }

    /// Sum of the registered bytes of a job over all its generations (what its usage row
    /// must say; the audit compares them).
    pub async fn registered_bytes(&self, job: JobId) -> Result<u64> {
        let v: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(bytes), 0) AS SIGNED) FROM ledger_material WHERE job_id = ?",
        )
        .bind(job.0)
        .fetch_one(&self.pool)
        .await
        .map_err(sq("summing registered material bytes"))?;
        Ok(u64::try_from(v).unwrap_or(0))
    }

    /// Usage of a job (None if it has no usage row) or of the total (`JobId(0)`).
    pub async fn usage(&self, job: JobId) -> Result<Option<Usage>> {
        let r = sqlx::query("SELECT bytes, quota FROM ledger_material_usage WHERE job_id = ?")
            .bind(job.0)
            .fetch_optional(&self.pool)
            .await
            .map_err(sq("reading material usage"))?;
        r.map(|r| {
            Ok(Usage {
                bytes: r.try_get("bytes").map_err(sq("reading material usage"))?,
                quota: r.try_get("quota").map_err(sq("reading material usage"))?,
            })
        })
        .transpose()
    }

    /// The registered materials of `window`'s attempts other than `sealed` (the attempt
    /// whose manifest sealed the window): garbage of abandoned attempts, to release.
    pub async fn garbage(
        &self,
        job: JobId,
        generation: Generation,
        window: WindowId,
        sealed: Attempt,
    ) -> Result<Vec<Entry>> {
        let rows = sqlx::query("SELECT digest, kind, bytes FROM ledger_material WHERE job_id = ? AND generation = ? AND window_id = ? AND attempt <> ? ORDER BY digest")
            .bind(job.0)
            .bind(generation.0)
            .bind(window.0)
            .bind(sealed.0)
            .fetch_all(&self.pool)
            .await
            .map_err(sq("reading garbage materials"))?;
        rows.iter().map(entry_of).collect()
    }

    /// Bytes registered for abandoned attempts of a table-generation's windows, not yet
    /// released: an attempt without a seal of its own whose window is sealed by another
    /// attempt, or has a later attempt (recorded in `window_attempts`; a later seal
    /// releases it). The latest attempt of an unsealed window is not garbage: it may still
    /// seal.
    pub async fn garbage_bytes(&self, job: JobId, generation: Generation) -> Result<u64> {
        let v: i64 = sqlx::query_scalar(
            "SELECT CAST(COALESCE(SUM(m.bytes), 0) AS SIGNED) FROM ledger_material m \
             WHERE m.job_id = ? AND m.generation = ? AND m.window_id IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM window_seals s WHERE s.job_id = m.job_id \
             AND s.generation = m.generation AND s.window_id = m.window_id AND s.attempt = m.attempt) \
             AND (EXISTS (SELECT 1 FROM window_seals s WHERE s.job_id = m.job_id \
             AND s.generation = m.generation AND s.window_id = m.window_id) \
             OR EXISTS (SELECT 1 FROM window_attempts a WHERE a.job_id = m.job_id \
             AND a.generation = m.generation AND a.window_id = m.window_id AND a.attempt > m.attempt))",
        )
        .bind(job.0)
        .bind(generation.0)
        .fetch_one(&self.pool)
        .await
        .map_err(sq("summing garbage material bytes"))?;
        Ok(u64::try_from(v).unwrap_or(0))
    }

    /// Every material registered for a table-generation.
    pub async fn entries(&self, job: JobId, generation: Generation) -> Result<Vec<Entry>> {
        let rows = sqlx::query("SELECT digest, kind, bytes FROM ledger_material WHERE job_id = ? AND generation = ? ORDER BY digest")
            .bind(job.0)
            .bind(generation.0)
            .fetch_all(&self.pool)
            .await
            .map_err(sq("reading the material registry"))?;
        rows.iter().map(entry_of).collect()
    }
}

fn entry_of(r: &sqlx::mysql::MySqlRow) -> Result<Entry> {
    let g = |e| sq("reading the material registry")(e);
    let kind: String = r.try_get("kind").map_err(g)?;
    Ok(Entry {
        digest: digest_col(&r.try_get::<Vec<u8>, _>("digest").map_err(g)?, "registry")?,
        kind: Kind::parse(&kind).ok_or_else(|| {
            Error::definite(
                DefiniteCode::EvidenceCorrupt,
                format!("material registry: unknown kind `{kind}`"),
            )
        })?,
        bytes: r.try_get("bytes").map_err(g)?,
    })
}

fn missing_row(job: JobId, n: i64) -> Error {
    let n = if n < 0 {
        "registered materials".to_string()
    } else {
        format!("{n} registered materials")
    };
    Error::definite(
        DefiniteCode::EvidenceCorrupt,
        format!(
            "job {job} has {n} but no usage row in ledger_material_usage: the registry was altered; it is not re-created with 0 bytes. Restore the row (bytes = SUM(bytes) of its materials) from a backup or the audit's figure"
        ),
    )
}
