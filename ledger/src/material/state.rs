//! Materials in the state store (DESIGN §18): `material_blobs(digest, chunk_no, bytes)`
//! holds the chunks of a [`super::chunks`] layout (2, a zstd frame, when it is smaller) and `material_blob_heads(digest, layout,
//! size, chunks)` says that a material is complete. Migration 0100.
//!
//! Why a partial write is never taken as present: the chunks are written first, a few per
//! transaction ([`CHUNKS_PER_TX`]), and the head row is inserted in the same transaction
//! as the last of them. Presence ([`StateStore::contains`], [`StateStore::get`]) is
//! decided by the head row alone, so a crash between chunks leaves headless chunks that
//! no reader sees (a later `put` of the same bytes overwrites them). `put` returns once
//! the head is committed: the bytes are durable before the caller registers them and
//! before a manifest names them (DESIGN §5 step 7). `remove` deletes the head first, so a
//! crash inside it also leaves only headless chunks.
//!
//! Every read is verified: the chunks must match the head exactly and hash to the digest
//! ([`super::chunks::assemble`]). The audit reads the state store's copy even when a
//! cached one exists ([`MaterialStore::get_shared`]): that copy is what another owner
//! would read after a takeover. The local data directory is a read-through cache: a
//! material put or read here is copied there (not fsynced: the state store holds it
//! durably), and a cached copy is verified on every read: one whose bytes differ (cut by
//! a crash, or damaged) is dropped with a warning and the state store's copy is read
//! instead. A material found only in the
//! cache (sealed by an older build or under `--materials local`) and still registered is
//! verified and copied into the state store on its first read, so an upgrade keeps its
//! evidence (a released one is not brought back). No transaction takes a gap lock or
//! a table lock: every statement names a full primary key (Galera-safe).
use super::chunks::{self, Head, CHUNKS_PER_TX};
use super::{Fut, LocalDirStore, MaterialStore};
use crate::util::sq;
use kernel::error::DefiniteCode;
use kernel::ids::Digest;
use kernel::Result;
use sqlx::{MySqlPool, Row as _};

/// The state-store material store, with an optional local cache.
#[derive(Clone, Debug)]
pub struct StateStore {
    pool: MySqlPool,
    cache: Option<LocalDirStore>,
}

impl StateStore {
    /// The store of an opened state store (migrated), caching in `cache` if given.
    pub fn new(pool: MySqlPool, cache: Option<LocalDirStore>) -> StateStore {
        StateStore { pool, cache }
    }

    /// The head row of `digest`, if the material is complete.
    pub async fn head(&self, digest: &Digest) -> Result<Option<Head>> {
        let what = format!("reading the head of material {digest}");
        let row =
            sqlx::query("SELECT layout, size, chunks FROM material_blob_heads WHERE digest = ?")
                .bind(&digest.0[..])
                .fetch_optional(&self.pool)
                .await
                .map_err(sq(&what))?;
        row.map(|r| {
            Ok(Head {
                layout: r.try_get("layout").map_err(sq(&what))?,
                size: r.try_get("size").map_err(sq(&what))?,
                chunks: r.try_get("chunks").map_err(sq(&what))?,
            })
        })
        .transpose()
    }

    /// Writes every chunk of `bytes`, then the head in the transaction of the last ones.
    async fn write(&self, digest: &Digest, bytes: &[u8]) -> Result<()> {
        let what = format!("storing material {digest} in the state store");
        let (head, stored) = chunks::encode(bytes);
        self.drop_stale_chunks(digest, head.chunks).await?;
        let all: Vec<&[u8]> = chunks::split(&stored).collect();
        let mut batches: Vec<&[&[u8]]> = all.chunks(CHUNKS_PER_TX).collect();
        if batches.is_empty() {
            batches.push(&[]);
        }
        let last = batches.len() - 1;
        for (b, batch) in batches.into_iter().enumerate() {
            let mut tx = self.pool.begin().await.map_err(sq(&what))?;
            for (i, chunk) in batch.iter().enumerate() {
                let no = (b * CHUNKS_PER_TX + i) as u32;
                sqlx::query(
                    "INSERT INTO material_blobs (digest, chunk_no, bytes) VALUES (?, ?, ?) \
                     ON DUPLICATE KEY UPDATE bytes = VALUES(bytes)",
                )
                .bind(&digest.0[..])
                .bind(no)
                .bind(*chunk)
                .execute(&mut *tx)
                .await
                .map_err(sq(&what))?;
            }
            if b == last {
                sqlx::query(
                    "INSERT IGNORE INTO material_blob_heads (digest, layout, size, chunks) \
                     VALUES (?, ?, ?, ?)",
                )
                .bind(&digest.0[..])
                .bind(head.layout)
                .bind(head.size)
                .bind(head.chunks)
                .execute(&mut *tx)
                .await
                .map_err(sq(&what))?;
            }
            tx.commit().await.map_err(sq(&what))?;
            if b != last {
                // Some chunks committed, the head not yet (the partial-write crash test).
                kernel::failpoint::hit("ledger.material.after_chunks");
            }
        }
        Ok(())
    }

    /// Deletes headless chunks numbered `from` and up, one by one by primary key: what a
    /// crash left of an earlier write in another layout or by another zstd version can
    /// have more chunks than this write, and a reader counts every chunk of the digest.
    async fn drop_stale_chunks(&self, digest: &Digest, from: u32) -> Result<()> {
        let what = format!("clearing stale chunks of material {digest}");
        let stale: Vec<u32> = sqlx::query_scalar(
            "SELECT chunk_no FROM material_blobs WHERE digest = ? AND chunk_no >= ?",
        )
        .bind(&digest.0[..])
        .bind(from)
        .fetch_all(&self.pool)
        .await
        .map_err(sq(&what))?;
        for no in stale {
            sqlx::query("DELETE FROM material_blobs WHERE digest = ? AND chunk_no = ?")
                .bind(&digest.0[..])
                .bind(no)
                .execute(&self.pool)
                .await
                .map_err(sq(&what))?;
        }
        Ok(())
    }

    /// The chunks of `digest` as stored, in chunk order.
    async fn read_chunks(&self, digest: &Digest) -> Result<Vec<(u32, Vec<u8>)>> {
        let what = format!("reading material {digest} from the state store");
        let rows = sqlx::query(
            "SELECT chunk_no, bytes FROM material_blobs WHERE digest = ? ORDER BY chunk_no",
        )
        .bind(&digest.0[..])
        .fetch_all(&self.pool)
        .await
        .map_err(sq(&what))?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    r.try_get::<u32, _>("chunk_no").map_err(sq(&what))?,
                    r.try_get::<Vec<u8>, _>("bytes").map_err(sq(&what))?,
                ))
            })
            .collect()
    }

    /// Copies verified bytes into the cache (not fsynced: the state store holds them
    /// durably); a failure only costs a later re-read.
    fn cache_put(&self, digest: &Digest, bytes: &[u8]) {
        if let Some(c) = &self.cache {
            if let Err(e) = c.put_cached(bytes) {
                tracing::warn!(material = %digest, error = %e, "cannot cache a material locally (it stays in the state store)");
            }
        }
    }

    async fn put_inner(&self, bytes: &[u8]) -> Result<Digest> {
        let digest = Digest::of(bytes);
        if self.head(&digest).await?.is_none() {
            self.write(&digest, bytes).await?;
        }
        self.cache_put(&digest, bytes);
        Ok(digest)
    }

    async fn get_inner(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(head) = self.head(digest).await? else {
            return self.adopt_local(digest).await;
        };
        if let Some(b) = self.cached(digest)? {
            return Ok(Some(b));
        }
        let bytes = chunks::assemble(digest, head, self.read_chunks(digest).await?)?;
        self.cache_put(digest, &bytes);
        Ok(Some(bytes))
    }

    /// The cached copy of a material the state store holds, verified. A cached file whose
    /// bytes do not hash to its name (cut by a crash: cache writes are not fsynced, or
    /// damaged) is dropped with a warning, and the caller reads the state store's copy.
    fn cached(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(c) = &self.cache else {
            return Ok(None);
        };
        match c.get(digest) {
            Err(e)
                if e.as_definite()
                    .is_some_and(|d| d.code == DefiniteCode::EvidenceCorrupt) =>
            {
                tracing::warn!(material = %digest, error = %e, "dropping a damaged cached copy: reading the state store's");
                c.remove(digest)?;
                Ok(None)
            }
            other => other,
        }
    }

    /// The state store's copy, verified, whatever the cache holds (the audit's read). A
    /// material present only in the cache is adopted as by `get` (the upgrade path).
    async fn get_shared_inner(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(head) = self.head(digest).await? else {
            return self.adopt_local(digest).await;
        };
        let read = self.read_chunks(digest).await?;
        Ok(Some(assemble_off_task(*digest, head, read).await?))
    }

    /// A material found only in the local data directory (sealed by an older build, or
    /// under `--materials local`): verified, copied into the state store (chunks, then
    /// head) and returned, so an upgraded deployment keeps its evidence and another host
    /// can read it from then on.
    ///
    /// Only while the registry still names the digest: a material retention released is
    /// absent, whatever a host still caches (copying it back would leave bytes in the
    /// state store that nothing accounts or ever releases); the stale cached copy is
    /// dropped.
    async fn adopt_local(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(c) = &self.cache else {
            return Ok(None);
        };
        let Some(bytes) = c.get(digest)? else {
            return Ok(None);
        };
        if !self.registered(digest).await? {
            c.remove(digest)?;
            return Ok(None);
        }
        tracing::info!(material = %digest, "material found only in the local data directory: copying it into the state store");
        self.write(digest, &bytes).await?;
        Ok(Some(bytes))
    }

    /// True when some table-generation's registry rows name `digest` (`ledger_material`,
    /// the registry of DESIGN §2, in the same state store).
    async fn registered(&self, digest: &Digest) -> Result<bool> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM ledger_material WHERE digest = ?")
            .bind(&digest.0[..])
            .fetch_one(&self.pool)
            .await
            .map_err(sq(&format!(
                "reading the registry rows of material {digest}"
            )))?;
        Ok(n > 0)
    }

    async fn remove_inner(&self, digest: &Digest) -> Result<()> {
        let what = format!("removing material {digest} from the state store");
        sqlx::query("DELETE FROM material_blob_heads WHERE digest = ?")
            .bind(&digest.0[..])
            .execute(&self.pool)
            .await
            .map_err(sq(&what))?;
        sqlx::query("DELETE FROM material_blobs WHERE digest = ?")
            .bind(&digest.0[..])
            .execute(&self.pool)
            .await
            .map_err(sq(&what))?;
        if let Some(c) = &self.cache {
            c.remove(digest)?;
        }
        Ok(())
    }
}

impl MaterialStore for StateStore {
    fn put<'a>(&'a self, bytes: &'a [u8]) -> Fut<'a, Digest> {
        Box::pin(self.put_inner(bytes))
    }
    fn get<'a>(&'a self, digest: &'a Digest) -> Fut<'a, Option<Vec<u8>>> {
        Box::pin(self.get_inner(digest))
    }
    fn get_shared<'a>(&'a self, digest: &'a Digest) -> Fut<'a, Option<Vec<u8>>> {
        Box::pin(self.get_shared_inner(digest))
    }
    fn contains<'a>(&'a self, digest: &'a Digest) -> Fut<'a, bool> {
        Box::pin(async move {
            let local = || {
                self.cache
                    .as_ref()
                    .map_or(Ok(false), |c| c.contains(digest))
            };
            Ok(self.head(digest).await?.is_some() || local()?)
        })
    }
    fn remove<'a>(&'a self, digest: &'a Digest) -> Fut<'a, ()> {
        Box::pin(self.remove_inner(digest))
    }
}

/// [`chunks::assemble`] (decompressing and hashing a page: milliseconds of CPU) on the
/// blocking pool, so the task that reads a material keeps polling its other futures
/// meanwhile: the activation reads the audit's materials while its field check waits on
/// both servers, in one task (`tokio::join!`); assembled inline, every page stalled the
/// check's next statements (measured: the walk of 1M rows 3.4 s, the servers idle for a
/// second of it).
async fn assemble_off_task(
    digest: Digest,
    head: Head,
    read: Vec<(u32, Vec<u8>)>,
) -> Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || chunks::assemble(&digest, head, read))
        .await
        .map_err(|e| {
            kernel::Error::transient(format!(
                "assembling material {digest}: the task failed: {e}"
            ))
        })?
}
