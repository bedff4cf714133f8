//! J in the state store (DESIGN §4): an append-only, hash-chained list of
//! [`JournalRecord`]s per table-generation. The head is the highest `seq`; appending
//! `seq = head + 1` is the compare-and-set (a second writer of the same seq hits the
//! primary key). Each row stores `digest = H(prev_digest || record bytes)`, so an edited
//! record anywhere in the history is detected by [`crate::check::journal`].
//!
//! Every write runs in one state-store transaction that first checks the writer's fencing
//! token ([`crate::lease::check_in`]). Completing a window writes the range-chain entry
//! and the J record that counts it in the same transaction (DESIGN §5 step 9).
use crate::chain::{self, ChainEntry};
use crate::lease::{check_in, Lease};
use crate::record::{check_transition, JournalRecord};
use crate::util::{digest_col, sq, sqlx_is_dup};
use kernel::codec;
use kernel::error::{Definite, DefiniteCode};
use kernel::ids::{Digest, Generation, JobId};
use kernel::{Error, Result};
use sqlx::mysql::MySqlPool;
use sqlx::{MySqlConnection, Row as _};

/// A stored J record with its place in the hash chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub record: JournalRecord,
    pub digest: Digest,
}

/// One raw J row, as the audit reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    pub seq: u64,
    pub bytes: Vec<u8>,
    pub prev: Digest,
    pub digest: Digest,
    pub token: u64,
}

/// `H(prev || record bytes)`.
pub fn link(prev: Digest, bytes: &[u8]) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(&prev.0);
    h.update(bytes);
    Digest(*h.finalize().as_bytes())
}

/// The digest before the first record of a table-generation.
pub fn journal_genesis(job: JobId, generation: Generation) -> Digest {
    let mut b = b"backfill-journal-v1".to_vec();
    b.extend_from_slice(&job.0.to_le_bytes());
    b.extend_from_slice(&generation.0.to_le_bytes());
    Digest::of(&b)
}

/// J of the state store.
#[derive(Clone, Debug)]
pub struct Journal {
    pool: MySqlPool,
}

fn conflict(msg: String) -> Error {
    Error::definite(DefiniteCode::EvidenceConflict, msg)
}

fn refused(d: Definite) -> Error {
    Error::Definite(d)
}

impl Journal {
    /// J over an opened state store (`kernel::state::open`).
    pub fn new(pool: MySqlPool) -> Journal {
        Journal { pool }
    }

    /// The pool J writes through.
    pub fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    /// Writes the first record. Re-creating with the same record returns the existing head.
    pub async fn create(&self, lease: &Lease, record: JournalRecord) -> Result<Head> {
        let what = format!(
            "creating the journal of job {} {}",
            record.job, record.generation
        );
        let mut tx = self.pool.begin().await.map_err(sq(&what))?;
        check_in(&mut tx, lease).await?;
        let prev = journal_genesis(record.job, record.generation);
        let head = insert(&mut tx, lease, 1, prev, &record).await?;
        tx.commit().await.map_err(sq(&what))?;
        Ok(head)
    }

    /// The current head, its digest link checked. None before [`Journal::create`].
    pub async fn head(&self, job: JobId, generation: Generation) -> Result<Option<Head>> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(sq("reading the journal"))?;
        head_in(&mut conn, job, generation).await
    }

    /// The head of every table-generation, in one query (`status` of a fleet: one read for
    /// a thousand jobs, not one per job), each digest link checked like [`Journal::head`].
    pub async fn heads_all(&self) -> Result<Vec<Head>> {
        let rows = sqlx::query(
            "SELECT j.job_id, j.generation, j.seq, j.record, j.prev_digest, j.digest \
             FROM ledger_journal j JOIN (SELECT job_id, generation, MAX(seq) AS seq \
             FROM ledger_journal GROUP BY job_id, generation) h \
             ON h.job_id = j.job_id AND h.generation = j.generation AND h.seq = j.seq",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(sq("reading the heads of the journal"))?;
        rows.iter()
            .map(|r| {
                let job = JobId(r.try_get("job_id").map_err(sq("reading the journal"))?);
                let g = Generation(r.try_get("generation").map_err(sq("reading the journal"))?);
                decode_row(job, g, r)
            })
            .collect()
    }

    /// Appends `next` after `expected` (same window count and chain root).
    pub async fn append(
        &self,
        lease: &Lease,
        expected: &Head,
        next: JournalRecord,
    ) -> Result<Head> {
        check_transition(&expected.record, &next).map_err(refused)?;
        if next.completed != expected.record.completed {
            return Err(Error::definite(
                DefiniteCode::Preparation,
                "a completed window is recorded with Journal::complete_window",
            ));
        }
        let what = format!(
            "appending to the journal of job {} {}",
            next.job, next.generation
        );
        let mut tx = self.pool.begin().await.map_err(sq(&what))?;
        check_in(&mut tx, lease).await?;
        let head = insert(&mut tx, lease, expected.seq + 1, expected.digest, &next).await?;
        tx.commit().await.map_err(sq(&what))?;
        Ok(head)
    }

    /// Records a completed window: the range-chain entry and the J record counting it, in
    /// one transaction. `next` must carry `completed + 1` and the extended root.
    pub async fn complete_window(
        &self,
        lease: &Lease,
        expected: &Head,
        entry: ChainEntry,
        next: JournalRecord,
    ) -> Result<Head> {
        let prev = &expected.record;
        check_transition(prev, &next).map_err(refused)?;
        if entry.window.0 != prev.completed || next.completed != prev.completed + 1 {
            return Err(Error::definite(
                DefiniteCode::Preparation,
                format!(
                    "window {} cannot complete after {} completed windows (windows complete in plan order)",
                    entry.window, prev.completed
                ),
            ));
        }
        let root = chain::extend(prev.chain_root, &entry);
        if next.chain_root != root {
            return Err(Error::definite(
                DefiniteCode::Preparation,
                format!(
                    "journal root {} is not the chain root {root} after {}",
                    next.chain_root, entry.window
                ),
            ));
        }
        let what = format!(
            "completing {} of job {} {}",
            entry.window, next.job, next.generation
        );
        let mut tx = self.pool.begin().await.map_err(sq(&what))?;
        check_in(&mut tx, lease).await?;
        let bytes = entry.encode();
        let r = sqlx::query(
            "INSERT INTO ledger_range_chain (job_id, generation, window_id, attempt, manifest_hash, entry, root_after) VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(next.job.0)
        .bind(next.generation.0)
        .bind(entry.window.0)
        .bind(entry.attempt.0)
        .bind(&entry.manifest_hash.0[..])
        .bind(&bytes)
        .bind(&root.0[..])
        .execute(&mut *tx)
        .await;
        match r {
            Ok(_) => {}
            Err(e) if sqlx_is_dup(&e) => {
                drop(tx);
                return self.resolve_dup(expected.seq + 1, &next).await;
            }
            Err(e) => return Err(sq(&what)(e)),
        }
        let head = insert(&mut tx, lease, expected.seq + 1, expected.digest, &next).await?;
        tx.commit().await.map_err(sq(&what))?;
        Ok(head)
    }

    async fn resolve_dup(&self, seq: u64, next: &JournalRecord) -> Result<Head> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(sq("reading the journal"))?;
        match row_at(&mut conn, next.job, next.generation, seq).await? {
            Some(h) if &h.record == next => Ok(h),
            _ => Err(conflict(format!(
                "job {} {}: journal record {seq} or its range-chain entry already exists with other content; another writer moved the journal on",
                next.job, next.generation
            ))),
        }
    }

    /// Every J row of a table-generation, oldest first (for the audit).
    pub async fn rows(&self, job: JobId, generation: Generation) -> Result<Vec<StoredRow>> {
        let rows = sqlx::query(
            "SELECT seq, record, prev_digest, digest, token FROM ledger_journal WHERE job_id = ? AND generation = ? ORDER BY seq",
        )
        .bind(job.0)
        .bind(generation.0)
        .fetch_all(&self.pool)
        .await
        .map_err(sq("reading journal rows"))?;
        rows.iter()
            .map(|r| {
                let g = |e| sq("reading journal rows")(e);
                Ok(StoredRow {
                    seq: r.try_get("seq").map_err(g)?,
                    bytes: r.try_get("record").map_err(g)?,
                    prev: digest_col(
                        &r.try_get::<Vec<u8>, _>("prev_digest").map_err(g)?,
                        "journal",
                    )?,
                    digest: digest_col(&r.try_get::<Vec<u8>, _>("digest").map_err(g)?, "journal")?,
                    token: r.try_get("token").map_err(g)?,
                })
            })
            .collect()
    }

    /// The range chain of a table-generation in window order, with each row's stored root.
    pub async fn chain(
        &self,
        job: JobId,
        generation: Generation,
    ) -> Result<Vec<(ChainEntry, Digest)>> {
        let rows = sqlx::query(
            "SELECT window_id, attempt, manifest_hash, entry, root_after FROM ledger_range_chain WHERE job_id = ? AND generation = ? ORDER BY window_id",
        )
        .bind(job.0)
        .bind(generation.0)
        .fetch_all(&self.pool)
        .await
        .map_err(sq("reading the range chain"))?;
        let mut out = Vec::new();
        for r in rows {
            let g = |e| sq("reading the range chain")(e);
            let bytes: Vec<u8> = r.try_get("entry").map_err(g)?;
            let entry = ChainEntry::decode(&bytes).map_err(|e| {
                Error::definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!("range chain entry of job {job} {generation}: {e}"),
                )
            })?;
            let w: u32 = r.try_get("window_id").map_err(g)?;
            let a: u32 = r.try_get("attempt").map_err(g)?;
            let mh = digest_col(
                &r.try_get::<Vec<u8>, _>("manifest_hash").map_err(g)?,
                "range chain",
            )?;
            if (w, a, mh) != (entry.window.0, entry.attempt.0, entry.manifest_hash) {
                return Err(Error::definite(
                    DefiniteCode::EvidenceCorrupt,
                    format!("range chain row of job {job} {generation} window {w}: columns disagree with the stored entry"),
                ));
            }
            let root = digest_col(
                &r.try_get::<Vec<u8>, _>("root_after").map_err(g)?,
                "range chain",
            )?;
            out.push((entry, root));
        }
        Ok(out)
    }
}

async fn insert(
    conn: &mut MySqlConnection,
    lease: &Lease,
    seq: u64,
    prev: Digest,
    record: &JournalRecord,
) -> Result<Head> {
    let bytes = codec::encode(record);
    let digest = link(prev, &bytes);
    let r = sqlx::query(
        "INSERT INTO ledger_journal (job_id, generation, seq, record, prev_digest, digest, token) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(record.job.0)
    .bind(record.generation.0)
    .bind(seq)
    .bind(&bytes)
    .bind(&prev.0[..])
    .bind(&digest.0[..])
    .bind(lease.token)
    .execute(&mut *conn)
    .await;
    match r {
        Ok(_) => Ok(Head {
            seq,
            record: record.clone(),
            digest,
        }),
        Err(e) if sqlx_is_dup(&e) => match row_at(conn, record.job, record.generation, seq).await? {
            // Our own earlier write whose commit outcome was lost: already committed.
            Some(h) if &h.record == record && h.digest == digest => Ok(h),
            _ => Err(conflict(format!(
                "job {} {}: journal record {seq} already exists with other content; another writer moved the journal on (re-read the head)",
                record.job, record.generation
            ))),
        },
        Err(e) => Err(sq("writing the journal")(e)),
    }
}

async fn row_at(
    conn: &mut MySqlConnection,
    job: JobId,
    generation: Generation,
    seq: u64,
) -> Result<Option<Head>> {
    let r = sqlx::query("SELECT seq, record, prev_digest, digest FROM ledger_journal WHERE job_id = ? AND generation = ? AND seq = ?")
        .bind(job.0)
        .bind(generation.0)
        .bind(seq)
        .fetch_optional(&mut *conn)
        .await
        .map_err(sq("reading the journal"))?;
    r.map(|r| decode_row(job, generation, &r)).transpose()
}

async fn head_in(
    conn: &mut MySqlConnection,
    job: JobId,
    generation: Generation,
) -> Result<Option<Head>> {
    let r = sqlx::query("SELECT seq, record, prev_digest, digest FROM ledger_journal WHERE job_id = ? AND generation = ? ORDER BY seq DESC LIMIT 1")
        .bind(job.0)
        .bind(generation.0)
        .fetch_optional(&mut *conn)
        .await
        .map_err(sq("reading the journal"))?;
    r.map(|r| decode_row(job, generation, &r)).transpose()
}

fn decode_row(job: JobId, generation: Generation, r: &sqlx::mysql::MySqlRow) -> Result<Head> {
    let g = |e| sq("reading the journal")(e);
    let seq: u64 = r.try_get("seq").map_err(g)?;
    let bytes: Vec<u8> = r.try_get("record").map_err(g)?;
    let prev = digest_col(
        &r.try_get::<Vec<u8>, _>("prev_digest").map_err(g)?,
        "journal",
    )?;
    let digest = digest_col(&r.try_get::<Vec<u8>, _>("digest").map_err(g)?, "journal")?;
    let corrupt = |m: String| {
        Error::definite(
            DefiniteCode::EvidenceCorrupt,
            format!("journal record {seq} of job {job} {generation}: {m}"),
        )
    };
    if link(prev, &bytes) != digest {
        return Err(corrupt(
            "its bytes do not hash to the stored digest (tampered or corrupt)".into(),
        ));
    }
    let record = JournalRecord::decode(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if (record.job, record.generation) != (job, generation) {
        return Err(corrupt("it names another job or generation".into()));
    }
    Ok(Head {
        seq,
        record,
        digest,
    })
}
